//! Open arbitrary bytes as a dump and exercise every lazy path. Any panic is a bug.
//!
//! Run: `cd dumpfmt/fuzz && cargo +nightly fuzz run open_read`

#![no_main]

#[path = "../../tests/common/exercise.rs"]
mod exercise;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(dump) = dumpfmt::Dump::from_bytes("fuzz-input", data.to_vec()) {
        exercise::exercise(&dump, data);
    }
});
