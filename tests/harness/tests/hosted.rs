//! The pipeline, live: build each hosted program, crash every scenario into a fresh temporary
//! directory, and check that a core exists, is an ELF core holding what the oracle says, and
//! that the oracle says what each scenario is for. Also checks the committed corpus.
//!
//! Without gcc or gdb the tests that need them say so on stderr and pass; with
//! KCRASH_REQUIRE_TOOLS=1 a missing tool fails them.

use kcrash::regress::manifest::Manifest;
use kcrash_harness::capture;
use kcrash_harness::corpus::{self, Kernel, Planned};
use kcrash_harness::dump::Magic;
use kcrash_harness::expected::{Expected, Ring, Untrusted};
use kcrash_harness::programs::{self, Program};
use kcrash_harness::tools;
use std::path::{Path, PathBuf};

/// Whether `needed` are on PATH (see `tools::available_for`).
fn have(needed: &[&str], test: &str) -> bool {
    tools::available_for(test, needed)
}

/// Tools needed to get a core at all: gdb too when Linux cannot leave one.
fn capture_tools(program: Program) -> Vec<&'static str> {
    let mut needed = program.tools().to_vec();
    if capture::kernel_core_blocker().unwrap().is_some() {
        needed.push(tools::GDB);
    }
    needed
}

fn build(program: Program) -> PathBuf {
    Kernel::Hosted(program).build().unwrap()
}

/// Crashes `scenario` into `dir` and returns what its oracle expects (already checked against
/// the core by `crash_hosted`).
fn crash(
    dir: &Path,
    program: Program,
    image: &Path,
    scenario: &'static str,
    gcore: bool,
) -> Expected {
    let planned = Planned {
        kernel: Kernel::Hosted(program),
        scenario,
        gcore,
    };
    let entry_dir = dir.join(planned.name());
    let entry = corpus::crash_hosted(&planned, image, &entry_dir, false)
        .unwrap_or_else(|e| panic!("{}: {e:#}", planned.name()));
    let dump = &entry.dumps[0];
    assert_eq!(
        Magic::of_file(&dir.join(&dump.path)).unwrap(),
        Some(Magic::ElfCore),
        "{} is an ELF core",
        dump.path
    );
    corpus::derive_file(&dir.join(&entry.console)).unwrap()
}

fn ring<'a>(expected: &'a Expected, name: &str) -> &'a Ring {
    expected
        .ring_named(name)
        .unwrap_or_else(|| panic!("no ring {name}"))
}

fn counts(expected: &Expected) -> Vec<(&str, usize)> {
    expected
        .rings
        .iter()
        .map(|r| (r.ring_name.as_str(), r.events().count()))
        .collect()
}

/// What each scenario must leave, the same for both languages except `strings`.
fn check_scenario(program: Program, scenario: &str, expected: &Expected) {
    let what = format!("{} {scenario}", program.name());
    assert_eq!(expected.clock_hz, 1_000_000_000, "{what}");
    assert!(
        expected.panic.starts_with(scenario),
        "{what}: {}",
        expected.panic
    );
    match scenario {
        "rings" | "scribbled" => {
            // 4 cpus x 150 events round-robin over SCHED FS VM PARCHORE: FS and VM wrap.
            assert_eq!(
                counts(expected),
                [
                    ("NONE", 0),
                    ("PARCHORE", 148),
                    ("FS", 128),
                    ("SCHED", 152),
                    ("VM", 64)
                ],
                "{what}"
            );
            let procs: std::collections::BTreeSet<u32> = ring(expected, "SCHED")
                .events()
                .map(|e| e.processor)
                .collect();
            assert_eq!(procs.len(), 4, "{what}: every processor logged");
            if scenario == "scribbled" {
                assert!(
                    matches!(&ring(expected, "FS").untrusted[..], [Untrusted { field, .. }] if field == "next_write")
                );
                assert!(
                    matches!(&ring(expected, "SCHED").untrusted[..], [Untrusted { field, .. }] if field == "buffer")
                );
            }
        }
        "wrap" => {
            let vm = ring(expected, "VM");
            assert_eq!(
                vm.seqs(),
                (4 * 64 * 8 - 64..4 * 64 * 8).collect::<Vec<u64>>(),
                "{what}"
            );
        }
        "unfilled" => {
            assert_eq!(
                counts(expected),
                [
                    ("NONE", 0),
                    ("PARCHORE", 0),
                    ("FS", 3),
                    ("SCHED", 5),
                    ("VM", 0)
                ],
                "{what}"
            );
        }
        "preinit" => {
            let none = ring(expected, "NONE");
            let subsystems: Vec<u64> = none.events().map(|e| e.subsystem).collect();
            assert_eq!(
                subsystems,
                [3, 4, 0, 2],
                "{what}: pre-init events keep their subsystem"
            );
            // 4 cpus x events 0..10, every fourth to SCHED.
            assert_eq!(ring(expected, "SCHED").records.len(), 12, "{what}");
        }
        "strings" => {
            let fs = ring(expected, "FS");
            let messages: Vec<&str> = fs.events().map(|e| e.message.as_str()).collect();
            assert!(messages[0] == "static /etc/motd", "{what}: {messages:?}");
            assert!(
                messages[1].starts_with("heap heap-"),
                "{what}: {messages:?}"
            );
            assert!(
                messages[2].starts_with("stack stack-"),
                "{what}: {messages:?}"
            );
            assert!(
                messages.contains(&"precision tru|pad     |"),
                "{what}: {messages:?}"
            );
            let last = messages.last().unwrap();
            assert!(
                last.starts_with("unmapped <unreadable 0x"),
                "{what}: {messages:?}"
            );
            let unreadable: Vec<u64> = fs.events().flat_map(|e| e.unreadable_at.clone()).collect();
            assert_eq!(unreadable.len(), 1, "{what}: one unmapped string");
            if program == Program::Hosted {
                assert!(messages.contains(&"null (null)"), "{what}: {messages:?}");
            }
        }
        "torn" => {
            let fs = ring(expected, "FS");
            assert_eq!(fs.events().count(), 80, "{what}");
            assert_eq!(fs.torn_seqs().len(), 1, "{what}");
            assert_eq!((fs.held, fs.torn), (81, 1), "{what}");
            let vm = ring(expected, "VM");
            assert_eq!(vm.torn_seqs(), [1], "{what}");
        }
        "off" => {
            assert!(
                expected.rings.iter().all(|r| r.records.is_empty()),
                "{what}"
            );
        }
        other => panic!("no check for scenario {other}"),
    }
}

/// What each scenario leaves on per-processor rings: 4 processors × 5 KLogs, processor p's at
/// 5p; VM's events in FS's ring; processor 3's PARCHORE ring attached after klog_init. The same
/// for both languages: the C build logs the Rust one's events in the same order.
fn check_percpu(program: Program, scenario: &str, expected: &Expected) {
    let what = format!("{} {scenario}", program.name());
    assert!(
        expected.panic.starts_with(scenario),
        "{what}: {}",
        expected.panic
    );
    assert_eq!(expected.rings.len(), 20, "{what}");
    for r in &expected.rings {
        let processor = (r.ring / 5) as u32;
        for e in r.events() {
            assert_eq!(
                e.processor, processor,
                "{what}: ring {} holds its processor's",
                r.ring
            );
        }
        if r.ring % 5 == 4 {
            assert!(
                r.records.is_empty(),
                "{what}: VM's own KLog receives nothing"
            );
        }
    }
    let ring = |i: usize| &expected.rings[i];
    match scenario {
        "rings" => {
            // 150 events each round-robin over SCHED FS VM PARCHORE: FS's ring takes VM's too.
            for p in 0..4 {
                let fs = ring(5 * p + 2);
                assert_eq!((fs.written, fs.held), (75, 75), "{what}: processor {p}");
                let subs: std::collections::BTreeSet<u64> =
                    fs.events().map(|e| e.subsystem).collect();
                assert_eq!(subs, [2, 4].into(), "{what}: FS and VM share the ring");
            }
        }
        "wrap" => {
            for p in 0..4 {
                let fs = ring(5 * p + 2);
                assert_eq!(fs.seqs(), (512 - 128..512).collect::<Vec<u64>>(), "{what}");
            }
        }
        "percpu" => {
            let sched1 = ring(8);
            assert_eq!(
                (sched1.written, sched1.held, sched1.overwritten),
                (3042, 1024, 2018),
                "{what}: processor 1's SCHED ring lost its oldest events"
            );
            let attached = ring(3 * 5 + 1);
            assert_eq!((attached.num_recs, attached.held), (64, 30), "{what}");
            let kinds = |kind: u64| {
                expected
                    .rings
                    .iter()
                    .flat_map(|r| r.events())
                    .filter(|e| (e.header >> 24) & 0xff == kind)
                    .count()
            };
            // Processor 1's 12 idle events went with its overwritten SCHED records.
            assert_eq!(
                (kinds(1), kinds(2)),
                (48, 96 - 12),
                "{what}: inline, event IDs"
            );
        }
        other => panic!("no check for scenario {other}"),
    }
}

/// Crashes every scenario of `program` and checks each as its kind of build says.
fn every_scenario(program: Program, test: &str) {
    if !have(&capture_tools(program), test) {
        return;
    }
    let image = build(program);
    let dir = tempfile::tempdir().unwrap();
    for &scenario in program.scenarios() {
        let expected = crash(dir.path(), program, &image, scenario, false);
        match program {
            Program::HostedPercpu | Program::HostedCPercpu => {
                check_percpu(program, scenario, &expected)
            }
            _ => check_scenario(program, scenario, &expected),
        }
    }
}

#[test]
fn per_processor_program_crashes_into_cores_that_match_its_oracle() {
    every_scenario(
        Program::HostedPercpu,
        "per_processor_program_crashes_into_cores_that_match_its_oracle",
    );
}

#[test]
fn c_per_processor_program_crashes_into_cores_that_match_its_oracle() {
    every_scenario(
        Program::HostedCPercpu,
        "c_per_processor_program_crashes_into_cores_that_match_its_oracle",
    );
}

#[test]
fn rust_program_crashes_into_cores_that_match_its_oracle() {
    every_scenario(
        Program::Hosted,
        "rust_program_crashes_into_cores_that_match_its_oracle",
    );
}

#[test]
fn c_program_crashes_into_cores_that_match_its_oracle() {
    every_scenario(
        Program::HostedC,
        "c_program_crashes_into_cores_that_match_its_oracle",
    );
}

#[test]
fn gcore_of_the_stopped_program_matches_its_oracle() {
    let test = "gcore_of_the_stopped_program_matches_its_oracle";
    let dir = tempfile::tempdir().unwrap();
    for program in [Program::Hosted, Program::HostedC] {
        let mut needed = program.tools().to_vec();
        needed.push(tools::GDB);
        if !have(&needed, test) {
            continue;
        }
        let image = build(program);
        let expected = crash(dir.path(), program, &image, "strings", true);
        check_scenario(program, "strings", &expected);
    }
}

#[test]
fn committed_corpus_holds_every_hosted_scenario() {
    let dir = corpus::default_dir();
    let manifest = Manifest::load(&dir).unwrap();
    for program in [Program::Hosted, Program::HostedC] {
        let entries: Vec<&str> = manifest
            .entries
            .iter()
            .filter(|e| e.kernel == program.name() && e.committed)
            .map(|e| e.scenario.as_str())
            .collect();
        // The gcore scenarios this program offers: percpu is only the per-processor builds'.
        let gcore = program
            .scenarios()
            .iter()
            .filter(|s| corpus::GCORE_SCENARIOS.contains(s))
            .count();
        assert_eq!(
            entries.len(),
            programs::SCENARIOS.len() + gcore,
            "{}: every scenario, and the gcore ones: {entries:?}",
            program.name()
        );
        for entry in manifest
            .entries
            .iter()
            .filter(|e| e.kernel == program.name())
        {
            let text = std::fs::read_to_string(dir.join(&entry.expected)).unwrap();
            let expected: Expected = serde_json::from_str(&text).unwrap();
            check_scenario(program, &entry.scenario, &expected);
        }
    }
}
