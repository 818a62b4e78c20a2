//! What a file is, from its first bytes: the one place that knows each format's signature (the
//! readers take theirs from here, so this module imports none of them).
//! [`crate::Dump::open`] chooses its reader by it; callers that sort files (a dump from a kernel
//! image or a module) call [`detect`] on a file's first [`DETECT_LEN`] bytes.

use std::io::{self, Read};

use crate::bytes::u16_le;

/// Bytes of a file's start that [`detect`] looks at; fewer can only make it less sure (an ELF
/// file too short to hold its type is [`FileKind::ElfOther`]). ELF's `e_type`, at 16..18, is the
/// furthest byte read today; callers reading this many need not change if a check grows.
pub const DETECT_LEN: usize = 20;

const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
pub(crate) const KDUMP_SIGNATURE: &[u8; 8] = b"KDUMP   ";
/// The signature field is NUL-padded: "makedumpfile" alone could begin a text file.
const FLAT_SIGNATURE: &[u8; 13] = b"makedumpfile\0";
const GZIP_MAGIC: &[u8; 2] = b"\x1f\x8b";
/// The format kdump-compressed files replaced; recognised so that opening one can say so.
const DISKDUMP_SIGNATURE: &[u8; 8] = b"DISKDUMP";

const ET_REL: u16 = 1;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
pub(crate) const ET_CORE: u16 = 4;

/// What [`detect`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// ELF `ET_CORE`: a kernel dump or a process core.
    ElfCore,
    /// ELF `ET_REL`: a relocatable object, such as a kernel module (`.ko`).
    ElfRelocatable,
    /// ELF `ET_EXEC` or `ET_DYN`: a kernel image, an executable or a shared object.
    ElfExecutable,
    /// ELF of another type, or too short to hold its type.
    ElfOther,
    /// kdump-compressed (`KDUMP   `).
    Kdump,
    /// makedumpfile's flattened stream (`makedumpfile\0`).
    KdumpFlattened,
    /// The old diskdump format (`DISKDUMP`): recognised, but [`crate::Dump::open`] refuses it.
    Diskdump,
    /// gzip-compressed; [`crate::Dump::open`] reads a gzipped dump of any format above.
    Gzip,
}

impl FileKind {
    /// Any of the ELF kinds.
    pub fn is_elf(self) -> bool {
        matches!(
            self,
            FileKind::ElfCore
                | FileKind::ElfRelocatable
                | FileKind::ElfExecutable
                | FileKind::ElfOther
        )
    }
}

/// The first [`DETECT_LEN`] bytes of `source` (fewer when it ends first), read to the end of
/// that many whatever the reads return, and what [`detect`] makes of them.
/// Opens `path` for reading if it is a regular file. Opened without blocking, so a FIFO (or a
/// device that waits) named as a dump, or by a core's note, is refused instead of hanging; then
/// checked on the open file, so nothing can be swapped in between.
pub fn open_regular(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if file.metadata()?.file_type().is_file() {
        Ok(file)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device, socket or directory)",
        ))
    }
}

pub fn read_head(source: &mut impl Read) -> io::Result<(Vec<u8>, Option<FileKind>)> {
    let mut head = Vec::with_capacity(DETECT_LEN);
    source.take(DETECT_LEN as u64).read_to_end(&mut head)?;
    let kind = detect(&head);
    Ok((head, kind))
}

/// What a file is, by the signature at its start (`head`: its first [`DETECT_LEN`] bytes, or
/// more, or the whole file if shorter). `None` when no signature matches. Only the signature
/// and the ELF type are looked at: a file detected as a dump can still fail to open.
pub fn detect(head: &[u8]) -> Option<FileKind> {
    if head.starts_with(ELF_MAGIC) {
        return Some(match u16_le(head, 16) {
            Some(ET_CORE) => FileKind::ElfCore,
            Some(ET_REL) => FileKind::ElfRelocatable,
            Some(ET_EXEC | ET_DYN) => FileKind::ElfExecutable,
            _ => FileKind::ElfOther,
        });
    }
    let signatures: [(&[u8], FileKind); 4] = [
        (KDUMP_SIGNATURE, FileKind::Kdump),
        (FLAT_SIGNATURE, FileKind::KdumpFlattened),
        (DISKDUMP_SIGNATURE, FileKind::Diskdump),
        (GZIP_MAGIC, FileKind::Gzip),
    ];
    signatures
        .into_iter()
        .find(|(signature, _)| head.starts_with(signature))
        .map(|(_, kind)| kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that gives one byte per read, as a pipe or a decompressor may.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let Some((&first, rest)) = self.0.split_first() else {
                return Ok(0);
            };
            match buf.first_mut() {
                Some(b) => {
                    *b = first;
                    self.0 = rest;
                    Ok(1)
                }
                None => Ok(0),
            }
        }
    }

    #[test]
    fn the_head_is_read_whole_from_short_reads_and_no_further() {
        let mut file = elf(4);
        file.extend_from_slice(&[0xaa; 100]);
        let mut source = Trickle(&file);
        let (head, kind) = read_head(&mut source).unwrap();
        assert_eq!(head, &file[..DETECT_LEN]);
        assert_eq!(kind, Some(FileKind::ElfCore));
        assert_eq!(
            source.0.len(),
            file.len() - DETECT_LEN,
            "nothing past the head"
        );
        let (head, kind) = read_head(&mut Trickle(b"KDUMP")).unwrap();
        assert_eq!((head.as_slice(), kind), (&b"KDUMP"[..], None));
    }

    fn elf(e_type: u16) -> Vec<u8> {
        let mut head = b"\x7fELF\x02\x01\x01".to_vec();
        head.resize(16, 0);
        head.extend_from_slice(&e_type.to_le_bytes());
        head.extend_from_slice(&62u16.to_le_bytes());
        head
    }

    #[test]
    fn elf_files_are_told_apart_by_type() {
        assert_eq!(detect(&elf(4)), Some(FileKind::ElfCore));
        assert_eq!(detect(&elf(1)), Some(FileKind::ElfRelocatable));
        assert_eq!(detect(&elf(2)), Some(FileKind::ElfExecutable));
        assert_eq!(detect(&elf(3)), Some(FileKind::ElfExecutable));
        assert_eq!(detect(&elf(5)), Some(FileKind::ElfOther));
        assert_eq!(elf(4).len(), DETECT_LEN);
    }

    #[test]
    fn an_elf_head_too_short_for_its_type_is_elf_other() {
        assert_eq!(detect(&elf(4)[..17]), Some(FileKind::ElfOther));
        assert_eq!(detect(b"\x7fELF"), Some(FileKind::ElfOther));
        assert!(FileKind::ElfOther.is_elf());
        assert!(!FileKind::Kdump.is_elf());
    }

    #[test]
    fn dump_signatures() {
        assert_eq!(detect(b"KDUMP   \x06\0\0\0"), Some(FileKind::Kdump));
        assert_eq!(
            detect(b"makedumpfile\0\0\0\0\0\0\0\0"),
            Some(FileKind::KdumpFlattened)
        );
        assert_eq!(detect(b"DISKDUMP\0\0"), Some(FileKind::Diskdump));
        assert_eq!(detect(b"\x1f\x8b\x08\0"), Some(FileKind::Gzip));
    }

    #[test]
    fn near_misses_are_nothing() {
        assert_eq!(detect(b""), None);
        assert_eq!(detect(b"\x7fEL"), None);
        assert_eq!(detect(b"KDUMP  "), None);
        assert_eq!(detect(b"makedumpfile is a tool"), None);
        assert_eq!(detect(b"\x1f"), None);
        assert_eq!(detect(b"hello, world"), None);
    }
}
