//! Raw physical memory images (`Dump::open_raw`, `Dump::raw_from_bytes`): one physical range at
//! the address the caller gives, read byte for byte; everything outside it unmapped; gzip
//! inflated whole; the ranges that cannot be refused with the file's name. QEMU's own `pmemsave`
//! images are read against QEMU's ELF dump of the same guest in kcrash's `tests/raw_memory.rs`.

use std::io::Write;

use dumpfmt::{AddressSpace, Dump, Error, Format, MissingReason};

/// `len` bytes that differ from one address to the next.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn phys_error(e: Error) -> (u64, MissingReason) {
    match e {
        Error::Phys { addr, reason, .. } => (addr, reason),
        other => panic!("not a physical address error: {other}"),
    }
}

#[test]
fn the_file_is_memory_from_the_address_given() {
    let bytes = pattern(3 * 4096 + 5);
    let start = 0x10_0000;
    let dump = Dump::raw_from_bytes("mem.raw", bytes.clone(), start).unwrap();
    assert_eq!(dump.format(), Format::Raw);
    assert_eq!(
        dump.raw_range(),
        Some(start..start + bytes.len() as u64),
        "one range: the file"
    );
    let mut buf = vec![0u8; bytes.len()];
    dump.read_phys(start, &mut buf).unwrap();
    assert_eq!(buf, bytes);
    let mut word = [0u8; 8];
    dump.read_phys(start + 0x1ff9, &mut word).unwrap();
    assert_eq!(word, bytes[0x1ff9..0x2001], "across a page boundary");
    dump.read_phys(start - 1, &mut []).unwrap();
    // The last byte, and one past it.
    let last = start + bytes.len() as u64 - 1;
    let mut one = [0u8; 1];
    dump.read_phys(last, &mut one).unwrap();
    assert_eq!(one[0], *bytes.last().unwrap());
    let (addr, reason) = phys_error(dump.read_phys(last, &mut word).unwrap_err());
    assert_eq!((addr, reason), (last + 1, MissingReason::Unmapped));
    let (addr, reason) = phys_error(dump.read_phys(start - 4, &mut word).unwrap_err());
    assert_eq!((addr, reason), (start - 4, MissingReason::Unmapped));
    let (addr, _) = phys_error(dump.read_phys(0, &mut one).unwrap_err());
    assert_eq!(addr, 0);
    let e = dump.read_phys(u64::MAX, &mut one).unwrap_err().to_string();
    assert!(
        e.starts_with("mem.raw: physical address 0xffffffffffffffff: unmapped"),
        "{e}"
    );
}

#[test]
fn a_raw_image_has_nothing_but_memory() {
    let dump = Dump::raw_from_bytes("mem.raw", pattern(8192), 0).unwrap();
    assert_eq!(dump.notes().count(), 0);
    assert!(dump.vmcoreinfo().unwrap().is_none());
    assert!(dump.linux_info().unwrap().is_none());
    assert_eq!(dump.prstatus().count(), 0);
    assert_eq!(dump.qemu_cpu_states().count(), 0);
    assert!(dump.segments().is_empty() && dump.kdump_header().is_none());
    assert!(!dump.is_process_core() && !dump.is_incomplete() && !dump.was_gzipped());
    assert!(!dump.has_virtual_mappings() && dump.elf_machine().is_none());
    let mut buf = [0u8; 8];
    assert_eq!(dump.read_dump_mapping(0, &mut buf).unwrap(), 0);
    let space = AddressSpace::from_dump(&dump).unwrap();
    assert!(space.sources().is_empty(), "nothing to translate with");
    let e = space.read_u64(0xffff_ffff_8000_0000).unwrap_err();
    assert!(e.to_string().starts_with("mem.raw: virtual address"), "{e}");
}

/// Nothing is detected: bytes that begin like a dump or an image are memory.
#[test]
fn signatures_mean_nothing_in_raw_memory() {
    for head in [
        &b"\x7fELF\x02\x01\x01\0"[..],
        b"KDUMP   ",
        b"makedumpfile\0\0\0\0",
    ] {
        let mut bytes = head.to_vec();
        bytes.resize(4096, 0xaa);
        let dump = Dump::raw_from_bytes("mem.raw", bytes.clone(), 0x1000).unwrap();
        let mut buf = vec![0u8; 4096];
        dump.read_phys(0x1000, &mut buf).unwrap();
        assert_eq!(buf, bytes);
    }
}

#[test]
fn a_gzipped_image_is_inflated_whole() {
    let bytes = pattern(5 * 4096 + 17);
    let dump = Dump::raw_from_bytes("mem.raw.gz", gzip(&bytes), 0x2000).unwrap();
    assert!(dump.was_gzipped());
    assert_eq!(dump.gzip_stopped_at(), None);
    assert_eq!(dump.raw_range(), Some(0x2000..0x2000 + bytes.len() as u64));
    let mut buf = vec![0u8; bytes.len()];
    dump.read_phys(0x2000, &mut buf).unwrap();
    assert_eq!(buf, bytes);
    // Members one after another are one stream, as gzip -d reads them.
    let mut two = gzip(&bytes[..4096]);
    two.extend(gzip(&bytes[4096..]));
    let dump = Dump::raw_from_bytes("mem.raw.gz", two, 0).unwrap();
    assert_eq!(dump.raw_range(), Some(0..bytes.len() as u64));
    dump.read_phys(0, &mut buf).unwrap();
    assert_eq!(buf, bytes);
    // A cut stream is an error naming the file, not a shorter image.
    let mut cut = gzip(&bytes);
    cut.truncate(cut.len() / 2);
    let e = Dump::raw_from_bytes("cut.raw.gz", cut, 0).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cut.raw.gz: cannot decompress gzip"),
        "{e}"
    );
}

#[test]
fn ranges_that_cannot_be_are_refused() {
    let e = Dump::raw_from_bytes("empty.raw", Vec::new(), 0).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("empty.raw: at offset 0x0: empty file"),
        "{e}"
    );
    let e = Dump::raw_from_bytes("empty.raw.gz", gzip(b""), 0).unwrap_err();
    assert!(e.to_string().contains("empty file"), "{e}");
    let e = Dump::raw_from_bytes("high.raw", pattern(100), u64::MAX - 98).unwrap_err();
    assert!(
        e.to_string().starts_with("high.raw: at offset 0x0:") && e.to_string().contains("2^64"),
        "{e}"
    );
    // Up to the last address there is.
    let dump = Dump::raw_from_bytes("top.raw", pattern(100), u64::MAX - 100).unwrap();
    let mut last = [0u8; 1];
    dump.read_phys(u64::MAX - 1, &mut last).unwrap();
    assert_eq!(last[0], pattern(100)[99]);
    let (addr, reason) = phys_error(dump.read_phys(u64::MAX, &mut last).unwrap_err());
    assert_eq!((addr, reason), (u64::MAX, MissingReason::Unmapped));
}

#[test]
fn files_read_as_bytes_do_and_errors_name_them() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = pattern(4 * 4096);
    let plain = dir.path().join("guest.mem");
    std::fs::write(&plain, &bytes).unwrap();
    let gz = dir.path().join("guest.mem.gz");
    std::fs::write(&gz, gzip(&bytes)).unwrap();
    for path in [&plain, &gz] {
        let dump = Dump::open_raw(path, 0x8000).unwrap();
        assert_eq!(dump.path(), path.as_path());
        assert_eq!(dump.was_gzipped(), path == &gz);
        let mut buf = vec![0u8; bytes.len()];
        dump.read_phys(0x8000, &mut buf).unwrap();
        assert_eq!(buf, bytes);
    }
    let missing = dir.path().join("missing");
    let e = Dump::open_raw(&missing, 0x10).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{}: cannot open", missing.display())),
        "{e}"
    );
    let e = Dump::open_raw(dir.path(), 0).unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let e = Dump::open_raw(&empty, 0).unwrap_err();
    assert!(e.to_string().contains("empty file"), "{e}");
}
