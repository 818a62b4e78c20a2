//! The guest: its initramfs and /init, one boot under QEMU to a stopped, panicked kernel, and
//! what its console says.

use super::debian::{Kernel, BUSYBOX};
use super::{cmdline, CPUS, MEMORY_MIB, PANIC_END, PANIC_MESSAGE, PANIC_START};
use crate::initramfs::{newc_cpio, CpioEntry};
use crate::qemu::{Machine, QemuProcess, Started};
use crate::qmp::Qmp;
use crate::{dump, oracle};
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A file added to the initramfs besides busybox and the modules (e.g. a static kcrash binary
/// and the script that runs it, for a guest that reads its own /proc/kcore).
#[derive(Debug, Clone)]
pub struct Extra {
    /// Path inside the guest, without the leading '/'.
    pub guest: String,
    pub data: Vec<u8>,
    pub mode: u32,
}

impl Extra {
    /// `HOST:GUEST` (as on the command line): the host file at the guest path, its mode kept.
    pub fn parse(spec: &str) -> Result<Extra> {
        let (host, guest) = spec
            .split_once(':')
            .with_context(|| format!("{spec:?} is not HOST:GUEST"))?;
        let data = std::fs::read(host).with_context(|| format!("reading {host}"))?;
        let mode = {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(host)?.permissions().mode() & 0o777
        };
        Ok(Extra {
            guest: guest.trim_start_matches('/').to_string(),
            data,
            mode,
        })
    }
}

/// The modules /init loads, in order: the image's (VMCOREINFO to QEMU, pvpanic) then ours. Each
/// at the first of its paths the image has; pvpanic-mmio, part of pvpanic.ko before Linux 5.12,
/// only where it is a module of its own.
const IMAGE_MODULES: [(&str, &[&str]); 3] = [
    ("qemu_fw_cfg", &["drivers/firmware/qemu_fw_cfg.ko"]),
    (
        "pvpanic",
        &["drivers/misc/pvpanic/pvpanic.ko", "drivers/misc/pvpanic.ko"],
    ),
    ("pvpanic-mmio", &["drivers/misc/pvpanic/pvpanic-mmio.ko"]),
];

/// The first of `paths` (under the image's lib/modules/<release>/kernel) that `kernel` has, as
/// `.ko` or, as Debian ships them since 6.x's backports, `.ko.xz`.
pub(super) fn image_module(kernel: &Kernel, paths: &[&str]) -> Option<PathBuf> {
    paths
        .iter()
        .flat_map(|p| [kernel.module(p), kernel.module(&format!("{p}.xz"))])
        .find(|p| p.is_file())
}

/// A module of the image as the guest gets it: uncompressed, since busybox's insmod loads a
/// module as it is.
pub(super) fn module_bytes(path: &Path) -> Result<Vec<u8>> {
    if path.extension().is_some_and(|e| e == "xz") {
        let out = Command::new("xz")
            .arg("-dc")
            .arg(path)
            .output()
            .context("running xz -dc")?;
        if !out.status.success() {
            bail!(
                "xz -dc {} failed: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(out.stdout)
    } else {
        std::fs::read(path).with_context(|| format!("reading {}", path.display()))
    }
}

/// The modules of [`IMAGE_MODULES`] `kernel` has: (name, file in the image).
fn image_modules(kernel: &Kernel) -> Result<Vec<(&'static str, PathBuf)>> {
    let mut found = Vec::new();
    for (name, paths) in IMAGE_MODULES {
        match image_module(kernel, paths) {
            Some(path) => found.push((name, path)),
            None if name == "pvpanic-mmio" => {}
            None => bail!(
                "Linux {} has no {name} module (looked for {})",
                kernel.release,
                paths.join(", ")
            ),
        }
    }
    Ok(found)
}

/// KiB of each CPU's top ftrace ring: enough to keep what klogtest's run traced.
pub const TRACE_KB: u32 = 16;
/// The trace events the guest enables (klogtest's own trace_printk needs none).
pub const TRACE_EVENTS: [&str; 6] = [
    "sched/sched_switch",
    "sched/sched_wakeup",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
];
/// The named trace instance the guest makes (the same events on CPU 0 only, in a ring that wraps).
pub const TRACE_INSTANCE: &str = "kcrash";
/// The instance tracing every event the kernel has, in 64 KiB rings: the
/// kernel's formats of every kind that fires while the modules load.
pub const TRACE_ALL: &str = "all";

/// How every guest's /init (busybox sh) starts, after its first comment line: proc, sysfs and
/// devtmpfs mounted, `$B` the busybox.
pub const INIT_MOUNTS: &str = "B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sysfs /sys
$B mount -t devtmpfs dev /dev
";

/// How every guest's /init ends: the oracle's panic line through /dev/kmsg, then sysrq-c.
pub fn init_crash() -> String {
    format!("echo \"KCRASH-PANIC {PANIC_MESSAGE}\" > /dev/kmsg\necho c > /proc/sysrq-trigger\n")
}

/// The guest's /init (busybox sh): record ftrace events while the modules load if `trace`, load
/// the modules, put the module's section addresses and /proc/modules on the console (oracles for
/// `mod`), run `run` if given, then crash.
pub fn init_script(image_modules: &[&str], run: Option<&str>, trace: bool) -> String {
    let modules: Vec<&str> = image_modules.iter().copied().chain(["klogtest"]).collect();
    let (trace_on, trace_off) = if trace {
        (trace_start(), trace_stop())
    } else {
        (String::new(), String::new())
    };
    format!(
        r#"#!/bin/busybox sh
# kcrash's Linux test guest (generated by kcrash-harness).
{INIT_MOUNTS}{trace_on}for m in {modules}; do
    $B insmod /lib/modules/$m.ko || echo "KCRASH-INIT insmod $m failed" > /dev/kmsg
done
{trace_off}for f in /sys/module/klogtest/sections/* /sys/module/klogtest/sections/.[!.]*; do
    [ -f "$f" ] || continue
    echo "KCRASH-SECTION module=klogtest name=${{f##*/}} addr=$($B cat $f)" > /dev/kmsg
done
while read -r line; do echo "KCRASH-PROC-MODULES $line" > /dev/kmsg; done < /proc/modules
{run}
{crash}"#,
        modules = modules.join(" "),
        run = run.unwrap_or(""),
        crash = init_crash(),
    )
}

/// ftrace, recording while the modules load: scheduler and interrupt events in the top rings
/// (klogtest's trace_printk records go there too), an instance tracing the same on CPU 0 only in
/// the smallest ring, which wraps while CPU 1's stays empty, and one tracing every event.
/// Pointers stay hashed in the trace files: with hash-ptr off, 6.1 prints the %s arguments of
/// many events (gfp_flags, comm, console's msg) empty.
fn trace_start() -> String {
    let events = TRACE_EVENTS.join(" ");
    format!(
        r#"$B mount -t tracefs nodev /sys/kernel/tracing
T=/sys/kernel/tracing
echo {TRACE_KB} > $T/buffer_size_kb
for e in {events}; do echo 1 > $T/events/$e/enable; done
$B mkdir $T/instances/{TRACE_INSTANCE}
echo 4 > $T/instances/{TRACE_INSTANCE}/buffer_size_kb
echo 1 > $T/instances/{TRACE_INSTANCE}/tracing_cpumask
for e in {events}; do echo 1 > $T/instances/{TRACE_INSTANCE}/events/$e/enable; done
$B mkdir $T/instances/{TRACE_ALL}
echo 64 > $T/instances/{TRACE_ALL}/buffer_size_kb
echo 1 > $T/instances/{TRACE_ALL}/events/enable
"#
    )
}

/// The rings stop once the modules are loaded, with klogtest's trace_printk records in them:
/// what the trace files print then is what the dump holds (the oracle of kcrash's `trace`).
fn trace_stop() -> String {
    format!(
        r#"echo 0 > $T/tracing_on
echo 0 > $T/instances/{TRACE_INSTANCE}/tracing_on
echo 0 > $T/instances/{TRACE_ALL}/tracing_on
while IFS= read -r l; do echo "KCRASH-TRACE $l"; done < $T/trace > /dev/console
while IFS= read -r l; do echo "KCRASH-TRACE-{TRACE_INSTANCE} $l"; done < $T/instances/{TRACE_INSTANCE}/trace > /dev/console
while IFS= read -r l; do echo "KCRASH-TRACE-{TRACE_ALL} $l"; done < $T/instances/{TRACE_ALL}/trace > /dev/console
"#
    )
}

/// The initramfs: busybox at /bin/busybox, the modules in /lib/modules, /init, and `extras`.
pub fn initramfs(
    kernel: &Kernel,
    module: &Path,
    extras: &[Extra],
    run: Option<&str>,
) -> Result<Vec<u8>> {
    let read =
        |path: &Path| std::fs::read(path).with_context(|| format!("reading {}", path.display()));
    let image_modules = image_modules(kernel)?;
    let names: Vec<&str> = image_modules.iter().map(|(name, _)| *name).collect();
    let mut files: Vec<(String, Vec<u8>, u32)> = vec![
        (
            "init".into(),
            init_script(&names, run, true).into_bytes(),
            0o755,
        ),
        ("bin/busybox".into(), read(Path::new(BUSYBOX))?, 0o755),
        ("lib/modules/klogtest.ko".into(), read(module)?, 0o644),
    ];
    for (name, path) in image_modules {
        files.push((
            format!("lib/modules/{name}.ko"),
            module_bytes(&path)?,
            0o644,
        ));
    }
    for extra in extras {
        files.push((extra.guest.clone(), extra.data.clone(), extra.mode));
    }
    Ok(cpio(&files))
}

/// An initramfs of `files` (path in the guest, contents, mode): the directories they need and
/// the mount points, `/dev/console`, then the files.
pub fn cpio(files: &[(String, Vec<u8>, u32)]) -> Vec<u8> {
    let dirs = directories(files.iter().map(|(name, _, _)| name.as_str()));
    let mut entries: Vec<CpioEntry> = dirs.iter().map(|d| CpioEntry::Dir(d)).collect();
    entries.push(CpioEntry::CharDevice {
        name: "dev/console",
        major: 5,
        minor: 1,
    });
    entries.extend(files.iter().map(|(name, data, mode)| CpioEntry::File {
        name,
        mode: *mode,
        data,
    }));
    newc_cpio(&entries)
}

/// The directories an initramfs needs for `files` (every parent, and the mount points), each
/// before what it holds: a parent sorts before its children.
fn directories<'a>(files: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
    let mut dirs: BTreeSet<String> = ["dev", "proc", "sys"].map(String::from).into();
    for name in files {
        let mut parent = Path::new(name).parent();
        while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
            dirs.insert(dir.to_string_lossy().into_owned());
            parent = dir.parent();
        }
    }
    dirs
}

/// A console line without printk's `[    1.234567] ` time stamp and the serial line's '\r'.
pub fn console_line(line: &str) -> &str {
    let line = line.strip_suffix('\r').unwrap_or(line);
    match line
        .strip_prefix('[')
        .and_then(|rest| rest.split_once("] "))
    {
        Some((time, rest))
            if !time.trim().is_empty()
                && time.trim().chars().all(|c| c.is_ascii_digit() || c == '.') =>
        {
            rest
        }
        _ => line,
    }
}

/// The console as the oracle parser reads it: one line per printk record, time stamps dropped.
pub fn console_text(console: &str) -> String {
    console
        .lines()
        .map(|l| format!("{}\n", console_line(l)))
        .collect()
}

/// What any guest's console says of its kernel and its panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanicFacts {
    pub release: String,
    /// KASLR's shift of the kernel image, from the panic's "Kernel Offset: 0x... from 0x..."
    /// line; `None` where it says "Kernel Offset: disabled" (arm64 without a KASLR seed).
    pub kaslr_offset: Option<u64>,
    pub panic: String,
}

impl PanicFacts {
    pub fn parse(console: &str) -> Result<PanicFacts> {
        let mut release = None;
        let mut kaslr_offset = None;
        let mut panic = None;
        for line in console.lines().map(console_line) {
            if let Some(rest) = line.strip_prefix("Linux version ") {
                release = rest.split_whitespace().next().map(str::to_string);
            } else if let Some(rest) = line.strip_prefix("Kernel Offset: ") {
                kaslr_offset = Some(if rest == "disabled" {
                    None
                } else {
                    let hex = rest.split_whitespace().next().unwrap_or_default();
                    let hex = hex
                        .strip_prefix("0x")
                        .with_context(|| format!("bad kernel offset in {line:?}"))?;
                    Some(
                        u64::from_str_radix(hex, 16)
                            .with_context(|| format!("bad kernel offset in {line:?}"))?,
                    )
                });
            } else if let Some(rest) = line.strip_prefix(PANIC_START) {
                panic = Some(rest.to_string());
            }
        }
        Ok(PanicFacts {
            release: release.context("the console has no \"Linux version\" line")?,
            kaslr_offset: kaslr_offset.context("the console has no \"Kernel Offset\" line")?,
            panic: panic.context("the console has no kernel panic")?,
        })
    }
}

/// What one boot's console says beside the oracle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleFacts {
    pub release: String,
    /// "Kernel Offset: 0x... from 0xffffffff81000000": KASLR's shift of the kernel image.
    pub kaslr_offset: u64,
    pub panic: String,
    /// The module's KCRASH-MODULE line.
    pub module: oracle::Line,
}

impl ConsoleFacts {
    pub fn parse(console: &str) -> Result<ConsoleFacts> {
        let PanicFacts {
            release,
            kaslr_offset,
            panic,
        } = PanicFacts::parse(console)?;
        let mut module = None;
        for line in console.lines().map(console_line) {
            if let Some(rest) = line.strip_prefix("KCRASH-MODULE ") {
                // Same key=value syntax as the oracle lines, parsed by the same code.
                let parsed = oracle::Line::parse(&format!("KLOG-MODULE {rest}"))
                    .context("KCRASH-MODULE")?
                    .with_context(|| format!("bad KCRASH-MODULE line {line:?}"))?;
                module = Some(parsed);
            }
        }
        Ok(ConsoleFacts {
            release,
            kaslr_offset: kaslr_offset.context("the console says KASLR is disabled")?,
            panic,
            module: module.context("the console has no KCRASH-MODULE line (did klogtest load?)")?,
        })
    }
}

/// One boot of the guest.
pub struct Boot<'a> {
    pub kernel: &'a Kernel,
    pub initramfs: &'a Path,
    /// `-device vmcoreinfo`: the kernel hands QEMU its VMCOREINFO through qemu_fw_cfg.
    pub vmcoreinfo: bool,
    pub console: &'a Path,
    pub timeout: Duration,
}

/// A panicked guest, stopped, ready to dump.
pub struct Stopped {
    qemu: QemuProcess,
    qmp: Qmp,
    _socket_dir: tempfile::TempDir,
    pub boot_time: Duration,
}

impl Stopped {
    /// `dump-guest-memory` into `path` (replaced), in QEMU's ELF or `format`; returns the time
    /// QEMU took. Its blocks of zeros are then given back, outside that time.
    pub fn dump(&mut self, path: &Path, format: Option<&str>) -> Result<Duration> {
        let _ = std::fs::remove_file(path);
        let started = Instant::now();
        let mut arguments =
            json!({ "paging": false, "protocol": format!("file:{}", path.display()) });
        if let Some(format) = format {
            arguments["format"] = json!(format);
        }
        self.qmp
            .execute("dump-guest-memory", arguments, Duration::from_secs(600))
            .with_context(|| format!("dumping {}", path.display()))?;
        let took = started.elapsed();
        dump::release_zero_blocks(path)?;
        Ok(took)
    }

    /// Quits QEMU and waits for it.
    pub fn quit(mut self) -> Result<()> {
        self.qmp.quit(Duration::from_secs(10))?;
        let status = self.qemu.0.wait()?;
        if !status.success() {
            bail!("qemu exited with {status} after quit");
        }
        Ok(())
    }
}

/// Boots the guest and waits until its panic is on the console whole, then stops it. On x86 the
/// guest's pvpanic reports the panic (`-action panic=none`: QEMU keeps running so that the panic
/// notifiers after pvpanic's, among them the one printing the kernel offset, still print); on
/// arm64, which has no pvpanic, the console's end of the panic is the only sign. QEMU is killed
/// on every error.
pub fn boot_to_panic(boot: &Boot) -> Result<Stopped> {
    let ours = format!("{PANIC_START}{PANIC_MESSAGE}");
    let mut attempt = 1;
    loop {
        let stopped = match boot_once(boot) {
            Err(err) if attempt < BOOTS && err.downcast_ref::<Hung>().is_some() => {
                eprintln!("linux: {err:#}; boot {attempt} of at most {BOOTS}, booting again");
                attempt += 1;
                continue;
            }
            other => other?,
        };
        let console = std::fs::read_to_string(boot.console)?;
        if console.contains(&ours) || attempt == BOOTS {
            return Ok(stopped);
        }
        let why = console
            .lines()
            .map(console_line)
            .find(|l| l.starts_with("Oops") || l.starts_with("BUG:") || l.starts_with(PANIC_START))
            .unwrap_or("no panic line");
        eprintln!(
            "linux: the guest's kernel died before its /init panicked it ({why}); boot {attempt} \
             of at most {BOOTS}, booting again"
        );
        stopped.quit()?;
        attempt += 1;
    }
}

/// Boots at most this many times while the guest's kernel dies or hangs on its own before its
/// /init panics it: a distribution kernel under QEMU now and then oopses while it boots (6.12
/// took an int3 in handle_softirqs while patching its own code, in CI) or stops (6.1's live
/// guest went silent for good while loading its modules with every trace event on, in CI),
/// which says nothing of kcrash.
const BOOTS: u32 = 3;

/// A console silent this long is a hung guest's: a running one is never quiet for more than
/// seconds (the longest stretch is the live guest's kcrash runs, whose output waits in files).
const SILENCE: Duration = Duration::from_secs(180);

/// The guest's console stayed silent for [`SILENCE`]: the guest is booted again.
#[derive(Debug)]
struct Hung(Duration);

impl std::fmt::Display for Hung {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the guest's console printed nothing for {:?}", self.0)
    }
}

impl std::error::Error for Hung {}

/// When a console last grew.
struct Quiet {
    limit: Duration,
    len: usize,
    since: Instant,
}

impl Quiet {
    fn new(limit: Duration) -> Quiet {
        Quiet {
            limit,
            len: 0,
            since: Instant::now(),
        }
    }

    /// Notes the console's text now; [`Hung`] once it has not grown for the limit.
    fn check(&mut self, console: &str) -> Result<()> {
        if console.len() != self.len {
            self.len = console.len();
            self.since = Instant::now();
        } else if self.since.elapsed() > self.limit {
            return Err(Hung(self.limit).into());
        }
        Ok(())
    }
}

/// One boot of [`boot_to_panic`]'s, whatever panicked the kernel.
fn boot_once(boot: &Boot) -> Result<Stopped> {
    let arch = boot.kernel.arch;
    let devices: &[&str] = if boot.vmcoreinfo {
        &["vmcoreinfo"]
    } else {
        &[]
    };
    let vmlinuz = boot.kernel.vmlinuz();
    let Started {
        mut qemu,
        socket,
        socket_dir,
        at,
    } = Machine {
        arch,
        cpus: CPUS,
        memory_mib: MEMORY_MIB,
        on_panic: "none",
        devices,
        kernel: &vmlinuz,
        initrd: Some(boot.initramfs),
        append: &cmdline(arch),
        console: boot.console,
    }
    .start()?;
    let result = (|| -> Result<Qmp> {
        let mut qmp = Qmp::connect(&socket, Duration::from_secs(10))?;
        let pvpanic = arch.pvpanic().is_some();
        let mut quiet = Quiet::new(SILENCE);
        let deadline = if pvpanic {
            // pvpanic reports the panic; a kernel that dies before its driver is up does not,
            // and only its console says so.
            let until = at + boot.timeout;
            while qmp
                .poll_event("GUEST_PANICKED", Duration::from_millis(500))?
                .is_none()
            {
                let console = std::fs::read_to_string(boot.console)?;
                if console.contains(PANIC_END) {
                    break;
                }
                quiet.check(&console)?;
                if let Some(status) = qemu.0.try_wait()? {
                    bail!("qemu exited ({status}) before the guest panicked");
                }
                if Instant::now() > until {
                    bail!("the guest did not panic within {:?}", boot.timeout);
                }
            }
            Instant::now() + Duration::from_secs(60)
        } else {
            at + boot.timeout
        };
        loop {
            let console = std::fs::read_to_string(boot.console)?;
            if console.contains(PANIC_END) {
                break;
            }
            quiet.check(&console)?;
            if let Some(status) = qemu.0.try_wait()? {
                bail!("qemu exited ({status}) before the guest's console printed {PANIC_END:?}");
            }
            if Instant::now() > deadline {
                if pvpanic {
                    bail!("the guest panicked but its console never printed {PANIC_END:?}");
                }
                bail!(
                    "the guest's console printed no {PANIC_END:?} within {:?}",
                    boot.timeout
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        qmp.execute("stop", json!({}), Duration::from_secs(10))?;
        Ok(qmp)
    })();
    match result {
        Ok(qmp) => Ok(Stopped {
            qemu,
            qmp,
            _socket_dir: socket_dir,
            boot_time: at.elapsed(),
        }),
        Err(err) => {
            let why = qemu.failure(boot.console, 8);
            Err(err.context(why))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_console_that_stops_growing_is_a_hung_guest() {
        let mut quiet = Quiet::new(Duration::ZERO);
        quiet.check("booting").unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let err = quiet.check("booting").unwrap_err();
        assert!(err.downcast_ref::<Hung>().is_some(), "{err}");
        quiet.check("booting, more").unwrap();
        let mut patient = Quiet::new(Duration::from_secs(3600));
        patient.check("booting").unwrap();
        patient.check("booting").unwrap();
    }

    #[test]
    fn console_lines_lose_time_stamps_only() {
        assert_eq!(
            console_line("[    4.120789] KLOG-CONFIG clock_hz=1\r"),
            "KLOG-CONFIG clock_hz=1"
        );
        assert_eq!(console_line("[12345.000001] x] y"), "x] y");
        assert_eq!(console_line("[ ok ] not printk"), "[ ok ] not printk");
        assert_eq!(console_line("[] empty"), "[] empty");
        assert_eq!(console_line("plain"), "plain");
    }

    #[test]
    fn console_facts_come_from_their_lines() {
        let console = "[    0.000000] Linux version 6.1.0-56-amd64 (debian-kernel@lists.debian.org) ...\r
[    4.7] KCRASH-MODULE name=klogtest base=0xffffffffc023a000 size=65536 klogs=0xffffffffc023c080 klogbuffer=0xffffffffc023c600\r
[    5.0] Kernel panic - not syncing: sysrq triggered crash\r
[    5.0] Kernel Offset: 0x38800000 from 0xffffffff81000000 (relocation range: 0xffffffff80000000-0xffffffffbfffffff)\r
";
        let facts = ConsoleFacts::parse(console).unwrap();
        assert_eq!(facts.release, "6.1.0-56-amd64");
        assert_eq!(facts.kaslr_offset, 0x3880_0000);
        assert_eq!(facts.panic, "sysrq triggered crash");
        assert_eq!(facts.module.num("base").unwrap(), 0xffff_ffff_c023_a000);
        assert_eq!(facts.module.str("name").unwrap(), "klogtest");
        // Without the module's line the boot is of no use.
        let without: String = console
            .lines()
            .filter(|l| !l.contains("KCRASH-MODULE"))
            .collect();
        assert!(ConsoleFacts::parse(&without).is_err());
    }

    #[test]
    fn init_loads_modules_in_order_runs_the_command_then_crashes() {
        let script = init_script(
            &["qemu_fw_cfg", "pvpanic", "pvpanic-mmio"],
            Some("/bin/kcrash /proc/kcore"),
            true,
        );
        let at = |needle: &str| script.find(needle).unwrap_or_else(|| panic!("{needle}"));
        assert!(script.contains("for m in qemu_fw_cfg pvpanic pvpanic-mmio klogtest; do"));
        // ftrace records while the modules load, and the trace is printed once it stopped.
        assert!(at("events/enable") < at("for m in"));
        assert!(at("for m in") < at("echo 0 > $T/tracing_on"));
        assert!(at("KCRASH-TRACE-all") < at("KCRASH-SECTION"));
        assert!(at("/proc/modules") < at("/bin/kcrash /proc/kcore"));
        assert!(at("/bin/kcrash /proc/kcore") < at("KCRASH-PANIC sysrq triggered crash"));
        assert!(script.trim_end().ends_with("echo c > /proc/sysrq-trigger"));
        let untraced = init_script(&["qemu_fw_cfg"], None, false);
        assert!(!untraced.contains("tracefs") && !untraced.contains("KCRASH-TRACE"));
        assert!(untraced.contains("for m in qemu_fw_cfg klogtest; do"));
    }

    #[test]
    fn every_parent_directory_comes_before_its_files() {
        let dirs: Vec<String> =
            directories(["init", "lib/modules/a.ko", "usr/local/bin/kcrash"].into_iter())
                .into_iter()
                .collect();
        assert_eq!(
            dirs,
            [
                "dev",
                "lib",
                "lib/modules",
                "proc",
                "sys",
                "usr",
                "usr/local",
                "usr/local/bin"
            ]
        );
    }
}
