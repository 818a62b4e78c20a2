//! The DWARF of one file, read on demand: finds DIEs by name and turns just those into
//! variables and types. Each job has its module: `lookup` chooses and keeps the name index,
//! `variables` reads a variable's DIE, `type_parser` turns a type's DIEs into a [`Type`].
//!
//! [`Type`]: crate::types::Type

mod lookup;
mod quick;
mod type_parser;
mod variables;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock, RwLock};

use gimli::AttributeValue;

use crate::bytes::{raw, Reader};
use crate::debug_names::DebugNames;
use crate::error::{Error, Result};
use crate::index::NameIndex;
use crate::name_key::{last_segment, Kind};
use crate::sections::Sections;
use crate::strings::string;
use crate::types::{Type, TypeId};
use crate::units::{ParsedUnit, Units};

use lookup::Persistent;
use quick::Visits;
use variables::RawVariable;

/// How many references a chain of typedefs, qualifiers or wrappers may follow before we call it
/// a cycle (real ones are a handful long).
pub(crate) const MAX_CHAIN: usize = 64;

/// The DWARF of one file, read on demand.
#[derive(Debug)]
pub(crate) struct DwarfFile {
    path: PathBuf,
    pub(crate) sections: Sections,
    dwarf: gimli::Dwarf<Reader>,
    units: OnceLock<Units>,
    variables: OnceLock<NameIndex>,
    types_index: OnceLock<NameIndex>,
    /// Both indexes through the cache kept between sessions, for an image the cache keeps;
    /// `None` for others, which scan each kind on its first lookup.
    persistent: OnceLock<Option<Persistent>>,
    /// The directory of the index cache, if the image's user wants one.
    index_cache: Option<PathBuf>,
    /// The `.debug_info` size from which lookups read single units first.
    quick_lookups_from: u64,
    /// Set when the cache file failed a check in a lookup: the session scans from then on.
    cache_failed: AtomicBool,
    /// `.debug_names`, if present and readable.
    debug_names: OnceLock<Option<DebugNames>>,
    types: RwLock<HashMap<TypeId, Arc<Type>>>,
    /// `.debug_aranges`, read on first use by the quick lookups.
    aranges: OnceLock<crate::aranges::Aranges>,
    /// The units the quick lookups have read.
    visits: Visits,
    /// Each unit's source file name (last segment) and offset, sorted by name: found on the
    /// first quick lookup of a variable whose object has no code.
    unit_files: OnceLock<Vec<(Box<str>, u64)>>,
}

impl DwarfFile {
    pub(crate) fn new(
        sections: Sections,
        index_cache: Option<PathBuf>,
        quick_lookups_from: u64,
    ) -> Result<DwarfFile> {
        let path = sections.file().path.clone();
        let dwarf = sections.types_dwarf()?;
        Ok(DwarfFile {
            path,
            sections,
            dwarf,
            units: OnceLock::new(),
            variables: OnceLock::new(),
            types_index: OnceLock::new(),
            persistent: OnceLock::new(),
            index_cache,
            quick_lookups_from,
            cache_failed: AtomicBool::new(false),
            debug_names: OnceLock::new(),
            types: RwLock::default(),
            aranges: OnceLock::new(),
            visits: Visits::default(),
            unit_files: OnceLock::new(),
        })
    }

    /// The length of `.debug_info`, which every DIE offset is below.
    /// Every type name declared at a unit's top, as C spells it; see `index::type_names`.
    pub(crate) fn type_names(&self) -> Vec<String> {
        crate::index::type_names(&self.dwarf, self.units())
    }

    pub(crate) fn debug_info_len(&self) -> u64 {
        use gimli::Section;
        raw(self.dwarf.debug_info.reader()).len() as u64
    }

    pub(crate) fn variable(&self, name: &str) -> Result<Option<RawVariable>> {
        let segment = last_segment(name);
        for candidate in self.candidates(Kind::Variables, name)? {
            let variable = self.read_variable(candidate.die)?;
            let named = variable.name.as_deref() == Some(segment)
                || variable.linkage_name.as_deref() == Some(name);
            if named {
                return Ok(Some(variable));
            }
        }
        self.not_found(Kind::Variables)
    }

    pub(crate) fn type_by_name(&self, name: &str) -> Result<Option<TypeId>> {
        let name = name.trim();
        let segment = last_segment(name);
        for candidate in self.candidates(Kind::Types, name)? {
            let id = TypeId(candidate.die);
            if self.type_(id)?.name.as_deref() == Some(segment) {
                return Ok(Some(id));
            }
        }
        self.not_found(Kind::Types)
    }

    pub(crate) fn malformed(&self, offset: u64, what: impl Into<String>) -> Error {
        Error::Malformed {
            path: self.path.clone(),
            section: ".debug_info",
            offset,
            what: what.into(),
        }
    }

    pub(super) fn gimli_error(&self, offset: u64) -> impl Fn(gimli::Error) -> Error + '_ {
        move |source| Error::Dwarf {
            path: self.path.clone(),
            section: ".debug_info",
            offset,
            source,
        }
    }

    /// The unit of the DIE at `offset`, and the DIE's offset in it.
    pub(super) fn unit_of(
        &self,
        offset: u64,
    ) -> Result<(Arc<ParsedUnit>, gimli::UnitOffset<usize>)> {
        let (index, in_unit) = self.units().locate(&self.dwarf, offset)?;
        Ok((self.units().parsed(&self.dwarf, index)?, in_unit))
    }

    /// A reference attribute as an offset in `.debug_info`.
    pub(super) fn reference(
        &self,
        unit: &ParsedUnit,
        die: u64,
        value: AttributeValue<Reader>,
    ) -> Result<Option<TypeId>> {
        match value {
            AttributeValue::UnitRef(offset) => offset
                .to_debug_info_offset(&unit.unit.header)
                .map(|o| Some(TypeId(o.0 as u64)))
                .ok_or_else(|| self.malformed(die, "unit reference outside .debug_info")),
            AttributeValue::DebugInfoRef(offset) => Ok(Some(TypeId(offset.0 as u64))),
            AttributeValue::DebugTypesRef(_) => Err(self.malformed(
                die,
                "reference into a type unit (DW_FORM_ref_sig8), which is not supported",
            )),
            other => Err(self.malformed(die, format!("expected a reference, found {other:?}"))),
        }
    }

    pub(super) fn string(
        &self,
        unit: &ParsedUnit,
        value: AttributeValue<Reader>,
    ) -> Option<String> {
        string(&self.dwarf, &unit.unit, value).map(String::from)
    }
}
