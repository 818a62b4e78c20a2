//! `kcrash regress` through the real binary: the committed corpus passes, and a copy of one
//! entry broken on purpose (a wrong expected line, a missing dump, a corrupted dump, a truncated
//! gzip dump) gives the failure or error it should, in the text report, the JSON report, the
//! JUnit report and the exit status. The copies' manifests are written with
//! `kcrash::regress::manifest`, the writer the harness uses for the corpus.

use std::path::Path;
use std::process::Output;

mod common;

use common::{kcrash, text};
use kcrash::regress::manifest::{Check, Compare, Manifest};
use kcrash_harness::corpus::default_dir as corpus;
use serde_json::Value;

fn regress(args: &[&str]) -> Output {
    kcrash().run(["regress"].iter().chain(args))
}

const ENTRY: &str = "bare/wrap";

/// A corpus of one entry of the committed one (image, dumps, expected outputs), with
/// `extra` checks added to its manifest.
fn fixture(extra: &[Check]) -> tempfile::TempDir {
    let src = corpus();
    let mut manifest = Manifest::load(&src).expect("corpus/manifest.toml");
    manifest.entries.retain(|e| e.name == ENTRY);
    manifest.entries[0].checks.extend_from_slice(extra);
    manifest.kernels.retain(|k| k.name == "bare");
    let dir = tempfile::tempdir().unwrap();
    let copy = |rel: &str| {
        let to = dir.path().join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(src.join(rel), &to).unwrap_or_else(|e| panic!("{rel}: {e}"));
    };
    copy(&manifest.kernels[0].image);
    let entry = &manifest.entries[0];
    for d in &entry.dumps {
        copy(&d.path);
    }
    for c in entry.checks.iter().filter(|c| src.join(&c.expect).exists()) {
        copy(&c.expect);
    }
    manifest.store(dir.path()).unwrap();
    dir
}

/// Runs regress on `dir` with both reports; the exit status, stdout, JSON report and JUnit.
fn run(dir: &Path, extra: &[&str]) -> (Option<i32>, String, Value, String) {
    let (json, junit) = (dir.join("report.json"), dir.join("report.xml"));
    let mut args = vec![
        dir.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--color",
        "never",
    ];
    args.extend_from_slice(extra);
    let out = regress(&args);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let junit = std::fs::read_to_string(&junit).unwrap();
    (out.status.code(), text(&out.stdout), report, junit)
}

/// The JSON report's cases of one dump: (command, status).
fn statuses(report: &Value, dump: &str) -> Vec<(String, String)> {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["dump"] == dump)
        .map(|c| {
            (
                c["command"].as_str().unwrap().to_owned(),
                c["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn counts(report: &Value) -> (u64, u64, u64) {
    let n = |k: &str| report[k].as_u64().unwrap();
    (n("passed"), n("failed"), n("errored"))
}

#[test]
fn the_committed_corpus_reads_as_expected() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let dir = corpus();
    let out = regress(&[
        dir.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--json",
        "-",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("--json - is JSON");
    let (passed, failed, errored) = counts(&report);
    // Every check of every entry on each of its dumps, as the manifest lists them.
    let manifest = Manifest::load(&dir).expect("corpus/manifest.toml");
    let dumps: usize = manifest.entries.iter().map(|e| e.dumps.len()).sum();
    let checks: usize = manifest
        .entries
        .iter()
        .map(|e| e.dumps.len() * e.checks.len())
        .sum();
    assert!(checks >= 4 * dumps, "every dump has its four checks");
    assert_eq!((passed, failed, errored), (checks as u64, 0, 0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{dumps} dumps, {checks} checks: {checks} passed, 0 failed, 0 errored"
        )),
        "{stderr}"
    );
}

#[test]
fn a_wrong_expected_line_fails_with_a_diff_on_every_dump() {
    let dir = fixture(&[]);
    let path = dir.path().join(ENTRY).join("regress/klog-full.txt");
    let good = std::fs::read_to_string(&path).unwrap();
    let line = good.lines().nth(2).unwrap().to_owned();
    let wrong = line.replace("pageout", "pagein");
    std::fs::write(&path, good.replacen(&line, &wrong, 1)).unwrap();

    let (status, stdout, report, junit) = run(dir.path(), &[]);
    assert_eq!(status, Some(1), "{stdout}");
    assert_eq!(counts(&report), (12, 4, 0), "{stdout}");
    for dump in ["vmcore.elf.gz", "vmcore-paging.elf.gz", "vmcore.kdump"] {
        let header = format!("FAIL {ENTRY} [");
        assert!(stdout.contains(&header), "{stdout}");
        assert!(
            statuses(&report, &format!("{ENTRY}/{dump}"))
                .contains(&("klog 0 full".into(), "failed".into())),
            "{report}"
        );
    }
    // The diff: expected lines `-`, what the dump gave `+`, under the file names.
    let diff = format!("-{wrong}\n+{line}\n");
    assert_eq!(stdout.matches(&diff).count(), 4, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "--- {ENTRY}/regress/klog-full.txt\n+++ {ENTRY}/vmcore.kdump\n"
        )),
        "{stdout}"
    );
    let failed = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["status"] == "failed")
        .unwrap();
    assert!(failed["diff"].as_str().unwrap().contains(&diff), "{failed}");
    assert!(
        junit.contains(r#"<testsuite name="bare/wrap" tests="16" failures="4" errors="0""#),
        "{junit}"
    );
    assert!(
        junit.contains("<failure message=\"bare/wrap/vmcore.kdump differs from bare/wrap/regress/klog-full.txt\">"),
        "{junit}"
    );
    assert!(
        stdout.contains("16 checks: 12 passed, 4 failed, 0 errored"),
        "{stdout}"
    );
}

#[test]
fn a_missing_dump_is_an_error_naming_it() {
    let dir = fixture(&[]);
    let dump = format!("{ENTRY}/vmcore.elf.gz");
    std::fs::remove_file(dir.path().join(&dump)).unwrap();

    let (status, stdout, report, junit) = run(dir.path(), &[]);
    assert_eq!(status, Some(1), "{stdout}");
    assert_eq!(counts(&report), (12, 0, 4), "{stdout}");
    assert!(statuses(&report, &dump).iter().all(|(_, s)| s == "errored"));
    // Once per dump in the text, with the reason.
    let line = stdout
        .lines()
        .find(|l| l.starts_with("ERROR"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.starts_with(&format!("ERROR {ENTRY} [elf] {dump}: every check: ")),
        "{line}"
    );
    assert!(
        line.contains("vmcore.elf.gz") && line.contains("No such file"),
        "{line}"
    );
    let reason = report["cases"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("No such file"), "{reason}");
    assert_eq!(junit.matches("<error message=").count(), 4, "{junit}");
    assert!(
        stdout.contains("12 passed, 0 failed, 4 errored"),
        "{stdout}"
    );
}

#[test]
fn corrupted_dumps_are_errors_with_their_reason() {
    let dir = fixture(&[]);
    // The kdump file's signature overwritten; the gzip ELF dump cut in half.
    let kdump = dir.path().join(ENTRY).join("vmcore.kdump");
    let mut bytes = std::fs::read(&kdump).unwrap();
    bytes[..8].copy_from_slice(b"XXXXXXXX");
    std::fs::write(&kdump, bytes).unwrap();
    let gz = dir.path().join(ENTRY).join("vmcore-paging.elf.gz");
    let bytes = std::fs::read(&gz).unwrap();
    std::fs::write(&gz, &bytes[..bytes.len() / 2]).unwrap();

    let (status, stdout, report, junit) = run(dir.path(), &[]);
    assert_eq!(status, Some(1), "{stdout}");
    assert_eq!(counts(&report), (8, 0, 8), "{stdout}");
    let errors: Vec<&str> = stdout.lines().filter(|l| l.starts_with("ERROR")).collect();
    assert_eq!(errors.len(), 2, "{stdout}");
    assert!(
        errors[0].contains("vmcore-paging.elf.gz") && errors[0].contains("gzip"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].contains("vmcore.kdump") && errors[1].contains("not a recognised dump"),
        "{}",
        errors[1]
    );
    assert!(
        junit.contains(r#"tests="16" failures="0" errors="8""#),
        "{junit}"
    );
}

#[test]
fn update_rewrites_expected_output_and_says_what_changed() {
    // A command that fails is a check too: its error is its output.
    let failing = Check {
        command: "klog NOSUCH".into(),
        expect: format!("{ENTRY}/regress/klog-nosuch.txt"),
        compare: Compare::Text,
        replace: Vec::new(),
    };
    // A pipeline's output is captured, not printed.
    let piped = Check {
        command: "klog 0 full | grep -c 'of chore shell'".into(),
        expect: format!("{ENTRY}/regress/shell-count.txt"),
        compare: Compare::Text,
        replace: Vec::new(),
    };
    let dir = fixture(&[failing.clone(), piped.clone()]);
    let path = dir.path().join(ENTRY).join("regress/klog-s.txt");
    let good = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{good}a line no dump prints\n")).unwrap();

    let (status, stdout, report, _) = run(dir.path(), &["--update"]);
    assert_eq!(status, Some(0), "{stdout}");
    assert_eq!(counts(&report), (24, 0, 0), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "updated {ENTRY}/regress/klog-s.txt (+0 -1 lines)\n"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("-a line no dump prints\n"), "{stdout}");
    assert!(
        stdout.contains(&format!("created {}\n", failing.expect)),
        "{stdout}"
    );
    assert!(
        stdout.contains("update: 3 expected files written (2 new, 1 changed)"),
        "{stdout}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), good);
    let nosuch = std::fs::read_to_string(dir.path().join(&failing.expect)).unwrap();
    assert!(nosuch.starts_with("--- error ---\nklog: "), "{nosuch}");
    assert!(nosuch.contains("NOSUCH"), "{nosuch}");
    let full = dir.path().join(ENTRY).join("regress/klog-full.txt");
    let full = std::fs::read_to_string(full).unwrap();
    let shell = full
        .lines()
        .filter(|l| l.contains("of chore shell"))
        .count();
    assert!(shell > 0);
    let count = std::fs::read_to_string(dir.path().join(&piped.expect)).unwrap();
    assert_eq!(count, format!("{shell}\n"));

    // Now it all passes, and a second update changes nothing.
    let (status, stdout, report, _) = run(dir.path(), &["--update"]);
    assert_eq!(status, Some(0), "{stdout}");
    assert_eq!(counts(&report), (24, 0, 0));
    assert!(
        stdout.contains("update: 0 expected files written"),
        "{stdout}"
    );
}

#[test]
fn bad_arguments_and_manifests_exit_2() {
    let missing = regress(&["/nonexistent-corpus"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("/nonexistent-corpus/manifest.toml"));
    let dir = fixture(&[]);
    let none = regress(&[dir.path().to_str().unwrap(), "--filter", "^nothing$"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(text(&none.stderr).contains("--filter"));
    let jobs = regress(&[dir.path().to_str().unwrap(), "--jobs", "0"]);
    assert_eq!(jobs.status.code(), Some(2));
}
