//! kcrash and gdb on the same corpus dump: the dumps (gzipped ones unpacked for both), kcrash's
//! output for one command, gdb's for several in one batch session, and the comparison.

use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use kcrash_harness::corpus;

/// A corpus dump (gzipped ones unpacked into a temporary file gdb and kcrash both read) and its
/// image.
pub struct Dump {
    pub core: PathBuf,
    pub image: PathBuf,
    _unpacked: Option<tempfile::TempPath>,
}

impl Dump {
    /// A dump that is read as it is, such as a core a test has just written.
    pub fn new(core: PathBuf, image: PathBuf) -> Dump {
        Dump {
            core,
            image,
            _unpacked: None,
        }
    }
}

pub fn unpack(gz: &Path, image: PathBuf) -> Dump {
    let mut data = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(gz).expect("corpus dump"))
        .read_to_end(&mut data)
        .expect("gunzip");
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    f.write_all(&data).expect("write temp");
    let unpacked = f.into_temp_path();
    Dump {
        core: unpacked.to_path_buf(),
        image,
        _unpacked: Some(unpacked),
    }
}

pub fn hosted_c(scenario: &str) -> Dump {
    let dir = corpus::file("hosted-c");
    unpack(&dir.join(scenario).join("core.gz"), dir.join("hosted-c"))
}

pub fn hosted_rust(scenario: &str) -> Dump {
    let dir = corpus::file("hosted");
    unpack(&dir.join(scenario).join("core.gz"), dir.join("hosted"))
}

pub fn bare(scenario: &str) -> Dump {
    let dir = corpus::file("bare");
    unpack(
        &dir.join(scenario).join("vmcore-paging.elf.gz"),
        dir.join("vmlinux"),
    )
}

/// kcrash's stdout for one command; panics with its stderr if it fails.
pub fn kcrash(d: &Dump, cmd: &str) -> String {
    let (out, err, ok) = kcrash_status(d, cmd);
    assert!(ok, "kcrash -c {cmd:?} failed: {err}");
    out.trim_end_matches('\n').to_owned()
}

/// kcrash's stdout, stderr and success for one command.
pub fn kcrash_status(d: &Dump, cmd: &str) -> (String, String, bool) {
    let out = super::kcrash().commands(&d.core, &d.image, &[cmd]);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

pub const SEP: &str = "@@kcrash-test@@";

/// gdb's output for each command, `$N = ` taken off, run in one batch session on the dump.
pub fn gdb(d: &Dump, rust: bool, cmds: &[String]) -> Vec<String> {
    let mut c = Command::new("gdb");
    c.args(["-batch", "-nx", "-ex", "set width 0", "-ex", "set height 0"]);
    if rust {
        c.args(["-ex", "set language rust"]);
    }
    for cmd in cmds {
        c.arg("-ex")
            .arg(format!("echo {SEP}\\n"))
            .arg("-ex")
            .arg(cmd);
    }
    c.arg(&d.image).arg(&d.core);
    let out = c.output().expect("run gdb");
    // Errors go to stderr, interleaved: take them into the same stream.
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts: Vec<String> = text
        .split(&format!("{SEP}\n"))
        .skip(1)
        .map(|s| strip_history(s.trim_end_matches('\n')))
        .collect();
    parts.resize(cmds.len(), String::new());
    parts
}

/// `$12 = value` → `value`.
pub fn strip_history(s: &str) -> String {
    if let Some(rest) = s.strip_prefix('$') {
        if let Some((n, v)) = rest.split_once(" = ") {
            if n.chars().all(|c| c.is_ascii_digit()) {
                return v.to_owned();
            }
        }
    }
    s.to_owned()
}

/// Runs each command in kcrash and in gdb and requires the same output.
pub fn same_as_gdb(d: &Dump, rust: bool, cmds: &[&str]) {
    let cmds: Vec<String> = cmds.iter().map(|s| s.to_string()).collect();
    let want = gdb(d, rust, &cmds);
    for (cmd, want) in cmds.iter().zip(&want) {
        assert_eq!(
            kcrash(d, cmd),
            *want,
            "`{cmd}`: kcrash (left) and gdb (right) differ"
        );
    }
}
