//! What kcrash's end-to-end tests share: the binary cargo built for them, and checking
//! `klog --json` records against a kernel's own oracle (expected.json).

// Each test binary uses its own part of this module.
#![allow(dead_code)]

pub mod drgn_stack;
pub mod edit;
pub mod gdb;
pub mod linux;
pub mod objdump;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use kcrash::regress::manifest::Manifest;
use kcrash_harness::expected::{message_matches, Expected};
use kcrash_harness::run::Kcrash;
use kcrash_harness::{corpus, tools};
use kcrash_schema::SchemaFile;
use serde_json::Value;

/// The kcrash binary of this build; what it keeps between runs goes to the target directory.
pub fn kcrash() -> Kcrash {
    Kcrash::new(env!("CARGO_BIN_EXE_kcrash"), env!("CARGO_TARGET_TMPDIR"))
}

/// The bare kernel's image in the corpus.
pub fn vmlinux() -> PathBuf {
    corpus::file("bare/vmlinux")
}

/// The bare kernel's kdump of its `rings` crash: a dump every command can read.
pub fn kdump() -> PathBuf {
    corpus::file("bare/rings/vmcore.kdump")
}

/// Output bytes as text; kcrash prints UTF-8.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("kcrash prints UTF-8")
}

pub fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// nm's (address, type letter) for each symbol, absolute symbols left out.
pub fn nm_all(image: &Path) -> Vec<(String, u64, char)> {
    tools::output(Command::new("nm").arg(image))
        .lines()
        .filter_map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                [addr, kind, name] if kind != "A" && kind != "a" => Some((
                    name.to_owned(),
                    u64::from_str_radix(addr, 16).ok()?,
                    kind.chars().next()?,
                )),
                _ => None,
            },
        )
        .collect()
}

/// nm's (address, type letter) by name (the last of several locals of one name).
pub fn nm(image: &Path) -> HashMap<String, (u64, char)> {
    nm_all(image)
        .into_iter()
        .map(|(n, a, k)| (n, (a, k)))
        .collect()
}

pub const DUMPS: [&str; 4] = [
    "vmcore.kdump",
    "vmcore.elf.gz",
    "vmcore-paging.elf.gz",
    "vmcore.kdump-flat.gz",
];

pub fn word_after(line: &str, key: &str) -> u64 {
    let mut words = line.split_whitespace();
    words.find(|w| *w == key).unwrap();
    let v = words.next().unwrap();
    u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
}

/// `klog --json` lines by (ring, seq); a record printed twice fails.
pub fn json_records<'l>(
    lines: impl IntoIterator<Item = &'l str>,
    what: &str,
) -> HashMap<(u64, u64), Value> {
    let mut got = HashMap::new();
    for line in lines {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{what}: {e}: {line}"));
        let key = (v["ring"].as_u64().unwrap(), v["seq"].as_u64().unwrap());
        assert!(
            got.insert(key, v).is_none(),
            "{what}: record {key:?} printed twice"
        );
    }
    got
}

/// A JSON address or raw word: a `"0x…"` string.
pub fn hex(v: &Value) -> u64 {
    let text = v
        .as_str()
        .unwrap_or_else(|| panic!("{v} is not a hex string"));
    let digits = text
        .strip_prefix("0x")
        .unwrap_or_else(|| panic!("{text:?} lacks 0x"));
    u64::from_str_radix(digits, 16).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// A JSON value of a 64-bit type: a decimal string.
pub fn dec(v: &Value) -> u64 {
    let text = v
        .as_str()
        .unwrap_or_else(|| panic!("{v} is not a decimal string"));
    text.parse().unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(hex).collect()
}

/// A JSON record's eight raw words.
pub fn words(record: &Value) -> Vec<u64> {
    u64s(&record["words"])
}

/// A JSON record's damage flags, by name.
pub fn damage(record: &Value) -> Vec<String> {
    record["damage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_owned())
        .collect()
}

/// What a dump may lack of the strings the records' `%s` arguments point at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strings {
    /// Every string the kernel logged is in the dump.
    AsLogged,
    /// The dump's writer excluded pages that may hold some ([`linux::slab_may_be_excluded`]):
    /// such an argument prints as unreadable, its page "excluded when the dump was written", in
    /// place of whatever the kernel printed there.
    MayBeExcluded,
}

/// Every record the oracle says a trusted ring holds is in `got`, field for field (slot, damage,
/// subsystem, the raw words and their parts, format, arguments, message, unreadable strings),
/// and `got` holds nothing else. Untrusted rings are the caller's to check: they print nothing.
pub fn check_records(got: &HashMap<(u64, u64), Value>, expected: &Expected, what: &str) {
    check_records_in(got, expected, what, Strings::AsLogged);
}

/// [`check_records`] of a dump that may lack some strings, as `strings` says.
pub fn check_records_in(
    got: &HashMap<(u64, u64), Value>,
    expected: &Expected,
    what: &str,
    strings: Strings,
) {
    let mut want = 0;
    for ring in expected.rings.iter().filter(|r| r.untrusted.is_empty()) {
        for rec in &ring.records {
            want += 1;
            let ctx = format!("{what}: ring {} seq {}", ring.ring_name, rec.seq);
            let v = got
                .get(&(ring.ring, rec.seq))
                .unwrap_or_else(|| panic!("{ctx}: missing"));
            assert_eq!(v["slot"], rec.slot, "{ctx}: slot");
            let want_damage: Vec<String> = rec
                .damage
                .iter()
                .map(|d| format!("{d:?}").to_lowercase())
                .collect();
            assert_eq!(damage(v), want_damage, "{ctx}: damage");
            let Some(ev) = &rec.event else { continue };
            assert_eq!(v["subsystem"], ev.subsystem, "{ctx}: subsystem");
            assert_eq!(
                v["subsystem_name"],
                ev.subsystem_name.as_str(),
                "{ctx}: subsystem_name"
            );
            for (field, want) in [("header", ev.header), ("id", ev.id), ("desc", ev.desc)] {
                assert_eq!(hex(&v[field]), want, "{ctx}: {field}");
            }
            assert_eq!(dec(&v["clock"]), ev.clock, "{ctx}: clock");
            assert_eq!(
                (v["processor"].as_u64(), v["domain"].as_u64()),
                (Some(ev.processor as u64), Some(ev.domain as u64)),
                "{ctx}"
            );
            assert_eq!(v["format"], ev.format.as_str(), "{ctx}: format");
            assert_eq!(u64s(&v["args"]), ev.args, "{ctx}: args");
            assert_eq!(words(v), ev.words, "{ctx}: words");
            let msg = v["message"].as_str().unwrap();
            let pieces = match strings {
                Strings::MayBeExcluded => cut_at_excluded(msg),
                Strings::AsLogged => vec![msg],
            };
            let excluded = pieces.len() - 1;
            assert!(
                if excluded == 0 {
                    message_matches(&ev.message, msg)
                } else {
                    fits(&ev.message, &pieces)
                },
                "{ctx}: message\n  kcrash: {msg}\n  kernel: {}",
                ev.message
            );
            assert_eq!(
                v["unreadable_strings"],
                ev.unreadable_at.len() + excluded,
                "{ctx}: unreadable strings"
            );
            // The kernels log well-formed events: an unreadable string is the only mark.
            let want_marks: &[&str] = if ev.unreadable_at.is_empty() && excluded == 0 {
                &[]
            } else {
                &["string_unreadable"]
            };
            assert_eq!(v["marks"], serde_json::json!(want_marks), "{ctx}: marks");
        }
    }
    assert_eq!(
        got.len(),
        want,
        "{what}: kcrash printed records the oracle does not have"
    );
}

/// `message` cut at its `<unreadable 0x…: … (page was excluded when the dump was written)>`
/// marks: the text around them, one piece more than marks.
fn cut_at_excluded(message: &str) -> Vec<&str> {
    const EXCLUDED: &str = "(page was excluded when the dump was written)>";
    let mut pieces = Vec::new();
    let (mut from, mut search) = (0, 0);
    while let Some(start) = message[search..].find("<unreadable 0x").map(|s| search + s) {
        let Some(end) = message[start..].find('>').map(|e| start + e + 1) else {
            break;
        };
        if message[start..end].ends_with(EXCLUDED) {
            pieces.push(&message[from..start]);
            from = end;
        }
        search = end;
    }
    pieces.push(&message[from..]);
    pieces
}

/// Whether the kernel's `logged` message is `pieces` with some text in place of each cut.
fn fits(logged: &str, pieces: &[&str]) -> bool {
    let [first, middle @ .., last] = pieces else {
        return false;
    };
    let Some(mut rest) = logged.strip_prefix(first) else {
        return false;
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// The corpus under test: `KCRASH_CORPUS`, else the committed one.
pub fn corpus() -> PathBuf {
    std::env::var_os("KCRASH_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(corpus::default_dir)
}

/// Every KLog entry of the corpus whose files are here, with its image, dumps (as kcrash's
/// command line names them) and expected result.
pub fn klog_entries() -> Vec<(String, PathBuf, Vec<PathBuf>, Expected)> {
    let dir = corpus();
    let manifest = Manifest::load(&dir).expect("corpus/manifest.toml");
    manifest
        .entries
        .iter()
        .filter(|e| dir.join(&e.expected).exists())
        // Entries of other logs (the QNX trace ring's) have expected results of their own.
        .filter(|e| e.checks.iter().any(|c| c.command.starts_with("klog")))
        // Klogger's entries hold no KLog: the harness's check compares them with their oracle.
        .filter(|e| !kcrash_harness::klogger::owns(&e.scenario))
        .map(|e| {
            let kernel = manifest
                .kernels
                .iter()
                .find(|k| k.name == e.kernel)
                .expect("entry's kernel");
            let text = std::fs::read_to_string(dir.join(&e.expected)).expect("expected.json");
            let expected: Expected = serde_json::from_str(&text).expect("expected.json parses");
            // As kcrash's command line names each: a raw memory image is FILE@ADDRESS.
            let dumps = e.dumps.iter().map(|d| d.argument(&dir)).collect();
            (e.name.clone(), dir.join(&kernel.image), dumps, expected)
        })
        .collect()
}

/// The shipped schemata of the test kernels' KLog events, read by the syntax's own parser: which
/// data word each named field reads, and its type.
pub fn klog_schemata() -> SchemaFile {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/klog/schemas/test-kernels.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    kcrash_schema::file::parse(&Arc::from(path.display().to_string()), &text).unwrap()
}
