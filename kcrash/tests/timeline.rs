//! The KLog through the decoder interface and the merged timeline, through the real binary on
//! real dumps: the KLog's events are `klog`'s records, one for one and in the same order, on
//! every dump of the corpus; on the Linux guest's dumps, `timeline` holds every KLog record and
//! every printk message, merged in time order, the printk ones as `log` (an independent reader,
//! checked against crash(8) and the console) prints them.

use std::path::PathBuf;

mod common;

use common::{json_lines, kcrash};
use kcrash::escape::escaped;
use kcrash::regress::manifest::Manifest;
use kcrash_harness::corpus;
use kcrash_harness::run::stdout;
use serde_json::Value;

/// `kcrash -s -c COMMAND FILES...`'s standard output; the command must succeed.
fn run(files: &[PathBuf], command: &str) -> String {
    let out = kcrash()
        .session(&[command])
        .args(files)
        .output()
        .expect("kcrash runs");
    stdout(&out, command)
}

/// A decimal string of the JSON conventions as a number.
fn dec(v: &Value) -> u64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{v} is not a decimal string"))
}

/// Every corpus entry's first dump, with its image.
fn first_dumps() -> Vec<(String, Vec<PathBuf>)> {
    let dir = corpus::default_dir();
    let manifest = Manifest::load(&dir).expect("corpus/manifest.toml");
    manifest
        .entries
        .iter()
        .filter_map(|e| {
            let kernel = manifest.kernels.iter().find(|k| k.name == e.kernel)?;
            let dump = e.dumps.first()?.argument(&dir);
            Some((e.name.clone(), vec![dump, dir.join(&kernel.image)]))
        })
        .collect()
}

#[test]
fn klog_events_are_klog_records_one_for_one() {
    let mut compared = 0;
    for (name, files) in first_dumps() {
        let records = json_lines(&run(&files, "klog 0 --json"));
        let events = json_lines(&run(&files, "timeline --json --log KLog"));
        assert_eq!(events.len(), records.len(), "{name}: events and records");
        for (e, r) in events.iter().zip(&records) {
            assert_eq!(e["log"], "KLog", "{name}");
            assert_eq!(e["ring_index"], r["ring"], "{name}: {e} / {r}");
            assert_eq!(dec(&e["seq"]), r["seq"].as_u64().expect("seq"), "{name}");
            assert_eq!(e["message"], r["message"], "{name}: {e} / {r}");
            let damaged = !r["damage"].as_array().expect("damage").is_empty();
            if damaged {
                assert!(
                    !e["damage"].as_array().expect("damage").is_empty(),
                    "{name}: {e}"
                );
                assert!(
                    e["ticks"].is_null(),
                    "{name}: a damaged record has no time: {e}"
                );
            } else {
                assert_eq!(
                    e["ticks"].as_str(),
                    r["clock"].as_str(),
                    "{name}: {e} / {r}"
                );
                assert_eq!(e["damage"], Value::Array(Vec::new()), "{name}: {e}");
                assert_eq!(e["processor"], r["processor"], "{name}: {e} / {r}");
            }
        }
        compared += records.len();
    }
    assert!(compared > 1000, "only {compared} records compared");
}

/// Oldest first, a limit and a processor filter choose the same records as klog's.
#[test]
fn timeline_filters_as_klog_does() {
    let files = [common::kdump(), common::vmlinux()];
    for (klog, timeline) in [
        (
            "klog 0 --json --oldest-first -n 7",
            "timeline --json --reverse -n 7",
        ),
        ("klog 0 --json --cpu 1", "timeline --json --cpu 1"),
        ("klog 0 --json -g fsd", "timeline --json -g fsd"),
    ] {
        let records = json_lines(&run(&files, klog));
        let events = json_lines(&run(&files, timeline));
        assert!(!records.is_empty(), "{klog}");
        let key = |v: &Value, ring: &str| (v[ring].as_u64(), v["message"].clone());
        let records: Vec<_> = records.iter().map(|r| key(r, "ring")).collect();
        let events: Vec<_> = events.iter().map(|e| key(e, "ring_index")).collect();
        assert_eq!(events, records, "{timeline} against {klog}");
    }
}

#[test]
fn timeline_merges_klog_and_printk_on_linux() {
    let need = ["vmcore.kdump", "vmlinux", "klogtest.ko"];
    let Some(dir) = common::linux::guest("timeline_merges_klog_and_printk_on_linux", &need) else {
        return;
    };
    let files: Vec<PathBuf> = need.iter().map(|f| dir.join(f)).collect();
    let events = json_lines(&run(&files, "timeline --json"));
    let klog = json_lines(&run(&files, "klog 0 --json"));
    let printk = json_lines(&run(&files, "log --json"));
    let from = |log: &'static str| events.iter().filter(move |e| e["log"] == log);
    assert_eq!(from("KLog").count(), klog.len());
    // log prints oldest first and its text raw; the timeline newest first, its message escaped
    // as every string from a dump.
    let texts: Vec<&str> = from("printk")
        .map(|e| e["message"].as_str().expect("a message"))
        .collect();
    let expected: Vec<String> = printk
        .iter()
        .rev()
        .map(|r| escaped(r["text"].as_str().expect("text").as_bytes()))
        .collect();
    assert_eq!(texts, expected);
    assert!(
        klog.len() > 10 && printk.len() > 100,
        "both logs hold events"
    );
    // Newest first, across both logs: where the list passes from one log to the other, time
    // never grows (within a log, events keep their ring's order: printk's early stamps are not
    // monotonic). An event whose own time is lost has none, and sits after its ring's event before
    // it.
    let timed: Vec<(&Value, u64)> = events
        .iter()
        .filter_map(|e| Some((&e["log"], (e["seconds"].as_f64()? * 1e9) as u64)))
        .collect();
    assert!(timed.len() > events.len() / 2, "times are known");
    let crossings: Vec<_> = timed.windows(2).filter(|w| w[0].0 != w[1].0).collect();
    assert!(crossings.len() > 2, "the logs interleave");
    for w in crossings {
        assert!(w[0].1 + 1 >= w[1].1, "out of time order: {w:?}");
    }
    let lines = run(&files, "timeline -n 3000");
    assert!(lines.lines().any(|l| l.contains(" KLog ")) && lines.contains(" printk "));
}
