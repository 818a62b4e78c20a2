//! The DWARF sections of the debug file, each read on first use and, if compressed, decompressed
//! exactly once. Two `gimli::Dwarf` views are built over them: a small one with what variable and
//! type lookups need, and a full one for addr2line.

use std::sync::{Arc, OnceLock};

use gimli::{RunTimeEndian, SectionId};
use object::CompressionFormat;

use crate::bytes::{reader, Buffer, Bytes, Reader};
use crate::elf::ElfFile;
use crate::error::{Error, Result};
use crate::relocate::Relocations;

/// The largest expansion we accept from a compressed section: zlib's worst case is about
/// 1032:1, and debug sections compress by 3–20:1 with zlib or zstd. A header claiming more is
/// corrupt, and we refuse to allocate for it.
const MAX_EXPANSION: u64 = 1032;

/// Every section a `gimli::Dwarf` can use.
const ALL: [SectionId; 16] = [
    SectionId::DebugAbbrev,
    SectionId::DebugAddr,
    SectionId::DebugAranges,
    SectionId::DebugFrame,
    SectionId::DebugInfo,
    SectionId::DebugLine,
    SectionId::DebugLineStr,
    SectionId::DebugLoc,
    SectionId::DebugLocLists,
    SectionId::DebugMacinfo,
    SectionId::DebugMacro,
    SectionId::DebugRanges,
    SectionId::DebugRngLists,
    SectionId::DebugStr,
    SectionId::DebugStrOffsets,
    SectionId::DebugTypes,
];

/// What variable and type lookups read. `.debug_line` is here because gimli reads each unit's
/// line-program header when it parses the unit.
const FOR_TYPES: [SectionId; 8] = [
    SectionId::DebugAbbrev,
    SectionId::DebugAddr,
    SectionId::DebugInfo,
    SectionId::DebugLine,
    SectionId::DebugLineStr,
    SectionId::DebugStr,
    SectionId::DebugStrOffsets,
    SectionId::DebugTypes,
];

/// Lazily loaded DWARF sections of one ELF file, with their relocations applied as they are
/// read when the file is a placed relocatable one.
#[derive(Debug)]
pub(crate) struct Sections {
    file: Arc<ElfFile>,
    loaded: [OnceLock<Result<Loaded>>; ALL.len()],
    debug_names: OnceLock<Result<Loaded>>,
}

/// One section, read.
#[derive(Debug, Clone)]
struct Loaded {
    reader: Reader,
    /// The bytes `reader` reads (file-backed unless decompressed).
    bytes: Bytes,
    /// Also in `reader`, which does not give them back.
    relocations: Relocations,
}

impl Sections {
    pub(crate) fn endian(&self) -> RunTimeEndian {
        self.file.endian()
    }

    pub(crate) fn new(file: Arc<ElfFile>) -> Sections {
        Sections {
            file,
            loaded: Default::default(),
            debug_names: OnceLock::new(),
        }
    }

    pub(crate) fn file(&self) -> &ElfFile {
        &self.file
    }

    /// Section `id`, decompressed and with its relocations; empty if the file does not have it.
    pub(crate) fn section(&self, id: SectionId) -> Result<Reader> {
        Ok(match self.loaded(id)? {
            Some(loaded) => loaded.reader.clone(),
            None => self.empty(),
        })
    }

    /// The bytes of section `id` as stored (decompressed if it was compressed); empty if the
    /// file does not have it.
    pub(crate) fn bytes_of(&self, id: SectionId) -> Result<Bytes> {
        Ok(match self.loaded(id)? {
            Some(loaded) => loaded.bytes.clone(),
            None => Bytes::empty(),
        })
    }

    /// The relocations applied to section `id` as it is read.
    pub(crate) fn relocations(&self, id: SectionId) -> Result<Relocations> {
        Ok(self
            .loaded(id)?
            .map(|loaded| loaded.relocations.clone())
            .unwrap_or_default())
    }

    fn loaded(&self, id: SectionId) -> Result<Option<&Loaded>> {
        let Some(slot) = ALL
            .iter()
            .position(|&s| s == id)
            .and_then(|i| self.loaded.get(i))
        else {
            return Ok(None);
        };
        match slot.get_or_init(|| self.load(id.name())) {
            Ok(loaded) => Ok(Some(loaded)),
            Err(error) => Err(error.clone()),
        }
    }

    /// `.debug_names` (which gimli has no `SectionId` for), read once, if the file has it.
    pub(crate) fn debug_names(&self) -> Option<Result<Reader>> {
        const NAME: &str = ".debug_names";
        self.file.debug_section(NAME)?;
        Some(
            self.debug_names
                .get_or_init(|| self.load(NAME))
                .clone()
                .map(|loaded| loaded.reader),
        )
    }

    /// Maps all of `.debug_info` now, when it is read in place: the name scan is about to walk
    /// it, and one call beats a page fault every few pages. A session that finds its names in
    /// an index cache does not call this, and touches only the DIEs it reads.
    pub(crate) fn prefault_debug_info(&self) {
        if let Some(range) = self.file.debug_section(".debug_info") {
            if range.format == CompressionFormat::None {
                if let Some(stored) = self.file.data.slice(range.offset, range.compressed_size) {
                    stored.prefault();
                }
            }
        }
    }

    fn empty(&self) -> Reader {
        reader(Bytes::empty(), self.endian(), Relocations::default())
    }

    fn load(&self, name: &'static str) -> Result<Loaded> {
        let bytes = self.bytes(name)?;
        let relocations = self.file.relocations(name, bytes.len() as u64)?;
        Ok(Loaded {
            reader: reader(bytes.clone(), self.endian(), relocations.clone()),
            bytes,
            relocations,
        })
    }

    fn bytes(&self, name: &'static str) -> Result<Bytes> {
        let Some(range) = self.file.debug_section(name) else {
            return Ok(Bytes::empty());
        };
        let error = |what: String| Error::Compressed {
            path: self.file.path.clone(),
            section: name,
            offset: range.offset,
            what,
        };
        let stored = self
            .file
            .data
            .slice(range.offset, range.compressed_size)
            .ok_or_else(|| {
                error(format!(
                    "{} bytes at this offset run past the end of the file",
                    range.compressed_size
                ))
            })?;
        if range.format == CompressionFormat::None {
            return Ok(stored);
        }
        if range.uncompressed_size > range.compressed_size.saturating_mul(MAX_EXPANSION) {
            return Err(error(format!(
                "claims {} bytes uncompressed from {} compressed, a ratio over {MAX_EXPANSION}:1",
                range.uncompressed_size, range.compressed_size
            )));
        }
        let data = range
            .data(&*self.file.data)
            .and_then(|compressed| compressed.decompress())
            .map_err(|e| error(e.to_string()))?;
        Ok(Bytes::new(Buffer::Owned(data.into_owned())))
    }

    /// A `Dwarf` over the sections in `wanted` (the others empty).
    fn dwarf(&self, wanted: &[SectionId]) -> Result<gimli::Dwarf<Reader>> {
        gimli::Dwarf::load(|id| -> Result<Reader> {
            if wanted.contains(&id) {
                self.section(id)
            } else {
                Ok(self.empty())
            }
        })
    }

    /// What variable and type lookups need.
    pub(crate) fn types_dwarf(&self) -> Result<gimli::Dwarf<Reader>> {
        self.dwarf(&FOR_TYPES)
    }

    /// Everything, for line lookups.
    pub(crate) fn full_dwarf(&self) -> Result<gimli::Dwarf<Reader>> {
        self.dwarf(&ALL)
    }
}
