//! A DProbes template file read as event schemata: the input as UTF-8 (invalid sequences
//! replaced), imported; an error must be one line saying where, and every schema it gives must
//! name its event and fields within the bounds. A panic, or an error that breaks those, is a
//! bug.
//!
//! Seeds: `seeds schema_dprobes` takes every shipped `plugins/dprobes/schemas/*.dpt`.

#![no_main]

use std::sync::Arc;

use kcrash_dprobes::import::import;
use kcrash_schema::file::MAX_FIELDS;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let file: Arc<str> = Arc::from("fuzz.dpt");
    match import(&file, &text) {
        Ok(schemata) => {
            for e in &schemata.events {
                assert!(!e.name.is_empty() && e.fields.len() <= MAX_FIELDS);
            }
        }
        Err(e) => {
            let line = e.to_string();
            assert!(!line.contains('\n'), "{line:?}");
            assert!(e.line >= 1 && e.column >= 1, "{line:?}");
        }
    }
});
