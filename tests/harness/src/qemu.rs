//! Boots a kernel under QEMU (TCG, headless), waits for its panic, and dumps it.

use crate::arch::Arch;
use crate::dump::{self, DumpFormat};
use crate::makedumpfile;
use crate::oracle::PANIC_PREFIX;
use crate::qmp::Qmp;
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What to boot and how.
pub struct Boot<'a> {
    pub image: &'a Path,
    pub cmdline: &'a str,
    pub memory_mib: u32,
    /// Processors (`-smp`).
    pub cpus: u32,
    /// How long the guest may run before it must have panicked.
    pub timeout: Duration,
}

/// Files left by one crash in the output directory.
pub struct Crash {
    pub console: PathBuf,
    pub dumps: Vec<(DumpFormat, PathBuf)>,
    /// Wall time from QEMU start to the panic event.
    pub boot_time: Duration,
    /// Wall time of all dumps (QEMU and makedumpfile).
    pub dump_time: Duration,
}

/// Kills QEMU if the run fails half-way.
pub(crate) struct QemuProcess(pub(crate) Child);

impl Drop for QemuProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A headless TCG machine of `arch` (a PC, or arm64's virt board) with its serial console in a
/// file, a QMP socket and, where the architecture has one, a pvpanic device.
pub(crate) struct Machine<'a> {
    pub arch: Arch,
    pub cpus: u32,
    pub memory_mib: u32,
    /// `-action panic=…`: `pause` stops the guest at its panic, `none` lets it finish printing.
    pub on_panic: &'a str,
    /// More devices (`-device NAME`).
    pub devices: &'a [&'a str],
    pub kernel: &'a Path,
    pub initrd: Option<&'a Path>,
    pub append: &'a str,
    pub console: &'a Path,
}

/// A started machine. The socket lives in a fresh short temporary directory: a socket path must
/// fit sun_path (108 bytes) and QEMU's option syntax (no commas).
pub(crate) struct Started {
    pub qemu: QemuProcess,
    pub socket: PathBuf,
    pub socket_dir: tempfile::TempDir,
    pub at: Instant,
}

impl Machine<'_> {
    pub fn start(&self) -> Result<Started> {
        for path in [Some(self.kernel), self.initrd, Some(self.console)]
            .into_iter()
            .flatten()
        {
            if path.to_string_lossy().contains(',') {
                bail!(
                    "{}: QEMU's option syntax cannot take a path with a comma",
                    path.display()
                );
            }
        }
        let socket_dir = tempfile::tempdir().context("creating a directory for the QMP socket")?;
        let socket = socket_dir.path().join("qmp.sock");
        let _ = std::fs::remove_file(self.console);
        let qemu = self.arch.qemu();
        let mut cmd = Command::new(qemu);
        cmd.arg("-machine")
            .arg(format!("{},accel=tcg", self.arch.machine()))
            .args(["-cpu", self.arch.cpu()])
            .args(["-smp", &self.cpus.to_string()])
            .args(["-m", &format!("{}M", self.memory_mib)])
            .args([
                "-nodefaults",
                "-vga",
                "none",
                "-display",
                "none",
                "-no-reboot",
            ])
            .arg("-action")
            .arg(format!("panic={}", self.on_panic));
        for device in self.arch.pvpanic().iter().chain(self.devices) {
            cmd.args(["-device", device]);
        }
        cmd.arg("-serial")
            .arg(format!("file:{}", self.console.display()))
            .arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", socket.display()))
            .arg("-kernel")
            .arg(self.kernel);
        if let Some(initrd) = self.initrd {
            cmd.arg("-initrd").arg(initrd);
        }
        let child = cmd
            .args(["-append", self.append])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {qemu}"))?;
        Ok(Started {
            qemu: QemuProcess(child),
            socket,
            socket_dir,
            at: Instant::now(),
        })
    }
}

impl QemuProcess {
    /// Kills QEMU after a failed run and says what it and the guest last said: QEMU's stderr,
    /// its exit status and the console's last `lines` lines, newest first.
    pub(crate) fn failure(&mut self, console: &Path, lines: usize) -> String {
        let _ = self.0.kill();
        let mut stderr = String::new();
        if let Some(mut pipe) = self.0.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        let status = self.0.wait().map(|s| s.to_string()).unwrap_or_default();
        let log = std::fs::read_to_string(console).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(lines).collect();
        format!(
            "qemu ({status}) stderr: {:?}; last console lines: {tail:?}",
            stderr.trim()
        )
    }
}

/// Boots `boot`, waits for the guest's pvpanic, then writes each of `formats` into `out`.
pub fn crash_and_dump(boot: &Boot, out: &Path, formats: &[DumpFormat]) -> Result<Crash> {
    if out.to_string_lossy().contains(',') {
        bail!(
            "{}: QEMU's option syntax cannot take a path with a comma",
            out.display()
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let out = out.canonicalize()?;
    let console = out.join("console.log");
    let mut machine = Machine {
        arch: Arch::X86_64,
        cpus: boot.cpus,
        memory_mib: boot.memory_mib,
        on_panic: "pause",
        devices: &[],
        kernel: boot.image,
        initrd: None,
        append: boot.cmdline,
        console: &console,
    }
    .start()?;
    let result = drive(boot, &out, &console, &machine.socket, formats, machine.at);
    if result.is_err() {
        let why = machine.qemu.failure(&console, 5);
        return result.with_context(|| why);
    }
    let status = machine.qemu.0.wait()?;
    if !status.success() {
        bail!("qemu exited with {status} after quit");
    }
    result
}

fn drive(
    boot: &Boot,
    out: &Path,
    console: &Path,
    socket: &Path,
    formats: &[DumpFormat],
    started: Instant,
) -> Result<Crash> {
    let mut qmp = Qmp::connect(socket, Duration::from_secs(10))?;
    qmp.wait_event("GUEST_PANICKED", boot.timeout)?;
    // The pause takes effect after the event; a dump started before it would resume the
    // guest when it completes.
    qmp.wait_event("STOP", Duration::from_secs(10))?;
    let status = qmp.execute("query-status", json!({}), Duration::from_secs(10))?;
    if status["status"] != "guest-panicked" {
        bail!("guest stopped in state {status} instead of guest-panicked");
    }
    let boot_time = started.elapsed();
    let log = std::fs::read_to_string(console)
        .with_context(|| format!("reading {}", console.display()))?;
    if !log.lines().any(|l| l.starts_with(PANIC_PREFIX)) {
        bail!("guest panicked without printing a {PANIC_PREFIX:?} line");
    }
    let dump_started = Instant::now();
    // A kdump-compressed file needs the flattened one first.
    let mut wanted: Vec<DumpFormat> = formats.to_vec();
    if wanted.contains(&DumpFormat::KdumpZlib) && !wanted.contains(&DumpFormat::KdumpZlibFlat) {
        wanted.push(DumpFormat::KdumpZlibFlat);
    }
    wanted.sort();
    let mut dumps = Vec::new();
    let mut written_by_qemu = Vec::new();
    for format in wanted {
        let path = out.join(format.file_name());
        let _ = std::fs::remove_file(&path);
        match format.qmp_command(&path, u64::from(boot.memory_mib) << 20) {
            Some((command, arguments)) => {
                qmp.execute(command, arguments, Duration::from_secs(600))
                    .with_context(|| format!("dumping {}", format.name()))?;
                written_by_qemu.push(path.clone());
            }
            None => {
                let flat = out.join(DumpFormat::KdumpZlibFlat.file_name());
                makedumpfile::unflatten(&flat, &path)?;
            }
        }
        dumps.push((format, path));
    }
    let dump_time = dump_started.elapsed();
    qmp.quit(Duration::from_secs(10))?;
    // Keep only what was asked for: the flattened file may have been an intermediate.
    let (dumps, intermediates): (Vec<_>, Vec<_>) = dumps
        .into_iter()
        .partition(|(format, _)| formats.contains(format));
    for (_, path) in intermediates {
        std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    }
    // Outside the dumps' time: giving back their blocks of zeros is the harness's doing.
    for (_, path) in &dumps {
        if written_by_qemu.contains(path) {
            dump::release_zero_blocks(path)?;
        }
    }
    Ok(Crash {
        console: console.to_path_buf(),
        dumps,
        boot_time,
        dump_time,
    })
}
