//! x86_64 4- and 5-level paging.

use super::{PageMapping, PageTableWalker, PhysMemory, WalkError};
use crate::error::Error;
use crate::VmcoreInfo;

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

    /// The physical address of the kernel's top-level page table from VMCOREINFO:
    /// `SYMBOL(init_top_pgt)` (older kernels: `init_level4_pgt`) by the kernel-image rule
    /// `pa = va - __START_KERNEL_map + phys_base`. None when either value is missing.
    pub fn kernel_root(info: &VmcoreInfo<'_>) -> Result<Option<u64>, Error> {
        let pgd = match info.symbol("init_top_pgt")? {
            Some(pgd) => Some(pgd),
            None => info.symbol("init_level4_pgt")?,
        };
        let (Some(pgd), Some(phys_base)) = (pgd, info.phys_base()?) else {
            return Ok(None);
        };
        Ok(pgd
            .checked_sub(START_KERNEL_MAP)
            .map(|offset| offset.wrapping_add(phys_base as u64)))
    }

    fn canonical(&self, vaddr: u64) -> bool {
        let bits = if self.five_level { 57 } else { 48 };
        let top = (vaddr as i64) >> (bits - 1);
        top == 0 || top == -1
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
