use std::sync::Arc;

use kcrash_plugin::{Clock, Field, Memory, Runs, Value};
use kcrash_schema::file::MAX_FILE;
use kcrash_schema::{Lookup, Resolve, Schemata, Subject};

use super::*;
use crate::record;

const SAMPLE: &str = include_str!("../../schemas/test-kernels.dpt");
/// The templates the test kernels keep in their image.
const KERNELS: &[u8] = include_bytes!("../../../../tests/kernels/dprobes-writer/templates.dpt");

fn file(text: &str) -> Result<SchemaFile, Error> {
    import(&Arc::from("t.dpt"), text)
}

struct Cx(Runs);

impl Resolve for Cx {
    fn symbol_at(&self, _: u64) -> Option<(String, u64)> {
        None
    }
    fn memory(&self) -> &dyn Memory {
        &self.0
    }
}

/// A record's logged bytes as the writer lays them out: the flag word, the header items it
/// selects (here major, minor and, with `ALL`, every other), then `data`.
fn logged(all: bool, major: u32, minor: u32, data: &[u8]) -> Vec<u8> {
    let mut b = if all { 0x07ffu32 } else { 0x0003 }.to_le_bytes().to_vec();
    b.extend_from_slice(&major.to_le_bytes());
    b.extend_from_slice(&minor.to_le_bytes());
    if all {
        // cpu, pid, uid, cs, eip, ss, esp, tsc, name.
        for n in [1u32, 42, 0, 0x10] {
            b.extend_from_slice(&n.to_le_bytes());
        }
        b.extend_from_slice(&0xffff_ffff_8100_0000u64.to_le_bytes());
        b.extend_from_slice(&0x18u32.to_le_bytes());
        b.extend_from_slice(&0xffff_c900_0000_0000u64.to_le_bytes());
        b.extend_from_slice(&123_456u64.to_le_bytes());
        b.extend_from_slice(b"init\0\0\0\0\0\0\0\0\0\0\0\0");
    }
    b.extend_from_slice(data);
    b
}

fn prefixed(token: u8, max: u16, bytes: &[u8]) -> Vec<u8> {
    let mut v = vec![token];
    v.extend_from_slice(&max.to_le_bytes());
    v.extend_from_slice(bytes);
    v
}

/// The record decoded with the kernels' own templates, read through the sample's schema: its
/// typed fields by name, and the marks.
fn through_sample(bytes: &[u8]) -> (String, Vec<Field<'static>>, Vec<String>) {
    let (templates, error) = Templates::parse(KERNELS);
    assert_eq!(error, None);
    let d = record::decode(bytes, &templates);
    assert_eq!(d.damage, vec![], "{}", d.name);
    // Leaked so that the applied fields, which borrow the schema, outlive the test's helper.
    let s: &'static mut Schemata = Box::leak(Box::default());
    s.add(
        Arc::from("test-kernels.dpt"),
        "DProbes templates",
        import(&Arc::from("test-kernels.dpt"), SAMPLE).unwrap(),
    )
    .unwrap();
    let subject = Subject {
        log: "DProbes",
        ring: "cpu0",
        name: &d.name,
        format: None,
        symbol: None,
        code: d.code,
    };
    let Lookup::One(schema) = s.lookup(&subject) else {
        panic!("no schema for {:?}", d.code)
    };
    assert_eq!(schema.name, d.name);
    let a = schema.apply(&d.fields, &Clock::Hz(1_000_000), &Cx(Runs(vec![])));
    (schema.name.clone(), a.fields, a.marks)
}

fn values<'a>(fields: &[Field<'a>]) -> Vec<(String, Value<'a>)> {
    fields
        .iter()
        .map(|f| (f.name.to_string(), f.value.clone()))
        .collect()
}

fn text(s: &str) -> Value<'static> {
    Value::Text(s.as_bytes().to_vec())
}

#[test]
fn the_sample_is_the_test_kernels_templates() {
    let (sample, error) = Templates::parse(SAMPLE.as_bytes());
    assert_eq!(error, None);
    let (kernels, _) = Templates::parse(KERNELS);
    let codes = |t: &Templates| -> Vec<_> {
        t.0.iter()
            .map(|t| (t.major, t.minor, t.desc.clone(), t.fmt.clone()))
            .collect()
    };
    assert_eq!(codes(&sample), codes(&kernels));
    let f = file(SAMPLE).unwrap();
    let names: Vec<_> = f.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        ["open", "read", "seek", "fault", "ioctl", "switch", "segread", "tick"]
    );
    let seek = &f.events[2];
    assert_eq!(seek.identity, Identity::Code(1, 3));
    assert_eq!(seek.origin.to_string(), "t.dpt:12");
    assert_eq!(
        seek.fields,
        [
            ("fd", Type::Unsigned { bits: 32 }),
            ("off", Type::Signed { bits: 64 }),
            (
                "whence",
                Type::String {
                    max: STRING_DEFAULT
                }
            ),
        ]
        .map(|(n, ty)| FieldSchema {
            name: n.into(),
            from: n.into(),
            ty
        })
    );
}

#[test]
fn the_sample_types_the_kernels_records() {
    let mut data = 3u32.to_le_bytes().to_vec();
    data.extend_from_slice(&prefixed(1, 64, b"/etc/motd\0"));
    let (name, fields, marks) = through_sample(&logged(true, 1, 1, &data));
    assert_eq!(name, "open");
    assert_eq!(
        values(&fields),
        [
            ("fd".into(), Value::Unsigned(3)),
            ("path".into(), text("/etc/motd"))
        ]
    );
    assert!(marks.is_empty(), "{marks:?}");

    let mut data = 4u32.to_le_bytes().to_vec();
    data.extend_from_slice(&(-4079i64).to_le_bytes());
    data.push(b'C');
    let (_, fields, marks) = through_sample(&logged(false, 1, 3, &data));
    assert_eq!(
        values(&fields),
        [
            ("fd".into(), Value::Unsigned(4)),
            ("off".into(), Value::Signed(-4079)),
            ("whence".into(), text("C")),
        ]
    );
    assert!(marks.is_empty(), "{marks:?}");

    let mut data = prefixed(1, 16, b"init\0");
    data.extend_from_slice(&prefixed(1, 16, b"kworker\0"));
    data.push(39);
    let (_, fields, _) = through_sample(&logged(true, 2, 1, &data));
    assert_eq!(
        values(&fields),
        [
            ("from".into(), text("init")),
            ("to".into(), text("kworker")),
            ("prio".into(), Value::Unsigned(39)),
        ]
    );

    // read: buf is bytes, left as the decoder gives it; ioctl: args[i] likewise.
    let mut data = 5u32.to_le_bytes().to_vec();
    data.extend_from_slice(&2u16.to_le_bytes());
    data.extend_from_slice(&prefixed(0, 2, b"kl"));
    let (_, fields, marks) = through_sample(&logged(false, 1, 2, &data));
    assert_eq!(
        values(&fields),
        [
            ("fd".into(), Value::Unsigned(5)),
            ("count".into(), Value::Unsigned(2))
        ]
    );
    assert!(marks.is_empty(), "{marks:?}");
    let mut data = 3u32.to_le_bytes().to_vec();
    data.extend_from_slice(&prefixed(0, 4, &0x5401u32.to_le_bytes()));
    let (_, fields, _) = through_sample(&logged(false, 1, 5, &data));
    assert_eq!(values(&fields), [("fd".into(), Value::Unsigned(3))]);

    let (_, fields, _) = through_sample(&logged(false, 2, 3, &7u64.to_le_bytes()));
    assert_eq!(values(&fields), [("n".into(), Value::Unsigned(7))]);
    let mut data = 0x28u16.to_le_bytes().to_vec();
    data.extend_from_slice(&prefixed(0, 1, b"x"));
    let (_, fields, _) = through_sample(&logged(false, 2, 2, &data));
    assert_eq!(values(&fields), [("seg".into(), Value::Hex(0x28))]);
}

#[test]
fn a_faulted_read_stays_unreadable_and_is_marked() {
    let mut data = 0xdead_0000u64.to_le_bytes().to_vec();
    data.extend_from_slice(&prefixed(0xff, 8, &0xdead_0000u64.to_le_bytes()));
    let (name, fields, marks) = through_sample(&logged(false, 1, 4, &data));
    assert_eq!(name, "fault");
    assert_eq!(values(&fields), [("va".into(), Value::Hex(0xdead_0000))]);
    assert!(marks.is_empty(), "{marks:?}");

    let mut data = 9u32.to_le_bytes().to_vec();
    data.extend_from_slice(&prefixed(0xff, 8, &0xdead_0010u64.to_le_bytes()));
    let (_, fields, marks) = through_sample(&logged(false, 1, 1, &data));
    assert_eq!(
        fields[1].value,
        Value::Unreadable {
            addr: 0xdead_0010,
            reason: "faulted read (flat address)".into()
        }
    );
    // The mark says where; the field keeps why.
    assert_eq!(marks, ["path: unreadable at 0xdead0010"]);
}

#[test]
fn fields_are_named_as_the_formatter_names_them() {
    let text =
        "major=7 minor=1 desc=\"x\" fmt=\"%4u %i a=%2d %pz %r(%1u) b_2=%1x \" fmt=\"%8f %4f %3c\"";
    let f = file(text).unwrap();
    let got: Vec<(&str, &Type)> = f.events[0]
        .fields
        .iter()
        .map(|f| (f.from.as_str(), &f.ty))
        .collect();
    let string = Type::String {
        max: STRING_DEFAULT,
    };
    assert_eq!(
        got,
        [
            ("d0", &Type::Unsigned { bits: 32 }),
            ("a", &Type::Signed { bits: 16 }),
            ("b_2", &Type::Hex { bits: 8 }),
            ("d4", &string),
            ("d5", &string),
            ("d6", &string),
        ]
    );
    // What the formatter names the same record's fields.
    let mut data = vec![1, 0, 0, 0, 9, 2, 0];
    data.extend_from_slice(&prefixed(0, 1, b"z"));
    data.extend_from_slice(&prefixed(0, 1, &[5]));
    data.push(0xab);
    data.extend_from_slice(&1.5f64.to_le_bytes());
    data.extend_from_slice(&1.5f32.to_le_bytes());
    data.extend_from_slice(b"abc");
    let (templates, _) = Templates::parse(text.as_bytes());
    let out = crate::template::format(&templates.0[0].fmt, &data);
    assert_eq!(out.damage, vec![]);
    let names: Vec<&str> = out.fields.iter().map(|f| &*f.name).collect();
    assert_eq!(names, ["d0", "a", "d2", "d3[0]", "b_2", "d4", "d5", "d6"]);
}

#[test]
fn errors_name_the_line_and_column() {
    let cases = [
        ("major=12x", "t.dpt:1:7: \"12x\" is not a number"),
        (
            "major=4294967296",
            "t.dpt:1:7: \"4294967296\" is not a number",
        ),
        ("major=-1", "t.dpt:1:7: expected a number"),
        ("major=1\nminor=0x", "t.dpt:2:7: \"0x\" is not a number"),
        ("minor=1", "t.dpt:1:1: minor before any major"),
        ("major=1 desc=\"a\"", "t.dpt:1:9: desc before any minor"),
        ("major=1 minor=1 desc=2", "t.dpt:1:17: desc and fmt take"),
        ("major=\"1\"", "t.dpt:1:1: major and minor take a number"),
        (
            "major=1\n  foo=1",
            "t.dpt:2:3: unexpected statement \"foo\"",
        ),
        ("major=1 minor", "t.dpt:1:14: expected keyword=value"),
        ("/* a\n b", "t.dpt:1:1: comment not closed"),
        (
            "major=1 minor=1 desc=\"a\n",
            "t.dpt:1:22: string not closed",
        ),
        (
            "major=1 minor=1 desc=\"a\\q\"",
            "t.dpt:1:24: unknown escape",
        ),
        (
            "major=1 minor=1 fmt=\"a\"",
            "t.dpt:1:9: major 1 minor 1 has no desc",
        ),
        (
            "major=1\nminor=1 desc=\"a\" fmt=\"x=%9u\"",
            "t.dpt:2:25: %9u needs 1 to 8 bytes",
        ),
        // An escape before the fault: the column is the text's, not the string's.
        (
            "major=1\nminor=1 desc=\"a\" fmt=\"\\t\\tx=%q\"",
            "t.dpt:2:29: unknown control %q",
        ),
        // In the second fmt statement of a template.
        (
            "major=1\nminor=1 desc=\"a\" fmt=\"x=%4u \"\n  fmt=\"y=%3f\"",
            "t.dpt:3:10: %3f needs 4 or 8 bytes",
        ),
        (
            "major=1 minor=1 desc=\"a\" fmt=\"x=%\"",
            "t.dpt:1:33: template ends with a lone %",
        ),
        (
            "major=1 minor=1 desc=\"a\" fmt=\"%r(%4u\"",
            "t.dpt:1:31: %r( without its )",
        ),
        (
            "major=1 minor=1 desc=\"a\" fmt=\"%(%p(\"",
            "t.dpt:1:33: a ( group without %r",
        ),
        (
            "major=1 minor=1 desc=\"a\" fmt=\"%r(%r(%r(%r(%r(%1u)))))\"",
            "t.dpt:1:43: %r nested deeper than 4",
        ),
        (
            "major=1 minor=1 desc=\"a\" fmt=\"%r(%4q)\"",
            "t.dpt:1:34: unknown control %q",
        ),
        (
            "major=1 minor=1 desc=\"a\" fmt=\"fd=%4u fd=%4u\"",
            "t.dpt:1:41: field \"fd\" is named twice",
        ),
        (
            "major=1 minor=1 desc=\"a\" fmt=\"buf=%pz buf=%4u\"",
            "t.dpt:1:43: field \"buf\" is named twice",
        ),
        (
            "major=1 minor=1 desc=\"a\" fmt=\"pid=%4u\"",
            "t.dpt:1:35: field \"pid\" has a header item's name",
        ),
        (
            "major=1\nminor=1 desc=\"a\"\nmajor=0x1 minor=1 desc=\"b\"",
            "t.dpt:3:11: major 1 minor 1 has a template already, at line 2",
        ),
    ];
    for (text, want) in cases {
        let e = file(text).unwrap_err().to_string();
        assert!(e.starts_with(want), "{e:?} does not start with {want:?}");
        assert!(!e.contains('\n'), "{e:?}");
    }
}

#[test]
fn inputs_are_bounded() {
    let big = " ".repeat(MAX_FILE + 1);
    assert_eq!(
        file(&big).unwrap_err().to_string(),
        format!("t.dpt:1:1: larger than {MAX_FILE} bytes")
    );
    let mut many = String::from("major=1 minor=1 desc=\"a\" fmt=\"");
    for i in 0..=MAX_FIELDS {
        many.push_str(&format!("f{i}=%1u "));
    }
    many.push('"');
    let e = file(&many).unwrap_err().to_string();
    assert!(e.contains(&format!("more than {MAX_FIELDS} fields")), "{e}");
    // As many templates as fit, each found once.
    let mut codes = String::from("major=1");
    for minor in 0..20_000 {
        codes.push_str(&format!(" minor={minor} desc=\"d\""));
    }
    assert_eq!(file(&codes).unwrap().events.len(), 20_000);
    assert_eq!(file("").unwrap().events.len(), 0);
}

/// A control letter that is a line break is named escaped: the error stays one line (a fuzzer
/// found the raw newline).
#[test]
fn a_control_that_is_a_newline_is_named_escaped() {
    let file: Arc<str> = Arc::from("t.dpt");
    let e = import(&file, "major=1\nminor=1\ndesc=x\nfmt=\"%\n\"\n")
        .unwrap_err()
        .to_string();
    assert!(!e.contains('\n'), "{e:?}");
}
