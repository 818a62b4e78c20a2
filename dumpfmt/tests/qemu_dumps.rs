//! Real dumps from QEMU `dump-guest-memory` (ELF and kdump-zlib, which QEMU 7.2 writes
//! flattened) and `makedumpfile -R`, of a stopped guest whose RAM holds files this test wrote.
//! The oracle is those files: what the test put at a guest-physical address must read back.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use dumpfmt::translate::x86_64::X86_64;
use dumpfmt::{AddressSpace, Dump, Error, Format, LinearMap, MissingReason, Source, VirtReason};
use kcrash_harness::makedumpfile;

const RANDOM_AT: u64 = 0x10_0000;
const RANDOM_LEN: usize = 0x1_0000;
const TEXT_AT: u64 = 0x20_0000;
const TEXT_LEN: usize = 0x4_0000;
const TABLES_AT: u64 = 0x60_0000;
const ZERO_AT: u64 = 0x80_0000;
const RAM_END: u64 = 32 << 20;
const HOLE_AT: u64 = 0x300_0000;
/// Mapped by 4 KiB pages, in reverse order, onto the random pattern.
const VA_4K: u64 = 0xffff_8880_0000_0000;
/// Mapped by one 2 MiB page onto the text pattern.
const VA_2M: u64 = 0xffff_ffff_8000_0000;
/// CR3 value with a PCID in the low bits, which the walk must ignore.
const CR3: u64 = TABLES_AT | 0x5;

struct Dumps {
    _dir: tempfile::TempDir,
    elf: PathBuf,
    /// paging=true of a guest whose CPU never enabled paging.
    elf_paging: PathBuf,
    flat: PathBuf,
    kdump: PathBuf,
    random: Vec<u8>,
    text: Vec<u8>,
}

/// Page tables (all in one blob at TABLES_AT): PML4, then PDPT/PD/PT for VA_4K, then PDPT/PD
/// for VA_2M. NX and software bits are set on some entries to check they are masked.
fn page_tables() -> Vec<u8> {
    let mut blob = vec![0u8; 6 * 4096];
    let mut set = |table: u64, index: u64, entry: u64| {
        let at = (table * 4096 + index * 8) as usize;
        blob[at..at + 8].copy_from_slice(&entry.to_le_bytes());
    };
    let frame = |n: u64| TABLES_AT + n * 4096;
    let idx = |va: u64, shift: u32| (va >> shift) & 0x1ff;
    const NX: u64 = 1 << 63;
    set(0, idx(VA_4K, 39), frame(1) | 0x63);
    set(1, idx(VA_4K, 30), frame(2) | 0x63);
    set(2, idx(VA_4K, 21), frame(3) | 0x63 | (0x5 << 52));
    for page in 0..16u64 {
        let target = RANDOM_AT + (15 - page) * 4096;
        set(3, idx(VA_4K, 12) + page, target | 0x63 | NX);
    }
    set(0, idx(VA_2M, 39), frame(4) | 0x63);
    set(4, idx(VA_2M, 30), frame(5) | 0x63);
    set(5, idx(VA_2M, 21), TEXT_AT | 0x80 | 0x63 | NX);
    blob
}

fn dumps(test: &str) -> Option<&'static Dumps> {
    static DUMPS: OnceLock<Option<Dumps>> = OnceLock::new();
    common::shared_fixture(&DUMPS, test, || {
        common::tool("qemu-system-x86_64", "qemu-system-x86", "QEMU dump tests")?;
        common::tool("makedumpfile", "makedumpfile", "QEMU dump tests")?;
        let dir = tempfile::tempdir().expect("tempdir");
        let random = common::random_bytes(RANDOM_LEN, 0x5eed);
        let text = common::text_bytes(TEXT_LEN);
        let files = [
            ("random.bin", random.clone(), RANDOM_AT),
            ("text.bin", text.clone(), TEXT_AT),
            ("tables.bin", page_tables(), TABLES_AT),
        ];
        let mut loads = Vec::new();
        for (name, bytes, addr) in &files {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).expect("write pattern");
            loads.push((path, *addr));
        }
        let loads: Vec<(&Path, u64)> = loads.iter().map(|(p, a)| (p.as_path(), *a)).collect();
        let elf = dir.path().join("guest.elf");
        let elf_paging = dir.path().join("guest-paging.elf");
        let flat = dir.path().join("guest.kdump-flat");
        let kdump = dir.path().join("guest.kdump");
        {
            let mut guest = common::QemuGuest::start(dir.path(), (RAM_END >> 20) as u32, &loads);
            guest.dump(&elf, "elf", false);
            guest.dump(&elf_paging, "elf", true);
            guest.dump(&flat, "kdump-zlib", false);
        }
        makedumpfile::unflatten(&flat, &kdump).unwrap();
        Some(Dumps {
            _dir: dir,
            elf,
            elf_paging,
            flat,
            kdump,
            random,
            text,
        })
    })
}

fn read(dump: &Dump, paddr: u64, len: usize) -> Result<Vec<u8>, Error> {
    let mut buf = vec![0u8; len];
    dump.read_phys(paddr, &mut buf)?;
    Ok(buf)
}

fn expect_missing(result: Result<Vec<u8>, Error>, addr: u64, reason: MissingReason) {
    match result {
        Err(Error::Phys {
            addr: a, reason: r, ..
        }) => {
            assert_eq!((a, r), (addr, reason));
        }
        other => panic!("expected {reason:?} at {addr:#x}, got {other:?}"),
    }
}

/// What every format must agree on: the patterns, zeros, the end of RAM and a hole.
fn check_physical(dump: &Dump, d: &Dumps) {
    assert_eq!(
        read(dump, RANDOM_AT, RANDOM_LEN).unwrap(),
        d.random,
        "{}",
        dump.path().display()
    );
    assert_eq!(read(dump, TEXT_AT, TEXT_LEN).unwrap(), d.text);
    // Unaligned, crossing pages.
    assert_eq!(
        read(dump, RANDOM_AT + 0xffd, 0x1010).unwrap(),
        &d.random[0xffd..0x200d]
    );
    assert_eq!(read(dump, ZERO_AT, 8192).unwrap(), vec![0u8; 8192]);
    expect_missing(read(dump, HOLE_AT, 8), HOLE_AT, MissingReason::Unmapped);
    expect_missing(
        read(dump, RAM_END - 8, 16),
        RAM_END,
        MissingReason::Unmapped,
    );
}

fn check_translation(dump: &Dump, d: &Dumps) {
    let mut space = AddressSpace::new(dump);
    space.push(Source::PageTables {
        walker: Arc::new(X86_64::new(false)),
        root: CR3,
    });
    let reversed: Vec<u8> = d.random.chunks(4096).rev().flatten().copied().collect();
    let mut buf = vec![0u8; 0x3000];
    space.read_virt(VA_4K + 0x800, &mut buf).unwrap();
    assert_eq!(buf, &reversed[0x800..0x3800]);
    assert_eq!(
        space.translate(VA_4K + 0x1010).unwrap(),
        RANDOM_AT + 14 * 4096 + 0x10
    );
    let mut buf = vec![0u8; 5000];
    space.read_virt(VA_2M + 0x123, &mut buf).unwrap();
    assert_eq!(buf, &d.text[0x123..0x123 + 5000]);
    // Past the 16 mapped pages: the PT entry is empty.
    let err = space
        .read_virt(VA_4K + 16 * 4096 - 4, &mut [0u8; 8])
        .unwrap_err();
    match &err {
        Error::Virt {
            addr,
            reason: VirtReason::NotMapped { detail },
            ..
        } => {
            assert_eq!(*addr, VA_4K + 16 * 4096);
            assert!(detail.contains("PT entry"), "{err}");
        }
        other => panic!("{other:?}"),
    }

    // A caller's linear map comes after the page tables and covers what they do not.
    space.push(Source::Linear(LinearMap {
        virt_start: 0xffff_ffff_c000_0000,
        len: RAM_END,
        phys_start: 0,
    }));
    let mut buf = vec![0u8; 0x1800];
    space
        .read_virt(0xffff_ffff_c000_0000 + RANDOM_AT + 0xf00, &mut buf)
        .unwrap();
    assert_eq!(buf, &d.random[0xf00..0x2700]);
}

fn check_qemu_notes(dump: &Dump) {
    let cpus: Vec<_> = dump.qemu_cpu_states().collect::<Result<_, _>>().unwrap();
    assert_eq!(cpus.len(), 1);
    assert_eq!(cpus[0].version, 1);
    // CR0 after reset is 0x60000010 (CD, NW, ET: Intel SDM vol. 3 table 9-1); paging is off.
    assert_eq!(cpus[0].cr[0], 0x6000_0010);
    assert!(!cpus[0].paging());
    assert!(
        dump.vmcoreinfo().unwrap().is_none(),
        "no -device vmcoreinfo, so no VMCOREINFO"
    );
    // With paging off, the dump offers no translation of its own.
    assert!(AddressSpace::from_dump(dump).unwrap().sources().is_empty());
}

#[test]
fn qemu_elf() {
    let Some(d) = dumps("qemu_elf") else { return };
    let dump = Dump::open(&d.elf).unwrap();
    assert_eq!(dump.format(), Format::Elf);
    // QEMU writes EM_386 for a vCPU that never entered long mode.
    assert_eq!(dump.elf_machine(), Some(3));
    // paging=false: p_vaddr is a copy of p_paddr, not a mapping.
    assert!(!dump.has_virtual_mappings());
    assert!(!dump.is_incomplete());
    check_physical(&dump, d);
    check_translation(&dump, d);
    check_qemu_notes(&dump);

    // paging=true with paging off in the CPU degrades to identity mappings: still no mapping.
    let paging = Dump::open(&d.elf_paging).unwrap();
    assert!(!paging.has_virtual_mappings());
    assert!(paging.segments().iter().all(|s| s.vaddr == s.paddr));
    check_physical(&paging, d);
}

#[test]
fn qemu_kdump_flattened_and_reassembled() {
    let Some(d) = dumps("qemu_kdump_flattened_and_reassembled") else {
        return;
    };
    for (path, format) in [(&d.flat, Format::KdumpFlattened), (&d.kdump, Format::Kdump)] {
        let dump = Dump::open(path).unwrap();
        assert_eq!(dump.format(), format);
        let h = dump.kdump_header().unwrap();
        assert_eq!((h.block_size, h.nr_cpus), (4096, 1));
        // QEMU sets the header status to the compression in use.
        assert_eq!(h.status, 0x1);
        assert!(!dump.is_incomplete());
        check_physical(&dump, d);
        check_translation(&dump, d);
        check_qemu_notes(&dump);
    }
}

#[test]
fn qemu_elf_gzipped() {
    let Some(d) = dumps("qemu_elf_gzipped") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("guest.elf.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    enc.write_all(&std::fs::read(&d.elf).unwrap()).unwrap();
    enc.finish().unwrap();
    let dump = Dump::open(&gz).unwrap();
    assert!(dump.was_gzipped());
    assert_eq!(dump.format(), Format::Elf);
    check_physical(&dump, d);
}

/// Fields of the plain kdump file, read here independently of dumpfmt (layout from
/// makedumpfile's diskdump_mod.h).
struct KdumpLayout {
    block_size: u64,
    bitmap2: u64,
}

fn kdump_layout(bytes: &[u8]) -> KdumpLayout {
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap()) as u64;
    let block_size = u32_at(428);
    let sub_hdr_size = u32_at(432);
    let bitmap_blocks = u32_at(436);
    KdumpLayout {
        block_size,
        bitmap2: (1 + sub_hdr_size + bitmap_blocks / 2) * block_size,
    }
}

#[test]
fn kdump_excluded_page_is_not_a_hole_nor_zero() {
    let Some(d) = dumps("kdump_excluded_page_is_not_a_hole_nor_zero") else {
        return;
    };
    // QEMU never excludes pages. Clear the bitmap-2 bit of the last dumped page (the top of the
    // BIOS at 0xfffff000); no other page's descriptor index changes.
    let mut bytes = std::fs::read(&d.kdump).unwrap();
    let layout = kdump_layout(&bytes);
    let pfn = 0xfffffu64;
    let byte = (layout.bitmap2 + pfn / 8) as usize;
    assert_ne!(bytes[byte] & 0x80, 0, "the last BIOS page should be dumped");
    bytes[byte] &= !0x80;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("excluded.kdump");
    std::fs::write(&path, &bytes).unwrap();
    let dump = Dump::open(&path).unwrap();
    let addr = pfn * layout.block_size + 0x10;
    expect_missing(read(&dump, addr, 8), addr, MissingReason::Excluded);
    let err = read(&dump, addr, 8).unwrap_err().to_string();
    assert!(
        err.contains("not in dump") && err.contains("0xfffff010"),
        "{err}"
    );
    expect_missing(read(&dump, HOLE_AT, 8), HOLE_AT, MissingReason::Unmapped);
    check_physical(&dump, d);
}

#[test]
fn kdump_incomplete_flag_and_truncation_are_reported() {
    let Some(d) = dumps("kdump_incomplete_flag_and_truncation_are_reported") else {
        return;
    };
    let mut bytes = std::fs::read(&d.kdump).unwrap();
    bytes[424] |= 0x8; // DUMP_DH_COMPRESSED_INCOMPLETE
    let cut = bytes.len() - 16;
    bytes.truncate(cut);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("incomplete.kdump");
    std::fs::write(&path, &bytes).unwrap();
    let dump = Dump::open(&path).unwrap();
    assert!(dump.is_incomplete());
    // The last page written (the top BIOS page) lost its tail.
    match read(&dump, 0xffff_f000, 4096) {
        Err(Error::Phys {
            addr: 0xffff_f000,
            reason:
                MissingReason::Truncated {
                    incomplete_flag: true,
                    offset,
                },
            ..
        }) => {
            assert!(
                offset >= cut as u64 - 4096 && offset <= cut as u64,
                "offset {offset:#x}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Everything written before the cut still reads.
    check_physical(&dump, d);
}

#[test]
fn flattened_stream_cut_short_is_incomplete() {
    let Some(d) = dumps("flattened_stream_cut_short_is_incomplete") else {
        return;
    };
    let bytes = std::fs::read(&d.flat).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.flat");
    std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
    let dump = Dump::open(&path).unwrap();
    assert!(dump.is_incomplete());
    assert_eq!(read(&dump, RANDOM_AT, RANDOM_LEN).unwrap(), d.random);
    let err = read(&dump, 0xffff_f000, 4096).unwrap_err();
    assert!(
        matches!(err.missing_reason(), Some(MissingReason::Truncated { .. })),
        "{err}"
    );
}
