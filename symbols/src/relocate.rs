//! The relocations of a relocatable file's DWARF sections, resolved against the sections'
//! run-time addresses, for gimli's `RelocateReader` to apply as it reads.
//!
//! In a `.ko`, every address and cross-section offset in the DWARF is a relocation: the bytes
//! hold 0 and a `.rela.debug_*` entry says "the address of symbol S (a section, mostly) plus A".
//! object's own `relocation_map` resolves S at its link-time value, which in a relocatable file
//! is an offset in its section; here S is resolved where its section was loaded.

use std::path::Path;
use std::sync::Arc;

use object::elf::{self, FileHeader64};
use object::read::elf::{FileHeader, Rela, SectionHeader, Sym};
use object::{LittleEndian, SectionIndex, SymbolIndex};

use crate::error::{Error, Result};
use crate::placement::{Place, Placement};

/// One resolved relocation.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Offset of the patched field in its section.
    offset: u64,
    /// What the field holds once linked, as a reader of the field sees it.
    value: u64,
    /// Bytes patched, to find overlapping relocations.
    width: u8,
    /// The symbol's section is not loaded: `value` is the link-time one, with that section at 0.
    unloaded: bool,
}

/// The relocations of one section, sorted by offset.
#[derive(Debug, Default)]
struct RelocationMap {
    entries: Vec<Entry>,
}

/// The relocations of one DWARF section, as gimli's `RelocateReader` uses them: none for a
/// section (or a file) that has none, so an executable's DWARF reads as it is.
#[derive(Debug, Clone, Default)]
pub(crate) struct Relocations(Option<Arc<RelocationMap>>);

impl Relocations {
    fn get(&self, offset: usize) -> Option<&Entry> {
        let map = self.0.as_ref()?;
        let offset = offset as u64;
        let index = map
            .entries
            .binary_search_by_key(&offset, |entry| entry.offset)
            .ok()?;
        map.entries.get(index)
    }

    /// Whether the field at `offset` refers to a section that is not loaded (so the address
    /// read there is nowhere at run time).
    pub(crate) fn unloaded_at(&self, offset: usize) -> bool {
        self.get(offset).is_some_and(|entry| entry.unloaded)
    }

    /// Reads the relocations that apply to section number `target`, called `target_name` and
    /// `target_len` bytes long once decompressed, of the x86-64 or AArch64 ELF file `data`, resolving
    /// symbols with `placement`.
    pub(crate) fn read(
        path: &Path,
        data: &[u8],
        placement: &Placement,
        target: SectionIndex,
        target_name: &str,
        target_len: u64,
    ) -> Result<Relocations> {
        let e = LittleEndian;
        let file_error = |what: String| Error::Elf {
            path: path.to_owned(),
            what,
        };
        let header =
            FileHeader64::<LittleEndian>::parse(data).map_err(|err| file_error(err.to_string()))?;
        let sections = header
            .sections(e, data)
            .map_err(|err| file_error(format!("section table: {err}")))?;
        let place_of = |index: usize| match placement.place(index) {
            Some(Place::At(address)) => Some((address, false)),
            Some(Place::NotLoaded) => Some((0, true)),
            None => None,
        };
        let Some((target_address, _)) = place_of(target.0) else {
            return Ok(Relocations(None));
        };
        let mut entries = Vec::new();
        for section in sections.iter() {
            let sh_type = section.sh_type(e);
            if !matches!(sh_type, elf::SHT_REL | elf::SHT_RELA)
                || section.sh_info(e) as usize != target.0
            {
                continue;
            }
            let name = sections
                .section_name(e, section)
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .unwrap_or_else(|_| format!("relocation section of section {}", target.0));
            let at = |offset: u64, what: String| Error::Relocation {
                path: path.to_owned(),
                section: name.clone(),
                offset,
                what,
            };
            let start = section.sh_offset(e);
            if sh_type == elf::SHT_REL {
                return Err(at(
                    start,
                    "REL relocations (addends in the section) are not supported, only RELA".into(),
                ));
            }
            let machine = header.e_machine(e);
            if !matches!(machine, elf::EM_X86_64 | elf::EM_AARCH64) {
                return Err(at(
                    start,
                    format!(
                        "relocations for ELF machine {machine} are not supported, only x86-64's \
                         and AArch64's"
                    ),
                ));
            }
            let Some((relas, link)) = section
                .rela(e, data)
                .map_err(|err| at(start, err.to_string()))?
            else {
                continue;
            };
            let symbols = sections
                .symbol_table_by_index(e, data, link)
                .map_err(|err| at(start, format!("symbol table (section {}): {err}", link.0)))?;
            entries.reserve(relas.len());
            for (i, rela) in relas.iter().enumerate() {
                let entry_offset = start.saturating_add(i as u64 * 24);
                let at = |what: String| at(entry_offset, format!("entry {i}: {what}"));
                let r_type = rela.r_type(e, false);
                // R_X86_64_NONE and R_AARCH64_NONE.
                if r_type == 0 {
                    continue;
                }
                let offset = rela.r_offset(e);
                let index = SymbolIndex(rela.r_sym(e, false) as usize);
                let (symbol, unloaded) = if index.0 == 0 {
                    // STN_UNDEF: "the relocation uses 0 as the symbol value".
                    (0, false)
                } else {
                    let symbol = symbols.symbol(index).map_err(|_| {
                        at(format!(
                            "symbol index {} is beyond the symbol table's {} entries",
                            index.0,
                            symbols.len()
                        ))
                    })?;
                    let name = || {
                        String::from_utf8_lossy(symbols.symbol_name(e, symbol).unwrap_or(b"?"))
                            .into_owned()
                    };
                    let (base, unloaded) = match symbol.st_shndx(e) {
                        elf::SHN_ABS => (0, false),
                        elf::SHN_UNDEF => {
                            return Err(at(format!("symbol {} is undefined", name())))
                        }
                        elf::SHN_COMMON => {
                            return Err(at(format!(
                                "symbol {} is a common symbol, placed by no section",
                                name()
                            )))
                        }
                        _ => {
                            let section = symbols
                                .symbol_section(e, symbol, index)
                                .ok()
                                .flatten()
                                .ok_or_else(|| {
                                at(format!("symbol {} has no valid section index", name()))
                            })?;
                            place_of(section.0).ok_or_else(|| {
                                at(format!(
                                    "symbol {} is in section {}, which the file does not have",
                                    name(),
                                    section.0
                                ))
                            })?
                        }
                    };
                    (base.wrapping_add(symbol.st_value(e)), unloaded)
                };
                let place = target_address.wrapping_add(offset);
                let (width, value) =
                    resolve(machine, r_type, symbol, rela.r_addend(e), place).map_err(&at)?;
                if offset
                    .checked_add(u64::from(width))
                    .is_none_or(|end| end > target_len)
                {
                    return Err(at(format!(
                        "patches {width} bytes at {offset:#x}, past the end of its {target_len}-byte section"
                    )));
                }
                entries.push(Entry {
                    offset,
                    value,
                    width,
                    unloaded,
                });
            }
        }
        if entries.is_empty() {
            return Ok(Relocations(None));
        }
        entries.sort_unstable_by_key(|entry| entry.offset);
        if let Some(pair) = entries
            .windows(2)
            .find(|pair| pair[0].offset + u64::from(pair[0].width) > pair[1].offset)
        {
            return Err(Error::Relocation {
                path: path.to_owned(),
                section: format!("relocations of {target_name}"),
                offset: pair[1].offset,
                what: format!(
                    "relocations at {:#x} and {:#x} patch the same bytes",
                    pair[0].offset, pair[1].offset
                ),
            });
        }
        Ok(Relocations(Some(Arc::new(RelocationMap { entries }))))
    }
}

/// What a relocation of type `r_type` for ELF machine `machine` writes, for symbol value
/// `symbol`, addend `addend` and patched field at run-time address `place`: the field's width and
/// its value as read back, zero-extended.
fn resolve(
    machine: u16,
    r_type: u32,
    symbol: u64,
    addend: i64,
    place: u64,
) -> Result<(u8, u64), String> {
    // Addresses wrap modulo 2^64; the 32-bit types then say how the sum must fit.
    let sum = symbol.wrapping_add(addend as u64);
    let relative = sum.wrapping_sub(place) as i64;
    let (name, width, value) = match (machine, r_type) {
        // System V x86-64 psABI, table "Relocation Types".
        (elf::EM_X86_64, elf::R_X86_64_64) => return Ok((8, sum)),
        (elf::EM_X86_64, elf::R_X86_64_32) => ("R_X86_64_32", 4, u32::try_from(sum).ok()),
        (elf::EM_X86_64, elf::R_X86_64_32S) => (
            "R_X86_64_32S",
            4,
            i32::try_from(sum as i64).ok().map(|v| v as u32),
        ),
        (elf::EM_X86_64, elf::R_X86_64_PC32) => (
            "R_X86_64_PC32",
            4,
            i32::try_from(relative).ok().map(|v| v as u32),
        ),
        // ELF for the Arm 64-bit Architecture, "Static Data relocations": the 32-bit forms
        // hold any value from -2^31 to 2^32 - 1.
        (elf::EM_AARCH64, elf::R_AARCH64_ABS64) => return Ok((8, sum)),
        (elf::EM_AARCH64, elf::R_AARCH64_ABS32) => {
            ("R_AARCH64_ABS32", 4, aarch64_data32(sum as i64))
        }
        (elf::EM_AARCH64, elf::R_AARCH64_PREL32) => {
            ("R_AARCH64_PREL32", 4, aarch64_data32(relative))
        }
        (_, other) => {
            return Err(format!(
                "relocation type {other} is not supported in debug sections"
            ))
        }
    };
    value.map(|value| (width, u64::from(value))).ok_or_else(|| {
        format!("{name} of symbol value {symbol:#x} plus {addend:#x} does not fit in 32 bits")
    })
}

/// An AArch64 32-bit data relocation's field: `value` if it lies in [-2^31, 2^32).
fn aarch64_data32(value: i64) -> Option<u32> {
    (-(1 << 31)..(1 << 32))
        .contains(&value)
        .then_some(value as u32)
}

impl gimli::Relocate for Relocations {
    fn relocate_address(&self, offset: usize, value: u64) -> gimli::Result<u64> {
        Ok(self.get(offset).map_or(value, |entry| entry.value))
    }

    fn relocate_offset(&self, offset: usize, value: usize) -> gimli::Result<usize> {
        match self.get(offset) {
            Some(entry) => {
                usize::try_from(entry.value).map_err(|_| gimli::Error::UnsupportedOffset)
            }
            None => Ok(value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86: u16 = elf::EM_X86_64;
    const ARM: u16 = elf::EM_AARCH64;

    /// Values worked by hand from the psABI's formulas.
    #[test]
    fn resolve_follows_the_psabi() {
        let text = 0xffff_ffff_c010_0000;
        assert_eq!(
            resolve(X86, elf::R_X86_64_64, text, 0x20, 0),
            Ok((8, 0xffff_ffff_c010_0020))
        );
        assert_eq!(
            resolve(X86, elf::R_X86_64_32, 0, 0x9a3, 0x1000),
            Ok((4, 0x9a3))
        );
        assert!(resolve(X86, elf::R_X86_64_32, text, 0, 0).is_err());
        assert_eq!(
            resolve(X86, elf::R_X86_64_32S, text, 0x10, 0),
            Ok((4, 0xc010_0010))
        );
        assert!(resolve(X86, elf::R_X86_64_32S, 0x8000_0000, 0, 0).is_err());
        // A field 0x100 bytes after its target, pointing back 0x100 - 4.
        assert_eq!(
            resolve(X86, elf::R_X86_64_PC32, text, -4, text + 0x100),
            Ok((4, 0xffff_fefc))
        );
        // 2 GiB apart: out of reach of a 32-bit displacement.
        assert!(resolve(X86, elf::R_X86_64_PC32, 0x9000_0000, 0, 0x1000).is_err());
        assert!(resolve(X86, elf::R_X86_64_GOTPCREL, 0, 0, 0).is_err());
    }

    /// Values worked by hand from the AArch64 ELF ABI's formulas (S + A, S + A - P).
    #[test]
    fn resolve_follows_the_aarch64_abi() {
        let text = 0xffff_8000_0910_0000;
        assert_eq!(
            resolve(ARM, elf::R_AARCH64_ABS64, text, 0x20, 0),
            Ok((8, 0xffff_8000_0910_0020))
        );
        // DWARF's 32-bit offsets into another debug section.
        assert_eq!(
            resolve(ARM, elf::R_AARCH64_ABS32, 0, 0x9a3, 0),
            Ok((4, 0x9a3))
        );
        // Unsigned and signed 32-bit values both fit; a kernel address does not.
        assert_eq!(
            resolve(ARM, elf::R_AARCH64_ABS32, 0, 0xffff_fff0, 0),
            Ok((4, 0xffff_fff0))
        );
        assert_eq!(
            resolve(ARM, elf::R_AARCH64_ABS32, 0, -16, 0),
            Ok((4, 0xffff_fff0))
        );
        assert!(resolve(ARM, elf::R_AARCH64_ABS32, text, 0, 0).is_err());
        assert!(resolve(ARM, elf::R_AARCH64_ABS32, 0, 1 << 32, 0).is_err());
        assert_eq!(
            resolve(ARM, elf::R_AARCH64_PREL32, text, -4, text + 0x100),
            Ok((4, 0xffff_fefc))
        );
        assert!(resolve(ARM, elf::R_AARCH64_PREL32, 0x9000_0000_0000, 0, 0x1000).is_err());
        // A type of the other machine is no type here.
        assert!(resolve(ARM, elf::R_X86_64_64, 0, 0, 0).is_err());
        assert!(resolve(X86, elf::R_AARCH64_ABS64, 0, 0, 0).is_err());
    }
}
