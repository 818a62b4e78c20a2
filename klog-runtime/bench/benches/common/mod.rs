//! What both event benchmarks share: the platform a kernel would give (rdtsc, a per-thread
//! chore whose number is its processor) and the two-thread measurement.

use std::cell::Cell;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::BenchmarkGroup;
use klog_runtime::{Config, Subsys};

thread_local! { pub static CHORE: Cell<u64> = const { Cell::new(1) }; }

pub struct BenchPlatform;
impl klog_runtime::Platform for BenchPlatform {
    fn clock() -> u64 {
        // SAFETY: rdtsc has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    fn chore_id() -> u64 {
        CHORE.with(Cell::get)
    }
    fn proc_dom() -> u64 {
        klog_runtime::proc_dom(CHORE.with(Cell::get) as u32, 0)
    }
}

/// Per-event time of each of two threads logging at once through `log` (the slower thread's
/// time); thread t is chore and processor t + 1.
pub fn two_threads<C: Config>(
    iters: u64,
    subs: [&Subsys<C>; 2],
    log: fn(&Subsys<C>, u64) -> Option<u64>,
) -> Duration {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let runs: Vec<_> = subs
            .iter()
            .enumerate()
            .map(|(t, sub)| {
                let barrier = &barrier;
                s.spawn(move || {
                    CHORE.with(|c| c.set(t as u64 + 1));
                    barrier.wait();
                    let start = Instant::now();
                    for i in 0..iters {
                        black_box(log(sub, i));
                    }
                    start.elapsed()
                })
            })
            .collect();
        runs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

/// The benchmarks' event: a verbose one with two data words, as the design's example.
pub fn log<C: Config>(sub: &Subsys<C>, i: u64) -> Option<u64> {
    klog_runtime::KLOGV2!(sub, "postProcess: task:%016lx curPD:%d", black_box(i), 3)
}

/// "1 thread" and "2 threads, one subsystem" on `sub`.
pub fn one_subsystem<C: Config>(g: &mut BenchmarkGroup<'_, WallTime>, sub: &Subsys<C>) {
    g.bench_function("1 thread", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            log(sub, i)
        })
    });
    g.bench_function("2 threads, one subsystem", |b| {
        b.iter_custom(|n| two_threads(n, [sub, sub], log))
    });
}
