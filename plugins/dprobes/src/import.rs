//! Template files ("A Universal Dynamic Trace for Linux", section 6) read as kcrash event
//! schemata: each template is the schema of the records of its major and minor code, named by
//! its `desc`, with a typed field for every `fmt` control whose field the decoder names the
//! same way (README.md, "Schemata").

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use kcrash_schema::file::{MAX_FIELDS, STRING_DEFAULT};
use kcrash_schema::{
    line_column, Error, EventSchema, FieldSchema, Identity, Origin, SchemaFile, Type,
};

use crate::record::ITEMS;
use crate::template::{
    field_name, source_offset, Control, Piece, Scan, Template, Templates, MAX_DEPTH,
};

/// The log the schemata are for: the decoder's `kind()`.
const LOG: &str = "DProbes";

/// A fault and the offset in the text where it is.
type Fault = (usize, String);

/// DProbes template files, `*.dpt`.
pub static SYNTAX: kcrash_schema::Syntax = kcrash_schema::Syntax {
    name: "DProbes",
    claims: |name| name.ends_with(".dpt"),
    parse: import,
};

/// Reads one template file's text; `file` names it in errors and origins.
pub fn import(file: &Arc<str>, text: &str) -> Result<SchemaFile, Error> {
    Error::check_size(file, text)?;
    let error = |(at, what): Fault| Error::at(file, text, at, what);
    let (templates, fault) = Templates::parse(text.as_bytes());
    if let Some(e) = fault {
        return Err(error((e.at, e.what)));
    }
    let mut seen = HashMap::new();
    let mut lines = Lines::default();
    let mut events = Vec::with_capacity(templates.0.len());
    for t in &templates.0 {
        if let Some(first) = seen.insert((t.major, t.minor), t.at) {
            let line = line_column(text, first).0;
            return Err(error((
                t.at,
                format!(
                    "major {} minor {} has a template already, at line {line}",
                    t.major, t.minor
                ),
            )));
        }
        let origin = Origin {
            file: file.clone(),
            line: lines.line(text, t.at),
        };
        events.push(schema(text, t, origin).map_err(error)?);
    }
    Ok(SchemaFile { events })
}

/// One template's schema.
fn schema(text: &str, t: &Template, origin: Origin) -> Result<EventSchema, Fault> {
    if t.desc.is_empty() {
        return Err((
            t.at,
            format!(
                "major {} minor {} has no desc: the paper makes it mandatory",
                t.major, t.minor
            ),
        ));
    }
    // A fault at byte `k` of the concatenated fmt, at its place in the text.
    let place = |(k, what): Fault| (fmt_offset(text, t, k), what);
    let mut unnamed = 0;
    let mut named: Vec<String> = Vec::new();
    let mut fields = Vec::new();
    for piece in Scan::new(&t.fmt) {
        let Piece::Control {
            control,
            word,
            group,
            at,
        } = piece.map_err(place)?
        else {
            continue;
        };
        let name = field_name(word, &mut unnamed, "");
        if let Some(g) = group {
            check_group(&t.fmt, g, 1).map_err(place)?;
        }
        // `%i` makes no field and `%r` makes `name[i]`: neither can clash with a name.
        if control.letter == b'i' || control.mode == Some(b'r') {
            continue;
        }
        if named.len() == MAX_FIELDS {
            return Err(place((at, format!("more than {MAX_FIELDS} fields"))));
        }
        if named.contains(&name) {
            return Err(place((at, format!("field {name:?} is named twice"))));
        }
        if name == "flags" || ITEMS.iter().any(|i| i.1 == name) {
            return Err(place((
                at,
                format!(
                    "field {name:?} has a header item's name: a schema could not tell them apart"
                ),
            )));
        }
        if let Some(ty) = field_type(&control) {
            fields.push(FieldSchema {
                name: name.clone(),
                from: name.clone(),
                ty,
            });
        }
        named.push(name);
    }
    Ok(EventSchema {
        log: LOG.into(),
        identity: Identity::Code(t.major, t.minor),
        ring: None,
        name: String::from_utf8_lossy(&t.desc).into_owned(),
        fields,
        display: None,
        origin,
    })
}

/// Line numbers of offsets that only grow, counted on from the last: one pass over a file of
/// many templates, where `line_column` for each would read the file again each time.
#[derive(Default)]
struct Lines {
    at: usize,
    line: u32,
}

impl Lines {
    fn line(&mut self, text: &str, at: usize) -> u32 {
        let at = at.clamp(self.at, text.len());
        let newlines = text.as_bytes()[self.at..at]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.line = self
            .line
            .saturating_add(u32::try_from(newlines).unwrap_or(u32::MAX));
        self.at = at;
        self.line + 1
    }
}

/// The type of the field a control makes, as the decoder gives its value; none for `%z`
/// (bytes, which no schema type reads).
fn field_type(c: &Control) -> Option<Type> {
    // The scanner admits 1 to 8 bytes for `d`, `u` and `x`.
    let bits = u8::try_from(8 * c.count).unwrap_or(64);
    match c.letter {
        b'd' => Some(Type::Signed { bits }),
        b'u' => Some(Type::Unsigned { bits }),
        b'x' => Some(Type::Hex { bits }),
        // Text in the record (a float the decoder formats): a string passes it through.
        b'c' | b's' | b'f' => Some(Type::String {
            max: STRING_DEFAULT,
        }),
        _ => None,
    }
}

/// Checks a `%r( … )` expression the formatter reads only when a record has data for it: its
/// controls, and `%r` nested at most `MAX_DEPTH` deep (`depth` is the expression's own).
fn check_group(fmt: &[u8], group: Range<usize>, depth: usize) -> Result<(), Fault> {
    let start = group.start;
    for piece in Scan::new(&fmt[group]) {
        let inner = match piece {
            Err((k, why)) => return Err((start + k, why)),
            Ok(Piece::Control {
                control, group, at, ..
            }) if control.mode == Some(b'r') => {
                if depth >= MAX_DEPTH {
                    return Err((start + at, format!("%r nested deeper than {MAX_DEPTH}")));
                }
                group
            }
            Ok(_) => None,
        };
        if let Some(g) = inner {
            check_group(fmt, start + g.start..start + g.end, depth + 1)?;
        }
    }
    Ok(())
}

/// The offset in `text` of byte `k` of the template's concatenated fmt.
fn fmt_offset(text: &str, t: &Template, k: usize) -> usize {
    match t.fmt_at.iter().rev().find(|&&(start, _)| start <= k) {
        Some(&(start, quote)) => source_offset(text.as_bytes(), quote, k - start),
        None => t.at,
    }
}

#[cfg(test)]
mod tests;
