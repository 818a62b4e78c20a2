//! kcrash's schema file syntax over arbitrary text: parsed, and when it parses, loaded into a
//! set twice (the second load must be refused as claiming the same events, unless the file
//! names none). A panic, a hang or an error that is not one line is a bug.
//!
//! Seeds: none; libFuzzer grows its corpus from the empty input (TOML is short text).

#![no_main]

use std::sync::Arc;

use kcrash_schema::{file, Schemata};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let name: Arc<str> = Arc::from("fuzz.toml");
    match file::parse(&name, text) {
        Ok(f) => {
            let mut set = Schemata::default();
            let named = !f.events.is_empty();
            if set.add(name.clone(), "kcrash", f.clone()).is_ok() {
                assert_eq!(set.add(name, "kcrash", f).is_err(), named);
            }
        }
        Err(e) => assert!(!e.to_string().contains('\n'), "a multi-line error: {e}"),
    }
});
