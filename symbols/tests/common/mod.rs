//! Test helpers: building the fixtures with the real compilers, and the independent oracles
//! (the fixture programs' own output, `nm`, binutils `addr2line`).

#![allow(dead_code)] // each test file uses its own subset

pub mod module;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kcrash_harness::tools;

pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Compiles the C fixture with gcc and `flags` into `dir/name`.
pub fn gcc(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let out = dir.join(name);
    tools::output(
        Command::new("gcc")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(data("klog.c")),
    );
    out
}

/// Compiles the Rust fixture with rustc (full debug info, no optimisation) into `dir/name`.
pub fn rustc(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    tools::output(
        Command::new(rustc)
            .args([
                "--edition",
                "2021",
                "-C",
                "debuginfo=2",
                "-C",
                "opt-level=0",
            ])
            .args(["--crate-name", "klog_fixture", "-o"])
            .arg(&out)
            .arg(data("rust_fixture.rs")),
    );
    out
}

/// What a fixture program prints about itself: `key words... value` lines, keyed by the words
/// before the last.
pub struct Facts(HashMap<String, String>);

impl Facts {
    pub fn of(program: &Path) -> Facts {
        let output = tools::output(&mut Command::new(program));
        Facts(
            output
                .lines()
                .filter_map(|line| {
                    let (key, value) = line.rsplit_once(' ')?;
                    Some((key.to_owned(), value.to_owned()))
                })
                .collect(),
        )
    }

    pub fn text(&self, key: &str) -> &str {
        self.0
            .get(key)
            .unwrap_or_else(|| panic!("fixture did not print {key:?}"))
    }

    pub fn get(&self, key: &str) -> u64 {
        let value = self
            .0
            .get(key)
            .unwrap_or_else(|| panic!("fixture did not print {key:?}"));
        match value.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => value.parse(),
        }
        .unwrap_or_else(|e| panic!("{key}: {value}: {e}"))
    }
}

/// Symbol addresses as `nm` prints them.
pub fn nm(file: &Path) -> HashMap<String, u64> {
    tools::output(Command::new("nm").arg(file))
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let address = u64::from_str_radix(words.next()?, 16).ok()?;
            let _kind = words.next()?;
            Some((words.next()?.to_owned(), address))
        })
        .collect()
}
