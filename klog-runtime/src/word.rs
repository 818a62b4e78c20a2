//! Turning KLOG arguments into 64-bit data words.

use core::ffi::CStr;

/// A value that can be logged as one data word. Signed integers are sign-extended, so `%d` and
/// `%ld` both print them right.
pub trait KlogWord {
    fn word(self) -> u64;
}

macro_rules! unsigned_word {
    ($($t:ty),*) => {$(impl KlogWord for $t { #[inline(always)] fn word(self) -> u64 { self as u64 } })*};
}
macro_rules! signed_word {
    ($($t:ty),*) => {$(impl KlogWord for $t { #[inline(always)] fn word(self) -> u64 { self as i64 as u64 } })*};
}
unsigned_word!(u8, u16, u32, u64, usize, bool, char);
signed_word!(i8, i16, i32, i64, isize);

impl<T> KlogWord for *const T {
    #[inline(always)]
    fn word(self) -> u64 {
        self as usize as u64
    }
}

impl<T> KlogWord for *mut T {
    #[inline(always)]
    fn word(self) -> u64 {
        self as usize as u64
    }
}

/// A `%s` argument: something that is a NUL-terminated string's address (the design's KLOG_STR).
pub trait KlogStr {
    fn str_word(self) -> u64;
}

impl KlogStr for &CStr {
    #[inline(always)]
    fn str_word(self) -> u64 {
        self.as_ptr() as usize as u64
    }
}

// C's `char` is `i8` on x86_64 and `u8` on aarch64 Linux: implementing both byte pointers (rather
// than `*const c_char` beside `*const u8`) covers `*const c_char` on every target.
impl KlogStr for *const i8 {
    #[inline(always)]
    fn str_word(self) -> u64 {
        self as usize as u64
    }
}

impl KlogStr for *const u8 {
    #[inline(always)]
    fn str_word(self) -> u64 {
        self as usize as u64
    }
}
