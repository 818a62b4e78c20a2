//! x86_64 4- and 5-level paging.

use std::ops::{ControlFlow, Range};

use super::{PageMapping, PageTableWalker, PhysMemory, WalkError};

/// `__START_KERNEL_map`: the kernel image is mapped here, at physical `phys_base`.
pub const START_KERNEL_MAP: u64 = 0xffff_ffff_8000_0000;

/// Physical address bits 12..51 of a table entry: drops NX (63), protection keys and software
/// bits (52..62) and the flag bits (0..11).
const ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;
const PRESENT: u64 = 1;
/// PS: a large page at PDPT (1 GiB) and PD (2 MiB) level. At PT level this bit is PAT.
const PAGE_SIZE_BIT: u64 = 1 << 7;

/// The x86_64 page-table format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct X86_64 {
    pub five_level: bool,
    /// AMD SME's encryption bit(s) (`NUMBER(sme_mask)`), cleared from every entry.
    pub sme_mask: u64,
}

impl X86_64 {
    pub fn new(five_level: bool) -> Self {
        X86_64 {
            five_level,
            sme_mask: 0,
        }
    }

    /// The table root in a CR3 value: PCID (bits 0..11) and the no-flush bit masked.
    pub fn cr3_root(cr3: u64) -> u64 {
        cr3 & ADDR_MASK
    }

    /// The kernel PGD for a CR3 captured on a kernel built with page-table isolation: a CPU in
    /// user mode runs on the user copy, which sits 4 KiB above the kernel one (bit 12).
    pub fn kernel_root_with_pti(cr3: u64) -> u64 {
        Self::cr3_root(cr3) & !(1 << 12)
    }

    fn canonical(&self, vaddr: u64) -> bool {
        let bits = if self.five_level { 57 } else { 48 };
        let top = (vaddr as i64) >> (bits - 1);
        top == 0 || top == -1
    }
}

/// One present leaf entry of a page table: a whole 4 KiB, 2 MiB or 1 GiB page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub vaddr: u64,
    pub paddr: u64,
    pub size: u64,
}

impl X86_64 {
    /// Call `f` for every present page mapped by the tables at `root` that overlaps `range`,
    /// in address order, until it breaks. Non-present subtrees are skipped without reading
    /// them; a table that cannot be read stops the walk with an error (a mapping it holds
    /// would otherwise be silently missing). This is what finds the KASLR slide without
    /// VMCOREINFO: the first page mapped at or above `__START_KERNEL_map` is the runtime
    /// `_stext` (see [`X86_64::first_mapping`]).
    pub fn for_each_mapping(
        &self,
        mem: &dyn PhysMemory,
        root: u64,
        range: Range<u64>,
        f: &mut dyn FnMut(Mapping) -> ControlFlow<()>,
    ) -> Result<(), WalkError> {
        let levels = if self.five_level {
            &LEVELS[..]
        } else {
            &LEVELS[1..]
        };
        self.walk_range(mem, Self::cr3_root(root), levels, 0, &range, f)
            .map(|_| ())
    }

    /// The first present page overlapping `range`.
    pub fn first_mapping(
        &self,
        mem: &dyn PhysMemory,
        root: u64,
        range: Range<u64>,
    ) -> Result<Option<Mapping>, WalkError> {
        let mut first = None;
        self.for_each_mapping(mem, root, range, &mut |m| {
            first = Some(m);
            ControlFlow::Break(())
        })?;
        Ok(first)
    }

    fn walk_range(
        &self,
        mem: &dyn PhysMemory,
        table: u64,
        levels: &[(&'static str, u32)],
        base: u64,
        range: &Range<u64>,
        f: &mut dyn FnMut(Mapping) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, WalkError> {
        let Some((&(level, shift), lower)) = levels.split_first() else {
            return Ok(ControlFlow::Continue(()));
        };
        let mut raw = [0u8; 4096];
        mem.read_phys(table, &mut raw)
            .map_err(|e| WalkError::TableUnreadable {
                level,
                entry_paddr: table,
                reason: e
                    .missing_reason()
                    .map_or_else(|| e.to_string(), |r| r.to_string()),
            })?;
        let size = 1u64 << shift;
        let top_bits = if self.five_level { 57 } else { 48 };
        for (index, entry) in raw.chunks_exact(8).enumerate() {
            // Sign-extend (the top level's upper half is the canonical kernel half; below it
            // the base already carries those bits).
            let raw_va = base | ((index as u64) << shift);
            let vaddr = (((raw_va << (64 - top_bits)) as i64) >> (64 - top_bits)) as u64;
            let last = vaddr + (size - 1);
            if last < range.start || vaddr >= range.end {
                continue;
            }
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(entry);
            let entry = u64::from_le_bytes(bytes) & !self.sme_mask;
            if entry & PRESENT == 0 {
                continue;
            }
            let large = (shift == 30 || shift == 21) && entry & PAGE_SIZE_BIT != 0;
            let flow = if large || shift == 12 {
                f(Mapping {
                    vaddr,
                    paddr: entry & ADDR_MASK & !(size - 1),
                    size,
                })
            } else {
                self.walk_range(mem, entry & ADDR_MASK, lower, vaddr, range, f)?
            };
            if flow.is_break() {
                return Ok(flow);
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

const LEVELS: [(&str, u32); 5] = [
    ("PML5", 48),
    ("PML4", 39),
    ("PDPT", 30),
    ("PD", 21),
    ("PT", 12),
];

impl PageTableWalker for X86_64 {
    fn translate(
        &self,
        mem: &dyn PhysMemory,
        root: u64,
        vaddr: u64,
    ) -> Result<PageMapping, WalkError> {
        if !self.canonical(vaddr) {
            return Err(WalkError::NonCanonical);
        }
        let levels = if self.five_level {
            &LEVELS[..]
        } else {
            &LEVELS[1..]
        };
        let mut table = Self::cr3_root(root);
        for &(level, shift) in levels {
            let entry_paddr = table | (((vaddr >> shift) & 0x1ff) * 8);
            let mut raw = [0u8; 8];
            mem.read_phys(entry_paddr, &mut raw)
                .map_err(|e| WalkError::TableUnreadable {
                    level,
                    entry_paddr,
                    reason: e
                        .missing_reason()
                        .map_or_else(|| e.to_string(), |r| r.to_string()),
                })?;
            let entry = u64::from_le_bytes(raw) & !self.sme_mask;
            if entry & PRESENT == 0 {
                return Err(WalkError::NotPresent {
                    level,
                    entry_paddr,
                    entry,
                });
            }
            let large = (shift == 30 || shift == 21) && entry & PAGE_SIZE_BIT != 0;
            if large || shift == 12 {
                let page_size = 1u64 << shift;
                let frame = entry & ADDR_MASK & !(page_size - 1);
                return Ok(PageMapping {
                    paddr: frame | (vaddr & (page_size - 1)),
                    page_size,
                });
            }
            table = entry & ADDR_MASK;
        }
        unreachable!("the PT level always returns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, FileRef, MissingReason};
    use std::collections::HashMap;
    use std::path::Path;
    use std::sync::Arc;

    /// Synthetic physical memory: a few 4 KiB frames of page tables.
    struct Frames(HashMap<u64, [u8; 4096]>, FileRef);

    impl Frames {
        fn new() -> Self {
            Frames(HashMap::new(), FileRef(Arc::from(Path::new("synthetic"))))
        }
        fn set(&mut self, table: u64, index: u64, entry: u64) {
            let frame = self.0.entry(table).or_insert([0; 4096]);
            frame[(index * 8) as usize..(index * 8 + 8) as usize]
                .copy_from_slice(&entry.to_le_bytes());
        }
    }

    impl PhysMemory for Frames {
        fn read_phys(&self, paddr: u64, buf: &mut [u8]) -> Result<(), Error> {
            let frame = self
                .0
                .get(&(paddr & !0xfff))
                .ok_or_else(|| self.1.phys(paddr, MissingReason::Unmapped))?;
            let at = (paddr & 0xfff) as usize;
            buf.copy_from_slice(&frame[at..at + buf.len()]);
            Ok(())
        }
    }

    const NX: u64 = 1 << 63;
    const SOFTWARE: u64 = 0x7ff << 52;

    fn idx(vaddr: u64, shift: u32) -> u64 {
        (vaddr >> shift) & 0x1ff
    }

    #[test]
    fn four_level_4k_2m_1g_pages_with_nx_and_pcid_masked() {
        let mut m = Frames::new();
        let (pml4, pdpt, pd, pt) = (0x1000, 0x2000, 0x3000, 0x4000);
        let va_4k = 0xffff_8880_0012_3456u64;
        m.set(pml4, idx(va_4k, 39), pdpt | 0x63 | NX);
        m.set(pdpt, idx(va_4k, 30), pd | 0x63);
        m.set(pd, idx(va_4k, 21), pt | 0x63 | SOFTWARE);
        m.set(pt, idx(va_4k, 12), 0x7654_3000 | 0x1e3 | NX); // 0x80 here is PAT, not PS
        let w = X86_64::new(false);
        let cr3 = pml4 | 0x5; // PCID 5
        assert_eq!(
            w.translate(&m, cr3, va_4k),
            Ok(PageMapping {
                paddr: 0x7654_3456,
                page_size: 4096
            })
        );

        let va_2m = va_4k + (1 << 21);
        m.set(pd, idx(va_2m, 21), 0x4000_0000 | 0x80 | 0x63 | NX);
        assert_eq!(
            w.translate(&m, cr3, va_2m + 0x1234),
            Ok(PageMapping {
                paddr: 0x4000_0000 + ((va_2m + 0x1234) & 0x1f_ffff),
                page_size: 1 << 21
            })
        );

        let va_1g = 0xffff_ffff_8000_0000u64 + 0x0abc_def0;
        let pdpt2 = 0x5000;
        m.set(pml4, idx(va_1g, 39), pdpt2 | 0x63);
        m.set(pdpt2, idx(va_1g, 30), 0x1_4000_0000 | 0x80 | 0x63);
        assert_eq!(
            w.translate(&m, cr3, va_1g),
            Ok(PageMapping {
                paddr: 0x1_4000_0000 + 0x0abc_def0,
                page_size: 1 << 30
            })
        );
    }

    #[test]
    fn enumerates_mappings_in_a_range_in_order() {
        let mut m = Frames::new();
        let (pml4, pdpt, pd, pt) = (0x1000, 0x2000, 0x3000, 0x4000);
        // Kernel image at a KASLR-like slide: a 2 MiB page at +0x3a000000 and 4 KiB pages
        // 2 MiB above it; a direct-map 1 GiB page elsewhere in the kernel half.
        let text = START_KERNEL_MAP + 0x3a00_0000;
        m.set(pml4, idx(text, 39), pdpt | 3);
        m.set(pdpt, idx(text, 30), pd | 3);
        m.set(pd, idx(text, 21), 0x0720_0000 | 0x80 | 3 | NX);
        m.set(pd, idx(text, 21) + 1, pt | 3);
        m.set(pt, 5, 0x9000 | 3);
        m.set(pt, 7, 0xa000 | 3);
        let direct = 0xffff_8880_0000_0000u64;
        m.set(pml4, idx(direct, 39), 0x5000 | 3);
        m.set(0x5000, 0, 0x4000_0000 | 0x80 | 3);
        let w = X86_64::new(false);
        let mut seen = Vec::new();
        w.for_each_mapping(&m, pml4, START_KERNEL_MAP..u64::MAX, &mut |m| {
            seen.push(m);
            ControlFlow::Continue(())
        })
        .unwrap();
        let above = text + (1 << 21);
        assert_eq!(
            seen,
            [
                Mapping {
                    vaddr: text,
                    paddr: 0x0720_0000,
                    size: 1 << 21
                },
                Mapping {
                    vaddr: above + 0x5000,
                    paddr: 0x9000,
                    size: 4096
                },
                Mapping {
                    vaddr: above + 0x7000,
                    paddr: 0xa000,
                    size: 4096
                },
            ]
        );
        assert_eq!(
            w.first_mapping(&m, pml4, direct..START_KERNEL_MAP).unwrap(),
            Some(Mapping {
                vaddr: direct,
                paddr: 0x4000_0000,
                size: 1 << 30
            })
        );
        assert_eq!(w.first_mapping(&m, pml4, 0..1 << 47).unwrap(), None);
        // A table outside memory stops the walk rather than hiding what it maps.
        m.set(pml4, idx(text, 39), 0x77_7000 | 3);
        assert!(matches!(
            w.first_mapping(&m, pml4, START_KERNEL_MAP..u64::MAX),
            Err(WalkError::TableUnreadable {
                level: "PDPT",
                entry_paddr: 0x77_7000,
                ..
            })
        ));
    }

    #[test]
    fn cr3_masks() {
        assert_eq!(X86_64::cr3_root(0x8000_0000_1234_5fff), 0x1234_5000);
        assert_eq!(X86_64::kernel_root_with_pti(0x1234_5805), 0x1234_4000);
        assert_eq!(X86_64::kernel_root_with_pti(0x1234_4805), 0x1234_4000);
    }

    #[test]
    fn five_level_walk_uses_bits_48_to_56() {
        let mut m = Frames::new();
        let va = 0xff11_0000_0000_1000u64;
        let (pml5, pml4, pdpt, pd, pt) = (0x10000, 0x11000, 0x12000, 0x13000, 0x14000);
        m.set(pml5, idx(va, 48), pml4 | 3);
        m.set(pml4, idx(va, 39), pdpt | 3);
        m.set(pdpt, idx(va, 30), pd | 3);
        m.set(pd, idx(va, 21), pt | 3);
        m.set(pt, idx(va, 12), 0x9000 | 3);
        assert_eq!(
            X86_64::new(true)
                .translate(&m, pml5, va + 5)
                .map(|p| p.paddr),
            Ok(0x9005)
        );
        // The same address is not canonical with 4 levels.
        assert_eq!(
            X86_64::new(false).translate(&m, pml4, va),
            Err(WalkError::NonCanonical)
        );
    }

    #[test]
    fn failures_name_the_level_and_entry() {
        let mut m = Frames::new();
        let va = 0x0000_7fff_0000_0000u64;
        m.set(0x1000, idx(va, 39), 0x2000 | 3);
        // PDPT frame 0x2000 exists but its entry is zero.
        m.set(0x2000, 0, 0);
        let w = X86_64::new(false);
        let entry_paddr = 0x2000 + idx(va, 30) * 8;
        assert_eq!(
            w.translate(&m, 0x1000, va),
            Err(WalkError::NotPresent {
                level: "PDPT",
                entry_paddr,
                entry: 0
            })
        );
        // A table outside the dump.
        m.set(0x1000, idx(va, 39), 0x9_9000 | 3);
        match w.translate(&m, 0x1000, va) {
            Err(WalkError::TableUnreadable {
                level: "PDPT",
                entry_paddr,
                ..
            }) => {
                assert_eq!(entry_paddr, 0x9_9000 + idx(va, 30) * 8)
            }
            other => panic!("{other:?}"),
        }
    }
}
