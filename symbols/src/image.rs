//! [`Image`]: one ELF image with its symbols and debug information, and the load bias that moves
//! its link-time addresses to where they are at run time.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::bytes::{Buffer, Bytes};
use crate::cfi::FrameRule;
use crate::debug_file;
use crate::dwarf::{DwarfFile, MAX_CHAIN};
use crate::elf::{ElfFile, LoadSegment};
use crate::error::{Error, Result};
use crate::index_cache;
use crate::lines::{Frame, Lines};
use crate::names;
use crate::placement::SectionAddresses;
use crate::sections::Sections;
use crate::symtab::{Symbol, SymbolKind, UnloadedSymbol};
use crate::types::{Type, TypeId, TypeKind};

/// Where to look for separate debug files.
#[derive(Debug, Clone)]
pub struct Options {
    /// Directories searched for `.build-id/xx/yyyy.debug` and for debuglink files under the
    /// image's own path, as gdb's `debug-file-directory`. Default: `/usr/lib/debug`.
    pub debug_dirs: Vec<PathBuf>,
    /// Where the name index of a large image is kept between sessions (see
    /// [`default_index_cache`]); `None` (the default) scans in every session.
    pub index_cache: Option<PathBuf>,
    /// The size of `.debug_info` from which a lookup first reads only the units that can
    /// answer it, before building the full name index (see [`Image::find_variable`]); below
    /// it, the full index is cheap. Default: 8 MiB.
    pub quick_lookups_from: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
            index_cache: None,
            quick_lookups_from: 8 << 20,
        }
    }
}

/// The name-index cache directory a tool should use, as the environment says:
/// `$KCRASH_INDEX_CACHE` (`off`: none), else `$XDG_CACHE_HOME/kcrash/index`, else
/// `~/.cache/kcrash/index`; `None` when off or there is no home.
pub fn default_index_cache() -> Option<PathBuf> {
    index_cache::directory()
}

/// A global variable, with its run-time address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    pub name: Option<String>,
    pub linkage_name: Option<String>,
    /// Link-time address plus the load bias; `None` for a declaration, a thread-local, a
    /// variable the compiler did not give a fixed address, or one in a section not loaded.
    pub address: Option<u64>,
    pub ty: Option<TypeId>,
}

/// An ELF image (kernel, program, library) and what its symbols and DWARF say.
///
/// Opening reads only the ELF headers and symbol table. DWARF is read on the first question
/// that needs it, and then only as much as that question needs.
#[derive(Debug)]
pub struct Image {
    file: Arc<ElfFile>,
    /// The file the DWARF comes from: the image, or its separate debug file.
    debug_file: Option<Arc<ElfFile>>,
    bias: u64,
    debug: OnceLock<Result<DwarfFile>>,
    lines: Lines,
    index_cache: Option<PathBuf>,
    quick_lookups_from: u64,
}

impl Image {
    /// Opens `path`, looking for a separate debug file in `/usr/lib/debug` if it has no DWARF.
    pub fn open(path: impl AsRef<Path>) -> Result<Image> {
        Image::open_with(path, &Options::default())
    }

    /// Opens `path` with `options`.
    pub fn open_with(path: impl AsRef<Path>, options: &Options) -> Result<Image> {
        let file = ElfFile::open(path.as_ref())?;
        let debug_file = if file.has_debug_info() {
            None
        } else {
            debug_file::find(&file, &options.debug_dirs)
        };
        Ok(Image::new(file, debug_file, options))
    }

    /// An image held in memory (no separate debug file is looked for); `name` names it in
    /// errors.
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: Vec<u8>) -> Result<Image> {
        Image::from_bytes_with(name, bytes, &Options::default())
    }

    /// [`Image::from_bytes`] with `options`.
    pub fn from_bytes_with(
        name: impl Into<PathBuf>,
        bytes: Vec<u8>,
        options: &Options,
    ) -> Result<Image> {
        let file = ElfFile::parse(name.into(), Bytes::new(Buffer::Owned(bytes)))?;
        Ok(Image::new(file, None, options))
    }

    /// Opens the relocatable object `path` (a kernel module `.ko`) with its sections where
    /// `sections` says they were loaded, as gdb's `add-symbol-file -s` and crash's `mod -s`
    /// do: symbols, DWARF addresses and lines are then at run-time addresses.
    ///
    /// An allocated section not in `sections` is taken as not loaded (a module's `.init.text`
    /// once the module has initialised): its symbols are [`Image::unloaded_symbol`]s, its
    /// variables have no address, its code has no lines. A name in `sections` that the file
    /// does not have is an error: the file is not the one that was loaded. (A module's
    /// `sect_attrs` keep listing `.init.*` with their old addresses after the kernel frees them
    /// (`init_layout.base` is then NULL): leave those out.)
    pub fn open_relocatable(path: impl AsRef<Path>, sections: &SectionAddresses) -> Result<Image> {
        Image::open_relocatable_with(path, sections, &Options::default())
    }

    /// [`Image::open_relocatable`], looking for a separate debug file with `options` when the
    /// object has no DWARF (it is placed at the same addresses).
    pub fn open_relocatable_with(
        path: impl AsRef<Path>,
        sections: &SectionAddresses,
        options: &Options,
    ) -> Result<Image> {
        let mut file = ElfFile::open(path.as_ref())?;
        file.place(sections)?;
        let debug_file = if file.has_debug_info() {
            None
        } else {
            debug_file::find(&file, &options.debug_dirs)
                .map(|mut debug| debug.place(sections).map(|()| debug))
                .transpose()?
        };
        Ok(Image::new(file, debug_file, options))
    }

    /// [`Image::open_relocatable`] for an object held in memory; `name` names it in errors.
    pub fn relocatable_from_bytes(
        name: impl Into<PathBuf>,
        bytes: Vec<u8>,
        sections: &SectionAddresses,
    ) -> Result<Image> {
        let mut file = ElfFile::parse(name.into(), Bytes::new(Buffer::Owned(bytes)))?;
        file.place(sections)?;
        Ok(Image::new(file, None, &Options::default()))
    }

    fn new(file: ElfFile, separate: Option<ElfFile>, options: &Options) -> Image {
        let file = Arc::new(file);
        let debug_file = match separate {
            Some(debug) => Some(Arc::new(debug)),
            None if file.has_debug_info() => Some(Arc::clone(&file)),
            None => None,
        };
        Image {
            file,
            debug_file,
            bias: 0,
            debug: OnceLock::new(),
            lines: Lines::new(),
            index_cache: options.index_cache.clone(),
            quick_lookups_from: options.quick_lookups_from,
        }
    }

    /// The image's path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// The file DWARF is read from: the image itself or its separate debug file.
    pub fn debug_path(&self) -> Option<&Path> {
        self.debug_file.as_ref().map(|f| f.path.as_path())
    }

    /// `e_entry`, at the link-time address (add [`Image::load_bias`] for the run-time one).
    pub fn entry(&self) -> u64 {
        self.file.entry
    }

    /// Whether the image is ET_DYN (a PIE program or shared library), so loaded at a bias.
    pub fn is_position_independent(&self) -> bool {
        self.file.position_independent
    }

    /// The image's PT_LOAD program headers, at link-time addresses.
    pub fn load_segments(&self) -> &[LoadSegment] {
        &self.file.load_segments
    }

    /// `len` bytes of the image file at `offset`, if the file holds them (what a loader mapped
    /// from it: a process core leaves such read-only pages out).
    pub fn file_bytes(&self, offset: u64, len: u64) -> Option<&[u8]> {
        let end = offset.checked_add(len)?;
        self.file
            .data
            .get(usize::try_from(offset).ok()?..usize::try_from(end).ok()?)
    }

    /// The GNU build-id note, if the image has one.
    pub fn build_id(&self) -> Option<&[u8]> {
        self.file.build_id.as_deref()
    }

    /// The load bias: run-time address minus link-time address. Added to every address this
    /// image reports, subtracted from every address it is asked about. A PIE program's load
    /// base, or a kernel's KASLR offset. Addresses wrap modulo 2^64, so a bias below the link
    /// address is given as its two's complement.
    pub fn load_bias(&self) -> u64 {
        self.bias
    }

    pub fn set_load_bias(&mut self, bias: u64) {
        self.bias = bias;
    }

    /// The ELF symbol table in use: the separate debug file's when it has one (a stripped
    /// library keeps only its exported symbols, its debug file every function's), else the
    /// image's own.
    fn symbol_file(&self) -> &ElfFile {
        match &self.debug_file {
            Some(debug) if !debug.symbols().is_empty() => debug,
            _ => &self.file,
        }
    }

    /// The ELF symbol `name` (as stored, so mangled for Rust and C++), or a PLT stub by its
    /// `name@plt`.
    pub fn symbol(&self, name: &str) -> Option<Symbol> {
        self.symbol_file()
            .symbols()
            .by_name(name, self.bias)
            .or_else(|| self.file.plt().by_name(name, self.bias))
    }

    /// Every ELF symbol, in address order (run-time addresses).
    pub fn symbols(&self) -> impl Iterator<Item = Symbol> + '_ {
        self.symbol_file().symbols().iter(self.bias)
    }

    /// Every distinct ELF symbol name (as stored), unordered: cheap, for completion and listing.
    pub fn symbol_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.symbol_file().symbols().names()
    }

    /// The ELF symbol `name` of a section that is not loaded, in an image opened with
    /// [`Image::open_relocatable`]: such a symbol has no address, and [`Image::symbol`] does
    /// not give it.
    pub fn unloaded_symbol(&self, name: &str) -> Option<UnloadedSymbol> {
        self.symbol_file().symbols().not_loaded(name)
    }

    /// The run-time address ranges of the image's allocated sections (for a relocatable image,
    /// those that are loaded), but a kernel's per-CPU section linked at 0, which is at none.
    pub fn address_ranges(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        self.file.allocated().iter().map(|section| {
            let start = section.address.wrapping_add(self.bias);
            start..start.saturating_add(section.size)
        })
    }

    /// Whether run-time `address` is in one of the image's [`Image::address_ranges`].
    pub fn contains(&self, address: u64) -> bool {
        self.address_ranges().any(|range| range.contains(&address))
    }

    /// The ELF symbol containing run-time `address`, and the offset of `address` in it; in the
    /// PLT, the stub (`strcmp@plt`), as objdump and gdb name it.
    pub fn symbolize(&self, address: u64) -> Option<(Symbol, u64)> {
        let address = address.wrapping_sub(self.bias);
        self.file
            .plt()
            .containing(address, self.bias)
            .or_else(|| self.symbol_file().symbols().containing(address, self.bias))
    }

    /// The symbol of a section linked at 0 that holds `offset`, and the offset in it: on
    /// x86_64 Linux, the per-CPU variable at that offset in every CPU's area. Such a symbol
    /// names no address, so [`Image::symbolize`] never gives it.
    pub fn symbolize_offset(&self, offset: u64) -> Option<(Symbol, u64)> {
        self.symbol_file().symbols().containing_offset(offset)
    }

    fn debug(&self) -> Result<&DwarfFile> {
        self.debug
            .get_or_init(|| match &self.debug_file {
                Some(file) if file.relocatable && file.placement.is_none() => Err(Error::Elf {
                    path: file.path.clone(),
                    what: "relocatable object: its DWARF needs its sections' addresses to be \
                           relocated (open it with Image::open_relocatable)"
                        .into(),
                }),
                Some(file) => DwarfFile::new(
                    Sections::new(Arc::clone(file)),
                    self.index_cache.clone(),
                    self.quick_lookups_from,
                ),
                None => Err(Error::NoDebugInfo {
                    path: self.file.path.clone(),
                }),
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The global variable called `name`: a plain name (`KLogs`), a Rust path
    /// (`klog_runtime::layout::KLOGS`) or a linkage name. A definition is preferred to a
    /// declaration. `Ok(None)` when no unit has it.
    pub fn variable(&self, name: &str) -> Result<Option<Variable>> {
        self.find_variable(name, Search::Full)
    }

    /// The variable `name`, searched as `search` says. A large image with no index at hand
    /// first reads only the unit that describes the ELF symbol `name` (found through the
    /// symbol's object file and `.debug_aranges`), then the units earlier lookups and
    /// [`Image::consult`] read. With [`Search::Quick`], a plain name that
    /// the symbol table does not have is then not looked for any further: `Ok(None)`, although
    /// the DWARF may describe it (a constant with no storage); [`Search::Full`] asks the full
    /// name index, building it if need be.
    pub fn find_variable(&self, name: &str, search: Search) -> Result<Option<Variable>> {
        let debug = self.debug()?;
        let raw = if debug.index_is_cheap() {
            debug.variable(name)?
        } else {
            let symbols = self.symbol_file().symbols();
            let near = match debug.variable_of_objects(name, &symbols.objects_of(name))? {
                Some(raw) => Some(raw),
                None => debug.variable_in_visited(name)?,
            };
            match (near, search) {
                (Some(raw), _) => Some(raw),
                (None, Search::Quick) if is_c_identifier(name) && !symbols.has(name) => None,
                (None, _) => debug.variable(name)?,
            }
        };
        Ok(raw.map(|raw| Variable {
            name: raw.name,
            linkage_name: raw.linkage_name,
            address: raw.address.map(|a| self.file.relocated(a, self.bias)),
            ty: raw.ty,
        }))
    }

    /// The type called `name`: `struct _KLog`, `KLog` (a typedef), `int`, or a Rust path
    /// (`klog_runtime::layout::KLog`). A complete type is preferred to a declaration.
    pub fn type_by_name(&self, name: &str) -> Result<Option<TypeId>> {
        self.find_type(name, Search::Full)
    }

    /// The type `name`, searched as `search` says. A large image with no index at hand looks
    /// first in the units its variable lookups (and [`Image::consult`]) have read; with
    /// [`Search::Quick`] no further, with [`Search::Full`] then in the full name index.
    pub fn find_type(&self, name: &str, search: Search) -> Result<Option<TypeId>> {
        let debug = self.debug()?;
        if debug.index_is_cheap() {
            return debug.type_by_name(name);
        }
        match (debug.type_in_visited(name)?, search) {
            (Some(id), _) => Ok(Some(id)),
            (None, Search::Quick) => Ok(None),
            (None, Search::Full) => debug.type_by_name(name),
        }
    }

    /// Reads, for the type lookups that follow, the unit that describes the ELF symbol
    /// `symbol` (a function or variable): a hint that the types a caller is about to name are
    /// defined there, which spares a large image its full name index. Does nothing when the
    /// image has an index at hand, or the unit cannot be found.
    pub fn consult(&self, symbol: &str) {
        let Ok(debug) = self.debug() else { return };
        if debug.index_is_cheap() {
            return;
        }
        let symbols = self.symbol_file().symbols();
        let code = match symbols.by_name(symbol, 0) {
            Some(s) if s.kind == SymbolKind::Function => Some(s.address),
            _ => symbols.objects_of(symbol).first().and_then(|o| o.code),
        };
        if let Some(code) = code {
            debug.visit_unit_at(code);
        }
    }

    /// The type `id`.
    pub fn type_(&self, id: TypeId) -> Result<Arc<Type>> {
        self.debug()?.type_(id)
    }

    /// `sizeof`: the size in bytes of `id`. `None` for `void`, functions and arrays of unknown
    /// length.
    pub fn size_of(&self, id: TypeId) -> Result<Option<u64>> {
        self.debug()?.size_of(id)
    }

    /// The type `id` is to be printed as: typedefs and qualifiers removed, and Rust's
    /// transparent wrappers (`AtomicU64`, `UnsafeCell<T>`, ...) replaced by what they hold.
    pub fn value_type(&self, id: TypeId) -> Result<TypeId> {
        let debug = self.debug()?;
        let mut id = id;
        for _ in 0..MAX_CHAIN {
            let ty = debug.type_(id)?;
            let next = match (&ty.kind, ty.transparent) {
                (_, Some(inner)) => Some(inner),
                (TypeKind::Typedef(target) | TypeKind::Qualified(_, target), _) => *target,
                _ => None,
            };
            match next {
                Some(next) => id = next,
                None => return Ok(id),
            }
        }
        Err(debug.malformed(id.0, "type references form a cycle"))
    }

    /// Every type name declared at the top of a unit, as C spells it (`struct task_struct`,
    /// `union bpf_attr`, `enum pid_type`, `u64`), sorted: for completing a type name. Reads
    /// every unit's top-level entries (about as long as building the name index).
    pub fn type_names(&self) -> Result<Vec<String>> {
        Ok(self.debug()?.type_names())
    }

    /// The name of type `id` as C (or Rust) writes it: `struct _KLog`, `int64_t *`, `KLog [5]`.
    pub fn type_name(&self, id: TypeId) -> Result<String> {
        names::type_name(self.debug()?, Some(id))
    }

    /// How the function at run-time `address` keeps its caller's registers, from the image's
    /// `.eh_frame` or the debug file's `.debug_frame`; `None` when neither covers it. A placed
    /// relocatable image (a kernel module) is read by its `.debug_frame` alone, which is
    /// relocated as its other DWARF is; its `.eh_frame`, if any, is as the compiler left it.
    pub fn frame_rule(&self, address: u64) -> Result<Option<FrameRule>> {
        if !self.contains(address) && self.file.placement.is_some() {
            return Ok(None);
        }
        let debug = || match &self.debug_file {
            Some(_) => self.debug().map(|d| Some(&d.sections)),
            None => Ok(None),
        };
        let eh_frame = self.file.placement.is_none();
        crate::cfi::rule_at(&self.file, eh_frame, debug, address.wrapping_sub(self.bias))
    }

    /// Function, file and line at run-time `address`, innermost inlined frame first. Empty when
    /// the DWARF has no line information for it.
    ///
    /// For a relocatable image, only addresses in its loaded sections have lines: the code of
    /// sections not loaded is nowhere.
    pub fn frames(&self, address: u64) -> Result<Vec<Frame>> {
        if self.file.placement.is_some() && !self.contains(address) {
            return Ok(Vec::new());
        }
        let debug = self.debug()?;
        self.lines
            .frames(&debug.sections, address.wrapping_sub(self.bias))
    }
}

/// How far a name lookup goes in a large image that has no index at hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// Only what reading a unit or two can answer: for searching several images in turn
    /// before paying for any one's full index ([`crate::ImageSet`] does).
    Quick,
    /// Whatever it takes: the full name index, built (and cached) if need be.
    Full,
}

/// A C identifier: what the ELF symbol table would hold for a C global, unlike a Rust path or
/// a name with spaces.
fn is_c_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b == b'_' || b.is_ascii_alphabetic())
        && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    /// kcrash may share one image between threads (plugins, a pager).
    #[test]
    fn image_is_send_and_sync() {
        fn shareable<T: Send + Sync>() {}
        shareable::<super::Image>();
    }
}
