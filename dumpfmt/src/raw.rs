//! Raw physical memory images: a guest's memory saved with no header at all (QEMU's `pmemsave`,
//! `virsh dump --memory-only --format=raw`-style consoles, a `dd` of /dev/mem). Nothing in the
//! file says where it sits, so the caller gives the physical address of its byte 0, as crash(8)
//! takes `FILE@ADDRESS`. The file is one physical range, `[start, start + length)`: no notes, no
//! VMCOREINFO, no CPU state. Nothing is parsed, so nothing but the range can be wrong.

use std::ops::Range;

use crate::error::{Error, FileRef, MissingReason};
use crate::storage::Storage;

pub(crate) struct RawMemory {
    /// Physical address of the file's byte 0.
    pub start: u64,
    /// The file's length: one past the last physical address it holds is `start + len`.
    pub len: u64,
}

impl RawMemory {
    /// The range `len` bytes at `start` cover; an empty file, or one whose end would pass
    /// 2^64, is refused.
    pub fn new(start: u64, len: u64, file: &FileRef) -> Result<RawMemory, Error> {
        if len == 0 {
            return Err(file.malformed(0, "empty file: a raw memory image holds at least one byte"));
        }
        if start.checked_add(len).is_none() {
            return Err(file.malformed(
                0,
                format!(
                    "a raw memory image of {len:#x} bytes at physical {start:#x} would end past \
                     2^64"
                ),
            ));
        }
        Ok(RawMemory { start, len })
    }

    pub fn range(&self) -> Range<u64> {
        self.start..self.start + self.len
    }

    /// Copies physical `paddr..` into `buf`: the first byte outside the image is `Unmapped`.
    pub fn read_phys(
        &self,
        storage: &Storage,
        file: &FileRef,
        paddr: u64,
        buf: &mut [u8],
    ) -> Result<(), Error> {
        let range = self.range();
        if buf.is_empty() {
            return Ok(());
        }
        if !range.contains(&paddr) {
            return Err(file.phys(paddr, MissingReason::Unmapped));
        }
        let offset = paddr - self.start;
        let inside = usize::try_from(range.end - paddr).unwrap_or(usize::MAX);
        let n = buf.len().min(inside);
        // The storage is the whole file (mapped, or inflated from gzip): it has every byte.
        let got = storage
            .read_at(offset, &mut buf[..n])
            .map_err(|e| file.io("cannot read", e))?;
        if got < n {
            // Only a file cut while it is mapped can get here.
            return Err(file.phys(
                paddr + got as u64,
                MissingReason::Truncated {
                    offset: offset + got as u64,
                    incomplete_flag: false,
                },
            ));
        }
        if n < buf.len() {
            return Err(file.phys(range.end, MissingReason::Unmapped));
        }
        Ok(())
    }
}
