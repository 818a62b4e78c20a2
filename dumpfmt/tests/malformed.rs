//! Broken inputs, built small by hand: every one must give an error naming the file, the offset
//! and what is wrong — never a panic, never a huge allocation.

#[path = "common/exercise.rs"]
mod exercise;

use std::io::Write;

use dumpfmt::{Dump, Error, MissingReason};

/// What the dumps built here are called in errors.
const NAME: &str = "broken-dump";

fn open(bytes: &[u8]) -> Result<Dump, Error> {
    Dump::from_bytes(NAME, bytes.to_vec())
}

/// Open must fail with a format error at `offset` whose text contains `words`.
fn open_fails(bytes: &[u8], offset: u64, words: &str) {
    match open(bytes) {
        Err(e @ Error::Malformed { offset: at, .. }) => {
            let text = e.to_string();
            assert!(text.starts_with(NAME), "{text}");
            assert_eq!(at, offset, "{text}");
            assert!(text.contains(words), "{text:?} lacks {words:?}");
        }
        Err(e) => panic!("wrong error kind: {e}"),
        Ok(d) => panic!("opened {d:?}"),
    }
}

// ---- ELF ---------------------------------------------------------------------------------

struct Ph {
    p_type: u32,
    offset: u64,
    vaddr: u64,
    paddr: u64,
    filesz: u64,
    memsz: u64,
}

fn load(offset: u64, paddr: u64, filesz: u64, memsz: u64) -> Ph {
    Ph {
        p_type: 1,
        offset,
        vaddr: paddr,
        paddr,
        filesz,
        memsz,
    }
}

const PH_START: u64 = 64;

fn payload_at(phnum: usize) -> u64 {
    PH_START + 56 * phnum as u64
}

/// ELF64 x86_64 core: header, program headers at 64, then `payload`.
fn elf(phdrs: &[Ph], payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2;
    b[5] = 1;
    b[6] = 1;
    b[16..18].copy_from_slice(&4u16.to_le_bytes());
    b[18..20].copy_from_slice(&62u16.to_le_bytes());
    b[32..40].copy_from_slice(&PH_START.to_le_bytes());
    b[52..54].copy_from_slice(&64u16.to_le_bytes());
    b[54..56].copy_from_slice(&56u16.to_le_bytes());
    b[56..58].copy_from_slice(&(phdrs.len() as u16).to_le_bytes());
    for p in phdrs {
        let mut h = [0u8; 56];
        h[0..4].copy_from_slice(&p.p_type.to_le_bytes());
        for (at, v) in [
            (8, p.offset),
            (16, p.vaddr),
            (24, p.paddr),
            (32, p.filesz),
            (40, p.memsz),
        ] {
            h[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&h);
    }
    b.extend_from_slice(payload);
    b
}

fn note(name: &str, n_type: u32, desc: &[u8]) -> Vec<u8> {
    let mut n = Vec::new();
    n.extend_from_slice(&(name.len() as u32 + 1).to_le_bytes());
    n.extend_from_slice(&(desc.len() as u32).to_le_bytes());
    n.extend_from_slice(&n_type.to_le_bytes());
    n.extend_from_slice(name.as_bytes());
    n.push(0);
    while n.len() % 4 != 0 {
        n.push(0);
    }
    n.extend_from_slice(desc);
    while n.len() % 4 != 0 {
        n.push(0);
    }
    n
}

fn note_segment(notes: &[u8]) -> Vec<u8> {
    elf(
        &[Ph {
            p_type: 4,
            offset: payload_at(1),
            vaddr: 0,
            paddr: 0,
            filesz: notes.len() as u64,
            memsz: 0,
        }],
        notes,
    )
}

#[test]
fn not_a_dump() {
    open_fails(b"", 0, "not a recognised dump");
    open_fails(b"hello, world", 0, "not a recognised dump");
    open_fails(b"DISKDUMP\0\0\0\0", 0, "old diskdump");
    open_fails(&gzip(&gzip(&elf(&[], &[]))), 0, "gzip inside gzip");
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn elf_header_problems() {
    open_fails(b"\x7fELF\x01\x01\x01", 4, "64-bit");
    open_fails(b"\x7fELF\x02\x02\x01", 5, "little-endian");
    open_fails(b"\x7fELF\x02\x01\x01\0\0\0", 16, "e_type");
    let mut exec = elf(&[], &[]);
    exec[16] = 2;
    open_fails(&exec, 16, "not ET_CORE");
    let mut arm = elf(&[], &[]);
    arm[18] = 40;
    open_fails(&arm, 18, "not x86_64");
}

#[test]
fn program_headers_past_the_end() {
    let mut b = elf(&[], &[]);
    b[56..58].copy_from_slice(&1000u16.to_le_bytes());
    open_fails(&b, 32, "1000 program headers");
    // PN_XNUM with the section header missing, then with an absurd count in sh_info.
    let mut b = elf(&[], &[]);
    b[56..58].copy_from_slice(&0xffffu16.to_le_bytes());
    b[40..48].copy_from_slice(&0x1000u64.to_le_bytes());
    open_fails(&b, 0x1000 + 44, "PN_XNUM");
    let mut sh = [0u8; 64];
    sh[44..48].copy_from_slice(&u32::MAX.to_le_bytes());
    let shoff = b.len() as u64;
    b[40..48].copy_from_slice(&shoff.to_le_bytes());
    b.extend_from_slice(&sh);
    open_fails(&b, 32, "4294967295 program headers");
}

#[test]
fn bad_segments() {
    open_fails(
        &elf(&[load(0, 0, 0x2000, 0x1000)], &[]),
        PH_START,
        "exceeds p_memsz",
    );
    open_fails(
        &elf(&[load(u64::MAX - 4, 0, 0x10, 0x10)], &[]),
        PH_START,
        "overflows",
    );
    open_fails(
        &elf(&[load(0, u64::MAX - 4, 0x10, 0x10)], &[]),
        PH_START,
        "overflows",
    );
    let notes = Ph {
        p_type: 4,
        offset: 0x10_0000,
        vaddr: 0,
        paddr: 0,
        filesz: 0x100,
        memsz: 0,
    };
    open_fails(&elf(&[notes], &[]), PH_START, "PT_NOTE");
    // Two segments (after a PT_NOTE) giving physical 0x1800..0x2000 different file bytes.
    let data = payload_at(3);
    let empty_notes = Ph {
        p_type: 4,
        offset: data,
        vaddr: 0,
        paddr: 0,
        filesz: 0,
        memsz: 0,
    };
    let overlap = elf(
        &[
            empty_notes,
            load(data, 0x1000, 0x1000, 0x1000),
            load(data + 0x2000, 0x1800, 0x1000, 0x1000),
        ],
        &[0; 0x3000],
    );
    open_fails(
        &overlap,
        PH_START + 2 * 56,
        "overlaps the one at header offset 0x78",
    );
    // The same bytes under two segments (QEMU paging=true does this) are fine.
    let same = elf(
        &[
            load(data, 0x1000, 0x1000, 0x1000),
            load(data + 0x800, 0x1800, 0x800, 0x800),
        ],
        &[0; 0x1000],
    );
    open(&same).unwrap();
}

#[test]
fn segment_data_past_the_end_reads_as_truncated_at_the_exact_address() {
    let data = payload_at(1);
    let bytes = elf(&[load(data, 0x10_0000, 0x2000, 0x2000)], &[0xaa; 0x1800]);
    let dump = open(&bytes).unwrap();
    let mut buf = [0u8; 0x100];
    dump.read_phys(0x10_1700, &mut buf).unwrap();
    assert_eq!(buf, [0xaa; 0x100]);
    match dump.read_phys(0x10_1700, &mut [0u8; 0x200]) {
        Err(Error::Phys {
            addr,
            reason:
                MissingReason::Truncated {
                    offset,
                    incomplete_flag: false,
                },
            ..
        }) => {
            assert_eq!((addr, offset), (0x10_1800, data + 0x1800));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn elf_incomplete_flag_is_reported_with_truncation() {
    let data = payload_at(1);
    let mut bytes = elf(&[load(data, 0x10_0000, 0x2000, 0x2000)], &[0xaa; 0x1000]);
    bytes[48] = 1; // e_flags: makedumpfile's DUMP_ELF_INCOMPLETE
    let dump = open(&bytes).unwrap();
    assert!(dump.is_incomplete());
    let err = dump.read_phys(0x10_0ff0, &mut [0u8; 0x20]).unwrap_err();
    assert!(matches!(
        err,
        Error::Phys {
            addr: 0x10_1000,
            reason: MissingReason::Truncated {
                incomplete_flag: true,
                ..
            },
            ..
        }
    ));
    assert!(
        err.to_string().contains("the dump is marked incomplete"),
        "{err}"
    );
}

#[test]
fn memsz_beyond_filesz_is_not_in_dump() {
    let data = payload_at(1);
    let bytes = elf(&[load(data, 0x10_0000, 0x10, 0x2000)], &[0x55; 0x10]);
    let dump = open(&bytes).unwrap();
    let mut buf = [0xffu8; 0x10];
    dump.read_phys(0x10_0000, &mut buf).unwrap();
    assert_eq!(buf, [0x55; 0x10]);
    for at in [0x10_0008, 0x10_0010, 0x10_1000] {
        match dump.read_phys(at, &mut [0u8; 0x10]) {
            Err(Error::Phys {
                addr,
                reason: MissingReason::Excluded,
                ..
            }) => assert_eq!(addr, at.max(0x10_0010)),
            other => panic!("{at:#x}: {other:?}"),
        }
    }
    // Past p_memsz there is no memory at all: a different answer.
    assert!(matches!(
        dump.read_phys(0x10_2000, &mut [0u8; 2]),
        Err(Error::Phys {
            addr: 0x10_2000,
            reason: MissingReason::Unmapped,
            ..
        })
    ));
}

#[test]
fn process_core_segment_tail_is_not_in_dump_rather_than_zero() {
    // Two segments at p_paddr 0: a process core. The second stores one page of two.
    let data = payload_at(2);
    let seg = |offset, vaddr, filesz| Ph {
        p_type: 1,
        offset,
        vaddr,
        paddr: 0,
        filesz,
        memsz: 0x2000,
    };
    let bytes = elf(
        &[
            seg(data, 0x40_0000, 0x2000),
            seg(data + 0x2000, 0x7f00_0000, 0x1000),
        ],
        &[0x77; 0x3000],
    );
    let dump = open(&bytes).unwrap();
    assert!(dump.is_process_core());
    let mut buf = [0u8; 0x10];
    assert_eq!(
        dump.read_dump_mapping(0x7f00_0ff8, &mut buf[..8]).unwrap(),
        8
    );
    match dump.read_dump_mapping(0x7f00_0ff8, &mut buf) {
        Err(Error::Virt {
            addr: 0x7f00_1000,
            reason:
                dumpfmt::VirtReason::Mapping {
                    reason: MissingReason::Excluded,
                },
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
}

fn notes_error(notes: &[u8]) -> String {
    let dump = open(&note_segment(notes)).unwrap();
    let errors: Vec<Error> = dump.notes().filter_map(Result::err).collect();
    assert_eq!(errors.len(), 1);
    errors[0].to_string()
}

#[test]
fn note_sizes_that_overflow_or_overrun() {
    let at = payload_at(1);
    let mut n = note("CORE", 1, &[0; 8]);
    n[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = notes_error(&n);
    assert!(
        e.contains(&format!("offset {at:#x}")) && e.contains("descriptor 4294967295"),
        "{e}"
    );
    let mut n = note("CORE", 1, &[0; 8]);
    n[0..4].copy_from_slice(&(u32::MAX - 1).to_le_bytes());
    let e = notes_error(&n);
    assert!(e.contains("run past the end of the note area"), "{e}");
    // A good note, then a header cut short.
    let mut n = note("CORE", 6, &[0; 16]);
    n.extend_from_slice(&[1, 0, 0, 0, 8]);
    let e = notes_error(&n);
    assert!(e.contains(&format!("offset {:#x}", at + 36)), "{e}");
}

#[test]
fn short_or_oversized_note_descriptors() {
    let notes = [
        note("CORE", 1, &[0; 100]),
        note("QEMU", 0, &[0; 8]),
        note("CORE", 0x4649_4c45, &{
            let mut d = vec![0u8; 40];
            d[..8].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
            d
        }),
    ]
    .concat();
    let dump = open(&note_segment(&notes)).unwrap();
    let e = dump.prstatus().next().unwrap().unwrap_err().to_string();
    assert!(
        e.contains("NT_PRSTATUS note descriptor is 100 bytes, need at least 336"),
        "{e}"
    );
    let e = dump
        .qemu_cpu_states()
        .next()
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(e.contains("QEMU CPU state"), "{e}");
    let file = dump
        .notes()
        .map(Result::unwrap)
        .find(|n| n.n_type == 0x4649_4c45)
        .unwrap();
    let e = file.file_mappings().unwrap_err().to_string();
    assert!(e.contains("entries do not fit"), "{e}");
}

// ---- kdump -------------------------------------------------------------------------------

const BS: usize = 4096;
const PAGES: u64 = 16;

/// A plain kdump file: header version 6, one sub-header block, a 2-block bitmap pair for 16
/// pages, descriptors, then data. `pages`: (pfn, flags, stored bytes).
fn kdump(pages: &[(u64, u32, Vec<u8>)]) -> Vec<u8> {
    let mut b = vec![0u8; 4 * BS];
    b[..8].copy_from_slice(b"KDUMP   ");
    b[8..12].copy_from_slice(&6i32.to_le_bytes());
    b[428..432].copy_from_slice(&(BS as i32).to_le_bytes());
    b[432..436].copy_from_slice(&1i32.to_le_bytes());
    b[436..440].copy_from_slice(&2u32.to_le_bytes());
    b[440..444].copy_from_slice(&(PAGES as u32).to_le_bytes());
    b[460..464].copy_from_slice(&1i32.to_le_bytes());
    b[BS + 96..BS + 104].copy_from_slice(&PAGES.to_le_bytes());
    for pfn in 0..PAGES {
        b[2 * BS + (pfn / 8) as usize] |= 1 << (pfn % 8); // every page exists
    }
    let desc_start = 4 * BS;
    let mut data_at = (desc_start + 24 * pages.len()) as u64;
    let mut descs = Vec::new();
    let mut data = Vec::new();
    for (pfn, flags, stored) in pages {
        b[3 * BS + (pfn / 8) as usize] |= 1 << (pfn % 8);
        descs.extend_from_slice(&(data_at as i64).to_le_bytes());
        descs.extend_from_slice(&(stored.len() as u32).to_le_bytes());
        descs.extend_from_slice(&flags.to_le_bytes());
        descs.extend_from_slice(&0u64.to_le_bytes());
        data.extend_from_slice(stored);
        data_at += stored.len() as u64;
    }
    b.extend_from_slice(&descs);
    b.extend_from_slice(&data);
    b
}

fn zlib(page: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(page).unwrap();
    e.finish().unwrap()
}

fn kdump_read(bytes: &[u8], paddr: u64, len: usize) -> Result<Vec<u8>, Error> {
    let dump = open(bytes)?;
    let mut buf = vec![0u8; len];
    dump.read_phys(paddr, &mut buf).map(|_| buf)
}

#[test]
fn kdump_header_problems() {
    let good = kdump(&[]);
    open_fails(&good[..100], 100, "disk_dump_header");
    let mut b = good.clone();
    b[428..432].copy_from_slice(&3000i32.to_le_bytes());
    open_fails(&b, 428, "block_size 3000");
    let mut b = good.clone();
    b[428..432].copy_from_slice(&(1i32 << 30).to_le_bytes());
    open_fails(&b, 428, "block_size");
    let mut b = good.clone();
    b[432..436].copy_from_slice(&(-1i32).to_le_bytes());
    open_fails(&b, 432, "sub_hdr_size -1");
    let mut b = good.clone();
    b[436..440].copy_from_slice(&u32::MAX.to_le_bytes());
    open_fails(&b, 2 * BS as u64, "bitmap");
    let mut b = good.clone();
    b[BS + 96..BS + 104].copy_from_slice(&u64::MAX.to_le_bytes());
    open_fails(&b, BS as u64 + 96, "max_mapnr");
    // The sub-header block is missing.
    open_fails(&good[..BS + 50], BS as u64 + 50, "kdump_sub_header");
    // VMCOREINFO said to be far past the end.
    let mut b = good;
    b[BS + 32..BS + 40].copy_from_slice(&(1i64 << 40).to_le_bytes());
    b[BS + 40..BS + 48].copy_from_slice(&100u64.to_le_bytes());
    open_fails(&b, 1 << 40, "VMCOREINFO");
}

#[test]
fn kdump_pages_good_and_bad() {
    let text: Vec<u8> = (0..BS).map(|i| b"kdump page "[i % 11]).collect();
    let mut garbage = zlib(&text);
    let mid = garbage.len() / 2;
    garbage[mid] ^= 0xff;
    garbage[mid + 1] ^= 0x55;
    let pages = [
        (1, 0, vec![0x11; BS]),        // raw
        (2, 1, zlib(&text)),           // zlib
        (3, 1, garbage),               // zlib, corrupt
        (4, 2, vec![0; 100]),          // lzo, garbage
        (5, 0x20, vec![0; 100]),       // zstd, garbage
        (6, 0, vec![0x22; 100]),       // raw but short
        (7, 1, vec![0; BS + 1]),       // "compressed" larger than a page
        (8, 1, zlib(&text[..BS / 2])), // inflates to half a page
    ];
    let b = kdump(&pages);
    assert_eq!(kdump_read(&b, 0x1000, BS).unwrap(), vec![0x11; BS]);
    assert_eq!(kdump_read(&b, 0x2000, BS).unwrap(), text);
    // A read spanning both, unaligned.
    let both = kdump_read(&b, 0x1ff0, 0x20).unwrap();
    assert_eq!(&both[..0x10], &[0x11; 0x10]);
    assert_eq!(&both[0x10..], &text[..0x10]);

    let reason = |paddr: u64| match kdump_read(&b, paddr, 8) {
        Err(Error::Phys { addr, reason, .. }) => {
            assert_eq!(addr, paddr);
            reason
        }
        other => panic!("{other:?}"),
    };
    assert!(matches!(reason(0x3000), MissingReason::Corrupt { .. }));
    assert!(
        matches!(reason(0x4000), MissingReason::Corrupt { detail, .. } if detail.starts_with("lzo page for PFN 0x4: lzo input ends"))
    );
    assert!(
        matches!(reason(0x5000), MissingReason::Corrupt { detail, .. } if detail.contains("no zstd frame magic"))
    );
    assert!(
        matches!(reason(0x6000), MissingReason::Corrupt { detail, .. } if detail.contains("size 100"))
    );
    assert!(
        matches!(reason(0x7000), MissingReason::Corrupt { detail, .. } if detail.contains("more than a page"))
    );
    assert!(
        matches!(reason(0x8000), MissingReason::Corrupt { detail, .. } if detail.contains("2048 bytes"))
    );
    // Page 9 exists (bitmap 1) but was not dumped; page 16 is past max_mapnr.
    assert_eq!(reason(0x9000), MissingReason::Excluded);
    assert_eq!(reason(PAGES * 0x1000), MissingReason::Unmapped);
    // The message names the file, the address, the data's offset, the PFN and the reason.
    let text_err = kdump_read(&b, 0x3000, 8).unwrap_err().to_string();
    assert!(
        text_err.contains("physical address 0x3000: page data at file offset 0x")
            && text_err.contains("is corrupt: zlib page for PFN 0x3: zlib"),
        "{text_err}"
    );
}

/// An LZO1X stream that writes `bytes` and then repeats their last 64: a literal run (op 0 with
/// an extended length: zero bytes add 255 each, the last byte the rest, 18 + 255·n + last), an
/// M3 match (op 32, extended length 31 + 31 + 2 = 64, distance 64), and the end marker.
fn lzo_page(bytes: &[u8]) -> Vec<u8> {
    let mut left = bytes.len() - 18;
    let mut s = vec![0u8];
    while left > 255 {
        s.push(0);
        left -= 255;
    }
    s.push(left as u8);
    s.extend_from_slice(bytes);
    s.extend_from_slice(&[32, 31]);
    s.extend_from_slice(&((64u16 - 1) << 2).to_le_bytes());
    s.extend_from_slice(&[0x11, 0, 0]);
    s
}

fn snappy(bytes: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(bytes).unwrap()
}

/// libzstd, as makedumpfile calls it (`ZSTD_compressCCtx`, level 1).
fn zstd(bytes: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(bytes, 1).unwrap()
}

#[test]
fn kdump_lzo_snappy_zstd_pages_good_and_bad() {
    let text: Vec<u8> = (0..BS).map(|i| b"lzo snappy zstd "[i % 16]).collect();
    let random: Vec<u8> = (0..BS as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut zstd_flipped = zstd(&text);
    let last = zstd_flipped.len() - 1;
    zstd_flipped[last] ^= 0x40;
    let pages = [
        (1, 2, lzo_page(&random[..BS - 64])),
        (2, 4, snappy(&text)),
        (3, 0x20, zstd(&text)),
        (4, 2, lzo_page(&random[..BS - 72])), // a page short
        (5, 2, lzo_page(&random[..BS - 64])[..BS / 2].to_vec()), // truncated
        (6, 4, snappy(&[&text[..], &text[..]].concat())), // claims two pages
        (7, 4, snappy(&text)[..20].to_vec()), // truncated
        (8, 0x20, zstd(&[0x5a; 2 * BS])),     // decodes to two pages
        (10, 0x20, zstd_flipped),             // damaged
        (11, 0x20, zstd(&text)[..30].to_vec()), // truncated
        (12, 0x60, zstd(&text)),              // two compression flags
        (13, 2, vec![0xff; 64]),              // garbage
    ];
    let b = kdump(&pages);
    let repeated = [&random[..BS - 64], &random[BS - 128..BS - 64]].concat();
    assert_eq!(kdump_read(&b, 0x1000, BS).unwrap(), repeated);
    assert_eq!(kdump_read(&b, 0x2000, BS).unwrap(), text);
    assert_eq!(kdump_read(&b, 0x3000, BS).unwrap(), text);
    let detail = |paddr: u64| match kdump_read(&b, paddr, 8) {
        Err(Error::Phys {
            addr,
            reason: MissingReason::Corrupt { detail, .. },
            ..
        }) => {
            assert_eq!(addr, paddr);
            detail
        }
        other => panic!("{paddr:#x}: {other:?}"),
    };
    let expect = [
        (
            0x4000,
            "lzo page for PFN 0x4: decompresses to 4088 bytes, not a whole page of 4096",
        ),
        (
            0x5000,
            "lzo page for PFN 0x5: lzo input ends inside the instruction at byte 0",
        ),
        (
            0x6000,
            "snappy page for PFN 0x6: snappy header says 8192 bytes, not a page of 4096",
        ),
        (0x7000, "snappy page for PFN 0x7: snappy: "),
        (
            0x8000,
            "zstd page for PFN 0x8: zstd: Destination buffer is too small",
        ),
        (0xa000, "zstd page for PFN 0xa: zstd"),
        (0xb000, "zstd page for PFN 0xb: zstd"),
        (
            0xc000,
            "PFN 0xc: page descriptor flags 0x60 name no single known compression",
        ),
        (0xd000, "lzo page for PFN 0xd: "),
    ];
    for (paddr, start) in expect {
        let d = detail(paddr);
        assert!(d.starts_with(start), "{paddr:#x}: {d}");
    }
}

#[test]
fn kdump_older_header_versions_and_split_files() {
    let pages = [(1, 0, vec![0x11; BS]), (2, 0, vec![0x22; BS])];
    // Version 5: no max_mapnr_64; the 32-bit header field is used.
    let mut v5 = kdump(&pages);
    v5[8..12].copy_from_slice(&5i32.to_le_bytes());
    v5[BS + 96..BS + 104].fill(0);
    assert_eq!(kdump_read(&v5, 0x2000, 8).unwrap(), [0x22; 8]);
    // Part of a split dump holding PFNs [1, 3): descriptors count from PFN 1.
    let mut split = kdump(&pages);
    split[BS + 12..BS + 16].copy_from_slice(&1i32.to_le_bytes());
    split[BS + 80..BS + 88].copy_from_slice(&1u64.to_le_bytes());
    split[BS + 88..BS + 96].copy_from_slice(&3u64.to_le_bytes());
    split[3 * BS] |= 1; // PFN 0 is dumped too, but in another part
    assert_eq!(kdump_read(&split, 0x1000, 8).unwrap(), [0x11; 8]);
    assert_eq!(kdump_read(&split, 0x2000, 8).unwrap(), [0x22; 8]);
    assert!(matches!(
        kdump_read(&split, 0, 8),
        Err(Error::Phys {
            reason: MissingReason::Unmapped,
            ..
        })
    ));
    split[BS + 88..BS + 96].copy_from_slice(&100u64.to_le_bytes());
    open_fails(&split, BS as u64 + 80, "split range");
}

#[test]
fn kdump_descriptor_problems() {
    let b = kdump(&[(1, 0, vec![0x11; BS])]);
    // Descriptor table cut off.
    let cut = &b[..4 * BS + 10];
    match kdump_read(cut, 0x1000, 8) {
        Err(Error::Phys {
            reason: MissingReason::Truncated { offset, .. },
            ..
        }) => assert_eq!(offset, cut.len() as u64),
        other => panic!("{other:?}"),
    }
    // Descriptor with data offset 0.
    let mut z = b.clone();
    z[4 * BS..4 * BS + 8].fill(0);
    assert!(matches!(
        kdump_read(&z, 0x1000, 8),
        Err(Error::Phys { reason: MissingReason::Corrupt { detail, .. }, .. }) if detail.contains("offset 0")
    ));
}

// ---- flattened ---------------------------------------------------------------------------

fn flatten(records: &[(i64, &[u8])], end: bool) -> Vec<u8> {
    let mut f = vec![0u8; 4096];
    f[..12].copy_from_slice(b"makedumpfile");
    f[16..24].copy_from_slice(&1i64.to_be_bytes());
    f[24..32].copy_from_slice(&1i64.to_be_bytes());
    for (offset, data) in records {
        f.extend_from_slice(&offset.to_be_bytes());
        f.extend_from_slice(&(data.len() as i64).to_be_bytes());
        f.extend_from_slice(data);
    }
    if end {
        f.extend_from_slice(&(-1i64).to_be_bytes());
        f.extend_from_slice(&(-1i64).to_be_bytes());
    }
    f
}

#[test]
fn flattened_records_reassemble_with_overrides() {
    let plain = kdump(&[(1, 0, vec![0x11; BS]), (2, 0, vec![0x22; BS])]);
    // Out of order, split at odd places, with an early bogus copy of page 2's data overridden.
    let data2 = plain.len() - BS;
    let records = [
        (data2 as i64, &[0xee; BS][..]),
        (0, &plain[..5000]),
        (5000, &plain[5000..data2 + 7]),
        (data2 as i64 + 7, &plain[data2 + 7..]),
    ];
    let f = flatten(&records, true);
    assert_eq!(kdump_read(&f, 0x2000, BS).unwrap(), vec![0x22; BS]);
    assert_eq!(
        kdump_read(&f, 0x1ffc, 8).unwrap(),
        [0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x22, 0x22]
    );
}

#[test]
fn flattened_problems() {
    open_fails(&flatten(&[], true)[..2000], 2000, "shorter than 4096");
    let mut f = flatten(&[], true);
    f[16..24].copy_from_slice(&2i64.to_be_bytes());
    open_fails(&f, 16, "type 2");
    let mut f = flatten(&[(0, &[1, 2, 3])], true);
    f[4096 + 8..4096 + 16].copy_from_slice(&(-5i64).to_be_bytes());
    open_fails(&f, 4096, "negative");
    // A record claiming an exabyte: nothing is allocated for it; the kdump header it was meant
    // to hold is then missing.
    let mut f = flatten(&[(0, &[0; 16])], false);
    f[4096 + 8..4096 + 16].copy_from_slice(&(i64::MAX).to_be_bytes());
    open_fails(&f, 16, "disk_dump_header");
}

#[test]
fn corrupt_gzip_names_the_file() {
    let e = open(b"\x1f\x8b\x08\0\0\0\0\0\0\x03garbage that is not deflate").unwrap_err();
    assert!(
        matches!(
            e,
            Error::Io {
                what: "cannot decompress gzip",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().starts_with(NAME));
}

// ---- mutations ---------------------------------------------------------------------------

/// Well-formed small dumps of each kind, then thousands of byte flips, overwrites with extreme
/// values and truncations of them: opening and reading must never panic.
#[test]
fn mutated_dumps_never_panic() {
    let text: Vec<u8> = (0..BS).map(|i| (i % 7) as u8 + b'a').collect();
    let plain = kdump(&[
        (1, 0, vec![0x11; BS]),
        (2, 1, zlib(&text)),
        (3, 1, zlib(&text)),
        (4, 2, lzo_page(&text[..BS - 64])),
        (5, 4, snappy(&text)),
        (6, 0x20, zstd(&text)),
    ]);
    let data = payload_at(3);
    let notes = [
        note("CORE", 1, &[0; 336]),
        note("QEMU", 0, &[0; 432]),
        note("VMCOREINFO", 0, b"SYMBOL(x)=10\nNUMBER(phys_base)=0\n"),
    ]
    .concat();
    let elf_dump = elf(
        &[
            Ph {
                p_type: 4,
                offset: data,
                vaddr: 0,
                paddr: 0,
                filesz: notes.len() as u64,
                memsz: 0,
            },
            load(data + notes.len() as u64, 0x1000, 0x100, 0x2000),
            Ph {
                p_type: 1,
                offset: data,
                vaddr: 0xffff_8880_0000_0000,
                paddr: 0x8000,
                filesz: 0x40,
                memsz: 0x40,
            },
        ],
        &[notes.clone(), vec![0x33; 0x100]].concat(),
    );
    let flat = flatten(&[(0, &plain[..5000]), (5000, &plain[5000..])], true);

    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for original in [&plain, &elf_dump, &flat] {
        for _ in 0..1500 {
            let mut m = original.clone();
            match next() % 4 {
                0 => {
                    let at = (next() % m.len() as u64) as usize;
                    m[at] ^= 1 << (next() % 8);
                }
                1 => {
                    // Extreme values over a header-ish field.
                    let at = (next() % (m.len().min(8192) as u64 - 8)) as usize;
                    let v = [u64::MAX, 0, i64::MAX as u64, 0x8000_0000, u64::MAX - 3]
                        [(next() % 5) as usize];
                    m[at..at + 8].copy_from_slice(&v.to_le_bytes());
                }
                2 => m.truncate((next() % m.len() as u64) as usize),
                _ => {
                    let at = (next() % m.len() as u64) as usize;
                    let end = (at + 64).min(m.len());
                    for b in &mut m[at..end] {
                        *b = next() as u8;
                    }
                }
            }
            if let Ok(dump) = open(&m) {
                exercise::exercise(&dump, &m[m.len().saturating_sub(128)..]);
            }
        }
    }
}
