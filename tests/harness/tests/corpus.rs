//! The corpus and the pipeline behind it.
//!
//! - `committed_corpus_*`: the committed corpus/ against its manifest and oracle (and, with gdb,
//!   every ring of every `elf-paging` dump against the oracle). Needs no QEMU.
//! - `fresh_pipeline_*`: builds the kernel, crashes every committed scenario under QEMU into a
//!   temporary directory, and checks what came out. Needs qemu-system-x86_64, makedumpfile
//!   and gdb; without them it says so on stderr and passes, unless KCRASH_REQUIRE_TOOLS=1.

use kcrash_harness::corpus::{self, Generate};
use kcrash_harness::dump::DumpFormat;
use kcrash_harness::manifest::Manifest;
use kcrash_harness::oracle::{Damage, Expected, Slot};
use kcrash_harness::{kernel, tools};
use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::Path;

/// Whether `tools` are all on PATH; if not, explains on stderr which test did not run, or
/// fails when KCRASH_REQUIRE_TOOLS=1.
fn have_tools(test: &str, needed: &[&str]) -> bool {
    let missing = tools::missing(needed);
    if missing.is_empty() {
        return true;
    }
    let list = missing.join(", ");
    if std::env::var("KCRASH_REQUIRE_TOOLS").is_ok_and(|v| v == "1") {
        panic!("{test}: KCRASH_REQUIRE_TOOLS=1 and {list} not on PATH");
    }
    // Straight to the process's stderr: the test harness captures eprintln! of passing tests.
    let _ = writeln!(
        std::io::stderr(),
        "NOT RUN: {test}: {list} not on PATH (apt-get install -y qemu-system-x86 makedumpfile gdb; \
         KCRASH_REQUIRE_TOOLS=1 makes this a failure)"
    );
    false
}

fn expected(dir: &Path, manifest: &Manifest, scenario: &str) -> Expected {
    let entry = manifest
        .entries
        .iter()
        .find(|e| e.kernel == "bare" && e.scenario == scenario)
        .unwrap_or_else(|| panic!("no bare/{scenario} entry"));
    let text = std::fs::read_to_string(dir.join(&entry.expected)).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn records(expected: &Expected, ring: &str) -> Vec<u64> {
    let ring = expected.rings.iter().find(|r| r.name == ring).unwrap();
    ring.records
        .iter()
        .map(|slot| match slot {
            Slot::Record(r) => r.seq,
            Slot::Torn { seq, .. } => *seq,
        })
        .collect()
}

/// Each scenario leaves the rings in the state its name promises.
fn check_scenarios(dir: &Path, manifest: &Manifest) {
    let rings = expected(dir, manifest, "rings");
    let sizes: BTreeSet<u64> = rings.rings.iter().map(|r| r.num_recs).collect();
    assert!(sizes.len() >= 3, "rings of several sizes: {sizes:?}");
    assert_eq!(
        records(&rings, "SCHED"),
        (0..300).collect::<Vec<_>>(),
        "SCHED holds all 300, in order"
    );
    assert_eq!(
        records(&rings, "PARCHORE"),
        (44..300).collect::<Vec<_>>(),
        "PARCHORE wrapped: the last 256"
    );
    let chores: BTreeSet<u64> = rings
        .rings
        .iter()
        .flat_map(|r| &r.records)
        .filter_map(|s| match s {
            Slot::Record(r) => Some(r.id),
            Slot::Torn { .. } => None,
        })
        .collect();
    assert!(chores.len() >= 4, "events from several chores: {chores:x?}");

    // d_klogprintf echoed every event through klog-runtime's printf interpreter just before
    // its oracle line; each echo must read as the oracle's core::fmt message.
    let console = std::fs::read_to_string(dir.join("bare/rings/console.log")).unwrap();
    let lines: Vec<&str> = console.lines().collect();
    let mut echoed = 0;
    for pair in lines.windows(2) {
        let Some(Ok(event)) = kcrash_harness::oracle::Line::parse(pair[1]) else {
            continue;
        };
        if event.tag != "KLOG-EVENT" {
            continue;
        }
        let ring = &rings.rings[event.num("subsys").unwrap() as usize];
        let want = format!("[{}] {}", ring.name, event.msg.as_deref().unwrap());
        assert_eq!(pair[0], want, "klog-runtime's echo against the oracle");
        echoed += 1;
    }
    assert_eq!(echoed, 780);

    let wrap = expected(dir, manifest, "wrap");
    let vm = wrap.rings.iter().find(|r| r.name == "VM").unwrap();
    assert!(
        vm.written >= 20 * vm.num_recs,
        "VM wrapped many times: {} writes",
        vm.written
    );
    assert_eq!(
        records(&wrap, "VM"),
        (vm.written - 64..vm.written).collect::<Vec<_>>()
    );

    let unfilled = expected(dir, manifest, "unfilled");
    for ring in &unfilled.rings {
        assert!(ring.written < ring.num_recs, "{} never filled", ring.name);
    }
    assert_eq!(records(&unfilled, "FS").len(), 5);

    let preinit = expected(dir, manifest, "preinit");
    let none = &preinit.rings[0];
    let early: BTreeSet<u64> = none
        .records
        .iter()
        .filter_map(|s| match s {
            Slot::Record(r) if r.message.starts_with("early") => Some(r.subsystem),
            _ => None,
        })
        .collect();
    assert_eq!(
        early,
        BTreeSet::from([0, 1, 2, 3, 4]),
        "pre-init events of every subsystem sit in NONE's ring"
    );

    let strings = expected(dir, manifest, "strings");
    let messages: Vec<&str> = strings
        .rings
        .iter()
        .flat_map(|r| &r.records)
        .filter_map(|s| match s {
            Slot::Record(r) => Some(r.message.as_str()),
            Slot::Torn { .. } => None,
        })
        .collect();
    for needle in [
        "open /etc/motd",
        "/proc/",
        "stack:chore-name-427",
        "(null)",
        "<unreadable 0xffffffffc0001000>",
        "<unreadable 0xffffffffb0000000>",
    ] {
        assert!(
            messages.iter().any(|m| m.contains(needle)),
            "a %s message with {needle:?}"
        );
    }

    let torn = expected(dir, manifest, "torn");
    let torn_slots: Vec<(&str, u64)> = torn
        .rings
        .iter()
        .flat_map(|r| r.records.iter().map(move |s| (r, s)))
        .filter_map(|(r, s)| match s {
            Slot::Torn { seq, .. } => Some((r.name.as_str(), *seq)),
            Slot::Record(_) => None,
        })
        .collect();
    assert_eq!(torn_slots, [("PARCHORE", 300), ("FS", 10)]);
    assert_eq!(
        records(&torn, "PARCHORE").last(),
        Some(&300),
        "the torn slot is the newest"
    );

    let scribbled = expected(dir, manifest, "scribbled");
    let damaged: Vec<(&str, &Damage)> = scribbled
        .rings
        .iter()
        .flat_map(|r| r.damage.iter().map(move |d| (r.name.as_str(), d)))
        .collect();
    assert_eq!(damaged.len(), 2, "{damaged:?}");
    assert_eq!(
        records(&scribbled, "FS").len(),
        20,
        "KLogBuffer still holds the scribbled rings' records"
    );

    let fault = expected(dir, manifest, "fault");
    assert!(
        fault.panic.starts_with("CPU exception 14 ")
            && fault.panic.ends_with(" cr2 0xffffffffc0001000"),
        "a page fault on the unmapped address: {}",
        fault.panic
    );
    assert_eq!(records(&fault, "VM"), [0, 1, 2, 3, 4]);

    let off = expected(dir, manifest, "off");
    assert!(
        off.rings
            .iter()
            .all(|r| r.records.is_empty() && r.written == 0),
        "logging off: every ring empty"
    );
}

#[test]
fn committed_corpus_matches_its_manifest_and_oracle() {
    let dir = corpus::default_dir();
    let manifest = Manifest::load(&dir).unwrap();
    let gdb = have_tools(
        "committed_corpus (gdb comparison of dumps and oracle)",
        &[tools::GDB],
    );
    let checked = corpus::check(&dir, gdb, &[]).unwrap();
    let committed = manifest.entries.iter().filter(|e| e.committed).count();
    assert!(
        checked.entries >= committed,
        "{checked:?}, {committed} committed entries"
    );
    if gdb {
        assert_eq!(checked.against_dump, committed);
    }
}

#[test]
fn committed_corpus_scenarios_do_what_they_say() {
    let dir = corpus::default_dir();
    check_scenarios(&dir, &Manifest::load(&dir).unwrap());
}

#[test]
fn committed_manifest_is_what_the_harness_describes() {
    let committed = Manifest::load(&corpus::default_dir()).unwrap();
    assert_eq!(
        committed,
        corpus::manifest(true),
        "regenerate the corpus: {}",
        corpus::REGENERATE
    );
}

#[test]
fn fresh_pipeline_makes_every_dump_and_oracle() {
    if !have_tools(
        "fresh_pipeline",
        &[tools::QEMU, tools::MAKEDUMPFILE, tools::GDB],
    ) {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let scenarios: Vec<_> = corpus::SCENARIOS.iter().filter(|s| s.committed).collect();
    let target_dir = kernel::repo_root().join("target/kernels");
    let manifest = corpus::generate(&Generate {
        out: out.path(),
        target_dir: &target_dir,
        scenarios: scenarios.clone(),
        gzip: false,
    })
    .unwrap();
    for entry in manifest.entries.iter().filter(|e| e.committed) {
        let formats: Vec<&str> = entry.dumps.iter().map(|d| d.format.as_str()).collect();
        let all: Vec<&str> = DumpFormat::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(formats, all, "{}", entry.scenario);
    }
    let checked = corpus::check(out.path(), true, &[]).unwrap();
    assert_eq!(checked.entries, scenarios.len());
    assert_eq!(
        checked.against_dump,
        scenarios.len(),
        "gdb compared every fresh dump with its oracle"
    );
    check_scenarios(out.path(), &manifest);
    // The committed manifest describes the same entries a fresh run makes.
    let committed = Manifest::load(&corpus::default_dir()).unwrap();
    for entry in &manifest.entries {
        let old = committed
            .entries
            .iter()
            .find(|e| e.kernel == entry.kernel && e.scenario == entry.scenario)
            .unwrap();
        assert_eq!(
            (
                old.cmdline.as_str(),
                old.console.as_str(),
                old.expected.as_str()
            ),
            (
                entry.cmdline.as_str(),
                entry.console.as_str(),
                entry.expected.as_str()
            )
        );
    }
}
