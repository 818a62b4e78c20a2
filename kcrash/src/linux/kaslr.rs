//! Where a Linux x86_64 kernel sits in the dump: its KASLR offset (the virtual slide applied to
//! every vmlinux symbol) and, when the dump does not locate the kernel's page tables, the
//! physical slide that finds them.
//!
//! The sources, best first: VMCOREINFO's `KERNELOFFSET`; its `SYMBOL(_stext)` against the
//! image's; else the image's `linux_banner` string looked for at each possible slide, through
//! page tables (a CPU's CR3, or `init_top_pgt` found by first looking for the banner in
//! physical memory). The banner is the kernel's own version string, unique per build.

use std::sync::Arc;

use dumpfmt::translate::x86_64::{START_KERNEL_MAP, X86_64};
use dumpfmt::translate::{AddressSpace, Source};
use dumpfmt::{Dump, VmcoreInfo};
use symbols::Image;

use crate::error::{Error, Result};

/// KASLR places the kernel at a multiple of CONFIG_PHYSICAL_ALIGN (2 MiB on x86_64), both
/// virtually and physically.
const ALIGN: u64 = 0x20_0000;
/// The kernel image lives in the top 1 GiB (KERNEL_IMAGE_SIZE), so the virtual slide is below.
const MAX_VIRTUAL_SLIDE: u64 = 0x4000_0000;
/// How far physical memory is searched for the banner when nothing else locates the kernel.
const MAX_PHYSICAL: u64 = 64 << 30;
/// Bytes of the banner compared: enough to hold the release, the build host and the date.
const BANNER_BYTES: u64 = 128;

/// How the KASLR offset was found, for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    KernelOffset,
    Stext,
    /// The banner found through page tables: which ones.
    Banner(&'static str),
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Found::KernelOffset => f.write_str("VMCOREINFO KERNELOFFSET"),
            Found::Stext => f.write_str("VMCOREINFO SYMBOL(_stext) against the image's _stext"),
            Found::Banner(tables) => write!(
                f,
                "the image's linux_banner found in the dump through {tables}"
            ),
        }
    }
}

/// `len` bytes of the image's file at link-time virtual address `vaddr`.
pub fn image_bytes(image: &Image, vaddr: u64, len: u64) -> Option<&[u8]> {
    let end = vaddr.checked_add(len)?;
    let seg = image
        .load_segments()
        .iter()
        .find(|s| s.vaddr <= vaddr && end <= s.vaddr.saturating_add(s.file_size))?;
    image.file_bytes(seg.file_offset + (vaddr - seg.vaddr), len)
}

/// The banner's link-time address and its bytes in the image.
fn banner(image: &Image) -> Option<(u64, &[u8])> {
    let sym = image.symbol("linux_banner")?;
    let addr = sym.address.wrapping_sub(image.load_bias());
    let len = sym.size.clamp(1, BANNER_BYTES);
    Some((addr, image_bytes(image, addr, len)?))
}

/// The release the image's banner names (`Linux version 6.1.0-56-amd64 (...`).
pub fn banner_release(image: &Image) -> Option<String> {
    let (_, bytes) = banner(image)?;
    let text = std::str::from_utf8(bytes.strip_prefix(b"Linux version ")?).ok()?;
    text.split_whitespace().next().map(str::to_owned)
}

/// The KASLR offset from VMCOREINFO, if it says.
pub fn from_vmcoreinfo(
    info: &VmcoreInfo<'_>,
    image: &Image,
) -> Result<Option<(u64, Found)>, dumpfmt::Error> {
    if let Some(offset) = info.kernel_offset()? {
        return Ok(Some((offset, Found::KernelOffset)));
    }
    let linked = image
        .symbol("_stext")
        .map(|s| s.address.wrapping_sub(image.load_bias()));
    Ok(match (info.symbol("_stext")?, linked) {
        (Some(run), Some(link)) => Some((run.wrapping_sub(link), Found::Stext)),
        _ => None,
    })
}

/// Whether `space` holds the image's banner at `offset`.
pub fn banner_at(space: &AddressSpace<'_>, image: &Image, offset: u64) -> Option<bool> {
    let (addr, want) = banner(image)?;
    let mut got = vec![0u8; want.len()];
    Some(space.read_virt(addr.wrapping_add(offset), &mut got).is_ok() && got == want)
}

/// Looks for the banner at each possible slide through the page tables `space` already has, or,
/// when it has none, through `init_top_pgt` found by looking for the banner in physical memory
/// (which then joins `space`).
pub fn search(dump: &Dump, space: &mut AddressSpace<'_>, image: &Image) -> Result<(u64, Found)> {
    if dump.machine() != dumpfmt::Machine::X86_64 {
        return Err(Error::Missing(format!(
            "the dump has no VMCOREINFO, and kcrash finds a {} kernel's KASLR offset only there",
            dump.machine()
        )));
    }
    if banner(image).is_none() {
        return Err(Error::Missing(format!(
            "{} has no linux_banner symbol in its file: cannot find the kernel in the dump",
            image.path().display()
        )));
    }
    let mut tables = "the CPUs' page tables (CR3)";
    if !space
        .sources()
        .iter()
        .any(|s| matches!(s, Source::PageTables { .. }))
    {
        let root = init_top_pgt_by_banner(dump, image)?;
        space.push(Source::PageTables {
            walker: Arc::new(X86_64::new(false)),
            root,
        });
        tables = "init_top_pgt, itself found by the banner in physical memory";
    }
    (0..MAX_VIRTUAL_SLIDE)
        .step_by(ALIGN as usize)
        .find(|&offset| banner_at(space, image, offset) == Some(true))
        .map(|offset| (offset, Found::Banner(tables)))
        .ok_or_else(|| {
            Error::Missing(format!(
                "the banner of {} is nowhere the kernel could be mapped: not this dump's kernel?",
                image.path().display()
            ))
        })
}

/// The physical address of `init_top_pgt`: the banner's physical place gives the physical slide,
/// which moves every kernel-image symbol alike.
fn init_top_pgt_by_banner(dump: &Dump, image: &Image) -> Result<u64> {
    let missing = |what: &str| Error::Missing(what.into());
    let (addr, want) = banner(image).ok_or_else(|| missing("no linux_banner"))?;
    let pgt = image
        .symbol("init_top_pgt")
        .or_else(|| image.symbol("init_level4_pgt"))
        .ok_or_else(|| missing("the image has no init_top_pgt symbol"))?
        .address
        .wrapping_sub(image.load_bias());
    let phys_of = |va: u64| image_phys(image, va);
    let (Some(banner_phys), Some(pgt_phys)) = (phys_of(addr), phys_of(pgt)) else {
        return Err(missing("the image does not say where its banner is loaded"));
    };
    let mut got = vec![0u8; want.len()];
    (0..MAX_PHYSICAL)
        .step_by(ALIGN as usize)
        .find(|&slide| dump.read_phys(banner_phys + slide, &mut got).is_ok() && got == want)
        .map(|slide| pgt_phys + slide)
        .ok_or_else(|| {
            missing("no page tables in the dump, and the banner is not in its physical memory")
        })
}

/// The link-time physical address of link-time virtual `vaddr` (PT_LOAD p_paddr), or by the
/// kernel-image rule when the headers do not say.
fn image_phys(image: &Image, vaddr: u64) -> Option<u64> {
    match image
        .load_segments()
        .iter()
        .find(|s| s.vaddr <= vaddr && vaddr < s.vaddr + s.mem_size)
    {
        Some(seg) => Some(seg.paddr + (vaddr - seg.vaddr)),
        None => vaddr.checked_sub(START_KERNEL_MAP),
    }
}
