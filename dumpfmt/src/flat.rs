//! makedumpfile's flattened format: a 4096-byte header, then big-endian {offset, size} records
//! each followed by `size` bytes that belong at `offset` of the kdump file. The records are
//! scanned once into an offset map; reads then go straight to the mapped stream.

use crate::bytes::{i64_be, slice};
use crate::claim::{Claim, INFLATED_MAX};
use crate::error::{Error, FileRef};
use crate::range_map::{RangeMap, RangeMapBuilder};

const HEADER_SIZE: u64 = 4096;
const RECORD_HEADER: u64 = 16;

/// Where logical offset `logical` of the kdump file is in the stream.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    logical: u64,
    stream: u64,
}

/// How far a gzipped flattened stream goes: to its end marker, found by walking the records
/// from `pos` (the first one's at [`HEADER_SIZE`]; left at the next record header to read, so
/// the walk resumes there as more is inflated). `read(offset, len)`: the inflated bytes there,
/// `None` while they are not inflated yet.
pub(crate) fn claimed_len(
    pos: &mut u64,
    read: &dyn Fn(u64, u64) -> Option<Vec<u8>>,
    file: &FileRef,
) -> Result<Claim, Error> {
    *pos = (*pos).max(HEADER_SIZE);
    loop {
        let Some(record) = read(*pos, RECORD_HEADER) else {
            return Ok(Claim::Need(*pos + RECORD_HEADER));
        };
        let (offset, size) = (
            i64_be(&record, 0).unwrap_or_default(),
            i64_be(&record, 8).unwrap_or_default(),
        );
        if offset == -1 {
            return Ok(Claim::End(*pos + RECORD_HEADER));
        }
        *pos = u64::try_from(size)
            .ok()
            .and_then(|size| (*pos + RECORD_HEADER).checked_add(size))
            .filter(|&next| next <= INFLATED_MAX)
            .ok_or_else(|| {
                file.malformed(
                    *pos,
                    format!(
                        "flattened record of {size} bytes would end past {INFLATED_MAX:#x} bytes"
                    ),
                )
            })?;
    }
}

pub(crate) struct FlatMap {
    map: RangeMap<Anchor>,
    /// The stream ended before its end marker (a truncated copy).
    pub truncated: bool,
}

impl FlatMap {
    pub fn scan(data: &[u8], file: &FileRef) -> Result<FlatMap, Error> {
        let field = |off: u64| file.malformed(off, "flattened header is shorter than 4096 bytes");
        let kind = i64_be(data, 16).ok_or_else(|| field(16))?;
        let version = i64_be(data, 24).ok_or_else(|| field(24))?;
        if kind != 1 {
            return Err(file.malformed(16, format!("flattened header type {kind} is not 1")));
        }
        if data.len() < HEADER_SIZE as usize {
            return Err(field(data.len() as u64));
        }
        if version != 1 {
            return Err(file.malformed(24, format!("flattened header version {version} is not 1")));
        }
        let mut map = RangeMapBuilder::new();
        let mut pos = HEADER_SIZE;
        let len = data.len() as u64;
        let truncated = loop {
            let (Some(offset), Some(size)) = (i64_be(data, pos), i64_be(data, pos + 8)) else {
                break true;
            };
            if offset == -1 {
                break false;
            }
            let (Ok(offset), Ok(size)) = (u64::try_from(offset), u64::try_from(size)) else {
                return Err(file.malformed(
                    pos,
                    format!("flattened record has negative offset {offset} or size {size}"),
                ));
            };
            let stream = pos + RECORD_HEADER;
            let stored = size.min(len - stream);
            if offset.checked_add(size).is_none() {
                return Err(file.malformed(
                    pos,
                    format!("flattened record offset {offset:#x} + size {size:#x} overflows"),
                ));
            }
            map.insert_over(
                offset,
                offset + stored,
                Anchor {
                    logical: offset,
                    stream,
                },
            );
            if stored < size {
                break true;
            }
            pos = stream + size;
        };
        Ok(FlatMap {
            map: map.build(),
            truncated,
        })
    }

    /// The bytes at logical `[offset, offset+len)` if one record holds them all.
    pub fn slice<'a>(&self, data: &'a [u8], offset: u64, len: u64) -> Option<&'a [u8]> {
        let e = self.map.find(offset)?;
        if offset.checked_add(len)? > e.end {
            return None;
        }
        slice(data, e.value.stream + (offset - e.value.logical), len)
    }

    /// Copy logical bytes into `buf`; on failure, the first logical offset no record holds.
    pub fn read(&self, data: &[u8], offset: u64, buf: &mut [u8]) -> Result<(), u64> {
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let e = self.map.find(at).ok_or(at)?;
            let n = ((e.end - at).min((buf.len() - done) as u64)) as usize;
            let src = slice(data, e.value.stream + (at - e.value.logical), n as u64).ok_or(at)?;
            buf[done..done + n].copy_from_slice(src);
            done += n;
        }
        Ok(())
    }

    /// Whether every byte of `[offset, offset+len)` is held by some record (checked before
    /// allocating a buffer of that size).
    pub fn covers(&self, offset: u64, len: u64) -> bool {
        let Some(end) = offset.checked_add(len) else {
            return false;
        };
        let mut at = offset;
        while at < end {
            match self.map.find(at) {
                Some(e) => at = e.end,
                None => return false,
            }
        }
        true
    }
}
