//! The running kernel, read through /proc/kcore: why it cannot be opened (and what to do), where
//! its modules' sections are (/sys/module/NAME/sections), and which module defines a symbol
//! (/proc/kallsyms).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use symbols::SectionAddresses;

use crate::error::{Error, Result};

/// The running kernel's memory.
pub const KCORE: &str = "/proc/kcore";

/// Whether `path` names live memory rather than a dump: anything under /proc.
pub fn is_live_path(path: &Path) -> bool {
    path.starts_with("/proc")
}

/// What to tell the user when /proc/kcore cannot be opened: the cause as far as it can be told
/// (not root, kernel lockdown, no CAP_SYS_RAWIO, no kcore), and what to do about it.
pub fn open_failure(path: &Path, e: &dumpfmt::Error) -> String {
    let dumpfmt::Error::Io { source, .. } = e else {
        return e.to_string();
    };
    let path = path.display();
    match source.kind() {
        io::ErrorKind::NotFound => format!(
            "{path} does not exist: this kernel was built without CONFIG_PROC_KCORE, so its \
             memory cannot be read live; take a dump (kdump, or QEMU dump-guest-memory) instead"
        ),
        io::ErrorKind::PermissionDenied if effective_uid() != Some(0) => format!(
            "{path}: permission denied: reading the running kernel's memory needs root; \
             run kcrash as root (e.g. sudo kcrash)"
        ),
        io::ErrorKind::PermissionDenied => match lockdown() {
            Some(mode) => format!(
                "{path}: the kernel is in lockdown ({mode}), which forbids reading its memory; \
                 boot with lockdown=none (and Secure Boot's lockdown off) to read it live, or \
                 take a dump instead"
            ),
            None => format!(
                "{path}: operation not permitted: reading the running kernel's memory needs \
                 CAP_SYS_RAWIO; run kcrash as root with its full capabilities"
            ),
        },
        _ => e.to_string(),
    }
}

/// The effective user id, from /proc/self/status (no libc call needed for one number).
fn effective_uid() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let uids = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    uids.split_whitespace().nth(1)?.parse().ok()
}

/// The active lockdown mode (`integrity` or `confidentiality`), when one is.
fn lockdown() -> Option<String> {
    let text = fs::read_to_string("/sys/kernel/security/lockdown").ok()?;
    let active = text.split_whitespace().find(|w| w.starts_with('['))?;
    let mode = active.trim_matches(|c| c == '[' || c == ']');
    (mode != "none").then(|| mode.to_owned())
}

/// `kernel.kptr_restrict`, for the message when addresses read as zeros.
fn kptr_restrict() -> String {
    fs::read_to_string("/proc/sys/kernel/kptr_restrict")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

fn hidden_addresses(what: &str) -> Error {
    Error::Missing(format!(
        "{what} shows every address as 0: kernel.kptr_restrict is {} (or kcrash lacks \
         CAP_SYSLOG); as root, `sysctl kernel.kptr_restrict=1` shows them to root",
        kptr_restrict()
    ))
}

/// Where module `name`'s sections are loaded, from /sys/module/NAME/sections (one file per
/// section, its address in hex).
pub fn module_sections(name: &str) -> Result<SectionAddresses> {
    let dir = PathBuf::from("/sys/module").join(name).join("sections");
    let io_err = |path: &Path, source| Error::Io {
        what: path.display().to_string(),
        source,
    };
    let entries = fs::read_dir(&dir).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::Missing(format!(
            "{name}: not loaded in the running kernel ({} is missing)",
            dir.display()
        )),
        _ => io_err(&dir, e),
    })?;
    let mut out = SectionAddresses::new();
    let mut nonzero = false;
    for entry in entries {
        let entry = entry.map_err(|e| io_err(&dir, e))?;
        let path = entry.path();
        let text = fs::read_to_string(&path).map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => Error::Missing(format!(
                "{}: permission denied: module section addresses are readable by root only; run kcrash as root",
                path.display()
            )),
            _ => io_err(&path, e),
        })?;
        let hex = text.trim().trim_start_matches("0x");
        let addr = u64::from_str_radix(hex, 16).map_err(|_| {
            Error::Damaged(format!(
                "{}: {:?} is not an address",
                path.display(),
                text.trim()
            ))
        })?;
        nonzero |= addr != 0;
        out.insert(entry.file_name().to_string_lossy().into_owned(), addr);
    }
    if !nonzero {
        return Err(hidden_addresses(&dir.display().to_string()));
    }
    Ok(out)
}

/// One line of /proc/kallsyms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kallsym {
    pub address: u64,
    /// nm's type letter, as kallsyms gives it.
    pub kind: char,
    pub name: String,
    /// The module that defines it; None for the kernel's own.
    pub module: Option<String>,
}

/// The running kernel's symbols (and its modules'), from /proc/kallsyms: the kernel's symbol
/// table without a vmlinux. Read afresh each time: modules come and go.
pub struct Kallsyms {
    /// By address, then name.
    symbols: Vec<Kallsym>,
}

impl Kallsyms {
    /// Reads /proc/kallsyms. An error when it cannot be read, or shows every address as 0
    /// (per-CPU symbols are at 0 even when shown, so one address is not enough to tell).
    pub fn read() -> Result<Kallsyms> {
        let path = "/proc/kallsyms";
        let text = fs::read_to_string(path).map_err(|source| Error::Io {
            what: path.into(),
            source,
        })?;
        Self::parse(&text).ok_or_else(|| hidden_addresses(path))
    }

    /// None when every address is 0.
    fn parse(text: &str) -> Option<Kallsyms> {
        let mut symbols: Vec<Kallsym> = text
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                let address = u64::from_str_radix(words.next()?, 16).ok()?;
                let kind = words.next()?.chars().next()?;
                let name = words.next()?.to_owned();
                let module = words
                    .next()
                    .map(|m| m.trim_matches(|c| c == '[' || c == ']').to_owned());
                Some(Kallsym {
                    address,
                    kind,
                    name,
                    module,
                })
            })
            .collect();
        if symbols.iter().all(|s| s.address == 0) {
            return None;
        }
        symbols.sort_by(|a, b| (a.address, &a.name).cmp(&(b.address, &b.name)));
        Some(Kallsyms { symbols })
    }

    pub fn by_name(&self, name: &str) -> Option<&Kallsym> {
        self.symbols.iter().find(|s| s.name == name)
    }

    /// The symbol at or below `address` and the offset into it. Per-CPU offsets (near 0) and
    /// absolute symbols are not where an address points, so only text and data count.
    pub fn by_address(&self, address: u64) -> Option<(&Kallsym, u64)> {
        let located = |s: &&Kallsym| !matches!(s.kind, 'a' | 'A');
        let at = self.symbols.partition_point(|s| s.address <= address);
        let below = self.symbols[..at].iter().rev().find(located)?.address;
        // Of several names at one address, the first.
        let first = self.symbols.partition_point(|s| s.address < below);
        let sym = self.symbols[first..at].iter().find(located)?;
        Some((sym, address - sym.address))
    }

    /// Every symbol, by address.
    pub fn iter(&self) -> impl Iterator<Item = &Kallsym> {
        self.symbols.iter()
    }
}

/// The module that defines `symbol`, from /proc/kallsyms.
pub fn module_defining(symbol: &str) -> Result<Option<String>> {
    Ok(Kallsyms::read()?
        .by_name(symbol)
        .and_then(|s| s.module.clone()))
}

/// The running kernel's release (`uname -r`).
pub fn release() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_lines_by_name_and_address() {
        let text = "0000000000000000 A fixed_percpu_data\n\
                    ffffffff9a000000 T _stext\n\
                    ffffffff9a000000 T _text\n\
                    ffffffff9a001000 t do_one\n\
                    ffffffffc0a3c080 d KLogs\t[klogtest]\n";
        let k = Kallsyms::parse(text).unwrap();
        assert_eq!(
            k.by_name("KLogs").unwrap().module.as_deref(),
            Some("klogtest")
        );
        assert_eq!(k.by_name("do_one").unwrap().kind, 't');
        let (s, off) = k.by_address(0xffff_ffff_9a00_1010).unwrap();
        assert_eq!((s.name.as_str(), off), ("do_one", 0x10));
        // Two names at one address: the first by name.
        assert_eq!(
            k.by_address(0xffff_ffff_9a00_0000).unwrap().0.name,
            "_stext"
        );
        // Below every text symbol: nothing (the per-CPU symbol at 0 does not count).
        assert!(k.by_address(0x1000).is_none());
        // kptr_restrict: every address 0.
        assert!(Kallsyms::parse(
            "0000000000000000 T _stext\n0000000000000000 d KLogs\t[klogtest]\n"
        )
        .is_none());
    }
}
