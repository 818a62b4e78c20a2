//! Editing real corpus dumps the way damage or a hostile kernel would.

use std::io::Read;

use kcrash_harness::corpus;

/// A corpus file, gunzipped.
pub fn inflated(relative: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(corpus::file(relative)).expect("corpus file"))
        .read_to_end(&mut bytes)
        .expect("gunzip");
    bytes
}

/// Every place `from` stands in `bytes` now holds `to` (of the same length).
pub fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) -> usize {
    assert_eq!(from.len(), to.len());
    let mut n = 0;
    let mut at = 0;
    while let Some(i) = bytes[at..].windows(from.len()).position(|w| w == from) {
        bytes[at + i..at + i + to.len()].copy_from_slice(to);
        at += i + to.len();
        n += 1;
    }
    n
}

/// Where `addr` of the bare kernel's image is in its ELF dump: the image is mapped linearly, so
/// its distance from a known string is the same in the file.
pub fn file_offset(bytes: &[u8], known: &[u8], known_addr: u64, addr: u64) -> usize {
    let at = bytes
        .windows(known.len())
        .position(|w| w == known)
        .expect("the known string is in the dump");
    usize::try_from(at as i64 + (addr as i64).wrapping_sub(known_addr as i64)).unwrap()
}

/// Replaces word `index` of the record whose eight words are `words`, wherever the dump holds it.
pub fn set_word(bytes: &mut [u8], words: &[u64], index: usize, value: u64) {
    let raw = |w: &[u64]| w.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
    let mut edited = words.to_vec();
    edited[index] = value;
    assert_eq!(replace_all(bytes, &raw(words), &raw(&edited)), 1);
}

/// Where physical address `paddr` is in the ELF dump's file, from its PT_LOAD headers.
pub fn physical_offset(bytes: &[u8], paddr: u64) -> usize {
    let u16_at = |o: usize| u16::from_le_bytes(bytes[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    (0..phnum)
        .map(|i| phoff + i * phentsize)
        .filter(|&h| u32::from_le_bytes(bytes[h..h + 4].try_into().unwrap()) == 1)
        .find_map(|h| {
            let (offset, start, filesz) = (u64_at(h + 8), u64_at(h + 24), u64_at(h + 32));
            (start..start + filesz)
                .contains(&paddr)
                .then(|| (offset + paddr - start) as usize)
        })
        .expect("a PT_LOAD holds the physical address")
}

/// Splits the ELF dump's PT_LOAD that holds file offset `at` around the page holding it, so that
/// page is no longer in the dump (as a dump that left a page out). The program headers move to
/// the end of the file to make room for the extra one.
pub fn drop_page(bytes: &mut Vec<u8>, at: usize) {
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let (phoff, phentsize, phnum) = (
        u64_at(bytes, 0x20) as usize,
        u16_at(bytes, 0x36),
        u16_at(bytes, 0x38),
    );
    let mut headers: Vec<Vec<u8>> = (0..phnum)
        .map(|i| bytes[phoff + i * phentsize..phoff + (i + 1) * phentsize].to_vec())
        .collect();
    let i = headers
        .iter()
        .position(|h| {
            let (offset, filesz) = (u64_at(h, 8) as usize, u64_at(h, 32) as usize);
            u32::from_le_bytes(h[..4].try_into().unwrap()) == 1
                && (offset..offset + filesz).contains(&at)
        })
        .expect("a PT_LOAD holds the offset");
    let h = headers[i].clone();
    let (offset, paddr, size) = (u64_at(&h, 8), u64_at(&h, 24), u64_at(&h, 32));
    let page = (paddr + (at as u64 - offset)) & !0xfff;
    let set = |h: &mut Vec<u8>, o: usize, v: u64| h[o..o + 8].copy_from_slice(&v.to_le_bytes());
    let mut low = h.clone();
    for field in [32, 40] {
        set(&mut low, field, page - paddr);
    }
    let mut high = h;
    let skip = page + 0x1000 - paddr;
    set(&mut high, 8, offset + skip);
    for field in [16, 24] {
        let moved = u64_at(&high, field) + skip;
        set(&mut high, field, moved);
    }
    for field in [32, 40] {
        set(&mut high, field, size - skip);
    }
    headers.splice(i..=i, [low, high]);
    let new_phoff = bytes.len() as u64;
    bytes.extend(headers.concat());
    bytes[0x20..0x28].copy_from_slice(&new_phoff.to_le_bytes());
    bytes[0x38..0x3a].copy_from_slice(&(headers.len() as u16).to_le_bytes());
}
