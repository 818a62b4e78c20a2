//! kcrash's schema file syntax: TOML, one `[[event]]` table per event, `[enum.NAME]` and
//! `[flags.NAME]` tables of names. `plugins/README.md` ("Event schemata") documents it:
//!
//! ```toml
//! [[event]]
//! log = "KLog"
//! format = "lseek fd %d off %ld whence %c"
//! name = "lseek"
//! display = "fd {fd} to {offset} from {whence}"
//! fields = [
//!     { name = "fd", from = "data1", type = "signed", bits = 32 },
//!     { name = "offset", from = "data2", type = "signed" },
//!     { name = "whence", from = "data3", type = "enum", enum = "whence" },
//! ]
//!
//! [enum.whence]
//! 0x53 = "SEEK_SET"
//! ```

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use kcrash_plugin::escape::escaped;

use serde::Deserialize;
use toml::Spanned;

use crate::display::Display;
use crate::{
    Enum, Error, EventSchema, FieldSchema, Flags, Identity, Lines, Origin, SchemaFile, Type, Unit,
};

/// kcrash's own syntax: TOML files named `*.toml`.
pub static SYNTAX: crate::Syntax = crate::Syntax {
    name: "kcrash",
    claims: |name| name.ends_with(".toml"),
    parse,
};

/// Longest schema file read.
pub const MAX_FILE: usize = 1 << 20;
/// Most fields of one event, and most names of one enum or flag set.
pub const MAX_FIELDS: usize = 64;
pub const MAX_NAMES: usize = 4096;
/// Longest string a `string` field reads unless it says `max`, and the most it may say.
pub const STRING_DEFAULT: u32 = 256;
pub const STRING_MAX: u32 = 4096;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    #[serde(default)]
    event: Vec<Spanned<EventToml>>,
    #[serde(default, rename = "enum")]
    enums: BTreeMap<String, Spanned<BTreeMap<String, Spanned<String>>>>,
    #[serde(default)]
    flags: BTreeMap<String, Spanned<BTreeMap<String, Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventToml {
    log: String,
    format: Option<String>,
    symbol: Option<String>,
    code: Option<[u32; 2]>,
    event: Option<String>,
    ring: Option<String>,
    name: String,
    display: Option<Spanned<String>>,
    #[serde(default)]
    fields: Vec<Spanned<FieldToml>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldToml {
    name: String,
    from: String,
    #[serde(rename = "type")]
    ty: Spanned<String>,
    bits: Option<Spanned<u8>>,
    #[serde(rename = "enum")]
    enumeration: Option<Spanned<String>>,
    flags: Option<Spanned<String>>,
    max: Option<Spanned<u32>>,
    unit: Option<Spanned<String>>,
}

/// Parses one schema file's text; `file` names it in errors and origins.
pub fn parse(file: &Arc<str>, text: &str) -> Result<SchemaFile, Error> {
    Error::check_size(file, text)?;
    let lines = Lines::new(text);
    let error = |span: Range<usize>, what: String| Error::at(file, text, span.start, what);
    let parsed: FileToml = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        error(span, e.message().trim_end().replace('\n', " "))
    })?;
    let enums = parsed
        .enums
        .into_iter()
        .map(|(name, values)| {
            let span = values.span();
            let values = names(values.into_inner(), parse_int)
                .map_err(|(at, what)| error(at.unwrap_or(span.clone()), what))?;
            Ok((name.clone(), Arc::new(Enum { name, values })))
        })
        .collect::<Result<BTreeMap<_, _>, Error>>()?;
    let flags = parsed
        .flags
        .into_iter()
        .map(|(name, bits)| {
            let span = bits.span();
            let bits = names(bits.into_inner(), |k| {
                k.parse::<u8>().ok().filter(|&b| b < 64)
            })
            .map_err(|(at, what)| error(at.unwrap_or(span.clone()), what))?;
            Ok((name.clone(), Arc::new(Flags { name, bits })))
        })
        .collect::<Result<BTreeMap<_, _>, Error>>()?;
    let mut events = Vec::with_capacity(parsed.event.len());
    for spanned in parsed.event {
        let span = spanned.span();
        let e = spanned.into_inner();
        let origin = Origin {
            file: file.clone(),
            line: lines.line_column(span.start).0,
        };
        let identity = match (e.format, e.symbol, e.code, e.event) {
            (Some(f), None, None, None) => Identity::Format(f.into_bytes()),
            (None, Some(s), None, None) => Identity::Symbol(s),
            (None, None, Some([a, b]), None) => Identity::Code(a, b),
            (None, None, None, Some(n)) => Identity::Name(n),
            _ => {
                return Err(error(
                    span,
                    "an event is identified by exactly one of format, symbol, code and event"
                        .into(),
                ))
            }
        };
        if e.fields.len() > MAX_FIELDS {
            return Err(error(span, format!("more than {MAX_FIELDS} fields")));
        }
        let mut fields: Vec<FieldSchema> = Vec::with_capacity(e.fields.len());
        for f in e.fields {
            let fspan = f.span();
            let f = f.into_inner();
            if fields.iter().any(|o| o.name == f.name) {
                return Err(error(fspan, format!("field {:?} is named twice", f.name)));
            }
            let ty = field_type(&f, &enums, &flags).map_err(|(at, what)| error(at, what))?;
            fields.push(FieldSchema {
                name: f.name,
                from: f.from,
                ty,
            });
        }
        let display = match e.display {
            None => None,
            Some(d) => {
                let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
                // The offset into the template, past the opening quote.
                let start = d.span().start + 1;
                Some(
                    Display::parse(d.get_ref(), &names)
                        .map_err(|(at, what)| error(start + at..start + at, what))?,
                )
            }
        };
        events.push(EventSchema {
            log: e.log,
            identity,
            ring: e.ring,
            name: e.name,
            fields,
            display,
            origin,
        });
    }
    Ok(SchemaFile { events })
}

/// An error and where in the file, when known (else the table's own place).
type Located = (Option<Range<usize>>, String);

/// A table of names keyed by number: sorted by number, each checked.
fn names<K: Ord + Copy>(
    table: BTreeMap<String, Spanned<String>>,
    key: impl Fn(&str) -> Option<K>,
) -> Result<Vec<(K, String)>, Located> {
    if table.len() > MAX_NAMES {
        return Err((None, format!("more than {MAX_NAMES} names")));
    }
    let mut out = Vec::with_capacity(table.len());
    for (k, name) in table {
        let Some(n) = key(&k) else {
            return Err((
                Some(name.span()),
                format!("{k:?} is not a number this table takes"),
            ));
        };
        out.push((n, name.into_inner()));
    }
    out.sort_by_key(|&(n, _)| n);
    if let Some(w) = out.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err((
            None,
            format!("{:?} and {:?} have one number", w[0].1, w[1].1),
        ));
    }
    Ok(out)
}

/// A decimal, `0x` hex, `0o` octal or `0b` binary integer, or a negative decimal.
pub fn parse_int(s: &str) -> Option<i64> {
    let s = s.trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (radix, digits) = match digits.get(..2) {
        Some("0x" | "0X") => (16, &digits[2..]),
        Some("0o" | "0O") => (8, &digits[2..]),
        Some("0b" | "0B") => (2, &digits[2..]),
        _ => (10, digits),
    };
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if neg {
        0i64.checked_sub_unsigned(magnitude)
    } else if radix == 10 {
        i64::try_from(magnitude).ok()
    } else {
        // A hex value names the bit pattern: 0xffffffffffffffff is -1.
        Some(magnitude as i64)
    }
}

fn field_type(
    f: &FieldToml,
    enums: &BTreeMap<String, Arc<Enum>>,
    flags: &BTreeMap<String, Arc<Flags>>,
) -> Result<Type, (Range<usize>, String)> {
    let bits = match &f.bits {
        None => 64,
        Some(b) if (1..=64).contains(b.get_ref()) => *b.get_ref(),
        Some(b) => return Err((b.span(), "bits is 1 to 64".into())),
    };
    let only = |present: bool, what: &str, types: &str| -> Result<(), (Range<usize>, String)> {
        if present {
            Err((f.ty.span(), format!("{what} is for {types} fields only")))
        } else {
            Ok(())
        }
    };
    let ty = f.ty.get_ref().as_str();
    only(
        f.bits.is_some() && !matches!(ty, "unsigned" | "signed" | "hex"),
        "bits",
        "integer",
    )?;
    only(f.enumeration.is_some() && ty != "enum", "enum", "enum")?;
    only(f.flags.is_some() && ty != "flags", "flags", "flags")?;
    only(f.max.is_some() && ty != "string", "max", "string")?;
    only(f.unit.is_some() && ty != "duration", "unit", "duration")?;
    Ok(match ty {
        "unsigned" => Type::Unsigned { bits },
        "signed" => Type::Signed { bits },
        "hex" => Type::Hex { bits },
        "pointer" => Type::Pointer,
        "clock" => Type::Clock,
        "enum" => Type::Enum(table(f, f.enumeration.as_ref(), "enum", enums)?),
        "flags" => Type::Flags(table(f, f.flags.as_ref(), "flags", flags)?),
        "string" => Type::String {
            max: match &f.max {
                None => STRING_DEFAULT,
                Some(m) if (1..=STRING_MAX).contains(m.get_ref()) => *m.get_ref(),
                Some(m) => return Err((m.span(), format!("max is 1 to {STRING_MAX}"))),
            },
        },
        "duration" => {
            let u = f.unit.as_ref().ok_or_else(|| {
                (
                    f.ty.span(),
                    "a duration says its unit: ns, us, ms, s or ticks".into(),
                )
            })?;
            let unit = Unit::NAMES
                .iter()
                .find(|(n, _)| n == u.get_ref())
                .map(|&(_, unit)| unit)
                .ok_or_else(|| (u.span(), "the unit is one of ns, us, ms, s, ticks".into()))?;
            Type::Duration(unit)
        }
        other => {
            return Err((
                f.ty.span(),
                format!(
                    "unknown type {other:?}: unsigned, signed, hex, enum, flags, pointer, \
                     string, duration or clock"
                ),
            ))
        }
    })
}

/// The `[enum.NAME]` or `[flags.NAME]` table a field names, or why there is none.
fn table<T>(
    f: &FieldToml,
    name: Option<&Spanned<String>>,
    what: &str,
    tables: &BTreeMap<String, Arc<T>>,
) -> Result<Arc<T>, (Range<usize>, String)> {
    let n = name.ok_or_else(|| {
        (
            f.ty.span(),
            format!("a {what} field says which: {what} = \"NAME\""),
        )
    })?;
    tables.get(n.get_ref()).cloned().ok_or_else(|| {
        let name = escaped(n.get_ref().as_bytes());
        (n.span(), format!("no [{what}.{name}] table"))
    })
}
