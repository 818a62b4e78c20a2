//! The compilation units of `.debug_info`: their headers, read once, and each unit's parsed form
//! (abbreviations, string bases, language), made on first use and kept. Maps a DIE's offset in
//! `.debug_info` to its unit.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use gimli::{DebugInfoOffset, UnitHeader, UnitOffset};

use gimli::Endianity;

use crate::bytes::{Bytes, Reader};
use crate::error::{Error, Result};
use crate::namespaces::Namespaces;

/// A unit, parsed.
#[derive(Debug)]
pub(crate) struct ParsedUnit {
    pub(crate) unit: gimli::Unit<Reader>,
    pub(crate) language: Option<gimli::DwLang>,
    /// Read on first use, for Rust units only.
    namespaces: OnceLock<gimli::Result<Namespaces>>,
}

impl ParsedUnit {
    pub(crate) fn is_rust(&self) -> bool {
        self.language == Some(gimli::DW_LANG_Rust)
    }

    /// The namespace path of the DIE at unit offset `offset`, in a Rust unit.
    pub(crate) fn namespace_of(
        &self,
        dwarf: &gimli::Dwarf<Reader>,
        offset: UnitOffset<usize>,
    ) -> gimli::Result<Option<&str>> {
        if !self.is_rust() {
            return Ok(None);
        }
        match self
            .namespaces
            .get_or_init(|| Namespaces::read(dwarf, &self.unit))
        {
            Ok(namespaces) => Ok(namespaces.path_of(offset.0)),
            Err(error) => Err(*error),
        }
    }
}

#[derive(Debug)]
struct Slot {
    offset: usize,
    /// Read when the walk found the unit; on first use when the offset came from a cache.
    header: OnceLock<Result<UnitHeader<Reader>>>,
    parsed: OnceLock<Result<Arc<ParsedUnit>>>,
}

/// All units of `.debug_info`, in section order.
#[derive(Debug)]
pub(crate) struct Units {
    path: PathBuf,
    slots: Vec<Slot>,
    /// Why the header walk stopped early, if it did: the units after this point are unknown.
    header_error: Option<Error>,
}

impl Units {
    /// Finds every unit by walking the unit lengths of `section` (`.debug_info`'s bytes) from
    /// the first: a few bytes every unit, read with `pread` (see [`Bytes::copy_to`]) so that
    /// the walk maps nothing. Each header is parsed when its unit is first used.
    pub(crate) fn read(path: PathBuf, section: &Bytes, endian: gimli::RunTimeEndian) -> Units {
        let word = |at: u64, buf: &mut [u8]| section.copy_to(at, buf);
        let len = section.len() as u64;
        let mut offsets = Vec::new();
        let mut header_error = None;
        let mut offset = 0u64;
        while offset < len {
            let mut unit_length = [0; 4];
            let mut long_length = [0; 8];
            let length = if !word(offset, &mut unit_length) {
                Err("a unit header runs past the end of the section")
            } else {
                match endian.read_u32(&unit_length) {
                    0xffff_ffff if word(offset + 4, &mut long_length) => {
                        Ok(endian.read_u64(&long_length).checked_add(12))
                    }
                    0xffff_ffff => Err("a unit header runs past the end of the section"),
                    n if n >= 0xffff_fff0 => Err("a unit length uses a reserved value"),
                    n => Ok(u64::from(n).checked_add(4)),
                }
            };
            let next = match length {
                Ok(Some(n)) if n <= len - offset => Ok(offset + n),
                Ok(_) => Err("a unit's length runs past the end of the section"),
                Err(why) => Err(why),
            }
            .map_err(|what| Error::Malformed {
                path: path.clone(),
                section: ".debug_info",
                offset,
                what: what.into(),
            });
            match next {
                Ok(next) => {
                    offsets.push(offset as usize);
                    offset = next;
                }
                Err(error) => {
                    header_error = Some(error);
                    break;
                }
            }
        }
        let mut units = Units::at(path, offsets.into_iter());
        units.header_error = header_error;
        units
    }

    /// The units starting at `offsets` (ascending, as an earlier walk found them), each header
    /// read on first use.
    pub(crate) fn at(path: PathBuf, offsets: impl Iterator<Item = usize>) -> Units {
        Units {
            path,
            slots: offsets
                .map(|offset| Slot {
                    offset,
                    header: OnceLock::new(),
                    parsed: OnceLock::new(),
                })
                .collect(),
            header_error: None,
        }
    }

    /// Where each unit starts, in section order.
    pub(crate) fn offsets(&self) -> impl Iterator<Item = u64> + '_ {
        self.slots.iter().map(|slot| slot.offset as u64)
    }

    fn header<'a>(
        &self,
        dwarf: &gimli::Dwarf<Reader>,
        slot: &'a Slot,
    ) -> Result<&'a UnitHeader<Reader>> {
        slot.header
            .get_or_init(|| {
                dwarf
                    .debug_info
                    .header_from_offset(DebugInfoOffset(slot.offset))
                    .map_err(|source| Error::Dwarf {
                        path: self.path.clone(),
                        section: ".debug_info",
                        offset: slot.offset as u64,
                        source,
                    })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn header_error(&self) -> Option<&Error> {
        self.header_error.as_ref()
    }

    /// Offset in `.debug_info` of unit `index`.
    pub(crate) fn offset(&self, index: usize) -> u64 {
        self.slots.get(index).map_or(0, |slot| slot.offset as u64)
    }

    /// Unit `index`, parsed on first use.
    pub(crate) fn parsed(
        &self,
        dwarf: &gimli::Dwarf<Reader>,
        index: usize,
    ) -> Result<Arc<ParsedUnit>> {
        let slot = self.slots.get(index).ok_or_else(|| Error::Malformed {
            path: self.path.clone(),
            section: ".debug_info",
            offset: 0,
            what: format!("no unit number {index}"),
        })?;
        slot.parsed
            .get_or_init(|| {
                let error = |source| Error::Dwarf {
                    path: self.path.clone(),
                    section: ".debug_info",
                    offset: slot.offset as u64,
                    source,
                };
                let header = self.header(dwarf, slot)?.clone();
                let unit = dwarf.unit(header).map_err(error)?;
                let language = {
                    let mut entries = unit.entries();
                    let root = entries.next_dfs().map_err(error)?;
                    match root.and_then(|(_, e)| e.attr_value(gimli::DW_AT_language).transpose()) {
                        Some(Ok(gimli::AttributeValue::Language(lang))) => Some(lang),
                        Some(Err(source)) => return Err(error(source)),
                        _ => None,
                    }
                };
                Ok(Arc::new(ParsedUnit {
                    unit,
                    language,
                    namespaces: OnceLock::new(),
                }))
            })
            .clone()
    }

    /// The unit whose header is at `offset` in `.debug_info`.
    pub(crate) fn starting_at(&self, offset: u64) -> Result<usize> {
        usize::try_from(offset)
            .ok()
            .and_then(|offset| self.slots.binary_search_by_key(&offset, |s| s.offset).ok())
            .ok_or_else(|| Error::Malformed {
                path: self.path.clone(),
                section: ".debug_info",
                offset,
                what: "no unit starts at this offset".into(),
            })
    }

    /// The unit holding the DIE at `offset` in `.debug_info`, and the DIE's offset in it.
    pub(crate) fn locate(
        &self,
        dwarf: &gimli::Dwarf<Reader>,
        offset: u64,
    ) -> Result<(usize, UnitOffset<usize>)> {
        let outside = || Error::Malformed {
            path: self.path.clone(),
            section: ".debug_info",
            offset,
            what: "reference to an offset that is inside no unit's entries".into(),
        };
        let offset_usize = usize::try_from(offset).map_err(|_| outside())?;
        let index = self
            .slots
            .partition_point(|s| s.offset <= offset_usize)
            .checked_sub(1)
            .ok_or_else(outside)?;
        let slot = self.slots.get(index).ok_or_else(outside)?;
        let header = self.header(dwarf, slot)?;
        let in_unit = DebugInfoOffset(offset_usize)
            .to_unit_offset(header)
            .ok_or_else(outside)?;
        Ok((index, in_unit))
    }
}

/// How much of a unit [`root_name`] reads: its header and the start of its first DIE, which
/// holds the unit's name among its first attributes.
const ROOT_PREFIX: usize = 512;

/// The `DW_AT_name` of the unit at `offset` in `section` (`.debug_info`'s bytes): the source
/// file it was compiled from. Reads the unit's first bytes with `pread`
/// ([`Bytes::copy_to`]), so that naming every unit maps nothing of the section. `None` when
/// the name is not in those bytes or is in a form this does not read (a string-offsets index).
pub(crate) fn root_name(
    dwarf: &gimli::Dwarf<Reader>,
    section: &Bytes,
    offset: u64,
    endian: gimli::RunTimeEndian,
) -> Option<String> {
    let available = (section.len() as u64).checked_sub(offset)?;
    let mut buf = vec![0; ROOT_PREFIX.min(usize::try_from(available).ok()?)];
    if !section.copy_to(offset, &mut buf) {
        return None;
    }
    // The header's length is cut to what was read: only the first DIE is parsed.
    let long = endian.read_u32(buf.get(..4)?) == 0xffff_ffff;
    if long {
        let len = buf.len().checked_sub(12)? as u64;
        endian.write_u64(buf.get_mut(4..12)?, len);
    } else {
        let len = u32::try_from(buf.len().checked_sub(4)?).ok()?;
        endian.write_u32(buf.get_mut(..4)?, len);
    }
    let info = gimli::DebugInfo::new(&buf, endian);
    let header = info.header_from_offset(DebugInfoOffset(0)).ok()?;
    let abbreviations = dwarf
        .debug_abbrev
        .abbreviations(header.debug_abbrev_offset())
        .ok()?;
    let mut entries = header.entries(&abbreviations);
    let (_, root) = entries.next_dfs().ok()??;
    let name = match root.attr_value(gimli::DW_AT_name).ok()?? {
        gimli::AttributeValue::String(s) => s.slice().to_vec(),
        gimli::AttributeValue::DebugStrRef(o) => {
            crate::bytes::raw(&dwarf.debug_str.get_str(o).ok()?).to_vec()
        }
        gimli::AttributeValue::DebugLineStrRef(o) => {
            crate::bytes::raw(&dwarf.debug_line_str.get_str(o).ok()?).to_vec()
        }
        _ => return None,
    };
    Some(String::from_utf8_lossy(&name).into_owned())
}
