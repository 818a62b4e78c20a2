//! Broken kdump-compressed files, built small by hand: headers, page descriptors and pages in every
//! compression. Each must give an error naming the file, the offset and what is wrong — never a
//! panic, never a huge allocation. The builders are in tests/common/broken.rs.

#[path = "common/broken.rs"]
mod broken;

use broken::*;
use dumpfmt::{Error, MissingReason};

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

/// utsname.machine (at 272) decides the page-table format and register layout: a machine kcrash
/// does not read is refused; QEMU's "Unknown" is settled by the dump's contents.
#[test]
fn kdump_machine_names() {
    let named = |name: &[u8]| {
        let mut b = kdump(&[]);
        b[272..272 + 65].fill(0);
        b[272..272 + name.len()].copy_from_slice(name);
        b
    };
    open_fails(
        &named(b"ppc64le"),
        272,
        "\"ppc64le\" is neither x86_64 nor aarch64",
    );
    for (name, machine) in [
        (&b"aarch64"[..], dumpfmt::Machine::Aarch64),
        (b"x86_64", dumpfmt::Machine::X86_64),
        (b"Unknown", dumpfmt::Machine::X86_64),
    ] {
        let dump = dumpfmt::Dump::from_bytes("named", named(name)).unwrap();
        assert_eq!(dump.machine(), machine, "{name:?}");
    }
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
