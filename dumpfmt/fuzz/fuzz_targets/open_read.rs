//! Open arbitrary bytes as a dump and exercise every lazy path. Any panic is a bug.
//!
//! Run: `cd dumpfmt/fuzz && cargo +nightly fuzz run open_read`

#![no_main]

#[path = "../../tests/common/exercise.rs"]
mod exercise;

use std::io::Write;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut file = tempfile::NamedTempFile::new_in("/dev/shm")
        .or_else(|_| tempfile::NamedTempFile::new())
        .expect("temporary file");
    file.as_file_mut().write_all(data).expect("write input");
    if let Ok(dump) = dumpfmt::Dump::open(file.path()) {
        exercise::exercise(&dump, data);
    }
});
