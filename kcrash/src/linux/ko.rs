//! Kernel modules' object files (`NAME.ko`) on disk.

use std::path::{Path, PathBuf};

/// The module name a `.ko` file stands for: its name without `.ko`, dashes as underscores
/// (as the kernel names modules).
pub fn module_name(file: &Path) -> Option<String> {
    let name = file.file_name()?.to_str()?.strip_suffix(".ko")?;
    Some(name.replace('-', "_"))
}

/// Every `.ko` under `dir`, by module name (the first found wins).
pub fn find_kos(dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => find_kos(&path, out),
            Ok(_) => {
                if let Some(name) = module_name(&path) {
                    if !out.iter().any(|(n, _)| *n == name) {
                        out.push((name, path));
                    }
                }
            }
            Err(_) => {}
        }
    }
}

/// Module `name`'s `.ko` under `dir`, at any depth.
pub fn find_ko(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut found = Vec::new();
    find_kos(dir, &mut found);
    found.into_iter().find(|(n, _)| n == name).map(|(_, p)| p)
}
