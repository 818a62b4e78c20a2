//! The running kernel, read through /proc/kcore: why it cannot be opened (and what to do), where
//! its modules' sections are (/sys/module/NAME/sections), and which module defines a symbol
//! (/proc/kallsyms).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use symbols::SectionAddresses;

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

fn hidden_addresses(what: &str) -> String {
    format!(
        "{what} shows every address as 0: kernel.kptr_restrict is {} (or kcrash lacks \
         CAP_SYSLOG); as root, `sysctl kernel.kptr_restrict=1` shows them to root",
        kptr_restrict()
    )
}

/// Where module `name`'s sections are loaded, from /sys/module/NAME/sections (one file per
/// section, its address in hex).
pub fn module_sections(name: &str) -> Result<SectionAddresses, String> {
    let dir = PathBuf::from("/sys/module").join(name).join("sections");
    let entries = fs::read_dir(&dir).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => format!(
            "{name}: not loaded in the running kernel ({} is missing)",
            dir.display()
        ),
        _ => format!("{}: {e}", dir.display()),
    })?;
    let mut out = SectionAddresses::new();
    let mut nonzero = false;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = entry.path();
        let text = fs::read_to_string(&path).map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => format!(
                "{}: permission denied: module section addresses are readable by root only; run kcrash as root",
                path.display()
            ),
            _ => format!("{}: {e}", path.display()),
        })?;
        let hex = text.trim().trim_start_matches("0x");
        let addr = u64::from_str_radix(hex, 16)
            .map_err(|_| format!("{}: {:?} is not an address", path.display(), text.trim()))?;
        nonzero |= addr != 0;
        out.insert(entry.file_name().to_string_lossy().into_owned(), addr);
    }
    if !nonzero {
        return Err(hidden_addresses(&dir.display().to_string()));
    }
    Ok(out)
}

/// The module that defines `symbol`, from /proc/kallsyms (`ADDR TYPE NAME\t[MODULE]`). An error
/// when kallsyms cannot be read, or shows every address as 0 (per-CPU symbols are at 0 even
/// when shown, so one address is not enough to tell).
pub fn module_defining(symbol: &str) -> Result<Option<String>, String> {
    let path = "/proc/kallsyms";
    let text = fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut shown = false;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(addr), Some(_kind), Some(name)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        shown |= addr.bytes().any(|b| b != b'0');
        if name == symbol {
            if let Some(module) = words.next() {
                return Ok(Some(
                    module.trim_matches(|c| c == '[' || c == ']').to_owned(),
                ));
            }
        }
    }
    if !shown {
        return Err(hidden_addresses(path));
    }
    Ok(None)
}

/// The running kernel's release (`uname -r`).
pub fn release() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_owned())
}
