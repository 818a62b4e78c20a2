//! Klogger scenarios (tests/kernels/klogger-writer): the log `klogger`, whose buffers two
//! threads write as processors 0 and 1, time stamps from the TSC, and an oracle line per event
//! logged, lost or overwritten.

use std::io::Write as _;

use klogger_writer::oracle::{self, Printer};
use klogger_writer::{script, Buffer, Log, Sink, MAX_CPUS, OVERWRITE};

use crate::{platform, Crash};

/// The log a reader finds by its symbol.
#[export_name = "klogger"]
static KLOGGER: Log = Log::new();

static BUFFERS: [Buffer<8192>; MAX_CPUS] = [const { Buffer::new() }; MAX_CPUS];

fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no side effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// TSC ticks per second, measured against CLOCK_MONOTONIC over 50 ms.
fn tsc_hz() -> u64 {
    let (ns, ticks) = (platform::monotonic_ns(), rdtsc());
    std::thread::sleep(std::time::Duration::from_millis(50));
    let (ns, ticks) = (platform::monotonic_ns() - ns, rdtsc() - ticks);
    (u128::from(ticks) * 1_000_000_000 / u128::from(ns.max(1))) as u64
}

/// One oracle line, written to stdout whole when dropped.
#[derive(Default)]
struct Line(String);

impl std::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.push_str(s);
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        // A broken stdout leaves no oracle: nothing left to do but die loudly.
        if std::io::stdout()
            .lock()
            .write_all(self.0.as_bytes())
            .is_err()
        {
            std::process::abort();
        }
    }
}

fn sink() -> impl Sink {
    Printer(Line::default)
}

/// Enables the log on `cpus` processors, each buffer `size` bytes with `flags`.
fn enable(cpus: usize, size: u64, flags: u32) {
    // KLog's configuration lines come first, as in every scenario (KLog stays unused).
    crate::oracle::announce_rings();
    let clock_hz = tsc_hz();
    let regions: Vec<(u64, u64, u32)> = BUFFERS[..cpus]
        .iter()
        .map(|b| (b.region().0, size, flags))
        .collect();
    KLOGGER.enable(clock_hz, &regions);
    let _ = oracle::config(&mut Line::default(), clock_hz, cpus);
}

/// Two threads, processors 0 and 1, log a mix of events into their own buffers.
fn log_everywhere() {
    enable(2, 8192, OVERWRITE);
    std::thread::scope(|s| {
        for cpu in 0..2 {
            s.spawn(move || script::mixed(&KLOGGER, cpu, 40 - 10 * cpu, rdtsc, &mut sink()));
        }
    });
}

pub fn plain(crash: Crash) -> ! {
    log_everywhere();
    crash.now("done")
}

/// A 1 KiB buffer that overwrites: 120 events wrap it several times.
pub fn wrap(crash: Crash) -> ! {
    enable(1, 1024, OVERWRITE);
    script::wrap(&KLOGGER, 0, 120, rdtsc, &mut sink());
    crash.now("done")
}

/// A 1 KiB buffer that drops when full: serial gaps, then every event lost.
pub fn lost(crash: Crash) -> ! {
    enable(1, 1024, 0);
    script::lose(&KLOGGER, 0, 12, rdtsc, &mut sink());
    crash.now("done")
}

/// The plain scenario, then processor 1's `head` scribbled over before the program dies.
pub fn damaged(crash: Crash) -> ! {
    log_everywhere();
    let value = 0xdead_beef_dead_bee8;
    KLOGGER.cpus[1]
        .head
        .store(value, std::sync::atomic::Ordering::Relaxed);
    let _ = oracle::damage(&mut Line::default(), 1, "head", value);
    crash.now("processor 1's control structure scribbled")
}
