//! AArch64 stage-1 translation tables, as Linux sets them up for EL1: 4, 16 or 64 KiB granules,
//! 36 to 52 bits of virtual address, 8-byte descriptors. The walk starts at a table's physical
//! address (`swapper_pg_dir` less `kimage_voffset` for the kernel half, a task's `mm->pgd`
//! through the linear map for the user half).

use super::{PageMapping, PageTableWalker, PhysMemory, WalkError};

/// Level names from the top, for a walk of up to five levels (`L-1` exists only with 52-bit
/// addresses and 4 KiB pages).
const NAMES: [&str; 5] = ["L-1", "L0", "L1", "L2", "L3"];

/// The translation regime the kernel ran with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aarch64 {
    /// 12, 14 or 16 (`PAGESIZE` in VMCOREINFO).
    pub page_shift: u32,
    /// Bits of virtual address the tables resolve: `64 - TCR_EL1.T1SZ` for 4 and 16 KiB pages
    /// (`NUMBER(TCR_EL1_T1SZ)`), `NUMBER(VA_BITS)` for 64 KiB ones.
    pub va_bits: u32,
}

/// Why a regime cannot be walked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegimeError {
    #[error("a page size of 2^{0} bytes is not one of AArch64's granules (4, 16 or 64 KiB)")]
    PageSize(u32),
    #[error("{va_bits} bits of virtual address cannot be walked with 2^{page_shift}-byte pages")]
    VaBits { page_shift: u32, va_bits: u32 },
}

impl Aarch64 {
    pub fn new(page_shift: u32, va_bits: u32) -> Result<Self, RegimeError> {
        if !matches!(page_shift, 12 | 14 | 16) {
            return Err(RegimeError::PageSize(page_shift));
        }
        // At least two levels, at most 52 bits, and no more than five levels.
        let bits = page_shift - 3;
        if va_bits > 52 || va_bits < page_shift + bits + 1 || va_bits > page_shift + 5 * bits {
            return Err(RegimeError::VaBits {
                page_shift,
                va_bits,
            });
        }
        Ok(Aarch64 {
            page_shift,
            va_bits,
        })
    }

    /// Address bits each table resolves (512, 2048 or 8192 entries).
    fn bits_per_level(&self) -> u32 {
        self.page_shift - 3
    }

    fn levels(&self) -> u32 {
        (self.va_bits - self.page_shift).div_ceil(self.bits_per_level())
    }

    /// 52-bit output addresses with 4 or 16 KiB pages (FEAT_LPA2, which Linux enables with
    /// 52-bit virtual addresses only): descriptor bits 9:8 are OA bits 51:50, not shareability.
    fn lpa2(&self) -> bool {
        self.page_shift != 16 && self.va_bits == 52
    }

    /// The output address a table, block or page descriptor holds.
    fn output_address(&self, desc: u64) -> u64 {
        let low = desc & ((1 << 48) - 1) & !((1 << self.page_shift) - 1);
        if self.page_shift == 16 {
            // FEAT_LPA: OA bits 51:48 in descriptor bits 15:12 (zero without it).
            low | ((desc & 0xf000) << 36)
        } else if self.lpa2() {
            (desc & ((1 << 50) - 1) & !((1 << self.page_shift) - 1)) | ((desc & 0x300) << 42)
        } else {
            low
        }
    }

    /// The kernel half (TTBR1) has every bit from `va_bits` up set, the user half (TTBR0) none
    /// (the bit below them is an address bit: 48-bit kernels keep their linear map at
    /// 0xffff0000_00000000 and their image at 0xffff8000_00000000 on); a tag byte
    /// (top-byte-ignore, KASAN) is dropped first by sign-extending bit 55.
    fn in_range(&self, vaddr: u64) -> bool {
        let untagged = ((vaddr << 8) as i64) >> 8;
        let upper = untagged >> self.va_bits;
        upper == 0 || upper == -1
    }
}

impl PageTableWalker for Aarch64 {
    fn translate(
        &self,
        mem: &dyn PhysMemory,
        root: u64,
        vaddr: u64,
    ) -> Result<PageMapping, WalkError> {
        if !self.in_range(vaddr) {
            return Err(WalkError::NonCanonical);
        }
        let bits = self.bits_per_level();
        let levels = self.levels();
        let mut table = self.output_address(root);
        for level in 0..levels {
            // The level's distance from the bottom, 1 for the last.
            let from_bottom = levels - level;
            let shift = self.page_shift + bits * (from_bottom - 1);
            let index = (vaddr >> shift) & ((1 << bits) - 1);
            let index = if level == 0 {
                // The top table resolves what is left of va_bits.
                index & ((1 << (self.va_bits - shift)) - 1)
            } else {
                index
            };
            let name = NAMES[(5 - levels + level) as usize];
            let entry_paddr = table.wrapping_add(index * 8);
            let mut raw = [0u8; 8];
            mem.read_phys(entry_paddr, &mut raw)
                .map_err(|e| WalkError::TableUnreadable {
                    level: name,
                    entry_paddr,
                    reason: e.to_string(),
                })?;
            let desc = u64::from_le_bytes(raw);
            let last = from_bottom == 1;
            match (desc & 3, last) {
                // A table at every level but the last; a page at the last.
                (3, false) => table = self.output_address(desc),
                (3, true) | (1, false) => {
                    let size = 1u64 << shift;
                    let base = self.output_address(desc) & !(size - 1);
                    return Ok(PageMapping {
                        paddr: base | (vaddr & (size - 1)),
                        page_size: size,
                    });
                }
                _ => {
                    return Err(WalkError::NotPresent {
                        level: name,
                        entry_paddr,
                        entry: desc,
                    })
                }
            }
        }
        // Every level was a table: the regime has more levels than it says.
        Err(WalkError::NotPresent {
            level: NAMES[4],
            entry_paddr: table,
            entry: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::Error;

    /// Physical memory of a few pages, zero elsewhere.
    #[derive(Default)]
    struct Pages(HashMap<u64, u64>);

    impl Pages {
        fn set(&mut self, paddr: u64, value: u64) {
            self.0.insert(paddr, value);
        }
    }

    impl PhysMemory for Pages {
        fn read_phys(&self, paddr: u64, buf: &mut [u8]) -> Result<(), Error> {
            let v = self.0.get(&paddr).copied().unwrap_or(0);
            buf.copy_from_slice(&v.to_le_bytes()[..buf.len()]);
            Ok(())
        }
    }

    const TABLE: u64 = 3;
    const PAGE: u64 = 3 | (1 << 10);
    const BLOCK: u64 = 1 | (1 << 10);

    /// 4 KiB pages, 48 bits: four levels of 512 entries, 2 MiB blocks at L2, attribute bits
    /// above the address ignored.
    #[test]
    fn four_levels_of_4k_pages_and_a_2m_block() {
        let w = Aarch64::new(12, 48).unwrap();
        let va: u64 = 0xffff_8000_1234_5678;
        let idx = |shift: u32| (va >> shift) & 511;
        let mut m = Pages::default();
        m.set(0x1000 + idx(39) * 8, 0x2000 | TABLE | (1 << 60));
        m.set(0x2000 + idx(30) * 8, 0x3000 | TABLE);
        m.set(0x3000 + idx(21) * 8, 0x4000 | TABLE);
        m.set(
            0x4000 + idx(12) * 8,
            0x8765_4000 | PAGE | (1 << 53) | (3 << 8),
        );
        let got = w.translate(&m, 0x1000, va).unwrap();
        assert_eq!(got.paddr, 0x8765_4678);
        assert_eq!(got.page_size, 4096);
        m.set(0x3000 + idx(21) * 8, 0x4060_0000 | BLOCK);
        let got = w.translate(&m, 0x1000, va).unwrap();
        assert_eq!(got.paddr, 0x4060_0000 | (va & 0x1f_ffff));
        assert_eq!(got.page_size, 2 << 20);
    }

    /// 4 KiB pages with 52 bits (LPA2): five levels, the top one of 16 entries, and output
    /// address bits 51:50 in descriptor bits 9:8.
    #[test]
    fn five_levels_with_lpa2_addresses() {
        let w = Aarch64::new(12, 52).unwrap();
        let va: u64 = 0xfff8_1234_5678_9abc;
        let idx = |shift: u32, entries: u64| (va >> shift) & (entries - 1);
        let mut m = Pages::default();
        m.set(0x1000 + idx(48, 16) * 8, 0x2000 | TABLE);
        m.set(0x2000 + idx(39, 512) * 8, 0x3000 | TABLE);
        m.set(0x3000 + idx(30, 512) * 8, 0x4000 | TABLE);
        m.set(0x4000 + idx(21, 512) * 8, 0x5000 | TABLE);
        m.set(
            0x5000 + idx(12, 512) * 8,
            0x0002_4000_0000_0000 | 0x100 | PAGE,
        );
        let got = w.translate(&m, 0x1000, va).unwrap();
        assert_eq!(got.paddr, (1u64 << 50) | 0x0002_4000_0000_0000 | 0xabc);
    }

    /// 64 KiB pages, 48 bits: three levels, the top one of 64 entries; FEAT_LPA's bits 15:12.
    #[test]
    fn three_levels_of_64k_pages() {
        let w = Aarch64::new(16, 48).unwrap();
        let va: u64 = 0x0000_7654_3210_fedc;
        let mut m = Pages::default();
        m.set(0x10000 + ((va >> 42) & 63) * 8, 0x20000 | TABLE);
        m.set(0x20000 + ((va >> 29) & 8191) * 8, 0x30000 | TABLE);
        m.set(0x30000 + ((va >> 16) & 8191) * 8, 0x5_0000 | 0x1000 | PAGE);
        let got = w.translate(&m, 0x10000, va).unwrap();
        assert_eq!(got.paddr, (1u64 << 48) | 0x5_0000 | (va & 0xffff));
        assert_eq!(got.page_size, 65536);
    }

    /// An invalid descriptor, an address outside both halves and an impossible regime are
    /// said, never walked into.
    #[test]
    fn what_cannot_be_walked_is_said() {
        let w = Aarch64::new(12, 48).unwrap();
        let m = Pages::default();
        assert!(matches!(
            w.translate(&m, 0x1000, 0xffff_8000_0000_0000),
            Err(WalkError::NotPresent { level: "L0", .. })
        ));
        assert_eq!(
            w.translate(&m, 0x1000, 0x0001_0000_0000_0000),
            Err(WalkError::NonCanonical)
        );
        assert!(Aarch64::new(13, 48).is_err());
        assert!(Aarch64::new(12, 53).is_err());
        assert!(Aarch64::new(16, 64).is_err());
    }
}
