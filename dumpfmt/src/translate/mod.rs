//! Virtual → physical translation. An [`AddressSpace`] tries its sources in order: the dump's
//! own virtual mappings, page tables walked by an architecture's [`PageTableWalker`], and linear
//! maps supplied by the caller. The architecture sits behind the walker trait: x86_64 is
//! [`x86_64::X86_64`], arm64 [`aarch64::Aarch64`].

pub mod aarch64;
pub mod x86_64;

use std::fmt;
use std::sync::{Arc, Mutex};

use crate::error::{Error, VirtReason};
use crate::{Dump, LinuxInfo, Machine};

/// Physical memory a walker reads page tables from.
pub trait PhysMemory {
    fn read_phys(&self, paddr: u64, buf: &mut [u8]) -> Result<(), Error>;
}

/// One page of a successful translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageMapping {
    pub paddr: u64,
    /// Size of the page that maps it (4 KiB, 2 MiB, 1 GiB on x86_64).
    pub page_size: u64,
}

/// Why a page-table walk did not yield an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkError {
    NonCanonical,
    NotPresent {
        level: &'static str,
        entry_paddr: u64,
        entry: u64,
    },
    /// A page-table page could not be read from the dump.
    TableUnreadable {
        level: &'static str,
        entry_paddr: u64,
        reason: String,
    },
}

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalkError::NonCanonical => write!(f, "address is not canonical"),
            WalkError::NotPresent {
                level,
                entry_paddr,
                entry,
            } => {
                write!(
                    f,
                    "{level} entry at physical {entry_paddr:#x} is not present ({entry:#x})"
                )
            }
            WalkError::TableUnreadable {
                level,
                entry_paddr,
                reason,
            } => {
                write!(
                    f,
                    "{level} entry at physical {entry_paddr:#x} cannot be read: {reason}"
                )
            }
        }
    }
}

/// An architecture's page-table format.
pub trait PageTableWalker: fmt::Debug + Send + Sync {
    /// Translate `vaddr` through the tables whose root register value is `root` (e.g. CR3).
    fn translate(
        &self,
        mem: &dyn PhysMemory,
        root: u64,
        vaddr: u64,
    ) -> Result<PageMapping, WalkError>;
}

/// `virt_start..virt_start+len` maps to `phys_start..` (a kernel image's program headers, the
/// direct map).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinearMap {
    pub virt_start: u64,
    pub len: u64,
    pub phys_start: u64,
}

impl LinearMap {
    fn translate(&self, vaddr: u64) -> Option<(u64, u64)> {
        let within = vaddr.checked_sub(self.virt_start)?;
        (within < self.len).then(|| (self.phys_start.wrapping_add(within), self.len - within))
    }
}

/// One way to translate a virtual address.
#[derive(Debug, Clone)]
pub enum Source {
    /// The dump's own virtual mappings (ELF p_vaddr where it means something).
    DumpMappings,
    /// Page tables rooted at `root`.
    PageTables {
        walker: Arc<dyn PageTableWalker>,
        root: u64,
    },
    Linear(LinearMap),
}

const TLB_ENTRIES: usize = 1024;
const TLB_PAGE_SHIFT: u32 = 12;

/// Recent page-table translations, 4 KiB granular, direct-mapped. A walk costs four or five
/// physical reads; a hit costs one lock.
struct Tlb {
    entries: Box<[TlbEntry; TLB_ENTRIES]>,
}

#[derive(Clone, Copy, Default)]
struct TlbEntry {
    /// Virtual page number + 1, so that 0 means empty.
    tag: u64,
    /// Which source (index into `sources`) gave it.
    source: usize,
    ppn: u64,
}

/// A view of a dump's virtual memory.
pub struct AddressSpace<'d> {
    dump: &'d Dump,
    sources: Vec<Source>,
    tlb: Mutex<Tlb>,
    /// Off for a live kernel, whose page tables change between reads.
    tlb_enabled: bool,
}

impl<'d> AddressSpace<'d> {
    /// No sources yet; add them in the order they should be tried.
    pub fn new(dump: &'d Dump) -> Self {
        AddressSpace {
            dump,
            sources: Vec::new(),
            tlb: Mutex::new(Tlb {
                entries: Box::new([TlbEntry::default(); TLB_ENTRIES]),
            }),
            tlb_enabled: true,
        }
    }

    /// What the dump itself offers, tried in this order:
    ///
    /// 1. its own virtual mappings (ELF `p_vaddr` that is more than a copy of `p_paddr`);
    /// 2. the kernel page tables VMCOREINFO locates ([`LinuxInfo::kernel_root`]: `init_top_pgt`
    ///    at `va − __START_KERNEL_map + NUMBER(phys_base)`), 4- or 5-level per
    ///    `NUMBER(pgtable_l5_enabled)`: the kernel's reference tables, whatever process the
    ///    CPUs were running and whether their CR3 was a page-table-isolation user copy;
    /// 3. the page tables of the first QEMU CPU note with paging on (its CR3, PCID bits masked;
    ///    5-level if VMCOREINFO or CR4.LA57 says so): the running process's user half, and the
    ///    kernel when there is no VMCOREINFO (QEMU's dumps without `-device vmcoreinfo`;
    ///    makedumpfile copies the source's notes, QEMU's included, but /proc/vmcore has none);
    /// 4. the kernel image mapping from VMCOREINFO ([`LinuxInfo::kernel_image_map`]), so that
    ///    kernel text and data read even where the page tables cannot be.
    ///
    /// Those are an x86_64 dump's. An arm64 dump's are its own mappings and the kernel's tables,
    /// `swapper_pg_dir` at its virtual address less `NUMBER(kimage_voffset)`, walked with the
    /// granule and address size VMCOREINFO gives ([`crate::Arm64Info`]).
    ///
    /// A live /proc/kcore ([`Dump::is_live`]) maps the direct map and the kernel image itself;
    /// vmalloc and module addresses go through the page tables (kcore reads their holes as
    /// zeros), walked afresh on every read.
    ///
    /// Without VMCOREINFO the KASLR slide and `phys_base` come from the vmlinux (e.g. with
    /// [`x86_64::X86_64::first_mapping`] from CR3); the caller then pushes the image mapping.
    pub fn from_dump(dump: &'d Dump) -> Result<Self, Error> {
        let mut space = AddressSpace::new(dump);
        if dump.has_virtual_mappings() {
            space.push(Source::DumpMappings);
        }
        // The kernel changes its page tables as it runs: nothing is kept between reads.
        space.tlb_enabled = !dump.is_live();
        let linux = dump.linux_info()?;
        match dump.machine() {
            Machine::X86_64 => space.push_x86_64_tables(linux.as_ref())?,
            Machine::Aarch64 => {
                let arm64 = linux.as_ref().and_then(|l| l.arm64.as_ref());
                if let Some((regime, root)) =
                    arm64.and_then(|a| Some((a.regime?, a.kernel_root()?)))
                {
                    space.push(Source::PageTables {
                        walker: Arc::new(regime),
                        root,
                    });
                }
            }
        }
        if let Some(map) = linux.as_ref().and_then(LinuxInfo::kernel_image_map) {
            space.push(Source::Linear(map));
        }
        Ok(space)
    }

    /// The kernel's reference tables, then the first paging CPU's (see [`AddressSpace::from_dump`]).
    fn push_x86_64_tables(&mut self, linux: Option<&LinuxInfo>) -> Result<(), Error> {
        let walker = linux.map_or(x86_64::X86_64::new(false), LinuxInfo::x86_64_walker);
        if let Some(root) = linux.and_then(LinuxInfo::kernel_root) {
            self.push(Source::PageTables {
                walker: Arc::new(walker),
                root,
            });
        }
        for cpu in self.dump.qemu_cpu_states() {
            let cpu = cpu?;
            if cpu.paging() && cpu.cr3() != 0 {
                let walker = x86_64::X86_64 {
                    five_level: walker.five_level || cpu.la57(),
                    ..walker
                };
                self.push(Source::PageTables {
                    walker: Arc::new(walker),
                    root: cpu.cr3(),
                });
                break;
            }
        }
        Ok(())
    }

    pub fn push(&mut self, source: Source) -> &mut Self {
        self.sources.push(source);
        self.tlb_clear();
        self
    }

    pub fn sources(&self) -> &[Source] {
        &self.sources
    }

    pub fn dump(&self) -> &'d Dump {
        self.dump
    }

    fn tlb_clear(&self) {
        let mut tlb = self.tlb.lock().unwrap_or_else(|p| p.into_inner());
        tlb.entries.fill(TlbEntry::default());
    }

    /// The physical address of `vaddr` through page tables or linear maps. Addresses only the
    /// dump's own mappings cover have no physical address here and report as not mapped.
    pub fn translate(&self, vaddr: u64) -> Result<u64, Error> {
        let mut detail = Vec::new();
        for (index, source) in self.sources.iter().enumerate() {
            if let Some((paddr, _)) = self.translate_with(index, source, vaddr, &mut detail) {
                return Ok(paddr);
            }
        }
        Err(self.not_mapped(vaddr, detail))
    }

    /// (physical address, bytes contiguous from there), or a note of why not in `detail`.
    fn translate_with(
        &self,
        index: usize,
        source: &Source,
        vaddr: u64,
        detail: &mut Vec<String>,
    ) -> Option<(u64, u64)> {
        match source {
            Source::DumpMappings => {
                detail.push("not in the dump's own mappings".into());
                None
            }
            Source::Linear(map) => {
                let hit = map.translate(vaddr);
                if hit.is_none() {
                    detail.push(format!(
                        "outside linear map [{:#x}, +{:#x})",
                        map.virt_start, map.len
                    ));
                }
                hit
            }
            Source::PageTables { walker, root } => {
                let vpn = vaddr >> TLB_PAGE_SHIFT;
                let within = vaddr & ((1 << TLB_PAGE_SHIFT) - 1);
                let page_left = (1 << TLB_PAGE_SHIFT) - within;
                let slot = (vpn as usize) % TLB_ENTRIES;
                if self.tlb_enabled {
                    let tlb = self.tlb.lock().unwrap_or_else(|p| p.into_inner());
                    let hit = tlb.entries[slot];
                    if hit.tag == vpn + 1 && hit.source == index {
                        return Some(((hit.ppn << TLB_PAGE_SHIFT) | within, page_left));
                    }
                }
                match walker.translate(self.dump, *root, vaddr) {
                    Ok(m) if !self.tlb_enabled => Some((m.paddr, page_left)),
                    Ok(m) => {
                        let mut tlb = self.tlb.lock().unwrap_or_else(|p| p.into_inner());
                        tlb.entries[slot] = TlbEntry {
                            tag: vpn + 1,
                            source: index,
                            ppn: m.paddr >> TLB_PAGE_SHIFT,
                        };
                        Some((m.paddr, page_left))
                    }
                    Err(e) => {
                        detail.push(format!("page tables at {root:#x}: {e}"));
                        None
                    }
                }
            }
        }
    }

    fn not_mapped(&self, vaddr: u64, detail: Vec<String>) -> Error {
        let detail = if detail.is_empty() {
            "no translation sources".to_string()
        } else {
            detail.join("; ")
        };
        self.dump
            .file_ref()
            .virt(vaddr, VirtReason::NotMapped { detail })
    }

    /// Read `buf.len()` bytes of virtual memory at `vaddr`, across pages and sources.
    pub fn read_virt(&self, vaddr: u64, buf: &mut [u8]) -> Result<(), Error> {
        let mut done = 0;
        'chunks: while done < buf.len() {
            let va = vaddr.wrapping_add(done as u64);
            let rest = &mut buf[done..];
            let mut detail = Vec::new();
            for (index, source) in self.sources.iter().enumerate() {
                if let Source::DumpMappings = source {
                    let n = self.dump.read_dump_mapping(va, rest)?;
                    if n > 0 {
                        done += n;
                        continue 'chunks;
                    }
                }
                if let Some((paddr, contiguous)) =
                    self.translate_with(index, source, va, &mut detail)
                {
                    let n = usize::try_from(contiguous).map_or(rest.len(), |c| c.min(rest.len()));
                    self.dump
                        .read_phys(paddr, &mut rest[..n])
                        .map_err(|e| self.phys_failure(va, paddr, e))?;
                    done += n;
                    continue 'chunks;
                }
            }
            return Err(self.not_mapped(va, detail));
        }
        Ok(())
    }

    fn phys_failure(&self, va: u64, paddr: u64, e: Error) -> Error {
        match e {
            Error::Phys { addr, reason, .. } => self.dump.file_ref().virt(
                va.wrapping_add(addr.wrapping_sub(paddr)),
                VirtReason::Phys {
                    paddr: addr,
                    reason,
                },
            ),
            other => other,
        }
    }

    /// Read a little-endian u64 at `vaddr`.
    pub fn read_u64(&self, vaddr: u64) -> Result<u64, Error> {
        let mut b = [0u8; 8];
        self.read_virt(vaddr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
}
