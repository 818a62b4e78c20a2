//! The C memory functions rustc's generated code and `core` call. Written with
//! `rep movsb`/`rep stosb` so the compiler cannot turn them back into calls to themselves.

use core::arch::asm;

#[no_mangle]
pub unsafe extern "C" fn memcpy(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    asm!("rep movsb", inout("rcx") n => _, inout("rdi") dest => _, inout("rsi") src => _,
         options(nostack, preserves_flags));
    dest
}

#[no_mangle]
pub unsafe extern "C" fn memmove(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dest as usize) <= (src as usize) || (dest as usize) >= (src as usize) + n {
        return memcpy(dest, src, n);
    }
    // Overlapping with dest above src: copy backwards (direction flag set, then cleared).
    asm!("std", "rep movsb", "cld",
         inout("rcx") n => _, inout("rdi") dest.add(n - 1) => _, inout("rsi") src.add(n - 1) => _,
         options(nostack));
    dest
}

#[no_mangle]
pub unsafe extern "C" fn memset(dest: *mut u8, value: i32, n: usize) -> *mut u8 {
    asm!("rep stosb", inout("rcx") n => _, inout("rdi") dest => _, in("al") value as u8,
         options(nostack, preserves_flags));
    dest
}

#[no_mangle]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    for i in 0..n {
        let (x, y) = (a.add(i).read_volatile(), b.add(i).read_volatile());
        if x != y {
            return i32::from(x) - i32::from(y);
        }
    }
    0
}

#[no_mangle]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    memcmp(a, b, n)
}

#[no_mangle]
pub unsafe extern "C" fn strlen(s: *const u8) -> usize {
    let mut n = 0;
    while s.add(n).read_volatile() != 0 {
        n += 1;
    }
    n
}

/// The prebuilt `core` is compiled with unwinding and references this symbol; with
/// panic=abort it is never called.
#[no_mangle]
pub extern "C" fn rust_eh_personality() {}
