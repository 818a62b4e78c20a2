//! Small dumps built by hand for the malformed-input tests: ELF cores with their program headers
//! and notes, kdump-compressed files with their pages in each compression, and flattened
//! streams, plus the check that opening one fails naming the offset.

#![allow(dead_code)] // each test binary uses its own subset

use std::io::Write;

use dumpfmt::{Dump, Error};

/// What the dumps built here are called in errors.
pub const NAME: &str = "broken-dump";

/// Opens `bytes` from memory, as a file of that content opens.
pub fn open(bytes: &[u8]) -> Result<Dump, Error> {
    Dump::from_bytes(NAME, bytes.to_vec())
}

/// Open must fail with a format error at `offset` whose text contains `words`.
pub fn open_fails(bytes: &[u8], offset: u64, words: &str) {
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

pub struct Ph {
    pub p_type: u32,
    pub offset: u64,
    pub vaddr: u64,
    pub paddr: u64,
    pub filesz: u64,
    pub memsz: u64,
}

pub fn load(offset: u64, paddr: u64, filesz: u64, memsz: u64) -> Ph {
    Ph {
        p_type: 1,
        offset,
        vaddr: paddr,
        paddr,
        filesz,
        memsz,
    }
}

pub const PH_START: u64 = 64;

pub fn payload_at(phnum: usize) -> u64 {
    PH_START + 56 * phnum as u64
}

/// ELF64 x86_64 core: header, program headers at 64, then `payload`.
pub fn elf(phdrs: &[Ph], payload: &[u8]) -> Vec<u8> {
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

pub fn note(name: &str, n_type: u32, desc: &[u8]) -> Vec<u8> {
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

pub const BS: usize = 4096;

pub const PAGES: u64 = 16;

/// A plain kdump file: header version 6, one sub-header block, a 2-block bitmap pair for 16
/// pages, descriptors, then data. `pages`: (pfn, flags, stored bytes).
pub fn kdump(pages: &[(u64, u32, Vec<u8>)]) -> Vec<u8> {
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

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// One gzip stream of `bytes` followed by `zeros` MiB of zeros: a real dump with a bomb behind
/// it, small on disk.
pub fn gzip_with_zeros(bytes: &[u8], zeros: usize) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    let mib = vec![0u8; 1 << 20];
    for _ in 0..zeros {
        e.write_all(&mib).unwrap();
    }
    e.finish().unwrap()
}

/// Bytes this thread has handed to write(2) so far (`wchar` of /proc/thread-self/io: tests run
/// side by side in one process).
pub fn written_by_this_thread() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").expect("/proc/thread-self/io");
    io.lines()
        .find_map(|l| l.strip_prefix("wchar: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("wchar")
}

pub fn zlib(page: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(page).unwrap();
    e.finish().unwrap()
}

pub fn kdump_read(bytes: &[u8], paddr: u64, len: usize) -> Result<Vec<u8>, Error> {
    let dump = open(bytes)?;
    let mut buf = vec![0u8; len];
    dump.read_phys(paddr, &mut buf).map(|_| buf)
}

/// An LZO1X stream that writes `bytes` and then repeats their last 64: a literal run (op 0 with
/// an extended length: zero bytes add 255 each, the last byte the rest, 18 + 255·n + last), an
/// M3 match (op 32, extended length 31 + 31 + 2 = 64, distance 64), and the end marker.
pub fn lzo_page(bytes: &[u8]) -> Vec<u8> {
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

pub fn snappy(bytes: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(bytes).unwrap()
}

/// libzstd, as makedumpfile calls it (`ZSTD_compressCCtx`, level 1).
pub fn zstd(bytes: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(bytes, 1).unwrap()
}

pub fn flatten(records: &[(i64, &[u8])], end: bool) -> Vec<u8> {
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
