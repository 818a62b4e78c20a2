//! The output model. A data command builds one typed value (a [`Report`]) and writes it as text
//! or as JSON from that same value, so the two cannot drift.
//!
//! JSON conventions (kcrash/README.md, "JSON"; one schema per command in kcrash/schemas/):
//! every document and every line of a stream is an object whose first key is `kcrash_json`, the
//! version of these conventions; addresses and raw 64-bit words are strings `"0x…"` ([`Hex`]);
//! other values a 64-bit type holds are decimal strings ([`Dec`]); counts, offsets and sizes
//! stay numbers. Single results are one document; streams are JSON Lines.

use std::io::{self, Write};

use serde::{Serialize, Serializer};

use crate::paint::Paint;

pub use kcrash_plugin::JSON_VERSION;

/// An address or raw 64-bit word: `"0xffffffff80118040"` in JSON, where a number would lose
/// digits past 2^53 (jq, JavaScript).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hex(pub u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:#x}", self.0))
    }
}

/// A value of a 64-bit type that is not an address (a clock, a signed long): a decimal string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dec(pub i128);

impl Serialize for Dec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// What a command prints, as text; its JSON is its `Serialize`.
pub trait Report: Serialize {
    fn text(&self, out: &mut dyn Write, paint: Paint) -> io::Result<()>;
}

#[derive(Serialize)]
struct Versioned<'a, T> {
    kcrash_json: u32,
    #[serde(flatten)]
    body: &'a T,
}

/// Writes a single result: text, or one pretty JSON document.
pub fn document<R: Report>(r: &R, json: bool, out: &mut dyn Write, paint: Paint) -> io::Result<()> {
    if !json {
        return r.text(out, paint);
    }
    serde_json::to_writer_pretty(&mut *out, &versioned(r))?;
    writeln!(out)
}

/// Writes one item of a stream: text, or one JSON line.
pub fn line<R: Report>(r: &R, json: bool, out: &mut dyn Write, paint: Paint) -> io::Result<()> {
    if !json {
        return r.text(out, paint);
    }
    json_line(r, out)
}

/// One JSON line of `r`, versioned.
pub fn json_line<T: Serialize>(r: &T, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &versioned(r))?;
    writeln!(out)
}

fn versioned<T>(body: &T) -> Versioned<'_, T> {
    Versioned {
        kcrash_json: JSON_VERSION,
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_values_are_strings() {
        #[derive(Serialize)]
        struct T {
            a: Hex,
            d: Dec,
        }
        let t = T {
            a: Hex(0xffff_ffff_8011_8040),
            d: Dec(-5),
        };
        let mut out = Vec::new();
        json_line(&t, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"kcrash_json\":1,\"a\":\"0xffffffff80118040\",\"d\":\"-5\"}\n"
        );
    }
}
