//! One record's logged bytes: the flag word, the header items it selects (the paper's table in
//! section 5, "Logging to a Trace Daemon"), and the data the probe handler logged after them.

use kcrash_plugin::{Damage, Field, Value};

use crate::template::{self, Templates};

/// The header items in the order they follow the flag word: flag bit, name, bytes, how shown.
/// `eip` and `esp` are 8 bytes on this 64-bit port (the paper's IA32 layout has 4); the process
/// name is 16 bytes with its NUL (Linux's TASK_COMM_LEN; the paper says only "string").
pub(crate) const ITEMS: [(u32, &str, usize, Kind); 11] = [
    (0x0001, "major", 4, Kind::Unsigned),
    (0x0002, "minor", 4, Kind::Unsigned),
    (0x0004, "cpu", 4, Kind::Unsigned),
    (0x0008, "pid", 4, Kind::Unsigned),
    (0x0010, "uid", 4, Kind::Unsigned),
    (0x0020, "cs", 4, Kind::Hex),
    (0x0040, "eip", 8, Kind::Hex),
    (0x0080, "ss", 4, Kind::Hex),
    (0x0100, "esp", 8, Kind::Hex),
    (0x0200, "tsc", 8, Kind::Unsigned),
    (0x0400, "name", 16, Kind::Name),
];

/// Every flag bit the paper defines.
const KNOWN_FLAGS: u32 = 0x07ff;

#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Unsigned,
    Hex,
    Name,
}

/// A record decoded: its name, fields, message and what is wrong with it.
pub struct Decoded {
    pub name: String,
    pub fields: Vec<Field<'static>>,
    pub message: Option<Vec<u8>>,
    pub damage: Vec<Damage>,
    /// The major and minor code, when the header has both: what a schema knows it by.
    pub code: Option<(u32, u32)>,
}

/// Decodes a record's logged bytes (flag word onwards), formatting its data by the template of
/// its major and minor code when there is one, and as bytes when not.
pub fn decode(bytes: &[u8], templates: &Templates) -> Decoded {
    let mut d = Decoded {
        name: String::new(),
        fields: Vec::new(),
        message: None,
        damage: Vec::new(),
        code: None,
    };
    let Some(flags) = bytes.get(..4) else {
        d.name = "DProbes".into();
        d.damage.push(Damage::Inconsistent(format!(
            "{} bytes of data: no room for the flag word",
            bytes.len()
        )));
        d.fields.push(field("data", Value::Bytes(bytes.to_vec())));
        return d;
    };
    let flags = u32::from_le_bytes(flags.try_into().unwrap_or_default());
    d.fields.push(field("flags", Value::Hex(flags.into())));
    let mut at = 4;
    let (mut major, mut minor) = (None, None);
    let mut header_ok = true;
    for (bit, name, size, kind) in ITEMS {
        if flags & bit == 0 {
            continue;
        }
        let Some(item) = bytes.get(at..at + size) else {
            d.damage.push(Damage::Inconsistent(format!(
                "the flags {flags:#x} select {name}, but the record ends at data offset {at:#x}"
            )));
            header_ok = false;
            break;
        };
        at += size;
        let value = match kind {
            Kind::Unsigned | Kind::Hex => {
                let mut b = [0u8; 8];
                b[..size].copy_from_slice(item);
                let v = u64::from_le_bytes(b);
                match name {
                    "major" => major = Some(v as u32),
                    "minor" => minor = Some(v as u32),
                    _ => {}
                }
                match kind {
                    Kind::Hex => Value::Hex(v),
                    _ => Value::Unsigned(v),
                }
            }
            Kind::Name => match item.iter().position(|&b| b == 0) {
                Some(n) => Value::Text(item[..n].to_vec()),
                None => {
                    d.damage.push(Damage::Inconsistent(format!(
                        "the process name at data offset {:#x} has no NUL in its {size} bytes",
                        at - size
                    )));
                    Value::Text(item.to_vec())
                }
            },
        };
        d.fields.push(field(name, value));
    }
    let code = |c: Option<u32>| c.map_or("?".to_string(), |c| c.to_string());
    d.name = format!("DProbes({},{})", code(major), code(minor));
    let unknown = flags & !KNOWN_FLAGS;
    if unknown != 0 {
        // Items of undefined bits have no known size: the data cannot be found after them.
        d.damage.push(Damage::Inconsistent(format!(
            "flag bits {unknown:#x} are not ones the paper defines"
        )));
        header_ok = false;
    }
    let data = bytes.get(at..).unwrap_or_default();
    d.code = major.zip(minor);
    let template = d.code.and_then(|(ma, mi)| templates.get(ma, mi));
    match template {
        Some(t) if header_ok => {
            d.name = String::from_utf8_lossy(&t.desc).into_owned();
            let f = template::format(&t.fmt, data);
            d.fields.extend(f.fields);
            d.message = Some(f.message);
            d.damage.extend(f.damage);
        }
        _ if !data.is_empty() => d.fields.push(field("data", Value::Bytes(data.to_vec()))),
        _ => {}
    }
    d
}

fn field(name: &'static str, value: Value<'static>) -> Field<'static> {
    Field {
        name: name.into(),
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn templates() -> Templates {
        Templates::parse(b"major=1 minor=3 desc=\"tick\" fmt=\"n=%8u\\n\"").0
    }

    #[test]
    fn header_items_follow_the_flags() {
        let mut b = (0x0001u32 | 0x0002 | 0x0008 | 0x0040 | 0x0400)
            .to_le_bytes()
            .to_vec();
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&42u32.to_le_bytes());
        b.extend_from_slice(&0xffff_ffff_8000_1234u64.to_le_bytes());
        b.extend_from_slice(b"init\0\0\0\0\0\0\0\0\0\0\0\0");
        b.extend_from_slice(&7u64.to_le_bytes());
        let d = decode(&b, &templates());
        assert_eq!(d.name, "tick");
        assert_eq!(d.code, Some((1, 3)));
        assert_eq!(d.damage, vec![]);
        let names: Vec<&str> = d.fields.iter().map(|f| &*f.name).collect();
        assert_eq!(
            names,
            ["flags", "major", "minor", "pid", "eip", "name", "n"]
        );
        assert_eq!(d.fields[4].value, Value::Hex(0xffff_ffff_8000_1234));
        assert_eq!(d.fields[5].value, Value::Text(b"init".to_vec()));
        assert_eq!(d.message.as_deref(), Some(&b"n=7"[..]));
    }

    #[test]
    fn no_template_gives_bytes() {
        let mut b = 0x0003u32.to_le_bytes().to_vec();
        b.extend_from_slice(&9u32.to_le_bytes());
        b.extend_from_slice(&9u32.to_le_bytes());
        b.push(0xaa);
        let d = decode(&b, &templates());
        assert_eq!(d.name, "DProbes(9,9)");
        assert_eq!(d.fields.last().unwrap().value, Value::Bytes(vec![0xaa]));
        assert_eq!(d.message, None);
    }

    #[test]
    fn short_and_unknown_headers_are_marked() {
        let d = decode(&0x0201u32.to_le_bytes(), &templates());
        assert!(matches!(&d.damage[0], Damage::Inconsistent(w) if w.contains("select major")));
        let mut b = 0x8001u32.to_le_bytes().to_vec();
        b.extend_from_slice(&1u32.to_le_bytes());
        let d = decode(&b, &templates());
        assert!(matches!(&d.damage[0], Damage::Inconsistent(w) if w.contains("0x8000")));
        let d = decode(&[1, 2], &templates());
        assert_eq!(d.name, "DProbes");
        assert_eq!(d.code, None);
    }
}
