//! What a Linux kernel's VMCOREINFO says about itself, typed, and the address-space rules that
//! follow from it: where the kernel's top-level page table is, the page-table format, and on
//! x86_64 the fixed mapping of the kernel image at `__START_KERNEL_map`.

use crate::error::Error;
use crate::translate::aarch64::Aarch64;
use crate::translate::x86_64::{START_KERNEL_MAP, X86_64};
use crate::translate::LinearMap;
use crate::{Machine, VmcoreInfo};

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
    /// The dump's machine, which says which of the keys below and above apply.
    pub machine: Machine,
    /// An arm64 kernel's keys (None on x86_64).
    pub arm64: Option<Arm64Info>,
}

/// What an arm64 kernel's VMCOREINFO says of its address space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arm64Info {
    /// `NUMBER(kimage_voffset)`: kernel image virtual address less its physical address.
    pub kimage_voffset: Option<u64>,
    /// `NUMBER(PHYS_OFFSET)`: the physical address the linear map starts at (with KASLR it can
    /// be "negative").
    pub phys_offset: Option<u64>,
    /// `NUMBER(VA_BITS)`: the configured virtual address size.
    pub va_bits: Option<u32>,
    /// `SYMBOL(swapper_pg_dir)`: the kernel's top-level table, runtime virtual address.
    pub swapper_pg_dir: Option<u64>,
    /// The translation regime: granule from `PAGESIZE`, the size the tables resolve from
    /// `NUMBER(TCR_EL1_T1SZ)` (the size the CPU runs with, 5.9 on) or `NUMBER(VA_BITS)`. None
    /// when the keys are missing.
    pub regime: Option<Aarch64>,
}

impl Arm64Info {
    fn from_vmcoreinfo(info: &VmcoreInfo<'_>, page_size: Option<u64>) -> Result<Self, Error> {
        let bits = |key: &str| -> Result<Option<u32>, Error> {
            match info.number(key)? {
                None => Ok(None),
                Some(n) => u32::try_from(n)
                    .map(Some)
                    .map_err(|_| info.malformed(&format!("NUMBER({key})"), "is not a bit count")),
            }
        };
        let va_bits = bits("VA_BITS")?;
        let t1sz = bits("TCR_EL1_T1SZ")?;
        let regime = match (page_size, va_bits) {
            (Some(size), Some(configured)) => {
                if !size.is_power_of_two() {
                    return Err(info.malformed("PAGESIZE", "is not a power of two"));
                }
                let page_shift = size.trailing_zeros();
                // 4 and 16 KiB kernels built for 52 bits on a CPU without them drop a level:
                // T1SZ says so. 64 KiB ones keep their tables laid out for VA_BITS and offset
                // TTBR1 instead, with the same number of levels.
                let va_bits = match t1sz {
                    Some(t1sz) if page_shift != 16 => 64u32.saturating_sub(t1sz),
                    _ => configured,
                };
                let key = if t1sz.is_some() && page_shift != 16 {
                    "NUMBER(TCR_EL1_T1SZ)"
                } else {
                    "NUMBER(VA_BITS)"
                };
                Some(
                    Aarch64::new(page_shift, va_bits)
                        .map_err(|e| info.malformed(key, &e.to_string()))?,
                )
            }
            _ => None,
        };
        Ok(Arm64Info {
            kimage_voffset: info.number("kimage_voffset")?.map(|n| n as u64),
            phys_offset: info.number("PHYS_OFFSET")?.map(|n| n as u64),
            va_bits,
            swapper_pg_dir: info.symbol("swapper_pg_dir")?,
            regime,
        })
    }

    /// The physical address of `swapper_pg_dir`: it is in the kernel image, whose physical
    /// address is its virtual one less `kimage_voffset`.
    pub fn kernel_root(&self) -> Option<u64> {
        Some(self.swapper_pg_dir?.wrapping_sub(self.kimage_voffset?))
    }
}

impl LinuxInfo {
    /// Parse the keys above; a present but malformed value is an error with its file offset.
    pub fn from_vmcoreinfo(info: &VmcoreInfo<'_>, machine: Machine) -> Result<LinuxInfo, Error> {
        let init_top_pgt = match info.symbol("init_top_pgt")? {
            Some(pgd) => Some(pgd),
            None => info.symbol("init_level4_pgt")?,
        };
        let page_size = info.page_size()?;
        let arm64 = match machine {
            Machine::Aarch64 => Some(Arm64Info::from_vmcoreinfo(info, page_size)?),
            Machine::X86_64 => None,
        };
        Ok(LinuxInfo {
            osrelease: info.osrelease().map(str::to_owned),
            build_id: info.get("BUILD-ID").map(str::to_owned),
            page_size,
            kernel_offset: info.kernel_offset()?,
            phys_base: info.phys_base()?,
            init_top_pgt,
            five_level: info.pgtable_l5_enabled()?.unwrap_or(false),
            sme_mask: info.number("sme_mask")?.unwrap_or(0) as u64,
            kernel_image_size: info
                .number("KERNEL_IMAGE_SIZE")?
                .and_then(|n| u64::try_from(n).ok()),
            crash_time: info.crash_time()?,
            machine,
            arm64,
        })
    }

    /// An x86_64 kernel's image mapping: `[__START_KERNEL_map, +KERNEL_IMAGE_SIZE)` at physical
    /// `phys_base` (so `pa = va − 0xffffffff80000000 + phys_base`). It holds for kernel text,
    /// data and bss even where the page tables cannot be read; addresses in it past the image's
    /// end are not really mapped, so page tables should be asked first.
    pub fn kernel_image_map(&self) -> Option<LinearMap> {
        if self.machine != Machine::X86_64 {
            return None;
        }
        Some(LinearMap {
            virt_start: START_KERNEL_MAP,
            len: self.kernel_image_size.unwrap_or(DEFAULT_KERNEL_IMAGE_SIZE),
            phys_start: self.phys_base? as u64,
        })
    }

    /// The physical address of the kernel's top-level page table (x86_64: `init_top_pgt` through
    /// the kernel image mapping; arm64: [`Arm64Info::kernel_root`]). None when VMCOREINFO lacks
    /// what it takes.
    pub fn kernel_root(&self) -> Option<u64> {
        if let Some(arm64) = &self.arm64 {
            return arm64.kernel_root();
        }
        let pgd = self.init_top_pgt?;
        let within = pgd.checked_sub(START_KERNEL_MAP)?;
        Some(within.wrapping_add(self.phys_base? as u64))
    }

    /// The x86_64 page-table format this kernel uses (4 or 5 levels, SME mask).
    pub fn x86_64_walker(&self) -> X86_64 {
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
            machine: Machine::X86_64,
            arm64: None,
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
