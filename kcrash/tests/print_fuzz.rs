//! Random expressions over a real core never panic kcrash: every one prints a value or fails
//! with an error, whatever memory, types and pointers it reaches.

use std::io::Read;

use kcrash::commands::{execute, Settings};
use kcrash::paint::Paint;
use kcrash::session::Session;
use proptest::prelude::*;

fn leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("KLogs".to_owned()),
        Just("KLogBuffer".to_owned()),
        Just("DebugFlags".to_owned()),
        Just("klogLevel".to_owned()),
        Just("workers".to_owned()),
        Just("boot_task".to_owned()),
        any::<u64>().prop_map(|n| format!("{n:#x}")),
        (0u64..300).prop_map(|n| n.to_string()),
    ]
}

fn expr() -> impl Strategy<Value = String> {
    leaf().prop_recursive(5, 40, 3, |inner| {
        let ty = prop_oneof![
            Just("KLog *"),
            Just("struct task *"),
            Just("char *"),
            Just("Dbg_Intensity"),
            Just("unsigned long"),
            Just("void *"),
            Just("struct worker"),
            Just("enum __rlimit_resource"),
        ];
        let member = prop_oneof![
            Just("name"),
            Just("buffer"),
            Just("task"),
            Just("d_klog"),
            Just("next_write"),
            Just("body"),
        ];
        let op = prop_oneof![
            Just("+"),
            Just("-"),
            Just("*"),
            Just("/"),
            Just("%"),
            Just(">>"),
            Just("<<"),
            Just("&"),
            Just("=="),
            Just("@"),
        ];
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, i)| format!("{a}[{i}]")),
            (inner.clone(), member.clone()).prop_map(|(a, m)| format!("{a}.{m}")),
            (inner.clone(), member).prop_map(|(a, m)| format!("{a}->{m}")),
            inner.clone().prop_map(|a| format!("*{a}")),
            inner.clone().prop_map(|a| format!("&{a}")),
            inner.clone().prop_map(|a| format!("-{a}")),
            (ty, inner.clone()).prop_map(|(t, a)| format!("({t}){a}")),
            (inner.clone(), op, inner.clone()).prop_map(|(a, o, b)| format!("({a} {o} {b})")),
            inner.prop_map(|a| format!("sizeof {a}")),
        ]
    })
}

#[test]
fn random_expressions_never_panic() {
    let dir = kcrash_harness::corpus::file("hosted-c");
    let mut data = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(dir.join("scribbled/core.gz")).expect("core"))
        .read_to_end(&mut data)
        .expect("gunzip");
    let core = tempfile::NamedTempFile::new()
        .expect("temp")
        .into_temp_path();
    std::fs::write(&core, &data).expect("write");
    let dump = dumpfmt::Dump::open(&core).expect("open dump");
    let session = Session::open(&dump, Some(dir.join("hosted-c"))).expect("session");
    let formats = ["p", "p/x", "p --json", "p --pretty", "whatis", "ptype"];
    let printed = std::cell::Cell::new(0u32);
    proptest!(ProptestConfig::with_cases(400), |(e in expr(), f in 0..formats.len())| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let line = format!("{} {e}", formats[f]);
        let mut settings = Settings::plain();
        // Success or an error: both fine; a panic fails the test.
        if execute(&session, &mut settings, &mut out, &mut err, Paint::default(), &line).is_ok() {
            printed.set(printed.get() + 1);
        }
    });
    // The expressions must reach printing, not only fail early.
    eprintln!("{} of 400 random expressions printed", printed.get());
    assert!(printed.get() >= 40, "only {} of 400 printed", printed.get());
}
