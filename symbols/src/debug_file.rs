//! Finding the separate debug file of a stripped image, the way gdb does: first by build-id
//! (`<dir>/.build-id/xx/yyyy.debug`), then by `.gnu_debuglink` name next to the image, in its
//! `.debug/` subdirectory, and under `<dir>/<image's directory>/`. A candidate is only taken if
//! its build-id (or debuglink CRC-32) matches, so a stale file is never used.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::elf::ElfFile;

/// The debug file for `image`, searched for in `debug_dirs` (gdb's `debug-file-directory`,
/// normally `/usr/lib/debug`). Unreadable or mismatched candidates are passed over.
pub(crate) fn find(image: &ElfFile, debug_dirs: &[PathBuf]) -> Option<ElfFile> {
    by_build_id(image, debug_dirs).or_else(|| by_debuglink(image, debug_dirs))
}

fn by_build_id(image: &ElfFile, debug_dirs: &[PathBuf]) -> Option<ElfFile> {
    let id = image.build_id.as_deref()?;
    let (first, rest) = id.split_first()?;
    let mut name = String::new();
    for byte in rest {
        let _ = write!(name, "{byte:02x}");
    }
    name.push_str(".debug");
    debug_dirs.iter().find_map(|dir| {
        let path = dir
            .join(".build-id")
            .join(format!("{first:02x}"))
            .join(&name);
        ElfFile::open(&path)
            .ok()
            .filter(|debug| debug.build_id.as_deref() == Some(id) && debug.has_debug_info())
    })
}

fn by_debuglink(image: &ElfFile, debug_dirs: &[PathBuf]) -> Option<ElfFile> {
    let (name, crc) = image.debuglink.as_ref()?;
    // The link is a plain file name; anything else could point anywhere.
    if name.contains('/') || name == ".." {
        return None;
    }
    let image_dir = image.path.parent().unwrap_or(Path::new("."));
    let absolute_dir = std::fs::canonicalize(image_dir).unwrap_or_else(|_| image_dir.to_owned());
    let mut candidates = vec![image_dir.join(name), image_dir.join(".debug").join(name)];
    for dir in debug_dirs {
        let relative = absolute_dir.strip_prefix("/").unwrap_or(&absolute_dir);
        candidates.push(dir.join(relative).join(name));
    }
    candidates
        .into_iter()
        .filter(|path| path != &image.path)
        .find_map(|path| {
            let debug = ElfFile::open(&path).ok()?;
            let mut sum = flate2::Crc::new();
            sum.update(&debug.data);
            (sum.sum() == *crc && debug.has_debug_info()).then_some(debug)
        })
}
