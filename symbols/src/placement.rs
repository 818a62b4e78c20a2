//! Where each section of a relocatable file (a kernel module) is at run time. A `.ko` is linked
//! with every section at address 0; the kernel's module loader puts each allocated section
//! somewhere in module memory and records where in `struct module`'s `sect_attrs` (what
//! `/sys/module/NAME/sections/` shows). Given that record, each section's symbols and DWARF
//! addresses are moved to where the section is.

use std::collections::HashMap;
use std::path::Path;

use object::elf::{FileHeader64, SHF_ALLOC, SHF_TLS};
use object::read::elf::{FileHeader, SectionHeader};
use object::{LittleEndian, Object, ObjectSection};

use crate::error::{Error, Result};

/// Run-time addresses of a relocatable file's sections, by section name: what the kernel's
/// `sect_attrs` says of a module (`.text`, `.data`, `.bss`, `.rodata`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SectionAddresses {
    by_name: HashMap<String, u64>,
}

impl SectionAddresses {
    pub fn new() -> SectionAddresses {
        SectionAddresses::default()
    }

    /// Section `name` is at `address`; replaces an earlier address for the same name.
    pub fn insert(&mut self, name: impl Into<String>, address: u64) {
        self.by_name.insert(name.into(), address);
    }

    /// The address of section `name`, if it was given one.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.by_name.get(name).copied()
    }

    /// Every section given an address, unordered.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.by_name
            .iter()
            .map(|(name, &address)| (name.as_str(), address))
    }
}

impl<S: Into<String>> FromIterator<(S, u64)> for SectionAddresses {
    fn from_iter<I: IntoIterator<Item = (S, u64)>>(iter: I) -> SectionAddresses {
        SectionAddresses {
            by_name: iter
                .into_iter()
                .map(|(name, address)| (name.into(), address))
                .collect(),
        }
    }
}

/// Where one section is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// At this run-time address. Sections that are never loaded (`.debug_*`, `.comment`) are
    /// at 0: references into them are offsets in the file.
    At(u64),
    /// An allocated section with no address: the loader did not keep it (a module's
    /// `.init.text` after initialisation, `.modinfo`, `__versions`).
    NotLoaded,
}

/// An allocated section placed in memory, for "which image holds this address".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoadedSection {
    pub(crate) address: u64,
    pub(crate) size: u64,
}

/// Every section of one relocatable file, placed.
#[derive(Debug, Default)]
pub(crate) struct Placement {
    /// By ELF section index.
    places: Vec<Place>,
    loaded: Vec<LoadedSection>,
}

impl Placement {
    /// Places the sections of the 64-bit little-endian ELF file `data` (the x86-64 ELF kernel
    /// modules are): a section named in `addresses` is at that address, another allocated
    /// section is not loaded, any other is at 0. A name in `addresses` that no section has, or
    /// that two sections have, is an error: the file is not the one that was loaded.
    pub(crate) fn new(path: &Path, data: &[u8], addresses: &SectionAddresses) -> Result<Placement> {
        let error = |what: String| Error::Placement {
            path: path.to_owned(),
            what,
        };
        let e = LittleEndian;
        let header = FileHeader64::<LittleEndian>::parse(data)
            .map_err(|err| error(format!("not a 64-bit little-endian ELF file: {err}")))?;
        let sections = header
            .sections(e, data)
            .map_err(|err| error(format!("section table: {err}")))?;
        let mut placement = Placement::default();
        let mut placed: HashMap<&str, usize> = HashMap::new();
        for (index, section) in sections.enumerate() {
            let name = sections
                .section_name(e, section)
                .map_err(|err| error(format!("section {}: name: {err}", index.0)))?;
            let name = std::str::from_utf8(name).unwrap_or("");
            let flags = section.sh_flags(e);
            let allocated = index.0 != 0 && flags & u64::from(SHF_ALLOC) != 0;
            let place = match addresses.by_name.get_key_value(name) {
                Some((name, &address)) if index.0 != 0 => {
                    if let Some(other) = placed.insert(name, index.0) {
                        return Err(error(format!(
                            "sections {other} and {} are both named {name}: the address given \
                             for {name} fits either",
                            index.0
                        )));
                    }
                    Place::At(address)
                }
                _ if allocated => Place::NotLoaded,
                _ => Place::At(0),
            };
            // A thread-local section's addresses are offsets in each thread's block.
            if let Place::At(address) = place {
                if allocated && flags & u64::from(SHF_TLS) == 0 {
                    placement.loaded.push(LoadedSection {
                        address,
                        size: section.sh_size(e),
                    });
                }
            }
            placement.places.push(place);
        }
        let mut missing: Vec<&str> = addresses
            .by_name
            .keys()
            .map(String::as_str)
            .filter(|name| !placed.contains_key(name))
            .collect();
        if !missing.is_empty() {
            missing.sort_unstable();
            return Err(error(format!(
                "sections {} have addresses but the file has no sections of those names: it is \
                 not the file that was loaded",
                missing.join(", ")
            )));
        }
        Ok(placement)
    }

    /// Where section `index` is; `None` for an index the file does not have.
    pub(crate) fn place(&self, index: usize) -> Option<Place> {
        self.places.get(index).copied()
    }

    /// The allocated sections that have an address.
    pub(crate) fn loaded(&self) -> &[LoadedSection] {
        &self.loaded
    }
}

/// Whether `section` is x86_64 Linux's per-CPU data, linked at 0 in the kernel: `.data..percpu`
/// at address 0 in an executable. The kernel copies it once for each processor and knows each
/// variable by its offset in it, which KASLR leaves as linked; its addresses name no memory.
/// (A relocatable file has every section at 0 until placed; arm64 links the section at a kernel
/// address, which moves with the rest.)
pub(crate) fn zero_based(file: &object::File<'_>, section: &object::Section<'_, '_>) -> bool {
    file.kind() != object::ObjectKind::Relocatable
        && section.address() == 0
        && section.size() > 0
        && section.name() == Ok(".data..percpu")
}
