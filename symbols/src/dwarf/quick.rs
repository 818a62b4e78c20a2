//! Lookups that read one unit, not every unit: a large image with no index at hand answers
//! from the unit `.debug_aranges` names for the code of the object that defined a symbol, and
//! types from the units such lookups have visited (a unit describes every type its own code
//! uses). Each unit's names are scanned once and kept. What these find is checked as the full
//! index's hits are (by the DIE's own name); what they do not find, the full index is asked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::variables::RawVariable;
use super::DwarfFile;
use crate::aranges::Aranges;
use crate::error::Result;
use crate::index::UnitNames;
use crate::name_key::{last_segment, Kind};
use crate::symtab::ObjectFile;
use crate::types::TypeId;

/// What the quick lookups keep between them.
#[derive(Debug, Default)]
pub(crate) struct Visits {
    /// Units visited, in order: where a type name is looked for first.
    units: Mutex<Vec<u64>>,
    /// Each unit's names, by kind and unit offset, once scanned.
    names: Mutex<HashMap<(Kind, u64), Arc<UnitNames>>>,
}

impl DwarfFile {
    /// Whether a name lookup costs little without the quick ones: the file has
    /// `.debug_names`, its index is built or in the cache, or its `.debug_info` is small.
    pub(crate) fn index_is_cheap(&self) -> bool {
        self.debug_info_len() < self.quick_lookups_from
            || self.variables.get().is_some()
            || self.types_index.get().is_some()
            || self.debug_names().is_some()
            || self.cached_index()
    }

    fn aranges(&self) -> &Aranges {
        self.aranges.get_or_init(
            || match self.sections.section(gimli::SectionId::DebugAranges) {
                Ok(section) => Aranges::read(section),
                Err(_) => Aranges::default(),
            },
        )
    }

    /// The names of `kind` in the unit at `unit_offset`, scanned on first use.
    pub(super) fn unit_names(&self, kind: Kind, unit_offset: u64) -> Result<Arc<UnitNames>> {
        let key = (kind, unit_offset);
        if let Some(names) = self.lock_names().get(&key) {
            return Ok(Arc::clone(names));
        }
        let units = self.units();
        let index = units.starting_at(unit_offset)?;
        let unit = units.parsed(&self.dwarf, index)?;
        let names = Arc::new(UnitNames::scan(
            kind,
            &self.path,
            &self.dwarf,
            &unit,
            unit_offset,
        )?);
        self.lock_names().insert(key, Arc::clone(&names));
        Ok(names)
    }

    fn lock_names(&self) -> std::sync::MutexGuard<'_, HashMap<(Kind, u64), Arc<UnitNames>>> {
        // A panic elsewhere while holding the lock leaves a map that is still whole.
        self.visits
            .names
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Marks the unit whose code holds link-time `code` as visited: type names are looked for
    /// there before the full index is built. The unit it names must exist (a hostile
    /// `.debug_aranges` can name any offset); `false` when none does.
    pub(crate) fn visit_unit_at(&self, code: u64) -> bool {
        let Some(unit) = self.aranges().unit_at(code) else {
            return false;
        };
        if self.units().starting_at(unit).is_err() {
            return false;
        }
        self.visit(unit);
        true
    }

    fn visit(&self, unit: u64) {
        let mut units = self
            .visits
            .units
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !units.contains(&unit) {
            units.push(unit);
        }
    }

    /// The variable `name` as the unit of one of `objects` (the object files that may have
    /// defined it, likeliest first) defines it: each object's unit is the one
    /// `.debug_aranges` names for its code, or for an object without code, a unit compiled
    /// from a file of its name. The unit that has it is then visited.
    pub(crate) fn variable_of_objects(
        &self,
        name: &str,
        objects: &[&ObjectFile],
    ) -> Result<Option<RawVariable>> {
        /// Units of one file name searched at most: `main.c` is many units' name.
        const SAME_NAME: usize = 8;
        let by_code = objects
            .iter()
            .filter_map(|o| self.aranges().unit_at(o.code?));
        // Naming every unit is done only if it comes to that.
        let by_name = objects
            .iter()
            .filter(|o| o.code.is_none())
            .flat_map(|o| self.units_from_file(&o.file).take(SAME_NAME));
        for unit in by_code.chain(by_name) {
            if self.units().starting_at(unit).is_err() {
                continue;
            }
            if let Some(variable) = self.variable_in_unit(name, unit)? {
                self.visit(unit);
                return Ok(Some(variable));
            }
        }
        Ok(None)
    }

    /// The variable `name` as a visited unit defines it.
    pub(crate) fn variable_in_visited(&self, name: &str) -> Result<Option<RawVariable>> {
        for unit in self.visited() {
            if let Some(variable) = self.variable_in_unit(name, unit)? {
                return Ok(Some(variable));
            }
        }
        Ok(None)
    }

    fn visited(&self) -> Vec<u64> {
        self.visits
            .units
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn variable_in_unit(&self, name: &str, unit: u64) -> Result<Option<RawVariable>> {
        let segment = last_segment(name);
        for candidate in self.unit_names(Kind::Variables, unit)?.lookup(name) {
            if !candidate.defined {
                continue;
            }
            let variable = self.read_variable(candidate.die)?;
            if variable.name.as_deref() == Some(segment) {
                return Ok(Some(variable));
            }
        }
        Ok(None)
    }

    /// The units compiled from a source file named `file` (its last path segment), found by
    /// naming every unit once (each unit's first bytes, read without mapping them).
    fn units_from_file<'a>(&'a self, file: &'a str) -> impl Iterator<Item = u64> + 'a {
        let names = self.unit_files.get_or_init(|| {
            let Ok(section) = self.sections.bytes_of(gimli::SectionId::DebugInfo) else {
                return Vec::new();
            };
            let endian = self.sections.endian();
            let mut names: Vec<(Box<str>, u64)> = self
                .units()
                .offsets()
                .filter_map(|offset| {
                    let name = crate::units::root_name(&self.dwarf, &section, offset, endian)?;
                    let file = name.rsplit('/').next().unwrap_or(&name);
                    Some((file.into(), offset))
                })
                .collect();
            names.sort_unstable();
            names
        });
        let start = names.partition_point(|(n, _)| &**n < file);
        names[start..]
            .iter()
            .take_while(move |(n, _)| &**n == file)
            .map(|&(_, offset)| offset)
    }

    /// The complete type `name` as a visited unit defines it.
    pub(crate) fn type_in_visited(&self, name: &str) -> Result<Option<TypeId>> {
        let name = name.trim();
        let segment = last_segment(name);
        for unit in self.visited() {
            for candidate in self.unit_names(Kind::Types, unit)?.lookup(name) {
                if !candidate.defined {
                    continue;
                }
                let id = TypeId(candidate.die);
                if self.type_(id)?.name.as_deref() == Some(segment) {
                    return Ok(Some(id));
                }
            }
        }
        Ok(None)
    }
}
