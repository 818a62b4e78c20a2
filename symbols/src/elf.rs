//! One ELF file, parsed once on open: its symbols, where its debug sections are, and what names
//! a separate debug file for it would have. The `object::File` itself is not kept: everything
//! later is read from the memory map by file range.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use object::{CompressedFileRange, Object, ObjectSection, SectionIndex};

use crate::bytes::{Buffer, Bytes};
use crate::error::{Error, Result};
use crate::placement::{zero_based, LoadedSection, Placement, SectionAddresses};
use crate::relocate::Relocations;
use crate::symtab::SymbolTable;

/// An opened ELF file.
#[derive(Debug)]
pub(crate) struct ElfFile {
    pub(crate) path: PathBuf,
    pub(crate) data: Bytes,
    pub(crate) little_endian: bool,
    /// A relocatable object (`.o`, a kernel module): its DWARF is only right once relocated.
    pub(crate) relocatable: bool,
    /// Read on first use: opening for DWARF alone need not read every symbol.
    symbols: OnceLock<SymbolTable>,
    /// The PLT's stubs, named on first use.
    plt: OnceLock<SymbolTable>,
    /// `.debug_*` sections (also when stored as GNU `.zdebug_*`), by their `.debug_` name:
    /// section index and where the bytes are.
    debug_sections: HashMap<String, (SectionIndex, CompressedFileRange)>,
    pub(crate) build_id: Option<Vec<u8>>,
    /// File name and CRC-32 from `.gnu_debuglink`.
    pub(crate) debuglink: Option<(String, u32)>,
    /// `e_entry`, link-time.
    pub(crate) entry: u64,
    /// ET_DYN: a PIE program or shared library, loaded at a bias.
    pub(crate) position_independent: bool,
    pub(crate) load_segments: Vec<LoadSegment>,
    /// Allocated sections at their link-time addresses (unused once placed), but those
    /// [`zero_based`].
    allocated: Vec<LoadedSection>,
    /// Link-time ranges of the [`zero_based`] sections, which the load bias does not move.
    zero_based: Vec<Range<u64>>,
    /// A relocatable file's sections at their run-time addresses, once placed.
    pub(crate) placement: Option<Placement>,
    /// `.eh_frame` and what its pointers are relative to (absent in a separate debug file,
    /// where the section has no bytes).
    pub(crate) unwind: UnwindSections,
}

/// A `PT_LOAD` program header, at link-time addresses: where the loader (or a kernel's boot code)
/// puts part of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSegment {
    pub vaddr: u64,
    /// `p_paddr`: where a kernel image is loaded in physical memory.
    pub paddr: u64,
    pub file_offset: u64,
    pub file_size: u64,
    pub mem_size: u64,
}

/// The PT_LOAD headers of a 64-bit little-endian ELF file (what kcrash reads); empty for others.
fn load_segments(data: &[u8], elf_error: impl Fn(String) -> Error) -> Result<Vec<LoadSegment>> {
    use object::read::elf::{FileHeader, ProgramHeader};
    let Ok(header) = object::elf::FileHeader64::<object::LittleEndian>::parse(data) else {
        return Ok(Vec::new());
    };
    let e = object::LittleEndian;
    let headers = header
        .program_headers(e, data)
        .map_err(|err| elf_error(format!("program headers: {err}")))?;
    Ok(headers
        .iter()
        .filter(|ph| ph.p_type(e) == object::elf::PT_LOAD)
        .map(|ph| LoadSegment {
            vaddr: ph.p_vaddr(e),
            paddr: ph.p_paddr(e),
            file_offset: ph.p_offset(e),
            file_size: ph.p_filesz(e),
            mem_size: ph.p_memsz(e),
        })
        .collect())
}

/// An allocated section's bytes and link-time address, as the CFI's pointer encodings need.
#[derive(Debug, Clone)]
pub(crate) struct Placed {
    pub(crate) address: u64,
    pub(crate) bytes: Bytes,
}

/// The unwinding sections of one image file.
#[derive(Debug, Clone, Default)]
pub(crate) struct UnwindSections {
    pub(crate) eh_frame: Option<Placed>,
    pub(crate) eh_frame_hdr: Option<Placed>,
    pub(crate) text: Option<u64>,
    pub(crate) got: Option<u64>,
    /// The code is AArch64's, whose call-frame information has its own instruction (the
    /// return address's signing state, `DW_CFA_AARCH64_negate_ra_state`).
    pub(crate) aarch64: bool,
}

impl UnwindSections {
    pub(crate) fn vendor(&self) -> gimli::Vendor {
        if self.aarch64 {
            gimli::Vendor::AArch64
        } else {
            gimli::Vendor::Default
        }
    }

    pub(crate) fn bases(&self) -> gimli::BaseAddresses {
        let mut bases = gimli::BaseAddresses::default();
        if let Some(s) = &self.eh_frame {
            bases = bases.set_eh_frame(s.address);
        }
        if let Some(s) = &self.eh_frame_hdr {
            bases = bases.set_eh_frame_hdr(s.address);
        }
        if let Some(text) = self.text {
            bases = bases.set_text(text);
        }
        if let Some(got) = self.got {
            bases = bases.set_got(got);
        }
        bases
    }
}

/// The sections call-frame information is read from, where they have bytes in the file.
fn unwind_sections(file: &object::File<'_>, data: &Bytes) -> UnwindSections {
    let placed = |name: &str| {
        let section = file.section_by_name(name)?;
        let (offset, len) = section.file_range()?;
        Some(Placed {
            address: section.address(),
            bytes: data.slice(offset, len)?,
        })
    };
    let address = |name: &str| file.section_by_name(name).map(|s| s.address());
    UnwindSections {
        eh_frame: placed(".eh_frame"),
        eh_frame_hdr: placed(".eh_frame_hdr"),
        text: address(".text"),
        got: address(".got"),
        aarch64: file.architecture() == object::Architecture::Aarch64,
    }
}

/// Opens `path` for reading, with `flags` added, if it is a regular file. Opened without
/// blocking, so a FIFO (or a device that waits) where an image, a debug file or a cache file
/// should be is refused instead of hanging the session; checked on the open file.
pub(crate) fn open_regular(path: &Path, flags: i32) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | flags)
        .open(path)?;
    if file.metadata()?.file_type().is_file() {
        Ok(file)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device, socket or directory)",
        ))
    }
}

/// The GNU build-id of the 64-bit little-endian ELF file whose first bytes are `head`, found
/// through its program headers (PT_NOTE), as the loader sees it: a process core holds a
/// program's first page, not its section headers. `None` when `head` does not reach it.
pub fn build_id_in_head(head: &[u8]) -> Option<&[u8]> {
    use object::read::elf::{FileHeader, ProgramHeader};
    let e = object::LittleEndian;
    let header = object::elf::FileHeader64::<object::LittleEndian>::parse(head).ok()?;
    header
        .program_headers(e, head)
        .ok()?
        .iter()
        .filter_map(|ph| ph.notes(e, head).ok().flatten())
        .flat_map(|notes| notes.map_while(Result::ok))
        .find(|note| note.name() == b"GNU" && note.n_type(e) == object::elf::NT_GNU_BUILD_ID)
        .map(|note| note.desc())
}

impl ElfFile {
    /// Maps `path` read-only and parses its headers.
    pub(crate) fn open(path: &Path) -> Result<ElfFile> {
        let io_error = |source| Error::Io {
            path: path.to_owned(),
            source: Arc::new(source),
        };
        let file = open_regular(path, 0).map_err(io_error)?;
        // SAFETY: the map is read-only. Like every tool that maps its input, we rely on nobody
        // truncating the file while it is open; all parsing is bounds-checked against the
        // length seen at map time.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io_error)?;
        ElfFile::parse(path.to_owned(), Bytes::new(Buffer::Map(map, file)))
    }

    /// Parses an ELF image held in memory; `path` is only used to name it in errors.
    pub(crate) fn parse(path: PathBuf, data: Bytes) -> Result<ElfFile> {
        let elf_error = |what: String| Error::Elf {
            path: path.clone(),
            what,
        };
        let file = object::File::parse(&*data).map_err(|e| elf_error(e.to_string()))?;
        if file.format() != object::BinaryFormat::Elf {
            return Err(elf_error(format!("{:?} file, not ELF", file.format())));
        }
        let mut debug_sections = HashMap::new();
        for section in file.sections() {
            let Ok(name) = section.name() else { continue };
            let name = match name.strip_prefix(".zdebug_") {
                Some(rest) => format!(".debug_{rest}"),
                None if name.starts_with(".debug_") => name.to_owned(),
                None => continue,
            };
            let range = section
                .compressed_file_range()
                .map_err(|e| elf_error(format!("section {name}: {e}")))?;
            debug_sections
                .entry(name)
                .or_insert((section.index(), range));
        }
        let unwind = unwind_sections(&file, &data);
        let (zero_based, allocated): (Vec<_>, Vec<_>) = file
            .sections()
            .filter(|section| match section.flags() {
                object::SectionFlags::Elf { sh_flags } => {
                    sh_flags & u64::from(object::elf::SHF_ALLOC) != 0
                        && sh_flags & u64::from(object::elf::SHF_TLS) == 0
                }
                _ => false,
            })
            .partition(|section| zero_based(&file, section));
        let zero_based = zero_based.iter().map(|section| 0..section.size()).collect();
        let allocated = allocated
            .iter()
            .map(|section| LoadedSection {
                address: section.address(),
                size: section.size(),
            })
            .collect();
        let build_id = file
            .build_id()
            .map_err(|e| elf_error(format!("build-id note: {e}")))?
            .map(<[u8]>::to_vec);
        let debuglink = file
            .gnu_debuglink()
            .map_err(|e| elf_error(format!(".gnu_debuglink: {e}")))?
            .map(|(name, crc)| (String::from_utf8_lossy(name).into_owned(), crc));
        let little_endian = file.is_little_endian();
        let relocatable = file.kind() == object::ObjectKind::Relocatable;
        let position_independent = file.kind() == object::ObjectKind::Dynamic;
        let entry = file.entry();
        let load_segments = if little_endian && file.is_64() {
            load_segments(&data, elf_error)?
        } else {
            Vec::new()
        };
        Ok(ElfFile {
            path,
            data,
            little_endian,
            relocatable,
            symbols: OnceLock::new(),
            plt: OnceLock::new(),
            debug_sections,
            build_id,
            debuglink,
            entry,
            position_independent,
            load_segments,
            allocated,
            zero_based,
            placement: None,
            unwind,
        })
    }

    /// Places a relocatable file's sections at `addresses`: from now on its symbols and DWARF
    /// addresses are run-time ones.
    pub(crate) fn place(&mut self, addresses: &SectionAddresses) -> Result<()> {
        if !self.relocatable {
            return Err(Error::Placement {
                path: self.path.clone(),
                what: "not a relocatable object: its sections are where its program headers say \
                       (move them with a load bias instead)"
                    .into(),
            });
        }
        self.placement = Some(Placement::new(&self.path, &self.data, addresses)?);
        Ok(())
    }

    /// Run-time `link` for an image loaded at `bias`: moved by the bias unless it is in a
    /// [`zero_based`] section.
    pub(crate) fn relocated(&self, link: u64, bias: u64) -> u64 {
        if self.zero_based.iter().any(|range| range.contains(&link)) {
            link
        } else {
            link.wrapping_add(bias)
        }
    }

    /// The allocated sections, where they are (link-time, or run-time once placed), but the
    /// [`zero_based`] ones, which are at no run-time address.
    pub(crate) fn allocated(&self) -> &[LoadedSection] {
        match &self.placement {
            Some(placement) => placement.loaded(),
            None => &self.allocated,
        }
    }

    /// The relocations to apply to debug section `name` (`len` bytes once decompressed): none
    /// unless the file is placed.
    pub(crate) fn relocations(&self, name: &str, len: u64) -> Result<Relocations> {
        match (&self.placement, self.debug_sections.get(name)) {
            (Some(placement), Some(&(index, _))) => {
                Relocations::read(&self.path, &self.data, placement, index, name, len)
            }
            _ => Ok(Relocations::default()),
        }
    }

    pub(crate) fn symbols(&self) -> &SymbolTable {
        self.symbols.get_or_init(|| {
            // The file parsed when it was opened, and its bytes have not changed since.
            object::File::parse(&*self.data)
                .map(|file| SymbolTable::read(&file, self.placement.as_ref()))
                .unwrap_or_default()
        })
    }

    /// The PLT's stubs (`strcmp@plt`): from the file the program ran, never a debug file,
    /// whose `.plt` has no bytes.
    pub(crate) fn plt(&self) -> &SymbolTable {
        self.plt.get_or_init(|| {
            object::File::parse(&*self.data)
                .map(|file| SymbolTable::plt(&file))
                .unwrap_or_default()
        })
    }

    pub(crate) fn endian(&self) -> gimli::RunTimeEndian {
        if self.little_endian {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        }
    }

    pub(crate) fn has_debug_info(&self) -> bool {
        self.debug_sections.contains_key(".debug_info")
    }

    /// Where section `name` is in the file, and whether it is compressed.
    pub(crate) fn debug_section(&self, name: &str) -> Option<CompressedFileRange> {
        self.debug_sections.get(name).map(|&(_, range)| range)
    }
}
