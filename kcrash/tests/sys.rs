//! `sys` through the real binary on corpus dumps: what it says of the dump and the crash against
//! the panic line the kernel printed (console.log), and of a process core against `readelf`.

use std::path::Path;
use std::process::Command;

mod common;

use common::{hex, kcrash, vmlinux, word_after, DUMPS};
use kcrash_harness::run::stdout;
use kcrash_harness::{corpus, tools};
use serde_json::Value;

#[test]
fn sys_tells_the_dump_and_the_crash() {
    let console = std::fs::read_to_string(corpus::file("bare/fault/console.log")).unwrap();
    let panic = console
        .lines()
        .find(|l| l.starts_with("KCRASH-PANIC"))
        .unwrap();
    let cr2 = word_after(panic, "cr2");
    for dump in DUMPS {
        let path = corpus::file(&format!("bare/fault/{dump}"));
        let out = stdout(
            &kcrash().commands(&path, &vmlinux(), &["sys --json", "sys"]),
            "kcrash",
        );
        let (json, text) = out.split_at(out.find("\n}\n").unwrap() + 3);
        let doc: Value = serde_json::from_str(json).unwrap();
        assert_eq!(doc["dumpfile"].as_str(), Some(path.to_str().unwrap()));
        assert_eq!(
            doc["size"].as_u64(),
            Some(std::fs::metadata(&path).unwrap().len())
        );
        assert_eq!(doc["cpus"].as_u64(), Some(1), "the harness runs one vCPU");
        assert_eq!(doc["image"].as_str(), Some(vmlinux().to_str().unwrap()));
        assert_eq!(hex(&doc["stops"][0]["cr2"]), cr2, "{dump}");
        assert!(doc["panic"]
            .as_str()
            .unwrap()
            .contains(&format!("{cr2:#x}")));
        assert!(doc["producer"].as_str().unwrap().contains("QEMU"));
        assert_eq!(
            doc["compression"].as_str().unwrap().contains("gzip"),
            dump.ends_with(".gz")
        );
        assert!(text.contains(&format!("cr2 {cr2:#018x}")), "{text}");
        assert!(text.contains("   DUMPFILE: "));
    }
}

/// `sys --json` of a corpus core with its program.
fn sys_json(core: &str, image: &Path) -> Value {
    let out = stdout(
        &kcrash().commands(&corpus::file(core), image, &["sys --json"]),
        "kcrash",
    );
    serde_json::from_str(&out).unwrap()
}

#[test]
fn sys_on_a_process_core_says_signal_and_files() {
    let image = corpus::file("hosted/hosted");
    let doc = sys_json("hosted/rings/core.gz", &image);
    // The scenario ends in abort() (console: "KCRASH-PANIC rings: abort after logging").
    assert!(doc["panic"]
        .as_str()
        .unwrap()
        .contains("signal 6 (SIGABRT)"));
    let backed = doc["file_backed"].as_array().unwrap();
    assert!(backed
        .iter()
        .any(|f| f["path"].as_str() == Some(image.to_str().unwrap())));
    let build_id = tools::output(Command::new("readelf").arg("-n").arg(&image));
    let id = build_id
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap();
    assert_eq!(doc["build_id"].as_str(), Some(id));
    // gdb's gcore of the running program records no signal, and sys does not make one up.
    let doc = sys_json("hosted/strings-gcore/core.gz", &image);
    assert!(doc["panic"]
        .as_str()
        .unwrap()
        .starts_with("no signal recorded"));
}
