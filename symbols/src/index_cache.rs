//! The name index kept between sessions, as gdb's index-cache keeps its: the first session on
//! a large image without `.debug_names` scans its DWARF and writes both name indexes to a file
//! named by the image's build-id; later sessions memory-map that file and binary-search it, so
//! a lookup touches a few pages of it and only the DIEs it then reads.
//!
//! Where: `$KCRASH_INDEX_CACHE` (`off` turns the cache off), else `$XDG_CACHE_HOME/kcrash/index`,
//! else `~/.cache/kcrash/index`. The cache is never required: a directory that cannot be written
//! costs a scan per session and one note.
//!
//! The file is untrusted input. Format, all little-endian:
//!
//! | offset | size | field                                                 |
//! |--------|------|-------------------------------------------------------|
//! | 0      | 8    | magic `KCRSHIDX`                                      |
//! | 8      | 4    | format version                                        |
//! | 12     | 4    | build-id length (at most 64)                          |
//! | 16     | 64   | build-id, zero padded                                 |
//! | 80     | 8    | the debug file's size                                 |
//! | 88     | 8    | its modification time, nanoseconds since the epoch    |
//! | 96     | 8    | the length of its `.debug_info`                       |
//! | 104    | 8    | number of variable entries                            |
//! | 112    | 8    | number of type entries                                |
//! | 120    | 8    | checksum of the entries                               |
//! | 128    | 16 each | variable entries, then type entries: name hash, packed candidate |
//!
//! Every field is checked on opening: the key fields against the image, the length against the
//! counts, and every entry (sorted, DIE offset inside `.debug_info`, checksum) in one pass, so
//! that a lookup can trust what it binary-searches. A file that fails is ignored, with a note,
//! and replaced.

use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::UNIX_EPOCH;

use memmap2::Mmap;

use crate::index::Kind;

const MAGIC: &[u8; 8] = b"KCRSHIDX";
/// Bumped whenever the layout or what the scan indexes (hence the entries) changes.
const VERSION: u32 = 1;
const HEADER: usize = 128;
const ENTRY: usize = 16;
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

/// A validated cache file, mapped.
#[derive(Debug)]
pub(crate) struct CacheFile {
    map: Mmap,
    variables: Range<usize>,
    types: Range<usize>,
}

/// Why a cache file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rejected {
    /// There is none yet.
    Missing,
    /// There is one, but it is not a valid index of this image.
    Invalid(String),
}

impl CacheFile {
    /// The cache file for `key` in `dir`, checked whole.
    pub(crate) fn open(dir: &Path, key: &Key) -> Result<CacheFile, Rejected> {
        let path = dir.join(key.file_name());
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Rejected::Missing),
            Err(e) => return Err(Rejected::Invalid(format!("cannot open: {e}"))),
        };
        // SAFETY: the map is read-only and private to us; a file truncated under us by another
        // process would fault, but cache files are only ever replaced by rename, never
        // rewritten in place.
        let map = unsafe { Mmap::map(&file) }
            .map_err(|e| Rejected::Invalid(format!("cannot map: {e}")))?;
        CacheFile::validate(map, key).map_err(Rejected::Invalid)
    }

    fn validate(map: Mmap, key: &Key) -> Result<CacheFile, String> {
        let header = map
            .get(..HEADER)
            .ok_or_else(|| format!("{} bytes, shorter than the header", map.len()))?;
        let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().unwrap());
        let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().unwrap());
        if &header[..8] != MAGIC {
            return Err("bad magic at offset 0".into());
        }
        if u32_at(8) != VERSION {
            return Err(format!("format version {} (expected {VERSION})", u32_at(8)));
        }
        let id_len = u32_at(12) as usize;
        if header[16..16 + MAX_BUILD_ID].get(..id_len) != Some(key.build_id.as_slice()) {
            return Err("build-id at offset 16 is not the image's".into());
        }
        for (at, what, expected) in [
            (80, "file size", key.file_size),
            (88, "modification time", key.mtime_ns),
            (96, ".debug_info length", key.debug_info_len),
        ] {
            if u64_at(at) != expected {
                return Err(format!(
                    "{what} at offset {at} is {} (the image's is {expected})",
                    u64_at(at)
                ));
            }
        }
        let (variables, types) = (u64_at(104), u64_at(112));
        let expected_len = variables
            .checked_add(types)
            .and_then(|n| n.checked_mul(ENTRY as u64))
            .and_then(|n| n.checked_add(HEADER as u64));
        if expected_len != Some(map.len() as u64) {
            return Err(format!(
                "{} bytes, but the header at offset 104 counts {variables} + {types} entries",
                map.len()
            ));
        }
        // Both fit: their sum times ENTRY is the mapped length.
        let variables = HEADER..HEADER + variables as usize * ENTRY;
        let types = variables.end..map.len();
        for range in [&variables, &types] {
            check_entries(&map[range.clone()], range.start, key.debug_info_len)?;
        }
        if checksum(&map[HEADER..]) != u64_at(120) {
            return Err("entries do not match the checksum at offset 120".into());
        }
        Ok(CacheFile {
            map,
            variables,
            types,
        })
    }

    /// The entries of `kind`, 16 bytes each, sorted.
    pub(crate) fn entries(&self, kind: Kind) -> &[u8] {
        let range = match kind {
            Kind::Variables => &self.variables,
            Kind::Types => &self.types,
        };
        &self.map[range.clone()]
    }
}

/// One entry: name hash and packed candidate.
pub(crate) fn entry(entries: &[u8], index: usize) -> (u64, u64) {
    let at = index * ENTRY;
    let word = |at: usize| u64::from_le_bytes(entries[at..at + 8].try_into().unwrap());
    (word(at), word(at + 8))
}

/// Entries in order, each naming a DIE inside `.debug_info`.
fn check_entries(entries: &[u8], at: usize, debug_info_len: u64) -> Result<(), String> {
    let mut previous = (0, 0);
    for i in 0..entries.len() / ENTRY {
        let (hash, packed) = entry(entries, i);
        let offset = at + i * ENTRY;
        if (hash, packed) < previous {
            return Err(format!("entry at offset {offset} is out of order"));
        }
        // The top bit is the `defined` flag (see `Candidate::pack`).
        if packed & !(1 << 63) >= debug_info_len {
            return Err(format!(
                "entry at offset {offset} names a DIE outside .debug_info"
            ));
        }
        previous = (hash, packed);
    }
    Ok(())
}

/// FNV-1a over 64-bit words: not a defence against a forger (a forged file can only point at
/// other DIEs, whose names are checked when read), but it catches damaged bytes.
fn checksum(bytes: &[u8]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for word in bytes.chunks_exact(8) {
        hash ^= u64::from_le_bytes(word.try_into().unwrap());
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Writes the index for `key` into `dir`: to a temporary file, renamed into place, so that a
/// reader sees either no file or a whole one, and two sessions writing at once each rename a
/// whole file.
pub(crate) fn store(
    dir: &Path,
    key: &Key,
    variables: &[(u64, u64)],
    types: &[(u64, u64)],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut body = Vec::with_capacity((variables.len() + types.len()) * ENTRY);
    for &(hash, packed) in variables.iter().chain(types) {
        body.extend_from_slice(&hash.to_le_bytes());
        body.extend_from_slice(&packed.to_le_bytes());
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
        variables.len() as u64,
        types.len() as u64,
        checksum(&body),
    ] {
        header.extend_from_slice(&word.to_le_bytes());
    }
    debug_assert_eq!(header.len(), HEADER);
    let mut temp = tempfile_in(dir)?;
    temp.1.write_all(&header)?;
    temp.1.write_all(&body)?;
    temp.1.sync_all()?;
    let result = std::fs::rename(&temp.0, dir.join(key.file_name()));
    if result.is_err() {
        let _ = std::fs::remove_file(&temp.0);
    }
    result
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

/// Says that a cache file was ignored, and why.
pub(crate) fn note_rejected(dir: &Path, key: &Key, why: &str) {
    eprintln!(
        "note: ignoring name-index cache {}: {why}; rebuilding it",
        dir.join(key.file_name()).display()
    );
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::sync::Arc;

    use super::*;
    use crate::dwarf::DebugInfo;
    use crate::elf::ElfFile;
    use crate::index::NameIndex;
    use crate::sections::Sections;

    /// Debian 6.1's vmlinux, as the Linux guest harness leaves it.
    const VMLINUX: &str = "/var/cache/kcrash-ci/linux-guest/6.1.0-56-amd64/vmlinux";

    fn required() -> bool {
        std::env::var("KCRASH_REQUIRE_TOOLS").as_deref() == Ok("1")
    }

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
            assert!(!required(), "gcc failed (KCRASH_REQUIRE_TOOLS=1)");
            eprintln!("NOT RUN: gcc cannot build the C fixture");
        }
        built.then_some(program)
    }

    fn debug_info(path: &Path) -> (DebugInfo, Key) {
        let file = ElfFile::open(path).unwrap();
        let build_id = file.build_id.clone().expect("the image has a build-id");
        let debug = DebugInfo::new(Sections::new(Arc::new(file))).unwrap();
        let key = Key::of(path, &build_id, debug.debug_info_len()).unwrap();
        (debug, key)
    }

    /// Scans `image` into a fresh cache (which must write the file), reopens it (which must
    /// map it, not scan), and checks that both give the same entries and the same candidates
    /// for every ELF symbol name and `struct NAME` of it.
    fn check_round_trip(image: &Path) {
        let cache = tempfile::tempdir().unwrap();
        let (debug, key) = debug_info(image);
        let scanned = debug.cached_in(cache.path(), &key);
        assert!(
            cache.path().join(key.file_name()).exists(),
            "no cache file written"
        );
        let file = Arc::new(CacheFile::open(cache.path(), &key).expect("a valid cache file"));
        let cached = (
            NameIndex::cached(Arc::clone(&file), Kind::Variables),
            NameIndex::cached(file, Kind::Types),
        );
        assert_eq!(scanned.0.words(), cached.0.words());
        assert_eq!(scanned.1.words(), cached.1.words());
        assert!(!scanned.0.words().is_empty() && !scanned.1.words().is_empty());
        let elf = ElfFile::open(image).unwrap();
        let mut checked = 0;
        for name in elf.symbols().names() {
            for (scan, cache, name) in [
                (&scanned.0, &cached.0, name.to_owned()),
                (&scanned.1, &cached.1, name.to_owned()),
                (&scanned.1, &cached.1, format!("struct {name}")),
            ] {
                let (a, b) = (scan.lookup(&name), cache.lookup(&name));
                assert_eq!(format!("{a:?}"), format!("{b:?}"), "{name}");
                checked += usize::from(!a.is_empty());
            }
        }
        assert!(checked > 0, "no symbol name was found in either index");
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
        if !Path::new(VMLINUX).exists() {
            assert!(!required(), "{VMLINUX} is missing (KCRASH_REQUIRE_TOOLS=1)");
            eprintln!("NOT RUN: {VMLINUX} is missing (run the Linux guest harness)");
            return;
        }
        check_round_trip(Path::new(VMLINUX));
    }

    /// A valid cache file of the C fixture, its bytes, and what it was made for.
    struct Valid {
        _dir: tempfile::TempDir,
        cache: PathBuf,
        debug: DebugInfo,
        key: Key,
        bytes: Vec<u8>,
    }

    fn valid() -> Option<Valid> {
        let dir = tempfile::tempdir().unwrap();
        let program = c_fixture(dir.path())?;
        let cache = dir.path().join("cache");
        let (debug, key) = debug_info(&program);
        debug.cached_in(&cache, &key);
        let bytes = std::fs::read(cache.join(key.file_name())).unwrap();
        CacheFile::open(&cache, &key).expect("the file as written is valid");
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

    fn reseal(bytes: &mut [u8]) {
        let sum = checksum(&bytes[HEADER..]);
        set_u64(bytes, 120, sum);
    }

    /// Each damage is rejected for its own reason, and the next use rewrites a valid file.
    #[test]
    fn damaged_files_are_rejected_and_rebuilt() {
        let Some(valid) = valid() else { return };
        let entries = (valid.bytes.len() - HEADER) / ENTRY;
        assert!(entries >= 2);
        type Damage = fn(&mut Vec<u8>, &Key);
        let damages: [(&str, Damage, &str); 11] = [
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
            (
                "flipped entry byte",
                |b, _| *b.last_mut().unwrap() ^= 0x40,
                "checksum",
            ),
            (
                "offset out of bounds",
                |b, k| {
                    let last = b.len() - 8;
                    set_u64(b, last, k.debug_info_len);
                    reseal(b);
                },
                "outside .debug_info",
            ),
        ];
        let path = valid.cache.join(valid.key.file_name());
        for (what, damage, reason) in damages {
            let mut bytes = valid.bytes.clone();
            damage(&mut bytes, &valid.key);
            std::fs::write(&path, &bytes).unwrap();
            match CacheFile::open(&valid.cache, &valid.key) {
                Err(Rejected::Invalid(why)) => assert!(why.contains(reason), "{what}: {why}"),
                other => panic!("{what}: not rejected: {other:?}"),
            }
            valid.debug.cached_in(&valid.cache, &valid.key);
            assert_eq!(
                std::fs::read(&path).unwrap(),
                valid.bytes,
                "{what}: not rebuilt"
            );
        }
    }

    /// Two entries swapped (with the checksum made right again) would make binary search miss.
    #[test]
    fn out_of_order_entries_are_rejected() {
        let Some(valid) = valid() else { return };
        let mut bytes = valid.bytes.clone();
        let (first, second) = (HEADER, HEADER + ENTRY);
        let swapped: Vec<u8> = bytes[second..second + ENTRY]
            .iter()
            .chain(&bytes[first..first + ENTRY])
            .copied()
            .collect();
        assert_ne!(
            bytes[first..second + ENTRY],
            swapped[..],
            "two equal entries"
        );
        bytes[first..second + ENTRY].copy_from_slice(&swapped);
        reseal(&mut bytes);
        std::fs::write(valid.cache.join(valid.key.file_name()), &bytes).unwrap();
        match CacheFile::open(&valid.cache, &valid.key) {
            Err(Rejected::Invalid(why)) => assert!(why.contains("out of order"), "{why}"),
            other => panic!("not rejected: {other:?}"),
        }
    }

    /// A key for another file of the same build-id (rebuilt, copied with a new mtime).
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

    /// Writers racing on one cache file: every reader sees no file or a whole valid one, and
    /// no temporary file is left behind.
    #[test]
    fn concurrent_writers_do_not_corrupt() {
        let Some(valid) = valid() else { return };
        let path = valid.cache.join(valid.key.file_name());
        std::fs::remove_file(&path).unwrap();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..20 {
                        valid.debug.cached_in(&valid.cache, &valid.key);
                    }
                });
            }
            scope.spawn(|| {
                for _ in 0..200 {
                    match CacheFile::open(&valid.cache, &valid.key) {
                        Ok(_) | Err(Rejected::Missing) => {}
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
        assert_eq!(names, [std::ffi::OsString::from(valid.key.file_name())]);
    }

    /// A cache directory that cannot be made (its parent is a file) costs only the scan.
    #[test]
    fn an_unwritable_cache_is_not_required() {
        let Some(valid) = valid() else { return };
        let blocker = valid.cache.join("a-file");
        std::fs::write(&blocker, b"").unwrap();
        let nowhere = blocker.join("index");
        let (variables, types) = valid.debug.cached_in(&nowhere, &valid.key);
        assert!(!variables.words().is_empty() && !types.words().is_empty());
        assert!(store(&nowhere, &valid.key, &[], &[]).is_err());
    }
}
