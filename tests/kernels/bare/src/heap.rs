//! A bump arena for strings built at run time: the "heap" the `%s` scenarios point into.

use core::cell::UnsafeCell;
use core::ffi::CStr;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicUsize, Ordering};

const SIZE: usize = 16 * 1024;

struct Arena(UnsafeCell<[u8; SIZE]>);

// SAFETY: one processor, and every allocation hands out a disjoint range exactly once.
unsafe impl Sync for Arena {}

static ARENA: Arena = Arena(UnsafeCell::new([0; SIZE]));
static USED: AtomicUsize = AtomicUsize::new(0);

/// Formats `args` into a fresh NUL-terminated string in the arena. Panics when full (the
/// kernel's scenarios use a few hundred bytes).
pub fn format_cstr(args: fmt::Arguments) -> &'static CStr {
    struct Cursor<'a> {
        buf: &'a mut [u8],
        len: usize,
    }
    impl Write for Cursor<'_> {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.len + s.len();
            // Keep one byte for the NUL; refuse interior NULs, which would cut the string.
            if end >= self.buf.len() || s.contains('\0') {
                return Err(fmt::Error);
            }
            self.buf[self.len..end].copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }
    let start = USED.load(Ordering::Relaxed);
    // SAFETY: bytes from `start` on were never handed out; USED moves past them below.
    let arena: &'static mut [u8; SIZE] = unsafe { &mut *ARENA.0.get() };
    let free = &mut arena[start..];
    let mut cursor = Cursor { buf: free, len: 0 };
    cursor.write_fmt(args).expect("heap arena full");
    let Cursor { buf, len } = cursor;
    buf[len] = 0;
    USED.store(start + len + 1, Ordering::Relaxed);
    let buf: &'static [u8] = buf;
    CStr::from_bytes_with_nul(&buf[..=len]).expect("one NUL at the end")
}
