//! Any bytes as a name-index cache file (`src/index_cache.rs`): checked against the figures its
//! own header gives, then every unit offset and entry read. An input whose first byte is odd
//! has its checksums made right first (the rest of it is the file), so that mutations reach the
//! checks after them. A panic is a bug.
//!
//! Seeds: `.ci/fuzz` writes a small valid file (header, two units, three entries).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, file)) = data.split_first() else {
        return;
    };
    let mut file = file.to_vec();
    if mode & 1 == 1 {
        symbols::reseal_index_cache(&mut file);
    }
    if let Ok((units, entries)) = symbols::check_index_cache(&file) {
        assert!(
            units * 8 + entries * 16 <= file.len(),
            "more than the file holds"
        );
    }
});
