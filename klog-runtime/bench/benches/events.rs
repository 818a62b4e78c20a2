//! Cost of logging one event, as a kernel pays it: rdtsc for the clock, a per-thread chore id.
//!
//! `cargo bench -p klog-runtime-bench --bench events` measures the default build (events above
//! the static level compiled out); `--features klog-debug` adds the run-time-disabled case.

mod common;

use std::hint::black_box;

use common::{log, one_subsystem, two_threads, BenchPlatform};
use criterion::{criterion_group, criterion_main, Criterion};
use klog_runtime::KLOG_VERBOSE;

klog_runtime::klog_config! {
    platform = BenchPlatform;
    static_level = KLOG_VERBOSE;
    subsystems { DBG_NONE = 64, DBG_SCHED = 4096, DBG_VM = 4096 }
}

fn events(c: &mut Criterion) {
    klog_init();
    let mut g = c.benchmark_group("klog event");
    g.bench_function("empty loop (baseline)", |b| b.iter(|| black_box(7u64)));
    g.bench_function("clock only (rdtsc, reference)", |b| {
        b.iter(<BenchPlatform as klog_runtime::Platform>::clock)
    });
    one_subsystem(&mut g, &DBG_SCHED);
    g.bench_function("2 threads, two subsystems", |b| {
        b.iter_custom(|n| two_threads(n, [&DBG_SCHED, &DBG_VM], log))
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
