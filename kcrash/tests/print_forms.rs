//! One value printed every way kcrash can: the same in every dump format of one crash, the same
//! in `--json`, and a bad expression failing with one message while the session goes on.
//!
//! Without gdb the comparisons say on stderr that they did not run, and pass; with
//! KCRASH_REQUIRE_TOOLS=1 they fail. The shared setup is tests/common/gdb.rs.

mod common;

use common::gdb::{hosted_c, kcrash, kcrash_status, unpack, Dump};
use kcrash_harness::corpus;

#[test]
fn json_is_the_same_value() {
    let d = hosted_c("rings");
    let v: serde_json::Value =
        serde_json::from_str(&kcrash(&d, "p --json KLogs[2]")).expect("valid JSON");
    assert_eq!(v["type"], "KLog");
    let fields = v["fields"].as_array().expect("fields");
    let names: Vec<&str> = fields
        .iter()
        .map(|f| f["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        names,
        [
            "subsystem",
            "name",
            "num_recs",
            "rec_size",
            "header",
            "buffer",
            "buffer_size_1",
            "next_write"
        ]
    );
    assert_eq!(fields[1]["string"], "FS");
    // A 64-bit value is a decimal string, an address a hex one.
    assert_eq!(
        fields[2]["value"].as_str(),
        Some(kcrash(&d, "p KLogs[2].num_recs").as_str())
    );
    assert_eq!(
        v["address"].as_str(),
        Some(kcrash(&d, "p/x &KLogs[2]").as_str())
    );
    let flags: serde_json::Value =
        serde_json::from_str(&kcrash(&d, "p --json DebugFlags[1]")).expect("valid JSON");
    assert_eq!(flags["fields"][3]["name"], "d_klog");
    assert_eq!(
        flags["fields"][3]["value"].to_string(),
        kcrash(&d, "p DebugFlags[1].d_klog")
    );
}

#[test]
fn bad_expressions_fail_with_one_message_and_the_session_goes_on() {
    let d = hosted_c("rings");
    for (cmd, msg) in [
        ("p KLogs[", "expected an expression, found the end"),
        (
            "p NoSuchThing",
            "No symbol \"NoSuchThing\" in current context.",
        ),
        ("p KLogs[1].nope", "There is no member named nope."),
        (
            "p *klogLevel",
            "Attempt to take contents of a non-pointer value.",
        ),
        ("p 1/0", "Division by zero"),
        ("p/q 1", "unknown format"),
        ("struct nosuch", "no such type"),
        ("struct KLogs", "no such type"),
        (
            "struct --json KLog.next_write &KLogs[1]",
            "--json shows whole types and objects: struct --json KLog [ADDR]",
        ),
        (
            "struct KLog KLogs:1",
            "KLogs is not a per-CPU variable of a Linux kernel",
        ),
        ("whatis (KLog *)", "expected an expression after the cast"),
    ] {
        let (out, err, ok) = kcrash_status(&d, cmd);
        assert!(!ok, "{cmd} succeeded: {out}");
        assert!(out.is_empty(), "{cmd}: {out}");
        assert!(err.contains(msg), "{cmd}: {err}");
    }
    let out = common::kcrash()
        .command()
        .args(["-s", "--keep-going", "-c", "p KLogs[", "-c", "p klogLevel"])
        .arg(&d.core)
        .arg(&d.image)
        .output()
        .expect("run kcrash");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3\n");
    assert_eq!(out.status.code(), Some(1));
}

/// The same kernel state read from each dump format QEMU and makedumpfile wrote prints the same.
#[test]
fn every_dump_format_prints_the_same_values() {
    let dir = corpus::file("bare/wrap");
    let image = corpus::file("bare/vmlinux");
    let cmds = [
        "p KLogs",
        "p DebugFlags",
        "p bare::chore::CHORES",
        "p *KLogs[1].buffer@16",
        "struct klog_runtime::ring::KLog &KLogs[3]",
    ];
    let elf = unpack(&dir.join("vmcore-paging.elf.gz"), image.clone());
    let want: Vec<String> = cmds.iter().map(|c| kcrash(&elf, c)).collect();
    for gz in ["vmcore.elf.gz", "vmcore.kdump-flat.gz"] {
        let d = unpack(&dir.join(gz), image.clone());
        for (c, want) in cmds.iter().zip(&want) {
            assert_eq!(kcrash(&d, c), *want, "{gz}: {c}");
        }
    }
    let kdump = Dump::new(dir.join("vmcore.kdump"), image);
    for (c, want) in cmds.iter().zip(&want) {
        assert_eq!(kcrash(&kdump, c), *want, "vmcore.kdump: {c}");
    }
}

/// `eval`: an integer expression in four bases, as crash prints it; the values are the dump's
/// (the oracle's ring size, nm's address) and the bases agree with each other.
#[test]
fn eval_prints_an_integer_in_four_bases() {
    let expected: kcrash_harness::expected::Expected = serde_json::from_slice(
        &std::fs::read(kcrash_harness::corpus::file("bare/rings/expected.json")).unwrap(),
    )
    .unwrap();
    let klogs = common::nm(&common::vmlinux())["KLogs"].0;
    let out = common::kcrash().commands(
        &common::kdump(),
        &common::vmlinux(),
        &[
            "eval --json KLogs[1].num_recs",
            "eval --json &KLogs[0]",
            "eval --json -1",
            "eval (1 << 20) + 3",
        ],
    );
    let text = kcrash_harness::run::stdout(&out, "eval");
    let (json, plain): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| l.starts_with('{'));
    let docs: Vec<serde_json::Value> = json
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ring1 = expected.rings.iter().find(|r| r.ring == 1).unwrap();
    assert_eq!(docs[0]["decimal"], ring1.num_recs.to_string());
    assert_eq!(docs[1]["hexadecimal"], format!("{klogs:#x}"));
    assert_eq!(docs[2]["decimal"], "-1");
    assert_eq!(docs[2]["hexadecimal"], "0xffffffffffffffff");
    for d in &docs {
        let radix = |key: &str, prefix: &str, r: u32| {
            u64::from_str_radix(d[key].as_str().unwrap().strip_prefix(prefix).unwrap(), r).unwrap()
        };
        let hex = radix("hexadecimal", "0x", 16);
        assert_eq!(
            (radix("octal", "0o", 8), radix("binary", "0b", 2)),
            (hex, hex),
            "{d}"
        );
    }
    assert_eq!(
        plain,
        [
            "hexadecimal: 0x100003",
            "    decimal: 1048579",
            "      octal: 0o4000003",
            "     binary: 0b0000000000000000000000000000000000000000000100000000000000000011",
        ]
    );
}
