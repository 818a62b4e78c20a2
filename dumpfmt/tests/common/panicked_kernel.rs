//! A real Linux kernel booted under QEMU until it panics (a static /init loads qemu_fw_cfg so
//! that the kernel hands QEMU its VMCOREINFO, then crashes the kernel with sysrq-c), and its
//! dumps, made once per test binary: QEMU's, makedumpfile's from QEMU's ELF, and kdump files
//! whose zlib pages are re-encoded with another compression.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use super::QemuGuest;
// The harness's initramfs writer, which also boots its Linux guest.
use kcrash_harness::initramfs::{newc_cpio, CpioEntry};
use kcrash_harness::{makedumpfile, tools};

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
/// The qemu_fw_cfg module matching `kernel` (.../boot/vmlinuz-VER → .../lib/modules/VER/...).
fn fw_cfg_module(kernel: &Path) -> Option<PathBuf> {
    let release = kernel.file_name()?.to_str()?.strip_prefix("vmlinuz-")?;
    let relative = format!("lib/modules/{release}/kernel/drivers/firmware/qemu_fw_cfg.ko");
    let beside = kernel.parent()?.parent()?.join(&relative);
    [beside, PathBuf::from("/").join(&relative)]
        .into_iter()
        .find(|p| p.is_file())
}

/// An initramfs whose /init loads qemu_fw_cfg and crashes the kernel, or None (with a note on
/// stderr) when the module or a static C toolchain is missing.
fn crash_initramfs(dir: &Path, kernel: &Path) -> Option<PathBuf> {
    let test = "kernel panic dump tests (VMCOREINFO part)";
    let Some(module) = fw_cfg_module(kernel) else {
        tools::not_run_here(
            test,
            "no qemu_fw_cfg.ko beside the kernel image or in /lib/modules",
        );
        return None;
    };
    super::tool("gcc", "gcc", test)?;
    std::fs::write(dir.join("init.c"), INIT).ok()?;
    let built = std::process::Command::new("gcc")
        .args(["-static", "-O1", "-o"])
        .arg(dir.join("init"))
        .arg(dir.join("init.c"))
        .status()
        .ok()?;
    if !built.success() {
        tools::not_run_here(test, "gcc -static failed (is libc6-dev installed?)");
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

/// A kernel that booted under QEMU and panicked; the vCPU is stopped so that every dump taken
/// from `guest` sees the same registers and memory.
pub struct Panicked {
    pub guest: QemuGuest,
    /// From the console's "Kernel Offset: 0x... from 0xffffffff81000000".
    pub kernel_offset: u64,
    /// From the console's "Linux version ..." line.
    pub release: String,
    /// The guest loaded qemu_fw_cfg, so its dumps carry VMCOREINFO.
    pub vmcoreinfo: bool,
}

/// Boot `kernel` (256 MiB, `-device vmcoreinfo`) with the crashing initramfs when it can be
/// made, else until it panics for want of a root file system.
pub fn boot_until_panic(dir: &Path, kernel: &Path) -> Panicked {
    let initramfs = crash_initramfs(dir, kernel);
    let mut extra = vec!["-device".to_string(), "vmcoreinfo".into()];
    if let Some(initramfs) = &initramfs {
        extra.extend(["-initrd".to_string(), initramfs.display().to_string()]);
    }
    let mut guest = QemuGuest::boot(dir, 256, kernel, "console=ttyS0 panic=0", &extra);
    let console = QemuGuest::wait_for_console(dir, "end Kernel panic", Duration::from_secs(300))
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
    guest.execute("stop", serde_json::json!({}));
    Panicked {
        guest,
        kernel_offset,
        release,
        vmcoreinfo,
    }
}

/// A copy of a kdump-zlib file whose zlib pages are inflated (flate2, not dumpfmt) and stored
/// again as `encode` makes them, flagged `flag` (0x4 snappy, 0x20 zstd), or raw when that is
/// not smaller, as makedumpfile does; headers, bitmaps and notes are kept. Pages shared by
/// several descriptors (QEMU's zero page) stay shared.
pub fn reencode(src: &Path, out: &Path, flag: u32, encode: impl Fn(&[u8]) -> Vec<u8>) {
    use std::io::Read;
    let b = std::fs::read(src).unwrap();
    let le32 = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    let le64 = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
    let (bs, sub_blocks, bitmap_blocks) = (le32(428), le32(432), le32(436));
    let max_mapnr = le64(bs + 96);
    let bitmap2 = &b[(1 + sub_blocks + bitmap_blocks / 2) * bs..][..bitmap_blocks / 2 * bs];
    let pages = (0..max_mapnr)
        .filter(|pfn| bitmap2[pfn / 8] & (1 << (pfn % 8)) != 0)
        .count();
    let desc_base = (1 + sub_blocks + bitmap_blocks) * bs;
    let mut head = b[..desc_base].to_vec();
    assert_eq!(le32(424), 1, "status: zlib");
    head[424..428].copy_from_slice(&flag.to_le_bytes());
    let mut descs = Vec::new();
    let mut data = Vec::new();
    let data_base = desc_base + pages * 24;
    let mut moved = std::collections::HashMap::new();
    for i in 0..pages {
        let d = desc_base + i * 24;
        let (offset, size, flags) = (le64(d), le32(d + 8), le32(d + 12));
        let (new_offset, new_size, new_flags) = *moved.entry(offset).or_insert_with(|| {
            let stored = &b[offset..offset + size];
            let (bytes, flags) = if flags == 1 {
                let mut page = Vec::new();
                flate2::read::ZlibDecoder::new(stored)
                    .read_to_end(&mut page)
                    .unwrap();
                assert_eq!(page.len(), bs);
                let packed = encode(&page);
                if packed.len() < bs {
                    (packed, flag)
                } else {
                    (page, 0)
                }
            } else {
                (stored.to_vec(), flags as u32)
            };
            let at = data_base + data.len();
            data.extend_from_slice(&bytes);
            (at, bytes.len(), flags)
        });
        descs.extend_from_slice(&(new_offset as i64).to_le_bytes());
        descs.extend_from_slice(&(new_size as u32).to_le_bytes());
        descs.extend_from_slice(&new_flags.to_le_bytes());
        descs.extend_from_slice(&0u64.to_le_bytes());
    }
    std::fs::write(out, [head, descs, data].concat()).unwrap();
}

pub struct Dumps {
    pub _dir: tempfile::TempDir,
    pub paging: PathBuf,
    pub plain: PathBuf,
    pub flat: PathBuf,
    pub kdump: PathBuf,
    /// From the console's "Kernel Offset: 0x... from 0xffffffff81000000".
    pub kernel_offset: u64,
    /// From the console's "Linux version ..." line.
    pub release: String,
    /// The guest loaded qemu_fw_cfg, so the dumps must carry VMCOREINFO.
    pub vmcoreinfo: bool,
    /// makedumpfile's outputs (it needs VMCOREINFO), and the re-encoded kdump files.
    pub derived: Option<Derived>,
}

pub struct Derived {
    /// (makedumpfile arguments, output): kdump files.
    pub kdumps: Vec<(&'static str, PathBuf)>,
    /// `-E -d 31`.
    pub elf_d31: PathBuf,
    /// QEMU's kdump-zlib with its zlib pages re-encoded as snappy and as zstd.
    pub snappy: PathBuf,
    pub zstd: PathBuf,
}

pub const MAKEDUMPFILE_KDUMPS: [&str; 4] = ["-c -d 31", "-l -d 31", "-c -d 0", "-l -d 0"];

pub fn derive(dir: &Path, plain: &Path, kdump: &Path) -> Derived {
    let input = dir.join("for-makedumpfile.elf");
    makedumpfile::elf_for_makedumpfile(plain, &input).unwrap();
    let kdumps = MAKEDUMPFILE_KDUMPS
        .iter()
        .map(|&args| {
            let out = dir.join(format!("makedumpfile{}.kdump", args.replace(' ', "")));
            makedumpfile::run(&args.split(' ').collect::<Vec<_>>(), &input, &out).unwrap();
            (args, out)
        })
        .collect();
    let elf_d31 = dir.join("makedumpfile-E-d31.elf");
    makedumpfile::run(&["-E", "-d", "31"], &input, &elf_d31).unwrap();
    let (snappy, zstd) = (dir.join("snappy.kdump"), dir.join("zstd.kdump"));
    reencode(kdump, &snappy, 0x4, |page| {
        snap::raw::Encoder::new().compress_vec(page).unwrap()
    });
    reencode(kdump, &zstd, 0x20, |page| {
        zstd::bulk::compress(page, 1).unwrap()
    });
    Derived {
        kdumps,
        elf_d31,
        snappy,
        zstd,
    }
}

pub fn dumps(test: &str) -> Option<&'static Dumps> {
    static DUMPS: OnceLock<Option<Dumps>> = OnceLock::new();
    super::shared_fixture(&DUMPS, test, || {
        super::tool(
            "qemu-system-x86_64",
            "qemu-system-x86",
            "kernel panic dump tests",
        )?;
        super::tool("makedumpfile", "makedumpfile", "kernel panic dump tests")?;
        let kernel = super::kernel_image("kernel panic dump tests")?;
        let dir = tempfile::tempdir().unwrap();
        let Panicked {
            mut guest,
            kernel_offset,
            release,
            vmcoreinfo,
        } = boot_until_panic(dir.path(), &kernel);
        let p = dir.path();
        let (paging, plain, flat, kdump) = (
            p.join("paging.elf"),
            p.join("plain.elf"),
            p.join("flat"),
            p.join("kdump"),
        );
        guest.dump(&paging, "elf", true);
        guest.dump(&plain, "elf", false);
        guest.dump(&flat, "kdump-zlib", false);
        drop(guest);
        makedumpfile::unflatten(&flat, &kdump).unwrap();
        let derived = vmcoreinfo.then(|| derive(p, &plain, &kdump));
        Some(Dumps {
            _dir: dir,
            paging,
            plain,
            flat,
            kdump,
            kernel_offset,
            release,
            vmcoreinfo,
            derived,
        })
    })
}
