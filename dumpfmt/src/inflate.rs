//! A gzipped dump, inflated once into an unlinked temporary file (its size is only known at
//! the end, and a dump can exceed RAM) and mapped: only as far as its own headers say it
//! reaches, read back as they arrive, so a small file never fills the disk. A raw memory image
//! has no header: the caller said it is memory, and all of the stream is (up to
//! [`INFLATED_MAX`], the most any dump's headers may claim).

use std::fs::File;
use std::io::{self, Read, Write};

use crate::claim::{Claim, INFLATED_MAX};
use crate::detect::{detect, read_head, FileKind};
use crate::error::{Error, FileRef};
use crate::storage::{map_file, read_full, Storage};

/// `bytes` as a dump's storage: inflated first when they are gzip.
pub(crate) fn storage(
    file_ref: &FileRef,
    bytes: impl AsRef<[u8]> + Send + Sync + 'static,
    mapped: bool,
) -> Result<Storage, Error> {
    if detect(bytes.as_ref()) == Some(FileKind::Gzip) {
        return gunzip(file_ref, bytes.as_ref());
    }
    Ok(Storage::whole(bytes, mapped))
}

/// `bytes` as a raw memory image's storage: a gzipped one is inflated whole, since no header
/// says where the memory ends.
pub(crate) fn raw_storage(
    file_ref: &FileRef,
    bytes: impl AsRef<[u8]> + Send + Sync + 'static,
    mapped: bool,
) -> Result<Storage, Error> {
    if detect(bytes.as_ref()) == Some(FileKind::Gzip) {
        return gunzip_whole(file_ref, bytes.as_ref());
    }
    Ok(Storage::whole(bytes, mapped))
}

/// Inflates all of `compressed` into an unlinked temporary file and maps it. A stream that
/// goes on past [`INFLATED_MAX`] is refused rather than inflated further: no header bounds a
/// raw image, and that is more than a gzipped dump's headers may claim.
fn gunzip_whole(file_ref: &FileRef, compressed: &[u8]) -> Result<Storage, Error> {
    let mut out =
        tempfile::tempfile().map_err(|e| file_ref.io("cannot create a temporary file", e))?;
    let decoder = flate2::read::MultiGzDecoder::new(compressed);
    let written = io::copy(&mut decoder.take(INFLATED_MAX + 1), &mut out)
        .map_err(|e| file_ref.io("cannot decompress gzip", e))?;
    if written > INFLATED_MAX {
        return Err(file_ref.malformed(
            0,
            format!(
                "the gzip stream inflates past {INFLATED_MAX:#x} bytes, more than a raw memory \
                 image is believed to hold"
            ),
        ));
    }
    let bytes = map_file(&out).map_err(|e| file_ref.io("cannot map the decompressed dump", e))?;
    Ok(Storage::inflated(bytes, None))
}

/// The inner format whose headers bound a gzipped dump (the flattened walk's next record).
enum Bound {
    Elf,
    Kdump,
    Flat(u64),
}

/// Decompress into an unlinked temporary file (the size is only known at the end, and a
/// dump can exceed RAM), then map that. The first bytes are looked at before the rest is
/// inflated: when they are no dump's signature, only they are kept (for the reader to say
/// what they are), so a small file of anything else never fills the disk. A dump is
/// inflated no further than its own headers say it reaches, read as they are inflated.
fn gunzip(file_ref: &FileRef, compressed: &[u8]) -> Result<Storage, Error> {
    let mut out =
        tempfile::tempfile().map_err(|e| file_ref.io("cannot create a temporary file", e))?;
    let inflate_error = |e| file_ref.io("cannot decompress gzip", e);
    let mut decoder = flate2::read::MultiGzDecoder::new(compressed);
    let (head, kind) = read_head(&mut decoder).map_err(inflate_error)?;
    out.write_all(&head)
        .map_err(|e| file_ref.io("cannot write the temporary file", e))?;
    let bound = match kind {
        Some(FileKind::ElfCore) => Some(Bound::Elf),
        Some(FileKind::Kdump) => Some(Bound::Kdump),
        Some(FileKind::KdumpFlattened) => Some(Bound::Flat(0)),
        _ => None,
    };
    let inflate_stopped = match bound {
        Some(bound) => inflate_bounded(&mut decoder, &mut out, head.len() as u64, bound, file_ref)?,
        None => None,
    };
    let bytes = map_file(&out).map_err(|e| file_ref.io("cannot map the decompressed dump", e))?;
    Ok(Storage::inflated(bytes, inflate_stopped))
}

/// Inflates `decoder` into `out` (which holds the first `written` bytes already) as far as the
/// dump's headers, read back from `out` as they arrive, say it reaches. A stream that ends
/// first is kept as it is (the readers say what is missing); one that goes on is cut there,
/// and where is returned.
fn inflate_bounded(
    decoder: &mut impl io::Read,
    out: &mut File,
    mut written: u64,
    mut bound: Bound,
    file_ref: &FileRef,
) -> Result<Option<u64>, Error> {
    let inflate_error = |e| file_ref.io("cannot decompress gzip", e);
    loop {
        let claim = {
            let inflated = written;
            let file: &File = out;
            let read = |offset: u64, len: u64| -> Option<Vec<u8>> {
                let end = offset.checked_add(len).filter(|&end| end <= inflated)?;
                let mut buf = vec![0u8; usize::try_from(end - offset).ok()?];
                let n = read_full(file, offset, &mut buf).ok()?;
                (n == buf.len()).then_some(buf)
            };
            match &mut bound {
                Bound::Elf => crate::elf::claimed_len(&read, file_ref)?,
                Bound::Kdump => crate::kdump::claimed_len(&read, file_ref)?,
                Bound::Flat(pos) => crate::flat::claimed_len(pos, &read, file_ref)?,
            }
        };
        let (Claim::Need(target) | Claim::End(target)) = claim;
        if written < target {
            written += io::copy(&mut decoder.take(target - written), out).map_err(inflate_error)?;
            if written < target {
                return Ok(None);
            }
        }
        if let Claim::End(end) = claim {
            let mut probe = Vec::new();
            decoder
                .take(1)
                .read_to_end(&mut probe)
                .map_err(inflate_error)?;
            return Ok((!probe.is_empty()).then_some(end));
        }
    }
}
