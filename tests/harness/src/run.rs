//! Running a kcrash binary from a test. The caller names the binary: only kcrash's own tests
//! know the one cargo built for them (`env!("CARGO_BIN_EXE_kcrash")`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A kcrash binary, run without a terminal, with no `NO_COLOR` from the caller's environment,
/// a private HOME (no history file of the user's) and the name-index cache in `scratch`.
pub struct Kcrash {
    binary: PathBuf,
    scratch: PathBuf,
}

impl Kcrash {
    /// `scratch` holds what kcrash writes between runs: its HOME and its index cache.
    pub fn new(binary: impl Into<PathBuf>, scratch: impl Into<PathBuf>) -> Kcrash {
        Kcrash {
            binary: binary.into(),
            scratch: scratch.into(),
        }
    }

    /// The binary with this environment and no arguments yet.
    pub fn command(&self) -> Command {
        let home = self.scratch.join("home");
        let _ = std::fs::create_dir_all(&home);
        let mut cmd = Command::new(&self.binary);
        cmd.env_remove("NO_COLOR")
            .env("HOME", home)
            .env("KCRASH_INDEX_CACHE", self.scratch.join("index-cache"))
            .stdin(Stdio::null());
        cmd
    }

    /// `kcrash ARGS...`, its output captured.
    pub fn run<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> Output {
        self.command().args(args).output().expect("kcrash runs")
    }

    /// `kcrash -s -c COMMAND...`: each of `commands` in one session, the dump and image to add.
    pub fn session(&self, commands: &[&str]) -> Command {
        let mut cmd = self.command();
        cmd.arg("-s");
        for c in commands {
            cmd.arg("-c").arg(c);
        }
        cmd
    }

    /// `kcrash -s -c COMMAND... DUMP IMAGE`, its output captured.
    pub fn commands(&self, dump: &Path, image: &Path, commands: &[&str]) -> Output {
        self.session(commands)
            .arg(dump)
            .arg(image)
            .output()
            .expect("kcrash runs")
    }
}

/// A successful run's stdout; panics with the exit status and stderr otherwise.
pub fn stdout(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: exit {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("kcrash prints UTF-8")
}
