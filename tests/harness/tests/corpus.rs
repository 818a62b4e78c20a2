//! The corpus and the pipeline behind it.
//!
//! - `committed_corpus_*`: the whole committed corpus/ (every kernel) against its manifest and
//!   oracle: every hosted core's records, and, with gdb, every ring of every `elf-paging` dump.
//!   Needs no QEMU.
//! - `fresh_pipeline_*`: builds the bare kernel, crashes every committed scenario under QEMU into a
//!   temporary directory, and checks what came out. Needs qemu-system-x86_64, makedumpfile
//!   and gdb; without them it says so on stderr and passes, unless KCRASH_REQUIRE_TOOLS=1.

use kcrash::regress::manifest::{self, Manifest};
use kcrash_harness::corpus::{self, Generate, Kernel};
use kcrash_harness::dump::DumpFormat;
use kcrash_harness::expected::Expected;
use kcrash_harness::kernel::KernelBuild;
use kcrash_harness::klogger;
use kcrash_harness::oracle::Line;
use kcrash_harness::tools;
use std::collections::BTreeSet;
use std::path::Path;

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
    expected.ring_named(ring).unwrap().seqs()
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
        .flat_map(|r| r.events())
        .map(|e| e.id)
        .collect();
    assert!(chores.len() >= 4, "events from several chores: {chores:x?}");

    // d_klogprintf echoed every event through klog-runtime's printf interpreter just before
    // its oracle line; each echo must read as the oracle's core::fmt message.
    let console = std::fs::read_to_string(dir.join("bare/rings/console.log")).unwrap();
    let lines: Vec<&str> = console.lines().collect();
    let mut echoed = 0;
    for pair in lines.windows(2) {
        let Some(Ok(event)) = Line::parse(pair[1]) else {
            continue;
        };
        if event.tag != "KLOG-EVENT" {
            continue;
        }
        let ring = &rings.rings[event.num("subsys").unwrap() as usize];
        let want = format!("[{}] {}", ring.ring_name, event.msg.as_deref().unwrap());
        assert_eq!(pair[0], want, "klog-runtime's echo against the oracle");
        echoed += 1;
    }
    assert_eq!(echoed, 780);

    let wrap = expected(dir, manifest, "wrap");
    let vm = wrap.ring_named("VM").unwrap();
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
        assert!(
            ring.written < ring.num_recs,
            "{} never filled",
            ring.ring_name
        );
        assert_eq!(ring.overwritten, 0, "{}", ring.ring_name);
    }
    assert_eq!(records(&unfilled, "FS").len(), 5);

    let preinit = expected(dir, manifest, "preinit");
    let none = &preinit.rings[0];
    let early: BTreeSet<u64> = none
        .events()
        .filter(|e| e.message.starts_with("early"))
        .map(|e| e.subsystem)
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
        .flat_map(|r| r.events())
        .map(|e| e.message.as_str())
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
    let unreadable: BTreeSet<u64> = strings
        .rings
        .iter()
        .flat_map(|r| r.events())
        .flat_map(|e| e.unreadable_at.iter().copied())
        .collect();
    assert_eq!(
        unreadable,
        BTreeSet::from([0xffff_ffff_c000_1000, 0xffff_ffff_b000_0000])
    );

    let torn = expected(dir, manifest, "torn");
    let torn_slots: Vec<(&str, u64)> = torn
        .rings
        .iter()
        .flat_map(|r| {
            r.torn_seqs()
                .into_iter()
                .map(|seq| (r.ring_name.as_str(), seq))
        })
        .collect();
    assert_eq!(torn_slots, [("PARCHORE", 300), ("FS", 10)]);
    assert_eq!(
        records(&torn, "PARCHORE").last(),
        Some(&300),
        "the torn slot is the newest"
    );

    let scribbled = expected(dir, manifest, "scribbled");
    let untrusted: Vec<(&str, &str)> = scribbled
        .rings
        .iter()
        .flat_map(|r| {
            r.untrusted
                .iter()
                .map(|u| (r.ring_name.as_str(), u.field.as_str()))
        })
        .collect();
    assert_eq!(untrusted.len(), 2, "{untrusted:?}");
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
    let gdb = tools::available_for(
        "committed_corpus (gdb comparison of QEMU dumps and oracle)",
        &[tools::GDB],
    );
    let checked = corpus::check(&dir, gdb, &[], &[]).unwrap_or_else(|e| panic!("{e:#}"));
    let committed: Vec<_> = manifest.entries.iter().filter(|e| e.committed).collect();
    assert!(
        checked.entries >= committed.len(),
        "{checked:?}, {} committed entries",
        committed.len()
    );
    let (qnx, committed): (Vec<_>, Vec<_>) = committed
        .into_iter()
        .partition(|e| e.kernel.ends_with("-qnx"));
    let qnx_dumps: usize = qnx.iter().map(|e| e.dumps.len()).sum();
    assert_eq!(
        checked.qnx_dumps, qnx_dumps,
        "every QNX dump read and compared with its oracle"
    );
    // Klogger's entries are checked by reading them with kcrash's klogger, the rest as KLog's.
    let (klogger, klog): (Vec<&manifest::Entry>, Vec<&manifest::Entry>) = committed
        .iter()
        .copied()
        .partition(|e| klogger::owns(&e.scenario));
    assert_eq!(
        checked.klogger_dumps,
        klogger.iter().map(|e| e.dumps.len()).sum::<usize>(),
        "every Klogger dump compared with its oracle"
    );
    let hosted = klog
        .iter()
        .filter(|e| matches!(Kernel::from_name(&e.kernel), Some(Kernel::Hosted(_))))
        .count();
    assert_eq!(
        checked.cores, hosted,
        "every hosted core compared with its oracle"
    );
    if gdb {
        let bare = klog.len() - hosted;
        assert_eq!(
            checked.against_dump, bare,
            "every QEMU dump compared by gdb"
        );
    }
}

#[test]
fn committed_corpus_scenarios_do_what_they_say() {
    let dir = corpus::default_dir();
    check_scenarios(&dir, &Manifest::load(&dir).unwrap());
}

/// The committed manifest.toml is byte for byte what the writer makes of what it reads: the one
/// schema in kcrash's library loses and reorders nothing.
#[test]
fn committed_manifest_stores_as_it_is() {
    let dir = corpus::default_dir();
    let manifest = Manifest::load(&dir).unwrap();
    let out = tempfile::tempdir().unwrap();
    manifest.store(out.path()).unwrap();
    let read = |d: &std::path::Path| std::fs::read_to_string(d.join(manifest::FILE_NAME)).unwrap();
    assert!(
        read(out.path()) == read(&dir),
        "the stored manifest differs"
    );
}

/// The committed manifest lists every committed crash the harness plans, with the kernels and
/// paths the harness gives them; the bare entries' tables exactly as the harness writes them.
#[test]
fn committed_manifest_is_what_the_harness_describes() {
    let manifest = Manifest::load(&corpus::default_dir()).unwrap();
    let planned: Vec<String> = corpus::plan()
        .iter()
        .filter(|p| p.committed())
        .map(|p| p.name())
        .collect();
    let listed: Vec<String> = manifest
        .entries
        .iter()
        .filter(|e| e.committed)
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(
        listed,
        planned,
        "regenerate the corpus: {}",
        corpus::REGENERATE
    );
    for entry in &manifest.entries {
        let planned = corpus::plan()
            .into_iter()
            .find(|p| p.name() == entry.name)
            .unwrap();
        if let Kernel::Qemu(_) = planned.kernel {
            assert_eq!(
                *entry,
                corpus::bare_entry(&planned, true),
                "regenerate the corpus: {}",
                corpus::REGENERATE
            );
        }
        assert_eq!(entry.kernel, planned.kernel.name());
        assert_eq!(entry.console, format!("{}/console.log", entry.name));
        assert_eq!(entry.expected, format!("{}/expected.json", entry.name));
        assert_eq!(entry.committed, planned.committed());
        assert_eq!(entry.checks, corpus::checks(&entry.name, entry.committed));
        for dump in &entry.dumps {
            assert!(
                dump.path.starts_with(&format!("{}/", entry.name)),
                "{}",
                dump.path
            );
        }
    }
    for kernel in &manifest.kernels {
        let described = Kernel::from_name(&kernel.name).unwrap().describe();
        assert_eq!(*kernel, described);
    }
}

#[test]
fn fresh_pipeline_makes_every_dump_and_oracle() {
    if !tools::available_for(
        "fresh_pipeline",
        &[tools::QEMU, tools::MAKEDUMPFILE, tools::GDB],
    ) {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let crashes: Vec<_> = corpus::plan()
        .into_iter()
        .filter(|p| p.kernel == Kernel::Qemu(KernelBuild::Bare))
        .collect();
    let manifest = corpus::generate(&Generate {
        out: out.path(),
        crashes: &crashes,
        gzip: false,
    })
    .unwrap();
    for (entry, planned) in manifest.entries.iter().zip(&crashes) {
        let formats: Vec<&str> = entry.dumps.iter().map(|d| d.format.as_str()).collect();
        let want: Vec<&str> = planned.formats().iter().map(|f| f.name()).collect();
        assert_eq!(formats, want, "{}", entry.name);
        let headers = DumpFormat::WITH_HEADERS.map(DumpFormat::name);
        assert_eq!(
            formats[..4],
            headers,
            "{}: every format with a header",
            entry.name
        );
    }
    let raw: Vec<&str> = manifest
        .entries
        .iter()
        .filter(|e| e.dumps.iter().any(|d| d.format == DumpFormat::Raw.name()))
        .map(|e| e.scenario.as_str())
        .collect();
    assert_eq!(raw, corpus::RAW_SCENARIOS, "raw memory of these scenarios");
    let checked = corpus::check(out.path(), true, &[], &[]).unwrap();
    assert_eq!(checked.entries, crashes.len());
    assert_eq!(
        checked.against_dump,
        crashes.len(),
        "gdb compared every fresh dump with its oracle"
    );
    check_scenarios(out.path(), &manifest);
    // The committed manifest describes the same entries a fresh run makes.
    let committed = Manifest::load(&corpus::default_dir()).unwrap();
    for entry in &manifest.entries {
        let old = committed
            .entries
            .iter()
            .find(|e| e.name == entry.name)
            .unwrap();
        assert_eq!(
            (&old.cmdline, &old.console, &old.expected),
            (&entry.cmdline, &entry.console, &entry.expected)
        );
    }
}
