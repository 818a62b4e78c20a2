//! The compilation units of `.debug_info`: their headers, read once, and each unit's parsed form
//! (abbreviations, string bases, language), made on first use and kept. Maps a DIE's offset in
//! `.debug_info` to its unit.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use gimli::{DebugInfoOffset, UnitHeader, UnitOffset};

use crate::bytes::Reader;
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
    /// Walks every unit header: reads a little of every unit, so touches pages all over
    /// `.debug_info`.
    pub(crate) fn read(path: PathBuf, dwarf: &gimli::Dwarf<Reader>) -> Units {
        let mut slots = Vec::new();
        let mut header_error = None;
        let mut headers = dwarf.units();
        let mut next_offset = 0;
        loop {
            match headers.next() {
                Ok(Some(header)) => {
                    let offset = header
                        .offset()
                        .as_debug_info_offset()
                        .map_or(next_offset, |o| o.0);
                    next_offset = offset.saturating_add(header.length_including_self());
                    slots.push(Slot {
                        offset,
                        header: OnceLock::from(Ok(header)),
                        parsed: OnceLock::new(),
                    });
                }
                Ok(None) => break,
                Err(source) => {
                    header_error = Some(Error::Dwarf {
                        path: path.clone(),
                        section: ".debug_info",
                        offset: next_offset as u64,
                        source,
                    });
                    break;
                }
            }
        }
        Units {
            path,
            slots,
            header_error,
        }
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
