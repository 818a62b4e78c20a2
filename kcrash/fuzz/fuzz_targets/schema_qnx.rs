//! The QNX trace's `.fmt` importer on any text: the file is read into schemata or refused with
//! one line naming its line and column. A panic, a hang, or an error of more than one line is a
//! bug.
//!
//! Seeds: `seeds schema_qnx` takes the `.fmt` files kcrash ships (plugins/qnx/schemas).

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = kcrash_qnx::import::import(&Arc::from("fuzz.fmt"), text) {
        let said = e.to_string();
        assert!(!said.contains('\n'), "a multi-line error: {said:?}");
    }
});
