//! The Linux guest's klogtest module in its dumps: `mod` lists every module as the guest's
//! /proc/modules listed it, klogtest where the guest loaded it (and as crash(8) does), its KLog reads as the module logged it (the oracle on the console), and
//! its variables print as crash(8) prints them. Setup: tests/common/linux.rs.

use std::path::Path;

use crate::common;

use common::linux::{
    crash, crash_reads, dumps, guest, kcrash, kcrash_on, mod_rows, module_unplaceable,
    proc_modules, slab_may_be_excluded,
};
use common::{check_records_in, json_records, Strings};
use kcrash_harness::expected::Expected;
use kcrash_harness::run::stdout;

/// The `[[boots]]` entry of guest.toml named `vmcoreinfo` (the boot vmcore.elf comes from):
/// `key = "value"` lines, read without a TOML parser.
fn guest_boot(dir: &Path, key: &str) -> String {
    let toml = std::fs::read_to_string(dir.join("guest.toml")).expect("guest.toml");
    let boot = toml
        .split("[[boots]]")
        .find(|b| b.contains("name = \"vmcoreinfo\""))
        .expect("the vmcoreinfo boot");
    boot.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(" = ")?;
            (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| panic!("guest.toml has no {key}"))
}

fn hex(text: &str) -> u64 {
    u64::from_str_radix(text.trim_start_matches("0x"), 16).expect("hex")
}

#[test]
fn mod_lists_the_module_where_the_guest_loaded_it_and_as_crash_does() {
    let Some(dir) = guest(
        "mod",
        &["vmcore.elf", "vmcore.kdump", "vmlinux", "guest.toml"],
    ) else {
        return;
    };
    let base = hex(&guest_boot(&dir, "module_base"));
    let size: u64 = guest_boot(&dir, "module_size").parse().expect("size");
    let listed = proc_modules(&dir);
    assert!(
        listed.iter().any(|m| m.0 == "klogtest"),
        "the console lists /proc/modules"
    );
    for dump in dumps(&dir) {
        // Every module the guest's /proc/modules listed, where it listed it, and no other.
        assert_eq!(
            mod_rows(&dir, dump),
            listed,
            "{dump}: mod and /proc/modules"
        );
        let text = stdout(&kcrash(&dir, dump, &["mod"]), dump);
        let row = text
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some("klogtest"))
            .unwrap_or_else(|| panic!("{dump}: no klogtest in\n{text}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(hex(cols[2]), base, "{dump}: {row}");
        assert_eq!(cols[3].parse::<u64>().ok(), Some(size), "{dump}: {row}");
        // Out of tree (O) and unsigned (E), as the kernel said when it loaded it.
        assert_eq!(cols[4], "OE", "{dump}: {row}");
    }
    if !crash_reads("mod_vs_crash", &dir) {
        return;
    }
    // crash: "MODULE NAME BASE SIZE OBJECT FILE" rows.
    let theirs: Vec<(String, String, String)> = crash(&dir, "vmcore.elf", "mod")
        .lines()
        .filter_map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            (c.len() >= 4 && c[0].len() == 16 && hex(c[0]) != 0)
                .then(|| (c[0].to_owned(), c[1].to_owned(), c[2].to_owned()))
        })
        .collect();
    let ours: Vec<(String, String, String)> = stdout(&kcrash(&dir, "vmcore.elf", &["mod"]), "mod")
        .lines()
        .skip(1)
        .map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            (c[0].to_owned(), c[1].to_owned(), c[2].to_owned())
        })
        .collect();
    let sorted = |mut v: Vec<(String, String, String)>| {
        v.sort();
        v
    };
    assert_eq!(sorted(ours), sorted(theirs));
}

/// What `dump` may lack of the strings the module logged: some live in slab pages.
fn strings(dir: &Path, dump: &str) -> Strings {
    if slab_may_be_excluded(dir, dump) {
        Strings::MayBeExcluded
    } else {
        Strings::AsLogged
    }
}

#[test]
fn the_modules_klog_reads_as_the_module_logged_it() {
    let Some(dir) = guest(
        "module_klog",
        &[
            "vmcore.elf",
            "vmcore.kdump",
            "vmlinux",
            "klogtest.ko",
            "expected.json",
            "guest.toml",
        ],
    ) else {
        return;
    };
    let expected: Expected = serde_json::from_str(
        &std::fs::read_to_string(dir.join("expected.json")).expect("expected.json"),
    )
    .expect("expected.json parses");
    let klogs = hex(&guest_boot(&dir, "klogs"));
    for dump in dumps(&dir) {
        if module_unplaceable(&dir, dump) {
            continue;
        }
        // The .ko on the command line, and loaded by `mod -s`.
        for how in ["command line", "mod -s"] {
            // mod -s is the same code on every format: the contract's two dumps suffice.
            if how == "mod -s" && !["vmcore.elf", "vmcore.kdump"].contains(&dump) {
                continue;
            }
            let mut cmd = common::kcrash().command();
            cmd.current_dir(&dir).arg("-s");
            if how == "mod -s" {
                cmd.args(["-c", "mod -s klogtest klogtest.ko > /dev/null"]);
            }
            cmd.args([
                "-c",
                "sym KLogs",
                "-c",
                "klog 0 full --json",
                dump,
                "vmlinux",
            ]);
            if how == "command line" {
                cmd.arg("klogtest.ko");
            }
            let text = stdout(&cmd.output().expect("kcrash runs"), dump);
            let mut lines = text.lines();
            let sym = lines.next().expect("sym's line");
            assert!(
                sym.starts_with(&format!("{klogs:016x} (D) KLogs")),
                "{dump} ({how}): {sym}"
            );
            check_records_in(
                &json_records(lines, dump),
                &expected,
                &format!("{dump} ({how})"),
                strings(&dir, dump),
            );
        }
    }
}

/// With no vmlinux and no `.ko` — or a vmlinux that knows nothing of the module — kcrash finds
/// the module's KLog by scanning the dump for the descriptor klog.h sealed, and reads every
/// record as the DWARF path does: as the module logged it.
#[test]
fn the_modules_klog_reads_without_vmlinux_or_ko() {
    let Some(dir) = guest(
        "module_klog_no_image",
        &["vmcore.elf", "vmcore.kdump", "vmlinux", "expected.json"],
    ) else {
        return;
    };
    let expected: Expected = serde_json::from_str(
        &std::fs::read_to_string(dir.join("expected.json")).expect("expected.json"),
    )
    .expect("expected.json parses");
    for dump in dumps(&dir) {
        for files in [&[dump][..], &[dump, "vmlinux"][..]] {
            let what = files.join(" ");
            let summary = stdout(&kcrash_on(&dir, files, &["klog -s --json"]), &what);
            let summary: serde_json::Value = serde_json::from_str(&summary).expect("JSON");
            assert_eq!(summary["layout"]["source"], "scan", "{what}: {summary}");
            let text = stdout(&kcrash_on(&dir, files, &["klog 0 full --json"]), &what);
            check_records_in(
                &json_records(text.lines(), &what),
                &expected,
                &what,
                strings(&dir, dump),
            );
        }
    }
}

#[test]
fn a_modules_variable_prints_as_crash_prints_it() {
    let Some(dir) = guest("module_print", &["vmcore.elf", "vmlinux", "klogtest.ko"]) else {
        return;
    };
    let ours = stdout(
        &kcrash_on(
            &dir,
            &["vmcore.elf", "vmlinux", "klogtest.ko"],
            &["p KLogs[2].next_write", "p *KLogs[2].name"],
        ),
        "p",
    );
    let ours: Vec<&str> = ours.lines().collect();
    assert_eq!(ours.len(), 2, "{ours:?}");
    if !crash_reads("module_print_vs_crash", &dir) {
        return;
    }
    let theirs = crash(
        &dir,
        "vmcore.elf",
        "mod -s klogtest klogtest.ko\np KLogs[2].next_write\np *KLogs[2].name",
    );
    let values: Vec<&str> = theirs
        .lines()
        .filter_map(|l| l.split_once('$').and_then(|(_, v)| v.split_once(" = ")))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(values, ours, "crash said:\n{theirs}");
}
