//! The PVH `hvm_start_info` QEMU passes in %ebx (xen/include/public/arch-x86/hvm/start_info.h).

/// `hvm_start_info.magic`: "xEn3" with bit 7 of the last byte set.
const MAGIC: u32 = 0x336e_c578;
/// Virtual address of physical 0 in the higher-half mapping.
pub const KERNEL_VMA: u64 = 0xffff_ffff_8000_0000;

#[repr(C)]
struct StartInfo {
    magic: u32,
    version: u32,
    flags: u32,
    nr_modules: u32,
    modlist_paddr: u64,
    cmdline_paddr: u64,
    rsdp_paddr: u64,
}

/// The start info, if `start_info_paddr` points at one in the first GiB (which is mapped).
fn start_info(start_info_paddr: u64) -> Option<&'static StartInfo> {
    if start_info_paddr == 0 || start_info_paddr >= 1 << 30 {
        return None;
    }
    // SAFETY: the first GiB of physical memory is mapped at KERNEL_VMA; QEMU put the start info
    // in guest RAM below 1 MiB.
    let info = unsafe { &*((KERNEL_VMA + start_info_paddr) as *const StartInfo) };
    (info.magic == MAGIC).then_some(info)
}

/// The kernel command line, or "" when the start info is missing or odd.
pub fn cmdline(start_info_paddr: u64) -> &'static str {
    let Some(info) = start_info(start_info_paddr) else {
        return "";
    };
    if info.cmdline_paddr == 0 || info.cmdline_paddr >= 1 << 30 {
        return "";
    }
    // SAFETY: as for the start info; QEMU put the command line there too.
    let text = unsafe {
        core::ffi::CStr::from_ptr((KERNEL_VMA + info.cmdline_paddr) as *const core::ffi::c_char)
    };
    text.to_str().unwrap_or("")
}

/// The physical address of ACPI's RSDP from the start info, 0 when it gives none.
pub fn rsdp(start_info_paddr: u64) -> u64 {
    start_info(start_info_paddr).map_or(0, |info| info.rsdp_paddr)
}

/// The value of `key=` on the command line.
pub fn param<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    cmdline
        .split_ascii_whitespace()
        .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
}
