//! The external programs the pipeline runs, found on PATH, and what to do when one is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

pub const GCC: &str = "gcc";
pub const GDB: &str = "gdb";

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
