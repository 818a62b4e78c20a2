//! A first session on a kernel build — no name index cached — reads only the units of the
//! vmlinux its commands need, on the x86_64 guest and the arm64 one: the module's KLog printed
//! three ways leaves the index cache empty (the full index, which is written there, was never
//! built), and answers exactly as a session with the full index does. Setup:
//! tests/common/linux.rs.

use std::path::Path;
use std::process::Output;

use crate::common;

use common::linux::guest;
use kcrash_harness::run::stdout;

/// The module's KLog as `p`, `klog` and `struct` show it.
const COMMANDS: [&str; 3] = ["p KLogs[2]", "klog 0 full", "struct _KLog"];

fn session(dir: &Path, cache: &Path, commands: &[&str]) -> Output {
    common::kcrash()
        .session(commands)
        .env("KCRASH_INDEX_CACHE", cache)
        .current_dir(dir)
        .args(["vmcore.elf", "vmlinux", "klogtest.ko"])
        .output()
        .expect("kcrash runs")
}

#[test]
fn a_cold_session_reads_only_the_units_it_needs() {
    if let Some(dir) = guest("cold", &["vmcore.elf", "vmlinux", "klogtest.ko"]) {
        cold_then_warm(&dir);
    }
}

/// The same on the arm64 guest, whose GCC (10, on 5.10) starts a unit's code ranges after the
/// patchable NOPs its function symbols take in.
#[test]
fn a_cold_session_on_arm64_reads_only_the_units_it_needs() {
    if let Some((dir, _)) = kcrash_harness::linux::arm64::guest_dumps("cold_arm64") {
        cold_then_warm(&dir);
    }
}

fn cold_then_warm(dir: &Path) {
    let cache = tempfile::tempdir().unwrap();
    let cold = stdout(&session(dir, cache.path(), &COMMANDS), "cold");
    let written: Vec<_> = std::fs::read_dir(cache.path()).unwrap().collect();
    assert!(
        written.is_empty(),
        "{}: the full index was built: {written:?}",
        dir.display()
    );
    assert!(cold.contains(",SCHED] task:"), "{cold}");

    // A type no unit read so far defines needs the full index, which is built and cached; the
    // same commands then answer from it.
    let out = session(dir, cache.path(), &["ptype struct kcrash_no_such_type"]);
    assert_eq!(out.status.code(), Some(1));
    let written: Vec<_> = std::fs::read_dir(cache.path()).unwrap().collect();
    assert_eq!(written.len(), 1, "the full index was not cached");
    let warm = stdout(&session(dir, cache.path(), &COMMANDS), "warm");
    assert_eq!(cold, warm, "cold, then with the full index");
}
