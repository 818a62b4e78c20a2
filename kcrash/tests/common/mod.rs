//! What kcrash's end-to-end tests share: saying what did not run, reading the binary's output,
//! and checking `klog --json` records against a kernel's own oracle (expected.json).

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use std::collections::HashMap;
use std::process::{Command, Output};

use kcrash_harness::expected::{message_matches, Expected};
use serde_json::Value;

/// Whether missing inputs and tools must fail the test (CI) rather than be reported.
pub fn require() -> bool {
    std::env::var("KCRASH_REQUIRE_TOOLS").as_deref() == Ok("1")
}

/// Says on stderr that `test` checks nothing here and why; fails under KCRASH_REQUIRE_TOOLS=1.
pub fn not_run(test: &str, why: &str) {
    let msg = format!("NOT RUN: {test}: {why}");
    assert!(!require(), "{msg} (KCRASH_REQUIRE_TOOLS=1)");
    eprintln!("{msg}");
}

/// Whether `program --version` runs; if not, says so through [`not_run`].
pub fn have_tool(test: &str, program: &str) -> bool {
    let ok = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        not_run(test, &format!("{program} is not installed"));
    }
    ok
}

/// A successful run's stdout; the exit status and stderr otherwise.
pub fn stdout(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: exit {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("kcrash prints UTF-8")
}

/// `klog --json` lines by (ring, seq); a record printed twice fails.
pub fn json_records<'l>(
    lines: impl IntoIterator<Item = &'l str>,
    what: &str,
) -> HashMap<(u64, u64), Value> {
    let mut got = HashMap::new();
    for line in lines {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{what}: {e}: {line}"));
        let key = (v["ring"].as_u64().unwrap(), v["seq"].as_u64().unwrap());
        assert!(
            got.insert(key, v).is_none(),
            "{what}: record {key:?} printed twice"
        );
    }
    got
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_u64().unwrap())
        .collect()
}

/// A JSON record's eight raw words.
pub fn words(record: &Value) -> Vec<u64> {
    u64s(&record["words"])
}

/// A JSON record's damage flags, by name.
pub fn damage(record: &Value) -> Vec<String> {
    record["damage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_owned())
        .collect()
}

/// Every record the oracle says a trusted ring holds is in `got`, field for field (slot, damage,
/// subsystem, the raw words and their parts, format, arguments, message, unreadable strings),
/// and `got` holds nothing else. Untrusted rings are the caller's to check: they print nothing.
pub fn check_records(got: &HashMap<(u64, u64), Value>, expected: &Expected, what: &str) {
    let mut want = 0;
    for ring in expected.rings.iter().filter(|r| r.untrusted.is_empty()) {
        for rec in &ring.records {
            want += 1;
            let ctx = format!("{what}: ring {} seq {}", ring.ring_name, rec.seq);
            let v = got
                .get(&(ring.ring, rec.seq))
                .unwrap_or_else(|| panic!("{ctx}: missing"));
            assert_eq!(v["slot"], rec.slot, "{ctx}: slot");
            let want_damage: Vec<String> = rec
                .damage
                .iter()
                .map(|d| format!("{d:?}").to_lowercase())
                .collect();
            assert_eq!(damage(v), want_damage, "{ctx}: damage");
            let Some(ev) = &rec.event else { continue };
            assert_eq!(v["subsystem"], ev.subsystem, "{ctx}: subsystem");
            assert_eq!(
                v["subsystem_name"],
                ev.subsystem_name.as_str(),
                "{ctx}: subsystem_name"
            );
            for (field, want) in [
                ("header", ev.header),
                ("id", ev.id),
                ("clock", ev.clock),
                ("desc", ev.desc),
            ] {
                assert_eq!(v[field], want, "{ctx}: {field}");
            }
            assert_eq!(
                (v["processor"].as_u64(), v["domain"].as_u64()),
                (Some(ev.processor as u64), Some(ev.domain as u64)),
                "{ctx}"
            );
            assert_eq!(v["format"], ev.format.as_str(), "{ctx}: format");
            assert_eq!(u64s(&v["args"]), ev.args, "{ctx}: args");
            assert_eq!(words(v), ev.words, "{ctx}: words");
            let msg = v["message"].as_str().unwrap();
            assert!(
                message_matches(&ev.message, msg),
                "{ctx}: message\n  kcrash: {msg}\n  kernel: {}",
                ev.message
            );
            assert_eq!(
                v["unreadable_strings"],
                ev.unreadable_at.len(),
                "{ctx}: unreadable strings"
            );
        }
    }
    assert_eq!(
        got.len(),
        want,
        "{what}: kcrash printed records the oracle does not have"
    );
}
