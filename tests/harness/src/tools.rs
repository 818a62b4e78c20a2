//! The external programs the pipelines run, found on PATH, and what a test does when one is
//! missing.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const QEMU: &str = "qemu-system-x86_64";
pub const QEMU_AARCH64: &str = "qemu-system-aarch64";
pub const MAKEDUMPFILE: &str = "makedumpfile";
pub const GDB: &str = "gdb";
pub const GCC: &str = "gcc";
/// The arm64 cross compiler (package gcc-aarch64-linux-gnu).
pub const AARCH64_GCC: &str = "aarch64-linux-gnu-gcc";
/// QEMU's arm64 user-mode emulator (package qemu-user).
pub const QEMU_USER_AARCH64: &str = "qemu-aarch64";

/// Set (to 1) by CI: a missing tool fails the tests instead of skipping them.
pub const REQUIRE_TOOLS: &str = "KCRASH_REQUIRE_TOOLS";

/// Full path of `program` on PATH, if it is there.
pub fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// The tools in `programs` that are not on PATH.
pub fn missing<'a>(programs: &[&'a str]) -> Vec<&'a str> {
    programs
        .iter()
        .copied()
        .filter(|p| find(p).is_none())
        .collect()
}

/// Whether KCRASH_REQUIRE_TOOLS asks for every tool.
pub fn required() -> bool {
    std::env::var(REQUIRE_TOOLS).is_ok_and(|v| v == "1")
}

/// For tests: whether `needed` are all on PATH. If not, says on stderr that `test` did not run
/// and why, or panics when KCRASH_REQUIRE_TOOLS=1.
pub fn available_for(test: &str, needed: &[&str]) -> bool {
    let missing = missing(needed);
    if missing.is_empty() {
        return true;
    }
    not_run(
        test,
        &format!(
            "{} not on PATH (apt-get install -y qemu-system-x86 makedumpfile gdb gcc)",
            missing.join(", ")
        ),
    );
    false
}

/// For tests: whether `program` starts (`program --version`; started at all is enough, as
/// gdb-add-index rejects the flag). If not, says so through [`not_run`].
pub fn runs(test: &str, program: &str) -> bool {
    let started = Command::new(program).arg("--version").output().is_ok();
    if !started {
        not_run(test, &format!("{program} cannot be run"));
    }
    started
}

/// For tests: says on stderr that `test` checks nothing here and why, or panics when
/// KCRASH_REQUIRE_TOOLS=1, where every input and tool must be there.
pub fn not_run(test: &str, why: &str) {
    let msg = format!("NOT RUN: {test}: {why}");
    assert!(!required(), "{msg}, and {REQUIRE_TOOLS}=1");
    // Straight to the process's stderr: libtest captures eprintln! of passing tests.
    let _ = writeln!(
        std::io::stderr(),
        "{msg} ({REQUIRE_TOOLS}=1 makes this a failure)"
    );
}

/// For tests: says on stderr that `test` checks nothing here and why, even under
/// KCRASH_REQUIRE_TOOLS=1: for inputs CI does not provide (another machine's /proc/kcore, a
/// distribution kernel image), whose absence is no fault of the machine.
pub fn not_run_here(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "NOT RUN: {test}: {why}");
}

/// First line of `program --version`, for the manifest's producer strings.
pub fn version_line(program: &Path) -> String {
    Command::new(program)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| program.display().to_string())
}

/// For tests: runs `command` (an oracle such as nm or readelf) to success and returns its
/// stdout; panics with its stderr otherwise.
pub fn output(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("tool output is UTF-8")
}
