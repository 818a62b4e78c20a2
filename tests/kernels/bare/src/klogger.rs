//! Klogger scenarios (tests/kernels/klogger-writer): the log `klogger` with a buffer per
//! processor, time stamps from the TSC, and an oracle line per event logged, lost or
//! overwritten. The plain and damaged scenarios log from every processor QEMU starts (the
//! per-processor build runs with two).

use core::sync::atomic::{AtomicU32, Ordering};

use klogger_writer::oracle::{self, Printer};
use klogger_writer::{script, Buffer, Log, Sink, MAX_CPUS, OVERWRITE};

use crate::platform::{self, rdtsc};
use crate::serial::Console;
use crate::smp;

/// The log a reader finds by its symbol.
#[export_name = "klogger"]
static KLOGGER: Log = Log::new();

/// One buffer per processor the log has room for.
static BUFFERS: [Buffer<8192>; MAX_CPUS] = [const { Buffer::new() }; MAX_CPUS];

/// Application processors that finished logging.
static LOGGED: AtomicU32 = AtomicU32::new(0);

fn sink() -> impl Sink {
    Printer(Console::lock)
}

/// Enables the log on `cpus` processors, each buffer `size` bytes with `flags`.
fn enable(clock_hz: u64, cpus: usize, size: u64, flags: u32) {
    let mut regions = [(0, 0, 0); MAX_CPUS];
    for (region, buffer) in regions.iter_mut().zip(&BUFFERS).take(cpus) {
        *region = (buffer.region().0, size, flags);
    }
    KLOGGER.enable(clock_hz, &regions[..cpus]);
    let _ = oracle::config(&mut Console::lock(), clock_hz, cpus);
}

/// Every processor logs a mix of events into its own buffer; the boot processor waits (at most
/// 20 s) for the others.
fn log_everywhere(clock_hz: u64) {
    enable(clock_hz, 2, 8192, OVERWRITE);
    let started = smp::start_aps(log_on_this_processor);
    script::mixed(&KLOGGER, 0, 40, rdtsc, &mut sink());
    platform::spin_until(20_000_000, || LOGGED.load(Ordering::Acquire) == started);
}

fn log_on_this_processor(cpu: u32) -> ! {
    if (cpu as usize) < MAX_CPUS {
        script::mixed(&KLOGGER, cpu, 30, rdtsc, &mut sink());
    }
    LOGGED.fetch_add(1, Ordering::Release);
    smp::halt()
}

pub fn plain(clock_hz: u64) -> ! {
    log_everywhere(clock_hz);
    panic!("scenario klogger-plain: done");
}

/// A 1 KiB buffer that overwrites: 120 events wrap it several times.
pub fn wrap(clock_hz: u64) -> ! {
    enable(clock_hz, 1, 1024, OVERWRITE);
    script::wrap(&KLOGGER, 0, 120, rdtsc, &mut sink());
    panic!("scenario klogger-wrap: done");
}

/// A 1 KiB buffer that drops when full: serial gaps, then every event lost.
pub fn lost(clock_hz: u64) -> ! {
    enable(clock_hz, 1, 1024, 0);
    script::lose(&KLOGGER, 0, 12, rdtsc, &mut sink());
    panic!("scenario klogger-lost: done");
}

/// The plain scenario, then processor 1's `head` scribbled over before the kernel dies.
pub fn damaged(clock_hz: u64) -> ! {
    log_everywhere(clock_hz);
    let value = 0xdead_beef_dead_bee8;
    KLOGGER.cpus[1].head.store(value, Ordering::Relaxed);
    let _ = oracle::damage(&mut Console::lock(), 1, "head", value);
    panic!("scenario klogger-damaged: processor 1's control structure scribbled");
}
