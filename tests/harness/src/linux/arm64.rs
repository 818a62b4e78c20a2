//! The arm64 guest: Debian's arm64 kernel under `qemu-system-aarch64` (TCG, virt board,
//! Cortex-A57), booted from a busybox initramfs with KASLR as the virt board seeds it, with
//! kcrash's KLog module (tests/kernels/linux) cross-compiled against Debian's arm64 headers,
//! panicked with sysrq-c and dumped by QEMU (ELF and kdump-zlib): real arm64 kernel dumps. Built from the x86 guest's pieces with the architecture as a
//! parameter: Debian's packages ([`debian`]), the initramfs, `/init`'s start and end, the boot
//! to a stopped, panicked guest and its dumps ([`guest`]). The output directory's contract is in
//! tests/kernels/linux/README.md.

use super::debian::{self, build_module, cross_headers, kernel_image, unpacked_busybox, Kernel};
use super::guest::{
    self, boot_to_panic, console_line, console_text, image_module, Boot, PanicFacts,
};
use super::{cmdline, publish, record, DumpRecord, CACHE, CPUS, MEMORY_MIB, PANIC_MESSAGE};
use crate::arch::Arch;
use crate::expected::Expected;
use crate::{oracle, tools};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

const ARCH: Arch = Arch::Aarch64;

/// Where a run writes when not told: `<cache>/linux-guest-arm64/<release>`.
pub fn default_out(cache: &Path, release: &str) -> PathBuf {
    cache.join("linux-guest-arm64").join(release)
}

/// For tests: the arm64 guest's output directory, `$KCRASH_LINUX_ARM64` or CI's default (the
/// arm64 build of the amd64 release CI boots: Debian builds both from one upload).
pub fn output() -> PathBuf {
    std::env::var_os("KCRASH_LINUX_ARM64")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let release = super::CI_RELEASE.trim_end_matches("-amd64");
            default_out(Path::new(CACHE), &format!("{release}-arm64"))
        })
}

/// For tests: the arm64 guest's finished output ([`output`]) and what its guest.toml says, or
/// None after saying why the test does not run (NOT RUN; a failure under
/// KCRASH_REQUIRE_TOOLS=1).
pub fn finished(test: &str) -> Option<(PathBuf, Manifest)> {
    let dir = output();
    if !dir.join(super::READY).is_file() {
        tools::not_run(
            test,
            &format!(
                "{} holds no finished arm64 guest (cargo run --release -p kcrash-harness -- \
                 linux-arm64 makes one; KCRASH_LINUX_ARM64 names another)",
                dir.display()
            ),
        );
        return None;
    }
    let path = dir.join("guest.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let manifest = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Some((dir, manifest))
}

/// For tests: the arm64 guest's directory and its dumps, as [`finished`] finds them.
pub fn guest_dumps(test: &str) -> Option<(PathBuf, Vec<PathBuf>)> {
    let (dir, manifest) = finished(test)?;
    let dumps = manifest.dumps.iter().map(|d| dir.join(&d.file)).collect();
    Some((dir, dumps))
}

/// How long the guest may take from QEMU's start to the end of its panic. Under TCG on two
/// shared cores it takes ~5 s.
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(300);

/// The tag of the lines /init writes to /dev/kmsg about the guest, `key=value` each.
const MARK: &str = "KCRASH-ARM64";

/// What the guest's /init loads: the image's `qemu_fw_cfg` (how the kernel hands QEMU its
/// VMCOREINFO for `-device vmcoreinfo`; Debian builds it as a module).
const FW_CFG: (&str, &[&str]) = ("qemu_fw_cfg", &["drivers/firmware/qemu_fw_cfg.ko"]);

/// Where the guest finds QEMU's VMCOREINFO entry once qemu_fw_cfg is loaded.
const FW_CFG_VMCOREINFO: &str = "/sys/firmware/qemu_fw_cfg/by_name/etc/vmcoreinfo";

/// The guest's /init: the x86 guest's ([`guest::init_script`]: qemu_fw_cfg and klogtest loaded,
/// the module's sections and /proc/modules on the console; no ftrace, which under TCG took the
/// boot from 7 s to three minutes here), then `KCRASH-ARM64`
/// lines about the kernel (release, machine, CPUs, memory, `_stext` from /proc/kallsyms:
/// KASLR's placement as the guest saw it, whether QEMU's VMCOREINFO entry appeared), then the
/// crash.
pub fn init_script() -> String {
    let (fw_cfg, _) = FW_CFG;
    let facts = format!(
        r#"echo "{MARK} release=$($B uname -r) machine=$($B uname -m)" > /dev/kmsg
echo "{MARK} cpus=$($B grep -c '^processor' /proc/cpuinfo) memtotal_kb=$($B awk '/^MemTotal:/ {{print $2}}' /proc/meminfo)" > /dev/kmsg
echo "{MARK} stext=0x$($B awk '$3 == "_stext" {{print $1}}' /proc/kallsyms)" > /dev/kmsg
if [ -e {FW_CFG_VMCOREINFO} ]; then v=1; else v=0; fi
echo "{MARK} vmcoreinfo=$v" > /dev/kmsg"#
    );
    guest::init_script(&[fw_cfg], Some(&facts), false)
}

/// What the guest's `KCRASH-ARM64` lines said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestFacts {
    pub release: String,
    /// `uname -m`.
    pub machine: String,
    pub cpus: u64,
    pub memtotal_kb: u64,
    /// `_stext` in /proc/kallsyms.
    pub stext: u64,
    /// QEMU's VMCOREINFO entry was there once qemu_fw_cfg was loaded.
    pub vmcoreinfo: bool,
}

impl GuestFacts {
    pub fn parse(console: &str) -> Result<GuestFacts> {
        let mut lines = Vec::new();
        for line in console.lines().map(console_line) {
            if let Some(rest) = line.strip_prefix(&format!("{MARK} ")) {
                // The oracle's key=value syntax, parsed by the same code.
                let parsed = oracle::Line::parse(&format!("KLOG-ARM64 {rest}"))
                    .context(MARK)?
                    .with_context(|| format!("bad {MARK} line {line:?}"))?;
                lines.push(parsed);
            }
        }
        let find = |key: &str| {
            lines
                .iter()
                .find(|l| l.str(key).is_ok())
                .with_context(|| format!("the console has no {MARK} line with {key}="))
        };
        Ok(GuestFacts {
            release: find("release")?.str("release")?.to_string(),
            machine: find("machine")?.str("machine")?.to_string(),
            cpus: find("cpus")?.num("cpus")?,
            memtotal_kb: find("memtotal_kb")?.num("memtotal_kb")?,
            stext: find("stext")?.num("stext")?,
            vmcoreinfo: find("vmcoreinfo")?.num("vmcoreinfo")? == 1,
        })
    }
}

/// What one run produced: `guest.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub release: String,
    /// The kernel's name for it: "aarch64".
    pub arch: String,
    /// Symlink to the booted image, and to its debug vmlinux (Debian's -dbg package, cached).
    pub vmlinuz: String,
    pub vmlinux: String,
    /// QEMU's board and CPU model.
    pub machine: String,
    pub cpu: String,
    pub cpus: u32,
    pub memory_mib: u32,
    pub cmdline: String,
    pub qemu: String,
    pub console: String,
    /// KASLR's shift of the kernel image from the panic's "Kernel Offset" line (hex), or
    /// "disabled". Addresses are hex strings (TOML integers are signed 64-bit).
    pub kaslr_offset: String,
    /// `_stext` as the guest's /proc/kallsyms gave it.
    pub stext: String,
    /// The guest handed QEMU its VMCOREINFO: the dumps carry it.
    pub vmcoreinfo: bool,
    pub panic: String,
    /// The module, with its debug info, and its own log of what it wrote (the oracle).
    pub module: String,
    pub expected: String,
    /// Wall time from QEMU's start to the stopped, panicked guest.
    pub boot_seconds: f64,
    pub dumps: Vec<DumpRecord>,
}

/// Gets Debian's arm64 image of `series` and an arm64 busybox into `cache`, boots, panics and
/// dumps the guest into `out` (default [`default_out`]); returns the directory and its manifest.
pub fn generate(cache: &Path, series: &str, out: Option<PathBuf>) -> Result<(PathBuf, Manifest)> {
    if !tools::missing(&[ARCH.qemu()]).is_empty() {
        debian::apt_install(&[ARCH.qemu_package()])?;
    }
    let kernel = kernel_image(cache, series, ARCH)?;
    let busybox = unpacked_busybox(cache, ARCH)?;
    let (_, prefix) = ARCH.cross_compile().expect("arm64 is cross-compiled here");
    if !tools::missing(&[&format!("{prefix}gcc")]).is_empty() {
        debian::apt_install(&["gcc-aarch64-linux-gnu"])?;
    }
    let headers = cross_headers(cache, &kernel)?;
    let module = build_module(&kernel, &headers)?;
    let vmlinux = debian::debug_vmlinux(cache, &kernel.release, ARCH)?;
    let out = out.unwrap_or_else(|| default_out(cache, &kernel.release));
    publish(&out, |staging| {
        write_guest(&kernel, &busybox, &module, &vmlinux, staging)
    })
}

/// The initramfs: the arm64 busybox, qemu_fw_cfg, klogtest and /init.
fn initramfs(kernel: &Kernel, busybox: &Path, klogtest: &Path) -> Result<Vec<u8>> {
    let (name, paths) = FW_CFG;
    let module = image_module(kernel, paths)
        .with_context(|| format!("Linux {} has no {name} module", kernel.release))?;
    let busybox =
        std::fs::read(busybox).with_context(|| format!("reading {}", busybox.display()))?;
    Ok(guest::cpio(&[
        ("init".into(), init_script().into_bytes(), 0o755),
        ("bin/busybox".into(), busybox, 0o755),
        (
            format!("lib/modules/{name}.ko"),
            guest::module_bytes(&module)?,
            0o644,
        ),
        (
            "lib/modules/klogtest.ko".into(),
            std::fs::read(klogtest).with_context(|| format!("reading {}", klogtest.display()))?,
            0o644,
        ),
    ]))
}

/// Every file of the output into `out`; returns guest.toml's contents.
fn write_guest(
    kernel: &Kernel,
    busybox: &Path,
    module: &Path,
    vmlinux: &Path,
    out: &Path,
) -> Result<Manifest> {
    let initramfs_path = out.join("initramfs.cpio");
    std::fs::write(&initramfs_path, initramfs(kernel, busybox, module)?)?;
    std::fs::copy(module, out.join("klogtest.ko"))?;
    let vmlinuz = kernel.vmlinuz();
    for (name, target) in [("vmlinuz", vmlinuz.as_path()), ("vmlinux", vmlinux)] {
        std::os::unix::fs::symlink(target, out.join(name))
            .with_context(|| format!("linking {}", out.join(name).display()))?;
    }
    let console = out.join("console.log");
    let mut stopped = boot_to_panic(&Boot {
        kernel,
        initramfs: &initramfs_path,
        vmcoreinfo: true,
        console: &console,
        timeout: BOOT_TIMEOUT,
    })?;
    let boot_seconds = stopped.boot_time.as_secs_f64();
    eprintln!("linux arm64: boot to panic {boot_seconds:.1}s");
    // Checked before dumping: a guest that did not get as far as the crash /init asked for is of
    // no use (QEMU is killed when `stopped` is dropped on the way out).
    let text = std::fs::read_to_string(&console)?;
    let what = || format!("reading {}", console.display());
    let panic = PanicFacts::parse(&text).with_context(what)?;
    let facts = GuestFacts::parse(&text).with_context(what)?;
    if panic.panic != PANIC_MESSAGE {
        bail!(
            "the guest panicked with {:?}, not {PANIC_MESSAGE:?}",
            panic.panic
        );
    }
    if panic.release != kernel.release || facts.release != kernel.release {
        bail!(
            "booted {} but the console says Linux {} and uname {}",
            kernel.release,
            panic.release,
            facts.release
        );
    }
    if facts.machine != ARCH.name() {
        bail!("the guest's uname -m is {:?}", facts.machine);
    }
    if !facts.vmcoreinfo {
        bail!("the guest has no {FW_CFG_VMCOREINFO} (did qemu_fw_cfg load?)");
    }
    let expected: Expected = oracle::derive(&console_text(&text))
        .with_context(|| format!("deriving the oracle of {}", console.display()))?;
    if expected.panic != PANIC_MESSAGE {
        bail!("the module's oracle ends with panic {:?}", expected.panic);
    }
    std::fs::write(
        out.join("expected.json"),
        serde_json::to_string_pretty(&expected)? + "\n",
    )?;

    let mut dumps = Vec::new();
    for (file, format, what, producer) in [
        (
            "vmcore.elf",
            None,
            ("elf", "none", None),
            "qemu dump-guest-memory format=elf paging=false",
        ),
        (
            "vmcore.kdump-flat",
            Some("kdump-zlib"),
            ("kdump-flat", "zlib", None),
            "qemu dump-guest-memory format=kdump-zlib paging=false",
        ),
    ] {
        let seconds = stopped.dump(&out.join(file), format)?.as_secs_f64();
        dumps.push(record(
            out,
            file,
            "vmcoreinfo",
            what,
            producer.into(),
            seconds,
        )?);
    }
    stopped.quit()?;
    check_elf_machine(&out.join("vmcore.elf"))?;

    let manifest = Manifest {
        release: kernel.release.clone(),
        arch: ARCH.name().into(),
        vmlinuz: "vmlinuz".into(),
        vmlinux: "vmlinux".into(),
        machine: ARCH.machine().into(),
        cpu: ARCH.cpu().into(),
        cpus: CPUS,
        memory_mib: MEMORY_MIB,
        cmdline: cmdline(ARCH),
        qemu: tools::version_line(Path::new(ARCH.qemu())),
        console: "console.log".into(),
        kaslr_offset: match panic.kaslr_offset {
            Some(offset) => format!("{offset:#x}"),
            None => "disabled".into(),
        },
        stext: format!("{:#x}", facts.stext),
        vmcoreinfo: facts.vmcoreinfo,
        panic: panic.panic,
        module: "klogtest.ko".into(),
        expected: "expected.json".into(),
        boot_seconds,
        dumps,
    };
    std::fs::write(out.join("guest.toml"), toml::to_string(&manifest)?)?;
    Ok(manifest)
}

/// Fails unless the ELF dump at `path` is of [`ARCH`]'s machine.
fn check_elf_machine(path: &Path) -> Result<()> {
    let machine = crate::dump::elf_machine(path)?;
    if machine != Some(ARCH.elf_machine()) {
        bail!(
            "{} is an ELF of machine {machine:?}, not {} ({})",
            path.display(),
            ARCH.elf_machine(),
            ARCH.name()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_loads_fw_cfg_and_klogtest_tells_of_the_guest_then_crashes() {
        let script = init_script();
        let at = |needle: &str| script.find(needle).unwrap_or_else(|| panic!("{needle}"));
        assert!(script.starts_with("#!/bin/busybox sh\n"));
        assert!(at("mount -t devtmpfs") < at("KCRASH-ARM64 release="));
        assert!(at("for m in qemu_fw_cfg klogtest;") < at("KCRASH-SECTION module=klogtest"));
        assert!(at("KCRASH-SECTION module=klogtest") < at("KCRASH-ARM64 release="));
        assert!(at("KCRASH-ARM64 vmcoreinfo=") < at("KCRASH-PANIC sysrq triggered crash"));
        assert!(script.trim_end().ends_with("echo c > /proc/sysrq-trigger"));
        // format!'s braces became awk's.
        assert!(script.contains(r#"awk '$3 == "_stext" {print $1}' /proc/kallsyms"#));
    }

    const CONSOLE: &str = "[    0.000000] Linux version 6.1.0-56-arm64 (debian-kernel@lists.debian.org) (gcc-12) #1 SMP Debian 6.1.192-2\r
[    0.358727] KASLR enabled\r
[    1.665578] KCRASH-ARM64 release=6.1.0-56-arm64 machine=aarch64\r
[    1.666000] KCRASH-ARM64 cpus=2 memtotal_kb=469484\r
[    2.420988] KCRASH-ARM64 stext=0xffffbf7ebca10000\r
[    2.445538] KCRASH-ARM64 vmcoreinfo=1\r
[    2.450479] KCRASH-PANIC sysrq triggered crash\r
[    2.456813] Kernel panic - not syncing: sysrq triggered crash\r
[    2.460364] Kernel Offset: 0x3f7eb4a00000 from 0xffff800008000000\r
[    2.460480] PHYS_OFFSET: 0xffffdcfc00000000\r
[    2.461028] ---[ end Kernel panic - not syncing: sysrq triggered crash ]---\r
";

    #[test]
    fn console_facts_of_an_arm64_boot() {
        let facts = GuestFacts::parse(CONSOLE).unwrap();
        assert_eq!(
            facts,
            GuestFacts {
                release: "6.1.0-56-arm64".into(),
                machine: "aarch64".into(),
                cpus: 2,
                memtotal_kb: 469_484,
                stext: 0xffff_bf7e_bca1_0000,
                vmcoreinfo: true,
            }
        );
        let panic = PanicFacts::parse(CONSOLE).unwrap();
        assert_eq!(panic.release, "6.1.0-56-arm64");
        assert_eq!(panic.kaslr_offset, Some(0x3f7e_b4a0_0000));
        assert_eq!(panic.panic, PANIC_MESSAGE);
        // _stext is linked at 0xffff800008010000 and KASLR moved it by the printed offset.
        assert_eq!(
            facts.stext,
            0xffff_8000_0801_0000 + panic.kaslr_offset.unwrap()
        );
    }

    #[test]
    fn a_kernel_without_a_kaslr_seed_says_disabled() {
        let console = CONSOLE.replace(
            "Kernel Offset: 0x3f7eb4a00000 from 0xffff800008000000",
            "Kernel Offset: disabled",
        );
        assert_eq!(PanicFacts::parse(&console).unwrap().kaslr_offset, None);
        // The x86 guest's facts require KASLR.
        assert!(guest::ConsoleFacts::parse(&console).is_err());
    }

    #[test]
    fn a_missing_fact_is_an_error_that_names_it() {
        let console: String = CONSOLE
            .lines()
            .filter(|l| !l.contains("stext="))
            .map(|l| format!("{l}\n"))
            .collect();
        let err = GuestFacts::parse(&console).unwrap_err();
        assert!(format!("{err:#}").contains("stext="), "{err:#}");
    }

    #[test]
    fn the_output_is_named_by_release_beside_the_x86_guests() {
        assert_eq!(
            default_out(Path::new("/c"), "6.1.0-56-arm64"),
            Path::new("/c/linux-guest-arm64/6.1.0-56-arm64")
        );
        assert_eq!(
            debian::image_cache(Path::new("/c"), ARCH),
            Path::new("/c/linux-image-arm64")
        );
        assert_eq!(
            debian::image_cache(Path::new("/c"), Arch::X86_64),
            Path::new("/c/linux-image")
        );
    }
}
