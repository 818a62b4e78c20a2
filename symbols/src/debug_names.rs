//! The DWARF 5 name index, `.debug_names`, when the producer (or `gdb-add-index -dwarf-5`)
//! wrote one: names straight to their DIEs, or, as gdb writes it, to the unit that holds them,
//! so a lookup scans one unit instead of all. Read in one pass into the same sorted hash form
//! as the scanned index.

use std::collections::HashMap;
use std::path::Path;

use gimli::constants as dw;
use gimli::Reader as _;

use crate::bytes::{raw, Reader};
use crate::error::{Error, Result};
use crate::name_key::{Kind, NameHash};

/// Where `.debug_names` says a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Target {
    /// The DIE at this `.debug_info` offset.
    Die(u64),
    /// Somewhere in the unit at this `.debug_info` offset.
    Unit(u64),
}

/// The names of one kind in `.debug_names`, sorted by hash.
#[derive(Debug, Default)]
pub(crate) struct DebugNames {
    variables: Vec<(NameHash, Target)>,
    types: Vec<(NameHash, Target)>,
}

impl DebugNames {
    /// Where `name` may be, as this index says.
    pub(crate) fn lookup(&self, kind: Kind, name: &str) -> Vec<Target> {
        let entries = match kind {
            Kind::Variables => &self.variables,
            Kind::Types => &self.types,
        };
        let hash = NameHash::of(name);
        let start = entries.partition_point(|(h, _)| *h < hash);
        let mut found: Vec<Target> = entries
            .get(start..)
            .unwrap_or_default()
            .iter()
            .take_while(|(h, _)| *h == hash)
            .map(|&(_, target)| target)
            .collect();
        found.dedup();
        found
    }

    /// Reads every name index in the section.
    pub(crate) fn read(path: &Path, section: Reader, debug_str: &Reader) -> Result<DebugNames> {
        let error = |at: &Reader, source| Error::Dwarf {
            path: path.to_owned(),
            section: ".debug_names",
            offset: at.offset_from(&section) as u64,
            source,
        };
        let mut names = DebugNames::default();
        let mut rest = section.clone();
        while !rest.is_empty() {
            let start = rest.clone();
            read_table(&mut rest, debug_str, &mut names).map_err(|e| error(&start, e))?;
        }
        names.variables.sort_unstable();
        names.types.sort_unstable();
        Ok(names)
    }
}

/// One abbreviation: the DIE tag an entry names, and its attributes (index kind, form).
struct Abbreviation {
    tag: gimli::DwTag,
    attributes: Vec<(u64, gimli::DwForm)>,
}

/// Reads one name index (a header and its tables) from the front of `input`.
fn read_table(input: &mut Reader, debug_str: &Reader, names: &mut DebugNames) -> gimli::Result<()> {
    let (length, format) = input.read_initial_length()?;
    let mut table = input.split(length)?;
    let version = table.read_u16()?;
    if version != 5 {
        return Err(gimli::Error::UnknownVersion(u64::from(version)));
    }
    table.read_u16()?; // padding
    let unit_count = table.read_u32()? as usize;
    let local_type_units = table.read_u32()? as usize;
    let foreign_type_units = table.read_u32()? as usize;
    let bucket_count = table.read_u32()? as usize;
    let name_count = table.read_u32()? as usize;
    let abbreviations_size = table.read_u32()? as usize;
    let augmentation_size = table.read_u32()? as usize;
    table.skip(augmentation_size)?;
    let offset_size = usize::from(format.word_size());
    let units = table.split(bytes(unit_count, offset_size)?)?;
    table.skip(bytes(local_type_units, offset_size)?)?;
    table.skip(bytes(foreign_type_units, 8)?)?;
    table.skip(bytes(bucket_count, 4)?)?;
    if bucket_count != 0 {
        table.skip(bytes(name_count, 4)?)?;
    }
    let mut string_offsets = table.split(bytes(name_count, offset_size)?)?;
    let mut entry_offsets = table.split(bytes(name_count, offset_size)?)?;
    let abbreviations = read_abbreviations(table.split(abbreviations_size)?)?;
    let pool = table;

    let unit_offset = |index: u64| -> gimli::Result<u64> {
        let mut at = units.clone();
        at.skip(bytes(
            usize::try_from(index).map_err(|_| gimli::Error::OffsetOutOfBounds)?,
            offset_size,
        )?)?;
        Ok(at.read_offset(format)? as u64)
    };
    for _ in 0..name_count {
        let string = string_offsets.read_offset(format)?;
        let mut entries = pool.clone();
        entries.skip(entry_offsets.read_offset(format)?)?;
        let name = raw(debug_str)
            .get(string..)
            .and_then(|tail| std::ffi::CStr::from_bytes_until_nul(tail).ok())
            .ok_or(gimli::Error::OffsetOutOfBounds)?;
        let hash = NameHash::of(&name.to_string_lossy());
        loop {
            let code = entries.read_uleb128()?;
            if code == 0 {
                break;
            }
            let abbreviation = abbreviations
                .get(&code)
                .ok_or(gimli::Error::UnknownAbbreviation(code))?;
            let (mut unit, mut die) = ((unit_count == 1).then_some(0), None);
            for &(index, form) in &abbreviation.attributes {
                let value = read_value(&mut entries, form, format)?;
                match gimli::DwIdx(index as u16) {
                    dw::DW_IDX_compile_unit => unit = value,
                    dw::DW_IDX_die_offset => die = value,
                    _ => {}
                }
            }
            let Some(unit) = unit else { continue };
            let unit = unit_offset(unit)?;
            let target = match die {
                Some(die) => Target::Die(
                    unit.checked_add(die)
                        .ok_or(gimli::Error::OffsetOutOfBounds)?,
                ),
                None => Target::Unit(unit),
            };
            match abbreviation.tag {
                dw::DW_TAG_variable => names.variables.push((hash, target)),
                dw::DW_TAG_structure_type
                | dw::DW_TAG_class_type
                | dw::DW_TAG_union_type
                | dw::DW_TAG_enumeration_type
                | dw::DW_TAG_typedef
                | dw::DW_TAG_base_type => names.types.push((hash, target)),
                _ => {}
            }
        }
    }
    Ok(())
}

/// `count` items of `size` bytes, checked for overflow.
fn bytes(count: usize, size: usize) -> gimli::Result<usize> {
    count
        .checked_mul(size)
        .ok_or(gimli::Error::OffsetOutOfBounds)
}

fn read_abbreviations(mut input: Reader) -> gimli::Result<HashMap<u64, Abbreviation>> {
    let mut abbreviations = HashMap::new();
    loop {
        let code = input.read_uleb128()?;
        if code == 0 {
            return Ok(abbreviations);
        }
        let tag = gimli::DwTag(input.read_uleb128_u16()?);
        let mut attributes = Vec::new();
        loop {
            let index = input.read_uleb128()?;
            let form = gimli::DwForm(input.read_uleb128_u16()?);
            if index == 0 && form.0 == 0 {
                break;
            }
            attributes.push((index, form));
        }
        abbreviations.insert(code, Abbreviation { tag, attributes });
    }
}

/// An entry attribute's value, for the forms `.debug_names` uses; `None` for a flag.
fn read_value(
    input: &mut Reader,
    form: gimli::DwForm,
    format: gimli::Format,
) -> gimli::Result<Option<u64>> {
    Ok(Some(match form {
        dw::DW_FORM_flag_present => return Ok(None),
        dw::DW_FORM_flag | dw::DW_FORM_data1 | dw::DW_FORM_ref1 => u64::from(input.read_u8()?),
        dw::DW_FORM_data2 | dw::DW_FORM_ref2 => u64::from(input.read_u16()?),
        dw::DW_FORM_data4 | dw::DW_FORM_ref4 => u64::from(input.read_u32()?),
        dw::DW_FORM_data8 | dw::DW_FORM_ref8 | dw::DW_FORM_ref_sig8 => input.read_u64()?,
        dw::DW_FORM_udata | dw::DW_FORM_ref_udata => input.read_uleb128()?,
        dw::DW_FORM_sdata => input.read_sleb128()? as u64,
        dw::DW_FORM_strp | dw::DW_FORM_sec_offset => input.read_offset(format)? as u64,
        other => return Err(gimli::Error::UnknownForm(other)),
    }))
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::sync::Arc;

    use super::*;
    use crate::elf::ElfFile;
    use crate::sections::Sections;

    /// Whether `command` ran and succeeded; when not, says so (kcrash_harness::tools::not_run).
    fn ran(command: &mut Command) -> bool {
        let ok = command.status().is_ok_and(|s| s.success());
        if !ok {
            kcrash_harness::tools::not_run(
                "reads_gdb_add_index_output",
                &format!("{command:?} failed"),
            );
        }
        ok
    }

    /// gdb-add-index's index of the C fixture: each name to the one unit, by kind.
    #[test]
    fn reads_gdb_add_index_output() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("klog");
        let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/klog.c");
        let built = ran(Command::new("gcc")
            .args(["-g", "-o"])
            .arg(&program)
            .arg(fixture));
        if !built || !ran(Command::new("gdb-add-index").arg("-dwarf-5").arg(&program)) {
            return;
        }
        let sections = Sections::new(Arc::new(ElfFile::open(&program).unwrap()));
        let dwarf = sections.types_dwarf().unwrap();
        let section = sections
            .debug_names()
            .expect("a .debug_names section")
            .unwrap();
        let names = DebugNames::read(&program, section, {
            use gimli::Section;
            dwarf.debug_str.reader()
        })
        .unwrap();
        for variable in ["KLogs", "KLogBuffer", "DebugFlags", "klogLevel"] {
            assert_eq!(
                names.lookup(Kind::Variables, variable),
                [Target::Unit(0)],
                "{variable}"
            );
        }
        for ty in ["KLog", "_KLog", "Dbg_Intensity"] {
            assert_eq!(names.lookup(Kind::Types, ty), [Target::Unit(0)], "{ty}");
        }
        assert_eq!(names.lookup(Kind::Variables, "main"), []);
        assert_eq!(names.lookup(Kind::Types, "KLogs"), []);
    }
}
