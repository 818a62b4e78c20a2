//! One error type for the crate. Every variant names the file it came from, and DWARF errors name
//! the section and the offset where the problem was found, so a report points at the bytes.

use std::path::PathBuf;
use std::sync::Arc;

/// Anything that can go wrong reading an image or its debug information.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The file could not be opened or mapped.
    #[error("{path}: {source}", path = path.display())]
    Io {
        path: PathBuf,
        source: Arc<std::io::Error>,
    },
    /// The file is not an ELF file we can read (bad header, section table, symbol table, ...).
    #[error("{path}: not a readable ELF image: {what}", path = path.display())]
    Elf { path: PathBuf, what: String },
    /// Neither the image nor a separate debug file found for it has `.debug_info`.
    #[error(
        "{path}: no DWARF debug information (no .debug_info in the image, and no separate debug \
         file found by build-id or .gnu_debuglink)",
        path = path.display()
    )]
    NoDebugInfo { path: PathBuf },
    /// A compressed debug section could not be decompressed.
    #[error("{path}: section {section} at file offset {offset:#x}: {what}", path = path.display())]
    Compressed {
        path: PathBuf,
        section: &'static str,
        offset: u64,
        what: String,
    },
    /// gimli rejected the DWARF at this place.
    #[error("{path}: {section} at offset {offset:#x}: {source}", path = path.display())]
    Dwarf {
        path: PathBuf,
        section: &'static str,
        offset: u64,
        source: gimli::Error,
    },
    /// The DWARF parsed, but says something we cannot use (a reference out of range, an
    /// unsupported form where we need a value, a cycle of type references, ...).
    #[error("{path}: {section} at offset {offset:#x}: {what}", path = path.display())]
    Malformed {
        path: PathBuf,
        section: &'static str,
        offset: u64,
        what: String,
    },
    /// A relocatable file's section addresses do not fit the file (a name given an address that
    /// no section has), or the file cannot be placed at all.
    #[error("{path}: cannot place its sections: {what}", path = path.display())]
    Placement { path: PathBuf, what: String },
    /// A relocation entry of a debug section cannot be applied; `offset` is the entry's file
    /// offset (or, for relocations that collide, the offset they patch in their section).
    #[error("{path}: {section} at offset {offset:#x}: {what}", path = path.display())]
    Relocation {
        path: PathBuf,
        section: String,
        offset: u64,
        what: String,
    },
    /// The call-frame information for an address does not parse.
    #[error("{path}: {section}: the entry for address {address:#x}: {source}", path = path.display())]
    CallFrames {
        path: PathBuf,
        section: &'static str,
        address: u64,
        source: gimli::Error,
    },
    /// Source-line lookup failed inside addr2line.
    #[error("{path}: line information for address {address:#x}: {source}", path = path.display())]
    Lines {
        path: PathBuf,
        address: u64,
        source: gimli::Error,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
