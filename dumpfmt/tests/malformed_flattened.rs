//! Broken makedumpfile-flattened streams and gzip files, built small by hand. Each must give an
//! error naming the file, the offset and what is wrong — never a panic, never a huge allocation.
//! The builders are in tests/common/broken.rs.

#[path = "common/broken.rs"]
mod broken;

use broken::*;
use dumpfmt::Error;

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

/// A small gzip file of something that is no dump is refused after its first bytes: the
/// 256 MiB it would inflate to are never written out.
#[test]
fn gzip_of_no_dump_is_refused_before_it_is_inflated() {
    let small = gzip_with_zeros(b"hello, this is no dump", 256);
    assert!(small.len() < 2 << 20, "{} bytes", small.len());
    let before = written_by_this_thread();
    open_fails(&small, 0, "not a recognised dump");
    let written = written_by_this_thread() - before;
    assert!(written < 16 << 20, "{written} bytes written");
}

/// A gzipped dump whose headers claim more than any dump holds (an exabyte of segment, a kdump
/// of 2^32 pages) is refused at the field that claims it, before the 256 MiB of zeros behind
/// its headers are inflated.
#[test]
fn a_gzipped_dump_claiming_too_much_is_refused_before_it_is_inflated() {
    let elf_claim = elf(&[load(payload_at(1), 0, 1 << 60, 1 << 60)], &[]);
    let mut kdump_claim = kdump(&[]);
    kdump_claim[BS + 96..BS + 104].copy_from_slice(&(1u64 << 40).to_le_bytes());
    for (bytes, at) in [(elf_claim, PH_START), (kdump_claim, BS as u64 + 96)] {
        let bomb = gzip_with_zeros(&bytes, 256);
        let before = written_by_this_thread();
        open_fails(&bomb, at, "would end past 0x40000000000 bytes");
        let written = written_by_this_thread() - before;
        assert!(written < 16 << 20, "{written} bytes written");
    }
}
