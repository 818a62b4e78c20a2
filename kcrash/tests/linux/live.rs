//! kcrash on a running kernel: the Linux guest's own /proc/kcore, read by a static kcrash inside
//! the guest (`kcrash-harness linux-live`; the guest's script is in tests/harness/src/linux/live.rs).
//! Each run's output is on the serial console between markers; the module's oracle lines
//! (printed by the kernel's snprintf as it logged each event) are on the same console, and the
//! expected rings at each moment are derived from the lines before that moment's mark.
//!
//! The directory comes from `KCRASH_LINUX_LIVE` (default
//! `/var/cache/kcrash-ci/linux-live/6.1.0-56-amd64`, what `.ci/run` writes). Without it the
//! tests say NOT RUN; under KCRASH_REQUIRE_TOOLS=1 they fail.

use std::collections::{HashMap, HashSet};

use crate::common;

use common::{check_records, damage, json_records, words};
use kcrash_harness::expected::{message_matches, Expected};
use kcrash_harness::linux::guest::{console_line, ConsoleFacts};
use kcrash_harness::oracle::{self, Line};
use kcrash_harness::{linux, tools};
use serde_json::Value;

/// The guest console's lines, time stamps dropped; None (NOT RUN) when there is no live run.
fn console(test: &str) -> Option<Vec<String>> {
    let dir = linux::live_output();
    let Ok(text) = std::fs::read_to_string(dir.join("console.log")) else {
        tools::not_run(test, &format!("{}/console.log not there", dir.display()));
        return None;
    };
    Some(text.lines().map(|l| console_line(l).to_owned()).collect())
}

/// One kcrash run in the guest: exit status, stdout and stderr lines.
struct Run {
    rc: i32,
    out: Vec<String>,
    err: Vec<String>,
}

fn run(lines: &[String], name: &str) -> Run {
    let head = format!("KCRASH-LIVE-OUT {name} rc=");
    let start = lines
        .iter()
        .position(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("the console has no {head:?}"));
    let rc = lines[start][head.len()..].trim().parse().expect("rc");
    let err_at = start
        + lines[start..]
            .iter()
            .position(|l| *l == format!("KCRASH-LIVE-ERR {name}"))
            .expect("ERR marker");
    let done = err_at
        + lines[err_at..]
            .iter()
            .position(|l| *l == format!("KCRASH-LIVE-DONE {name}"))
            .expect("DONE marker");
    Run {
        rc,
        out: lines[start + 1..err_at].to_vec(),
        err: lines[err_at + 1..done].to_vec(),
    }
}

/// The rings as the oracle says they were at `mark`: derived from the console before it.
fn expected_at(lines: &[String], mark: &str) -> Expected {
    let at = lines
        .iter()
        .position(|l| *l == format!("KCRASH-LIVE-MARK {mark}"))
        .unwrap_or_else(|| panic!("no mark {mark}"));
    // derive wants the panic line the crash tests end with; this moment had none.
    let text: String = lines[..at]
        .iter()
        .map(|l| format!("{l}\n"))
        .chain([format!("{}live\n", oracle::PANIC_PREFIX)])
        .collect();
    oracle::derive(&text).unwrap_or_else(|e| panic!("oracle at {mark}: {e:#}"))
}

fn records(run: &Run, what: &str) -> HashMap<(u64, u64), Value> {
    json_records(run.out.iter().map(String::as_str), what)
}

/// `klog 0 full --json` printed exactly the records the oracle says the rings held.
fn check_snapshot(run: &Run, expected: &Expected, what: &str) {
    assert_eq!(run.rc, 0, "{what}: exit status; stderr {:?}", run.err);
    check_records(&records(run, what), expected, what);
}

#[test]
fn klog_on_the_running_kernel_shows_what_the_module_logged_so_far() {
    let Some(lines) = console("klog_on_the_running_kernel") else {
        return;
    };
    let first = expected_at(&lines, "first");
    check_snapshot(&run(&lines, "first"), &first, "first run");
    // The second run, after the module logged more: the new events, with nothing cached from
    // the first. It was given no .ko: kallsyms named the module, /lib/modules held it.
    let second = expected_at(&lines, "second");
    let written = |e: &Expected| e.rings.iter().map(|r| r.written).sum::<u64>();
    assert!(written(&second) > written(&first));
    let r = run(&lines, "second");
    check_snapshot(&r, &second, "second run");
    assert!(
        r.err
            .iter()
            .any(|l| l.contains("KLogs is in module klogtest: loaded /lib/modules/")),
        "second run: no note of the module found by itself: {:?}",
        r.err
    );
}

#[test]
fn sym_without_a_vmlinux_comes_from_kallsyms() {
    let Some(lines) = console("sym from kallsyms") else {
        return;
    };
    // Oracles: the panic's "Kernel Offset" line of the same boot, and the module's own &KLogs.
    let facts = ConsoleFacts::parse(&lines.join("\n")).expect("console facts");
    let text = 0xffff_ffff_8100_0000u64 + facts.kaslr_offset;
    let klogs = facts.module.num("klogs").unwrap();
    let r = run(&lines, "symbols");
    assert_eq!(r.rc, 0, "{:?}", r.err);
    assert_eq!(r.out.len(), 2, "{:?}", r.out);
    assert_eq!(r.out[0], format!("{text:016x} (T) _text"));
    let (head, tail) = (format!("{klogs:016x} ("), ") KLogs  [klogtest]");
    assert!(
        r.out[1].starts_with(&head) && r.out[1].ends_with(tail),
        "{:?}",
        r.out[1]
    );
}

/// Per ring, the records lost between polls or overwritten while read, from --follow's stderr.
fn lost(err: &[String]) -> HashMap<u64, u64> {
    let mut out = HashMap::new();
    for line in err {
        let Some(rest) = line.strip_prefix("klog: KLogs[") else {
            panic!("follow: unexpected stderr line {line:?}");
        };
        let (ring, rest) = rest.split_once(']').unwrap();
        let n = rest
            .split_once("): ")
            .and_then(|(_, r)| r.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("follow: {line:?}"));
        *out.entry(ring.parse().unwrap()).or_default() += n;
    }
    out
}

#[test]
fn follow_prints_records_as_they_are_logged_and_counts_those_it_lost() {
    let Some(lines) = console("follow") else {
        return;
    };
    let r = run(&lines, "follow");
    assert_eq!(r.rc, 0, "follow ends on Ctrl-C with status 0: {:?}", r.err);
    let got = records(&r, "follow");
    // Every record it printed is the one the module logged at that sequence number.
    let mut logged: HashMap<(u64, u64), Line> = HashMap::new();
    for l in &lines {
        if let Some(Ok(line)) = Line::parse(l) {
            if line.tag == "KLOG-EVENT" || line.tag == "KLOG-TORN" {
                let key = (line.num("ring").unwrap(), line.num("seq").unwrap());
                logged.insert(key, line);
            }
        }
    }
    for (key, v) in &got {
        let line = logged
            .get(key)
            .unwrap_or_else(|| panic!("follow: {key:?} was never logged"));
        if line.tag == "KLOG-TORN" {
            assert_eq!(damage(v), ["torn"], "follow: {key:?}");
            continue;
        }
        assert!(damage(v).is_empty(), "follow: {key:?} damaged: {v}");
        for (field, at) in [("id", 1), ("proc_dom", 2), ("clock", 3), ("desc", 4)] {
            assert_eq!(
                words(v)[at],
                line.num(field).unwrap(),
                "follow: {key:?} {field}"
            );
        }
        let msg = v["message"].as_str().unwrap();
        assert!(
            message_matches(line.msg.as_deref().unwrap(), msg),
            "follow: {key:?}: {msg} vs {:?}",
            line.msg
        );
    }
    // Per ring: from the oldest record held when it started to the last one logged before it
    // stopped, every record was printed or counted as lost; and it saw the new ones.
    let (start, stop) = (
        expected_at(&lines, "follow-start"),
        expected_at(&lines, "follow-stop"),
    );
    let lost = lost(&r.err);
    let mut new_seen = 0;
    for (before, after) in start.rings.iter().zip(&stop.rings) {
        let first = before.written - before.held;
        let printed: HashSet<u64> = got
            .keys()
            .filter(|(ring, _)| *ring == before.ring)
            .map(|&(_, seq)| seq)
            .collect();
        assert!(
            printed.iter().all(|s| (first..after.written).contains(s)),
            "follow: ring {} printed records outside [{first}, {})",
            before.ring_name,
            after.written
        );
        let lost = lost.get(&before.ring).copied().unwrap_or(0);
        assert_eq!(
            printed.len() as u64 + lost,
            after.written - first,
            "follow: ring {}: {} printed + {lost} lost is not the {} logged",
            before.ring_name,
            printed.len(),
            after.written - first
        );
        new_seen += printed.iter().filter(|&&s| s >= before.written).count();
    }
    assert!(
        new_seen > 0,
        "follow printed no record logged after it started"
    );
}

#[test]
fn hidden_addresses_and_a_user_who_is_not_root_are_told_what_to_do() {
    let Some(lines) = console("permission messages") else {
        return;
    };
    let hidden = run(&lines, "hidden");
    assert_eq!(hidden.rc, 2);
    assert_eq!(
        hidden.err,
        [
            "kcrash: /sys/module/klogtest/sections shows every address as 0: kernel.kptr_restrict \
          is 2 (or kcrash lacks CAP_SYSLOG); as root, `sysctl kernel.kptr_restrict=1` shows them \
          to root"
        ]
    );
    let user = run(&lines, "nonroot");
    assert_eq!(user.rc, 2);
    assert_eq!(
        user.err,
        [
            "kcrash: /proc/kcore: permission denied: reading the running kernel's memory needs \
          root; run kcrash as root (e.g. sudo kcrash)"
        ]
    );
}
