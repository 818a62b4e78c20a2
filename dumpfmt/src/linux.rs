//! What a Linux x86_64 kernel's VMCOREINFO says about itself, typed, and the address-space
//! rules that follow from it: where the kernel's top-level page table is, and the fixed mapping
//! of the kernel image at `__START_KERNEL_map`.

use crate::error::Error;
use crate::translate::x86_64::{START_KERNEL_MAP, X86_64};
use crate::translate::LinearMap;
use crate::VmcoreInfo;

/// The kernel image mapping's size when VMCOREINFO does not say: `KERNEL_IMAGE_SIZE` with
/// KASLR (1 GiB; 512 MiB without). The modules area starts right after it.
const DEFAULT_KERNEL_IMAGE_SIZE: u64 = 1 << 30;

/// Linux facts from VMCOREINFO. Every field is optional in the text; absent stays `None`
/// (a `phys_base` of 0 is a real value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinuxInfo {
    /// `OSRELEASE`, e.g. "6.1.0-56-amd64".
    pub osrelease: Option<String>,
    /// `BUILD-ID`: the vmlinux's GNU build ID, hex.
    pub build_id: Option<String>,
    /// `PAGESIZE`.
    pub page_size: Option<u64>,
    /// `KERNELOFFSET`: the KASLR slide; runtime symbol = vmlinux symbol + this.
    pub kernel_offset: Option<u64>,
    /// `NUMBER(phys_base)`: physical address of `__START_KERNEL_map`; may be negative.
    pub phys_base: Option<i64>,
    /// `SYMBOL(init_top_pgt)` (older kernels: `init_level4_pgt`), the runtime virtual address.
    pub init_top_pgt: Option<u64>,
    /// `NUMBER(pgtable_l5_enabled)`.
    pub five_level: bool,
    /// `NUMBER(sme_mask)`: AMD SME's encryption bit(s) in page-table entries.
    pub sme_mask: u64,
    /// `NUMBER(KERNEL_IMAGE_SIZE)`.
    pub kernel_image_size: Option<u64>,
    /// `CRASHTIME`: seconds since the epoch, appended at panic time (absent in dumps taken
    /// without a panic, e.g. QEMU's of a live guest).
    pub crash_time: Option<i64>,
}

impl LinuxInfo {
    /// Parse the keys above; a present but malformed value is an error with its file offset.
    pub fn from_vmcoreinfo(info: &VmcoreInfo<'_>) -> Result<LinuxInfo, Error> {
        let init_top_pgt = match info.symbol("init_top_pgt")? {
            Some(pgd) => Some(pgd),
            None => info.symbol("init_level4_pgt")?,
        };
        Ok(LinuxInfo {
            osrelease: info.osrelease().map(str::to_owned),
            build_id: info.get("BUILD-ID").map(str::to_owned),
            page_size: info.page_size()?,
            kernel_offset: info.kernel_offset()?,
            phys_base: info.phys_base()?,
            init_top_pgt,
            five_level: info.pgtable_l5_enabled()?.unwrap_or(false),
            sme_mask: info.number("sme_mask")?.unwrap_or(0) as u64,
            kernel_image_size: info
                .number("KERNEL_IMAGE_SIZE")?
                .and_then(|n| u64::try_from(n).ok()),
            crash_time: info.crash_time()?,
        })
    }

    /// The kernel image mapping: `[__START_KERNEL_map, +KERNEL_IMAGE_SIZE)` at physical
    /// `phys_base` (so `pa = va − 0xffffffff80000000 + phys_base`). It holds for kernel text,
    /// data and bss even where the page tables cannot be read; addresses in it past the image's
    /// end are not really mapped, so page tables should be asked first.
    pub fn kernel_image_map(&self) -> Option<LinearMap> {
        Some(LinearMap {
            virt_start: START_KERNEL_MAP,
            len: self.kernel_image_size.unwrap_or(DEFAULT_KERNEL_IMAGE_SIZE),
            phys_start: self.phys_base? as u64,
        })
    }

    /// The physical address of the kernel's top-level page table (`init_top_pgt` through the
    /// kernel image mapping). None when VMCOREINFO lacks the symbol or `phys_base`.
    pub fn kernel_root(&self) -> Option<u64> {
        let pgd = self.init_top_pgt?;
        let within = pgd.checked_sub(START_KERNEL_MAP)?;
        Some(within.wrapping_add(self.phys_base? as u64))
    }

    /// The page-table format this kernel uses (4 or 5 levels, SME mask).
    pub fn walker(&self) -> X86_64 {
        X86_64 {
            five_level: self.five_level,
            sme_mask: self.sme_mask,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> LinuxInfo {
        LinuxInfo {
            osrelease: None,
            build_id: None,
            page_size: None,
            kernel_offset: None,
            phys_base: Some(-0x32a0_0000),
            init_top_pgt: Some(0xffff_ffff_ba41_0000),
            five_level: false,
            sme_mask: 0,
            kernel_image_size: None,
            crash_time: None,
        }
    }

    #[test]
    fn negative_phys_base_moves_the_image_down() {
        // Values from a real Debian 6.1 boot under QEMU (KASLR offset 0x37a00000).
        let i = info();
        assert_eq!(i.kernel_root(), Some(0x3a41_0000 - 0x32a0_0000));
        let map = i.kernel_image_map().unwrap();
        assert_eq!(map.virt_start, START_KERNEL_MAP);
        assert_eq!(map.len, 1 << 30);
        assert_eq!(
            map.phys_start.wrapping_add(0x3a41_0000),
            0x3a41_0000 - 0x32a0_0000
        );
        let missing = LinuxInfo {
            phys_base: None,
            ..info()
        };
        assert_eq!(missing.kernel_root(), None);
        assert_eq!(missing.kernel_image_map(), None);
    }
}
