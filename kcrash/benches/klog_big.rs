//! `klog` on the big-ring dump (over 4 million records): records per second for `klog 0 full`
//! and `klog 0 --json` written to a sink, against the same merged walk of the rings without
//! rendering (the floor set by reading the dump); and `timeline` over every log the dump holds
//! (the KLog's rings and, in the hosted big dump, the other decoders' logs), per event, against
//! `klog 0 full`'s rate.
//!
//! The dump is generated, never committed:
//!
//! ```text
//! cargo run --release -p kcrash-harness -- corpus --kernel bare-big --out /tmp/big
//! KCRASH_BIG_DUMP=/tmp/big/bare-big/big/vmcore-paging.elf KCRASH_BIG_IMAGE=/tmp/big/bare-big/vmlinux \
//!     cargo bench -p kcrash --bench klog_big
//! ```

use std::hint::black_box;
use std::io;
use std::time::Duration;

use clap::Parser;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kcrash::klog::ring::Order;
use kcrash::klog::Selection;
use kcrash::paint::Paint;
use kcrash::plugins::DECODERS;
use kcrash::session::Session;
use kcrash::timeline;
use kcrash_plugin::Log;

fn klog_big(c: &mut Criterion) {
    let (Ok(dump), Ok(image)) = (
        std::env::var("KCRASH_BIG_DUMP"),
        std::env::var("KCRASH_BIG_IMAGE"),
    ) else {
        eprintln!("klog_big: set KCRASH_BIG_DUMP and KCRASH_BIG_IMAGE (see the top of benches/klog_big.rs); nothing measured");
        return;
    };
    let dump = dumpfmt::Dump::open(&dump).expect("open the big dump");
    let session = Session::open(&dump, Some(image.into())).expect("open the session");
    let klog = session.klog().expect("KLog found");
    let records = klog
        .records(&session, Selection::All, Order::NewestFirst)
        .count() as u64;
    let mut g = c.benchmark_group(format!("klog, {records} records"));
    g.throughput(Throughput::Elements(records));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.bench_function("walk and merge only (baseline)", |b| {
        b.iter(|| {
            black_box(
                klog.records(&session, Selection::All, Order::NewestFirst)
                    .count(),
            )
        })
    });
    for (name, argv) in [
        ("klog 0 full", ["0", "full"].as_slice()),
        ("klog 0 --json", ["0", "--json"].as_slice()),
    ] {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        g.bench_function(name, |b| {
            b.iter(|| {
                kcrash::commands::klog::run_on(
                    &argv,
                    &session,
                    klog,
                    session.schema_reader(false),
                    &mut io::sink(),
                    &mut io::sink(),
                )
                .unwrap()
            })
        });
    }
    g.finish();
    // Every log the dump holds, through the decoders' interface.
    let logs: Vec<&dyn Log> = (0..DECODERS.len())
        .filter_map(|i| session.log(i).ok())
        .collect();
    let select = Select::parse_from(["timeline"]).select;
    let run = || {
        timeline::print(
            &logs,
            &session,
            &select,
            None,
            &mut io::sink(),
            &mut io::sink(),
            Paint::default(),
        )
        .expect("timeline")
    };
    let events = run();
    let kinds: Vec<&str> = logs.iter().map(|l| l.kind()).collect();
    let mut g = c.benchmark_group(format!("timeline, {events} events of {}", kinds.join(", ")));
    g.throughput(Throughput::Elements(events));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.bench_function("timeline", |b| b.iter(run));
    g.finish();
}

/// `timeline`'s options, parsed as its command line would be.
#[derive(clap::Parser)]
struct Select {
    #[command(flatten)]
    select: timeline::Select,
}

criterion_group!(benches, klog_big);
criterion_main!(benches);
