//! The bytes of a dump: the file memory-mapped read-only, or, for a gzip-compressed dump, an
//! unlinked temporary file it was decompressed into once.
//!
//! The seam for /proc/kcore, which cannot be mapped and must never be cached: the ELF reader
//! parses headers from [`Storage::bytes`] and reads memory only through [`Storage::read_at`] and
//! caches nothing. A live variant holding the `File` would hand out the header pages (read
//! once) as its bytes and `pread` in `read_at`; the ELF reader would not change.

use std::fs::File;
use std::io;

use memmap2::Mmap;

use crate::error::{Error, FileRef};

pub(crate) struct Storage {
    /// `None` for an empty file, which cannot be mapped.
    map: Option<Mmap>,
    gunzipped: bool,
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

impl Storage {
    pub fn open(file_ref: &FileRef) -> Result<Storage, Error> {
        let file = File::open(&file_ref.0).map_err(|e| file_ref.io("cannot open", e))?;
        let map = map_file(&file).map_err(|e| file_ref.io("cannot memory-map", e))?;
        if let Some(compressed) = map.as_deref().filter(|m| m.starts_with(&GZIP_MAGIC)) {
            return Self::gunzip(file_ref, compressed);
        }
        Ok(Storage {
            map,
            gunzipped: false,
        })
    }

    /// Decompress into an unlinked temporary file (the size is only known at the end, and a
    /// dump can exceed RAM), then map that.
    fn gunzip(file_ref: &FileRef, compressed: &[u8]) -> Result<Storage, Error> {
        eprintln!(
            "dumpfmt: {} is gzip-compressed; decompressing it once to a temporary file...",
            file_ref.0.display()
        );
        let mut out =
            tempfile::tempfile().map_err(|e| file_ref.io("cannot create a temporary file", e))?;
        let mut decoder = flate2::read::MultiGzDecoder::new(compressed);
        io::copy(&mut decoder, &mut out).map_err(|e| file_ref.io("cannot decompress gzip", e))?;
        let map = map_file(&out).map_err(|e| file_ref.io("cannot map the decompressed dump", e))?;
        eprintln!(
            "dumpfmt: {}: decompressed {} bytes",
            file_ref.0.display(),
            map.as_ref().map_or(0, |m| m.len())
        );
        Ok(Storage {
            map,
            gunzipped: true,
        })
    }

    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or_default()
    }

    /// Copy the bytes at `offset` into `buf`; how many there were (fewer at the end of the file).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        let data = self.bytes();
        let Some(start) = usize::try_from(offset).ok().filter(|&o| o <= data.len()) else {
            return 0;
        };
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        n
    }

    pub fn gunzipped(&self) -> bool {
        self.gunzipped
    }
}

fn map_file(file: &File) -> io::Result<Option<Mmap>> {
    if file.metadata()?.len() == 0 {
        return Ok(None);
    }
    // SAFETY: the map is read-only and private to this process. If another process truncates
    // the file while we read it, accesses past the new end fault (SIGBUS); this is the
    // documented contract of every mmap-based dump reader and is stated in the README.
    unsafe { Mmap::map(file) }.map(Some)
}
