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

/// The kernel command line, or "" when the start info is missing or odd.
pub fn cmdline(start_info_paddr: u64) -> &'static str {
    if start_info_paddr == 0 || start_info_paddr >= 1 << 30 {
        return "";
    }
    // SAFETY: the first GiB of physical memory is mapped at KERNEL_VMA; QEMU put the start info
    // (and the command line it points at) in guest RAM below 1 MiB.
    unsafe {
        let info = &*((KERNEL_VMA + start_info_paddr) as *const StartInfo);
        if info.magic != MAGIC || info.cmdline_paddr == 0 || info.cmdline_paddr >= 1 << 30 {
            return "";
        }
        let text = core::ffi::CStr::from_ptr(
            (KERNEL_VMA + info.cmdline_paddr) as *const core::ffi::c_char,
        );
        text.to_str().unwrap_or("")
    }
}

/// The value of `key=` on the command line.
pub fn param<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    cmdline
        .split_ascii_whitespace()
        .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
}
