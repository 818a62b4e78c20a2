//! Errors. Every error names the dump file; format errors name the byte offset, memory errors the
//! address and why it could not be read.

use std::io;
use std::path::Path;
use std::sync::Arc;

/// Anything that can go wrong opening or reading a dump.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused an operation on the file.
    #[error("{}: {what}: {source}", file.display())]
    Io {
        file: Arc<Path>,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// The file is not a well-formed dump at `offset`.
    #[error("{}: at offset {offset:#x}: {what}", file.display())]
    Malformed {
        file: Arc<Path>,
        offset: u64,
        what: String,
    },
    /// A physical address could not be read.
    #[error("{}: physical address {addr:#x}: {reason}", file.display())]
    Phys {
        file: Arc<Path>,
        addr: u64,
        reason: MissingReason,
    },
    /// A virtual address could not be translated or read.
    #[error("{}: virtual address {addr:#x}: {reason}", file.display())]
    Virt {
        file: Arc<Path>,
        addr: u64,
        reason: VirtReason,
    },
}

/// Why memory that was asked for is not available.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MissingReason {
    /// No memory at this address in the dump (a hole, or beyond the last RAM range).
    #[error("unmapped (no memory at this address in the dump)")]
    Unmapped,
    /// The page existed but the dump tool left it out (makedumpfile filtering).
    #[error("not in dump (page was excluded when the dump was written)")]
    Excluded,
    /// The dump says the data is at `offset`, but the file ends before it.
    #[error("data at file offset {offset:#x} is beyond the end of the file (truncated dump{})",
        if *.incomplete_flag { "; the dump is marked incomplete" } else { "" })]
    Truncated { offset: u64, incomplete_flag: bool },
    /// Reading a live file (/proc/kcore) at `offset` failed.
    #[error("reading file offset {offset:#x} failed: {error}")]
    Unreadable { offset: u64, error: String },
    /// The stored page is damaged.
    #[error("page data at file offset {offset:#x} is corrupt: {detail}")]
    Corrupt { offset: u64, detail: String },
}

/// Why a virtual address could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VirtReason {
    /// No translation source maps the address; `detail` says what each source answered.
    #[error("not mapped ({detail})")]
    NotMapped { detail: String },
    /// It translated to `paddr`, which could not be read.
    #[error("translates to physical address {paddr:#x}, which is {reason}")]
    Phys { paddr: u64, reason: MissingReason },
    /// It lies in one of the dump's own mappings, whose bytes could not be read.
    #[error("in the dump's own mapping, but {reason}")]
    Mapping { reason: MissingReason },
}

impl Error {
    /// Why memory was missing, for physical and virtual read errors.
    pub fn missing_reason(&self) -> Option<&MissingReason> {
        match self {
            Error::Phys { reason, .. } => Some(reason),
            Error::Virt {
                reason: VirtReason::Phys { reason, .. } | VirtReason::Mapping { reason },
                ..
            } => Some(reason),
            _ => None,
        }
    }
}

/// The file an error is about, so parsers can build errors in one call.
#[derive(Debug, Clone)]
pub(crate) struct FileRef(pub Arc<Path>);

impl FileRef {
    pub fn malformed(&self, offset: u64, what: impl Into<String>) -> Error {
        Error::Malformed {
            file: self.0.clone(),
            offset,
            what: what.into(),
        }
    }

    pub fn phys(&self, addr: u64, reason: MissingReason) -> Error {
        Error::Phys {
            file: self.0.clone(),
            addr,
            reason,
        }
    }

    pub fn virt(&self, addr: u64, reason: VirtReason) -> Error {
        Error::Virt {
            file: self.0.clone(),
            addr,
            reason,
        }
    }

    pub fn io(&self, what: &'static str, source: io::Error) -> Error {
        Error::Io {
            file: self.0.clone(),
            what,
            source,
        }
    }
}
