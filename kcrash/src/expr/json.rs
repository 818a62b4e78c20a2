//! A value tree as JSON, for `p --json`: the same facts the text shows.

use serde_json::{json, Map, Value as Json};

use super::eval::{cannot_access, extend, IntStyle};
use super::value::{CString, Field, Kind, Node};
use super::Evaluator;

/// The node as JSON: `{"type", "address", ...}` with `value`, `fields` or `elements`.
pub fn to_json(ev: &Evaluator<'_>, n: &Node) -> Json {
    let mut o = Map::new();
    o.insert(
        "type".into(),
        json!(ev.type_name(&n.ty).unwrap_or_else(|e| format!("<{e}>"))),
    );
    o.insert("address".into(), json!(n.addr));
    match &n.kind {
        Kind::Int { bits, int, style } => {
            let v = extend(*bits, u64::from(int.size) * 8, int.signed);
            match style {
                IntStyle::Bool if *bits <= 1 => o.insert("value".into(), json!(*bits == 1)),
                _ if int.signed => o.insert("value".into(), json!(v as i64)),
                _ => o.insert("value".into(), json!(v)),
            };
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
            let v = extend(*bits, u64::from(int.size) * 8, int.signed);
            o.insert(
                "value".into(),
                if int.signed {
                    json!(v as i64)
                } else {
                    json!(v)
                },
            );
            o.insert("enumerator".into(), json!(name));
        }
        Kind::Pointer {
            addr,
            symbol,
            string,
        } => {
            o.insert("value".into(), json!(addr));
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
            o.insert("value".into(), json!(addr));
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
