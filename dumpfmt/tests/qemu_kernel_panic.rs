//! A real Linux kernel booted in QEMU until it panics, then dumped by QEMU as ELF with
//! paging=true (QEMU walks the guest page tables itself and writes the mappings as PT_LOADs), ELF
//! with paging=false, and kdump-zlib (flattened, and reassembled by makedumpfile).
//!
//! When the kernel's qemu_fw_cfg module is at hand, a tiny static /init loads it (so that the
//! kernel hands QEMU its VMCOREINFO through `-device vmcoreinfo`) and crashes the kernel with
//! sysrq-c; otherwise the kernel panics for want of a root file system.
//!
//! Oracles: QEMU's own page-table walk (the paging=true PT_LOADs) for our x86_64 walker; the
//! serial console (the panic text must be in memory, the release and KASLR offset in
//! VMCOREINFO); and the formats against each other.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use dumpfmt::translate::x86_64::X86_64;
use dumpfmt::translate::PageTableWalker;
use dumpfmt::{AddressSpace, Dump, Format, MissingReason, Source};
// The harness's initramfs writer, which also boots its Linux guest.
use kcrash_harness::initramfs::{newc_cpio, CpioEntry};

const PANIC_TEXT: &str = "Kernel panic - not syncing: ";

const INIT: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
    int fd = open("/qemu_fw_cfg.ko", O_RDONLY);
    long loaded = syscall(SYS_finit_module, fd, "", 0);
    printf("kcrash-test-init: loading qemu_fw_cfg returned %ld\n", loaded);
    fflush(stdout);
    mount("proc", "/proc", "proc", 0, 0);
    int sysrq = open("/proc/sysrq-trigger", O_WRONLY);
    write(sysrq, "c", 1);
    return 1;
}
"#;
const KERNEL_MAP: u64 = 0xffff_ffff_8000_0000;
const KERNEL_MAP_END: u64 = 0xffff_ffff_c000_0000;

struct Dumps {
    _dir: tempfile::TempDir,
    paging: PathBuf,
    plain: PathBuf,
    flat: PathBuf,
    kdump: PathBuf,
    /// From the console's "Kernel Offset: 0x... from 0xffffffff81000000".
    kernel_offset: u64,
    /// From the console's "Linux version ..." line.
    release: String,
    /// The guest loaded qemu_fw_cfg, so the dumps must carry VMCOREINFO.
    vmcoreinfo: bool,
}

/// The qemu_fw_cfg module matching `kernel` (.../boot/vmlinuz-VER → .../lib/modules/VER/...).
fn fw_cfg_module(kernel: &std::path::Path) -> Option<PathBuf> {
    let release = kernel.file_name()?.to_str()?.strip_prefix("vmlinuz-")?;
    let relative = format!("lib/modules/{release}/kernel/drivers/firmware/qemu_fw_cfg.ko");
    let beside = kernel.parent()?.parent()?.join(&relative);
    [beside, PathBuf::from("/").join(&relative)]
        .into_iter()
        .find(|p| p.is_file())
}

/// An initramfs whose /init loads qemu_fw_cfg and crashes the kernel, or None (with a note on
/// stderr) when the module or a static C toolchain is missing.
fn crash_initramfs(dir: &std::path::Path, kernel: &std::path::Path) -> Option<PathBuf> {
    let test = "kernel panic dump tests (VMCOREINFO part)";
    let Some(module) = fw_cfg_module(kernel) else {
        common::say_skipped(
            test,
            "no qemu_fw_cfg.ko beside the kernel image or in /lib/modules",
        );
        return None;
    };
    common::tool("gcc", "gcc", test)?;
    std::fs::write(dir.join("init.c"), INIT).ok()?;
    let built = std::process::Command::new("gcc")
        .args(["-static", "-O1", "-o"])
        .arg(dir.join("init"))
        .arg(dir.join("init.c"))
        .status()
        .ok()?;
    if !built.success() {
        common::say_skipped(test, "gcc -static failed (is libc6-dev installed?)");
        return None;
    }
    let init = std::fs::read(dir.join("init")).ok()?;
    let ko = std::fs::read(module).ok()?;
    let cpio = newc_cpio(&[
        CpioEntry::Dir("dev"),
        CpioEntry::CharDevice {
            name: "dev/console",
            major: 5,
            minor: 1,
        },
        CpioEntry::Dir("proc"),
        CpioEntry::File {
            name: "init",
            mode: 0o755,
            data: &init,
        },
        CpioEntry::File {
            name: "qemu_fw_cfg.ko",
            mode: 0o644,
            data: &ko,
        },
    ]);
    let path = dir.join("initramfs.cpio");
    std::fs::write(&path, cpio).ok()?;
    Some(path)
}

fn dumps(test: &str) -> Option<&'static Dumps> {
    static DUMPS: OnceLock<Option<Dumps>> = OnceLock::new();
    common::shared_fixture(&DUMPS, test, || {
        common::tool(
            "qemu-system-x86_64",
            "qemu-system-x86",
            "kernel panic dump tests",
        )?;
        common::tool("makedumpfile", "makedumpfile", "kernel panic dump tests")?;
        let kernel = common::kernel_image("kernel panic dump tests")?;
        let dir = tempfile::tempdir().unwrap();
        let initramfs = crash_initramfs(dir.path(), &kernel);
        let mut extra = vec!["-device".to_string(), "vmcoreinfo".into()];
        if let Some(initramfs) = &initramfs {
            extra.extend(["-initrd".to_string(), initramfs.display().to_string()]);
        }
        let mut guest =
            common::QemuGuest::boot(dir.path(), 256, &kernel, "console=ttyS0 panic=0", &extra);
        let console = common::QemuGuest::wait_for_console(
            dir.path(),
            "end Kernel panic",
            Duration::from_secs(300),
        )
        .unwrap_or_else(|| panic!("{} did not panic within 300 s", kernel.display()));
        let kernel_offset = console
            .split("Kernel Offset: 0x")
            .nth(1)
            .and_then(|rest| u64::from_str_radix(rest.split_whitespace().next()?, 16).ok())
            .expect("console shows the kernel offset");
        let release = console
            .split("Linux version ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .expect("console shows the kernel version")
            .to_string();
        let vmcoreinfo = initramfs.is_some();
        if vmcoreinfo {
            assert!(
                console.contains("loading qemu_fw_cfg returned 0"),
                "the test init could not load qemu_fw_cfg:\n{console}"
            );
        }
        let p = dir.path();
        let (paging, plain, flat, kdump) = (
            p.join("paging.elf"),
            p.join("plain.elf"),
            p.join("flat"),
            p.join("kdump"),
        );
        // Stop the vCPU so that every dump sees the same registers and memory.
        guest.execute(serde_json::json!({"execute": "stop"}));
        guest.dump(&paging, "elf", true);
        guest.dump(&plain, "elf", false);
        guest.dump(&flat, "kdump-zlib", false);
        drop(guest);
        common::makedumpfile_reassemble(&flat, &kdump);
        Some(Dumps {
            _dir: dir,
            paging,
            plain,
            flat,
            kdump,
            kernel_offset,
            release,
            vmcoreinfo,
        })
    })
}

#[test]
fn x86_64_walk_agrees_with_qemus_own_walk() {
    let Some(d) = dumps("x86_64_walk_agrees_with_qemus_own_walk") else {
        return;
    };
    let dump = Dump::open(&d.paging).unwrap();
    assert_eq!(dump.elf_machine(), Some(62));
    assert!(dump.has_virtual_mappings());
    // More PT_LOADs than e_phnum can hold: the count came from section header 0 (PN_XNUM).
    let segments = dump.segments();
    assert!(segments.len() > 0xffff, "{} segments", segments.len());

    let cpu = dump.qemu_cpu_states().next().unwrap().unwrap();
    assert!(cpu.paging());
    let walker = X86_64::new(cpu.la57());
    let step = segments.len() / 400;
    let sample = segments
        .iter()
        .step_by(step)
        .chain(segments.iter().filter(|s| s.memsz >= 1 << 21));
    let mut checked = 0;
    for seg in sample {
        for va in [
            seg.vaddr,
            seg.vaddr + ((seg.memsz / 2) & !7),
            seg.vaddr + seg.memsz - 1,
        ] {
            let m = walker
                .translate(&dump, cpu.cr3(), va)
                .unwrap_or_else(|e| panic!("{va:#x}: {e}"));
            assert_eq!(m.paddr, seg.paddr + (va - seg.vaddr), "va {va:#x}");
            checked += 1;
        }
    }
    assert!(checked > 1000);

    // The kernel text the console names is mapped, by QEMU and by us, to the same place.
    let text = 0xffff_ffff_8100_0000 + d.kernel_offset;
    let seg = segments
        .iter()
        .find(|s| s.vaddr <= text && text < s.vaddr + s.memsz)
        .expect("kernel text mapped");
    let m = walker.translate(&dump, cpu.cr3(), text).unwrap();
    assert_eq!(m.paddr, seg.paddr + (text - seg.vaddr));
    // Large pages: the kernel's direct map uses 2 MiB or 1 GiB pages.
    assert!(segments.iter().any(|s| s.memsz >= 1 << 21
        && walker
            .translate(&dump, cpu.cr3(), s.vaddr)
            .unwrap()
            .page_size
            > 4096));
}

#[test]
fn panic_registers_and_console_text_are_in_every_format() {
    let Some(d) = dumps("panic_registers_and_console_text_are_in_every_format") else {
        return;
    };
    let reference = Dump::open(&d.plain).unwrap();
    let needle = PANIC_TEXT.as_bytes();
    let find = |dump: &Dump| -> Vec<u64> {
        let mut hits = Vec::new();
        let mut chunk = vec![0u8; 1 << 20];
        for seg in reference.segments() {
            let mut at = seg.paddr;
            while at < seg.paddr + seg.memsz {
                let n = chunk.len().min((seg.paddr + seg.memsz - at) as usize);
                dump.read_phys(at, &mut chunk[..n])
                    .unwrap_or_else(|e| panic!("{e}"));
                hits.extend(find_all(&chunk[..n], needle).map(|i| at + i as u64));
                at += n as u64;
            }
        }
        hits
    };
    let expected = find(&reference);
    assert!(!expected.is_empty(), "the panic message is in guest memory");

    let cpu0 = reference.prstatus().next().unwrap().unwrap();
    let rip = cpu0.regs.rip();
    assert!(
        (KERNEL_MAP..KERNEL_MAP_END).contains(&rip),
        "rip {rip:#x} in kernel text"
    );
    for (path, format) in [(&d.flat, Format::KdumpFlattened), (&d.kdump, Format::Kdump)] {
        let dump = Dump::open(path).unwrap();
        assert_eq!(dump.format(), format);
        assert_eq!(find(&dump), expected, "{}", path.display());
        let cpu = dump.prstatus().next().unwrap().unwrap();
        assert_eq!(cpu.regs, cpu0.regs, "{}", path.display());
        assert_eq!(dump.qemu_cpu_states().next().unwrap().unwrap().rip, rip);
    }
    // paging=true describes only RAM that some page table maps; what it describes must agree.
    let paging = Dump::open(&d.paging).unwrap();
    assert_eq!(paging.prstatus().next().unwrap().unwrap().regs, cpu0.regs);
    let mut described = 0;
    for &hit in &expected {
        let mut buf = vec![0u8; needle.len()];
        match paging.read_phys(hit, &mut buf) {
            Ok(()) => {
                assert_eq!(buf, needle);
                described += 1;
            }
            Err(e) => assert_eq!(e.missing_reason(), Some(&MissingReason::Unmapped), "{e}"),
        }
    }
    assert!(described > 0, "the direct map covers the log buffer");
}

#[test]
fn virtual_reads_agree_between_dump_mappings_and_page_tables() {
    let Some(d) = dumps("virtual_reads_agree_between_dump_mappings_and_page_tables") else {
        return;
    };
    let paging = Dump::open(&d.paging).unwrap();
    let mut by_segments = AddressSpace::new(&paging);
    by_segments.push(Source::DumpMappings);
    let rip = paging.prstatus().next().unwrap().unwrap().regs.rip();
    let probes: Vec<u64> = [rip, 0xffff_ffff_8100_0000 + d.kernel_offset]
        .into_iter()
        .chain(
            paging
                .segments()
                .iter()
                .step_by(997)
                .map(|s| s.vaddr + s.memsz / 3),
        )
        .collect();
    let mut expected = Vec::new();
    for &va in &probes {
        let mut buf = [0u8; 256];
        by_segments
            .read_virt(va, &mut buf)
            .unwrap_or_else(|e| panic!("{e}"));
        expected.push(buf);
    }
    for path in [&d.plain, &d.kdump, &d.flat] {
        let dump = Dump::open(path).unwrap();
        let space = AddressSpace::from_dump(&dump).unwrap();
        // The kernel PGD from VMCOREINFO (when the guest provided it), then the QEMU note's CR3.
        let tables = if d.vmcoreinfo { 2 } else { 1 };
        assert_eq!(space.sources().len(), tables, "{}", path.display());
        assert!(space
            .sources()
            .iter()
            .all(|s| matches!(s, Source::PageTables { .. })));
        for (va, want) in probes.iter().zip(&expected) {
            let mut buf = [0u8; 256];
            space
                .read_virt(*va, &mut buf)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(&buf, want, "{:#x} in {}", va, path.display());
        }
        // A hole in the kernel half: not mapped, and the error says which level stopped.
        let err = space
            .read_virt(0xffff_ff00_0000_0000, &mut [0u8; 8])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not present"), "{err}");
    }
}

fn find_all<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    hay.windows(needle.len())
        .enumerate()
        .filter(move |(_, w)| w[0] == needle[0] && *w == needle)
        .map(|(i, _)| i)
}

#[test]
fn vmcoreinfo_matches_the_console_and_locates_the_kernel_page_tables() {
    let test = "vmcoreinfo_matches_the_console_and_locates_the_kernel_page_tables";
    let Some(d) = dumps(test) else { return };
    if !d.vmcoreinfo {
        common::say_skipped(
            test,
            "the guest could not load qemu_fw_cfg, so there is no VMCOREINFO",
        );
        return;
    }
    let elf = Dump::open(&d.plain).unwrap();
    let kdump = Dump::open(&d.kdump).unwrap();
    let flat = Dump::open(&d.flat).unwrap();
    let info = elf
        .vmcoreinfo()
        .unwrap()
        .expect("VMCOREINFO note in the ELF dump");
    // kdump keeps its own copy (offset_vmcoreinfo); it must be the same text.
    for other in [&kdump, &flat] {
        assert_eq!(
            other
                .vmcoreinfo()
                .unwrap()
                .expect("VMCOREINFO in kdump")
                .text(),
            info.text()
        );
    }
    assert_eq!(info.osrelease(), Some(d.release.as_str()));
    // Offsets in errors point at the line in the file.
    let bytes = std::fs::read(&d.plain).unwrap();
    for (key, value, at) in info.entries().step_by(7) {
        let line = format!("{key}={value}\n");
        assert_eq!(
            &bytes[at as usize..at as usize + line.len()],
            line.as_bytes()
        );
    }
    assert_eq!(info.page_size().unwrap(), Some(4096));
    assert_eq!(info.kernel_offset().unwrap(), Some(d.kernel_offset));
    assert_eq!(info.pgtable_l5_enabled().unwrap(), Some(false));

    // init_top_pgt is in the kernel image: pa = va - __START_KERNEL_map + phys_base. Walking from
    // there must agree with QEMU's walk for the kernel half.
    let pgd = info
        .symbol("init_top_pgt")
        .unwrap()
        .expect("SYMBOL(init_top_pgt)");
    let phys_base = info.phys_base().unwrap().expect("NUMBER(phys_base)");
    let root = (pgd - KERNEL_MAP).wrapping_add(phys_base as u64);
    assert_eq!(X86_64::kernel_root(&info).unwrap(), Some(root));
    let paging = Dump::open(&d.paging).unwrap();
    let walker = X86_64::new(false);
    let kernel_half: Vec<_> = paging
        .segments()
        .iter()
        .filter(|s| s.vaddr >= 0xffff_8000_0000_0000)
        .collect();
    for seg in kernel_half.iter().step_by(kernel_half.len() / 200 + 1) {
        let m = walker
            .translate(&elf, root, seg.vaddr)
            .unwrap_or_else(|e| panic!("{:#x}: {e}", seg.vaddr));
        assert_eq!(m.paddr, seg.paddr, "{:#x}", seg.vaddr);
    }
}
