//! The external programs the pipeline runs, found on PATH.

use std::path::PathBuf;

pub const QEMU: &str = "qemu-system-x86_64";
pub const MAKEDUMPFILE: &str = "makedumpfile";
pub const GDB: &str = "gdb";

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
