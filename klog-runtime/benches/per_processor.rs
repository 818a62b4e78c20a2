//! Cost of logging one event on per-processor rings (`processors = 2`): one thread, and two
//! threads on different processors logging to the same subsystem — the case where a shared ring's
//! `next_write` cache line bounces between them (`--bench events`' "2 threads, one subsystem").
//!
//! `cargo bench -p klog-runtime --bench per_processor`

mod common;

use std::hint::black_box;

use common::{two_threads, BenchPlatform};
use criterion::{criterion_group, criterion_main, Criterion};
use klog_runtime::{Subsys, KLOG_VERBOSE};

klog_runtime::klog_config! {
    platform = BenchPlatform;
    static_level = KLOG_VERBOSE;
    processors = 2;
    subsystems { DBG_NONE = 64, DBG_SCHED = 4096, DBG_VM = 4096 }
}

fn log(sub: &Subsys<KlogConfig>, i: u64) -> Option<u64> {
    klog_runtime::KLOGV2!(sub, "postProcess: task:%016lx curPD:%d", black_box(i), 3)
}

fn events(c: &mut Criterion) {
    klog_init();
    let mut g = c.benchmark_group("klog event, per-processor rings");
    g.bench_function("1 thread", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            log(&DBG_SCHED, i)
        })
    });
    g.bench_function("2 threads, one subsystem", |b| {
        b.iter_custom(|n| two_threads(n, [&DBG_SCHED, &DBG_SCHED], log))
    });
    g.finish();
}

criterion_group!(benches, events);
criterion_main!(benches);
