//! Debian's own kernel under QEMU with kcrash's C KLog module (tests/kernels/linux): the module
//! is built against Debian's headers, booted from a busybox initramfs with KASLR on, the kernel
//! is panicked with sysrq-c, and the guest is dumped by QEMU (ELF, kdump-zlib) and makedumpfile
//! (zlib and lzo kdump files at dump levels 31 and 0, an ELF at level 31). A second boot without
//! `-device vmcoreinfo` gives an ELF dump without VMCOREINFO. The output directory's contract is
//! in tests/kernels/linux/README.md.

use crate::dump::{self, Magic};
use crate::expected::Expected;
use crate::initramfs::{newc_cpio, CpioEntry};
use crate::qemu::QemuProcess;
use crate::qmp::Qmp;
use crate::{oracle, repo_root, tools};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Outside the repository: the unpacked kernel image (`linux-image`, as .ci/run leaves it), the
/// debug vmlinux (`linux-dbg`) and the default output (`linux-guest/<release>`).
pub const CACHE: &str = "/var/cache/kcrash-ci";

/// The guest's size, as issue 9 fixes it.
pub const CPUS: u32 = 2;
pub const MEMORY_MIB: u32 = 512;

/// Serial console, no reboot on panic (QEMU must still be there to dump), and userspace's
/// /dev/kmsg lines (the module's sections, /proc/modules) not rate-limited away.
pub const CMDLINE: &str = "console=ttyS0 panic=0 printk.devkmsg=on";

/// The line the panic ends with: the console has everything once it is there.
const PANIC_END: &str = "---[ end Kernel panic - not syncing: ";
const PANIC_START: &str = "Kernel panic - not syncing: ";

/// What the guest's /init writes to /dev/kmsg before the crash: the oracle's panic line.
const PANIC_MESSAGE: &str = "sysrq triggered crash";

/// The packages the pipeline needs, by the file each provides.
const BUSYBOX: &str = "/bin/busybox";

/// Debian's kernel image unpacked under `<cache>/linux-image`.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub release: String,
    pub root: PathBuf,
}

impl Kernel {
    pub fn vmlinuz(&self) -> PathBuf {
        self.root.join(format!("boot/vmlinuz-{}", self.release))
    }

    /// A module of the image, by its path under lib/modules/<release>/kernel.
    fn module(&self, path: &str) -> PathBuf {
        self.root
            .join(format!("lib/modules/{}/kernel", self.release))
            .join(path)
    }

    /// Debian's headers for the release (linux-headers-<release>).
    pub fn headers(&self) -> PathBuf {
        PathBuf::from(format!("/usr/src/linux-headers-{}", self.release))
    }
}

/// Where a run writes when not told: `<cache>/linux-guest/<release>`.
pub fn default_out(cache: &Path, release: &str) -> PathBuf {
    cache.join("linux-guest").join(release)
}

/// The debug vmlinux of `release` inside the cache, where `dpkg-deb` puts it.
pub fn debug_vmlinux_path(cache: &Path, release: &str) -> PathBuf {
    cache
        .join("linux-dbg/usr/lib/debug/boot")
        .join(format!("vmlinux-{release}"))
}

/// Runs a command to success, its output kept for the error.
fn run(cmd: &mut Command, what: &str) -> Result<std::process::Output> {
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {what}"))?;
    if !output.status.success() {
        bail!(
            "{what} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout).trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(output)
}

/// `apt-get install -y PACKAGES`, after `apt-get update` if the first try fails (stale lists).
fn apt_install(packages: &[&str]) -> Result<()> {
    eprintln!("linux: apt-get install -y {}", packages.join(" "));
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-qq"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
    };
    if install().context("running apt-get")?.success() {
        return Ok(());
    }
    run(
        Command::new("apt-get").args(["update", "-qq"]),
        "apt-get update",
    )?;
    if !install().context("running apt-get")?.success() {
        bail!("apt-get install -y {} failed", packages.join(" "));
    }
    Ok(())
}

/// `apt-get download PACKAGE` into `dir`; returns the .deb.
fn apt_download(package: &str, dir: &Path) -> Result<PathBuf> {
    eprintln!("linux: apt-get download {package}");
    let download = || {
        Command::new("apt-get")
            .args(["download", "-qq", package])
            .current_dir(dir)
            .status()
    };
    if !download().context("running apt-get download")?.success() {
        run(
            Command::new("apt-get").args(["update", "-qq"]),
            "apt-get update",
        )?;
        if !download().context("running apt-get download")?.success() {
            bail!("apt-get download {package} failed");
        }
    }
    std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{package}_")) && n.ends_with(".deb"))
        })
        .with_context(|| {
            format!(
                "apt-get download {package} left no .deb in {}",
                dir.display()
            )
        })
}

/// The kernel image in `<cache>/linux-image`, unpacked from the package linux-image-amd64
/// depends on when it is not there yet (the same cache .ci/run fills).
pub fn kernel_image(cache: &Path) -> Result<Kernel> {
    let root = cache.join("linux-image");
    if let Some(kernel) = unpacked_kernel(&root)? {
        return Ok(kernel);
    }
    let depends = |update: bool| -> Result<Option<String>> {
        if update {
            run(
                Command::new("apt-get").args(["update", "-qq"]),
                "apt-get update",
            )?;
        }
        let out = run(
            Command::new("apt-cache").args(["depends", "linux-image-amd64"]),
            "apt-cache depends linux-image-amd64",
        )?;
        Ok(String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
            l.trim()
                .strip_prefix("Depends: ")
                .filter(|p| p.starts_with("linux-image-"))
                .map(str::to_string)
        }))
    };
    let package = match depends(false)? {
        Some(p) => p,
        None => depends(true)?.context("linux-image-amd64 depends on no linux-image package")?,
    };
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let deb = apt_download(&package, &root)?;
    run(
        Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root),
        "dpkg-deb -x",
    )?;
    std::fs::remove_file(&deb)?;
    unpacked_kernel(&root)?.with_context(|| format!("{package} has no boot/vmlinuz-*"))
}

fn unpacked_kernel(root: &Path) -> Result<Option<Kernel>> {
    let Ok(entries) = std::fs::read_dir(root.join("boot")) else {
        return Ok(None);
    };
    let mut releases: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_prefix("vmlinuz-").map(str::to_string))
        .collect();
    releases.sort();
    Ok(releases.pop().map(|release| Kernel {
        release,
        root: root.to_path_buf(),
    }))
}

/// Whether `path` is a statically linked ELF (no PT_INTERP): it must run alone in the guest.
fn is_static_elf(path: &Path) -> bool {
    use object::read::elf::{ElfFile64, ProgramHeader};
    let Ok(data) = std::fs::read(path) else {
        return false;
    };
    let Ok(elf) = ElfFile64::<object::Endianness>::parse(&*data) else {
        return false;
    };
    let endian = elf.endian();
    !elf.elf_program_headers()
        .iter()
        .any(|ph| ph.p_type(endian) == object::elf::PT_INTERP)
}

/// Installs the Debian packages the pipeline needs and does not find: the headers of
/// `kernel`'s release and a static busybox.
pub fn ensure_packages(kernel: &Kernel) -> Result<()> {
    let mut missing = Vec::new();
    let headers = format!("linux-headers-{}", kernel.release);
    if !kernel.headers().join("Makefile").is_file() {
        missing.push(headers.as_str());
    }
    if !is_static_elf(Path::new(BUSYBOX)) {
        missing.push("busybox-static");
    }
    if !missing.is_empty() {
        apt_install(&missing)?;
    }
    Ok(())
}

/// The debug vmlinux of `release` (linux-image-<release>-dbg), fetched with `apt-get download`
/// when the cache does not have it; only the vmlinux is extracted.
pub fn debug_vmlinux(cache: &Path, release: &str) -> Result<PathBuf> {
    let path = debug_vmlinux_path(cache, release);
    if path.is_file() {
        return Ok(path);
    }
    let root = cache.join("linux-dbg");
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let scratch = tempfile::tempdir_in(&root)?;
    let deb = apt_download(&format!("linux-image-{release}-dbg"), scratch.path())?;
    let mut dpkg = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(&deb)
        .stdout(Stdio::piped())
        .spawn()
        .context("running dpkg-deb --fsys-tarfile")?;
    let tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(&root)
        .arg(format!("./usr/lib/debug/boot/vmlinux-{release}"))
        .stdin(dpkg.stdout.take().context("dpkg-deb's stdout")?)
        .status()
        .context("running tar")?;
    let dpkg = dpkg.wait()?;
    if !tar.success() || !dpkg.success() {
        bail!(
            "extracting the vmlinux from {}: dpkg-deb {dpkg}, tar {tar}",
            deb.display()
        );
    }
    if !path.is_file() {
        bail!("{} has no {}", deb.display(), path.display());
    }
    Ok(path)
}

/// Builds klogtest.ko against the release's headers in `target/kernels/linux/<release>` (Kbuild
/// writes its objects beside the sources, so the sources are copied there first).
pub fn build_module(kernel: &Kernel) -> Result<PathBuf> {
    let source = repo_root().join("tests/kernels/linux");
    let build = repo_root()
        .join("target/kernels/linux")
        .join(&kernel.release);
    std::fs::create_dir_all(&build).with_context(|| format!("creating {}", build.display()))?;
    for file in ["klogtest.c", "Kbuild"] {
        let text = std::fs::read(source.join(file))
            .with_context(|| format!("reading {}", source.join(file).display()))?;
        // Rewritten only when changed, so make sees an unchanged module as up to date.
        if std::fs::read(build.join(file)).ok().as_deref() != Some(&text[..]) {
            std::fs::write(build.join(file), &text)?;
        }
    }
    let include = repo_root().join("klog-runtime/include");
    run(
        Command::new("make")
            .arg("-C")
            .arg(kernel.headers())
            .arg(format!("M={}", build.display()))
            .arg(format!("KLOG_INCLUDE={}", include.display()))
            .arg("modules"),
        "make (klogtest.ko)",
    )?;
    Ok(build.join("klogtest.ko"))
}

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

/// The modules /init loads, in order: the image's (VMCOREINFO to QEMU, pvpanic) then ours.
const IMAGE_MODULES: [(&str, &str); 3] = [
    ("qemu_fw_cfg", "drivers/firmware/qemu_fw_cfg.ko"),
    ("pvpanic", "drivers/misc/pvpanic/pvpanic.ko"),
    ("pvpanic-mmio", "drivers/misc/pvpanic/pvpanic-mmio.ko"),
];

/// The guest's /init (busybox sh): load the modules, put the module's section addresses and
/// /proc/modules on the console (oracles for `mod`), run `run` if given, then crash.
pub fn init_script(run: Option<&str>) -> String {
    let modules: Vec<&str> = IMAGE_MODULES
        .iter()
        .map(|(name, _)| *name)
        .chain(["klogtest"])
        .collect();
    format!(
        r#"#!/bin/busybox sh
# kcrash's Linux test guest (generated by kcrash-harness linux).
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sysfs /sys
$B mount -t devtmpfs dev /dev
for m in {modules}; do
    $B insmod /lib/modules/$m.ko || echo "KCRASH-INIT insmod $m failed" > /dev/kmsg
done
for f in /sys/module/klogtest/sections/* /sys/module/klogtest/sections/.[!.]*; do
    [ -f "$f" ] || continue
    echo "KCRASH-SECTION module=klogtest name=${{f##*/}} addr=$($B cat $f)" > /dev/kmsg
done
while read -r line; do echo "KCRASH-PROC-MODULES $line" > /dev/kmsg; done < /proc/modules
{run}
echo "KCRASH-PANIC {PANIC_MESSAGE}" > /dev/kmsg
echo c > /proc/sysrq-trigger
"#,
        modules = modules.join(" "),
        run = run.unwrap_or(""),
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
    let mut files: Vec<(String, Vec<u8>, u32)> = vec![
        ("init".into(), init_script(run).into_bytes(), 0o755),
        ("bin/busybox".into(), read(Path::new(BUSYBOX))?, 0o755),
        ("lib/modules/klogtest.ko".into(), read(module)?, 0o644),
    ];
    for (name, path) in IMAGE_MODULES {
        files.push((
            format!("lib/modules/{name}.ko"),
            read(&kernel.module(path))?,
            0o644,
        ));
    }
    for extra in extras {
        files.push((extra.guest.clone(), extra.data.clone(), extra.mode));
    }
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
    Ok(newc_cpio(&entries))
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
        let mut release = None;
        let mut kaslr_offset = None;
        let mut panic = None;
        let mut module = None;
        for line in console.lines().map(console_line) {
            if let Some(rest) = line.strip_prefix("Linux version ") {
                release = rest.split_whitespace().next().map(str::to_string);
            } else if let Some(rest) = line.strip_prefix("Kernel Offset: 0x") {
                let hex = rest.split_whitespace().next().unwrap_or_default();
                kaslr_offset = Some(
                    u64::from_str_radix(hex, 16)
                        .with_context(|| format!("bad kernel offset in {line:?}"))?,
                );
            } else if let Some(rest) = line.strip_prefix(PANIC_START) {
                panic = Some(rest.to_string());
            } else if let Some(rest) = line.strip_prefix("KCRASH-MODULE ") {
                // Same key=value syntax as the oracle lines, parsed by the same code.
                let parsed = oracle::Line::parse(&format!("KLOG-MODULE {rest}"))
                    .context("KCRASH-MODULE")?
                    .with_context(|| format!("bad KCRASH-MODULE line {line:?}"))?;
                module = Some(parsed);
            }
        }
        Ok(ConsoleFacts {
            release: release.context("the console has no \"Linux version\" line")?,
            kaslr_offset: kaslr_offset.context("the console has no \"Kernel Offset\" line")?,
            panic: panic.context("the console has no kernel panic")?,
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
    /// `dump-guest-memory` with `arguments` (the file is replaced).
    pub fn dump(&mut self, path: &Path, format: Option<&str>) -> Result<()> {
        let _ = std::fs::remove_file(path);
        let mut arguments =
            json!({ "paging": false, "protocol": format!("file:{}", path.display()) });
        if let Some(format) = format {
            arguments["format"] = json!(format);
        }
        self.qmp
            .execute("dump-guest-memory", arguments, Duration::from_secs(600))
            .with_context(|| format!("dumping {}", path.display()))?;
        Ok(())
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

/// Boots the guest and waits until its panic is on the console whole, then stops it. The
/// guest's pvpanic reports the panic (`-action panic=none`: QEMU keeps running so that the panic
/// notifiers after pvpanic's, among them the one printing the kernel offset, still print).
pub fn boot_to_panic(boot: &Boot) -> Result<Stopped> {
    for path in [boot.console, boot.initramfs] {
        if path.to_string_lossy().contains(',') {
            bail!(
                "{}: QEMU's option syntax cannot take a path with a comma",
                path.display()
            );
        }
    }
    let socket_dir = tempfile::tempdir().context("creating a directory for the QMP socket")?;
    let socket = socket_dir.path().join("qmp.sock");
    let _ = std::fs::remove_file(boot.console);
    let started = Instant::now();
    let mut cmd = Command::new(tools::QEMU);
    cmd.args(["-machine", "pc,accel=tcg", "-cpu", "qemu64"])
        .args(["-smp", &CPUS.to_string(), "-m", &format!("{MEMORY_MIB}M")])
        .args([
            "-nodefaults",
            "-vga",
            "none",
            "-display",
            "none",
            "-no-reboot",
        ])
        .args(["-device", "pvpanic", "-action", "panic=none"]);
    if boot.vmcoreinfo {
        cmd.args(["-device", "vmcoreinfo"]);
    }
    let child = cmd
        .arg("-serial")
        .arg(format!("file:{}", boot.console.display()))
        .arg("-qmp")
        .arg(format!("unix:{},server=on,wait=off", socket.display()))
        .arg("-kernel")
        .arg(boot.kernel.vmlinuz())
        .arg("-initrd")
        .arg(boot.initramfs)
        .args(["-append", CMDLINE])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting qemu-system-x86_64")?;
    let mut qemu = QemuProcess(child);
    let result = (|| -> Result<Qmp> {
        let mut qmp = Qmp::connect(&socket, Duration::from_secs(10))?;
        qmp.wait_event("GUEST_PANICKED", boot.timeout)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(boot.console)?.contains(PANIC_END) {
            if Instant::now() > deadline {
                bail!("the guest panicked but its console never printed {PANIC_END:?}");
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
            boot_time: started.elapsed(),
        }),
        Err(err) => {
            let _ = qemu.0.kill();
            let mut stderr = String::new();
            if let Some(mut pipe) = qemu.0.stderr.take() {
                let _ = pipe.read_to_string(&mut stderr);
            }
            let log = std::fs::read_to_string(boot.console).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(8).collect();
            Err(err.context(format!(
                "qemu stderr: {:?}; last console lines: {tail:?}",
                stderr.trim()
            )))
        }
    }
}

/// makedumpfile reads an ELF's program headers right after its 64-byte ELF header, whatever
/// e_phoff says; QEMU 7.2 puts its section headers there and its program headers at 192 (and
/// writes e_ehsize 8). Copies `elf` to `out` with the program headers moved to 64, the section
/// headers after them, e_ehsize 64: every byte of memory and notes unchanged.
pub fn elf_for_makedumpfile(elf: &Path, out: &Path) -> Result<()> {
    let _ = std::fs::remove_file(out);
    std::fs::copy(elf, out)
        .with_context(|| format!("copying {} to {}", elf.display(), out.display()))?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(out)?;
    let mut header = [0u8; 64];
    file.read_exact_at(&mut header, 0)?;
    let u16_at = |o: usize| u16::from_le_bytes([header[o], header[o + 1]]);
    let u64_at = |o: usize| u64::from_le_bytes(header[o..o + 8].try_into().unwrap_or_default());
    let (phoff, shoff) = (u64_at(32), u64_at(40));
    let (phentsize, phnum, shentsize, shnum) = (u16_at(54), u16_at(56), u16_at(58), u16_at(60));
    let mut phdrs = vec![0u8; usize::from(phentsize) * usize::from(phnum)];
    let mut shdrs = vec![0u8; usize::from(shentsize) * usize::from(shnum)];
    file.read_exact_at(&mut phdrs, phoff)?;
    file.read_exact_at(&mut shdrs, shoff)?;
    // The first thing after the headers: the lowest p_offset (the notes, then memory).
    let first_data = phdrs
        .chunks_exact(usize::from(phentsize).max(16))
        .map(|ph| u64::from_le_bytes(ph[8..16].try_into().unwrap_or_default()))
        .min()
        .unwrap_or(0);
    let headers_end = 64 + phdrs.len() as u64 + shdrs.len() as u64;
    if headers_end > first_data {
        bail!(
            "{}: the headers ({headers_end} bytes) do not fit before the data at {first_data}",
            elf.display()
        );
    }
    header[32..40].copy_from_slice(&64u64.to_le_bytes());
    header[40..48].copy_from_slice(&(64 + phdrs.len() as u64).to_le_bytes());
    header[52..54].copy_from_slice(&64u16.to_le_bytes());
    file.write_all_at(&header, 0)?;
    file.write_all_at(&phdrs, 64)?;
    file.write_all_at(&shdrs, 64 + phdrs.len() as u64)?;
    Ok(())
}

/// One makedumpfile run on the ELF: its flags, the file it writes, what that is.
struct MakedumpfileRun {
    flags: &'static [&'static str],
    file: &'static str,
    format: &'static str,
    compression: &'static str,
    dump_level: u8,
}

const MAKEDUMPFILE_RUNS: [MakedumpfileRun; 5] = [
    MakedumpfileRun {
        flags: &["-c", "-d", "31"],
        file: "vmcore-c-d31.kdump",
        format: "kdump",
        compression: "zlib",
        dump_level: 31,
    },
    MakedumpfileRun {
        flags: &["-c", "-d", "0"],
        file: "vmcore-c-d0.kdump",
        format: "kdump",
        compression: "zlib",
        dump_level: 0,
    },
    MakedumpfileRun {
        flags: &["-l", "-d", "31"],
        file: "vmcore-l-d31.kdump",
        format: "kdump",
        compression: "lzo",
        dump_level: 31,
    },
    MakedumpfileRun {
        flags: &["-l", "-d", "0"],
        file: "vmcore-l-d0.kdump",
        format: "kdump",
        compression: "lzo",
        dump_level: 0,
    },
    MakedumpfileRun {
        flags: &["-E", "-d", "31"],
        file: "vmcore-E-d31.elf",
        format: "elf",
        compression: "none",
        dump_level: 31,
    },
];

/// What one run produced: `guest.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestManifest {
    pub release: String,
    /// Symlink to the cached debug vmlinux.
    pub vmlinux: String,
    /// Symlink to the booted image.
    pub vmlinuz: String,
    /// The module, with its debug info.
    pub module: String,
    pub cpus: u32,
    pub memory_mib: u32,
    pub cmdline: String,
    pub qemu: String,
    pub makedumpfile: String,
    pub boots: Vec<BootRecord>,
    pub dumps: Vec<DumpRecord>,
}

/// One boot: its console, oracle and the addresses it printed. Addresses are hex strings (TOML
/// integers are signed 64-bit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BootRecord {
    /// "vmcoreinfo" or "novmcoreinfo".
    pub name: String,
    pub vmcoreinfo: bool,
    pub console: String,
    pub expected: String,
    /// KASLR's shift of the kernel image, from the console's "Kernel Offset" line.
    pub kaslr_offset: String,
    pub panic: String,
    /// THIS_MODULE->core_layout.base and .size.
    pub module_base: String,
    pub module_size: u64,
    pub klogs: String,
    pub klogbuffer: String,
    /// Wall time from QEMU's start to the stopped, panicked guest.
    pub boot_seconds: f64,
}

/// One dump file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DumpRecord {
    pub file: String,
    /// The boot it was taken from.
    pub boot: String,
    /// "elf", "kdump-flat" (makedumpfile's flattened stream) or "kdump".
    pub format: String,
    /// Page compression: "zlib", "lzo" or "none".
    pub compression: String,
    /// makedumpfile's -d; absent for QEMU's dumps, which hold all of memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dump_level: Option<u8>,
    pub producer: String,
    pub magic: String,
    pub bytes: u64,
    pub seconds: f64,
}

/// The pipeline's options.
pub struct Options {
    pub cache: PathBuf,
    /// Default: [`default_out`].
    pub out: Option<PathBuf>,
    pub extras: Vec<Extra>,
    /// A shell command /init runs after the module logged, before the crash.
    pub run: Option<String>,
}

/// In every complete output directory (a run builds the next one aside and swaps it in whole).
pub const READY: &str = "READY";

/// Runs the whole pipeline; returns the output directory and its manifest.
pub fn generate(options: &Options) -> Result<(PathBuf, GuestManifest)> {
    let missing = tools::missing(&[tools::QEMU, tools::MAKEDUMPFILE]);
    if !missing.is_empty() {
        apt_install(&["qemu-system-x86", "makedumpfile"])?;
    }
    let kernel = kernel_image(&options.cache)?;
    ensure_packages(&kernel)?;
    let vmlinux = debug_vmlinux(&options.cache, &kernel.release)?;
    let module = build_module(&kernel)?;
    let out = options
        .out
        .clone()
        .unwrap_or_else(|| default_out(&options.cache, &kernel.release));
    // Written beside the output and swapped in whole, so that a reader of the previous set (other
    // tests poll for READY) never sees it half-rewritten.
    let staging = sibling(&out, "partial")?;
    let out = staging.with_file_name(out.file_name().unwrap_or_default());
    if staging.exists() {
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("removing {}", staging.display()))?;
    }
    std::fs::create_dir_all(&staging).with_context(|| format!("creating {}", staging.display()))?;
    let manifest = write_guest(options, &kernel, &vmlinux, &module, &staging)?;
    std::fs::write(staging.join(READY), "")?;
    if out.exists() {
        let old = sibling(&out, "old")?;
        if old.exists() {
            std::fs::remove_dir_all(&old)?;
        }
        std::fs::rename(&out, &old).with_context(|| format!("moving {} aside", out.display()))?;
        std::fs::rename(&staging, &out)
            .with_context(|| format!("moving {} to {}", staging.display(), out.display()))?;
        std::fs::remove_dir_all(&old)?;
    } else {
        std::fs::rename(&staging, &out)
            .with_context(|| format!("moving {} to {}", staging.display(), out.display()))?;
    }
    Ok((out, manifest))
}

/// `DIR` → `PARENT/.DIR.what`, the parent created and made absolute.
fn sibling(dir: &Path, what: &str) -> Result<PathBuf> {
    let name = dir
        .file_name()
        .with_context(|| format!("{} has no file name", dir.display()))?
        .to_string_lossy();
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    Ok(parent.canonicalize()?.join(format!(".{name}.{what}")))
}

/// Every file of the output into `out`; returns guest.toml's contents.
fn write_guest(
    options: &Options,
    kernel: &Kernel,
    vmlinux: &Path,
    module: &Path,
    out: &Path,
) -> Result<GuestManifest> {
    let initramfs = out.join("initramfs.cpio");
    std::fs::write(
        &initramfs,
        self::initramfs(kernel, module, &options.extras, options.run.as_deref())?,
    )?;
    for (name, target) in [("vmlinux", vmlinux), ("vmlinuz", &kernel.vmlinuz())] {
        let link = out.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(target, &link)
            .with_context(|| format!("linking {}", link.display()))?;
    }
    std::fs::copy(module, out.join("klogtest.ko"))?;

    // The two boots share no file: run together, the second's boot overlaps the first's
    // makedumpfile runs.
    let (with, without) = std::thread::scope(|scope| {
        let without = scope.spawn(|| boot_and_dump(kernel, out, &initramfs, false));
        let with = boot_and_dump(kernel, out, &initramfs, true);
        (with, without.join())
    });
    let without = without.map_err(|_| anyhow!("the boot without VMCOREINFO panicked"))?;
    let (with, without) = (with?, without?);
    let boots = vec![with.0, without.0];
    let dumps = [with.1, without.1].concat();
    let manifest = GuestManifest {
        release: kernel.release.clone(),
        vmlinux: "vmlinux".into(),
        vmlinuz: "vmlinuz".into(),
        module: "klogtest.ko".into(),
        cpus: CPUS,
        memory_mib: MEMORY_MIB,
        cmdline: CMDLINE.into(),
        qemu: tools::version_line(Path::new(tools::QEMU)),
        makedumpfile: makedumpfile_version(),
        boots,
        dumps,
    };
    std::fs::write(out.join("guest.toml"), toml::to_string(&manifest)?)?;
    Ok(manifest)
}

fn makedumpfile_version() -> String {
    Command::new(tools::MAKEDUMPFILE)
        .arg("-v")
        .output()
        .ok()
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            text.lines()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| tools::MAKEDUMPFILE.to_string())
}

/// The dump record of `file` in `out`, its magic read back.
fn record(
    out: &Path,
    file: &str,
    boot: &str,
    what: (&str, &str, Option<u8>),
    producer: String,
    seconds: f64,
) -> Result<DumpRecord> {
    let path = out.join(file);
    let magic =
        Magic::of_file(&path)?.with_context(|| format!("{} has no dump magic", path.display()))?;
    Ok(DumpRecord {
        file: file.into(),
        boot: boot.into(),
        format: what.0.into(),
        compression: what.1.into(),
        dump_level: what.2,
        producer,
        magic: magic.name().into(),
        bytes: std::fs::metadata(&path)?.len(),
        seconds,
    })
}

/// One boot and its dumps: with VMCOREINFO every format; without, the QEMU ELF only.
fn boot_and_dump(
    kernel: &Kernel,
    out: &Path,
    initramfs: &Path,
    vmcoreinfo: bool,
) -> Result<(BootRecord, Vec<DumpRecord>)> {
    let name = if vmcoreinfo {
        "vmcoreinfo"
    } else {
        "novmcoreinfo"
    };
    let suffix = if vmcoreinfo {
        String::new()
    } else {
        format!("-{name}")
    };
    let console = out.join(format!("console{suffix}.log"));
    let mut stopped = boot_to_panic(&Boot {
        kernel,
        initramfs,
        vmcoreinfo,
        console: &console,
        timeout: Duration::from_secs(300),
    })?;
    eprintln!(
        "linux: {name}: boot to panic {:.1}s",
        stopped.boot_time.as_secs_f64()
    );
    let text = std::fs::read_to_string(&console)?;
    let facts =
        ConsoleFacts::parse(&text).with_context(|| format!("reading {}", console.display()))?;
    let expected: Expected = oracle::derive(&console_text(&text))
        .with_context(|| format!("deriving the oracle of {}", console.display()))?;
    let expected_file = format!("expected{suffix}.json");
    std::fs::write(
        out.join(&expected_file),
        serde_json::to_string_pretty(&expected)? + "\n",
    )?;

    let mut dumps = Vec::new();
    let elf = format!("vmcore{suffix}.elf");
    let timed = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        let started = Instant::now();
        f()?;
        Ok(started.elapsed().as_secs_f64())
    };
    let seconds = timed(&mut || stopped.dump(&out.join(&elf), None))?;
    dumps.push(record(
        out,
        &elf,
        name,
        ("elf", "none", None),
        "qemu dump-guest-memory format=elf paging=false".into(),
        seconds,
    )?);
    if vmcoreinfo {
        let seconds =
            timed(&mut || stopped.dump(&out.join("vmcore.kdump-flat"), Some("kdump-zlib")))?;
        dumps.push(record(
            out,
            "vmcore.kdump-flat",
            name,
            ("kdump-flat", "zlib", None),
            "qemu dump-guest-memory format=kdump-zlib paging=false".into(),
            seconds,
        )?);
    }
    let boot_seconds = stopped.boot_time.as_secs_f64();
    stopped.quit()?;
    if vmcoreinfo {
        let seconds = timed(&mut || {
            dump::unflatten(&out.join("vmcore.kdump-flat"), &out.join("vmcore.kdump"))
        })?;
        dumps.push(record(
            out,
            "vmcore.kdump",
            name,
            ("kdump", "zlib", None),
            "makedumpfile -R vmcore.kdump < vmcore.kdump-flat".into(),
            seconds,
        )?);
        let input = out.join("vmcore-for-makedumpfile.elf");
        elf_for_makedumpfile(&out.join(&elf), &input)?;
        for r in &MAKEDUMPFILE_RUNS {
            let target = out.join(r.file);
            let _ = std::fs::remove_file(&target);
            let seconds = timed(&mut || {
                run(
                    Command::new(tools::MAKEDUMPFILE)
                        .args(r.flags)
                        .arg(&input)
                        .arg(&target),
                    &format!("makedumpfile {}", r.flags.join(" ")),
                )?;
                Ok(())
            })?;
            let producer = format!(
                "makedumpfile {} vmcore.elf {} (vmcore.elf with its program headers moved to offset 64, where makedumpfile reads them)",
                r.flags.join(" "),
                r.file
            );
            dumps.push(record(
                out,
                r.file,
                name,
                (r.format, r.compression, Some(r.dump_level)),
                producer,
                seconds,
            )?);
        }
        std::fs::remove_file(&input)?;
    }
    let module = &facts.module;
    let boot = BootRecord {
        name: name.into(),
        vmcoreinfo,
        console: console
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned(),
        expected: expected_file,
        kaslr_offset: format!("{:#x}", facts.kaslr_offset),
        panic: facts.panic.clone(),
        module_base: format!("{:#x}", module.num("base")?),
        module_size: module.num("size")?,
        klogs: format!("{:#x}", module.num("klogs")?),
        klogbuffer: format!("{:#x}", module.num("klogbuffer")?),
        boot_seconds,
    };
    if facts.panic != PANIC_MESSAGE || expected.panic != PANIC_MESSAGE {
        return Err(anyhow!(
            "the guest panicked with {:?} (oracle {:?}), not {PANIC_MESSAGE:?}",
            facts.panic,
            expected.panic
        ));
    }
    Ok((boot, dumps))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let script = init_script(Some("/bin/kcrash /proc/kcore"));
        let at = |needle: &str| script.find(needle).unwrap_or_else(|| panic!("{needle}"));
        assert!(script.contains("for m in qemu_fw_cfg pvpanic pvpanic-mmio klogtest; do"));
        assert!(at("/proc/modules") < at("/bin/kcrash /proc/kcore"));
        assert!(at("/bin/kcrash /proc/kcore") < at("KCRASH-PANIC sysrq triggered crash"));
        assert!(script.trim_end().ends_with("echo c > /proc/sysrq-trigger"));
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

    /// An ELF core header laid out as QEMU 7.2 writes it: e_ehsize 8, two section headers at 64,
    /// `phnum` program headers at 192, the first segment's data at `data`.
    fn qemu_like_elf(phnum: u16, data: u64) -> Vec<u8> {
        let mut elf = vec![0u8; data as usize + 16];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[16..18].copy_from_slice(&4u16.to_le_bytes());
        elf[18..20].copy_from_slice(&62u16.to_le_bytes());
        elf[32..40].copy_from_slice(&192u64.to_le_bytes());
        elf[40..48].copy_from_slice(&64u64.to_le_bytes());
        for (at, value) in [
            (52, 8u16),
            (54, 56),
            (56, phnum),
            (58, 64),
            (60, 2),
            (62, 1),
        ] {
            elf[at..at + 2].copy_from_slice(&value.to_le_bytes());
        }
        for i in 0..usize::from(phnum) {
            let ph = 192 + i * 56;
            elf[ph..ph + 4].copy_from_slice(&(1 + i as u32).to_le_bytes());
            elf[ph + 8..ph + 16].copy_from_slice(&(data + i as u64).to_le_bytes());
        }
        elf[64 + 64 + 24..64 + 64 + 32].copy_from_slice(&data.to_le_bytes());
        elf[data as usize..].fill(0xab);
        elf
    }

    #[test]
    fn makedumpfile_gets_program_headers_at_64_and_the_same_data() {
        let dir = tempfile::tempdir().unwrap();
        let (qemu, copy) = (dir.path().join("qemu.elf"), dir.path().join("copy.elf"));
        let original = qemu_like_elf(3, 360);
        std::fs::write(&qemu, &original).unwrap();
        elf_for_makedumpfile(&qemu, &copy).unwrap();
        let moved = std::fs::read(&copy).unwrap();
        assert_eq!(moved.len(), original.len());
        assert_eq!(moved[32..40], 64u64.to_le_bytes());
        assert_eq!(moved[40..48], (64u64 + 3 * 56).to_le_bytes());
        assert_eq!(moved[52..54], 64u16.to_le_bytes());
        assert_eq!(moved[64..64 + 3 * 56], original[192..192 + 3 * 56]);
        assert_eq!(moved[232..360], original[64..192]);
        assert_eq!(moved[360..], original[360..]);
        // The original is untouched.
        assert_eq!(std::fs::read(&qemu).unwrap(), original);
    }

    #[test]
    fn headers_that_would_overwrite_data_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (qemu, copy) = (dir.path().join("qemu.elf"), dir.path().join("copy.elf"));
        // Three program headers and two section headers need 360 bytes; the notes start at 300.
        let mut elf = qemu_like_elf(3, 400);
        elf[192 + 8..192 + 16].copy_from_slice(&300u64.to_le_bytes());
        std::fs::write(&qemu, elf).unwrap();
        let err = elf_for_makedumpfile(&qemu, &copy).unwrap_err().to_string();
        assert!(err.contains("do not fit before the data at 300"), "{err}");
    }
}
