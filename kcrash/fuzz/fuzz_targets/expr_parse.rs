//! The expression parser on any line, as an expression and as a type name, with its error shown
//! the way the commands show it. A panic is a bug.

#![no_main]

use kcrash::expr::{parse_expr, parse_type};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = parse_expr(&text) {
        e.show(&text);
    }
    if let Some(ty) = parse_type(&text) {
        ty.to_string();
    }
});
