//! Shared, immutable byte buffers that gimli can read without copying.
//!
//! A section's bytes live either in the file's memory map or, for a compressed section, in the
//! buffer it was decompressed into. [`Bytes`] is a cheap handle on a sub-range of one of those
//! buffers; gimli's `EndianReader` over it gives zero-copy parsing with no lifetime tied to the
//! [`crate::Image`].

use std::fmt;
use std::ops::{Deref, Range};
use std::sync::Arc;

use memmap2::Mmap;

use crate::relocate::Relocations;

/// Where bytes live.
pub(crate) enum Buffer {
    /// A read-only memory map of a file, and the file (read past the map by [`Bytes::copy_to`]).
    Map(Mmap, std::fs::File),
    /// Bytes owned in memory (a decompressed section, or an image given as bytes).
    Owned(Vec<u8>),
}

impl Buffer {
    fn as_slice(&self) -> &[u8] {
        match self {
            Buffer::Map(map, _) => map,
            Buffer::Owned(vec) => vec,
        }
    }
}

/// A sub-range of a shared [`Buffer`].
#[derive(Clone)]
pub(crate) struct Bytes {
    buffer: Arc<Buffer>,
    range: Range<usize>,
}

impl Bytes {
    /// All of `buffer`.
    pub(crate) fn new(buffer: Buffer) -> Bytes {
        let len = buffer.as_slice().len();
        Bytes {
            buffer: Arc::new(buffer),
            range: 0..len,
        }
    }

    /// The empty buffer, for absent sections.
    pub(crate) fn empty() -> Bytes {
        Bytes::new(Buffer::Owned(Vec::new()))
    }

    /// `len` bytes at `offset` within these bytes, or `None` if that is out of range.
    pub(crate) fn slice(&self, offset: u64, len: u64) -> Option<Bytes> {
        let start = self
            .range
            .start
            .checked_add(usize::try_from(offset).ok()?)?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        if end > self.range.end {
            return None;
        }
        Some(Bytes {
            buffer: Arc::clone(&self.buffer),
            range: start..end,
        })
    }
}

impl Bytes {
    /// Asks the kernel to map all these bytes now, if they are file-backed: one call instead of
    /// a page fault every few pages when a parser walks through them. Only a hint; failure
    /// (an old kernel) changes nothing but speed.
    pub(crate) fn prefault(&self) {
        if let Buffer::Map(map, _) = &*self.buffer {
            let _ = map.advise_range(
                memmap2::Advice::PopulateRead,
                self.range.start,
                self.range.len(),
            );
        }
    }
}

impl Bytes {
    /// Copies the bytes at `offset` into `buf`, which must be within these bytes. A file-backed
    /// buffer is read with `pread`, not through the map: a walk that reads a few bytes every
    /// few pages (the unit headers of `.debug_info`) would otherwise map most of the file into
    /// the process, as the kernel maps the pages around each one it faults in.
    pub(crate) fn copy_to(&self, offset: u64, buf: &mut [u8]) -> bool {
        let Some(bytes) = self.slice(offset, buf.len() as u64) else {
            return false;
        };
        match &*self.buffer {
            Buffer::Map(_, file) => {
                use std::os::unix::fs::FileExt;
                file.read_exact_at(buf, bytes.range.start as u64).is_ok()
            }
            Buffer::Owned(_) => {
                buf.copy_from_slice(&bytes);
                true
            }
        }
    }
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // The range was checked against the buffer when this handle was made.
        self.buffer
            .as_slice()
            .get(self.range.clone())
            .unwrap_or(&[])
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes({:#x}..{:#x})", self.range.start, self.range.end)
    }
}

// SAFETY: the bytes are owned by the `Arc`ed buffer (a memory map or a heap vector), which never
// moves or changes while any handle exists, so the address `deref` returns is the same for a
// handle, its moves and its clones.
unsafe impl stable_deref_trait::StableDeref for Bytes {}
// SAFETY: as above; a clone shares the same buffer and range.
unsafe impl stable_deref_trait::CloneStableDeref for Bytes {}

/// The reader all DWARF parsing in this crate uses: zero-copy over [`Bytes`], with a
/// relocatable file's relocations applied to the addresses and offsets it reads (none for
/// other files).
pub(crate) type Reader =
    gimli::RelocateReader<gimli::EndianReader<gimli::RunTimeEndian, Bytes>, Relocations>;

/// A reader over all of `bytes`.
pub(crate) fn reader(
    bytes: Bytes,
    endian: gimli::RunTimeEndian,
    relocations: Relocations,
) -> Reader {
    gimli::RelocateReader::new(gimli::EndianReader::new(bytes, endian), relocations)
}

/// The bytes `reader` has left, without copying: our readers always borrow theirs.
pub(crate) fn raw(reader: &Reader) -> &[u8] {
    match gimli::Reader::to_slice(reader) {
        Ok(std::borrow::Cow::Borrowed(bytes)) => bytes,
        _ => &[],
    }
}
