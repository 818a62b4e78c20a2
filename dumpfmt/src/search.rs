//! Searching the memory a dump holds for a byte pattern, without knowing what it means: how a
//! reader with no image finds a structure that announces itself (the KLog descriptor).
//!
//! Kernel dumps are searched by physical address, process cores by virtual address (they have no
//! physical view). Memory is read a window at a time, so the search's own memory stays flat
//! however large the dump is.

use std::ops::ControlFlow;

use memchr::memmem::Finder;

use crate::{Dump, Inner};

/// Bytes read at a time from an ELF segment.
const WINDOW: u64 = 4 << 20;
/// Pages of a kdump file read at a time (each one decompressed on its own).
const PAGE: u64 = 4096;

/// What a search covered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Searched {
    /// Bytes of memory searched.
    pub bytes: u64,
    /// Bytes the dump claims but could not give (truncated, unreadable), left unsearched.
    pub unreadable: u64,
    /// Whether the addresses are virtual (a process core) rather than physical.
    pub virtual_addresses: bool,
}

impl Dump {
    /// Whether [`Dump::search`] gives virtual addresses: a process core's, or a kernel dump's
    /// whose segments all claim physical address 0 (QEMU's paging=true dumps), where only the
    /// virtual addresses say where memory is.
    pub fn searched_by_virtual_address(&self) -> bool {
        let segments = self.segments();
        self.is_process_core()
            || (self.has_virtual_mappings()
                && segments.len() > 1
                && segments.iter().all(|s| s.paddr == 0))
    }

    /// Calls `found` with every address of the dump's memory where `needle` starts at a multiple
    /// of `align` (a power of two that divides 4096, so that a match never spans two pages of a
    /// kdump file), until it returns `Break`. `needle` must be no longer than `align`'s page.
    pub fn search(
        &self,
        needle: &[u8],
        align: u64,
        found: &mut dyn FnMut(u64) -> ControlFlow<()>,
    ) -> Searched {
        let finder = Finder::new(needle);
        let mut s = Searched {
            virtual_addresses: self.searched_by_virtual_address(),
            ..Searched::default()
        };
        let mut hits = |base: u64, bytes: &[u8]| {
            for at in finder.find_iter(bytes) {
                let addr = base + at as u64;
                if addr % align == 0 && found(addr).is_break() {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        };
        // (address, file offset, bytes) of each stretch the file holds as it is.
        let stretches: Vec<(u64, u64, u64)> = match &self.inner {
            Inner::Elf(_) => self
                .segments()
                .iter()
                .filter(|seg| seg.filesz > 0)
                .map(|seg| {
                    let at = if s.virtual_addresses {
                        seg.vaddr
                    } else {
                        seg.paddr
                    };
                    (at, seg.offset, seg.filesz)
                })
                .collect(),
            Inner::Raw(r) => vec![(r.start, 0, r.len)],
            Inner::Kdump(_) => Vec::new(),
        };
        // A window overlaps the next by the needle's length less one byte, so a match across
        // the boundary is seen once.
        let overlap = needle.len().saturating_sub(1) as u64;
        let mut buf = Vec::new();
        for (start, offset, len) in stretches {
            buf.resize((WINDOW + overlap).min(len) as usize, 0);
            let mut done = 0;
            while done < len {
                let n = (len - done).min(WINDOW + overlap);
                let window = &mut buf[..n as usize];
                let at = start.wrapping_add(done);
                let read = if s.virtual_addresses {
                    self.read_dump_mapping(at, window)
                        .map(|got| got as u64 == n)
                } else {
                    self.read_phys(at, window).map(|()| true)
                };
                // The window's pages are not needed again by the search.
                self.storage.release(offset + done, n.min(WINDOW));
                if read.unwrap_or(false) {
                    s.bytes += n.min(WINDOW);
                    if hits(at, window).is_break() {
                        return s;
                    }
                } else {
                    s.unreadable += n.min(WINDOW);
                }
                done += WINDOW;
            }
        }
        match &self.inner {
            Inner::Elf(_) | Inner::Raw(_) => {}
            Inner::Kdump(k) => {
                let data = self.storage.bytes();
                let mut page = vec![0u8; PAGE as usize];
                let block = k.header.block_size.max(1);
                for pfn in k.dumped_pfns(data) {
                    let addr = pfn.saturating_mul(block);
                    for part in 0..block.div_ceil(PAGE) {
                        let at = addr + part * PAGE;
                        let n = PAGE.min(block - part * PAGE) as usize;
                        if self.read_phys(at, &mut page[..n]).is_err() {
                            s.unreadable += n as u64;
                            continue;
                        }
                        s.bytes += n as u64;
                        if hits(at, &page[..n]).is_break() {
                            return s;
                        }
                    }
                }
            }
        }
        s
    }
}
