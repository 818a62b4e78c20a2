//! The kernel's klog-runtime configuration and platform hooks.

use crate::chore;
use crate::serial;
use crate::smp;
use core::sync::atomic::{AtomicU64, Ordering};
use klog_runtime::klog_config;

/// The hooks klog-runtime calls on every event.
pub struct BarePlatform;

/// The last value `clock()` returned on each processor: the oracle prints it as the record's
/// clock, so the clock in the oracle comes from the kernel, not from reading the ring back; one
/// per processor, so that another processor's event cannot overwrite it before the oracle line.
static LAST_CLOCK: [AtomicU64; smp::MAX_CPUS] = [const { AtomicU64::new(0) }; smp::MAX_CPUS];

/// The clock this processor's last event stored.
pub fn last_clock() -> u64 {
    LAST_CLOCK[smp::this_cpu() as usize % smp::MAX_CPUS].load(Ordering::Relaxed)
}

pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no side effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Where each application processor's records say they ran: one word each, its address the
/// processor's chore id (the boot processor runs the chores).
static AP_CHORES: [u64; smp::MAX_CPUS] = [0; smp::MAX_CPUS];

/// The chore running on this processor: the current chore on the boot processor, the
/// processor's own word on the others.
pub fn chore_id() -> u64 {
    match smp::this_cpu() {
        0 => chore::current_id(),
        cpu => (&raw const AP_CHORES[cpu as usize % smp::MAX_CPUS]) as u64,
    }
}

/// `proc_dom` of this processor's events. The shared-ring build keeps the chores' own made-up
/// processors (0–3, all on the boot processor); the per-processor build names the processor
/// that runs the code, since its ring set follows it (application processors: domain 0).
pub fn proc_dom() -> u64 {
    if !cfg!(feature = "per-processor") {
        let ccb = chore::current();
        return klog_runtime::proc_dom(ccb.processor, ccb.domain);
    }
    match smp::this_cpu() {
        0 => klog_runtime::proc_dom(0, chore::current().domain),
        cpu => klog_runtime::proc_dom(cpu, 0),
    }
}

impl klog_runtime::Platform for BarePlatform {
    fn clock() -> u64 {
        let now = rdtsc();
        LAST_CLOCK[smp::this_cpu() as usize % smp::MAX_CPUS].store(now, Ordering::Relaxed);
        now
    }

    fn chore_id() -> u64 {
        chore_id()
    }

    fn proc_dom() -> u64 {
        proc_dom()
    }

    fn console(line: &str) {
        kprintln!("{line}");
    }

    fn build_id() -> &'static [u8] {
        extern "C" {
            static __build_id_note: [u8; 0];
            static __build_id_note_end: [u8; 0];
        }
        // SAFETY: the linker script puts the image's one build-id note between the two symbols.
        let note = unsafe {
            let start = (&raw const __build_id_note).cast::<u8>();
            let end = (&raw const __build_id_note_end).cast::<u8>();
            core::slice::from_raw_parts(start, end as usize - start as usize)
        };
        // namesz, descsz, type, "GNU\0", then the id.
        match note.get(4..8) {
            Some(d) => {
                let len = u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize;
                note.get(16..16 + len).unwrap_or(&[])
            }
            None => &[],
        }
    }

    fn page_table_root() -> u64 {
        let cr3: u64;
        // SAFETY: reading CR3 has no side effects; the kernel runs in ring 0.
        unsafe { core::arch::asm!("mov {}, cr3", out(reg) cr3, options(nomem, nostack)) };
        cr3 & 0x000f_ffff_ffff_f000
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

/// Ring sets: two in the per-processor build (QEMU runs it with two processors), else one.
const SETS: usize = if cfg!(feature = "per-processor") {
    2
} else {
    1
};

klog_config! {
    platform = BarePlatform;
    static_level = klog_runtime::KLOG_PROLOG;
    processors = SETS;
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

static TSC_HZ: AtomicU64 = AtomicU64::new(0);

/// TSC ticks per second, measured on the first call (see `measure_tsc_hz`).
pub fn tsc_hz() -> u64 {
    match TSC_HZ.load(Ordering::Relaxed) {
        0 => {
            let hz = measure_tsc_hz();
            TSC_HZ.store(hz, Ordering::Relaxed);
            hz
        }
        hz => hz,
    }
}

/// Polls `done` until it holds or `micros` microseconds have passed on the TSC; whether it held.
pub fn spin_until(micros: u64, mut done: impl FnMut() -> bool) -> bool {
    let ticks = tsc_hz().saturating_mul(micros) / 1_000_000;
    let start = rdtsc();
    while !done() {
        if rdtsc().wrapping_sub(start) >= ticks {
            return done();
        }
        core::hint::spin_loop();
    }
    true
}

/// TSC ticks per second: the median of five measurements of about 20 ms each against PIT
/// channel 2 (1193182 Hz). Each measurement brackets its interval with (PIT count, rdtsc)
/// pairs read back to back, so the host descheduling QEMU (both clocks follow host time under
/// TCG) can skew a sample only if it strikes between the two reads of a pair; the median
/// drops such samples.
fn measure_tsc_hz() -> u64 {
    let mut samples = [0u64; 5];
    for sample in &mut samples {
        *sample = measure_once();
    }
    samples.sort_unstable();
    samples[samples.len() / 2]
}

const PIT_HZ: u64 = 1_193_182;

/// Latches and reads PIT channel 2's count, then reads the TSC.
fn pit_and_tsc() -> (u64, u64) {
    // SAFETY: PIT channel 2 latch and read.
    unsafe {
        serial::outb(0x43, 0b1000_0000); // latch channel 2
        let low = serial::inb(0x42);
        let high = serial::inb(0x42);
        (u64::from(u16::from_le_bytes([low, high])), rdtsc())
    }
}

fn measure_once() -> u64 {
    const SPAN: u64 = PIT_HZ / 50;
    // SAFETY: PIT channel 2 and port 0x61 programming; nothing else in the kernel uses them.
    unsafe {
        let gate = serial::inb(0x61);
        serial::outb(0x61, (gate & !0x02) | 0x01); // speaker off, channel 2 gate on
        serial::outb(0x43, 0b1011_0000); // channel 2, lo/hi byte, mode 0: count down from 0xffff
        serial::outb(0x42, 0xff);
        serial::outb(0x42, 0xff);
        let (count0, tsc0) = pit_and_tsc();
        let (count1, tsc1) = loop {
            let (count, tsc) = pit_and_tsc();
            if count0.saturating_sub(count) >= SPAN {
                break (count, tsc);
            }
        };
        serial::outb(0x61, gate);
        (tsc1 - tsc0) * PIT_HZ / (count0 - count1)
    }
}
