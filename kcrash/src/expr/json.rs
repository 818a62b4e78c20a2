//! A value tree as JSON, for `p --json`: the same facts the text shows.

use serde_json::{json, Map, Value as Json};

use super::eval::{cannot_access, extend, IntStyle, IntTy};
use super::value::{CString, Field, Kind, Node};
use super::Evaluator;
use crate::report::{Dec, Hex};

/// The node as JSON: `{"type", "address", ...}` with `value`, `fields` or `elements`.
pub fn to_json(ev: &Evaluator<'_>, n: &Node) -> Json {
    let mut o = Map::new();
    o.insert(
        "type".into(),
        json!(ev.type_name(&n.ty).unwrap_or_else(|e| format!("<{e}>"))),
    );
    o.insert("address".into(), json!(n.addr.map(Hex)));
    match &n.kind {
        Kind::Int { bits, int, style } => {
            let value = match style {
                IntStyle::Bool if *bits <= 1 => json!(*bits == 1),
                _ => int_json(*bits, *int),
            };
            o.insert("value".into(), value);
        }
        Kind::Float { bits, size } => {
            let v = if *size == 4 {
                f64::from(f32::from_bits(*bits as u32))
            } else {
                f64::from_bits(*bits)
            };
            o.insert("value".into(), json!(v));
        }
        Kind::Enum { bits, int, name } => {
            o.insert("value".into(), int_json(*bits, *int));
            o.insert("enumerator".into(), json!(name));
        }
        Kind::Pointer {
            addr,
            symbol,
            string,
        } => {
            o.insert("value".into(), json!(Hex(*addr)));
            if let Some(s) = symbol {
                o.insert("symbol".into(), json!(s));
            }
            match string {
                Some(CString::Text { bytes, more }) => {
                    o.insert("string".into(), json!(String::from_utf8_lossy(bytes)));
                    o.insert("truncated".into(), json!(more));
                }
                Some(CString::Unreadable(a)) => {
                    o.insert("error".into(), json!(cannot_access(*a)));
                }
                None => {}
            }
        }
        Kind::Function { addr, symbol } => {
            o.insert("value".into(), json!(Hex(*addr)));
            o.insert("symbol".into(), json!(symbol));
        }
        Kind::Fields(fields) => {
            o.insert("fields".into(), fields_json(ev, fields));
        }
        Kind::Variant { name, fields } => {
            o.insert("variant".into(), json!(name));
            o.insert("fields".into(), fields_json(ev, fields));
        }
        Kind::Elements { runs, more } => {
            let elems: Vec<Json> = runs
                .iter()
                .map(|(n, reps)| {
                    let mut e = to_json(ev, n);
                    if *reps > 1 {
                        e["repeats"] = json!(reps);
                    }
                    e
                })
                .collect();
            o.insert("elements".into(), json!(elems));
            o.insert("truncated".into(), json!(more));
        }
        Kind::Chars { bytes, more } | Kind::Str { bytes, more } => {
            o.insert("string".into(), json!(String::from_utf8_lossy(bytes)));
            o.insert("bytes".into(), json!(bytes));
            o.insert("truncated".into(), json!(more));
        }
        Kind::Unreadable(a) => {
            o.insert("error".into(), json!(cannot_access(*a)));
        }
        Kind::Opaque(what) => {
            o.insert("error".into(), json!(what));
        }
    }
    Json::Object(o)
}

/// An integer of type `int`: a JSON number up to 32 bits, a decimal string when wider (a JSON
/// number loses digits past 2^53).
fn int_json(bits: u64, int: IntTy) -> Json {
    let v = extend(bits, u64::from(int.size) * 8, int.signed);
    let v = if int.signed {
        i128::from(v as i64)
    } else {
        i128::from(v)
    };
    if int.size <= 4 {
        json!(v as i64)
    } else {
        json!(Dec(v))
    }
}

fn fields_json(ev: &Evaluator<'_>, fields: &[Field]) -> Json {
    Json::Array(
        fields
            .iter()
            .map(|f| {
                let mut e = to_json(ev, &f.node);
                e["name"] = json!(f.name);
                e
            })
            .collect(),
    )
}
