//! Debian's own kernel under QEMU with kcrash's C KLog module (tests/kernels/linux): the module
//! is built against Debian's headers, booted from a busybox initramfs with KASLR on, the kernel
//! is panicked with sysrq-c, and the guest is dumped by QEMU (ELF, kdump-zlib) and makedumpfile
//! (zlib and lzo kdump files at dump levels 31 and 0, an ELF at level 31). A second boot without
//! `-device vmcoreinfo` gives an ELF dump without VMCOREINFO. The output directory's contract is
//! in tests/kernels/linux/README.md. [`arm64`] boots Debian's arm64 kernel the same way, without
//! the module.

pub mod arm64;
pub mod debian;
pub mod guest;
pub mod live;

use crate::arch::Arch;
use crate::dump::Magic;
use crate::expected::Expected;
use crate::{makedumpfile, oracle, tools};
use anyhow::{anyhow, bail, Context, Result};
use debian::{apt_install, build_module, debug_vmlinux, ensure_packages, kernel_image, Kernel};
use guest::{boot_to_panic, console_text, initramfs, Boot, ConsoleFacts, Extra};
use makedumpfile::{elf_for_makedumpfile, MAKEDUMPFILE_RUNS};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Outside the repository: the unpacked kernel image (`linux-image`, as .ci/run leaves it), the
/// debug vmlinux (`linux-dbg`) and the default output (`linux-guest/<release>`).
pub const CACHE: &str = "/var/cache/kcrash-ci";

/// The Linux guest's size, the same for every run.
pub const CPUS: u32 = 2;
pub const MEMORY_MIB: u32 = 512;

/// Serial console, no reboot on panic (QEMU must still be there to dump), and userspace's
/// /dev/kmsg lines (the module's sections, /proc/modules) not rate-limited away.
pub fn cmdline(arch: Arch) -> String {
    format!("console={} panic=0 printk.devkmsg=on", arch.console())
}

/// The line the panic ends with: the console has everything once it is there.
const PANIC_END: &str = "---[ end Kernel panic - not syncing: ";
const PANIC_START: &str = "Kernel panic - not syncing: ";

/// What the guest's /init writes to /dev/kmsg before the crash: the oracle's panic line.
const PANIC_MESSAGE: &str = "sysrq triggered crash";

/// Where a run writes when not told: `<cache>/linux-guest/<release>`.
pub fn default_out(cache: &Path, release: &str) -> PathBuf {
    cache.join("linux-guest").join(release)
}

/// The release of the Debian kernel CI boots: where tests look for the guests' output when not
/// told.
pub const CI_RELEASE: &str = "6.1.0-56-amd64";

/// For tests: the Linux guest's output directory, `$KCRASH_LINUX_GUEST` or CI's default.
pub fn guest_output() -> PathBuf {
    std::env::var_os("KCRASH_LINUX_GUEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| default_out(Path::new(CACHE), CI_RELEASE))
}

/// For tests: the live guest's output directory, `$KCRASH_LINUX_LIVE` or CI's default.
pub fn live_output() -> PathBuf {
    std::env::var_os("KCRASH_LINUX_LIVE")
        .map(PathBuf::from)
        .unwrap_or_else(|| live::default_out(Path::new(CACHE), CI_RELEASE))
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
    /// Where the module's code starts and the size of its core (core_layout before Linux 6.4,
    /// the core regions of mem[] since), as klogtest printed them.
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
    /// The Linux series ([`debian::SERIES`]).
    pub series: String,
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
    let kernel = kernel_image(&options.cache, &options.series, Arch::X86_64)?;
    ensure_packages(&kernel)?;
    let vmlinux = debug_vmlinux(&options.cache, &kernel.release, Arch::X86_64)?;
    let module = build_module(&kernel, &kernel.headers())?;
    let out = options
        .out
        .clone()
        .unwrap_or_else(|| default_out(&options.cache, &kernel.release));
    publish(&out, |staging| {
        write_guest(options, &kernel, &vmlinux, &module, staging)
    })
}

/// Has `fill` write a guest's output into `.<out>.partial` beside `out`, adds [`READY`] and
/// swaps it in whole for `out`, so that a reader of the previous set (other tests poll for
/// READY) never sees it half-rewritten. Returns `out` made absolute and what `fill` returned.
fn publish<T>(out: &Path, fill: impl FnOnce(&Path) -> Result<T>) -> Result<(PathBuf, T)> {
    let staging = sibling(out, "partial")?;
    let out = staging.with_file_name(out.file_name().unwrap_or_default());
    if staging.exists() {
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("removing {}", staging.display()))?;
    }
    std::fs::create_dir_all(&staging).with_context(|| format!("creating {}", staging.display()))?;
    let made = fill(&staging)?;
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
    Ok((out, made))
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
    let initramfs_path = out.join("initramfs.cpio");
    std::fs::write(
        &initramfs_path,
        initramfs(kernel, module, &options.extras, options.run.as_deref())?,
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
        let without = scope.spawn(|| boot_and_dump(kernel, out, &initramfs_path, false));
        let with = boot_and_dump(kernel, out, &initramfs_path, true);
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
        cmdline: cmdline(Arch::X86_64),
        qemu: tools::version_line(Path::new(tools::QEMU)),
        makedumpfile: makedumpfile::version(),
        boots,
        dumps,
    };
    std::fs::write(out.join("guest.toml"), toml::to_string(&manifest)?)?;
    Ok(manifest)
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
    if facts.panic != PANIC_MESSAGE || expected.panic != PANIC_MESSAGE {
        return Err(anyhow!(
            "the guest panicked with {:?} (oracle {:?}), not {PANIC_MESSAGE:?}",
            facts.panic,
            expected.panic
        ));
    }
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
    let seconds = stopped.dump(&out.join(&elf), None)?.as_secs_f64();
    dumps.push(record(
        out,
        &elf,
        name,
        ("elf", "none", None),
        "qemu dump-guest-memory format=elf paging=false".into(),
        seconds,
    )?);
    if vmcoreinfo {
        let seconds = stopped
            .dump(&out.join("vmcore.kdump-flat"), Some("kdump-zlib"))?
            .as_secs_f64();
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
            makedumpfile::unflatten(&out.join("vmcore.kdump-flat"), &out.join("vmcore.kdump"))
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
            let seconds = timed(&mut || makedumpfile::run(r.flags, &input, &target))?;
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
    Ok((boot, dumps))
}
