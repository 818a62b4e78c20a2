//! A process core's memory that the core left out, read from the files it was mapped from: the
//! executable and the shared libraries the core's NT_FILE note names, when they are here and
//! are the files the process ran.
//!
//! A file stands in only where the core chose to leave the bytes out: past the p_filesz of a
//! PT_LOAD the process could not write (no PF_W), or in a mapping with no PT_LOAD at all (gdb
//! leaves out file mappings the process never wrote). Anything else the core lacks, a writable
//! page or the data a truncated core lost, held what the process made of it, which the file
//! cannot say: it stays unreadable.

use std::path::PathBuf;
use std::sync::Arc;

use dumpfmt::notes::FileMapping;
use dumpfmt::translate::AddressSpace;
use dumpfmt::Segment;

use crate::linux::hex;

/// A range of the process's memory that a file supplies.
#[derive(Debug)]
pub struct FileRange {
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    /// The file as found here (for the executable, the image given).
    pub path: PathBuf,
    map: Arc<memmap2::Mmap>,
}

impl FileRange {
    /// The file's bytes for `len` bytes at `within` the range, or why it has none.
    fn bytes(&self, within: u64, len: u64) -> Result<&[u8], String> {
        let offset = self.file_offset.saturating_add(within);
        let short = || {
            format!(
                "not in the core, and {} ends at {:#x}, before file offset {offset:#x}",
                self.path.display(),
                self.map.len()
            )
        };
        let from = usize::try_from(offset).map_err(|_| short())?;
        let to = usize::try_from(offset.saturating_add(len)).map_err(|_| short())?;
        self.map.get(from..to).ok_or_else(short)
    }
}

/// How a file compares with the copy of its first page the core holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Same,
    /// It is another file than the one the process mapped: what differs.
    Differs(String),
    /// The core holds nothing to compare it with: why.
    Unchecked(String),
}

/// Every file-backed range of one process core, searched by address.
#[derive(Debug, Default)]
pub struct FileBacked {
    pub ranges: Vec<FileRange>,
    /// The other files mapped from their start (shared libraries, among data files), found
    /// here and not found to differ from what the process mapped: each one's path here and the
    /// address its file offset 0 is at.
    pub libraries: Vec<(PathBuf, u64)>,
}

/// As much of a program's start as is read to find its build-id note, which the linker puts
/// right after the program headers.
const HEAD_MAX: u64 = 64 << 10;

impl FileBacked {
    /// The read-only parts (by the core's `segments`) of `mappings` whose files can be mapped
    /// here; the executable's (the core's path `exe`) from `exe_here`. A library that differs
    /// from what the core holds of it is a different build than the one the process ran: it
    /// is not used, and `notes` says so. The executable's verdict is returned for the caller
    /// to refuse it or to say it could not be checked.
    pub fn new(
        mappings: &[FileMapping],
        exe: Option<(&str, PathBuf)>,
        core: &AddressSpace<'_>,
        segments: &[Segment],
        notes: &mut Vec<String>,
    ) -> (FileBacked, Verdict) {
        let mut ranges = Vec::new();
        let mut libraries = Vec::new();
        let mut exe_verdict = Verdict::Unchecked(match &exe {
            Some((name, _)) => format!("the core holds no mapping of {name} at file offset 0"),
            None => "the core names no executable (no NT_FILE and AT_ENTRY)".into(),
        });
        let mut stale: Vec<PathBuf> = Vec::new();
        let mut unchecked: Vec<String> = Vec::new();
        for m in mappings {
            let is_exe = matches!(&exe, Some((name, _)) if *name == m.path);
            let path = match &exe {
                Some((_, here)) if is_exe => here.clone(),
                _ => PathBuf::from(&m.path),
            };
            // A path from the core may name a FIFO: never block on it.
            // SAFETY: mapped read-only; as for the dump, nobody should truncate it meanwhile.
            let Ok(map) =
                dumpfmt::open_regular(&path).and_then(|f| unsafe { memmap2::Mmap::map(&f) })
            else {
                continue;
            };
            if m.file_offset == 0 {
                let verdict = compare(&map, &held_head(core, m));
                if is_exe {
                    exe_verdict = verdict;
                } else {
                    match verdict {
                        Verdict::Differs(why) => {
                            notes.push(format!(
                                "{} is not the file the process ran ({why}): not used",
                                path.display()
                            ));
                            stale.push(path.clone());
                        }
                        Verdict::Unchecked(_) => {
                            let name = path.display().to_string();
                            if !unchecked.contains(&name) {
                                unchecked.push(name);
                            }
                        }
                        Verdict::Same => {}
                    }
                }
            }
            if m.file_offset == 0 && !is_exe && !stale.contains(&path) {
                libraries.push((path.clone(), m.start));
            }
            let map = Arc::new(map);
            for (start, end) in unwritable(m.start, m.end, segments) {
                ranges.push(FileRange {
                    start,
                    end,
                    file_offset: m.file_offset.saturating_add(start - m.start),
                    path: path.clone(),
                    map: Arc::clone(&map),
                });
            }
        }
        ranges.retain(|f| !stale.contains(&f.path));
        // Said once for all: a gdb core leaves out every library's first page.
        if !unchecked.is_empty() {
            notes.push(format!(
                "not checked against the core, which holds none of their first page, and used as \
                 found here: {}",
                unchecked.join(", ")
            ));
        }
        (FileBacked { ranges, libraries }, exe_verdict)
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Reads `buf` at `addr` from the file a read-only range came from: `None` when no file
    /// backs it, else whether the file had the bytes (and why not).
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Option<Result<(), String>> {
        let end = addr.saturating_add(buf.len() as u64);
        let f = self
            .ranges
            .iter()
            .find(|f| f.start <= addr && end <= f.end)?;
        Some(
            f.bytes(addr - f.start, buf.len() as u64)
                .map(|b| buf.copy_from_slice(b)),
        )
    }
}

/// The file contents of `image`'s PT_LOAD segments where the process had them (its load bias
/// applied), as NT_FILE would list them, under `name`.
pub fn image_mappings(image: &symbols::Image, name: &str) -> Vec<FileMapping> {
    image
        .load_segments()
        .iter()
        .filter(|s| s.file_size > 0)
        .map(|s| {
            let start = s.vaddr.wrapping_add(image.load_bias());
            FileMapping {
                start,
                end: start.saturating_add(s.file_size),
                file_offset: s.file_offset,
                path: name.to_owned(),
            }
        })
        .collect()
}

/// The parts of `[start, end)` that no writable PT_LOAD of the core covers.
fn unwritable(start: u64, end: u64, segments: &[Segment]) -> Vec<(u64, u64)> {
    let mut writable: Vec<(u64, u64)> = segments
        .iter()
        .filter(|s| s.writable())
        .map(|s| (s.vaddr, s.vaddr.saturating_add(s.memsz)))
        .filter(|&(s, e)| s < end && start < e)
        .collect();
    writable.sort_unstable();
    let mut parts = Vec::new();
    let mut cursor = start;
    for (s, e) in writable {
        if cursor < s {
            parts.push((cursor, s));
        }
        cursor = cursor.max(e);
    }
    if cursor < end {
        parts.push((cursor, end));
    }
    parts
}

/// What the core itself holds of mapping `m` from its start, page by page, up to
/// [`HEAD_MAX`]: the file's first page at least when the kernel kept ELF headers.
fn held_head(core: &AddressSpace<'_>, m: &FileMapping) -> Vec<u8> {
    let end = m.end.min(m.start.saturating_add(HEAD_MAX));
    let mut held = Vec::new();
    let mut page = [0u8; 0x1000];
    let mut at = m.start;
    while at < end {
        let n = ((end - at) as usize).min(page.len());
        if core.read_virt(at, &mut page[..n]).is_err() {
            break;
        }
        held.extend_from_slice(&page[..n]);
        at += n as u64;
    }
    held
}

/// The file `file` against `held`, the core's copy of its start: by build-id when both have
/// one, else by the ELF and program headers, which no loader writes.
fn compare(file: &[u8], held: &[u8]) -> Verdict {
    if held.is_empty() {
        return Verdict::Unchecked("the core holds none of its first page".into());
    }
    match (
        symbols::build_id_in_head(file),
        symbols::build_id_in_head(held),
    ) {
        (Some(own), Some(ran)) if own == ran => Verdict::Same,
        (Some(own), Some(ran)) => Verdict::Differs(format!(
            "its build-id is {}, the process's copy's (in the core) is {}",
            hex(own),
            hex(ran)
        )),
        _ => {
            let n = headers_len(file).min(held.len());
            if file.get(..n) == held.get(..n) {
                Verdict::Same
            } else {
                Verdict::Differs(format!(
                    "its first {n:#x} bytes (ELF and program headers) differ from the core's copy"
                ))
            }
        }
    }
}

/// Bytes from the start of an ELF file to the end of its program headers (the ELF header's 64
/// alone when they are not right behind it).
fn headers_len(file: &[u8]) -> usize {
    const EHDR: u64 = 64;
    let phoff = file
        .get(32..40)
        .and_then(|b| Some(u64::from_le_bytes(b.try_into().ok()?)));
    let half = |at: usize| {
        file.get(at..at + 2)
            .map(|b| u64::from(u16::from_le_bytes([b[0], b[1]])))
    };
    match (phoff, half(54), half(56)) {
        (Some(EHDR), Some(size), Some(count)) => (EHDR + size * count) as usize,
        _ => EHDR as usize,
    }
}
