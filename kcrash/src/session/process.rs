//! A process core's memory that the core left out, read from the files it was mapped from: the
//! executable and the shared libraries the core's NT_FILE note names, when they are here and
//! are the files the process ran.

use std::fs::File;
use std::path::PathBuf;

use dumpfmt::notes::FileMapping;
use dumpfmt::translate::AddressSpace;

/// A range of the process's memory that a file supplies.
#[derive(Debug)]
pub struct FileRange {
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    /// The file as found here (for the executable, the image given).
    pub path: PathBuf,
    map: memmap2::Mmap,
}

impl FileRange {
    fn bytes(&self, within: u64, len: u64) -> Option<&[u8]> {
        let offset = self.file_offset.checked_add(within)?;
        let end = offset.checked_add(len)?;
        self.map
            .get(usize::try_from(offset).ok()?..usize::try_from(end).ok()?)
    }
}

/// Every file-backed range of one process core, searched by address.
#[derive(Debug, Default)]
pub struct FileBacked {
    pub ranges: Vec<FileRange>,
}

impl FileBacked {
    /// The ranges of `mappings` whose files can be mapped here; the executable's (the core's
    /// path `exe`) from `exe_here`. A file whose first page differs from what the core holds
    /// for it is a different build than the one the process ran: none of its ranges are used,
    /// and `notes` says so.
    pub fn new(
        mappings: &[FileMapping],
        exe: Option<(&str, PathBuf)>,
        core: &AddressSpace<'_>,
        notes: &mut Vec<String>,
    ) -> FileBacked {
        let mut ranges = Vec::new();
        for m in mappings {
            let path = match &exe {
                Some((name, here)) if *name == m.path => here.clone(),
                _ => PathBuf::from(&m.path),
            };
            // SAFETY: mapped read-only; as for the dump, nobody should truncate it meanwhile.
            let Ok(map) = File::open(&path).and_then(|f| unsafe { memmap2::Mmap::map(&f) }) else {
                continue;
            };
            ranges.push(FileRange {
                start: m.start,
                end: m.end,
                file_offset: m.file_offset,
                path,
                map,
            });
        }
        let mut backed = FileBacked { ranges };
        backed.drop_mismatched(core, notes);
        backed
    }

    /// Only the range at file offset 0 is compared (the ELF header, which the core keeps and
    /// nothing writes); writable ranges hold relocated data and differ by design.
    fn drop_mismatched(&mut self, core: &AddressSpace<'_>, notes: &mut Vec<String>) {
        let mut stale: Vec<PathBuf> = Vec::new();
        for f in self.ranges.iter().filter(|f| f.file_offset == 0) {
            let len = (f.end - f.start).min(64);
            let mut in_core = vec![0u8; len as usize];
            if core.read_virt(f.start, &mut in_core).is_err() {
                continue; // nothing in the core to compare with
            }
            if f.bytes(0, len) != Some(in_core.as_slice()) {
                stale.push(f.path.clone());
            }
        }
        for path in &stale {
            notes.push(format!(
                "{} is not the file the process ran: not used",
                path.display()
            ));
        }
        self.ranges.retain(|f| !stale.contains(&f.path));
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Reads `buf` at `addr` from the file one range came from; whether it could.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        let end = addr.saturating_add(buf.len() as u64);
        let Some(f) = self.ranges.iter().find(|f| f.start <= addr && end <= f.end) else {
            return false;
        };
        match f.bytes(addr - f.start, buf.len() as u64) {
            Some(b) => {
                buf.copy_from_slice(b);
                true
            }
            None => false,
        }
    }
}
