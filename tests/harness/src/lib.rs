//! Turns kcrash's test kernels — the bare QEMU kernel and the hosted Linux programs (Rust and
//! C) — into crash dumps written by real producers, with an oracle independent of kcrash, and
//! keeps the corpus made of them. See README.md.

use std::path::{Path, PathBuf};
use std::process::Command;

pub mod arch;
pub mod capture;
pub mod coredump;
pub mod corpus;
pub mod dprobes;
pub mod dump;
pub mod expected;
pub mod gdbcheck;
pub mod initramfs;
pub mod kernel;
pub mod klogger;
pub mod linux;
pub mod makedumpfile;
pub mod oracle;
pub mod programs;
pub mod qemu;
pub mod qmp;
pub mod qnx;
pub mod run;
pub mod tools;

/// `cargo build --release --locked --target-dir TARGET` (the cargo running us, if any), clean of
/// the enclosing build's flags (e.g. cargo test's), which must not leak into a test kernel.
pub fn cargo_build(target_dir: &Path) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release", "--locked", "--target-dir"])
        .arg(target_dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET");
    cmd
}

/// The repository root (this crate lives at tests/harness).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/harness has two ancestors")
        .to_path_buf()
}
