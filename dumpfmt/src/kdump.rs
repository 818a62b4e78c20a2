//! kdump-compressed ("diskdump") files as written by makedumpfile and QEMU, plain or flattened.
//! Open parses the two headers and locates the bitmaps; the popcount index is built on the
//! first read; pages are found through bitmap 2 and their descriptor, and compressed pages
//! (zlib, lzo, snappy, zstd: see `codec`) are decompressed into a bounded cache. Raw pages
//! are copied straight from the map.

use std::sync::{Mutex, OnceLock};

use crate::bytes::{array, c_string, i32_le, i64_le, slice, u32_le, u64_le};
use crate::cache::PageCache;
use crate::claim::{Claim, INFLATED_MAX};
use crate::codec::{Codec, Decoders};
use crate::detect::KDUMP_SIGNATURE;
use crate::error::{Error, FileRef, MissingReason};
use crate::flat::FlatMap;
use crate::KdumpHeader;

const HEADER_SIZE: usize = 464;
const SUB_HEADER_SIZE: usize = 104;
const DESC_SIZE: u64 = 24;

const DUMP_DH_COMPRESSED_INCOMPLETE: u32 = 0x8;

/// PFNs per popcount-index entry: 64 bitmap bytes, so a lookup pops at most 8 words.
const RANK_BLOCK: u64 = 512;
/// Decompressed pages kept (8 MiB of 4 KiB pages).
const CACHE_PAGES: usize = 2048;

/// The bytes of the logical kdump file: the mapped file itself, or a flattened stream.
pub(crate) enum Image {
    Plain,
    Flat(FlatMap),
}

impl Image {
    fn slice<'a>(&self, data: &'a [u8], offset: u64, len: u64) -> Option<&'a [u8]> {
        match self {
            Image::Plain => slice(data, offset, len),
            Image::Flat(flat) => flat.slice(data, offset, len),
        }
    }

    /// Copy bytes; on failure, the first offset not in the file.
    fn read(&self, data: &[u8], offset: u64, buf: &mut [u8]) -> Result<(), u64> {
        match self {
            Image::Plain => {
                let src = slice(data, offset, buf.len() as u64)
                    .ok_or_else(|| offset.max(data.len() as u64))?;
                buf.copy_from_slice(src);
                Ok(())
            }
            Image::Flat(flat) => flat.read(data, offset, buf),
        }
    }

    fn covers(&self, data: &[u8], offset: u64, len: u64) -> bool {
        match self {
            Image::Plain => slice(data, offset, len).is_some(),
            Image::Flat(flat) => flat.covers(offset, len),
        }
    }

    fn header<const N: usize>(
        &self,
        data: &[u8],
        offset: u64,
        file: &FileRef,
        what: &str,
    ) -> Result<[u8; N], Error> {
        let mut buf = [0u8; N];
        self.read(data, offset, &mut buf).map_err(|missing| {
            file.malformed(
                missing,
                format!("{what} ({N} bytes at {offset:#x}) is cut off by the end of the file"),
            )
        })?;
        Ok(buf)
    }
}

/// A region of the logical file needed whole (bitmaps, notes): borrowed from the map when it is
/// contiguous there, otherwise (flattened, split across records) copied once.
pub(crate) struct Region {
    /// Offset in the logical kdump file.
    pub offset: u64,
    bytes: RegionBytes,
}

enum RegionBytes {
    /// `len` bytes at this position of the mapped file, resolved once at open.
    Mapped {
        at: u64,
        len: u64,
    },
    Copied(Vec<u8>),
}

impl Region {
    fn locate(
        image: &Image,
        data: &[u8],
        file: &FileRef,
        offset: u64,
        len: u64,
        what: &str,
    ) -> Result<Region, Error> {
        if !image.covers(data, offset, len) {
            return Err(file.malformed(
                offset,
                format!("{what} ({len:#x} bytes) runs past the end of the file"),
            ));
        }
        let bytes = match image.slice(data, offset, len) {
            Some(mapped) => RegionBytes::Mapped {
                at: mapped.as_ptr() as u64 - data.as_ptr() as u64,
                len,
            },
            None => {
                // Every byte is present (checked above), so this allocation is bounded by the file.
                let mut buf = vec![0u8; len as usize];
                image
                    .read(data, offset, &mut buf)
                    .map_err(|at| file.malformed(at, format!("{what} is cut off")))?;
                RegionBytes::Copied(buf)
            }
        };
        Ok(Region { offset, bytes })
    }

    pub fn bytes<'a>(&'a self, data: &'a [u8]) -> &'a [u8] {
        match &self.bytes {
            RegionBytes::Copied(copy) => copy,
            RegionBytes::Mapped { at, len } => slice(data, *at, *len).unwrap_or_default(),
        }
    }
}

/// block_size, checked: where the sub-header is, and the unit of everything after it.
fn block_size(h: &[u8], file: &FileRef) -> Result<u64, Error> {
    let raw = i32_le(h, 428).unwrap_or_default();
    u64::try_from(raw)
        .ok()
        .filter(|b| b.is_power_of_two() && (1024..=1 << 16).contains(b))
        .ok_or_else(|| {
            file.malformed(
                428,
                format!("block_size {raw} is not a power of two between 1 KiB and 64 KiB"),
            )
        })
}

/// Where the two headers put the bitmaps and the page descriptors, and how many pages there
/// can be.
struct Layout {
    bitmap_start: u64,
    bitmaps_len: u64,
    bitmap_blocks: u64,
    desc_base: u64,
    max_mapnr: u64,
}

impl Layout {
    /// From the disk_dump_header `h` and the kdump_sub_header `s`.
    fn of(h: &[u8], s: &[u8], block_size: u64, file: &FileRef) -> Result<Layout, Error> {
        let header_version = i32_le(h, 8).unwrap_or_default();
        let sub_hdr_size = i32_le(h, 432).unwrap_or_default();
        let bitmap_blocks = u64::from(u32_le(h, 436).unwrap_or_default());
        let sub_hdr_blocks = u64::try_from(sub_hdr_size)
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| {
                file.malformed(
                    432,
                    format!("sub_hdr_size {sub_hdr_size} is not a positive block count"),
                )
            })?;
        if bitmap_blocks == 0 {
            return Err(file.malformed(436, "bitmap_blocks is 0"));
        }
        let max_mapnr = if header_version >= 6 {
            u64_le(s, 96).unwrap_or_default()
        } else {
            u64::from(u32_le(h, 440).unwrap_or_default())
        };
        let bitmap_start = (1 + sub_hdr_blocks)
            .checked_mul(block_size)
            .ok_or_else(|| file.malformed(432, "sub_hdr_size overflows"))?;
        let bitmaps_len = bitmap_blocks
            .checked_mul(block_size)
            .ok_or_else(|| file.malformed(436, "bitmap_blocks overflows"))?;
        let desc_base = bitmap_start
            .checked_add(bitmaps_len)
            .ok_or_else(|| file.malformed(436, "bitmap_blocks overflows"))?;
        Ok(Layout {
            bitmap_start,
            bitmaps_len,
            bitmap_blocks,
            desc_base,
            max_mapnr,
        })
    }
}

/// Offsets in the sub-header of (offset, size) pairs of the optional regions, with the header
/// version that has each: VMCOREINFO, the note area, eraseinfo.
const REGIONS: [(u64, i32); 3] = [(32, 3), (48, 4), (64, 5)];

/// How far a gzipped kdump file's headers say it reaches: the descriptors and data of
/// max_mapnr pages (each at most a block: makedumpfile stores a page raw when compressing does
/// not shrink it) and the optional regions. `read(offset, len)`: the inflated bytes there,
/// `None` while they are not inflated yet.
pub(crate) fn claimed_len(
    read: &dyn Fn(u64, u64) -> Option<Vec<u8>>,
    file: &FileRef,
) -> Result<Claim, Error> {
    let Some(h) = read(0, HEADER_SIZE as u64) else {
        return Ok(Claim::Need(HEADER_SIZE as u64));
    };
    let block_size = block_size(&h, file)?;
    let Some(s) = read(block_size, SUB_HEADER_SIZE as u64) else {
        return Ok(Claim::Need(block_size + SUB_HEADER_SIZE as u64));
    };
    let layout = Layout::of(&h, &s, block_size, file)?;
    let header_version = i32_le(&h, 8).unwrap_or_default();
    let pages = layout
        .max_mapnr
        .checked_mul(DESC_SIZE + block_size)
        .and_then(|n| n.checked_add(layout.desc_base))
        .filter(|&end| end <= INFLATED_MAX)
        .ok_or_else(|| {
            let at = if header_version >= 6 { block_size + 96 } else { 440 };
            file.malformed(
                at,
                format!(
                    "max_mapnr {:#x} pages of {block_size} bytes would end past {INFLATED_MAX:#x} bytes",
                    layout.max_mapnr
                ),
            )
        })?;
    let mut end = pages;
    for (field, since) in REGIONS {
        let (offset, size) = (
            u64_le(&s, field).unwrap_or_default(),
            u64_le(&s, field + 8).unwrap_or_default(),
        );
        if header_version >= since && size > 0 && i64::try_from(offset).is_ok_and(|o| o > 0) {
            let region_end = offset.checked_add(size).filter(|&e| e <= INFLATED_MAX).ok_or_else(|| {
                file.malformed(
                    block_size + field,
                    format!("a region of {size:#x} bytes at {offset:#x} would end past {INFLATED_MAX:#x} bytes"),
                )
            })?;
            end = end.max(region_end);
        }
    }
    Ok(Claim::End(end))
}

pub(crate) struct Kdump {
    pub image: Image,
    pub header: KdumpHeader,
    /// First and one-past-last PFN held by this file (a part of a split dump holds a range).
    start_pfn: u64,
    end_pfn: u64,
    /// Bitmap 1 (memory exists) when the file has two bitmaps.
    bitmap1: Option<Region>,
    /// Bitmap 2 (page dumped).
    bitmap2: Region,
    desc_base: u64,
    pub notes: Option<Region>,
    pub vmcoreinfo: Option<Region>,
    rank: OnceLock<Vec<u64>>,
    pages: Mutex<Pages>,
}

/// Decompression state, kept together under one lock: the page cache, reusable decoders
/// (allocating zlib's window per page would dominate a cold read) and a buffer for compressed
/// pages split across flattened records.
struct Pages {
    cache: PageCache,
    decoders: Decoders,
    scratch: Vec<u8>,
}

impl Kdump {
    pub fn parse(data: &[u8], image: Image, file: &FileRef) -> Result<Kdump, Error> {
        let h: [u8; HEADER_SIZE] = image.header(data, 0, file, "disk_dump_header")?;
        if array::<8>(&h, 0) != Some(*KDUMP_SIGNATURE) {
            return Err(file.malformed(0, "kdump signature \"KDUMP   \" not found"));
        }
        let header_version = i32_le(&h, 8).unwrap_or_default();
        let status = u32_le(&h, 424).unwrap_or_default();
        let nr_cpus = i32_le(&h, 460).unwrap_or_default();
        let block_size = block_size(&h, file)?;
        let s: [u8; SUB_HEADER_SIZE] = image.header(data, block_size, file, "kdump_sub_header")?;
        let sub = |off: u64| u64_le(&s, off).unwrap_or_default();
        let phys_base = sub(0);
        let dump_level = i32_le(&s, 8).unwrap_or_default();
        let split = header_version >= 2 && i32_le(&s, 12).unwrap_or_default() != 0;
        let (start_pfn, end_pfn) = if header_version >= 6 {
            (sub(80), sub(88))
        } else {
            (sub(16), sub(24))
        };
        // The bitmaps come right after the sub-header blocks; they are checked against the file
        // before max_mapnr is trusted or anything is sized by it.
        let Layout {
            bitmap_start,
            bitmaps_len,
            bitmap_blocks,
            desc_base,
            max_mapnr,
        } = Layout::of(&h, &s, block_size, file)?;
        let one_bitmap = max_mapnr.div_ceil(8).div_ceil(block_size) * block_size;
        let two_bitmaps = bitmap_blocks * block_size >= 2 * one_bitmap;
        let bitmap_len = if two_bitmaps {
            bitmaps_len / 2
        } else {
            bitmaps_len
        };
        if max_mapnr > bitmap_len * 8 {
            let at = if header_version >= 6 {
                block_size + 96
            } else {
                440
            };
            return Err(file.malformed(
                at,
                format!("max_mapnr {max_mapnr:#x} needs more bitmap than the {bitmap_blocks} bitmap blocks hold"),
            ));
        }
        let (bitmap1, bitmap2) = if two_bitmaps {
            (
                Some(Region::locate(
                    &image,
                    data,
                    file,
                    bitmap_start,
                    bitmap_len,
                    "bitmap 1",
                )?),
                Region::locate(
                    &image,
                    data,
                    file,
                    bitmap_start + bitmap_len,
                    bitmap_len,
                    "bitmap 2",
                )?,
            )
        } else {
            (
                None,
                Region::locate(&image, data, file, bitmap_start, bitmap_len, "bitmap")?,
            )
        };
        let (start_pfn, end_pfn) = if split {
            if start_pfn > end_pfn || end_pfn > max_mapnr {
                return Err(file.malformed(block_size + 80, format!("split range [{start_pfn:#x}, {end_pfn:#x}) is outside max_mapnr {max_mapnr:#x}")));
            }
            (start_pfn, end_pfn)
        } else {
            (0, max_mapnr)
        };

        let optional_region =
            |min_version: i32, field: u64, what: &str| -> Result<Option<Region>, Error> {
                if header_version < min_version {
                    return Ok(None);
                }
                let offset = i64_le(&s, field).unwrap_or_default();
                let size = sub(field + 8);
                if offset <= 0 || size == 0 {
                    return Ok(None);
                }
                Region::locate(&image, data, file, offset as u64, size, what).map(Some)
            };
        let [(vmcoreinfo_at, vmcoreinfo_since), (notes_at, notes_since), _] = REGIONS;
        let vmcoreinfo = optional_region(vmcoreinfo_since, vmcoreinfo_at, "VMCOREINFO")?;
        let notes = optional_region(notes_since, notes_at, "note area")?;

        Ok(Kdump {
            header: KdumpHeader {
                header_version,
                status,
                block_size,
                max_mapnr,
                nr_cpus,
                phys_base,
                dump_level,
                release: c_string(&h[12 + 2 * 65..12 + 3 * 65]),
                machine: c_string(&h[12 + 4 * 65..12 + 5 * 65]),
            },
            start_pfn,
            end_pfn,
            bitmap1,
            bitmap2,
            desc_base,
            notes,
            vmcoreinfo,
            rank: OnceLock::new(),
            pages: Mutex::new(Pages {
                cache: PageCache::new(block_size as usize, CACHE_PAGES),
                decoders: Decoders::new(),
                scratch: vec![0; block_size as usize],
            }),
            image,
        })
    }

    fn lock_pages(&self) -> std::sync::MutexGuard<'_, Pages> {
        // A panic elsewhere cannot leave the cache inconsistent (slots are filled before use).
        self.pages
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn incomplete(&self) -> bool {
        self.header.status & DUMP_DH_COMPRESSED_INCOMPLETE != 0
    }

    /// The page frames the file holds, in order: the set bits of the second bitmap, so the walk is
    /// bounded by the file's own size, whatever range its header claims.
    pub fn dumped_pfns<'a>(&'a self, data: &'a [u8]) -> impl Iterator<Item = u64> + 'a {
        let bitmap = self.bitmap2.bytes(data);
        let (start, end) = (self.start_pfn, self.end_pfn);
        bitmap
            .iter()
            .enumerate()
            .filter(|(_, &byte)| byte != 0)
            .flat_map(|(i, &byte)| {
                (0..8u64)
                    .filter(move |b| byte & (1 << b) != 0)
                    .map(move |b| i as u64 * 8 + b)
            })
            .filter(move |pfn| (start..end).contains(pfn))
    }

    /// Whether the page is dumped; also whether it exists at all when it is not.
    pub fn page_state(&self, data: &[u8], pfn: u64) -> Result<(), MissingReason> {
        if pfn < self.start_pfn || pfn >= self.end_pfn {
            return Err(MissingReason::Unmapped);
        }
        if bit(self.bitmap2.bytes(data), pfn) {
            return Ok(());
        }
        match &self.bitmap1 {
            Some(b1) if bit(b1.bytes(data), pfn) => Err(MissingReason::Excluded),
            _ => Err(MissingReason::Unmapped),
        }
    }

    /// Read `out.len()` bytes at offset `within` of page `pfn` (the caller keeps it in one page).
    pub fn read_page(
        &self,
        data: &[u8],
        pfn: u64,
        within: usize,
        out: &mut [u8],
    ) -> Result<(), MissingReason> {
        if let Some(page) = self.lock_pages().cache.get(pfn) {
            out.copy_from_slice(&page[within..within + out.len()]);
            return Ok(());
        }
        self.page_state(data, pfn)?;
        let bitmap2 = self.bitmap2.bytes(data);
        let rank = self.rank.get_or_init(|| rank_index(bitmap2));
        let index = rank_of(bitmap2, rank, pfn) - rank_of(bitmap2, rank, self.start_pfn);
        let desc_at = self.desc_base + index * DESC_SIZE;
        let mut desc = [0u8; DESC_SIZE as usize];
        self.image
            .read(data, desc_at, &mut desc)
            .map_err(truncated)?;
        let offset = i64_le(&desc, 0).unwrap_or_default();
        let size = u64::from(u32_le(&desc, 8).unwrap_or_default());
        let flags = u32_le(&desc, 12).unwrap_or_default();
        let corrupt = |detail: String| MissingReason::Corrupt {
            offset: desc_at,
            detail,
        };
        let offset = match u64::try_from(offset) {
            Ok(o) if o != 0 => o,
            _ => {
                return Err(corrupt(format!(
                "page descriptor for PFN {pfn:#x} has data offset {offset} (page never written?)"
            )))
            }
        };
        let page_size = self.header.block_size;
        let codec = Codec::from_flags(flags).map_err(|e| corrupt(format!("PFN {pfn:#x}: {e}")))?;
        if let Some(codec) = codec {
            self.read_compressed(data, pfn, codec, offset, size, within, out)
        } else if size != self.header.block_size {
            Err(corrupt(format!("uncompressed page for PFN {pfn:#x} has size {size}, not the block size {page_size}")))
        } else {
            match self
                .image
                .slice(data, offset + within as u64, out.len() as u64)
            {
                Some(src) => {
                    out.copy_from_slice(src);
                    Ok(())
                }
                None => self
                    .image
                    .read(data, offset + within as u64, out)
                    .map_err(truncated),
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn read_compressed(
        &self,
        data: &[u8],
        pfn: u64,
        codec: Codec,
        offset: u64,
        size: u64,
        within: usize,
        out: &mut [u8],
    ) -> Result<(), MissingReason> {
        let mut guard = self.lock_pages();
        let Pages {
            cache,
            decoders,
            scratch,
        } = &mut *guard;
        // Another thread may have decompressed it since the caller looked.
        if let Some(page) = cache.get(pfn) {
            out.copy_from_slice(&page[within..within + out.len()]);
            return Ok(());
        }
        let corrupt = |detail: String| MissingReason::Corrupt {
            offset,
            detail: format!("{} page for PFN {pfn:#x}: {detail}", codec.name()),
        };
        // Writers store a page raw when compression does not shrink it, so a larger "compressed"
        // size is corruption; checking it bounds the copy below.
        if size > self.header.block_size {
            return Err(corrupt(format!(
                "claims {size} compressed bytes, more than a page"
            )));
        }
        let compressed = match self.image.slice(data, offset, size) {
            Some(src) => src,
            None => {
                let buf = &mut scratch[..size as usize];
                self.image.read(data, offset, buf).map_err(truncated)?;
                buf
            }
        };
        let page = cache.insert(pfn);
        if let Err(detail) = decoders.decode(codec, compressed, page) {
            cache.forget(pfn);
            return Err(corrupt(detail));
        }
        out.copy_from_slice(&page[within..within + out.len()]);
        Ok(())
    }
}

fn truncated(offset: u64) -> MissingReason {
    MissingReason::Truncated {
        offset,
        incomplete_flag: false,
    }
}

fn word(bitmap: &[u8], index: u64) -> u64 {
    let start = index.saturating_mul(8);
    match array::<8>(bitmap, start) {
        Some(bytes) => u64::from_le_bytes(bytes),
        None => {
            // The last, partial word.
            let mut bytes = [0u8; 8];
            if let Some(tail) = usize::try_from(start).ok().and_then(|s| bitmap.get(s..)) {
                bytes[..tail.len().min(8)].copy_from_slice(&tail[..tail.len().min(8)]);
            }
            u64::from_le_bytes(bytes)
        }
    }
}

fn bit(bitmap: &[u8], pfn: u64) -> bool {
    usize::try_from(pfn >> 3)
        .ok()
        .and_then(|i| bitmap.get(i))
        .is_some_and(|byte| byte & (1 << (pfn & 7)) != 0)
}

/// Set bits before each RANK_BLOCK-PFN block: one pass over bitmap 2, done once.
fn rank_index(bitmap: &[u8]) -> Vec<u64> {
    let words_per_block = RANK_BLOCK / 64;
    let blocks = (bitmap.len() as u64 * 8).div_ceil(RANK_BLOCK);
    let mut index = Vec::with_capacity(blocks as usize);
    let mut total = 0u64;
    for block in 0..blocks {
        index.push(total);
        for w in 0..words_per_block {
            total += u64::from(word(bitmap, block * words_per_block + w).count_ones());
        }
    }
    index
}

/// Set bits for PFNs `0..pfn`.
fn rank_of(bitmap: &[u8], index: &[u64], pfn: u64) -> u64 {
    let block = pfn / RANK_BLOCK;
    let Some(&before) = usize::try_from(block).ok().and_then(|b| index.get(b)) else {
        return index.last().copied().unwrap_or_default();
    };
    let first_word = block * (RANK_BLOCK / 64);
    let last_word = pfn / 64;
    let mut count = before;
    for w in first_word..last_word {
        count += u64::from(word(bitmap, w).count_ones());
    }
    let partial = word(bitmap, last_word) & ((1u64 << (pfn % 64)) - 1);
    count + u64::from(partial.count_ones())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_counts_bits_below_pfn() {
        let mut bitmap = vec![0u8; 256];
        let set = [0u64, 3, 63, 64, 511, 512, 700, 2047];
        for &p in &set {
            bitmap[(p / 8) as usize] |= 1 << (p % 8);
        }
        let index = rank_index(&bitmap);
        for pfn in 0..2048 {
            let expected = set.iter().filter(|&&p| p < pfn).count() as u64;
            assert_eq!(rank_of(&bitmap, &index, pfn), expected, "pfn {pfn}");
        }
    }
}
