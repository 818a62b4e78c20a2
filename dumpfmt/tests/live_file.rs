//! `Dump::open_live`, the reader of /proc/kcore, on files this host has: a real QEMU ELF dump
//! (the Linux guest's, from `KCRASH_LINUX_GUEST`) read through `pread` must give what the
//! memory-mapped reader gives; a file that is not a live core fails naming the offset. The
//! reader on a real /proc/kcore is tested in the guest (kcrash/tests/linux/live.rs): this host
//! has none.

use std::path::PathBuf;

use dumpfmt::{Dump, Error};
use kcrash_harness::{linux, tools};

fn guest_elf(test: &str) -> Option<PathBuf> {
    let elf = linux::guest_output().join("vmcore.elf");
    if elf.exists() {
        return Some(elf);
    }
    tools::not_run(test, &format!("{} not there", elf.display()));
    None
}

#[test]
fn a_live_read_of_a_real_elf_core_gives_what_the_mapped_read_gives() {
    let Some(path) = guest_elf("a_live_read_of_a_real_elf_core") else {
        return;
    };
    let (mapped, live) = (Dump::open(&path).unwrap(), Dump::open_live(&path).unwrap());
    assert!(live.is_live() && !mapped.is_live());
    assert_eq!(live.segments(), mapped.segments());
    let info = |d: &Dump| {
        d.vmcoreinfo()
            .unwrap()
            .map(|i| i.osrelease().map(str::to_owned))
    };
    assert_eq!(info(&live), info(&mapped));
    assert!(
        info(&live).flatten().is_some(),
        "the guest's dump has VMCOREINFO"
    );
    // Pages across the first segment, and a read that spans a page boundary.
    let seg = mapped.segments()[0];
    for paddr in [
        seg.paddr,
        seg.paddr + 0x1ff8,
        seg.paddr + seg.memsz - 0x1000,
    ] {
        let (mut a, mut b) = ([0u8; 0x1000], [0u8; 0x1000]);
        mapped.read_phys(paddr, &mut a).unwrap();
        live.read_phys(paddr, &mut b).unwrap();
        assert_eq!(a, b, "physical {paddr:#x}");
    }
    // Past the last segment: the same error from both.
    let end = mapped
        .segments()
        .iter()
        .map(|s| s.paddr + s.memsz)
        .max()
        .unwrap();
    let mut one = [0u8; 8];
    assert_eq!(
        live.read_phys(end, &mut one).unwrap_err().to_string(),
        mapped.read_phys(end, &mut one).unwrap_err().to_string()
    );
}

#[test]
fn a_live_file_that_is_not_an_elf_core_fails_with_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kcore");
    std::fs::write(&path, b"KDUMP   not live memory").unwrap();
    match Dump::open_live(&path) {
        Err(Error::Malformed {
            offset: 0, what, ..
        }) => assert!(what.contains("not ELF"), "{what}"),
        other => panic!("{other:?}"),
    }
    // An ELF header whose program headers claim to end far away is not read that far.
    let mut elf = vec![0u8; 64];
    elf[..4].copy_from_slice(b"\x7fELF");
    elf[32..40].copy_from_slice(&(1u64 << 40).to_le_bytes());
    elf[56..58].copy_from_slice(&4u16.to_le_bytes());
    std::fs::write(&path, &elf).unwrap();
    match Dump::open_live(&path) {
        Err(Error::Malformed {
            offset: 32, what, ..
        }) => {
            assert!(what.contains("program headers"), "{what}")
        }
        other => panic!("{other:?}"),
    }
    match Dump::open_live(dir.path().join("absent")) {
        Err(Error::Io { what, .. }) => assert_eq!(what, "cannot open"),
        other => panic!("{other:?}"),
    }
}
