//! Linux kernel dumps: recognising one, placing its vmlinux under KASLR, and the commands that
//! read Linux's own structures; and the running kernel, through /proc/kcore.

pub mod facts;
#[cfg(test)]
pub(crate) mod fixture;
pub mod kaslr;
pub mod ko;
pub mod live;
pub mod modules;
pub mod percpu;
pub mod printk;
pub mod printk_log;
pub mod tasks;

use std::path::Path;

use dumpfmt::translate::AddressSpace;
use dumpfmt::{Dump, VmcoreInfo};
use symbols::Image;

use crate::error::{Error, Result};
use crate::memory::Memory;

use kaslr::Found;

/// What Linux's readers need of a session: the vmlinux, when it was given, and the kernel's
/// memory.
#[derive(Clone, Copy)]
pub struct Kernel<'a> {
    pub image: Option<&'a Image>,
    pub mem: &'a dyn Memory,
}

/// What opening learnt about a Linux kernel dump.
#[derive(Debug, Clone)]
pub struct Linux {
    /// `OSRELEASE` from VMCOREINFO, when there is one.
    pub release: Option<String>,
    /// Added to every vmlinux address (the image's load bias).
    pub kaslr_offset: u64,
    pub found: Found,
}

impl Linux {
    /// What opening says about the kernel it found.
    pub fn note(&self) -> String {
        format!(
            "Linux {}: KASLR offset {:#x}, from {}",
            self.release.as_deref().unwrap_or("(release unknown)"),
            self.kaslr_offset,
            self.found
        )
    }
}

/// Places a Linux kernel's `image` (file `path`) in `dump`: its build-id must be VMCOREINFO's,
/// and its KASLR offset becomes the image's load bias. The image's program headers are not
/// used: under KASLR the kernel is not where they say, physically or virtually; page tables
/// (VMCOREINFO's init_top_pgt, the CPUs' CR3) translate instead, and `space` gains them when
/// the dump has no VMCOREINFO to say where they are.
pub fn open(
    dump: &Dump,
    space: &mut AddressSpace<'_>,
    mut image: Image,
    info: Option<&VmcoreInfo<'_>>,
    path: &Path,
) -> Result<(Image, Linux)> {
    let belongs = |why: String| Error::NotBelonging {
        image: path.to_owned(),
        dump: dump.path().to_owned(),
        why,
    };
    let dump_id = info.and_then(|i| i.get("BUILD-ID"));
    if let (Some(dump_id), Some(own)) = (dump_id, image.build_id()) {
        let own = hex(own);
        if !dump_id.trim().eq_ignore_ascii_case(&own) {
            return Err(belongs(format!(
                "its build-id is {own}, the dump's kernel's (VMCOREINFO BUILD-ID) is {}",
                dump_id.trim()
            )));
        }
    }
    let from_info = match info {
        Some(info) => kaslr::from_vmcoreinfo(info, &image)?,
        None => None,
    };
    let (offset, found) = match from_info {
        Some(v) => v,
        None => kaslr::search(dump, space, &image)?,
    };
    if kaslr::banner_at(space, &image, offset) == Some(false) {
        return Err(belongs(format!(
            "its linux_banner is not in the dump at KASLR offset {offset:#x} ({found})"
        )));
    }
    image.set_load_bias(offset);
    // Without VMCOREINFO, the banner the dump was just checked to hold names it.
    let release = info
        .and_then(|i| i.osrelease())
        .map(str::to_owned)
        .or_else(|| kaslr::banner_release(&image));
    let linux = Linux {
        release,
        kaslr_offset: offset,
        found,
    };
    Ok((image, linux))
}

/// Whether the dump (by VMCOREINFO) or the image (by its banner) is Linux.
pub fn is_linux(info: Option<&VmcoreInfo<'_>>, image: &Image) -> bool {
    info.and_then(|i| i.osrelease()).is_some() || image.symbol("linux_banner").is_some()
}

/// Lower-case hex, as VMCOREINFO writes BUILD-ID.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
