//! Cost of logging one event, as a kernel pays it: rdtsc for the clock, a per-thread chore id.
//!
//! `cargo bench -p klog-runtime --bench events` measures the default build (events above the
//! static level compiled out); `--features klog-debug` adds the run-time-disabled case.

use std::cell::Cell;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use klog_runtime::{Subsys, KLOG_VERBOSE};

thread_local! { static CHORE: Cell<u64> = const { Cell::new(1) }; }

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

klog_runtime::klog_config! {
    platform = BenchPlatform;
    static_level = KLOG_VERBOSE;
    subsystems { DBG_NONE = 64, DBG_SCHED = 4096, DBG_VM = 4096 }
}

fn log(sub: &Subsys<KlogConfig>, i: u64) -> Option<u64> {
    klog_runtime::KLOGV2!(sub, "postProcess: task:%016lx curPD:%d", black_box(i), 3)
}

/// Per-event time of each of two threads logging at once (the slower thread's time).
fn two_threads(iters: u64, subs: [&Subsys<KlogConfig>; 2]) -> Duration {
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

fn events(c: &mut Criterion) {
    klog_init();
    let mut g = c.benchmark_group("klog event");
    g.bench_function("empty loop (baseline)", |b| b.iter(|| black_box(7u64)));
    g.bench_function("clock only (rdtsc, reference)", |b| {
        b.iter(<BenchPlatform as klog_runtime::Platform>::clock)
    });
    g.bench_function("1 thread", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            log(&DBG_SCHED, i)
        })
    });
    g.bench_function("2 threads, one subsystem", |b| {
        b.iter_custom(|n| two_threads(n, [&DBG_SCHED, &DBG_SCHED]))
    });
    g.bench_function("2 threads, two subsystems", |b| {
        b.iter_custom(|n| two_threads(n, [&DBG_SCHED, &DBG_VM]))
    });
    if klog_runtime::RUNTIME_CHECKS {
        DebugFlags[DBG_VM.id as usize].clear(klog_runtime::intensity::D_KLOG);
        g.bench_function("disabled at run time (d_klog off)", |b| {
            b.iter(|| log(&DBG_VM, 1))
        });
    } else {
        g.bench_function("compiled out (above static level)", |b| {
            b.iter(|| klog_runtime::KLOGP2!(DBG_SCHED, "prolog %d %d", black_box(1u64), 2))
        });
    }
    g.finish();
}

criterion_group!(benches, events);
criterion_main!(benches);
