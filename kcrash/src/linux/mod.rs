//! Linux kernel dumps: recognising one, placing its vmlinux under KASLR, and the commands that
//! read Linux's own structures; and the running kernel, through /proc/kcore.

pub mod facts;
pub mod kaslr;
pub mod live;
pub mod modules;
pub mod printk;

use dumpfmt::VmcoreInfo;
use symbols::Image;

use kaslr::Found;

/// What opening learnt about a Linux kernel dump.
#[derive(Debug, Clone)]
pub struct Linux {
    /// `OSRELEASE` from VMCOREINFO, when there is one.
    pub release: Option<String>,
    /// Added to every vmlinux address (the image's load bias).
    pub kaslr_offset: u64,
    pub found: Found,
}

/// Whether the dump (by VMCOREINFO) or the image (by its banner) is Linux.
pub fn is_linux(info: Option<&VmcoreInfo<'_>>, image: &Image) -> bool {
    info.and_then(|i| i.osrelease()).is_some() || image.symbol("linux_banner").is_some()
}

/// Lower-case hex, as VMCOREINFO writes BUILD-ID.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
