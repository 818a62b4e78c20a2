//! ELF64 core files: QEMU `dump-guest-memory` ELF, /proc/vmcore copies, Linux and gdb process
//! cores, and a running kernel's /proc/kcore. Only the header and program headers are parsed at
//! open. Memory reads go through [`Storage::read_at`] and nothing is cached, so the same reader
//! reads the live /proc/kcore.

use crate::bytes::{slice, u16_le, u32_le, u64_le};
use crate::claim::{Claim, HEADERS_MAX, INFLATED_MAX};
use crate::detect::ET_CORE;
use crate::error::{Error, FileRef, MissingReason};
use crate::range_map::{RangeMap, RangeMapBuilder};
use crate::storage::Storage;
use crate::Machine;

const PT_LOAD: u32 = 1;
/// /proc/kcore's p_paddr for a segment with no physical address.
const NO_PADDR: u64 = u64::MAX;
const PT_NOTE: u32 = 4;
const PN_XNUM: u16 = 0xffff;
const PHDR_SIZE: u64 = 56;
const SHDR_SIZE: u64 = 64;
/// A section that takes no bytes of the file.
const SHT_NOBITS: u32 = 8;
/// p_flags: the memory was writable.
const PF_W: u32 = 0x2;
/// makedumpfile's DUMP_ELF_INCOMPLETE.
const EF_INCOMPLETE: u32 = 0x1;

/// One PT_LOAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub vaddr: u64,
    pub paddr: u64,
    pub offset: u64,
    pub filesz: u64,
    pub memsz: u64,
    /// `p_flags` (PF_X 1, PF_W 2, PF_R 4): a process core's mapping's permissions at the crash.
    pub flags: u32,
    /// File offset of the program header, for error messages.
    pub header_offset: u64,
}

impl Segment {
    /// The memory was writable (PF_W): only the dump's bytes say what it held.
    pub fn writable(&self) -> bool {
        self.flags & PF_W != 0
    }
}

/// How far a gzipped ELF core's headers say its data reaches: the program header table, every
/// segment's file bytes and the section headers. `read(offset, len)`: the inflated bytes there,
/// `None` while they are not inflated yet.
pub(crate) fn claimed_len(
    read: &dyn Fn(u64, u64) -> Option<Vec<u8>>,
    file: &FileRef,
) -> Result<Claim, Error> {
    let Some(header) = read(0, 64) else {
        return Ok(Claim::Need(64));
    };
    let f64 = |at: u64| u64_le(&header, at).unwrap_or_default();
    let f16 = |at: u64| u64::from(u16_le(&header, at).unwrap_or_default());
    let (phoff, shoff, phnum, shentsize, shnum) = (f64(32), f64(40), f16(56), f16(58), f16(60));
    let past = |at: u64, what: &str, end: Option<u64>, max: u64| match end {
        Some(end) if end <= max => Ok(end),
        _ => Err(file.malformed(at, format!("{what} would end past {max:#x} bytes"))),
    };
    // gdb writes its section headers after the memory: they bound the file too.
    let sections_end = past(
        40,
        "the section headers",
        shoff.checked_add(shentsize * shnum),
        INFLATED_MAX,
    )?;
    // PN_XNUM: the real count is in section header 0, as the ELF reader reads it.
    let phnum = if phnum == u64::from(PN_XNUM) {
        let at = past(40, "section header 0", shoff.checked_add(64), INFLATED_MAX)?;
        let Some(sh) = read(shoff, 64) else {
            return Ok(Claim::Need(at));
        };
        u64::from(u32_le(&sh, 44).unwrap_or_default())
    } else {
        phnum
    };
    // Held in memory to be read: bounded as a live core's headers are.
    let table_end = past(
        32,
        "the program headers",
        phoff.checked_add(phnum * PHDR_SIZE),
        HEADERS_MAX,
    )?;
    let Some(table) = read(phoff, phnum * PHDR_SIZE) else {
        return Ok(Claim::Need(table_end));
    };
    let mut end = table_end.max(sections_end);
    // Section contents (QEMU's .shstrtab, behind the memory) are part of the file too.
    if shentsize == SHDR_SIZE && shnum > 0 {
        let Some(sections) = read(shoff, shnum * SHDR_SIZE) else {
            return Ok(Claim::Need(sections_end));
        };
        for (i, sh) in sections.chunks_exact(SHDR_SIZE as usize).enumerate() {
            let (kind, offset, size) = (
                u32_le(sh, 4).unwrap_or_default(),
                u64_le(sh, 24).unwrap_or_default(),
                u64_le(sh, 32).unwrap_or_default(),
            );
            if kind != SHT_NOBITS && size > 0 {
                let at = shoff + i as u64 * SHDR_SIZE;
                end = end.max(past(
                    at,
                    "the section's bytes",
                    offset.checked_add(size),
                    INFLATED_MAX,
                )?);
            }
        }
    }
    for (i, ph) in table.chunks_exact(PHDR_SIZE as usize).enumerate() {
        let (offset, filesz) = (
            u64_le(ph, 8).unwrap_or_default(),
            u64_le(ph, 32).unwrap_or_default(),
        );
        // QEMU's "offset -1, size 0" holds no bytes.
        if filesz > 0 {
            let at = phoff + i as u64 * PHDR_SIZE;
            end = end.max(past(
                at,
                "the segment's file bytes",
                offset.checked_add(filesz),
                INFLATED_MAX,
            )?);
        }
    }
    Ok(Claim::End(end))
}

/// What an ELF core's notes say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CoreKind {
    /// NT_AUXV or NT_FILE: Linux and gdb write them for processes only.
    Process,
    /// QEMU CPU state or VMCOREINFO: a whole machine. (A QEMU paging=true dump may map every
    /// segment from physical address 0, so p_paddr alone cannot tell.)
    Kernel,
}

fn core_kind(data: &[u8], areas: &[(u64, u64)], file: &FileRef) -> Option<CoreKind> {
    let areas = areas
        .iter()
        .filter_map(|&(offset, size)| Some((crate::bytes::slice(data, offset, size)?, offset)))
        .collect();
    crate::notes::Notes::new(file, areas)
        .map_while(Result::ok)
        .find_map(|n| {
            if n.is("CORE", crate::notes::NT_AUXV) || n.is("CORE", crate::notes::NT_FILE) {
                Some(CoreKind::Process)
            } else if n.name == b"QEMU" || n.name == b"VMCOREINFO" {
                Some(CoreKind::Kernel)
            } else {
                None
            }
        })
}

pub(crate) struct ElfCore {
    segments: Vec<Segment>,
    /// Physical address → segment index. Empty for process cores (they have no physical view).
    phys: RangeMap<usize>,
    /// Virtual address → segment index. Empty when p_vaddr carries no mapping (QEMU paging=false).
    virt: RangeMap<usize>,
    /// (file offset, size) of each PT_NOTE.
    notes: Vec<(u64, u64)>,
    pub machine: u16,
    pub incomplete: bool,
    pub process_core: bool,
}

impl ElfCore {
    /// `live`: the file is a running kernel's /proc/kcore, whose segments are windows onto one
    /// memory: [`NO_PADDR`] for those with no physical address (vmalloc, modules, vmemmap), and
    /// the kernel text seen again in the direct map.
    pub fn parse(data: &[u8], file: &FileRef, live: bool) -> Result<ElfCore, Error> {
        let field = |off: u64, what: &str| {
            file.malformed(off, format!("file too short for ELF header field {what}"))
        };
        if data.get(4) != Some(&2) {
            return Err(file.malformed(4, "not a 64-bit ELF file (EI_CLASS is not ELFCLASS64)"));
        }
        if data.get(5) != Some(&1) {
            return Err(file.malformed(5, "not a little-endian ELF file"));
        }
        let e_type = u16_le(data, 16).ok_or_else(|| field(16, "e_type"))?;
        if e_type != ET_CORE {
            return Err(file.malformed(16, format!("ELF type {e_type} is not ET_CORE (4)")));
        }
        let machine = u16_le(data, 18).ok_or_else(|| field(18, "e_machine"))?;
        if Machine::from_elf(machine).is_none() {
            return Err(file.malformed(
                18,
                format!("ELF machine {machine} is neither x86_64 (62) nor AArch64 (183)"),
            ));
        }
        let phoff = u64_le(data, 32).ok_or_else(|| field(32, "e_phoff"))?;
        let shoff = u64_le(data, 40).ok_or_else(|| field(40, "e_shoff"))?;
        let flags = u32_le(data, 48).ok_or_else(|| field(48, "e_flags"))?;
        let phentsize = u16_le(data, 54).ok_or_else(|| field(54, "e_phentsize"))?;
        let mut phnum = u64::from(u16_le(data, 56).ok_or_else(|| field(56, "e_phnum"))?);
        if phnum == u64::from(PN_XNUM) {
            // The real count is in section header 0's sh_info.
            let at = shoff.checked_add(44).ok_or_else(|| field(40, "e_shoff"))?;
            phnum = u64::from(u32_le(data, at).ok_or_else(|| {
                file.malformed(
                    at,
                    "e_phnum is PN_XNUM but section header 0 is past the end of the file",
                )
            })?);
        }
        if phnum > 0 && u64::from(phentsize) != PHDR_SIZE {
            return Err(file.malformed(54, format!("e_phentsize {phentsize} is not {PHDR_SIZE}")));
        }
        let table = phnum
            .checked_mul(PHDR_SIZE)
            .and_then(|len| slice(data, phoff, len))
            .ok_or_else(|| {
                file.malformed(
                    32,
                    format!("{phnum} program headers at offset {phoff:#x} run past the end of the file ({} bytes)", data.len()),
                )
            })?;

        let mut segments = Vec::new();
        let mut notes = Vec::new();
        for (i, ph) in table.chunks_exact(PHDR_SIZE as usize).enumerate() {
            let at = phoff + i as u64 * PHDR_SIZE;
            let f = |o: u64| u64_le(ph, o).unwrap_or_default();
            let (offset, vaddr, paddr, filesz, memsz) = (f(8), f(16), f(24), f(32), f(40));
            let p_flags = u32_le(ph, 4).unwrap_or_default();
            match u32_le(ph, 0).unwrap_or_default() {
                PT_NOTE => {
                    if offset
                        .checked_add(filesz)
                        .is_none_or(|end| end > data.len() as u64)
                    {
                        return Err(file.malformed(
                            at,
                            format!("PT_NOTE [{offset:#x}, +{filesz:#x}) runs past the end of the file ({} bytes)", data.len()),
                        ));
                    }
                    notes.push((offset, filesz));
                }
                PT_LOAD => {
                    if filesz > memsz {
                        return Err(file.malformed(
                            at,
                            format!("PT_LOAD p_filesz {filesz:#x} exceeds p_memsz {memsz:#x}"),
                        ));
                    }
                    // QEMU marks a mapping of memory it did not store with offset -1, size 0.
                    if filesz == 0 && offset == u64::MAX {
                        continue;
                    }
                    if offset.checked_add(filesz).is_none()
                        || (paddr.checked_add(memsz).is_none() && !(live && paddr == NO_PADDR))
                        || vaddr.checked_add(memsz).is_none()
                    {
                        return Err(file.malformed(
                            at,
                            "PT_LOAD offset or address plus size overflows 64 bits",
                        ));
                    }
                    segments.push(Segment {
                        vaddr,
                        paddr,
                        offset,
                        filesz,
                        memsz,
                        flags: p_flags,
                        header_offset: at,
                    });
                }
                _ => {}
            }
        }

        let process_core = match core_kind(data, &notes, file) {
            Some(kind) => kind == CoreKind::Process,
            // No telling note: a process core is one whose segments carry no physical address.
            None => segments.len() > 1 && segments.iter().all(|s| s.paddr == 0),
        };
        let phys = if process_core {
            RangeMap::default()
        } else if live {
            live_physical_map(&segments)
        } else {
            physical_map(&segments, file)?
        };
        let has_virtual = segments.iter().any(|s| s.vaddr != s.paddr);
        let mut virt = RangeMapBuilder::new();
        if has_virtual {
            // /proc/kcore reads a hole of vmalloc or module space as zeros, which would pass for
            // memory: those addresses are translated through the page tables instead.
            for (i, s) in segments.iter().enumerate() {
                if !(live && s.paddr == NO_PADDR) {
                    virt.insert_under(s.vaddr, s.vaddr + s.memsz, i);
                }
            }
        }
        Ok(ElfCore {
            segments,
            phys,
            virt: virt.build(),
            notes,
            machine,
            incomplete: flags & EF_INCOMPLETE != 0,
            process_core,
        })
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    pub fn note_areas(&self) -> &[(u64, u64)] {
        &self.notes
    }

    pub fn has_virtual_mappings(&self) -> bool {
        !self.virt.entries().is_empty()
    }

    pub fn read_phys(
        &self,
        storage: &Storage,
        file: &FileRef,
        paddr: u64,
        buf: &mut [u8],
    ) -> Result<(), Error> {
        self.read_mapped(&self.phys, |s| s.paddr, storage, paddr, buf)
            .map_err(|(addr, reason)| file.phys(addr, reason))
    }

    /// Read through the dump's own virtual mappings. `Ok(n)`: the first `n` bytes were read and
    /// the next address is not covered by any segment (n may be 0).
    pub fn read_virt_prefix(
        &self,
        storage: &Storage,
        vaddr: u64,
        buf: &mut [u8],
    ) -> Result<usize, (u64, MissingReason)> {
        let mut done = 0;
        while done < buf.len() {
            let addr = vaddr.wrapping_add(done as u64);
            let Some(entry) = self.virt.find(addr) else {
                return Ok(done);
            };
            let seg = &self.segments[entry.value];
            let n = chunk_len(entry.end - addr, buf.len() - done);
            read_segment(storage, seg, addr - seg.vaddr, &mut buf[done..done + n])
                .map_err(|(skip, reason)| (addr + skip, reason))?;
            done += n;
        }
        Ok(done)
    }

    fn read_mapped(
        &self,
        map: &RangeMap<usize>,
        base: impl Fn(&Segment) -> u64,
        storage: &Storage,
        start: u64,
        buf: &mut [u8],
    ) -> Result<(), (u64, MissingReason)> {
        let mut done = 0;
        while done < buf.len() {
            let addr = start.wrapping_add(done as u64);
            let entry = map.find(addr).ok_or((addr, MissingReason::Unmapped))?;
            let seg = &self.segments[entry.value];
            let n = chunk_len(entry.end - addr, buf.len() - done);
            read_segment(storage, seg, addr - base(seg), &mut buf[done..done + n])
                .map_err(|(skip, reason)| (addr + skip, reason))?;
            done += n;
        }
        Ok(())
    }
}

fn chunk_len(in_range: u64, wanted: usize) -> usize {
    usize::try_from(in_range).map_or(wanted, |r| r.min(wanted))
}

/// Copy `out.len()` bytes starting `within` bytes into `seg`. The part past p_filesz is not in
/// the file: makedumpfile's ELF output (`-E`) ends a segment that way at a run of excluded
/// pages, QEMU where a mapping runs past a RAM block, and a process core where it chose not to
/// dump file-backed text. None of them is known to be zeros, so it reads as
/// [`MissingReason::Excluded`] ("not in dump"), as an excluded kdump page does. On failure, the
/// offset into `out` of the first byte that could not be read.
fn read_segment(
    storage: &Storage,
    seg: &Segment,
    within: u64,
    out: &mut [u8],
) -> Result<(), (u64, MissingReason)> {
    let from_file = seg.filesz.saturating_sub(within).min(out.len() as u64) as usize;
    if from_file > 0 {
        let offset = seg.offset + within;
        let available = storage
            .read_at(offset, &mut out[..from_file])
            .map_err(|e| {
                (
                    0,
                    MissingReason::Unreadable {
                        offset,
                        error: e.to_string(),
                    },
                )
            })?;
        if available < from_file {
            return Err((
                available as u64,
                MissingReason::Truncated {
                    offset: offset + available as u64,
                    incomplete_flag: false,
                },
            ));
        }
    }
    if from_file < out.len() {
        return Err((from_file as u64, MissingReason::Excluded));
    }
    Ok(())
}

/// Physical address → segment for /proc/kcore: its segments with a physical address are views
/// of the same live memory, so where two overlap (the kernel text and the direct map) either
/// reads the same bytes; the first one listed is used.
fn live_physical_map(segments: &[Segment]) -> RangeMap<usize> {
    let mut map = RangeMapBuilder::new();
    for (i, s) in segments.iter().enumerate() {
        if s.paddr != NO_PADDR {
            map.insert_under(s.paddr, s.paddr.saturating_add(s.memsz), i);
        }
    }
    map.build()
}

/// Physical address → segment, refusing segments that give one physical address two different
/// contents. (QEMU's paging=true dumps legitimately repeat the same physical bytes under several
/// virtual mappings; those agree and are accepted.)
fn physical_map(segments: &[Segment], file: &FileRef) -> Result<RangeMap<usize>, Error> {
    let mut order: Vec<usize> = (0..segments.len()).collect();
    order.sort_by_key(|&i| (segments[i].paddr, std::cmp::Reverse(segments[i].memsz)));
    let mut widest: Option<usize> = None;
    let mut map = RangeMapBuilder::new();
    for &i in &order {
        let s = &segments[i];
        if let Some(w) = widest {
            let p = &segments[w];
            let overlap_end = (p.paddr + p.memsz).min(s.paddr + s.memsz);
            if s.paddr < overlap_end {
                let same_bytes = p.offset.wrapping_sub(p.paddr) == s.offset.wrapping_sub(s.paddr)
                    && overlap_end <= p.paddr + p.filesz
                    && overlap_end <= s.paddr + s.filesz;
                if !same_bytes {
                    return Err(file.malformed(
                        s.header_offset,
                        format!(
                            "PT_LOAD overlaps the one at header offset {:#x} at physical [{:#x}, {overlap_end:#x}) with different contents",
                            p.header_offset, s.paddr
                        ),
                    ));
                }
            }
            if s.paddr + s.memsz > p.paddr + p.memsz {
                widest = Some(i);
            }
        } else {
            widest = Some(i);
        }
        map.insert_under(s.paddr, s.paddr + s.memsz, i);
    }
    Ok(map.build())
}
