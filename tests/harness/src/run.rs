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
            .env_remove("XDG_CONFIG_HOME")
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

/// How a run under [`bounded`] ended.
pub enum Ended {
    /// It exited with this status and output.
    Exited(Output),
    /// A signal ended it (an abort, or the kernel's answer to an allocation past the limit).
    Signalled(i32, Output),
    /// It was still running at the deadline and was killed.
    TimedOut,
}

/// Runs `cmd` with its address space limited to `memory` bytes, killed after `deadline`.
pub fn bounded(mut cmd: Command, memory: u64, deadline: std::time::Duration) -> Ended {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let limit = libc::rlimit {
        rlim_cur: memory,
        rlim_max: memory,
    };
    // SAFETY: setrlimit is async-signal-safe, the only call made between fork and exec.
    unsafe {
        cmd.pre_exec(move || match libc::setrlimit(libc::RLIMIT_AS, &limit) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        });
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the program starts");
    // Read both pipes while waiting, so a chatty child never blocks on a full pipe.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let output = |status| Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    };
    match status {
        None => Ended::TimedOut,
        Some(s) => match s.signal() {
            Some(sig) => Ended::Signalled(sig, output(s)),
            None => Ended::Exited(output(s)),
        },
    }
}
