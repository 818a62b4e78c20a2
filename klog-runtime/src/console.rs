//! `d_klogprintf`: an event echoed on the kernel's console as well as logged (feature `klog-debug`).

use crate::printf::{self, FixedBuf, Sink, Strings};

/// Longest console line; longer ones are cut, since the kernel has no allocator to grow into.
const LINE: usize = 256;

/// Formats the event as `[SUBSYS] message` and hands it to `console` (the platform's; taken as
/// a function so that this module need not know the ring's `Platform`).
pub(crate) fn echo(console: fn(&str), subsystem: &str, desc: &'static [u8], data: &[u64; 3]) {
    let mut line = FixedBuf::<LINE>::new();
    let _ = line.put(b"[");
    let _ = line.put(subsystem.as_bytes());
    let _ = line.put(b"] ");
    let fmt = desc.strip_suffix(b"\0").unwrap_or(desc);
    let _ = printf::format(&mut line, fmt, data, &mut OwnMemory);
    let mut text = [0u8; LINE];
    let bytes = line.as_bytes();
    for (t, &b) in text.iter_mut().zip(bytes) {
        *t = if b.is_ascii() { b } else { b'?' };
    }
    if let Ok(s) = core::str::from_utf8(&text[..bytes.len()]) {
        console(s);
    }
}

/// `%s` arguments in the running kernel's own memory: the pointers the kernel just logged.
struct OwnMemory;

impl Strings for OwnMemory {
    type Error = core::convert::Infallible;

    fn c_string(&mut self, addr: u64, max: usize) -> Result<&[u8], Self::Error> {
        let p = addr as *const u8;
        let mut len = 0;
        // SAFETY: the kernel passed this pointer to KLOG_STR as a NUL-terminated string it owns;
        // reading stops at the NUL or at `max` bytes.
        unsafe {
            while len < max && *p.add(len) != 0 {
                len += 1;
            }
            Ok(core::slice::from_raw_parts(p, len))
        }
    }
}
