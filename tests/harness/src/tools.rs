//! The external programs the pipelines run, found on PATH, and what a test does when one is
//! missing.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const QEMU: &str = "qemu-system-x86_64";
pub const MAKEDUMPFILE: &str = "makedumpfile";
pub const GDB: &str = "gdb";
pub const GCC: &str = "gcc";

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
    let why = format!(
        "NOT RUN: {test}: {} not on PATH (apt-get install -y qemu-system-x86 makedumpfile gdb gcc; \
         {REQUIRE_TOOLS}=1 makes this a failure)",
        missing.join(", ")
    );
    assert!(!required(), "{why}, and {REQUIRE_TOOLS}=1");
    // Straight to the process's stderr: libtest captures eprintln! of passing tests.
    let _ = writeln!(std::io::stderr(), "{why}");
    false
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
