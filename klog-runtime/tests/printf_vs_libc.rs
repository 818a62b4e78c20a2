//! The printf interpreter against the C library's own snprintf, on random conversions and words.
//!
//! Each case is one conversion between literal text, passed to snprintf with the C type its length
//! modifier names (what a C kernel's KLOG call site would have stored in the data word), and to
//! the interpreter as the raw 64-bit word.

use std::ffi::{c_char, c_int, c_long, c_void, CString};

use klog_runtime::printf::{format, Sink, Strings};
use proptest::prelude::*;

struct Bytes(Vec<u8>);
impl Sink for Bytes {
    fn put(&mut self, bytes: &[u8]) -> std::fmt::Result {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

/// `%s` arguments are real pointers into this process, as they would be in the kernel.
struct OwnMemory;
impl Strings for OwnMemory {
    type Error = std::convert::Infallible;
    fn c_string(&mut self, addr: u64, max: usize) -> Result<&[u8], Self::Error> {
        // SAFETY: the tests pass only pointers to live CStrings.
        let s = unsafe { std::ffi::CStr::from_ptr(addr as *const c_char) };
        let b = s.to_bytes();
        Ok(&b[..b.len().min(max)])
    }
}

fn libc_format(fmt: &CString, conv: char, long: bool, word: u64) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let (p, n) = (buf.as_mut_ptr() as *mut c_char, buf.len());
    // SAFETY: the format holds exactly one conversion, and the argument has the C type it reads.
    let len = unsafe {
        match conv {
            's' | 'p' => libc::snprintf(p, n, fmt.as_ptr(), word as usize as *const c_void),
            _ if long => libc::snprintf(p, n, fmt.as_ptr(), word as c_long),
            _ => libc::snprintf(p, n, fmt.as_ptr(), word as c_int),
        }
    };
    buf.truncate(len as usize);
    buf
}

fn spec() -> impl Strategy<Value = (String, char, bool)> {
    let flags = prop::collection::vec(prop::sample::select(vec!['-', '+', ' ', '#', '0']), 0..4);
    let width = prop::option::of(0usize..24);
    let precision = prop::option::of(0usize..24);
    let length = prop::sample::select(vec!["", "hh", "h", "l", "ll", "z", "j", "t"]);
    let conv = prop::sample::select(vec!['d', 'i', 'u', 'o', 'x', 'X', 'c', 's', 'p']);
    (flags, width, precision, length, conv).prop_map(|(flags, width, precision, length, conv)| {
        let mut s: String = flags.into_iter().collect();
        if let Some(w) = width {
            s += &w.to_string();
        }
        // glibc ignores precision for %c and %p differs by version; keep to defined territory.
        if let (Some(p), false) = (precision, conv == 'c') {
            s += &format!(".{p}");
        }
        let (length, long) = match conv {
            'c' | 's' | 'p' => ("", false),
            _ => (
                length,
                length.starts_with('l') || matches!(length, "z" | "j" | "t"),
            ),
        };
        (format!("<%{s}{length}{conv}>"), conv, long)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn matches_snprintf(
        (text, conv, long) in spec(),
        word in prop_oneof![any::<u64>(), (-1000i64..1000).prop_map(|w| w as u64)],
        string in "[ -~]{0,30}",
    ) {

        let string = CString::new(string).unwrap();
        let word = if conv == 's' { string.as_ptr() as usize as u64 } else { word };
        let fmt = CString::new(text.clone()).unwrap();
        let expected = libc_format(&fmt, conv, long, word);
        let mut got = Bytes(Vec::new());
        format(&mut got, text.as_bytes(), &[word], &mut OwnMemory).unwrap();
        prop_assert_eq!(
            String::from_utf8_lossy(&got.0),
            String::from_utf8_lossy(&expected),
            "format {:?} word {:#x}", text, word
        );
    }
}
