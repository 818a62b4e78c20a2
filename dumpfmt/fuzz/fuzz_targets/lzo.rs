//! Decode arbitrary bytes as one LZO1X page. Errors are expected; a panic, or a length past the
//! page, is a bug.
//!
//! Run: `cd dumpfmt/fuzz && cargo +nightly fuzz run lzo`

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut page = [0u8; 4096];
    if let Ok(n) = dumpfmt::lzo::decompress(data, &mut page) {
        assert!(n <= page.len());
    }
});
