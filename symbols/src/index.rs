//! The name index: which DIEs define a global variable or a type of a given name. Built on the
//! first lookup by walking every unit's DIEs (in parallel over units) and reading only the
//! attributes that name things; nothing else is parsed.
//!
//! A variable is indexed under its plain name, its namespace path (`crate::module::NAME`, for
//! Rust) and its linkage name. A type is indexed under its name, its namespace path, and for C
//! also as `struct NAME`, `union NAME` or `enum NAME`.

use std::collections::HashMap;
use std::path::Path;

use gimli::constants as dw;
use rayon::prelude::*;

use crate::bytes::Reader;
use crate::error::{Error, Result};
use crate::units::{ParsedUnit, Units};

/// A DIE that may be what a name lookup wants.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate {
    /// Offset of the DIE in `.debug_info`.
    pub(crate) die: u64,
    /// A definition (a variable with a location, a complete type) rather than a declaration.
    pub(crate) defined: bool,
}

/// Names of global variables and types, to the DIEs that carry them.
#[derive(Debug, Default)]
pub(crate) struct NameIndex {
    variables: HashMap<Box<str>, Vec<Candidate>>,
    types: HashMap<Box<str>, Vec<Candidate>>,
    /// Units that could not be read: a name not found may have been in them.
    pub(crate) errors: Vec<Error>,
}

impl NameIndex {
    pub(crate) fn build(path: &Path, dwarf: &gimli::Dwarf<Reader>, units: &Units) -> NameIndex {
        let scanned: Vec<Result<UnitNames>> = (0..units.len())
            .into_par_iter()
            .map(|i| {
                let unit = units.parsed(dwarf, i)?;
                scan(path, dwarf, &unit, units.offset(i))
            })
            .collect();
        let mut index = NameIndex::default();
        index.errors.extend(units.header_error().cloned());
        for names in scanned {
            match names {
                Ok(names) => {
                    for (name, candidate) in names.variables {
                        index.variables.entry(name).or_default().push(candidate);
                    }
                    for (name, candidate) in names.types {
                        index.types.entry(name).or_default().push(candidate);
                    }
                }
                Err(error) => index.errors.push(error),
            }
        }
        index
    }

    /// The best DIE for variable `name`: the first definition, else the first declaration.
    pub(crate) fn variable(&self, name: &str) -> Option<Candidate> {
        best(self.variables.get(name)?)
    }

    /// The best DIE for type `name`: the first complete type, else the first declaration.
    pub(crate) fn type_(&self, name: &str) -> Option<Candidate> {
        best(self.types.get(name)?)
    }
}

fn best(candidates: &[Candidate]) -> Option<Candidate> {
    candidates
        .iter()
        .find(|c| c.defined)
        .or_else(|| candidates.first())
        .copied()
}

/// What one unit contributes to the index.
#[derive(Default)]
struct UnitNames {
    variables: Vec<(Box<str>, Candidate)>,
    types: Vec<(Box<str>, Candidate)>,
}

/// What an open DIE with children makes of the DIEs under it.
#[derive(Clone, Copy, PartialEq)]
enum Scope {
    /// A namespace: its name is on the path of everything inside.
    Namespace { path_len: usize },
    /// A function, type or other DIE whose children are not global names.
    Local,
    /// The unit itself.
    Unit,
}

/// The named attributes of one DIE that the index looks at.
#[derive(Default)]
struct Names {
    name: Option<Box<str>>,
    linkage_name: Option<Box<str>>,
    has_location: bool,
    declaration: bool,
    specification: Option<gimli::UnitOffset<usize>>,
}

fn scan(
    path: &Path,
    dwarf: &gimli::Dwarf<Reader>,
    parsed: &ParsedUnit,
    unit_offset: u64,
) -> Result<UnitNames> {
    let unit = &parsed.unit;
    let error_at = |offset: gimli::UnitOffset<usize>, source| Error::Dwarf {
        path: path.to_owned(),
        section: ".debug_info",
        offset: unit_offset + offset.0 as u64,
        source,
    };
    let mut names = UnitNames::default();
    let mut scopes: Vec<(isize, Scope)> = Vec::new();
    let mut locals = 0usize;
    let mut prefix = String::new();
    let mut entries = unit
        .entries_raw(None)
        .map_err(|e| error_at(gimli::UnitOffset(0), e))?;
    while !entries.is_empty() {
        let depth = entries.next_depth();
        let offset = entries.next_offset();
        let abbrev = match entries.read_abbreviation() {
            Ok(Some(abbrev)) => abbrev,
            Ok(None) => continue,
            Err(e) => return Err(error_at(offset, e)),
        };
        while let Some(&(open_depth, scope)) = scopes.last() {
            if open_depth < depth {
                break;
            }
            scopes.pop();
            match scope {
                Scope::Namespace { path_len } => prefix.truncate(path_len),
                Scope::Local => locals -= 1,
                Scope::Unit => {}
            }
        }
        let tag = abbrev.tag();
        let interesting = locals == 0
            && matches!(
                tag,
                dw::DW_TAG_variable
                    | dw::DW_TAG_namespace
                    | dw::DW_TAG_structure_type
                    | dw::DW_TAG_class_type
                    | dw::DW_TAG_union_type
                    | dw::DW_TAG_enumeration_type
                    | dw::DW_TAG_typedef
                    | dw::DW_TAG_base_type
            );
        let mut die = Names::default();
        if interesting {
            for spec in abbrev.attributes() {
                let attr = entries
                    .read_attribute(*spec)
                    .map_err(|e| error_at(offset, e))?;
                match attr.name() {
                    dw::DW_AT_name => die.name = string(dwarf, unit, attr.value()),
                    dw::DW_AT_linkage_name | dw::DW_AT_MIPS_linkage_name => {
                        die.linkage_name = string(dwarf, unit, attr.value())
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
        } else {
            entries
                .skip_attributes(abbrev.attributes())
                .map_err(|e| error_at(offset, e))?;
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
                    let path_len = prefix.len();
                    if !prefix.is_empty() {
                        prefix.push_str("::");
                    }
                    prefix.push_str(die.name.as_deref().unwrap_or("{anonymous}"));
                    scope = Scope::Namespace { path_len };
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
                    add(&mut names.variables, &prefix, None, &die, candidate);
                }
                _ => {
                    let keyword = match tag {
                        _ if parsed.is_rust() => None,
                        dw::DW_TAG_structure_type | dw::DW_TAG_class_type => Some("struct "),
                        dw::DW_TAG_union_type => Some("union "),
                        dw::DW_TAG_enumeration_type => Some("enum "),
                        _ => None,
                    };
                    let candidate = Candidate {
                        die: die_offset,
                        defined: !die.declaration,
                    };
                    add(&mut names.types, &prefix, keyword, &die, candidate);
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

/// Adds `die` under its name, its path in `prefix`, its `keyword`-prefixed C name, and its
/// linkage name.
fn add(
    to: &mut Vec<(Box<str>, Candidate)>,
    prefix: &str,
    keyword: Option<&str>,
    die: &Names,
    candidate: Candidate,
) {
    if let Some(name) = &die.name {
        if !prefix.is_empty() {
            to.push((format!("{prefix}::{name}").into(), candidate));
        }
        if let Some(keyword) = keyword {
            to.push((format!("{keyword}{name}").into(), candidate));
        }
        to.push((name.clone(), candidate));
    }
    if let Some(linkage) = &die.linkage_name {
        if die.name.as_ref() != Some(linkage) {
            to.push((linkage.clone(), candidate));
        }
    }
}

/// The name of the declaration a definition refers to with `DW_AT_specification`.
fn specification_name(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    target: gimli::UnitOffset<usize>,
) -> Option<Box<str>> {
    let entry = unit.entry(target).ok()?;
    string(dwarf, unit, entry.attr_value(dw::DW_AT_name).ok()??)
}

/// A string attribute's value; `None` when it is not a string or points outside its section.
pub(crate) fn string(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    value: gimli::AttributeValue<Reader>,
) -> Option<Box<str>> {
    use gimli::Reader as _;
    let raw = dwarf.attr_string(unit, value).ok()?;
    Some(raw.to_string_lossy().ok()?.into())
}
