//! Event schemata through the real binary on a real dump (the bare kernel's `strings` crash, as
//! kdump): files given by `--schema` and found in the configuration directory name events in
//! `klog`, `timeline` and their JSON; a bad file is one error line and is left out while the rest
//! load; two files claiming one event are refused naming both places; `--raw` and `schema`.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

use common::{json_lines, kcrash, text, vmlinux};
use kcrash_harness::corpus;
use serde_json::Value;

fn dump() -> Vec<PathBuf> {
    vec![corpus::file("bare/strings/vmcore.kdump"), vmlinux()]
}

/// `kcrash -s [--schema PATH]... -c COMMAND... DUMP IMAGE`, with `config` as XDG_CONFIG_HOME.
fn run(schemata: &[&Path], config: Option<&Path>, commands: &[&str]) -> Output {
    let mut cmd = kcrash().session(commands);
    for s in schemata {
        cmd.arg("--schema").arg(s);
    }
    if let Some(c) = config {
        cmd.env("XDG_CONFIG_HOME", c);
    }
    cmd.args(dump()).output().expect("kcrash runs")
}

const OPEN: &str = r#"
[[event]]
log = "KLog"
format = "open %s"
name = "open.file"
display = "opened {path}"
fields = [{ name = "path", from = "data1", type = "string", max = 32 }]
"#;

/// A file claiming the event a shipped file claims.
const POST_PROCESS_AGAIN: &str = r#"
[[event]]
log = "KLog"
format = "postProcess: task:%016lx curPD:%d"
name = "again"
"#;

const BROKEN: &str = "[[event]]\nlog = \"KLog\"\nname = 3\n";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn given_files_name_events_and_bad_ones_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    write(dir, "open.toml", OPEN);
    let broken = write(dir, "broken.toml", BROKEN);
    let again = write(dir, "again.toml", POST_PROCESS_AGAIN);
    write(dir, "README", "not a schema: skipped in a directory");
    let named = write(dir, "notes.txt", "");
    let out = run(&[dir, &named], None, &["klog FS", "klog FS --raw"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let errors: Vec<&str> = stderr.lines().collect();
    assert_eq!(errors.len(), 3, "one line per refused file: {stderr}");
    assert!(
        errors
            .iter()
            .any(|l| l.starts_with(&format!("kcrash: {}:3:", broken.display()))),
        "file, line and column: {stderr}"
    );
    assert!(
        errors
            .iter()
            .any(|l| l.contains(&again.display().to_string())
                && l.contains("plugins/klog/schemas/test-kernels.toml:")),
        "both places named: {stderr}"
    );
    assert!(
        errors
            .iter()
            .any(|l| l.contains("notes.txt") && l.contains("no schema syntax")),
        "{stderr}"
    );
    let named: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("{open.file"))
        .collect();
    assert_eq!(
        named,
        ["[FS] open /etc/motd {open.file path=\"/etc/motd\"}"],
        "{stdout}"
    );
    // --raw: the second command prints the records as the kernel logged them.
    assert_eq!(
        stdout.matches("[FS] open /etc/motd\n").count(),
        1,
        "{stdout}"
    );
}

#[test]
fn the_configuration_directory_is_read_and_json_carries_the_schema() {
    let config = tempfile::tempdir().unwrap();
    let dir = config.path().join("kcrash/schemata");
    std::fs::create_dir_all(&dir).unwrap();
    write(&dir, "open.toml", OPEN);
    let out = run(
        &[],
        Some(config.path()),
        &[
            "timeline --json --log KLog -g 'open[.]file'",
            "schema --json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let (events, report) = stdout.split_at(stdout.find("{\n").expect("schema's document"));
    let events = json_lines(events);
    assert_eq!(events.len(), 1, "{stdout}");
    let schema = &events[0]["schema"];
    assert_eq!(schema["name"], "open.file");
    assert_eq!(schema["display"], "opened /etc/motd");
    assert_eq!(schema["fields"][0]["type"], "text");
    assert_eq!(schema["fields"][0]["value"], "/etc/motd");
    assert!(schema["origin"].as_str().unwrap().ends_with("open.toml:2"));
    // The raw words are still there beside the schema's reading.
    assert_eq!(events[0]["fields"][2]["name"], "data1");
    let report: Value = serde_json::from_str(report).unwrap();
    let file = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"].as_str().unwrap().ends_with("open.toml"))
        .expect("the configuration directory's file is listed");
    assert_eq!(file["syntax"], "kcrash");
    assert_eq!(file["matched"], "1");
}

#[test]
fn an_unreadable_string_is_marked_not_guessed() {
    let out = run(
        &[],
        None,
        &["klog VM --json", "timeline --log KLog -g '^VM +map'"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let json: String = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| format!("{l}\n"))
        .collect();
    let maps: Vec<Value> = json_lines(&json)
        .into_iter()
        .filter(|r| r["format"] == "map %s at %p")
        .collect();
    assert_eq!(maps.len(), 2, "{stdout}");
    for r in &maps {
        let field = &r["schema"]["fields"][0];
        assert_eq!(field["type"], "unreadable", "{r}");
        assert_eq!(
            r["schema"]["marks"][0],
            format!("what: unreadable at {}", field["addr"].as_str().unwrap())
        );
    }
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(" map what="))
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines
        .iter()
        .all(|l| l.contains("<schema: what: unreadable at 0x")));
}
