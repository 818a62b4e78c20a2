//! Running a test program to its crash and taking its core: the one Linux writes when it aborts,
//! or, when Linux will not leave one where we can find it, gdb's gcore of the stopped process; a
//! program built for another architecture runs under QEMU's user-mode emulator, which writes
//! the core itself.

use anyhow::{anyhow, bail, Context, Result};
use std::fs::File;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::tools;

/// How a core is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capture {
    /// The program aborts and the Linux kernel writes the core (core_pattern, RLIMIT_CORE).
    Kernel,
    /// The program stops itself (`--stop`); `gdb -batch -ex gcore` dumps it, then it is killed.
    Gcore,
    /// The program aborts under QEMU's user-mode emulator, which writes the target's core
    /// (`qemu_<program>_<date>-<time>_<pid>.core`) before it dies of the signal itself.
    QemuUser,
}

impl Capture {
    /// Format name in the manifest.
    pub fn format(self) -> &'static str {
        match self {
            Capture::Kernel => "elf-core",
            Capture::Gcore => "elf-core-gcore",
            Capture::QemuUser => "elf-core-qemu-user",
        }
    }
}

/// One program run to its crash.
pub struct Run<'a> {
    pub program: &'a Path,
    pub scenario: &'a str,
    /// Where console.log, stderr.log and core go; the program runs here.
    pub dir: &'a Path,
    pub timeout: Duration,
    /// The user-mode emulator to run it under (a program built for another architecture).
    pub emulator: Option<&'a str>,
}

/// What a run left in its directory.
pub struct Crashed {
    pub console: PathBuf,
    pub core: PathBuf,
    pub capture: Capture,
    /// What wrote the core, for the manifest.
    pub producer: String,
}

/// Why Linux left no core we can use; the caller may fall back to gcore.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NoKernelCore(pub String);

/// Runs the program and takes a kernel core; when Linux leaves none (core_pattern pipes to a
/// program, RLIMIT_CORE's hard limit is 0, ...), runs it again and takes a gcore. Under an
/// emulator, the emulator's core.
pub fn crash(run: &Run) -> Result<Crashed> {
    if run.emulator.is_some() {
        return crash_with(run, Capture::QemuUser);
    }
    match crash_with(run, Capture::Kernel) {
        Err(e) if e.downcast_ref::<NoKernelCore>().is_some() => {
            eprintln!("note: {e:#}; taking the core with gdb's gcore instead");
            crash_with(run, Capture::Gcore)
        }
        other => other,
    }
}

/// Runs the program and takes its core the given way.
pub fn crash_with(run: &Run, capture: Capture) -> Result<Crashed> {
    std::fs::create_dir_all(run.dir).with_context(|| format!("creating {}", run.dir.display()))?;
    let core = run.dir.join("core");
    // A core left by an earlier run must not pass for this one's.
    remove_if_present(&core)?;
    match capture {
        Capture::Kernel => kernel_core(run, &core),
        Capture::Gcore => gcore(run, &core),
        Capture::QemuUser => match qemu_user_core(run, &core) {
            // QEMU exits as if it had dumped the core whole even when it stopped short (a core
            // cut so came once in CI; 90 runs of the same scenario here, 60 of them with both
            // CPUs loaded, never cut one). Once more, after saying so; a second cut core is the
            // error.
            Err(e) if e.downcast_ref::<CutCore>().is_some() => {
                eprintln!("note: {e:#}; running it once more");
                qemu_user_core(run, &core)
            }
            other => other,
        },
    }
}

/// The emulator's core ends before its program headers say; why, as far as the run shows.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct CutCore(String);

/// Checks that every PT_LOAD of a fresh core lies inside the file.
fn check_whole(run: &Run, core: &Path) -> Result<()> {
    let bytes = std::fs::read(core).with_context(|| format!("reading {}", core.display()))?;
    let Err(e) = crate::coredump::Memory::parse(&bytes) else {
        return Ok(());
    };
    let stderr = std::fs::read_to_string(run.dir.join("stderr.log")).unwrap_or_default();
    Err(CutCore(format!(
        "{} of {} ({} bytes) is cut short: {e:#}; {}; the emulator's stderr: {:?}",
        core.display(),
        run.scenario,
        bytes.len(),
        free_space(run.dir),
        stderr.trim()
    ))
    .into())
}

/// The space left on `dir`'s file system, as words for an error.
fn free_space(dir: &Path) -> String {
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return "free space unknown".into();
    };
    // SAFETY: statvfs is plain data, all zeros a valid value.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: the path is NUL-terminated; the call writes only into `stat`.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return format!("free space unknown ({})", std::io::Error::last_os_error());
    }
    let free = u128::from(stat.f_bavail) * u128::from(stat.f_frsize);
    format!("{} MiB free on {}", free >> 20, dir.display())
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

fn spawn(run: &Run, extra: &[&str]) -> Result<Child> {
    let console = File::create(run.dir.join("console.log"))?;
    let stderr = File::create(run.dir.join("stderr.log"))?;
    let mut cmd = match run.emulator {
        Some(emulator) => {
            let mut cmd = Command::new(emulator);
            cmd.arg(run.program);
            // QEMU writes its core only if RLIMIT_CORE allows, which may be 0 here.
            // SAFETY: the closure runs in the child between fork and exec and calls only
            // setrlimit, which is async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    let unlimited = libc::rlimit {
                        rlim_cur: libc::RLIM_INFINITY,
                        rlim_max: libc::RLIM_INFINITY,
                    };
                    if libc::setrlimit(libc::RLIMIT_CORE, &unlimited) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                })
            };
            cmd
        }
        None => Command::new(run.program),
    };
    cmd.arg(run.scenario)
        .args(extra)
        .current_dir(run.dir)
        .stdin(Stdio::null())
        .stdout(console)
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("starting {}", run.program.display()))
}

fn program_failed(run: &Run, status: ExitStatus) -> anyhow::Error {
    let stderr = std::fs::read_to_string(run.dir.join("stderr.log")).unwrap_or_default();
    anyhow!(
        "{} {} did not crash as planned ({status}): {}",
        run.program.display(),
        run.scenario,
        stderr.trim()
    )
}

fn kernel_core(run: &Run, core: &Path) -> Result<Crashed> {
    if let Some(reason) = kernel_core_blocker()? {
        return Err(NoKernelCore(reason).into());
    }
    let pattern = read_trimmed("/proc/sys/kernel/core_pattern")?;
    let uses_pid = read_trimmed("/proc/sys/kernel/core_uses_pid")? == "1";
    let mut child = spawn(run, &[])?;
    let pid = child.id();
    let status = wait_with_timeout(&mut child, run.timeout)?;
    if status.signal() != Some(libc::SIGABRT) {
        return Err(program_failed(run, status));
    }
    if !status.core_dumped() {
        return Err(NoKernelCore(format!(
            "Linux wrote no core for pid {pid} (RLIMIT_CORE hard limit 0, or core_pattern {pattern:?} unwritable)"
        ))
        .into());
    }
    let name = CoreName::new(&pattern, uses_pid, pid, run.program);
    let found = name.find(run.dir)?;
    move_file(&found, core)?;
    Ok(Crashed {
        console: run.dir.join("console.log"),
        core: core.to_path_buf(),
        capture: Capture::Kernel,
        producer: format!("Linux core dump on SIGABRT (core_pattern {pattern:?})"),
    })
}

fn qemu_user_core(run: &Run, core: &Path) -> Result<Crashed> {
    let emulator = run
        .emulator
        .ok_or_else(|| anyhow!("{} has no emulator to run under", run.program.display()))?;
    let found = |dir: &Path| -> Result<Vec<PathBuf>> {
        let prefix = format!(
            "qemu_{}_",
            run.program
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
        );
        Ok(std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().unwrap_or_default().to_string_lossy();
                name.starts_with(&prefix) && name.ends_with(".core")
            })
            .collect())
    };
    for old in found(run.dir)? {
        remove_if_present(&old)?;
    }
    let mut child = spawn(run, &[])?;
    let pid = child.id();
    let status = wait_with_timeout(&mut child, run.timeout)?;
    if status.signal() != Some(libc::SIGABRT) {
        return Err(program_failed(run, status));
    }
    // The host kernel may also have dumped the emulator itself: not the program's core.
    let pattern = read_trimmed("/proc/sys/kernel/core_pattern")?;
    let uses_pid = read_trimmed("/proc/sys/kernel/core_uses_pid")? == "1";
    if !pattern.starts_with('|') {
        if let Ok(host) = CoreName::new(&pattern, uses_pid, pid, Path::new(emulator)).find(run.dir)
        {
            remove_if_present(&host)?;
        }
    }
    let mut cores = found(run.dir)?;
    let Some(written) = cores.pop().filter(|_| cores.is_empty()) else {
        bail!(
            "{emulator} left {} cores for pid {pid} in {} (one expected)",
            cores.len(),
            run.dir.display()
        );
    };
    move_file(&written, core)?;
    check_whole(run, core)?;
    let qemu = tools::find(emulator).ok_or_else(|| anyhow!("{emulator} is not on PATH"))?;
    Ok(Crashed {
        console: run.dir.join("console.log"),
        core: core.to_path_buf(),
        capture: Capture::QemuUser,
        producer: format!(
            "{} user-mode emulator's core on SIGABRT",
            tools::version_line(&qemu)
        ),
    })
}

/// Why Linux cannot leave a core file we can find, known before trying: core_pattern pipes
/// cores to a program (systemd-coredump, apport, ...).
pub fn kernel_core_blocker() -> Result<Option<String>> {
    let pattern = read_trimmed("/proc/sys/kernel/core_pattern")?;
    Ok(pattern
        .starts_with('|')
        .then(|| format!("core_pattern pipes cores to a program ({pattern})")))
}

fn gcore(run: &Run, core: &Path) -> Result<Crashed> {
    let gdb = tools::find(tools::GDB).ok_or_else(|| anyhow!("gdb is not on PATH"))?;
    let child = spawn(run, &["--stop"])?;
    let pid = child.id() as libc::pid_t;
    // Killed and reaped on every path out of here.
    let mut stopped = Stopped { pid, reaped: false };
    stopped.wait_until_stopped(run)?;
    let log_path = run.dir.join("gdb.log");
    let log = File::create(&log_path)?;
    let mut gdb_run = Command::new(&gdb)
        .args(["-batch", "-nx", "-p", &pid.to_string(), "-ex"])
        .arg(format!("gcore {}", core.display()))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("running gdb")?;
    let status = wait_with_timeout(&mut gdb_run, run.timeout);
    drop(stopped);
    let status = status?;
    if !status.success() || !core.is_file() {
        // gdb says why (ptrace refused, ...) in its last lines.
        let said = std::fs::read_to_string(&log_path).unwrap_or_default();
        let tail: Vec<&str> = said.lines().rev().take(3).collect();
        bail!(
            "gdb gcore of pid {pid} failed ({status}): {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        );
    }
    Ok(Crashed {
        console: run.dir.join("console.log"),
        core: core.to_path_buf(),
        capture: Capture::Gcore,
        producer: format!("gdb gcore ({})", tools::version_line(&gdb)),
    })
}

/// A child that stops itself; killed and reaped when dropped, unless it already died.
struct Stopped {
    pid: libc::pid_t,
    /// waitpid has collected its exit: the pid may belong to someone else now.
    reaped: bool,
}

impl Stopped {
    fn wait_until_stopped(&mut self, run: &Run) -> Result<()> {
        let start = Instant::now();
        loop {
            let mut status = 0;
            // SAFETY: waitpid on our own child with a valid status pointer.
            let r =
                unsafe { libc::waitpid(self.pid, &mut status, libc::WUNTRACED | libc::WNOHANG) };
            if r == self.pid {
                if libc::WIFSTOPPED(status) {
                    return Ok(());
                }
                self.reaped = true;
                return Err(program_failed(run, ExitStatus::from_raw(status)));
            }
            if r < 0 {
                return Err(std::io::Error::last_os_error()).context("waitpid");
            }
            if start.elapsed() > run.timeout {
                bail!(
                    "{} {} did not stop within {:?}",
                    run.program.display(),
                    run.scenario,
                    run.timeout
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        let mut status = 0;
        // SAFETY: signalling and reaping our own child, whose pid cannot be reused before the
        // reap below.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Result<ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            bail!("pid {} still running after {timeout:?}; killed", child.id());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn read_trimmed(path: &str) -> Result<String> {
    Ok(std::fs::read_to_string(path)
        .with_context(|| format!("reading {path}"))?
        .trim_end_matches('\n')
        .to_string())
}

fn move_file(from: &Path, to: &Path) -> Result<()> {
    if std::fs::rename(from, to).is_err() {
        std::fs::copy(from, to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
        std::fs::remove_file(from)?;
    }
    Ok(())
}

/// Where core_pattern says the kernel put a core: a directory and a file-name pattern in which
/// the specifiers we cannot know (time, thread ids, ...) match anything.
#[derive(Debug, PartialEq, Eq)]
struct CoreName {
    /// Directory, relative to the crashed process's working directory unless absolute.
    dir: PathBuf,
    name: Vec<Piece>,
}

#[derive(Debug, PartialEq, Eq)]
enum Piece {
    Text(String),
    Any,
}

impl CoreName {
    /// Expands `pattern` (see core(5)) for the process `pid` running `program`.
    fn new(pattern: &str, uses_pid: bool, pid: u32, program: &Path) -> CoreName {
        let file = program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // The kernel's comm: the file name cut to 15 bytes.
        let comm: String = file.bytes().take(15).map(char::from).collect();
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                text.push(c);
                continue;
            }
            let known = match chars.next() {
                Some('%') => Some("%".to_string()),
                Some('p') => Some(pid.to_string()),
                Some('s') => Some(libc::SIGABRT.to_string()),
                // SAFETY: getuid/getgid have no preconditions; the child runs as we do.
                Some('u') => Some(unsafe { libc::getuid() }.to_string()),
                Some('g') => Some(unsafe { libc::getgid() }.to_string()),
                Some('e') => Some(comm.clone()),
                Some('f') => Some(file.clone()),
                Some('E') => Some(program.display().to_string().replace('/', "!")),
                Some('h') => hostname(),
                _ => None,
            };
            match known {
                Some(k) => text.push_str(&k),
                None => {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                    pieces.push(Piece::Any);
                }
            }
        }
        if uses_pid && !pattern.contains("%p") {
            text.push_str(&format!(".{pid}"));
        }
        pieces.push(Piece::Text(text));
        // Split off the directory: everything up to the last '/' of the leading text.
        let mut dir = PathBuf::new();
        if let Some(Piece::Text(first)) = pieces.first_mut() {
            if let Some(slash) = first.rfind('/') {
                dir = PathBuf::from(&first[..=slash]);
                *first = first[slash + 1..].to_string();
            }
        }
        pieces.retain(|p| *p != Piece::Text(String::new()));
        CoreName { dir, name: pieces }
    }

    fn matches(&self, name: &str) -> bool {
        fn rest(pieces: &[Piece], name: &str) -> bool {
            match pieces.split_first() {
                None => name.is_empty(),
                Some((Piece::Text(t), tail)) => {
                    name.strip_prefix(t.as_str()).is_some_and(|n| rest(tail, n))
                }
                Some((Piece::Any, tail)) => (0..=name.len())
                    .filter(|&i| name.is_char_boundary(i))
                    .any(|i| rest(tail, &name[i..])),
            }
        }
        rest(&self.name, name)
    }

    /// The newest file matching the pattern, looking from the process's working directory `cwd`.
    fn find(&self, cwd: &Path) -> Result<PathBuf> {
        let dir = cwd.join(&self.dir);
        if self
            .name
            .iter()
            .any(|p| matches!(p, Piece::Text(t) if t.contains('/')))
        {
            return Err(NoKernelCore(format!(
                "core_pattern puts cores in a directory named after the process ({self:?})"
            ))
            .into());
        }
        let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| NoKernelCore(format!("cannot list {}: {e}", dir.display())))?;
        for entry in entries {
            let entry = entry?;
            if !self.matches(&entry.file_name().to_string_lossy()) {
                continue;
            }
            let modified = entry.metadata()?.modified()?;
            if newest.as_ref().is_none_or(|(t, _)| modified > *t) {
                newest = Some((modified, entry.path()));
            }
        }
        newest.map(|(_, p)| p).ok_or_else(|| {
            NoKernelCore(format!(
                "no core matching core_pattern in {} ({self:?})",
                dir.display()
            ))
            .into()
        })
    }
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(pattern: &str, uses_pid: bool) -> CoreName {
        CoreName::new(
            pattern,
            uses_pid,
            42,
            Path::new("/x/hosted-program-long-name"),
        )
    }

    #[test]
    fn plain_core_in_the_working_directory() {
        let n = name("core", false);
        assert_eq!(n.dir, PathBuf::new());
        assert!(n.matches("core"));
        assert!(!n.matches("core.42"));
        assert!(name("core", true).matches("core.42"));
    }

    #[test]
    fn known_specifiers_expand_and_unknown_ones_match_anything() {
        let n = name("/var/crash/core.%e.%p.%t", false);
        assert_eq!(n.dir, PathBuf::from("/var/crash/"));
        assert!(
            n.matches("core.hosted-program-.42.1700000000"),
            "comm is cut to 15 bytes"
        );
        assert!(!n.matches("core.hosted-program-.43.1700000000"));
        assert!(name("%%core-%s", false).matches("%core-6"));
    }

    #[test]
    fn a_core_cut_short_is_told_apart_with_the_emulators_stderr() {
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
        let whole = crate::coredump::load(&corpus.join("hosted-arm64/unfilled/core.gz")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let run = Run {
            program: Path::new("hosted"),
            scenario: "unfilled",
            dir: dir.path(),
            timeout: Duration::from_secs(1),
            emulator: Some(tools::QEMU_USER_AARCH64),
        };
        let core = dir.path().join("core");
        std::fs::write(&core, &whole).unwrap();
        check_whole(&run, &core).unwrap();

        std::fs::write(&core, &whole[..whole.len() - 1]).unwrap();
        std::fs::write(dir.path().join("stderr.log"), "unable to dump 4000\n").unwrap();
        let e = check_whole(&run, &core).unwrap_err();
        assert!(e.downcast_ref::<CutCore>().is_some(), "{e:#}");
        let said = format!("{e:#}");
        assert!(said.contains("a PT_LOAD lies outside the file"), "{said}");
        assert!(said.contains("MiB free on"), "{said}");
        assert!(said.contains("\"unable to dump 4000\""), "{said}");
    }

    #[test]
    fn a_directory_named_after_the_process_is_not_searched() {
        let n = name("/cores/%t/core", false);
        assert!(n.find(Path::new("/")).is_err());
    }
}
