//! `kcrash batch` and `kcrash merge` over the corpus's real dumps: a report per dump whose every
//! command's output is what kcrash prints for that dump on its own; a run after it skips the
//! complete reports; a run that hangs or grows ends alone, at its bounds; shards run by GNU
//! parallel, merged, are the whole batch; `kcrash regress --shard` splits the corpus's entries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kcrash::regress::manifest::Manifest;
use kcrash_harness::{corpus, tools};
use serde_json::Value;

/// The commands every dump of these tests runs.
const COMMANDS: [&str; 2] = ["klog -s --json", "klog 0 full -n 30"];

fn kcrash() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kcrash"))
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("kcrash runs")
}

/// A list file of the corpus's dumps of `entries` (all when empty), each with its image, in
/// `dir`; the dumps as kcrash names them, with their images.
fn corpus_list(dir: &Path, entries: &[&str]) -> (PathBuf, Vec<(PathBuf, PathBuf)>) {
    let root = corpus::file("");
    let manifest = Manifest::load(&root).expect("the corpus manifest");
    let mut dumps = Vec::new();
    for entry in &manifest.entries {
        if !entries.is_empty() && !entries.contains(&entry.name.as_str()) {
            continue;
        }
        let image = root.join(&manifest.kernel(&entry.kernel).expect("its kernel").image);
        for d in &entry.dumps {
            dumps.push((d.argument(&root), image.clone()));
        }
    }
    let text: String = dumps
        .iter()
        .map(|(d, i)| format!("{} {}\n", d.display(), i.display()))
        .collect();
    let list = dir.join("dumps.list");
    std::fs::write(&list, text).unwrap();
    (list, dumps)
}

fn batch(out: &Path, extra: &[&str], sources: &[&str]) -> Output {
    let mut cmd = kcrash();
    cmd.args(["batch", "--quiet", "-o"]).arg(out);
    for c in COMMANDS {
        cmd.args(["-c", c]);
    }
    run(cmd.args(extra).args(sources))
}

fn summary(file: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(file).expect("a summary")).expect("JSON")
}

/// Each dump's status, by dump, from a summary.
fn statuses(summary: &Value) -> BTreeMap<String, String> {
    summary["dumps_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let status = l["status"].as_str().unwrap().to_owned();
            (l["dump"].as_str().unwrap().to_owned(), status)
        })
        .collect()
}

#[test]
fn every_dump_gets_the_report_its_own_session_would_print() {
    let dir = tempfile::tempdir().unwrap();
    let entries = [
        "bare/rings",
        "hosted-c/rings",
        "hosted/strings",
        "bare-percpu/percpu",
    ];
    let (list, dumps) = corpus_list(dir.path(), &entries);
    assert!(dumps.len() >= 8, "{dumps:?}");
    let out = dir.path().join("out");
    let ran = batch(&out, &["-j", "2"], &[&format!("@{}", list.display())]);
    assert_eq!(
        ran.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ran.stdout)
    );
    let summary = summary(&out.join("summary.json"));
    assert_eq!(summary["dumps"], dumps.len());
    assert_eq!(summary["counts"]["ok"], dumps.len());
    for line in summary["dumps_list"].as_array().unwrap() {
        let report: Value =
            serde_json::from_slice(&std::fs::read(line["report"].as_str().unwrap()).unwrap())
                .unwrap();
        let dump = line["dump"].as_str().unwrap();
        let (_, image) = dumps
            .iter()
            .find(|(d, _)| d.as_os_str() == dump)
            .unwrap_or_else(|| panic!("{dump} is not one of the list's"));
        assert_eq!(report["image"], image.display().to_string(), "{dump}");
        assert!(report["peak_rss_kib"].as_u64().unwrap() > 0, "{dump}");
        // What kcrash prints for the dump on its own, command by command.
        for (i, command) in COMMANDS.iter().enumerate() {
            let alone = run(kcrash().args(["-s", "-c", command]).arg(dump).arg(image));
            let got = &report["commands"][i];
            assert_eq!(got["command"], *command);
            assert_eq!(
                got["stdout"].as_str().unwrap(),
                String::from_utf8_lossy(&alone.stdout),
                "{dump}: {command}"
            );
        }
        // --json's output is kept as JSON too.
        let rings = &report["commands"][0]["json"]["rings"];
        assert!(
            rings.as_array().is_some_and(|r| !r.is_empty()),
            "{dump}: {report}"
        );
    }

    // A second run finds every report complete and runs nothing; one removed is run again.
    let again = batch(&out, &[], &[&format!("@{}", list.display())]);
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(text.contains("(0 run now,"), "{text}");
    let first = summary["dumps_list"][0]["report"].as_str().unwrap();
    std::fs::remove_file(first).unwrap();
    let third = batch(&out, &[], &[&format!("@{}", list.display())]);
    let text = String::from_utf8_lossy(&third.stdout);
    assert!(text.contains("(1 run now,"), "{text}");
    assert!(Path::new(first).exists());
}

/// Dumps found in a directory by their content: every dump file of the corpus entries, and
/// nothing else there (images, consoles, expected outputs).
#[test]
fn a_directory_gives_its_dumps_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let entry = corpus::file("bare/rings");
    let ran = run(kcrash()
        .args(["batch", "--quiet", "-c", "klog -s", "-o"])
        .arg(&out)
        .arg(&entry));
    let summary = summary(&out.join("summary.json"));
    let found: Vec<String> = statuses(&summary).into_keys().collect();
    let mut want: Vec<String> = std::fs::read_dir(&entry)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("vmcore")
        })
        .map(|p| p.display().to_string())
        .collect();
    want.sort();
    assert_eq!(found, want, "{}", String::from_utf8_lossy(&ran.stdout));
    // The raw image has no header to be told by and no address: not opened, and said why.
    let raw = statuses(&summary)
        .into_iter()
        .find(|(d, _)| d.ends_with("vmcore.raw.gz"));
    assert_eq!(raw.map(|(_, s)| s).as_deref(), Some("not_opened"));
    assert_eq!(ran.status.code(), Some(1));
}

/// A run that does not end is killed at its time limit, with whatever it started; one that
/// cannot get the memory it asks for ends at its limit; the batch reports both and goes on.
#[test]
fn a_run_ends_alone_at_its_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let dump = corpus::file("bare/rings/vmcore.kdump");
    let image = corpus::file("bare/vmlinux");
    let list = dir.path().join("one.list");
    std::fs::write(&list, format!("{} {}\n", dump.display(), image.display())).unwrap();
    let out = dir.path().join("hangs");
    let ran = run(kcrash()
        .args([
            "batch",
            "--quiet",
            "--timeout",
            "1",
            "-c",
            "!sleep 60",
            "-o",
        ])
        .arg(&out)
        .arg(format!("@{}", list.display())));
    assert_eq!(ran.status.code(), Some(1));
    let s = summary(&out.join("summary.json"));
    assert_eq!(s["counts"]["timed out"], 1, "{s}");
    assert!(
        s["dumps_list"][0]["seconds"].as_f64().unwrap() < 30.0,
        "{s}"
    );
    // The shell and its sleep went with the worker's process group.
    let left = Command::new("pgrep").args(["-f", "sleep 60"]).output();
    if let Ok(left) = left {
        assert!(
            left.stdout.is_empty(),
            "left running: {}",
            String::from_utf8_lossy(&left.stdout)
        );
    }

    let out = dir.path().join("grows");
    let ran = run(kcrash()
        .args([
            "batch",
            "--quiet",
            "--memory",
            "2",
            "-c",
            "klog 0 full",
            "-o",
        ])
        .arg(&out)
        .arg(format!("@{}", list.display())));
    assert_eq!(ran.status.code(), Some(1));
    let s = summary(&out.join("summary.json"));
    let line = &s["dumps_list"][0];
    assert!(
        matches!(line["status"].as_str(), Some("out_of_memory" | "crashed")),
        "{s}"
    );
    // Either way the line says what happened, from the worker's own words.
    assert!(line["why"].as_str().is_some_and(|w| !w.is_empty()), "{s}");
}

/// Three shards run by GNU parallel over one list, merged: the same dumps with the same
/// outcomes as one batch of the whole list, each shard a third.
#[test]
fn shards_run_by_gnu_parallel_merge_into_the_whole() {
    if !tools::available_for(
        "shards_run_by_gnu_parallel_merge_into_the_whole",
        &["parallel"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (list, dumps) = corpus_list(
        dir.path(),
        &["bare/rings", "hosted-c/rings", "hosted/rings"],
    );
    let whole = dir.path().join("whole");
    batch(&whole, &[], &[&format!("@{}", list.display())]);
    let exe = env!("CARGO_BIN_EXE_kcrash");
    let shard_dir = |k: u32| dir.path().join(format!("shard-{k}"));
    let parallel = Command::new("parallel")
        .args(["--will-cite", "--halt", "never"])
        .arg(format!(
            "{exe} batch --quiet -c 'klog -s --json' -c 'klog 0 full -n 30' --shard {{}}/3 -o {}/shard-{{}} @{}",
            dir.path().display(),
            list.display()
        ))
        .args([":::", "1", "2", "3"])
        .output()
        .expect("parallel runs");
    assert!(
        parallel.status.success(),
        "{}",
        String::from_utf8_lossy(&parallel.stderr)
    );
    for k in 1..=3 {
        let s = summary(&shard_dir(k).join(format!("summary-{k}-of-3.json")));
        // Every third dump from the k-th.
        let share = (dumps.len() + 3 - k as usize) / 3;
        assert_eq!(s["dumps"], share, "shard {k}: {s}");
    }
    let merged = dir.path().join("merged");
    let ran = run(kcrash()
        .arg("merge")
        .arg(&merged)
        .args((1..=3).map(shard_dir)));
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert_eq!(
        statuses(&summary(&merged.join("summary.json"))),
        statuses(&summary(&whole.join("summary.json")))
    );
}

/// `regress --shard K/N`: the shards run every entry of the manifest once between them.
#[test]
fn regress_shards_split_the_corpus_entries() {
    let mut seen: Vec<String> = Vec::new();
    for k in 1..=3 {
        let out = run(kcrash()
            .args([
                "regress",
                "--filter",
                "^bare/",
                "--shard",
                &format!("{k}/3"),
                "--json",
                "-",
            ])
            .arg(corpus::file("")));
        let report: Value = serde_json::from_slice(&out.stdout).expect("regress --json");
        let mut names: Vec<String> = report["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["entry"].as_str().unwrap().to_owned())
            .collect();
        names.dedup();
        assert!(!names.is_empty(), "shard {k}");
        seen.extend(names);
    }
    let manifest = Manifest::load(&corpus::file("")).unwrap();
    let mut want: Vec<String> = manifest
        .entries
        .iter()
        .map(|e| e.name.clone())
        .filter(|n| n.starts_with("bare/"))
        .collect();
    want.sort();
    seen.sort();
    assert_eq!(seen, want);
}
