//! Every command's `--json` output, on real dumps, against the schema checked in for it
//! (kcrash/schemas/): the contract scripts rely on. Corpus dumps cover klog, sym, rd, p, whatis,
//! ptype, struct and sys; the Linux guest's dumps (when there) add mod, log and ps.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kcrash_harness::{corpus, linux, run, tools};
use serde_json::Value;

mod common;

fn schema(name: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("schemas/{name}.schema.json"));
    let text = std::fs::read_to_string(&path).expect("schema file");
    let value: Value = serde_json::from_str(&text).expect("schema is JSON");
    jsonschema::validator_for(&value).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// kcrash's standard output for `command` on `files`; the command must succeed, or fail only
/// because memory it was asked for is unreadable (and marked in its output).
fn output(files: &[PathBuf], command: &str) -> String {
    let out = common::kcrash()
        .session(&[command])
        .args(files)
        .output()
        .expect("kcrash runs");
    let marked = out.status.code() == Some(1)
        && common::text(&out.stderr)
            .lines()
            .last()
            .is_some_and(|l| l.ends_with("(marked above)"));
    if marked {
        return common::text(&out.stdout);
    }
    run::stdout(&out, command)
}

/// Whether the output is one document (pretty-printed) or JSON Lines.
#[derive(Clone, Copy)]
enum Shape {
    Document,
    Lines,
}

/// Runs `command` and checks each document it prints against `schema`; returns them.
fn check(files: &[PathBuf], command: &str, schema_name: &str, shape: Shape) -> Vec<Value> {
    let validator = schema(schema_name);
    let text = output(files, command);
    let docs: Vec<Value> = match shape {
        Shape::Document => vec![serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{command}: not one JSON document: {e}\n{text}"))],
        Shape::Lines => text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{command}: {e}: {l}")))
            .collect(),
    };
    assert!(!docs.is_empty(), "{command}: printed nothing");
    for doc in &docs {
        let errors: Vec<String> = validator
            .iter_errors(doc)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{command}: does not match {schema_name}.schema.json: {errors:?}\n{doc}"
        );
    }
    docs
}

/// A command, the schema it answers to, and how it prints.
type Check = (&'static str, &'static str, Shape);

/// The commands that read any dump whose kernel or program logs through KLog (in its image or
/// in a module), and the schema each answers to.
const COMMON: &[Check] = &[
    ("klog 0 --json", "klog", Shape::Lines),
    ("klog --salvage --json", "klog", Shape::Lines),
    ("klog -s --json", "klog-summary", Shape::Document),
    ("sym --json KLogs KLogBuffer", "sym", Shape::Lines),
    ("sym -l --json init", "sym", Shape::Lines),
    ("rd --json KLogs 16", "rd", Shape::Lines),
    ("rd -s --json KLogs 4", "rd", Shape::Lines),
    ("rd -32 --json KLogs 4", "rd", Shape::Lines),
    // Unreadable memory: a run of it, and single units at the edge of the readable.
    ("rd --json 0x10 4", "rd", Shape::Lines),
    ("p --json KLogs", "print", Shape::Lines),
    ("p --json KLogs[1].name", "print", Shape::Lines),
    ("p --json &KLogs[2]", "print", Shape::Lines),
    ("p --json DebugFlags", "print", Shape::Lines),
    ("eval --json &KLogs[1]", "eval", Shape::Lines),
    ("eval --json -1", "eval", Shape::Lines),
    ("sys --json", "sys", Shape::Document),
    ("bt -a -f --json", "bt", Shape::Document),
    ("plugins --json", "plugins", Shape::Document),
    ("timeline --json", "event", Shape::Lines),
    ("timeline --json --raw -n 50", "event", Shape::Lines),
    ("schema --json", "schema", Shape::Document),
    ("schema -e --json", "schema", Shape::Document),
];

/// Types of the KLog's image (the test kernels and programs): whatis, ptype and struct read
/// the main image's types.
const KLOG_TYPES: &[Check] = &[
    ("whatis --json KLogs", "whatis", Shape::Lines),
    ("ptype --json KLog", "ptype", Shape::Lines),
    ("struct --json KLog", "ptype", Shape::Lines),
    ("struct --json KLog &KLogs[1]", "print", Shape::Lines),
];

/// Linux's own types, from vmlinux, and its own structures.
const LINUX: &[Check] = &[
    ("whatis --json jiffies_64", "whatis", Shape::Lines),
    ("ptype --json struct module", "ptype", Shape::Lines),
    ("struct --json list_head", "ptype", Shape::Lines),
    ("struct --json list_head &modules", "print", Shape::Lines),
    ("p --json runqueues", "print", Shape::Lines),
    ("p --json irq_stat:a", "print", Shape::Lines),
    ("log -m -T --json", "log", Shape::Lines),
    ("timeline --json -n 500", "event", Shape::Lines),
];

fn common_commands(files: &[PathBuf], more: &[Check]) {
    for &(command, schema, shape) in COMMON.iter().chain(more) {
        check(files, command, schema, shape);
    }
    // A string in the dump: the first record's format.
    check(
        files,
        &format!("rd -a --json {:#x}", a_format_string(files)),
        "rd",
        Shape::Lines,
    );
    // The image's first function with a size, with its source lines; and memory no dump maps.
    let function = a_function(files);
    check(
        files,
        &format!("dis -l --json {function}"),
        "dis",
        Shape::Lines,
    );
    check(
        files,
        "dis --json 0xffff888000000000 2",
        "dis",
        Shape::Lines,
    );
}

/// The image's first function symbol with a size.
fn a_function(files: &[PathBuf]) -> String {
    output(files, "sym -l --json")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|s| {
            s["type"]
                .as_str()
                .is_some_and(|t| t.eq_ignore_ascii_case("t"))
                && s["size"].as_u64() > Some(0)
        })
        .and_then(|s| s["symbol"].as_str().map(str::to_owned))
        .expect("a function")
}

/// The first format string a ring's record points to: an address `rd -a` reads as a string.
fn a_format_string(files: &[PathBuf]) -> u64 {
    let line = output(files, "klog 0 --json -n 1");
    let record: Value = serde_json::from_str(line.lines().next().expect("a record")).unwrap();
    let desc = record["desc"].as_str().expect("desc is a hex string");
    u64::from_str_radix(desc.trim_start_matches("0x"), 16).expect("hex")
}

#[test]
fn corpus_outputs_match_their_schemas() {
    for (dump, image) in [
        ("bare/rings/vmcore.kdump", "bare/vmlinux"),
        ("bare/scribbled/vmcore.elf.gz", "bare/vmlinux"),
        ("hosted/rings/core.gz", "hosted/hosted"),
        ("hosted-c/rings/core.gz", "hosted-c/hosted-c"),
        ("hosted-c/torn/core.gz", "hosted-c/hosted-c"),
    ] {
        let files = [corpus::file(dump), corpus::file(image)];
        assert!(
            files[0].exists(),
            "{} is not in the corpus",
            files[0].display()
        );
        common_commands(&files, KLOG_TYPES);
    }
}

#[test]
fn qnx_trace_outputs_match_their_schemas() {
    for (dump, image) in [
        ("bare-qnx/qnx-wrap/vmcore-paging.elf.gz", "bare-qnx/vmlinux"),
        ("hosted-qnx/qnx-unfinished/core.gz", "hosted-qnx/hosted-qnx"),
        ("hosted-qnx/qnx-cycle/core.gz", "hosted-qnx/hosted-qnx"),
    ] {
        let files = [corpus::file(dump), corpus::file(image)];
        check(&files, "tracelog --json", "event", Shape::Lines);
        check(&files, "tracelog -s --json", "rings", Shape::Document);
        check(&files, "timeline --json", "event", Shape::Lines);
    }
}

/// A JSON address is a string that gives back exactly the address the text shows, through jq
/// as a user would pipe it (jq reads JSON numbers as doubles: an address there lost digits).
#[test]
fn addresses_survive_jq() {
    if !tools::runs("addresses_survive_jq", "jq") {
        return;
    }
    let files = [common::kdump(), common::vmlinux()];
    for name in ["KLogs", "KLogBuffer", "klogLevel"] {
        let text = output(&files, &format!("sym {name}"));
        let shown = text.split_whitespace().next().expect("an address");
        let json = output(&files, &format!("sym --json {name}"));
        let mut jq = Command::new("jq")
            .args(["-r", ".address"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("jq");
        std::io::Write::write_all(&mut jq.stdin.take().unwrap(), json.as_bytes()).unwrap();
        let out = jq.wait_with_output().expect("jq output");
        let from_jq = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            u64::from_str_radix(from_jq.trim().trim_start_matches("0x"), 16),
            u64::from_str_radix(shown, 16),
            "sym {name}: jq gave {from_jq:?}, the text {shown}"
        );
    }
}

/// mod, log and ps read Linux's own structures: the guest's dumps, when `.ci/run` made them.
#[test]
fn linux_outputs_match_their_schemas() {
    let dir = linux::guest_output();
    let need = ["vmcore.kdump", "vmlinux", "klogtest.ko"];
    if let Some(missing) = need.iter().find(|f| !dir.join(f).exists()) {
        tools::not_run(
            "linux_outputs_match_their_schemas",
            &format!("{} not there", dir.join(missing).display()),
        );
        return;
    }
    let files: Vec<PathBuf> = need.iter().map(|f| dir.join(f)).collect();
    let modules = check(&files, "mod --json", "mod", Shape::Document);
    assert!(modules[0]["modules"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["name"] == "klogtest")));
    let ps = check(&files, "ps --json", "ps", Shape::Document);
    let tasks = ps[0]["tasks"].as_array().expect("tasks");
    assert!(tasks.iter().any(|t| t["running"] == true && t["pid"] == 1));
    check(&files, "ps --json 1 kthreadd", "ps", Shape::Document);
    let times = check(&files, "ps -t --json", "ps", Shape::Document);
    assert!(
        times[0]["uptime"]["nanoseconds"].is_string(),
        "{}",
        times[0]
    );
    assert!(times[0]["tasks"][0]["times"]["start"].is_string());
    let records = check(&files, "log --json", "log", Shape::Lines);
    assert!(records.iter().any(|r| r["text"]
        .as_str()
        .is_some_and(|t| t.contains("Kernel panic"))));
    common_commands(&files, LINUX);
}

#[test]
fn arm64_outputs_match_their_schemas() {
    let Some((dir, dumps)) = linux::arm64::guest_dumps("arm64_outputs_match_their_schemas") else {
        return;
    };
    for dump in dumps {
        let files = [dump.clone()];
        let sys = check(&files, "sys --json", "sys", Shape::Document);
        assert!(sys[0]["stops"][0]["pc"].is_string(), "{}", sys[0]);
        check(&files, "log --json", "log", Shape::Lines);
        // arm64's exception frames (PC, LR, X29 … X0) with the vmlinux.
        let bt = check(
            &[dump, dir.join("vmlinux")],
            "bt -a --json",
            "bt",
            Shape::Document,
        );
        assert!(bt[0].to_string().contains("\"pc_symbol\""), "{}", bt[0]);
    }
}

/// The schemas hold what they promise: a real record passes, and the same record with an
/// address as a number, without its version, or with a field the schema does not know fails.
#[test]
fn schemas_reject_what_breaks_the_conventions() {
    let files = [common::kdump(), common::vmlinux()];
    let line = output(&files, "klog 0 --json -n 1");
    let record: Value = serde_json::from_str(line.trim()).unwrap();
    let klog = schema("klog");
    assert!(klog.is_valid(&record));
    let mut number = record.clone();
    number["desc"] = serde_json::json!(18446744071563171211u64);
    assert!(!klog.is_valid(&number), "an address as a JSON number");
    let mut unversioned = record.clone();
    unversioned.as_object_mut().unwrap().remove("kcrash_json");
    assert!(!klog.is_valid(&unversioned), "no kcrash_json");
    let mut extra = record;
    extra["surprise"] = serde_json::json!(1);
    assert!(!klog.is_valid(&extra), "an undocumented field");
}

/// `klog.schema.json` holds its own copy of the event schema's definitions of a schema's
/// reading (a validator resolves no reference to another file): the two must not drift.
#[test]
fn klog_and_event_schemas_define_schemata_alike() {
    let defs = |name: &str| {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("schemas/{name}.schema.json"));
        let value: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        value["$defs"].clone()
    };
    let (klog, event) = (defs("klog"), defs("event"));
    for def in ["hex", "dec", "field", "schema", "schema_conflict"] {
        assert_eq!(klog[def], event[def], "$defs/{def} differs");
    }
}
