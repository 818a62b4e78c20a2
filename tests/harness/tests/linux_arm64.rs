//! The arm64 guest's output (`kcrash-harness linux-arm64`, tests/kernels/linux) checked on its
//! own: guest.toml agrees with the console, every dump is what guest.toml says, and QEMU's dumps
//! are of an aarch64 machine whose VMCOREINFO agrees with what the guest printed.
//!
//! Reads the directory named by KCRASH_LINUX_ARM64 (.ci/run runs the pipeline and sets it), or
//! CI's default. Without a finished guest there the test says NOT RUN, or fails under
//! KCRASH_REQUIRE_TOOLS=1.

use kcrash_harness::dump::Magic;
use kcrash_harness::linux::arm64::{finished, GuestFacts};
use kcrash_harness::linux::guest::PanicFacts;
use object::read::elf::{FileHeader, ProgramHeader};
use std::io::Read;
use std::path::Path;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The first `n` bytes of `path` (fewer if it is shorter).
fn head(path: &Path, n: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(n).read_to_end(&mut bytes))
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    bytes
}

/// The VMCOREINFO note of QEMU's ELF dump, as `KEY=value` lines. QEMU writes its notes right
/// after the headers, well within the first MiB.
fn vmcoreinfo(elf: &Path) -> String {
    let data = head(elf, 1 << 20);
    let header = object::elf::FileHeader64::<object::Endianness>::parse(&*data).unwrap();
    let endian = header.endian().unwrap();
    assert_eq!(header.e_machine(endian), object::elf::EM_AARCH64);
    assert_eq!(header.e_type(endian), object::elf::ET_CORE);
    for ph in header.program_headers(endian, &*data).unwrap() {
        let Some(mut notes) = ph.notes(endian, &*data).unwrap() else {
            continue;
        };
        while let Some(note) = notes.next().unwrap() {
            if note.name() == b"VMCOREINFO" {
                return String::from_utf8(note.desc().to_vec()).unwrap();
            }
        }
    }
    panic!("{} has no VMCOREINFO note", elf.display())
}

fn vmcoreinfo_value<'a>(info: &'a str, key: &str) -> &'a str {
    info.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("VMCOREINFO has no {key}"))
}

#[test]
fn the_manifest_the_console_and_the_dumps_agree() {
    let Some((dir, guest)) = finished("the_manifest_the_console_and_the_dumps_agree") else {
        return;
    };
    assert_eq!(guest.arch, "aarch64");
    assert_eq!((guest.cpus, guest.memory_mib), (2, 512));
    assert!(guest.vmcoreinfo);

    let console = read(&dir.join(&guest.console));
    let panic = PanicFacts::parse(&console).unwrap();
    let facts = GuestFacts::parse(&console).unwrap();
    assert_eq!(panic.release, guest.release);
    assert_eq!(facts.release, guest.release);
    assert_eq!(facts.machine, "aarch64");
    assert_eq!(facts.cpus, u64::from(guest.cpus));
    assert_eq!(panic.panic, "sysrq triggered crash");
    assert_eq!(guest.panic, panic.panic);
    let offset = panic
        .kaslr_offset
        .map_or("disabled".to_string(), |o| format!("{o:#x}"));
    assert_eq!(guest.kaslr_offset, offset);
    assert_eq!(guest.stext, format!("{:#x}", facts.stext));

    let files: Vec<&str> = guest.dumps.iter().map(|d| d.file.as_str()).collect();
    assert_eq!(files, ["vmcore.elf", "vmcore.kdump-flat"]);
    for dump in &guest.dumps {
        let path = dir.join(&dump.file);
        let magic = Magic::of_file(&path).unwrap().unwrap();
        assert_eq!(magic.name(), dump.magic, "{}", dump.file);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), dump.bytes);
    }
    // QEMU's ELF holds all of the guest's memory.
    assert!(guest.dumps[0].bytes > u64::from(guest.memory_mib) << 20);

    // The kernel's own account, in the dump, of what the guest printed.
    let info = vmcoreinfo(&dir.join("vmcore.elf"));
    assert_eq!(vmcoreinfo_value(&info, "OSRELEASE"), guest.release);
    assert_eq!(
        vmcoreinfo_value(&info, "SYMBOL(_stext)"),
        format!("{:016x}", facts.stext)
    );
    let kerneloffset = u64::from_str_radix(vmcoreinfo_value(&info, "KERNELOFFSET"), 16).unwrap();
    assert_eq!(Some(kerneloffset), panic.kaslr_offset.or(Some(0)));

    // The flattened kdump: makedumpfile's 4 KiB header, then records of (offset, size)
    // big-endian and their data, the first of them the kdump header. QEMU 7.2 leaves its utsname
    // empty but for the machine, which it calls "Unknown" on arm: only the VMCOREINFO note it
    // copies into the first pages says what kernel this is.
    let flat = head(&dir.join("vmcore.kdump-flat"), 64 << 10);
    assert!(flat[4096 + 16..].starts_with(b"KDUMP   "));
    for line in [
        format!("OSRELEASE={}\n", guest.release),
        format!("KERNELOFFSET={kerneloffset:x}\n"),
    ] {
        assert!(
            flat.windows(line.len()).any(|w| w == line.as_bytes()),
            "vmcore.kdump-flat has no {line:?}"
        );
    }
}
