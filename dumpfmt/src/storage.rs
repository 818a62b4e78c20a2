//! The bytes of a dump: the file memory-mapped read-only; bytes a caller already holds; for a
//! gzip-compressed dump, the temporary file it was inflated into (by `inflate`); or, for a
//! running kernel's /proc/kcore, the file itself read with `pread` on every access.
//!
//! The ELF reader parses headers from [`Storage::bytes`] and reads memory only through
//! [`Storage::read_at`], caching nothing, so it reads a live file and a dump alike.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

use memmap2::Mmap;

use crate::bytes::{u16_le, u32_le, u64_le};
use crate::claim::HEADERS_MAX;
use crate::detect::open_regular;
use crate::error::{Error, FileRef};

/// A whole dump's bytes: a memory map, or a caller's buffer.
type Bytes = Box<dyn AsRef<[u8]> + Send + Sync>;

pub(crate) enum Storage {
    Whole {
        bytes: Bytes,
        /// The bytes are a read-only file mapping, whose pages can be given back once read.
        mapped: bool,
        gunzipped: bool,
        /// A gzip stream that went on past the end the dump's headers claim: that end (the
        /// rest was not inflated).
        inflate_stopped: Option<u64>,
    },
    /// A file whose contents change as it is read (/proc/kcore): it cannot be mapped and its
    /// size is not its length. Only the ELF header, program headers and notes are held (read
    /// at open); memory is read from the file each time it is asked for.
    Live {
        file: File,
        headers: Vec<u8>,
        /// One read at a time: Linux's /proc/kcore copies through a bounce buffer kept per open
        /// file (6.1's `filp->private_data`), so two threads' `pread`s on one descriptor can
        /// receive each other's bytes. Seen in the live guest: a `%s` argument rendered with
        /// another record's format string, once in six runs of `klog` on four threads.
        reads: Mutex<()>,
    },
}

impl Storage {
    /// `file_ref`'s bytes, memory-mapped (a gzipped file is inflated by the caller).
    pub fn map(file_ref: &FileRef) -> Result<impl AsRef<[u8]> + Send + Sync + 'static, Error> {
        let file = open_regular(&file_ref.0).map_err(|e| file_ref.io("cannot open", e))?;
        map_file(&file).map_err(|e| file_ref.io("cannot memory-map", e))
    }

    /// Bytes as they are; `mapped` when they are a read-only mapping of a file.
    pub fn whole(bytes: impl AsRef<[u8]> + Send + Sync + 'static, mapped: bool) -> Storage {
        Storage::Whole {
            bytes: Box::new(bytes),
            mapped,
            gunzipped: false,
            inflate_stopped: None,
        }
    }

    /// A dump inflated from gzip; `stopped`: where inflating stopped, if the stream went on
    /// past the end the dump's headers claim.
    pub fn inflated(
        bytes: impl AsRef<[u8]> + Send + Sync + 'static,
        stopped: Option<u64>,
    ) -> Storage {
        Storage::Whole {
            bytes: Box::new(bytes),
            mapped: true,
            gunzipped: true,
            inflate_stopped: stopped,
        }
    }

    /// Opens a live ELF core (/proc/kcore): reads its ELF header, then its program headers,
    /// then as far as its last note ends, each bounded by [`HEADERS_MAX`].
    pub fn open_live(file_ref: &FileRef) -> Result<Storage, Error> {
        let file = open_regular(&file_ref.0).map_err(|e| file_ref.io("cannot open", e))?;
        let read = |len: u64| -> Result<Vec<u8>, Error> {
            let mut buf = vec![0u8; len as usize];
            let n = read_full(&file, 0, &mut buf).map_err(|e| file_ref.io("cannot read", e))?;
            buf.truncate(n);
            Ok(buf)
        };
        let elf = read(64)?;
        let too_big = |offset: u64, what: &str, end: Option<u64>| match end {
            Some(end) if end <= HEADERS_MAX => Ok(end),
            _ => Err(file_ref.malformed(
                offset,
                format!("{what} end beyond {HEADERS_MAX:#x}: not a live core's headers"),
            )),
        };
        let (Some(phoff), Some(phnum)) = (u64_le(&elf, 32), u16_le(&elf, 56)) else {
            // Too short for an ELF header: the ELF reader says so with the offset.
            return Ok(Storage::Live {
                file,
                headers: elf,
                reads: Mutex::new(()),
            });
        };
        let phdrs_end = too_big(
            32,
            "program headers",
            phoff.checked_add(u64::from(phnum) * 56),
        )?;
        let phdrs = read(phdrs_end)?;
        let mut end = phdrs_end;
        // PN_XNUM: the real count is in section header 0, which the ELF reader then reads.
        if phnum == 0xffff {
            let shoff = u64_le(&elf, 40).unwrap_or_default();
            end = end.max(too_big(40, "section header 0", shoff.checked_add(64))?);
        }
        for i in 0..u64::from(phnum) {
            let at = phoff + i * 56;
            if u32_le(&phdrs, at) == Some(4) {
                let (offset, size) = (u64_le(&phdrs, at + 8), u64_le(&phdrs, at + 32));
                let note_end = offset.zip(size).and_then(|(o, s)| o.checked_add(s));
                end = end.max(too_big(at, "PT_NOTE", note_end)?);
            }
        }
        Ok(Storage::Live {
            headers: read(end)?,
            file,
            reads: Mutex::new(()),
        })
    }

    /// Gives the mapped pages wholly inside `offset..offset + len` back to the kernel: a pass over
    /// a whole dump (a search) then keeps its resident memory flat. The file's pages stay in the
    /// page cache, and a later read maps them again. Does nothing for bytes that are not a file
    /// mapping (dropping those would lose them).
    pub fn release(&self, offset: u64, len: u64) {
        let Storage::Whole {
            bytes,
            mapped: true,
            ..
        } = self
        else {
            return;
        };
        let all = (**bytes).as_ref();
        let end = offset.saturating_add(len).min(all.len() as u64);
        if offset >= end {
            return;
        }
        let base = all.as_ptr() as usize;
        let page = 4096;
        let start = (base + offset as usize).next_multiple_of(page);
        let stop = (base + end as usize) / page * page;
        if start < stop {
            // SAFETY: a page-aligned range inside this process's read-only private file
            // mapping; MADV_DONTNEED only drops the pages, which fault back in from the file.
            unsafe {
                libc::madvise(
                    start as *mut libc::c_void,
                    stop - start,
                    libc::MADV_DONTNEED,
                )
            };
        }
    }

    /// The whole dump; a live file's headers only.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Storage::Whole { bytes, .. } => (**bytes).as_ref(),
            Storage::Live { headers, .. } => headers,
        }
    }

    /// Copy the bytes at `offset` into `buf`; how many there were (fewer at the end of the
    /// file). Only a live file's read can fail.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let data = match self {
            Storage::Live { file, reads, .. } => {
                let _one = reads.lock().unwrap_or_else(|p| p.into_inner());
                return read_full(file, offset, buf);
            }
            Storage::Whole { .. } => self.bytes(),
        };
        let Some(start) = usize::try_from(offset).ok().filter(|&o| o <= data.len()) else {
            return Ok(0);
        };
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }

    /// Where inflating stopped while the gzip stream went on: the end the dump's headers claim.
    pub fn inflate_stopped(&self) -> Option<u64> {
        match self {
            Storage::Whole {
                inflate_stopped, ..
            } => *inflate_stopped,
            Storage::Live { .. } => None,
        }
    }

    pub fn gunzipped(&self) -> bool {
        matches!(
            self,
            Storage::Whole {
                gunzipped: true,
                ..
            }
        )
    }

    pub fn is_live(&self) -> bool {
        matches!(self, Storage::Live { .. })
    }
}

/// `pread` until `buf` is full or the file ends; how many bytes were read.
pub(crate) fn read_full(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// A file's bytes, memory-mapped.
pub(crate) struct MappedFile(
    /// `None` for an empty file, which cannot be mapped.
    Option<Mmap>,
);

impl AsRef<[u8]> for MappedFile {
    fn as_ref(&self) -> &[u8] {
        self.0.as_deref().unwrap_or_default()
    }
}

pub(crate) fn map_file(file: &File) -> io::Result<MappedFile> {
    if file.metadata()?.len() == 0 {
        return Ok(MappedFile(None));
    }
    // SAFETY: the map is read-only and private to this process. If another process truncates
    // the file while we read it, accesses past the new end fault (SIGBUS); this is the
    // documented contract of every mmap-based dump reader and is stated in the README.
    unsafe { Mmap::map(file) }.map(|map| MappedFile(Some(map)))
}
