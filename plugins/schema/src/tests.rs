use std::sync::Arc;

use kcrash_plugin::{Clock, Field, Memory, Unreadable, Value};

use super::*;

const FILE: &str = r#"
[[event]]
log = "KLog"
format = "lseek fd %d off %ld whence %c"
name = "lseek"
display = "fd {fd} to {offset} from {whence}"
fields = [
    { name = "fd", from = "data1", type = "signed", bits = 32 },
    { name = "offset", from = "data2", type = "signed" },
    { name = "whence", from = "data3", type = "enum", enum = "whence" },
]

[[event]]
log = "KLog"
ring = "VM"
format = "fault at %p flags %#o"
name = "fault"
fields = [
    { name = "addr", from = "data1", type = "pointer" },
    { name = "prot", from = "data2", type = "flags", flags = "prot" },
    { name = "path", from = "data3", type = "string", max = 8 },
    { name = "wait", from = "data3", type = "duration", unit = "ticks" },
    { name = "at", from = "data1", type = "clock" },
]

[enum.whence]
0x53 = "SEEK_SET"
-1 = "NONE"

[flags.prot]
0 = "x"
2 = "r"
"#;

fn file(text: &str) -> Result<SchemaFile, Error> {
    named_file("t.toml", text)
}

fn named_file(name: &str, text: &str) -> Result<SchemaFile, Error> {
    file::parse(&Arc::from(name), text)
}

struct Cx;

impl Memory for Cx {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unreadable> {
        let text = b"/etc/motd\0";
        match addr {
            0x1000 => {
                let n = buf.len().min(text.len());
                buf[..n].copy_from_slice(&text[..n]);
                Ok(())
            }
            _ => Err(Unreadable {
                addr,
                reason: "not in the dump".into(),
            }),
        }
    }
}

impl Resolve for Cx {
    fn symbol_at(&self, addr: u64) -> Option<(String, u64)> {
        (0xffff_0000..0xffff_0100)
            .contains(&addr)
            .then(|| ("jiffies".to_string(), addr - 0xffff_0000))
    }
    fn memory(&self) -> &dyn Memory {
        self
    }
}

fn raw(words: [u64; 3]) -> Vec<Field<'static>> {
    ["data1", "data2", "data3"]
        .into_iter()
        .zip(words)
        .map(|(n, w)| Field {
            name: n.into(),
            value: Value::Hex(w),
        })
        .collect()
}

fn subject<'a>(format: &'a [u8], ring: &'a str) -> Subject<'a> {
    Subject {
        log: "KLog",
        ring,
        name: "FS",
        format: Some(format),
        symbol: None,
        code: None,
    }
}

fn loaded() -> Schemata {
    let mut s = Schemata::default();
    s.add(Arc::from("t.toml"), "kcrash", file(FILE).unwrap())
        .unwrap();
    s
}

#[test]
fn a_schema_names_and_types_an_events_words() {
    let s = loaded();
    let Lookup::One(e) = s.lookup(&subject(b"lseek fd %d off %ld whence %c", "FS")) else {
        panic!("no schema")
    };
    let a = e.apply(&raw([0xffff_ffff, u64::MAX, 0x53]), &Clock::Hz(1000), &Cx);
    assert_eq!(
        a.fields.iter().map(|f| f.value.clone()).collect::<Vec<_>>(),
        vec![
            Value::Signed(-1),
            Value::Signed(-1),
            Value::Enum {
                value: 0x53,
                name: Some("SEEK_SET".into())
            }
        ]
    );
    assert_eq!(a.display.unwrap(), b"fd -1 to -1 from SEEK_SET");
    assert!(a.marks.is_empty());
}

#[test]
fn what_does_not_fit_is_marked_never_guessed() {
    let s = loaded();
    let Lookup::One(e) = s.lookup(&subject(b"fault at %p flags %#o", "VM/1")) else {
        panic!("no schema")
    };
    let a = e.apply(
        &raw([0xffff_0010, 0o7, 0x2000]),
        &Clock::Unknown("no".into()),
        &Cx,
    );
    let text: Vec<String> = a
        .fields
        .iter()
        .map(|f| {
            let mut out = Vec::new();
            f.value.write(&mut out);
            String::from_utf8(out).unwrap()
        })
        .collect();
    assert_eq!(
        text,
        [
            "0xffff0010 <jiffies+0x10>",
            "x|r|0x2 (0x7)",
            "<unreadable at 0x2000: not in the dump>",
            "8192 <unit unknown>",
            "4294901776 ticks",
        ]
    );
    assert_eq!(a.marks.len(), 1, "{:?}", a.marks);
    // Only in its ring.
    assert!(matches!(
        s.lookup(&subject(b"fault at %p flags %#o", "FS")),
        Lookup::None
    ));
    let a = e.apply(&raw([0, 0, 0x1000])[..2], &Clock::Hz(1000), &Cx);
    assert_eq!(a.marks.len(), 2, "{:?}", a.marks);
    let e2 = match s.lookup(&subject(b"lseek fd %d off %ld whence %c", "FS")) {
        Lookup::One(e) => e,
        _ => panic!(),
    };
    let a = e2.apply(&raw([1, 2, 3]), &Clock::Hz(1000), &Cx);
    assert_eq!(a.marks, ["whence: 3 has no name in the enum"]);
    assert_eq!(a.display.unwrap(), b"fd 1 to 2 from <unknown 3>");
}

#[test]
fn a_string_is_read_up_to_its_max() {
    let s = loaded();
    let Lookup::One(e) = s.lookup(&subject(b"fault at %p flags %#o", "VM")) else {
        panic!()
    };
    let a = e.apply(&raw([0, 0, 0x1000]), &Clock::Hz(1000), &Cx);
    assert_eq!(a.fields[2].value, Value::Text(b"/etc/mot".to_vec()));
    assert_eq!(
        a.fields[3].value,
        Value::Duration {
            raw: 0x1000,
            nanos: Some(4_096_000_000)
        }
    );
}

#[test]
fn two_schemata_for_one_event_are_an_error_naming_both() {
    let mut s = loaded();
    let again =
        "[[event]]\nlog = \"KLog\"\nformat = \"lseek fd %d off %ld whence %c\"\nname = \"x\"\n";
    let e = s
        .add(
            Arc::from("u.toml"),
            "kcrash",
            named_file("u.toml", again).unwrap(),
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "u.toml:1:1: KLog format \"lseek fd %d off %ld whence %c\" is claimed here and at t.toml:2"
    );
    // A log's name from the file is escaped: the error stays one line.
    let twice = "[[event]]\nlog = \"K\\nL\"\nevent = \"E\"\nname = \"x\"\n";
    let parsed = named_file("w.toml", twice).unwrap();
    let mut fresh = Schemata::default();
    fresh
        .add(Arc::from("w.toml"), "kcrash", parsed.clone())
        .unwrap();
    let e = fresh
        .add(Arc::from("w.toml"), "kcrash", parsed)
        .unwrap_err();
    assert!(e.to_string().starts_with("w.toml:1:1: K\\nL event"), "{e}");
    // By symbol and by format at once: the event says so, and neither is chosen.
    let by_symbol = "[[event]]\nlog = \"KLog\"\nsymbol = \"fmt_lseek\"\nname = \"y\"\n";
    s.add(Arc::from("v.toml"), "kcrash", file(by_symbol).unwrap())
        .unwrap();
    let mut subj = subject(b"lseek fd %d off %ld whence %c", "FS");
    subj.symbol = Some("fmt_lseek");
    assert!(matches!(s.lookup(&subj), Lookup::Conflict(..)));
}

#[test]
fn syntax_errors_name_the_line_and_column() {
    let cases = [
        ("[[event]]\nlog = \"KLog\"\nname = 3\n", "t.toml:3:8:"),
        ("[[event]]\nlog = \"KLog\"\nname = \"x\"\n", "t.toml:1:1: an event is identified"),
        (
            "[[event]]\nlog = \"KLog\"\ncode = [1, 2]\nname = \"x\"\nfields = [{ name = \"a\", from = \"d0\", type = \"float\" }]\n",
            "t.toml:5:45: unknown type \"float\"",
        ),
        (
            "[[event]]\nlog = \"KLog\"\ncode = [1, 2]\nname = \"x\"\ndisplay = \"a {b}\"\n",
            "t.toml:5:14: {b} names no field",
        ),
        (
            "[[event]]\nlog = \"K\"\nevent = \"E\"\nname = \"x\"\nfields = [{ name = \"a\", from = \"d0\", type = \"enum\", enum = \"nope\" }]\n",
            "t.toml:5:60: no [enum.nope] table",
        ),
        // A name from the file is escaped: the error stays one line.
        (
            "[[event]]\nlog = \"K\"\nevent = \"E\"\nname = \"x\"\nfields = [{ name = \"a\", from = \"d0\", type = \"enum\", enum = \"wh\\nce\" }]\n",
            "t.toml:5:60: no [enum.wh\\nce] table",
        ),
        ("[enum.e]\nx = \"A\"\n", "t.toml:2:5: \"x\" is not a number"),
        ("[flags.f]\n64 = \"A\"\n", "t.toml:2:6: \"64\" is not a number"),
        ("[[event]]\nlog = \"K\"\nevent = \"E\"\nname = \"x\"\nextra = 1\n", "t.toml:5:1:"),
    ];
    for (text, want) in cases {
        let e = file(text).unwrap_err().to_string();
        assert!(e.starts_with(want), "{e:?} does not start with {want:?}");
        assert!(!e.contains('\n'), "{e:?}");
    }
}

#[test]
fn integers_in_every_base() {
    use file::parse_int;
    assert_eq!(parse_int("0x53"), Some(0x53));
    assert_eq!(parse_int("-1"), Some(-1));
    assert_eq!(parse_int("0xffffffffffffffff"), Some(-1));
    assert_eq!(parse_int("0b101"), Some(5));
    assert_eq!(parse_int("18446744073709551615"), None);
    assert_eq!(parse_int("-0x8000000000000000"), Some(i64::MIN));
    assert_eq!(parse_int("x"), None);
}

#[test]
fn the_closest_ring_wins() {
    let text = r#"
[[event]]
log = "KLog"
format = "tick"
name = "any_tick"

[[event]]
log = "KLog"
format = "tick"
ring = "SCHED"
name = "sched_tick"

[[event]]
log = "KLog"
format = "tick"
ring = "SCHED/1"
name = "cpu1_tick"
"#;
    let mut s = Schemata::default();
    s.add(Arc::from("t.toml"), "kcrash", file(text).unwrap())
        .unwrap();
    let name = |ring| match s.lookup(&subject(b"tick", ring)) {
        Lookup::One(e) => e.name.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(name("SCHED/1"), "cpu1_tick");
    assert_eq!(name("SCHED/0"), "sched_tick");
    assert_eq!(name("SCHED"), "sched_tick");
    assert_eq!(name("SCHEDX"), "any_tick");
    assert_eq!(name("FS"), "any_tick");
}

#[test]
fn text_a_decoder_read_is_held_to_the_strings_max() {
    let s = loaded();
    let Lookup::One(e) = s.lookup(&subject(b"fault at %p flags %#o", "VM")) else {
        panic!()
    };
    let mut raw = raw([0, 0, 0]);
    raw[2].value = Value::Text(b"/etc/motd".to_vec());
    let a = e.apply(&raw, &Clock::Hz(1000), &Cx);
    assert_eq!(a.fields[2].value, Value::Text(b"/etc/mot".to_vec()));
}

#[test]
fn a_late_duplicate_among_many_events_is_found() {
    let mut text = String::new();
    for i in 0..15_000 {
        text.push_str(&format!(
            "[[event]]\nlog = \"QNX trace\"\ncode = [{}, {}]\nname = \"e\"\n",
            i / 1024,
            i % 1024
        ));
    }
    text.push_str("[[event]]\nlog = \"QNX trace\"\ncode = [0, 7]\nname = \"again\"\n");
    let e = Schemata::default()
        .add(Arc::from("t.toml"), "kcrash", file(&text).unwrap())
        .unwrap_err();
    assert!(e.what.ends_with("is claimed here and at t.toml:29"), "{e}");
}
