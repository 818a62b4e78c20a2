//! The kernel's klog-runtime configuration and platform hooks.

use crate::chore;
use crate::serial;
use core::sync::atomic::{AtomicU64, Ordering};
use klog_runtime::klog_config;

/// The hooks klog-runtime calls on every event.
pub struct BarePlatform;

/// The last value `clock()` returned: the oracle prints it as the record's clock, so the clock
/// in the oracle comes from the kernel, not from reading the ring back.
pub static LAST_CLOCK: AtomicU64 = AtomicU64::new(0);

pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no side effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

impl klog_runtime::Platform for BarePlatform {
    fn clock() -> u64 {
        let now = rdtsc();
        LAST_CLOCK.store(now, Ordering::Relaxed);
        now
    }

    fn chore_id() -> u64 {
        chore::current_id()
    }

    fn proc_dom() -> u64 {
        let ccb = chore::current();
        klog_runtime::proc_dom(ccb.processor, ccb.domain)
    }

    fn console(line: &str) {
        serial::write_str(line);
        serial::write_str("\n");
    }
}

/// Records per ring, by subsystem id. The oracle computes record addresses from these (the
/// design's layout: rings in id order inside KLogBuffer), independently of klog-runtime.
#[cfg(not(feature = "big-rings"))]
pub mod rings {
    pub const NONE: u64 = 64;
    pub const PARCHORE: u64 = 256;
    pub const FS: u64 = 128;
    pub const SCHED: u64 = 1024;
    pub const VM: u64 = 64;
}

/// 4 Mi + 128 records in all: 256 MiB of KLogBuffer.
#[cfg(feature = "big-rings")]
pub mod rings {
    pub const NONE: u64 = 64;
    pub const PARCHORE: u64 = 1 << 20;
    pub const FS: u64 = 1 << 20;
    pub const SCHED: u64 = 1 << 21;
    pub const VM: u64 = 64;
}

klog_config! {
    platform = BarePlatform;
    static_level = klog_runtime::KLOG_PROLOG;
    subsystems {
        DBG_NONE = rings::NONE,
        DBG_PARCHORE = rings::PARCHORE,
        DBG_FS = rings::FS,
        DBG_SCHED = rings::SCHED,
        DBG_VM = rings::VM,
    }
}

/// Ring sizes indexed by subsystem id, and names, for the oracle.
pub const RING_RECS: [u64; DBG_MAX] = [
    rings::NONE,
    rings::PARCHORE,
    rings::FS,
    rings::SCHED,
    rings::VM,
];
pub const RING_NAMES: [&str; DBG_MAX] = ["NONE", "PARCHORE", "FS", "SCHED", "VM"];

/// TSC ticks per second, measured against PIT channel 2 over 10 ms (1193182 Hz input clock).
/// Under TCG the TSC follows the host's, and the PIT follows host time, so this is honest.
pub fn measure_tsc_hz() -> u64 {
    const PIT_HZ: u64 = 1_193_182;
    const COUNT: u64 = PIT_HZ / 100;
    // SAFETY: PIT and port 0x61 programming; nothing else in the kernel uses them.
    unsafe {
        let gate = serial::inb(0x61);
        serial::outb(0x61, (gate & !0x02) | 0x01); // speaker off, channel 2 gate on
        serial::outb(0x43, 0b1011_0000); // channel 2, lo/hi byte, mode 0 (count down once)
        serial::outb(0x42, COUNT as u8);
        serial::outb(0x42, (COUNT >> 8) as u8);
        let start = rdtsc();
        while serial::inb(0x61) & 0x20 == 0 {}
        let ticks = rdtsc() - start;
        serial::outb(0x61, gate);
        ticks * PIT_HZ / COUNT
    }
}
