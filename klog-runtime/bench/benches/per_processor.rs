//! Cost of logging one event on per-processor rings (`processors = 2`): one thread, and two
//! threads on different processors logging to the same subsystem — the case where a shared ring's
//! `next_write` cache line bounces between them (`--bench events`' "2 threads, one subsystem").
//!
//! `cargo bench -p klog-runtime-bench --bench per_processor`

mod common;

use common::{one_subsystem, BenchPlatform};
use criterion::{criterion_group, criterion_main, Criterion};
use klog_runtime::KLOG_VERBOSE;

klog_runtime::klog_config! {
    platform = BenchPlatform;
    static_level = KLOG_VERBOSE;
    processors = 2;
    subsystems { DBG_NONE = 64, DBG_SCHED = 4096, DBG_VM = 4096 }
}

fn events(c: &mut Criterion) {
    klog_init();
    let mut g = c.benchmark_group("klog event, per-processor rings");
    one_subsystem(&mut g, &DBG_SCHED);
    g.finish();
}

criterion_group!(benches, events);
criterion_main!(benches);
