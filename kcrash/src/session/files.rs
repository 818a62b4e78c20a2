//! The command line's files, sorted by what they are (told by content, not by name), and raw
//! memory images named as crash(8) names them, `FILE@ADDRESS`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
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

/// The physical address of a raw memory image's first byte, as crash(8) takes it after `@`:
/// hex with `0x`, or decimal, optionally followed by `k`, `m` or `g` (KiB, MiB, GiB; either
/// case). Anything else — nothing, a sign, a space, a digit of the wrong base, a value past
/// 2^64 — is refused, saying why.
pub fn parse_phys_address(text: &str) -> std::result::Result<u64, String> {
    let bad = |why: &str| Err(format!("{text:?} is not a physical address: {why}"));
    let (number, shift) = match text.as_bytes().last() {
        Some(b'k' | b'K') => (&text[..text.len() - 1], 10),
        Some(b'm' | b'M') => (&text[..text.len() - 1], 20),
        Some(b'g' | b'G') => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    let (digits, radix) = match number
        .strip_prefix("0x")
        .or_else(|| number.strip_prefix("0X"))
    {
        Some(hex) => (hex, 16),
        None => (number, 10),
    };
    if digits.is_empty() {
        return bad("no digits (hex with 0x, or decimal, then k, m or g if you like)");
    }
    // from_str_radix takes a leading sign; an address has none.
    if !digits.bytes().all(|b| (b as char).is_digit(radix)) {
        return bad(if radix == 16 {
            "not a hex number after 0x"
        } else {
            "not a decimal number (hex needs 0x)"
        });
    }
    let value = match u64::from_str_radix(digits, radix) {
        Ok(v) => v,
        Err(_) => return bad("more than 64 bits"),
    };
    match value.checked_mul(1 << shift) {
        Some(v) => Ok(v),
        None => bad("more than 64 bits"),
    }
}

/// A command-line word naming a raw memory image, `FILE@ADDRESS`: the file and the address
/// after the last `@`. None when the word has no `@`, or names a file that exists as it is
/// (a file's name may hold `@`).
pub fn split_raw(word: &Path) -> Option<(PathBuf, &str)> {
    let bytes = word.as_os_str().as_bytes();
    let at = bytes.iter().rposition(|&b| b == b'@')?;
    if word.exists() || word.symlink_metadata().is_ok() {
        return None;
    }
    let address = std::str::from_utf8(&bytes[at + 1..]).unwrap_or("\u{fffd}");
    Some((PathBuf::from(OsStr::from_bytes(&bytes[..at])), address))
}

/// Opens the dump `path` by its content, or as raw memory whose byte 0 is physical
/// `phys_start` when that is given.
pub fn open_dump(path: &Path, phys_start: Option<u64>) -> Result<dumpfmt::Dump> {
    Ok(match phys_start {
        Some(start) => dumpfmt::Dump::open_raw(path, start)?,
        None => dumpfmt::Dump::open(path)?,
    })
}

/// The command line's files sorted by kind, given in any order.
#[derive(Debug)]
pub struct Files {
    pub dump: PathBuf,
    /// A raw memory image (`FILE@ADDRESS`): the physical address of its first byte.
    pub phys_start: Option<u64>,
    pub image: Option<PathBuf>,
    /// Kernel modules (`.ko`) to load at their addresses in the dump.
    pub modules: Vec<PathBuf>,
}

/// Sorts the command line's files into dump, image and modules, in any order. Without a dump,
/// the dump is the running kernel's memory (/proc/kcore); a file under /proc is taken as live
/// memory without being read here (opening it says why it cannot be read, if it cannot).
/// A word `FILE@ADDRESS` that names no file as it is is a raw memory image (always the dump,
/// whatever its content).
pub fn sort_files(files: &[PathBuf]) -> Result<Files> {
    let mut phys_start = None;
    let kinds = files
        .iter()
        .map(|f| {
            if let Some((path, address)) = split_raw(f) {
                let start = parse_phys_address(address).map_err(|why| {
                    Error::Usage(format!(
                        "{}: no such file, and as FILE@ADDRESS {why}",
                        f.display()
                    ))
                })?;
                phys_start = Some(start);
                return Ok((FileKind::Dump, path));
            }
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
        phys_start,
        dump,
        image,
        modules: of(FileKind::Module),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_as_crash_writes_them() {
        for (text, want) in [
            ("0", 0),
            ("0x0", 0),
            ("0x100000", 0x10_0000),
            ("0X10", 16),
            ("0xffffFFFF80000000", 0xffff_ffff_8000_0000),
            ("4096", 4096),
            ("007", 7),
            ("1m", 1 << 20),
            ("1M", 1 << 20),
            ("0x10k", 16 << 10),
            ("2g", 2 << 30),
            ("3K", 3 << 10),
            ("18446744073709551615", u64::MAX),
            ("0xffffffffffffffff", u64::MAX),
            ("17179869183g", 17_179_869_183 << 30),
            ("0xfg", 15 << 30),
        ] {
            assert_eq!(parse_phys_address(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn what_is_no_address() {
        for (text, why) in [
            ("", "no digits"),
            ("k", "no digits"),
            ("0x", "no digits"),
            ("0xk", "no digits"),
            ("x10", "not a decimal number"),
            ("ff", "not a decimal number"),
            ("0xfz", "not a hex number"),
            ("0xg", "no digits"),
            ("0x-1", "not a hex number"),
            ("-1", "not a decimal number"),
            ("+1", "not a decimal number"),
            (" 1", "not a decimal number"),
            ("1 ", "not a decimal number"),
            ("1_000", "not a decimal number"),
            ("1t", "not a decimal number"),
            ("1kk", "not a decimal number"),
            ("0x1.5", "not a hex number"),
            ("18446744073709551616", "more than 64 bits"),
            ("0x10000000000000000", "more than 64 bits"),
            ("17179869184g", "more than 64 bits"),
            ("0xffffffffffffffffk", "more than 64 bits"),
        ] {
            let e = parse_phys_address(text).unwrap_err();
            assert!(
                e.starts_with(&format!("{text:?} is not a physical address: ")) && e.contains(why),
                "{text:?}: {e}"
            );
        }
    }

    #[test]
    fn the_last_at_splits_a_word_that_names_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let at_name = dir.path().join("mem@0x10");
        std::fs::write(&at_name, b"x").unwrap();
        assert_eq!(
            split_raw(&at_name),
            None,
            "a file named with @ is that file"
        );
        assert_eq!(split_raw(&dir.path().join("vmcore")), None);
        let word = dir.path().join("a@b/mem@0x1000");
        assert_eq!(
            split_raw(&word),
            Some((dir.path().join("a@b/mem"), "0x1000"))
        );
        let word = dir.path().join("mem@0x10@4k");
        assert_eq!(
            split_raw(&word),
            Some((dir.path().join("mem@0x10"), "4k")),
            "the file mem@0x10 at 4 KiB"
        );
        assert_eq!(
            split_raw(Path::new("mem@")),
            Some((PathBuf::from("mem"), ""))
        );
    }

    #[test]
    fn a_raw_word_is_the_dump() {
        let dir = tempfile::tempdir().unwrap();
        let mem = dir.path().join("mem");
        std::fs::write(&mem, b"\x7fELF anything").unwrap();
        let word = PathBuf::from(format!("{}@0x100000", mem.display()));
        let files = sort_files(std::slice::from_ref(&word)).unwrap();
        assert_eq!(
            (files.dump, files.phys_start),
            (mem.clone(), Some(0x10_0000))
        );
        // Not read here: opening it says the file is missing.
        let missing = dir.path().join("missing@0x10");
        let files = sort_files(std::slice::from_ref(&missing)).unwrap();
        assert_eq!(files.dump, dir.path().join("missing"));
        let e = open_dump(&files.dump, files.phys_start)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing: cannot open"), "{e}");
        let bad = dir.path().join("mem@0xzz");
        let e = sort_files(std::slice::from_ref(&bad))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "{}: no such file, and as FILE@ADDRESS \"0xzz\" is not a physical address: \
                 not a hex number after 0x",
                bad.display()
            )
        );
        let e = sort_files(&[word.clone(), word]).unwrap_err().to_string();
        assert!(e.starts_with("more than one dump given"), "{e}");
    }
}
