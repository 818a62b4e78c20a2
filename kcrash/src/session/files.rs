//! The command line's files, sorted by what they are (told by content, not by name).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::linux;

/// What a file given on the command line is, told by its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Dump,
    Image,
    /// A relocatable object: a kernel module's `.ko`.
    Module,
}

/// What dumpfmt's detector makes of `path`'s first bytes.
fn detect(path: &Path) -> Result<Option<dumpfmt::FileKind>> {
    let io = |source| Error::Io {
        what: path.display().to_string(),
        source,
    };
    let mut file = dumpfmt::open_regular(path).map_err(io)?;
    Ok(dumpfmt::read_head(&mut file).map_err(io)?.1)
}

/// Whether `path` is gzip-compressed (dumpfmt then decompresses it before reading it).
pub fn is_gzip(path: &Path) -> bool {
    matches!(detect(path), Ok(Some(dumpfmt::FileKind::Gzip)))
}

/// Reads the first bytes of `path` and says whether it is a dump or an image.
fn file_kind(path: &Path) -> Result<FileKind> {
    use dumpfmt::FileKind as Detected;
    match detect(path)? {
        Some(
            Detected::ElfCore
            | Detected::Kdump
            | Detected::KdumpFlattened
            | Detected::Diskdump
            | Detected::Gzip,
        ) => Ok(FileKind::Dump),
        Some(Detected::ElfRelocatable) => Ok(FileKind::Module),
        Some(Detected::ElfExecutable) => Ok(FileKind::Image),
        Some(Detected::ElfOther) => Err(Error::Usage(format!(
            "{}: an ELF file that is neither a core dump nor an image",
            path.display()
        ))),
        None => Err(Error::Usage(format!(
            "{}: neither a dump (ELF core, kdump, flattened, gzip) nor an ELF image",
            path.display()
        ))),
    }
}

/// The command line's files sorted by kind, given in any order.
#[derive(Debug)]
pub struct Files {
    pub dump: PathBuf,
    pub image: Option<PathBuf>,
    /// Kernel modules (`.ko`) to load at their addresses in the dump.
    pub modules: Vec<PathBuf>,
}

/// Sorts the command line's files into dump, image and modules, in any order. Without a dump,
/// the dump is the running kernel's memory (/proc/kcore); a file under /proc is taken as live
/// memory without being read here (opening it says why it cannot be read, if it cannot).
pub fn sort_files(files: &[PathBuf]) -> Result<Files> {
    let kinds = files
        .iter()
        .map(|f| {
            let kind = if linux::live::is_live_path(f) {
                Ok(FileKind::Dump)
            } else {
                file_kind(f)
            };
            kind.map(|k| (k, f.clone()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let of = |kind: FileKind| -> Vec<PathBuf> {
        kinds
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, p)| p.clone())
            .collect()
    };
    let (dumps, images) = (of(FileKind::Dump), of(FileKind::Image));
    let usage = "kcrash [DUMP] [IMAGE] [MODULE.ko...]";
    let live = || PathBuf::from(linux::live::KCORE);
    let (dump, image) = match (dumps.as_slice(), images.as_slice()) {
        ([d], []) => (d.clone(), None),
        ([d], [i]) => (d.clone(), Some(i.clone())),
        ([], []) => (live(), None),
        ([], [i]) => (live(), Some(i.clone())),
        (_, [_, _, ..]) => return Err(Error::Usage(format!("more than one image given: {usage}"))),
        _ => return Err(Error::Usage(format!("more than one dump given: {usage}"))),
    };
    Ok(Files {
        dump,
        image,
        modules: of(FileKind::Module),
    })
}
