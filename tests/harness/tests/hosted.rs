//! The pipeline, live: build each hosted program, crash every scenario into a fresh temporary
//! directory, and check that a core exists, is an ELF core holding what the oracle says, and
//! that the oracle says what each scenario is for. Also checks the committed corpus.
//!
//! Without gcc or gdb the tests that need them say so on stderr and pass; with
//! KCRASH_REQUIRE_TOOLS=1 a missing tool fails them.

use kcrash_hosted_harness::capture::{self, Capture};
use kcrash_hosted_harness::corpus;
use kcrash_hosted_harness::oracle::{Damage, Expected, ExpectedRing};
use kcrash_hosted_harness::programs::{self, Program};
use kcrash_hosted_harness::tools;
use std::io::Write;
use std::path::PathBuf;

/// Whether `tools` are on PATH; if not, says which test did not run and why (or fails, when
/// KCRASH_REQUIRE_TOOLS=1).
fn have(tools_needed: &[&str], test: &str) -> bool {
    let missing = tools::missing(tools_needed);
    if missing.is_empty() {
        return true;
    }
    let why = format!(
        "{test}: NOT RUN: {} not on PATH (apt-get install -y gdb gcc)",
        missing.join(", ")
    );
    assert!(!tools::required(), "{why}, and {}=1", tools::REQUIRE_TOOLS);
    // Straight to stderr: libtest captures eprintln! of passing tests, and this must be seen.
    let _ = writeln!(std::io::stderr(), "{why}");
    false
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
    program
        .build(&programs::repo_root().join("target/hosted-programs"))
        .unwrap()
}

/// Crashes `scenario` into `dir` and returns what its oracle expects (already checked against
/// the core by `crash_entry`).
fn crash(
    dir: &std::path::Path,
    program: Program,
    image: &std::path::Path,
    scenario: &str,
    how: Option<Capture>,
) -> Expected {
    let entry = corpus::crash_entry(dir, program, image, scenario, how)
        .unwrap_or_else(|e| panic!("{} {scenario}: {e:#}", program.name()));
    let dump = &entry.dumps[0];
    let bytes = kcrash_hosted_harness::coredump::load(&dir.join(&dump.path)).unwrap();
    assert_eq!(
        kcrash_hosted_harness::coredump::elf_type(&bytes),
        Some(object::elf::ET_CORE),
        "{} is an ELF core",
        dump.path
    );
    corpus::derive_file(&dir.join(&entry.console)).unwrap()
}

fn ring<'a>(expected: &'a Expected, name: &str) -> &'a ExpectedRing {
    expected
        .rings
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no ring {name}"))
}

fn counts(expected: &Expected) -> Vec<(&str, usize)> {
    expected
        .rings
        .iter()
        .map(|r| (r.name.as_str(), r.records.len()))
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
            let procs: std::collections::BTreeSet<u64> = ring(expected, "SCHED")
                .records
                .iter()
                .map(|r| r.proc_dom >> 32)
                .collect();
            assert_eq!(procs.len(), 4, "{what}: every processor logged");
            if scenario == "scribbled" {
                assert!(
                    matches!(&ring(expected, "FS").damage[..], [Damage::Scribbled { field, .. }] if field == "next_write")
                );
                assert!(
                    matches!(&ring(expected, "SCHED").damage[..], [Damage::Scribbled { field, .. }] if field == "buffer")
                );
            }
        }
        "wrap" => {
            let vm = ring(expected, "VM");
            let seqs: Vec<u64> = vm.records.iter().map(|r| r.seq).collect();
            assert_eq!(
                seqs,
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
            let subsystems: Vec<u64> = none.records.iter().map(|r| r.subsystem).collect();
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
            let messages: Vec<&str> = fs.records.iter().map(|r| r.message.as_str()).collect();
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
                last.starts_with("unmapped <unreadable:0x"),
                "{what}: {messages:?}"
            );
            if program == Program::Hosted {
                assert!(messages.contains(&"null (null)"), "{what}: {messages:?}");
            }
        }
        "torn" => {
            let fs = ring(expected, "FS");
            assert_eq!(fs.records.len(), 80, "{what}");
            assert!(
                matches!(fs.damage[..], [Damage::TornRecord { .. }]),
                "{what}"
            );
            let vm = ring(expected, "VM");
            assert!(
                matches!(vm.damage[..], [Damage::TornRecord { seq: 1, .. }]),
                "{what}"
            );
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

fn every_scenario(program: Program, test: &str) {
    if !have(&capture_tools(program), test) {
        return;
    }
    let image = build(program);
    let dir = tempfile::tempdir().unwrap();
    for &scenario in program.scenarios() {
        let expected = crash(dir.path(), program, &image, scenario, None);
        check_scenario(program, scenario, &expected);
    }
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
        let expected = crash(dir.path(), program, &image, "strings", Some(Capture::Gcore));
        check_scenario(program, "strings", &expected);
    }
}

#[test]
fn committed_corpus_matches_its_manifest_oracle_and_cores() {
    let dir = corpus::default_dir();
    let manifest = kcrash_hosted_harness::manifest::Manifest::load(&dir).unwrap();
    let committed = manifest.entries.iter().filter(|e| e.committed).count();
    assert_eq!(
        committed,
        2 * (programs::SCENARIOS.len() + corpus::GCORE_SCENARIOS.len()),
        "every scenario of both programs, and the gcore ones"
    );
    // Also checks the big entry when `corpus --big` has made it here.
    let checked = corpus::check(&dir).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(checked >= committed);
}
