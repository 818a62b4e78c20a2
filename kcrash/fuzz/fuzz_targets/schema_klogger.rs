//! Klogger's schema importer over hostile text: the input, when it is UTF-8, is read as a
//! `.klogger.conf` file into kcrash's event schemata, which are then loaded. A panic, an error
//! of more than one line, more events or fields than the model's bounds, or two schemata of
//! one file claiming one event is a bug.
//!
//! Seeds: `seeds schema_klogger` (the schema files shipped in plugins/klogger/schemas).

#![no_main]

use std::sync::Arc;

use kcrash_klogger::import::import;
use kcrash_schema::file::MAX_FIELDS;
use kcrash_schema::Schemata;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file: Arc<str> = Arc::from(".klogger.conf.fuzz");
    match import(&file, text) {
        Ok(schemata) => {
            assert!(schemata.events.iter().all(|e| e.fields.len() <= MAX_FIELDS));
            Schemata::default()
                .add(file, "klogger", schemata)
                .unwrap_or_else(|e| panic!("one file's events conflict: {e}"));
        }
        Err(e) => assert!(!e.to_string().contains('\n'), "{e}"),
    }
});
