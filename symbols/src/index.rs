//! The name index: which DIEs define a global variable or a type of a given name. Built on the
//! first lookup by walking every unit's DIEs (in parallel over units) and reading only the
//! attributes that name things; nothing else is parsed.
//!
//! A variable is indexed under its plain name, its namespace path (`crate::module::NAME`, for
//! Rust) and its linkage name. A type is indexed under its name, its namespace path, and for C
//! also as `struct NAME`, `union NAME` or `enum NAME`.
//!
//! Names are not copied: the index holds a 64-bit hash of each, computed straight from the
//! string section (paths are hashed segment by segment as the namespaces open), sorted for
//! binary search. A hit is confirmed against the DIE's own name when it is read.

use std::path::Path;
use std::sync::Arc;

use gimli::constants as dw;
use rayon::prelude::*;

use crate::bytes::{raw, Reader};
use crate::error::{Error, Result};
use crate::index_cache::CacheFile;
use crate::name_key::{Kind, NameHash};
use crate::skim::Skim;
use crate::strings::raw_string;
use crate::units::{ParsedUnit, Units};

/// A DIE that may be what a name lookup wants.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate {
    /// Offset of the DIE in `.debug_info`.
    pub(crate) die: u64,
    /// A definition (a variable with a location, a complete type) rather than a declaration.
    pub(crate) defined: bool,
}

impl Candidate {
    /// One word: the offset with the `defined` flag in its top bit (no section is 2^63 long).
    fn pack(self) -> u64 {
        self.die | (u64::from(self.defined) << 63)
    }

    fn unpack(word: u64) -> Candidate {
        Candidate {
            die: word & !(1 << 63),
            defined: word >> 63 == 1,
        }
    }
}

/// Name hashes of one kind of name, to the DIEs that carry them.
#[derive(Debug, Default)]
pub(crate) struct NameIndex {
    entries: Entries,
    /// Units that could not be read: a name not found may have been in them.
    pub(crate) errors: Vec<Error>,
}

/// (name hash, packed candidate) pairs sorted by hash, then candidate.
#[derive(Debug)]
enum Entries {
    /// Made by this session's scan.
    Scanned(Vec<(NameHash, u64)>),
    /// A validated cache file's, read in place.
    Cached(Arc<CacheFile>, Kind),
}

impl Default for Entries {
    fn default() -> Entries {
        Entries::Scanned(Vec::new())
    }
}

impl NameIndex {
    pub(crate) fn build(
        kind: Kind,
        path: &Path,
        dwarf: &gimli::Dwarf<Reader>,
        units: &Units,
    ) -> NameIndex {
        let scanned: Vec<Result<Vec<(NameHash, u64)>>> = (0..units.len())
            .into_par_iter()
            .map(|i| {
                let unit = units.parsed(dwarf, i)?;
                scan(kind, path, dwarf, &unit, units.offset(i))
            })
            .collect();
        let mut errors: Vec<Error> = units.header_error().cloned().into_iter().collect();
        let total = scanned.iter().flatten().map(Vec::len).sum();
        let mut entries = Vec::with_capacity(total);
        for names in scanned {
            match names {
                Ok(names) => entries.extend(names),
                Err(error) => errors.push(error),
            }
        }
        entries.par_sort_unstable();
        NameIndex {
            entries: Entries::Scanned(entries),
            errors,
        }
    }

    /// The index of `kind` in a validated cache file.
    pub(crate) fn cached(file: Arc<CacheFile>, kind: Kind) -> NameIndex {
        NameIndex {
            entries: Entries::Cached(file, kind),
            errors: Vec::new(),
        }
    }

    /// The entries this session's scan made; `None` for a cache file's.
    pub(crate) fn scanned(&self) -> Option<&[(NameHash, u64)]> {
        match &self.entries {
            Entries::Scanned(entries) => Some(entries),
            Entries::Cached(..) => None,
        }
    }

    /// Every entry as plain words (name hash, packed candidate), in order, to compare a cache
    /// file's with a scan's. An error if a cache file's entries fail their checks.
    #[cfg(test)]
    pub(crate) fn words(&self) -> std::result::Result<Vec<(u64, u64)>, String> {
        match &self.entries {
            Entries::Scanned(entries) => Ok(entries.iter().map(|&(h, c)| (h.value(), c)).collect()),
            Entries::Cached(file, kind) => {
                (0..file.len(*kind)).map(|i| file.entry(*kind, i)).collect()
            }
        }
    }

    /// DIEs that may carry `name`, definitions first, each group in section order. An error
    /// if a cache file's entries fail their checks.
    pub(crate) fn lookup(&self, name: &str) -> std::result::Result<Vec<Candidate>, String> {
        let hash = NameHash::of(name);
        let mut found: Vec<Candidate> = match &self.entries {
            Entries::Scanned(entries) => {
                let start = entries.partition_point(|(h, _)| *h < hash);
                entries
                    .get(start..)
                    .unwrap_or_default()
                    .iter()
                    .take_while(|(h, _)| *h == hash)
                    .map(|&(_, candidate)| Candidate::unpack(candidate))
                    .collect()
            }
            Entries::Cached(file, kind) => {
                let (mut low, mut high) = (0, file.len(*kind));
                while low < high {
                    let middle = low + (high - low) / 2;
                    if file.entry(*kind, middle)?.0 < hash.value() {
                        low = middle + 1;
                    } else {
                        high = middle;
                    }
                }
                let mut found = Vec::new();
                for i in low..file.len(*kind) {
                    let (h, candidate) = file.entry(*kind, i)?;
                    if h != hash.value() {
                        break;
                    }
                    found.push(Candidate::unpack(candidate));
                }
                found
            }
        };
        found.sort_by_key(|c| !c.defined);
        Ok(found)
    }
}

/// A fast cursor over the entries of `unit`, which starts at `unit_offset` in `.debug_info`;
/// `None` if the unit's extent is not inside the section.
fn skim_unit<'a>(
    dwarf: &'a gimli::Dwarf<Reader>,
    unit: &'a gimli::Unit<Reader>,
    unit_offset: u64,
) -> Option<Skim<'a>> {
    use gimli::{Endianity, Reader as _, Section};
    let section = dwarf.debug_info.reader();
    let start = usize::try_from(unit_offset).ok()?;
    let header_size = unit.header.header_size();
    let end = start.checked_add(unit.header.length_including_self())?;
    let entries = raw(section).get(start.checked_add(header_size)?..end)?;
    Some(Skim::new(
        entries,
        header_size,
        &unit.abbreviations,
        unit.encoding(),
        section.endian().is_big_endian(),
    ))
}

/// The names of the types declared at the top of every unit, as C spells them (`struct
/// task_struct`, `union bpf_attr`, `enum pid_type`, `u64`), sorted and without repeats: what
/// the prompt completes a type name from. Units that do not read are passed over.
pub(crate) fn type_names(dwarf: &gimli::Dwarf<Reader>, units: &Units) -> Vec<String> {
    let mut names: Vec<String> = (0..units.len())
        .into_par_iter()
        .flat_map_iter(|i| {
            let mut found = Vec::new();
            let Ok(unit) = units.parsed(dwarf, i) else {
                return found;
            };
            let unit = &unit.unit;
            let Some(mut skim) = skim_unit(dwarf, unit, units.offset(i)) else {
                return found;
            };
            while let Ok(Some(die)) = skim.next() {
                let keyword = match die.abbreviation.tag() {
                    _ if die.depth != 1 => continue,
                    dw::DW_TAG_structure_type | dw::DW_TAG_class_type => "struct ",
                    dw::DW_TAG_union_type => "union ",
                    dw::DW_TAG_enumeration_type => "enum ",
                    dw::DW_TAG_typedef | dw::DW_TAG_base_type => "",
                    _ => continue,
                };
                let Ok(entry) = unit.entry(die.offset) else {
                    continue;
                };
                let name = entry
                    .attr_value(dw::DW_AT_name)
                    .ok()
                    .flatten()
                    .and_then(|v| raw_string(dwarf, unit, v));
                if let Some(name) = name {
                    found.push(format!("{keyword}{}", String::from_utf8_lossy(raw(&name))));
                }
            }
            found
        })
        .collect();
    names.par_sort_unstable();
    names.dedup();
    names
}

/// The names of one unit, of one kind: what a lookup confined to that unit searches.
#[derive(Debug)]
pub(crate) struct UnitNames(Vec<(NameHash, u64)>);

impl UnitNames {
    pub(crate) fn scan(
        kind: Kind,
        path: &Path,
        dwarf: &gimli::Dwarf<Reader>,
        unit: &ParsedUnit,
        unit_offset: u64,
    ) -> Result<UnitNames> {
        let mut names = scan(kind, path, dwarf, unit, unit_offset)?;
        names.sort_unstable();
        Ok(UnitNames(names))
    }

    /// The DIEs that may carry `name`, definitions first.
    pub(crate) fn lookup(&self, name: &str) -> Vec<Candidate> {
        let hash = NameHash::of(name);
        let start = self.0.partition_point(|(h, _)| *h < hash);
        let mut found: Vec<Candidate> = self.0[start..]
            .iter()
            .take_while(|(h, _)| *h == hash)
            .map(|&(_, candidate)| Candidate::unpack(candidate))
            .collect();
        found.sort_by_key(|c| !c.defined);
        found
    }
}

/// What an open DIE with children makes of the DIEs under it.
#[derive(Clone, Copy, PartialEq)]
enum Scope {
    /// A namespace: everything inside has its path under this one.
    Namespace(NameHash),
    /// A function, type or other DIE whose children are not global names.
    Local,
    /// The unit itself.
    Unit,
}

/// The naming attributes of one DIE, as raw string bytes.
#[derive(Default)]
struct Names {
    name: Option<Reader>,
    linkage_name: Option<Reader>,
    has_location: bool,
    declaration: bool,
    specification: Option<gimli::UnitOffset<usize>>,
}

fn scan(
    kind: Kind,
    path: &Path,
    dwarf: &gimli::Dwarf<Reader>,
    parsed: &ParsedUnit,
    unit_offset: u64,
) -> Result<Vec<(NameHash, u64)>> {
    let unit = &parsed.unit;
    let error_at = |offset: gimli::UnitOffset<usize>, source| Error::Dwarf {
        path: path.to_owned(),
        section: ".debug_info",
        offset: unit_offset + offset.0 as u64,
        source,
    };
    let mut names = Vec::new();
    let mut scopes: Vec<(isize, Scope)> = Vec::new();
    let mut locals = 0usize;
    let mut skim = skim_unit(dwarf, unit, unit_offset)
        .ok_or_else(|| error_at(gimli::UnitOffset(0), gimli::Error::OffsetOutOfBounds))?;
    while let Some(die) = skim.next().map_err(|e| error_at(skim.offset(), e))? {
        let (depth, offset, abbrev) = (die.depth, die.offset, die.abbreviation);
        while let Some(&(open_depth, scope)) = scopes.last() {
            if open_depth < depth {
                break;
            }
            scopes.pop();
            if scope == Scope::Local {
                locals -= 1;
            }
        }
        // Names are only recorded outside local scopes, where the innermost scope is the unit
        // or the innermost namespace.
        let prefix = match scopes.last() {
            Some(&(_, Scope::Namespace(hash))) => Some(hash),
            _ => None,
        };
        let tag = abbrev.tag();
        let interesting = locals == 0
            && match kind {
                Kind::Variables => matches!(tag, dw::DW_TAG_variable | dw::DW_TAG_namespace),
                Kind::Types => matches!(
                    tag,
                    dw::DW_TAG_namespace
                        | dw::DW_TAG_structure_type
                        | dw::DW_TAG_class_type
                        | dw::DW_TAG_union_type
                        | dw::DW_TAG_enumeration_type
                        | dw::DW_TAG_typedef
                        | dw::DW_TAG_base_type
                ),
            };
        let mut die = Names::default();
        if interesting {
            let entry = unit.entry(offset).map_err(|e| error_at(offset, e))?;
            let mut attrs = entry.attrs();
            while let Some(attr) = attrs.next().map_err(|e| error_at(offset, e))? {
                match attr.name() {
                    dw::DW_AT_name => die.name = raw_string(dwarf, unit, attr.value()),
                    dw::DW_AT_linkage_name | dw::DW_AT_MIPS_linkage_name => {
                        die.linkage_name = raw_string(dwarf, unit, attr.value())
                    }
                    dw::DW_AT_location => die.has_location = true,
                    dw::DW_AT_declaration => die.declaration = true,
                    dw::DW_AT_specification => {
                        if let gimli::AttributeValue::UnitRef(target) = attr.value() {
                            die.specification = Some(target);
                        }
                    }
                    _ => {}
                }
            }
        }
        let die_offset = unit_offset + offset.0 as u64;
        let mut scope = if depth == 0 {
            Scope::Unit
        } else {
            Scope::Local
        };
        if interesting {
            match tag {
                dw::DW_TAG_namespace => {
                    let name = die.name.as_ref().map_or(&b"{anonymous}"[..], raw);
                    scope = Scope::Namespace(NameHash::child(prefix, name));
                }
                dw::DW_TAG_variable => {
                    if die.name.is_none() {
                        if let Some(target) = die.specification {
                            die.name = specification_name(dwarf, unit, target);
                        }
                    }
                    let candidate = Candidate {
                        die: die_offset,
                        defined: die.has_location,
                    };
                    add(&mut names, prefix, None, &die, candidate);
                }
                _ => {
                    let keyword = match tag {
                        _ if parsed.is_rust() => None,
                        dw::DW_TAG_structure_type | dw::DW_TAG_class_type => Some(&b"struct "[..]),
                        dw::DW_TAG_union_type => Some(&b"union "[..]),
                        dw::DW_TAG_enumeration_type => Some(&b"enum "[..]),
                        _ => None,
                    };
                    let candidate = Candidate {
                        die: die_offset,
                        defined: !die.declaration,
                    };
                    add(&mut names, prefix, keyword, &die, candidate);
                }
            }
        }
        if abbrev.has_children() {
            if scope == Scope::Local {
                locals += 1;
            }
            scopes.push((depth, scope));
        }
    }
    Ok(names)
}

/// Adds `die` under its name, its path under `prefix`, its `keyword`-prefixed C name, and its
/// linkage name.
fn add(
    to: &mut Vec<(NameHash, u64)>,
    prefix: Option<NameHash>,
    keyword: Option<&[u8]>,
    die: &Names,
    candidate: Candidate,
) {
    let candidate = candidate.pack();
    let name = die.name.as_ref().map(raw);
    if let Some(name) = name {
        if prefix.is_some() {
            to.push((NameHash::child(prefix, name), candidate));
        }
        if let Some(keyword) = keyword {
            to.push((NameHash::keyword(keyword, name), candidate));
        }
        to.push((NameHash::child(None, name), candidate));
    }
    if let Some(linkage) = die.linkage_name.as_ref().map(raw) {
        if name != Some(linkage) {
            to.push((NameHash::child(None, linkage), candidate));
        }
    }
}

/// The name of the declaration a definition refers to with `DW_AT_specification`.
fn specification_name(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    target: gimli::UnitOffset<usize>,
) -> Option<Reader> {
    let entry = unit.entry(target).ok()?;
    raw_string(dwarf, unit, entry.attr_value(dw::DW_AT_name).ok()??)
}
