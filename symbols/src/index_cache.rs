//! The name index kept between sessions, as gdb's index-cache keeps its: the first session on
//! a large image without `.debug_names` scans its DWARF and writes both name indexes to a file
//! named by the image's build-id; later sessions memory-map that file and binary-search it, so
//! a lookup touches a few pages of it and only the DIEs it then reads.
//!
//! Where: `$KCRASH_INDEX_CACHE` (`off` turns the cache off), else `$XDG_CACHE_HOME/kcrash/index`,
//! else `~/.cache/kcrash/index`. The cache is never required: a directory that cannot be written
//! costs a scan per session and one note. A directory another user owns, or that others may
//! write to, is not used at all (one note); a new one is created private (0700). The cache file
//! is opened without blocking and without following a link, and must be a regular file: a FIFO
//! or a link put in its place is ignored with a note, never waited on.
//!
//! The file is untrusted input. Format, all little-endian:
//!
//! | offset | size      | field                                                    |
//! |--------|-----------|----------------------------------------------------------|
//! | 0      | 8         | magic `KCRSHIDX`                                         |
//! | 8      | 4         | format version                                           |
//! | 12     | 4         | build-id length (at most 64)                             |
//! | 16     | 64        | build-id, zero padded                                    |
//! | 80     | 8         | the debug file's size                                    |
//! | 88     | 8         | its modification time, nanoseconds since the epoch       |
//! | 96     | 8         | the length of its `.debug_info`                          |
//! | 104    | 8         | U, the number of units                                   |
//! | 112    | 8         | V, the number of variable entries                        |
//! | 120    | 8         | T, the number of type entries                            |
//! | 128    | 8         | checksum of the unit offsets and block checksums         |
//! | 136    | 8 U       | each unit's offset in `.debug_info`, ascending           |
//! | …      | 8 B       | a checksum of each 4 KiB block of the entries            |
//! | …      | 16 (V+T)  | variable then type entries: name hash, packed candidate  |
//!
//! On opening, the header is checked against the image, the length against the counts, and the
//! unit offsets (ascending, inside `.debug_info`) and block checksums against their checksum.
//! The entries, most of the file, are checked as lookups read them: each 4 KiB block against
//! its checksum the first time it is read, each DIE offset against `.debug_info`'s length. So
//! a session touches only the blocks its binary searches visit. A file that fails a check is
//! ignored, with a note, and replaced.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::UNIX_EPOCH;

use memmap2::Mmap;

use crate::elf::open_regular;
use crate::name_key::{Kind, NameHash};

const MAGIC: &[u8; 8] = b"KCRSHIDX";
/// Bumped whenever the layout or what the scan indexes (hence the entries) changes.
const VERSION: u32 = 2;
const HEADER: usize = 136;
const ENTRY: usize = 16;
const BLOCK: usize = 4096;
const MAX_BUILD_ID: usize = 64;

/// Images whose `.debug_info` is smaller than this are scanned each time: the scan takes a few
/// milliseconds, and a file per small program is clutter.
pub(crate) const MIN_DEBUG_INFO: u64 = 8 << 20;

/// What a cache file must match: the debug file it indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) build_id: Vec<u8>,
    pub(crate) file_size: u64,
    pub(crate) mtime_ns: u64,
    pub(crate) debug_info_len: u64,
}

impl Key {
    /// The key of the debug file at `path` with `build_id`; `None` when it has no usable
    /// build-id or cannot be stat'ed.
    pub(crate) fn of(path: &Path, build_id: &[u8], debug_info_len: u64) -> Option<Key> {
        if build_id.is_empty() || build_id.len() > MAX_BUILD_ID {
            return None;
        }
        let metadata = std::fs::metadata(path).ok()?;
        let mtime = metadata.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
        Some(Key {
            build_id: build_id.to_vec(),
            file_size: metadata.len(),
            mtime_ns: u64::try_from(mtime.as_nanos()).ok()?,
            debug_info_len,
        })
    }

    fn file_name(&self) -> String {
        let hex: String = self.build_id.iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}.idx")
    }

    /// The cache file for this key in `dir`.
    pub(crate) fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(self.file_name())
    }
}

/// The cache directory the environment names; `None` when the cache is off or there is no
/// home to put it in.
pub(crate) fn directory() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("KCRASH_INDEX_CACHE") {
        if dir == "off" {
            return None;
        }
        return Some(PathBuf::from(dir));
    }
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").filter(|d| !d.is_empty())?).join(".cache"),
    };
    Some(base.join("kcrash").join("index"))
}

/// A cache file, mapped, its header checked.
#[derive(Debug)]
pub(crate) struct CacheFile {
    map: Mmap,
    debug_info_len: u64,
    units: usize,
    variables: usize,
    types: usize,
    /// Where the block checksums and the entries start.
    sums_at: usize,
    entries_at: usize,
    /// Blocks found to match their checksum.
    checked: Box<[AtomicBool]>,
}

/// Why a cache file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rejected {
    /// There is none yet.
    Missing,
    /// There is one, but it is not a valid index of this image.
    Invalid(String),
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

impl CacheFile {
    /// The cache file for `key` in `dir`, its header checked.
    pub(crate) fn open(dir: &Path, key: &Key) -> Result<CacheFile, Rejected> {
        // Not blocking (a FIFO put there would hang every session in open) and not following a
        // link (the cache names no file but its own).
        let file = match open_regular(&key.path_in(dir), libc::O_NOFOLLOW) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Rejected::Missing),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(Rejected::Invalid("a symbolic link".into()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
                return Err(Rejected::Invalid("not a regular file".into()))
            }
            Err(e) => return Err(Rejected::Invalid(format!("cannot open: {e}"))),
        };
        // SAFETY: the map is read-only. Cache files are only ever replaced by rename, never
        // rewritten in place, so the mapped file does not change under us.
        let map = unsafe { Mmap::map(&file) }
            .map_err(|e| Rejected::Invalid(format!("cannot map: {e}")))?;
        CacheFile::validate(map, key).map_err(Rejected::Invalid)
    }

    fn validate(map: Mmap, key: &Key) -> Result<CacheFile, String> {
        let header = map
            .get(..HEADER)
            .ok_or_else(|| format!("{} bytes, shorter than the header", map.len()))?;
        let word = |at: usize| u64_at(header, at).unwrap_or(0);
        if &header[..8] != MAGIC {
            return Err("bad magic at offset 0".into());
        }
        let version = word(8) as u32;
        if version != VERSION {
            return Err(format!("format version {version} (expected {VERSION})"));
        }
        let id_len = (word(8) >> 32) as usize;
        if header[16..16 + MAX_BUILD_ID].get(..id_len) != Some(key.build_id.as_slice()) {
            return Err("build-id at offset 16 is not the image's".into());
        }
        for (at, what, expected) in [
            (80, "file size", key.file_size),
            (88, "modification time", key.mtime_ns),
            (96, ".debug_info length", key.debug_info_len),
        ] {
            if word(at) != expected {
                return Err(format!(
                    "{what} at offset {at} is {} (the image's is {expected})",
                    word(at)
                ));
            }
        }
        let (units, variables, types) = (word(104), word(112), word(120));
        let layout = Layout::of(units, variables, types);
        if layout.map(|l| l.len) != Some(map.len() as u64) {
            return Err(format!(
                "{} bytes, but the header at offset 104 counts {units} units, \
                 {variables} + {types} entries",
                map.len()
            ));
        }
        let layout = layout.unwrap_or_default();
        // All fit in the mapped length, so in usize.
        let (units, sums_at, entries_at) = (
            units as usize,
            layout.sums_at as usize,
            layout.entries_at as usize,
        );
        if checksum(&map[HEADER..entries_at]) != word(128) {
            return Err(
                "unit offsets or block checksums do not match the checksum at offset 128".into(),
            );
        }
        let mut previous = None;
        for i in 0..units {
            let offset = u64_at(&map, HEADER + i * 8).unwrap_or(u64::MAX);
            if offset >= key.debug_info_len || previous.is_some_and(|p| p >= offset) {
                return Err(format!(
                    "unit offset at {} is out of order or outside .debug_info",
                    HEADER + i * 8
                ));
            }
            previous = Some(offset);
        }
        let blocks = (entries_at - sums_at) / 8;
        Ok(CacheFile {
            map,
            debug_info_len: key.debug_info_len,
            units,
            variables: variables as usize,
            types: types as usize,
            sums_at,
            entries_at,
            checked: (0..blocks).map(|_| AtomicBool::new(false)).collect(),
        })
    }

    /// Where each unit starts in `.debug_info`, ascending.
    pub(crate) fn unit_offsets(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.units).map(|i| u64_at(&self.map, HEADER + i * 8).unwrap_or(0) as usize)
    }

    /// How many entries of `kind` there are.
    pub(crate) fn len(&self, kind: Kind) -> usize {
        match kind {
            Kind::Variables => self.variables,
            Kind::Types => self.types,
        }
    }

    /// Entry `index` of `kind`: name hash and packed candidate; an error when its block does
    /// not match its checksum or it names a DIE outside `.debug_info`.
    pub(crate) fn entry(&self, kind: Kind, index: usize) -> Result<(u64, u64), String> {
        let index = match kind {
            Kind::Variables => index,
            Kind::Types => self.variables + index,
        };
        let at = index * ENTRY;
        self.check_block(at / BLOCK)?;
        let start = self.entries_at + at;
        let (hash, packed) = (u64_at(&self.map, start), u64_at(&self.map, start + 8));
        match (hash, packed) {
            // The top bit is the `defined` flag (see `Candidate::pack`).
            (Some(hash), Some(packed)) if packed & !(1 << 63) < self.debug_info_len => {
                Ok((hash, packed))
            }
            _ => Err(format!(
                "entry at offset {start} names a DIE outside .debug_info"
            )),
        }
    }

    fn check_block(&self, block: usize) -> Result<(), String> {
        let checked = self
            .checked
            .get(block)
            .ok_or_else(|| format!("no block {block}"))?;
        if checked.load(Ordering::Relaxed) {
            return Ok(());
        }
        let start = self.entries_at + block * BLOCK;
        let end = (start + BLOCK).min(self.map.len());
        let sum = u64_at(&self.map, self.sums_at + block * 8);
        if Some(checksum(&self.map[start..end])) != sum {
            return Err(format!(
                "entries at offset {start} do not match their checksum"
            ));
        }
        checked.store(true, Ordering::Relaxed);
        Ok(())
    }
}

/// Where the parts of a file with these counts go; `None` if it would not fit in 64 bits.
#[derive(Default, Clone, Copy)]
struct Layout {
    sums_at: u64,
    entries_at: u64,
    len: u64,
}

impl Layout {
    fn of(units: u64, variables: u64, types: u64) -> Option<Layout> {
        let entries = variables.checked_add(types)?.checked_mul(ENTRY as u64)?;
        let blocks = entries.div_ceil(BLOCK as u64);
        let sums_at = units.checked_mul(8)?.checked_add(HEADER as u64)?;
        let entries_at = blocks.checked_mul(8)?.checked_add(sums_at)?;
        let len = entries_at.checked_add(entries)?;
        usize::try_from(len).ok()?;
        Some(Layout {
            sums_at,
            entries_at,
            len,
        })
    }
}

/// FNV-1a over 64-bit words: not a defence against a forger (a forged file can only point at
/// other DIEs, whose names are checked when read), but it catches damaged bytes.
fn checksum(bytes: &[u8]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for word in bytes.chunks_exact(8) {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        hash ^= u64::from_le_bytes(bytes);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Checks `bytes` as a cache file for a debug file with the figures its own header gives (so
/// that every check after the key's is reached), then reads every unit offset and entry as
/// lookups do: the number of units and of entries that read, or why the file was refused.
/// Public for the fuzz target, which holds bytes, not a file: sessions only ever map files.
pub fn check_index_cache(bytes: &[u8]) -> Result<(usize, usize), String> {
    if bytes.is_empty() {
        return Err("0 bytes".into());
    }
    let word = |at: usize| u64_at(bytes, at).unwrap_or(0);
    let id_len = (word(8) >> 32) as usize;
    let key = Key {
        build_id: bytes
            .get(16..16 + id_len.min(MAX_BUILD_ID))
            .unwrap_or_default()
            .to_vec(),
        file_size: word(80),
        mtime_ns: word(88),
        debug_info_len: word(96),
    };
    let mut map = memmap2::MmapMut::map_anon(bytes.len()).map_err(|e| e.to_string())?;
    map.copy_from_slice(bytes);
    let file = CacheFile::validate(map.make_read_only().map_err(|e| e.to_string())?, &key)?;
    let units = file.unit_offsets().count();
    let mut read = 0;
    for kind in [Kind::Variables, Kind::Types] {
        read += (0..file.len(kind))
            .filter(|&i| file.entry(kind, i).is_ok())
            .count();
    }
    Ok((units, read))
}

/// Makes the checksums of a cache file's bytes right again, when its counts give its length;
/// false when they do not. For the tests that damage a field on purpose and for the fuzz
/// target, whose mutations must reach the checks after the checksums.
pub fn reseal_index_cache(bytes: &mut [u8]) -> bool {
    let counts = (u64_at(bytes, 104), u64_at(bytes, 112), u64_at(bytes, 120));
    let (Some(units), Some(variables), Some(types)) = counts else {
        return false;
    };
    let Some(layout) = Layout::of(units, variables, types) else {
        return false;
    };
    if layout.len != bytes.len() as u64 {
        return false;
    }
    // All fit in the length checked just above.
    let (sums_at, entries_at) = (layout.sums_at as usize, layout.entries_at as usize);
    let sums: Vec<u64> = bytes[entries_at..].chunks(BLOCK).map(checksum).collect();
    for (i, sum) in sums.into_iter().enumerate() {
        let at = sums_at + i * 8;
        bytes[at..at + 8].copy_from_slice(&sum.to_le_bytes());
    }
    let sum = checksum(&bytes[HEADER..entries_at]);
    bytes[128..136].copy_from_slice(&sum.to_le_bytes());
    true
}

/// Writes the index for `key` into `dir`: to a temporary file, renamed into place, so that a
/// reader sees either no file or a whole one, and two sessions writing at once each rename a
/// whole file.
pub(crate) fn store(
    dir: &Path,
    key: &Key,
    units: &[u64],
    variables: &[(NameHash, u64)],
    types: &[(NameHash, u64)],
) -> std::io::Result<()> {
    let too_big = || std::io::Error::other("index too large");
    let layout = Layout::of(
        units.len() as u64,
        variables.len() as u64,
        types.len() as u64,
    )
    .ok_or_else(too_big)?;
    // Streamed twice (block checksums, then the file) rather than serialised whole: the
    // Debian kernel's entries are 36 MB.
    let entries = || {
        variables.iter().chain(types).map(|&(hash, packed)| {
            let mut bytes = [0u8; ENTRY];
            bytes[..8].copy_from_slice(&hash.value().to_le_bytes());
            bytes[8..].copy_from_slice(&packed.to_le_bytes());
            bytes
        })
    };
    let mut tables = Vec::with_capacity((layout.entries_at as usize) - HEADER);
    for offset in units {
        tables.extend_from_slice(&offset.to_le_bytes());
    }
    let mut block = Vec::with_capacity(BLOCK);
    for entry in entries() {
        block.extend_from_slice(&entry);
        if block.len() == BLOCK {
            tables.extend_from_slice(&checksum(&block).to_le_bytes());
            block.clear();
        }
    }
    if !block.is_empty() {
        tables.extend_from_slice(&checksum(&block).to_le_bytes());
    }
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&(key.build_id.len() as u32).to_le_bytes());
    let mut id = [0u8; MAX_BUILD_ID];
    id[..key.build_id.len()].copy_from_slice(&key.build_id);
    header.extend_from_slice(&id);
    for word in [
        key.file_size,
        key.mtime_ns,
        key.debug_info_len,
        units.len() as u64,
        variables.len() as u64,
        types.len() as u64,
        checksum(&tables),
    ] {
        header.extend_from_slice(&word.to_le_bytes());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let (temp, file) = tempfile_in(dir)?;
    let write = || -> std::io::Result<()> {
        let mut out = BufWriter::new(file);
        out.write_all(&header)?;
        out.write_all(&tables)?;
        for entry in entries() {
            out.write_all(&entry)?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&temp, key.path_in(dir))
    };
    let written = write();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// A new file in `dir` only this process writes to.
fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, File)> {
    let pid = std::process::id();
    for attempt in 0u32..100 {
        let path = dir.join(format!(".tmp-{pid}-{attempt}"));
        match File::options().write(true).create_new(true).open(&path) {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "no free temporary file name",
    ))
}

/// Why `dir` cannot be trusted with the cache, if it cannot: files there are read as the
/// image's index, so a directory another user owns, or others may write to, could feed a
/// session any index. One that does not exist yet is created private.
pub(crate) fn distrust(dir: &Path) -> Option<String> {
    let meta = match std::fs::metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return Some(format!("cannot stat it: {e}")),
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() {
        Some("not a directory".into())
    } else if meta.uid() != me {
        Some(format!(
            "owned by uid {}, not by this user ({me})",
            meta.uid()
        ))
    } else if meta.mode() & 0o022 != 0 {
        Some(format!(
            "writable by others (mode {:o})",
            meta.mode() & 0o7777
        ))
    } else {
        None
    }
}

/// Says once per process that the cache directory is not used, and why.
pub(crate) fn note_distrusted(dir: &Path, why: &str) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        eprintln!(
            "note: not using the name-index cache in {}: {why}; indexing each session",
            dir.display()
        );
    }
}

/// Says once per process that the cache could not be written, and why.
pub(crate) fn note_store_failed(dir: &Path, error: &std::io::Error) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        eprintln!(
            "note: cannot write the name-index cache in {} ({error}); indexing each session",
            dir.display()
        );
    }
}

/// Says that the cache file at `path` was not used, why, and what is done about it.
pub(crate) fn note_rejected(path: &Path, why: &str, action: &str) {
    eprintln!(
        "note: ignoring name-index cache {}: {why}; {action}",
        path.display()
    );
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::sync::Arc;

    use kcrash_harness::tools;

    use super::*;
    use crate::dwarf::DwarfFile;
    use crate::elf::ElfFile;
    use crate::index::NameIndex;
    use crate::sections::Sections;

    /// The C fixture built with gcc, or `None` (and a note) when gcc cannot run.
    fn c_fixture(dir: &Path) -> Option<PathBuf> {
        let program = dir.join("klog");
        let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/klog.c");
        let built = Command::new("gcc")
            .args(["-g", "-o"])
            .arg(&program)
            .arg(fixture)
            .status()
            .is_ok_and(|s| s.success());
        if !built {
            tools::not_run("cached_index_is_the_scanned_index_c_fixture", "gcc failed");
        }
        built.then_some(program)
    }

    fn debug_info(path: &Path) -> (DwarfFile, Key) {
        let file = ElfFile::open(path).unwrap();
        let build_id = file.build_id.clone().expect("the image has a build-id");
        let debug = DwarfFile::new(Sections::new(Arc::new(file)), None, u64::MAX).unwrap();
        let key = Key::of(path, &build_id, debug.debug_info_len()).unwrap();
        (debug, key)
    }

    fn cached_file(dir: &Path, key: &Key) -> CacheFile {
        CacheFile::open(dir, key).expect("a valid cache file")
    }

    /// Scans `image` into a fresh cache (which must write the file), reopens it (which must
    /// use the file, not scan), and checks that both give the same entries, the same units,
    /// and the same candidates for every ELF symbol name, as a variable, a type and a struct.
    fn check_round_trip(image: &Path) {
        let cache = tempfile::tempdir().unwrap();
        let (debug, key) = debug_info(image);
        let scanned = debug.cached_in(cache.path(), &key);
        assert!(
            scanned.file.is_none(),
            "a cache file before any was written"
        );
        let cached = debug.cached_in(cache.path(), &key);
        assert!(cached.file.is_some(), "the written cache file was not used");
        assert_eq!(scanned.variables.words(), cached.variables.words());
        assert_eq!(scanned.types.words(), cached.types.words());
        assert!(!scanned.variables.words().unwrap().is_empty());
        assert!(!scanned.types.words().unwrap().is_empty());
        let units: Vec<usize> = debug.units().offsets().map(|o| o as usize).collect();
        let file = cached_file(cache.path(), &key);
        assert_eq!(file.unit_offsets().collect::<Vec<_>>(), units);
        let elf = ElfFile::open(image).unwrap();
        let mut found = 0;
        for name in elf.symbols().names() {
            for (scan, cache, name) in [
                (&scanned.variables, &cached.variables, name.to_owned()),
                (&scanned.types, &cached.types, name.to_owned()),
                (&scanned.types, &cached.types, format!("struct {name}")),
            ] {
                let (a, b) = (scan.lookup(&name).unwrap(), cache.lookup(&name).unwrap());
                assert_eq!(format!("{a:?}"), format!("{b:?}"), "{name}");
                found += usize::from(!a.is_empty());
            }
        }
        assert!(found > 0, "no symbol name was found in either index");
    }

    #[test]
    fn cached_index_is_the_scanned_index_c_fixture() {
        let dir = tempfile::tempdir().unwrap();
        if let Some(program) = c_fixture(dir.path()) {
            check_round_trip(&program);
        }
    }

    #[test]
    fn cached_index_is_the_scanned_index_debian_vmlinux() {
        // Debian's vmlinux, as the Linux guest leaves it.
        let vmlinux = kcrash_harness::linux::guest_output().join("vmlinux");
        if !vmlinux.exists() {
            let why = format!("{} is missing (run the Linux guest)", vmlinux.display());
            return tools::not_run("cached_index_is_the_scanned_index_debian_vmlinux", &why);
        }
        check_round_trip(&vmlinux);
    }

    fn some_key() -> Key {
        Key {
            build_id: vec![0xab; 20],
            file_size: 1,
            mtime_ns: 2,
            debug_info_len: MIN_DEBUG_INFO,
        }
    }

    /// A FIFO or a link where the cache file should be is refused at once: opening it neither
    /// blocks nor follows the link.
    #[test]
    fn special_files_are_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let key = some_key();
        let path = key.path_in(dir.path());
        let made = Command::new("mkfifo").arg(&path).status();
        if made.is_ok_and(|s| s.success()) {
            assert_eq!(
                CacheFile::open(dir.path(), &key).unwrap_err(),
                Rejected::Invalid("not a regular file".into())
            );
            std::fs::remove_file(&path).unwrap();
        } else {
            tools::not_run("special_files_are_refused_without_waiting", "no mkfifo");
        }
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"KCRSHIDX").unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert_eq!(
            CacheFile::open(dir.path(), &key).unwrap_err(),
            Rejected::Invalid("a symbolic link".into())
        );
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert_eq!(
            CacheFile::open(dir.path(), &key).unwrap_err(),
            Rejected::Invalid("not a regular file".into())
        );
    }

    /// Only a private directory of this user's holds the cache; a new one is made private.
    #[test]
    fn only_a_private_directory_is_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("new");
        assert_eq!(distrust(&cache), None, "one that does not exist yet");
        store(&cache, &some_key(), &[], &[], &[]).unwrap();
        let mode = std::fs::metadata(&cache).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "created private");
        assert_eq!(distrust(&cache), None);
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(distrust(&cache)
            .unwrap()
            .contains("writable by others (mode 777)"));
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o720)).unwrap();
        assert!(distrust(&cache).unwrap().contains("writable by others"));
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        assert_eq!(distrust(&file).as_deref(), Some("not a directory"));
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            let chowned = Command::new("chown").arg("nobody").arg(&cache).status();
            assert!(chowned.is_ok_and(|s| s.success()), "chown nobody");
            assert!(distrust(&cache).unwrap().starts_with("owned by uid "));
        } else {
            tools::not_run_here(
                "only_a_private_directory_is_trusted: another user's directory",
                "not root, cannot give a directory away",
            );
        }
    }

    /// A valid cache file of the C fixture, its bytes, and what it was made for.
    struct Valid {
        _dir: tempfile::TempDir,
        cache: PathBuf,
        debug: DwarfFile,
        key: Key,
        bytes: Vec<u8>,
    }

    fn valid() -> Option<Valid> {
        let dir = tempfile::tempdir().unwrap();
        let program = c_fixture(dir.path())?;
        let cache = dir.path().join("cache");
        let (debug, key) = debug_info(&program);
        debug.cached_in(&cache, &key);
        let bytes = std::fs::read(key.path_in(&cache)).unwrap();
        cached_file(&cache, &key);
        Some(Valid {
            _dir: dir,
            cache,
            debug,
            key,
            bytes,
        })
    }

    fn set_u64(bytes: &mut [u8], at: usize, value: u64) {
        bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
    }

    fn get_u64(bytes: &[u8], at: usize) -> u64 {
        u64_at(bytes, at).unwrap()
    }

    /// Makes every checksum right again after a deliberate change.
    fn reseal(bytes: &mut [u8]) {
        assert!(reseal_index_cache(bytes), "counts that give the length");
    }

    /// What the fuzz target calls: a valid file's bytes read whole, damaged ones are refused.
    #[test]
    fn cache_bytes_are_checked_as_a_file_is() {
        let Some(valid) = valid() else { return };
        let (units, entries) = check_index_cache(&valid.bytes).unwrap();
        assert_eq!(units as u64, get_u64(&valid.bytes, 104));
        let counted = get_u64(&valid.bytes, 112) + get_u64(&valid.bytes, 120);
        assert_eq!(entries as u64, counted);
        let mut damaged = valid.bytes.clone();
        damaged[0] ^= 1;
        let e = check_index_cache(&damaged).unwrap_err();
        assert!(e.contains("magic"), "{e}");
        assert!(check_index_cache(&[]).is_err());
    }

    type Damage = fn(&mut Vec<u8>, &Key);

    /// Each damage to the header or tables is rejected on opening, for its own reason, and
    /// the next use rewrites a valid file.
    #[test]
    fn damaged_headers_are_rejected_and_rebuilt() {
        let Some(valid) = valid() else { return };
        let damages: [(&str, Damage, &str); 12] = [
            ("magic", |b, _| b[0] ^= 1, "bad magic"),
            ("version", |b, _| b[8] += 1, "format version"),
            ("build-id", |b, _| b[16] ^= 0xff, "build-id"),
            ("build-id length", |b, _| b[12] -= 1, "build-id"),
            (
                "file size",
                |b, k| set_u64(b, 80, k.file_size + 1),
                "file size",
            ),
            (
                "mtime",
                |b, k| set_u64(b, 88, k.mtime_ns - 1),
                "modification time",
            ),
            (
                ".debug_info length",
                |b, k| set_u64(b, 96, k.debug_info_len * 2),
                ".debug_info length",
            ),
            ("truncated", |b, _| b.truncate(b.len() - 1), "counts"),
            (
                "header only",
                |b, _| b.truncate(HEADER - 1),
                "shorter than the header",
            ),
            ("unit count", |b, _| b[104] += 1, "counts"),
            (
                "unit offset",
                |b, _| b[HEADER] ^= 1,
                "checksum at offset 128",
            ),
            (
                "unit offset out of bounds",
                |b, k| {
                    set_u64(b, HEADER, k.debug_info_len);
                    reseal(b);
                },
                "outside .debug_info",
            ),
        ];
        let path = valid.key.path_in(&valid.cache);
        for (what, damage, reason) in damages {
            let mut bytes = valid.bytes.clone();
            damage(&mut bytes, &valid.key);
            std::fs::write(&path, &bytes).unwrap();
            match CacheFile::open(&valid.cache, &valid.key) {
                Err(Rejected::Invalid(why)) => assert!(why.contains(reason), "{what}: {why}"),
                other => panic!("{what}: not rejected: {other:?}"),
            }
            assert!(valid
                .debug
                .cached_in(&valid.cache, &valid.key)
                .file
                .is_none());
            assert_eq!(
                std::fs::read(&path).unwrap(),
                valid.bytes,
                "{what}: not rebuilt"
            );
        }
    }

    /// Damaged entries pass the opening checks (which read no entries) and are caught when a
    /// lookup reads them.
    #[test]
    fn damaged_entries_are_rejected_when_read() {
        let Some(valid) = valid() else { return };
        let damages: [(&str, Damage, &str); 2] = [
            (
                "flipped entry byte",
                |b, _| *b.last_mut().unwrap() ^= 0x01,
                "do not match their checksum",
            ),
            (
                "DIE offset out of bounds",
                |b, k| {
                    let last = b.len() - 8;
                    set_u64(b, last, k.debug_info_len);
                    reseal(b);
                },
                "outside .debug_info",
            ),
        ];
        for (what, damage, reason) in damages {
            let mut bytes = valid.bytes.clone();
            damage(&mut bytes, &valid.key);
            std::fs::write(valid.key.path_in(&valid.cache), &bytes).unwrap();
            let file = Arc::new(cached_file(&valid.cache, &valid.key));
            let types = NameIndex::cached(file, Kind::Types);
            match types.words() {
                Err(why) => assert!(why.contains(reason), "{what}: {why}"),
                Ok(_) => panic!("{what}: not rejected"),
            }
        }
    }

    /// A key for another file of the same build-id (rebuilt, or copied with a new mtime).
    #[test]
    fn a_file_for_another_key_is_not_used() {
        let Some(valid) = valid() else { return };
        let mut other = valid.key.clone();
        other.mtime_ns += 1;
        assert!(matches!(
            CacheFile::open(&valid.cache, &other),
            Err(Rejected::Invalid(why)) if why.contains("modification time")
        ));
        other.build_id[0] ^= 1;
        assert_eq!(
            CacheFile::open(&valid.cache, &other).unwrap_err(),
            Rejected::Missing
        );
    }

    /// Sessions racing to write one cache file (each its own `DwarfFile`, as separate
    /// processes would have): every reader sees no file or a whole valid one, and no
    /// temporary file is left behind.
    #[test]
    fn concurrent_writers_do_not_corrupt() {
        let Some(valid) = valid() else { return };
        let path = valid.key.path_in(&valid.cache);
        std::fs::remove_file(&path).unwrap();
        let image = valid.debug.sections.file().path.clone();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..10 {
                        let (debug, key) = debug_info(&image);
                        let _ = std::fs::remove_file(key.path_in(&valid.cache));
                        debug.cached_in(&valid.cache, &key);
                    }
                });
            }
            scope.spawn(|| {
                for _ in 0..200 {
                    match CacheFile::open(&valid.cache, &valid.key) {
                        Ok(file) => {
                            let types = NameIndex::cached(Arc::new(file), Kind::Types);
                            types.words().expect("a whole file");
                        }
                        Err(Rejected::Missing) => {}
                        Err(Rejected::Invalid(why)) => panic!("a reader saw a bad file: {why}"),
                    }
                }
            });
        });
        assert_eq!(std::fs::read(&path).unwrap(), valid.bytes);
        let names: Vec<_> = std::fs::read_dir(&valid.cache)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [path.file_name().unwrap()]);
    }

    /// A cache directory that cannot be made (its parent is a file) costs only the scan.
    #[test]
    fn an_unwritable_cache_is_not_required() {
        let Some(valid) = valid() else { return };
        let blocker = valid.cache.join("a-file");
        std::fs::write(&blocker, b"").unwrap();
        let nowhere = blocker.join("index");
        let indexes = valid.debug.cached_in(&nowhere, &valid.key);
        assert!(indexes.file.is_none());
        let types = get_u64(&valid.bytes, 120) as usize;
        assert_eq!(indexes.types.words().unwrap().len(), types);
        assert!(store(&nowhere, &valid.key, &[], &[], &[]).is_err());
    }
}
