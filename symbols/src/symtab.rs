//! The ELF symbol table as two indexes: by name, and sorted by address for "which symbol is this
//! address in". Works on stripped-of-DWARF images; it needs only `.symtab` or `.dynsym`.

use std::collections::HashMap;

use crate::placement::{Place, Placement};

/// What an ELF symbol names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolKind {
    /// Code (`STT_FUNC`).
    Function,
    /// A data object (`STT_OBJECT`).
    Data,
    /// Thread-local storage (`STT_TLS`); its address is an offset in the TLS block.
    ThreadLocal,
    /// Anything else with an address (`STT_NOTYPE` labels of assembly code, a linker script's
    /// section bounds, ...).
    Other,
}

/// An ELF symbol, with its address already moved by the image's load bias (but a per-CPU
/// variable's offset, which the bias does not move).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// The name as stored in the symbol table (mangled for Rust and C++).
    pub name: String,
    /// Run-time address: the symbol's value plus the load bias; the value alone in a
    /// zero-based per-CPU section, where it is an offset.
    pub address: u64,
    /// Size in bytes; 0 when the producer did not say (common for assembly symbols).
    pub size: u64,
    /// Name of the section the symbol is defined in.
    pub section: Option<String>,
    pub kind: SymbolKind,
    /// Visible outside its object file (`STB_GLOBAL` or `STB_WEAK`).
    pub global: bool,
}

impl Symbol {
    /// The name demangled if it is a Rust or C++ mangled name, as is otherwise.
    pub fn demangled(&self) -> String {
        addr2line::demangle_auto(self.name.as_str().into(), None).into_owned()
    }
}

/// A symbol of a relocatable image whose section is not loaded (a module's `.init.text`, freed
/// once the module initialised; `.modinfo`): it is nowhere in memory, so it has no address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnloadedSymbol {
    /// The name as stored in the symbol table.
    pub name: String,
    /// The section it is in, which was not loaded; `None` for a common symbol.
    pub section: Option<String>,
    /// Its offset in that section.
    pub offset: u64,
    pub size: u64,
    pub kind: SymbolKind,
    pub global: bool,
}

/// A symbol as stored: link-time address, section by index.
#[derive(Debug, Clone)]
struct Entry {
    name: Box<str>,
    address: u64,
    size: u64,
    section: Option<u32>,
    kind: SymbolKind,
    global: bool,
    /// For a local symbol, the object file it came from: the index in
    /// [`SymbolTable::objects`] of the `STT_FILE` symbol before it.
    object: Option<u32>,
}

/// All defined symbols of one image.
#[derive(Debug, Default)]
pub(crate) struct SymbolTable {
    /// Sorted by address, then best first among symbols at the same address.
    by_address: Vec<Entry>,
    /// Index into `by_address` of the best symbol of each name.
    by_name: HashMap<Box<str>, usize>,
    /// Labels by name: they name an address but have no extent, so an address is only put down
    /// to one when no other symbol starts between them.
    labels: HashMap<Box<str>, Entry>,
    /// The labels in code by address, the best of each address first.
    labels_by_address: Vec<Entry>,
    section_names: Vec<String>,
    /// The [`zero_based`](crate::placement::zero_based) sections by index: their symbols are offsets
    /// the load bias does not move, and no address is in them.
    zero_based: Vec<u32>,
    /// Where the zero-based sections' symbols end: no offset at or past it is in one.
    zero_based_end: u64,
    /// Symbols of sections that are not loaded, with their offset in the section as address.
    not_loaded: Vec<Entry>,
    /// Each object file the symbol table names (each `STT_FILE` symbol, which the linker puts
    /// before that object's local symbols).
    objects: Vec<ObjectFile>,
}

/// An object file the image was linked from, as its symbol table tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObjectFile {
    /// The `STT_FILE` symbol's name: the source file's, without its directories.
    pub(crate) file: Box<str>,
    /// A link-time address inside one of its local functions, if it has one: where its code
    /// is, which `.debug_aranges` maps to its compilation unit.
    pub(crate) code: Option<u64>,
}

impl SymbolTable {
    /// Reads `.symtab`, or `.dynsym` when there is no `.symtab`. A relocatable file's symbols
    /// are at their section's address in `placement`, or not loaded.
    pub(crate) fn read(file: &object::File<'_>, placement: Option<&Placement>) -> SymbolTable {
        use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, SymbolSection};

        // By ELF section index; the iterator leaves out the null section 0.
        let mut section_names = vec![String::new()];
        let mut zero_based = Vec::new();
        for section in file.sections() {
            if section_names.len() == section.index().0 {
                section_names.push(section.name().unwrap_or("").to_owned());
            }
            if crate::placement::zero_based(file, &section) {
                zero_based.extend(u32::try_from(section.index().0).ok());
            }
        }
        let table = file.symbol_table().or_else(|| file.dynamic_symbol_table());
        let mut not_loaded = Vec::new();
        // An unsized STT_NOTYPE symbol in a section is a label (an assembly or linker-script
        // name for an address, `__start_orc_unwind`): found by name, containing no code.
        let is_label = |symbol: &object::Symbol<'_, '_>| {
            symbol.kind() == object::SymbolKind::Unknown
                && symbol.size() == 0
                && matches!(
                    symbol.section(),
                    SymbolSection::Section(_) | SymbolSection::Absolute
                )
        };
        let mut labels = HashMap::new();
        let mut objects: Vec<ObjectFile> = Vec::new();
        let mut by_address: Vec<Entry> = table
            .into_iter()
            .flat_map(|table| table.symbols())
            // The symbol table's order: each object's STT_FILE, then its local symbols.
            .filter_map(|symbol| {
                if symbol.kind() == object::SymbolKind::File {
                    objects.push(ObjectFile {
                        file: symbol.name().unwrap_or_default().into(),
                        code: None,
                    });
                    return None;
                }
                let object = match (symbol.is_local(), objects.len().checked_sub(1)) {
                    (true, Some(last)) => u32::try_from(last).ok(),
                    _ => None,
                };
                if let (Some(o), object::SymbolKind::Text, true) = (
                    object.and_then(|i| objects.get_mut(i as usize)),
                    symbol.kind(),
                    symbol.is_definition(),
                ) {
                    // Its middle, not its start: the symbol may take in bytes its unit's ranges
                    // do not (arm64's GCC 10 starts ftrace's patchable NOPs at the symbol and
                    // the unit's range after them).
                    o.code
                        .get_or_insert(symbol.address().wrapping_add(symbol.size() / 2));
                }
                Some((symbol, object))
            })
            .filter(|(symbol, _)| {
                symbol.is_definition()
                    || symbol.kind() == object::SymbolKind::Tls
                    || is_label(symbol)
            })
            .filter_map(|(symbol, object)| {
                let kind = match symbol.kind() {
                    object::SymbolKind::Text => SymbolKind::Function,
                    object::SymbolKind::Data => SymbolKind::Data,
                    object::SymbolKind::Tls => SymbolKind::ThreadLocal,
                    object::SymbolKind::Section | object::SymbolKind::File => return None,
                    _ => SymbolKind::Other,
                };
                let name = symbol.name().ok().filter(|name| !name.is_empty())?;
                let mut entry = Entry {
                    name: name.into(),
                    address: symbol.address(),
                    size: symbol.size(),
                    section: symbol.section_index().and_then(|i| u32::try_from(i.0).ok()),
                    kind,
                    global: symbol.is_global(),
                    object,
                };
                let label = is_label(&symbol);
                let Some(placement) = placement else {
                    return Some((entry, label));
                };
                let base = match symbol.section() {
                    SymbolSection::Absolute => Some(0),
                    SymbolSection::Section(index) => match placement.place(index.0)? {
                        Place::At(address) => Some(address),
                        Place::NotLoaded => None,
                    },
                    _ => None,
                };
                match base {
                    Some(base) => {
                        entry.address = base.wrapping_add(entry.address);
                        Some((entry, label))
                    }
                    None => {
                        not_loaded.push(entry);
                        None
                    }
                }
            })
            .filter_map(|(entry, label)| {
                if !label {
                    return Some(entry);
                }
                let best = labels
                    .entry(entry.name.clone())
                    .or_insert_with(|| entry.clone());
                if rank(&entry) < rank(best) {
                    *best = entry;
                }
                None
            })
            .collect();
        sort_by_address(&mut by_address);
        let by_name = index_by_name(&by_address);
        // Only a label in code names the code after it: a data label or an absolute value
        // (per-CPU offsets, section bounds) would catch any address past it.
        let in_code = |entry: &&Entry| {
            entry.section.is_some_and(|i| {
                file.section_by_index(object::SectionIndex(i as usize))
                    .is_ok_and(|section| section.kind() == object::SectionKind::Text)
            })
        };
        let mut labels_by_address: Vec<Entry> = labels.values().filter(in_code).cloned().collect();
        sort_by_address(&mut labels_by_address);
        let zero_based_end = by_address
            .iter()
            .filter(|e| e.section.is_some_and(|i| zero_based.contains(&i)))
            .map(|e| e.address.saturating_add(e.size.max(1)))
            .max()
            .unwrap_or(0);
        SymbolTable {
            by_address,
            by_name,
            labels,
            labels_by_address,
            section_names,
            zero_based,
            zero_based_end,
            not_loaded,
            objects,
        }
    }

    /// The object files that may have defined `name`, likeliest first, for finding the
    /// compilation unit that describes it. A local symbol's object is the `STT_FILE` before
    /// it. A global's is guessed from its neighbours: the linker lays out each object's part
    /// of a section in one piece, so the nearest local symbol below it in its section is
    /// likely of the same object, and the nearest above it when it opens its object's part.
    /// Guesses to be checked: the unit must then describe `name`.
    pub(crate) fn objects_of(&self, name: &str) -> Vec<&ObjectFile> {
        /// How far to look either way for a local symbol of the same section.
        const NEAR: usize = 256;
        let Some(&i) = self.by_name.get(name) else {
            return Vec::new();
        };
        let Some(entry) = self.by_address.get(i) else {
            return Vec::new();
        };
        let same = |e: &&Entry| e.section == entry.section;
        let found: Vec<u32> = match entry.object {
            Some(object) => vec![object],
            None => {
                let below = self.by_address[..i].iter().rev().take(NEAR);
                let above = self.by_address[i..].iter().skip(1).take(NEAR);
                [
                    below.filter(same).find_map(|e| e.object),
                    above.filter(same).find_map(|e| e.object),
                ]
                .into_iter()
                .flatten()
                .collect()
            }
        };
        let mut objects: Vec<&ObjectFile> = Vec::new();
        for object in found.iter().filter_map(|&o| self.objects.get(o as usize)) {
            if !objects.contains(&object) {
                objects.push(object);
            }
        }
        objects
    }

    /// The PLT's stubs as symbols (`strcmp@plt`), which no symbol table of the file holds.
    pub(crate) fn plt(file: &object::File<'_>) -> SymbolTable {
        let mut section_names = vec![String::new()];
        let mut by_address: Vec<Entry> = crate::plt::stubs(file)
            .into_iter()
            .map(|stub| {
                let section = match section_names.iter().position(|s| *s == stub.section) {
                    Some(i) => i,
                    None => {
                        section_names.push(stub.section);
                        section_names.len() - 1
                    }
                };
                Entry {
                    name: stub.name.into(),
                    address: stub.address,
                    size: stub.size,
                    section: u32::try_from(section).ok(),
                    kind: SymbolKind::Function,
                    global: false,
                    object: None,
                }
            })
            .collect();
        sort_by_address(&mut by_address);
        SymbolTable {
            by_name: index_by_name(&by_address),
            by_address,
            section_names,
            ..SymbolTable::default()
        }
    }

    /// The symbol called `name` among those of sections that are not loaded.
    pub(crate) fn not_loaded(&self, name: &str) -> Option<UnloadedSymbol> {
        let entry = self
            .not_loaded
            .iter()
            .filter(|entry| &*entry.name == name)
            .min_by_key(|entry| rank(entry))?;
        Some(UnloadedSymbol {
            name: entry.name.to_string(),
            section: self.section_name(entry),
            offset: entry.address,
            size: entry.size,
            kind: entry.kind,
            global: entry.global,
        })
    }

    fn section_name(&self, entry: &Entry) -> Option<String> {
        entry
            .section
            .and_then(|i| self.section_names.get(i as usize))
            .cloned()
    }

    /// Every symbol in address order, the best of each address first.
    pub(crate) fn iter(&self, bias: u64) -> impl Iterator<Item = Symbol> + '_ {
        self.by_address.iter().map(move |e| self.public(e, bias))
    }

    /// Whether a symbol or label is called `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.by_name.contains_key(name) || self.labels.contains_key(name)
    }

    /// Every distinct symbol name, unordered, without building a [`Symbol`] for each.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.by_name.keys().map(|name| &**name)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_address.is_empty()
    }

    /// The symbol called `name` (the global one when a local shares its name).
    pub(crate) fn by_name(&self, name: &str, bias: u64) -> Option<Symbol> {
        let entry = match self.by_name.get(name) {
            Some(&i) => self.by_address.get(i)?,
            None => self.labels.get(name)?,
        };
        Some(self.public(entry, bias))
    }

    /// The symbol containing link-time `address`, and the offset of `address` in it.
    ///
    /// A sized symbol contains the addresses of its extent; an unsized one (assembly labels)
    /// is taken to run up to the next symbol.
    pub(crate) fn containing(&self, address: u64, bias: u64) -> Option<(Symbol, u64)> {
        let after = self.by_address.partition_point(|e| e.address <= address);
        let symbol = after.checked_sub(1).and_then(|last| {
            let last = self.by_address.get(last)?;
            let group_start =
                self.by_address[..after].partition_point(|e| e.address < last.address);
            self.by_address.get(group_start)
        });
        if let Some(best) = symbol {
            if self.is_zero_based(best) {
                return None;
            }
            let offset = address - best.address;
            if best.size == 0 || offset < best.size {
                return Some((self.public(best, bias), offset));
            }
        }
        // Code with no sized symbol (hand-written assembly) is the nearest label's, unless a
        // symbol starts in between.
        let after = self
            .labels_by_address
            .partition_point(|e| e.address <= address);
        let last = self.labels_by_address.get(after.checked_sub(1)?)?;
        let group_start =
            self.labels_by_address[..after].partition_point(|e| e.address < last.address);
        let label = self.labels_by_address.get(group_start)?;
        if symbol.is_some_and(|s| s.address > label.address) {
            return None;
        }
        Some((self.public(label, bias), address - label.address))
    }

    /// The symbol of a zero-based section (x86_64's per-CPU variables, linked from 0) that
    /// holds `offset`, and the offset in it. [`SymbolTable::containing`] never gives one: such
    /// a symbol's address is an offset, not where anything is.
    pub(crate) fn containing_offset(&self, offset: u64) -> Option<(Symbol, u64)> {
        if offset >= self.zero_based_end {
            return None;
        }
        let below = &self.by_address[..self.by_address.partition_point(|e| e.address <= offset)];
        // The nearest zero-based symbol at or below, past any other (absolute ones); of those
        // at its address, one that holds the offset (a sized one, where an unsized alias
        // ranks first).
        let last = below.iter().rev().find(|e| self.is_zero_based(e))?;
        let group = &below[below.partition_point(|e| e.address < last.address)..];
        let best = group.iter().find(|e| {
            e.address == last.address && self.is_zero_based(e) && offset - e.address < e.size.max(1)
        })?;
        Some((self.public(best, 0), offset - best.address))
    }

    fn is_zero_based(&self, entry: &Entry) -> bool {
        entry.section.is_some_and(|i| self.zero_based.contains(&i))
    }

    fn public(&self, entry: &Entry, bias: u64) -> Symbol {
        let bias = if self.is_zero_based(entry) { 0 } else { bias };
        Symbol {
            name: entry.name.to_string(),
            address: entry.address.wrapping_add(bias),
            size: entry.size,
            section: self.section_name(entry),
            kind: entry.kind,
            global: entry.global,
        }
    }
}

const NO_RANK: u8 = u8::MAX;

/// By address, the best of each address first.
fn sort_by_address(entries: &mut [Entry]) {
    entries.sort_by(|a, b| {
        a.address
            .cmp(&b.address)
            .then_with(|| rank(a).cmp(&rank(b)))
    });
}

/// The index in `by_address` of the best symbol of each name.
fn index_by_name(by_address: &[Entry]) -> HashMap<Box<str>, usize> {
    let mut by_name = HashMap::with_capacity(by_address.len());
    for (i, entry) in by_address.iter().enumerate() {
        by_name
            .entry(entry.name.clone())
            .and_modify(|best: &mut usize| {
                if rank(entry) < by_address.get(*best).map_or(NO_RANK, rank) {
                    *best = i;
                }
            })
            .or_insert(i);
    }
    by_name
}

/// Which of several symbols at one address (or of one name) to show: lower is better.
/// Global before local, sized before unsized, functions and data before labels.
fn rank(entry: &Entry) -> u8 {
    let kind = match entry.kind {
        SymbolKind::Function | SymbolKind::Data => 0,
        SymbolKind::ThreadLocal => 1,
        SymbolKind::Other => 2,
    };
    u8::from(!entry.global) * 8 + u8::from(entry.size == 0) * 4 + kind
}
