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
