//! Broken ELF cores, built small by hand: headers, program headers, segments and notes. Each must
//! give an error naming the file, the offset and what is wrong — never a panic, never a huge
//! allocation. The builders are in tests/common/broken.rs.

#[path = "common/broken.rs"]
mod broken;

use broken::*;
use dumpfmt::{Error, MissingReason};

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

fn notes_error(notes: &[u8]) -> String {
    let dump = open(&note_segment(notes)).unwrap();
    let errors: Vec<Error> = dump.notes().filter_map(Result::err).collect();
    assert_eq!(errors.len(), 1);
    errors[0].to_string()
}

#[test]
fn not_a_dump() {
    open_fails(b"", 0, "not a recognised dump");
    open_fails(b"hello, world", 0, "not a recognised dump");
    open_fails(b"DISKDUMP\0\0\0\0", 0, "old diskdump");
    open_fails(&gzip(&gzip(&elf(&[], &[]))), 0, "gzip inside gzip");
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
    open_fails(&arm, 18, "neither x86_64 (62) nor AArch64 (183)");
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
        e.contains("NT_PRSTATUS (x86_64) note descriptor is 100 bytes, need at least 336"),
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
