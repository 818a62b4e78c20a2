//! kcrash on real corpus dumps edited the way damage or a hostile kernel would: what the dump
//! says is shown as it is, marked, and never reaches the terminal as control sequences.

use std::io::Read;
use std::path::Path;

use kcrash_harness::corpus;

mod common;

/// The bare kernel's ELF dump of its `rings` crash, inflated, with `edit` applied, written
/// into `dir`.
fn edited_dump(dir: &Path, edit: impl Fn(&mut Vec<u8>)) -> std::path::PathBuf {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(corpus::file("bare/rings/vmcore.elf.gz")).expect("corpus dump"),
    )
    .read_to_end(&mut bytes)
    .expect("gunzip");
    edit(&mut bytes);
    let path = dir.join("vmcore.elf");
    std::fs::write(&path, &bytes).unwrap();
    path
}

/// Every place `from` stands in `bytes` now holds `to` (of the same length).
fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) -> usize {
    assert_eq!(from.len(), to.len());
    let mut n = 0;
    let mut at = 0;
    while let Some(i) = bytes[at..].windows(from.len()).position(|w| w == from) {
        bytes[at + i..at + i + to.len()].copy_from_slice(to);
        at += i + to.len();
        n += 1;
    }
    n
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

/// Where `addr` of the bare kernel's image is in its ELF dump: the image is mapped linearly, so
/// its distance from a known string is the same in the file.
fn file_offset(bytes: &[u8], known: &[u8], known_addr: u64, addr: u64) -> usize {
    let at = bytes
        .windows(known.len())
        .position(|w| w == known)
        .expect("the known string is in the dump");
    usize::try_from(at as i64 + (addr as i64).wrapping_sub(known_addr as i64)).unwrap()
}

/// Replaces word `index` of the record whose eight words are `words`, wherever the dump holds it.
fn set_word(bytes: &mut [u8], words: &[u64], index: usize, value: u64) {
    let raw = |w: &[u64]| w.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
    let mut edited = words.to_vec();
    edited[index] = value;
    assert_eq!(replace_all(bytes, &raw(words), &raw(&edited)), 1);
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
        common::kcrash().commands(&dump, &common::vmlinux(), &["klog 0 full", "klog 0 --json"]);
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
