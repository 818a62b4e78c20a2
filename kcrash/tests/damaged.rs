//! kcrash on real corpus dumps edited the way damage or a hostile kernel would: what the dump
//! says is shown as it is, marked, and never reaches the terminal as control sequences.

use std::path::Path;

use kcrash_harness::corpus;

mod common;

use common::edit::{drop_page, file_offset, inflated, replace_all, set_word};

/// The bare kernel's ELF dump of its `rings` crash, inflated, with `edit` applied, written
/// into `dir`.
fn edited_dump(dir: &Path, edit: impl Fn(&mut Vec<u8>)) -> std::path::PathBuf {
    let mut bytes = inflated("bare/rings/vmcore.elf.gz");
    edit(&mut bytes);
    let path = dir.join("vmcore.elf");
    std::fs::write(&path, &bytes).unwrap();
    path
}

/// A subsystem name in dump memory that holds an escape sequence and a line break is printed
/// escaped by every command that shows it: the ring table, the records, their JSON.
#[test]
fn a_subsystem_name_with_control_bytes_is_escaped_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let dump = edited_dump(dir.path(), |b| {
        assert!(replace_all(b, b"PARCHORE\0", b"P\x1b[2J\nXY\0") > 0);
    });
    let out = common::kcrash().commands(
        &dump,
        &common::vmlinux(),
        &[
            "klog -s",
            "klog 0 full -n 400",
            "klog -s --json",
            "klog 1 --json -n 5",
        ],
    );
    let stdout = kcrash_harness::run::stdout(&out, "klog");
    for (what, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(
            !bytes.contains(&0x1b),
            "{what}: a raw escape byte reached the terminal"
        );
    }
    let shown = r"P\x1b[2J\nXY";
    let table = stdout.lines().find(|l| l.contains(" 256 ")).unwrap();
    assert!(table.contains(shown), "ring table: {table}");
    assert!(
        stdout.lines().any(|l| l.contains(&format!(",{shown}] "))),
        "a record line names the subsystem escaped"
    );
    // JSON holds the same text as the terminal shows: escaped once, then JSON-quoted.
    let records: Vec<serde_json::Value> = stdout
        .lines()
        .filter(|l| l.starts_with("{\"kcrash_json\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!records.is_empty());
    assert!(
        records.iter().all(|r| r["ring_name"] == shown),
        "{records:?}"
    );
    assert!(
        stdout.contains(r#""name": "P\\x1b[2J\\nXY""#),
        "klog -s --json"
    );
}

/// A script can tell an empty log from one that could not be read: a truncated dump that lost
/// every ring's control block is exit status 1 with one line naming them all; a kernel that
/// logged nothing (klogLevel OFF) is exit 0 with a note that says so.
#[test]
fn an_unreadable_log_fails_and_an_empty_one_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(corpus::file("bare/rings/vmcore.kdump")).unwrap();
    let truncated = dir.path().join("vmcore.kdump");
    std::fs::write(&truncated, &whole[..whole.len() / 2]).unwrap();
    let out = common::kcrash().commands(&truncated, &common::vmlinux(), &["klog 0 full"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = common::text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "one summary and the failure: {stderr}");
    assert!(
        lines[0]
            .starts_with("klog: KLogs[0], KLogs[1], KLogs[2], KLogs[3], KLogs[4] not in the dump")
            && lines[0].contains("truncated dump"),
        "{stderr}"
    );
    assert!(
        lines[1].contains("no ring could be read: 5 not in the dump, 0 inconsistent"),
        "{stderr}"
    );

    // A filter does not turn an unreadable log into an empty answer.
    let out = common::kcrash().commands(&truncated, &common::vmlinux(), &["klog 0 --cpu 1"]);
    assert_eq!(out.status.code(), Some(1), "{}", common::text(&out.stderr));

    let off = corpus::file("bare/off/vmcore.kdump");
    let out = common::kcrash().commands(&off, &common::vmlinux(), &["klog 0 full"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    assert_eq!(
        common::text(&out.stderr),
        "klog: the log is empty: no record was written; klogLevel is 0 (OFF)\n"
    );

    let rings = corpus::file("bare/rings/vmcore.kdump");
    let out = common::kcrash().commands(&rings, &common::vmlinux(), &["klog 0 --cpu 77"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(common::text(&out.stderr), "klog: no record matched\n");
}

/// A record whose format or `%s` argument ran past kcrash's limits, had no format, or asked for
/// a conversion kcrash does not implement prints what it can and marks the rest, in text and
/// in JSON's `marks` — never a silently cut or literal message.
#[test]
fn limits_and_unimplemented_conversions_are_marked() {
    let expected: kcrash_harness::expected::Expected =
        serde_json::from_slice(&std::fs::read(corpus::file("bare/rings/expected.json")).unwrap())
            .unwrap();
    let event = |ring: &str, seq: u64| {
        let r = expected.ring_named(ring).unwrap();
        let rec = r.records.iter().find(|x| x.seq == seq).unwrap();
        rec.event.clone().unwrap()
    };
    // The heap arena's second half is unused by the `rings` scenario: room for hostile text.
    let arena = common::nm(&common::vmlinux())
        .into_iter()
        .find(|(n, _)| n.contains("4heap5ARENA"))
        .map(|(_, (a, _))| a)
        .expect("the bare kernel's heap arena");
    let endless = arena + 0x2000;
    let hostile = endless + 0x1100;
    let dir = tempfile::tempdir().unwrap();
    let dump = edited_dump(dir.path(), |b| {
        let sched = event("SCHED", 0);
        let known = [sched.format.as_bytes(), b"\0"].concat();
        let at = file_offset(b, &known, sched.desc, endless);
        assert!(b[at..at + 0x1200].iter().all(|&x| x == 0), "arena unused");
        b[at..at + 4200].fill(b'A');
        let h = b"%f|%2$s|%99999d|%d|%d\0";
        b[at + 0x1100..at + 0x1100 + h.len()].copy_from_slice(h);
        set_word(b, &event("NONE", 0).words, 4, 0);
        set_word(b, &event("SCHED", 0).words, 4, endless);
        set_word(b, &event("PARCHORE", 44).words, 5, endless);
        set_word(b, &event("VM", 11).words, 4, hostile);
    });
    let out =
        // --raw: the message is the line's end (a schema's fields would follow it).
        common::kcrash().commands(&dump, &common::vmlinux(), &["klog 0 full --raw", "klog 0 --json"]);
    let stdout = kcrash_harness::run::stdout(&out, "klog");
    let records = common::json_records(
        stdout.lines().filter(|l| l.starts_with("{\"kcrash_json\"")),
        "klog --json",
    );
    let ring = |name: &str| expected.ring_named(name).unwrap().ring;
    let case = |name: &str, seq: u64| &records[&(ring(name), seq)];
    let a4096 = "A".repeat(4096);
    for (name, seq, marks, message) in [
        (
            "NONE",
            0,
            vec!["desc_null"],
            "<no format string: desc is 0; args 0x5 0x0 0x0>".to_owned(),
        ),
        (
            "SCHED",
            0,
            vec!["format_cut"],
            format!("{a4096}<format cut: no NUL within 4096 bytes>"),
        ),
        (
            "PARCHORE",
            44,
            vec!["string_cut"],
            format!("Entering function \"{a4096}<cut: no NUL within 4096 bytes>\" (11)"),
        ),
        (
            "VM",
            11,
            vec!["missing_arg", "field_capped", "not_implemented"],
            format!(
                "<not implemented: %f 0xffffffffb000c000>|<not implemented: %2$s>|{:>4096}\
                 <field capped at 4096>|0|<missing arg>",
                0o755
            ),
        ),
    ] {
        let v = case(name, seq);
        assert_eq!(v["marks"], serde_json::json!(marks), "{name} {seq}");
        assert_eq!(v["damage"], serde_json::json!([]), "{name} {seq}");
        assert_eq!(v["message"], message.as_str(), "{name} {seq}");
        // The text line ends with the same message.
        assert!(
            stdout.lines().any(|l| l.ends_with(&format!("] {message}"))),
            "{name} {seq}: no text line ends with {message}"
        );
    }
    // Everything else still reads as the kernel logged it.
    let untouched = records
        .values()
        .filter(|v| v["marks"] == serde_json::json!([]))
        .count();
    assert_eq!(untouched + 4, records.len());
}

/// What the dump cannot vouch for is printed as unknown, with the reason: the counts of a ring
/// whose scribbled `next_write` (a multiple of 8 below the sanity bound) says it wrapped
/// although most of its slots were never written, those slots (never written, not torn), and
/// the clock rate when `klogClockHz` is not in the dump.
#[test]
fn what_the_dump_cannot_vouch_for_is_printed_as_unknown() {
    let expected: kcrash_harness::expected::Expected =
        serde_json::from_slice(&std::fs::read(corpus::file("bare/rings/expected.json")).unwrap())
            .unwrap();
    let sched = expected.ring_named("SCHED").unwrap();
    let never = sched.num_recs - sched.written;
    assert!(never > 0, "SCHED has slots never written");
    let query = common::kcrash().commands(
        &common::kdump(),
        &common::vmlinux(),
        &[&format!("p &KLogs[{}].next_write", sched.ring)],
    );
    let next_write_at = kcrash_harness::run::stdout(&query, "p")
        .split_whitespace()
        .find_map(|w| u64::from_str_radix(w.strip_prefix("0x")?, 16).ok())
        .expect("an address");
    let clock_at = common::nm(&common::vmlinux())["klogClockHz"].0;
    let known = b"postProcess: task:%016lx curPD:%d\0";
    let known_at = sched.records[0].event.as_ref().unwrap().desc;
    let scribbled = ((1u64 << 53) - 1) * 8;
    let dir = tempfile::tempdir().unwrap();
    let dump = edited_dump(dir.path(), |b| {
        let at = file_offset(b, known, known_at, next_write_at);
        // The oracle's count is what the dump holds there: the edit is where it should be.
        assert_eq!(b[at..at + 8], (sched.written * 8).to_le_bytes());
        b[at..at + 8].copy_from_slice(&scribbled.to_le_bytes());
        let clock = file_offset(b, known, known_at, clock_at);
        drop_page(b, clock);
    });
    let sched_name = format!("klog {} full", sched.ring);
    let out = common::kcrash().commands(
        &dump,
        &common::vmlinux(),
        &["klog -s", "klog -s --json", &sched_name],
    );
    let stdout = kcrash_harness::run::stdout(&out, "klog");
    let row = stdout
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("SCHED"))
        .unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[3..7], ["?", "?", "?", "0"], "{row}");
    assert!(
        stdout.contains(&format!(
            "COUNTS UNKNOWN: next_write {scribbled} says the ring wrapped, but {never} of its \
             slots were never written"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "clock: rate unknown (klogClockHz is unreadable at {clock_at:#x}"
        )),
        "{stdout}"
    );
    let doc: serde_json::Value = serde_json::from_str(
        &stdout[stdout.find("\n{").unwrap()..stdout.find("\n}\n").unwrap() + 2],
    )
    .unwrap();
    assert!(doc["clock_hz"].is_null());
    assert!(doc["clock_unknown"]
        .as_str()
        .unwrap()
        .starts_with(&format!("klogClockHz is unreadable at {clock_at:#x}")));
    let ring = &doc["rings"][sched.ring as usize];
    for field in ["written", "held", "overwritten", "laps"] {
        assert!(ring[field].is_null(), "{field}: {ring}");
    }
    assert_eq!(
        (ring["never_written"].as_u64(), ring["torn"].as_u64()),
        (Some(never), Some(0))
    );
    // The listing marks each never-written slot as such, and calls none of them torn.
    let listed = stdout
        .lines()
        .filter(|l| l.contains("<never written:"))
        .count();
    assert_eq!(listed as u64, never);
    assert!(!stdout.contains("<torn"), "{stdout}");
    // Times are raw ticks, not seconds from a guessed rate.
    assert!(stdout.lines().any(|l| l.starts_with("[t=")), "{stdout}");
    // An export says so too: ticks where nanoseconds go, and the trace's metadata says why.
    let trace = dir.path().join("t.json");
    let export = format!("klog 0 --chrome-json {}", trace.display());
    let out = common::kcrash().commands(&dump, &common::vmlinux(), &[&export]);
    kcrash_harness::run::stdout(&out, "klog --chrome-json");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let unit = doc["otherData"]["kcrash.time_unit"].as_str().unwrap();
    assert!(
        unit.starts_with("ticks of a clock whose rate is unknown (klogClockHz is unreadable"),
        "{unit}"
    );
    let times: std::collections::HashSet<u64> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "i")
        .map(|e| (e["ts"].as_f64().unwrap() * 1000.0).round() as u64)
        .collect();
    for rec in sched.records.iter().filter_map(|r| r.event.as_ref()) {
        assert!(times.contains(&rec.clock), "no event at tick {}", rec.clock);
    }
}
