use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use kcrash_plugin::{Clock, Log, Memory, Order, Runs, Value};
use kcrash_schema::file::MAX_FILE;
use kcrash_schema::{Lookup, Resolve, Schemata, Subject};

use super::*;
use crate::TraceLog;

const SAMPLE: &str = include_str!("../../schemas/qnx-writer.fmt");

fn fmt(text: &str) -> Result<SchemaFile, Error> {
    import(&Arc::from("t.fmt"), text)
}

fn error(text: &str) -> String {
    fmt(text).unwrap_err().to_string()
}

#[test]
fn the_sample_imports_and_loads() {
    let file = fmt(SAMPLE).unwrap();
    assert_eq!(file.events.len(), 39);
    let sendv = &file.events[2];
    assert_eq!(sendv.identity, Identity::Code(2, 2));
    assert_eq!(sendv.log, "QNX trace");
    assert_eq!(sendv.origin.to_string(), "t.fmt:10");
    let name = file
        .events
        .iter()
        .find(|e| e.identity == Identity::Code(4, 7))
        .unwrap();
    let fields: Vec<(&str, &str, &Type)> = name
        .fields
        .iter()
        .map(|f| (f.name.as_str(), f.from.as_str(), &f.ty))
        .collect();
    assert_eq!(
        fields,
        [
            ("name", "name", &Type::String { max: 64 }),
            ("pid", "pid", &Type::Unsigned { bits: 32 }),
            ("ppid", "ppid", &Type::Unsigned { bits: 32 }),
        ]
    );
    let mut s = Schemata::default();
    s.add(Arc::from("t.fmt"), "qnx", file).unwrap();
}

/// Every type the syntax has, and what each conversion reads.
#[test]
fn conversions_map_onto_the_models_types() {
    let text = "enum e -1=NEG 3=THREE\nflags f 0=A 63=Z\n\
        21 1 X \"%d:a %hu:b %hhx:c %X:d %p:e %s:f %.9s:g %{enum:e}:h %{flags:f}:i \
        %{duration:us}:j %{clock}:k %1$i:l 100%%\"\n";
    let file = fmt(text).unwrap();
    let e = &file.events[0];
    let types: Vec<&Type> = e.fields.iter().map(|f| &f.ty).collect();
    let Type::Enum(en) = types[7] else { panic!() };
    assert_eq!(en.values, [(-1, "NEG".into()), (3, "THREE".into())]);
    let Type::Flags(fl) = types[8] else { panic!() };
    assert_eq!(fl.bits, [(0, "A".into()), (63, "Z".into())]);
    assert_eq!(
        types[..7],
        [
            &Type::Signed { bits: 32 },
            &Type::Unsigned { bits: 16 },
            &Type::Hex { bits: 8 },
            &Type::Hex { bits: 32 },
            &Type::Pointer,
            &Type::String { max: 256 },
            &Type::String { max: 9 },
        ]
    );
    assert_eq!(
        types[9..],
        [
            &Type::Duration(Unit::Microseconds),
            &Type::Clock,
            &Type::Signed { bits: 32 }
        ]
    );
    let from: Vec<&str> = e.fields.iter().map(|f| f.from.as_str()).collect();
    assert_eq!(
        from,
        ["d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "d10", "d0"]
    );
    let Some(Display(parts)) = &e.display else {
        panic!()
    };
    assert_eq!(parts.last(), Some(&Part::Text(" 100%".into())));
    assert_eq!(parts[..2], [Part::Field(0), Part::Text(" ".into())]);
    // A code the decoder knows reads its own fields; no format, no fields and no display.
    let file = fmt("INT 0x21 I \"%u:v %2$x:ip\"\nPROC_THREAD 3 T\n").unwrap();
    let from: Vec<&str> = file.events[0]
        .fields
        .iter()
        .map(|f| f.from.as_str())
        .collect();
    assert_eq!(from, ["vector", "ip"]);
    assert!(file.events[1].fields.is_empty() && file.events[1].display.is_none());
}

#[test]
fn every_error_names_its_line_and_column() {
    let cases = [
        ("CONTROL 1 T \"x", "t.fmt:1:13: the string is not closed"),
        ("CONTROL 1 T \"x\"y", "t.fmt:1:16: a space goes between"),
        ("\"x\"", "t.fmt:1:2: a line starts with"),
        ("CONTROL 1", "t.fmt:1:1: an event line is"),
        (
            "CONTROL \"1\" T",
            "t.fmt:1:10: a class, event or name is a word",
        ),
        ("CONTROL 1 T \"a\" \"b\"", "t.fmt:1:18: an event line ends"),
        ("CONTROL 1 T x", "t.fmt:1:13: the format is quoted"),
        ("\n  BOGUS 1 T", "t.fmt:2:3: \"BOGUS\" is not a class"),
        ("32 1 T", "t.fmt:1:1: \"32\" is not a class"),
        ("1 1024 T", "t.fmt:1:3: \"1024\" is not an event"),
        ("1 -1 T", "t.fmt:1:3: \"-1\" is not an event"),
        ("1 0x1g T", "t.fmt:1:3: \"0x1g\" is not an event"),
        (
            "1 1 T\n# c\n1 0x1 U",
            "t.fmt:3:1: class 1 event 0x1 is named here and on line 1",
        ),
        ("1 1 T \"a\\n\"", "t.fmt:1:9: the escapes are"),
        ("1 1 T \"\\\"%y:x\"", "t.fmt:1:11: %y is not a conversion"),
        ("1 1 T \"%08x:a\"", "t.fmt:1:9: printf's widths"),
        ("1 1 T \"%#x:a\"", "t.fmt:1:9: printf's widths"),
        (
            "1 1 T \"%lx:a\"",
            "t.fmt:1:9: a traceevent's data words are 32 bits",
        ),
        ("1 1 T \"%f:a\"", "t.fmt:1:9: %f: no floating-point"),
        ("1 1 T \"%hs:a\"", "t.fmt:1:10: %s takes no h"),
        ("1 1 T \"%.4x:a\"", "t.fmt:1:8: a precision is for %s only"),
        ("1 1 T \"%.0s:a\"", "t.fmt:1:8: %s reads 1 to 4096"),
        ("1 1 T \"%.s:a\"", "t.fmt:1:10: a precision is digits"),
        (
            "1 1 T \"%0$x:a\"",
            "t.fmt:1:8: raw fields are counted 1$ to 512$",
        ),
        (
            "1 1 T \"%99999999999999999999999$x:a\"",
            "t.fmt:1:8: raw fields are counted",
        ),
        ("1 1 T \"%x\"", "t.fmt:1:9: a conversion names its field"),
        ("1 1 T \"%x:9\"", "t.fmt:1:8: a field's name is"),
        ("1 1 T \"%\"", "t.fmt:1:8: the format ends in a conversion"),
        ("1 1 T \"%x:a %u:a\"", "t.fmt:1:13: field a is named twice"),
        (
            "1 1 T \"%x:a %x:b %x:c\"",
            "t.fmt:1:18: CONTROL/TIME has no raw field 3: its raw fields are msb, lsb",
        ),
        ("21 1 T \"%513$x:a\"", "t.fmt:1:9: raw fields are counted"),
        (
            "1 1 T \"%{enum:e}:a\"\n",
            "t.fmt:1:10: no enum e in the file",
        ),
        (
            "1 1 T \"%{flags:f}:a\"\n",
            "t.fmt:1:10: no flags f in the file",
        ),
        (
            "1 1 T \"%{enum}:a\"",
            "t.fmt:1:10: %{enum:NAME} names its table",
        ),
        (
            "1 1 T \"%{duration:min}:a\"",
            "t.fmt:1:10: a duration's unit is",
        ),
        (
            "1 1 T \"%{float}:a\"",
            "t.fmt:1:10: %{float}: the braced conversions",
        ),
        ("1 1 T \"%{clock:a\"", "t.fmt:1:8: '%{' is not closed"),
        ("enum", "t.fmt:1:1: enum NAME NUMBER=LABEL"),
        ("enum e", "t.fmt:1:1: enum NAME NUMBER=LABEL"),
        ("enum 9e 1=A", "t.fmt:1:6: \"9e\" is not a enum's name"),
        ("enum e 1", "t.fmt:1:8: a name is given as NUMBER=LABEL"),
        (
            "enum e x=A",
            "t.fmt:1:8: \"x\" is not a number this enum takes",
        ),
        ("enum e 1=", "t.fmt:1:10: the label is empty"),
        (
            "enum e 1=A\nenum e 0x1=B",
            "t.fmt:2:8: 0x1 is named A already, on line 1",
        ),
        (
            "flags f 64=A",
            "t.fmt:1:9: \"64\" is not a number this flag set takes",
        ),
        ("flags f -1=A", "t.fmt:1:9: \"-1\" is not a number"),
    ];
    for (text, want) in cases {
        let e = error(text);
        assert!(
            e.starts_with(want),
            "{text:?}: {e:?} does not start with {want:?}"
        );
        assert!(!e.contains('\n'), "{e:?}");
    }
}

#[test]
fn comments_blank_lines_and_crlf_are_nothing() {
    let file =
        fmt("# a comment\r\n\r\n  \t\n1 1 T/#1 \"%x:a # not a comment\" # a comment\r\n").unwrap();
    assert_eq!(file.events[0].name, "T/#1");
    assert_eq!(file.events[0].origin.line, 4);
    let Some(Display(parts)) = &file.events[0].display else {
        panic!()
    };
    assert_eq!(parts[1], Part::Text(" # not a comment".into()));
}

#[test]
fn inputs_are_bounded() {
    let big = "#".repeat(MAX_FILE + 1);
    assert_eq!(
        error(&big),
        format!("t.fmt:1:1: larger than {MAX_FILE} bytes")
    );
    let long = format!("21 1 T \"{}\"", "x".repeat(MAX_TEMPLATE + 1));
    let e = error(&long);
    assert!(e.starts_with("t.fmt:1:9: a format is at most"), "{e}");
    let many: String = (0..=MAX_FIELDS).map(|i| format!("%x:f{i} ")).collect();
    let e = error(&format!("21 1 T \"{many}\""));
    assert!(e.contains(&format!("more than {MAX_FIELDS} fields")), "{e}");
    let names: String = (0..=MAX_NAMES).map(|i| format!("{i}=N ")).collect();
    let e = error(&format!("enum e {names}"));
    assert!(e.contains(&format!("more than {MAX_NAMES} names")), "{e}");
    let tables: String = (0..=MAX_NAMES)
        .map(|i| format!("enum e{i} 1=A\n"))
        .collect();
    let e = error(&tables);
    assert!(
        e.starts_with(&format!("t.fmt:{}:6: more than", MAX_NAMES + 1)),
        "{e}"
    );
}

/// The writer's own ring, as a dump would hold it: its syspage entry and every buffer. The
/// writer's ring is one static: one test runs it.
fn written_ring(scenario: &str, oracle: &Mutex<Vec<String>>) -> Runs {
    struct Lines<'a>(&'a Mutex<Vec<String>>);
    impl qnx_writer::Sink for Lines<'_> {
        fn line(&self, line: std::fmt::Arguments<'_>) {
            self.0.lock().unwrap().push(line.to_string());
        }
    }
    static NOW: AtomicU64 = AtomicU64::new(1 << 32);
    let tracer = qnx_writer::Tracer {
        now: || NOW.fetch_add(10, Ordering::Relaxed),
        sink: &Lines(oracle),
    };
    let env = qnx_writer::scenarios::Env {
        cycles_per_sec: 1_000_000_000,
        unmapped: 0,
    };
    qnx_writer::scenarios::run(scenario, &tracer, &env).unwrap();
    let syspage = &qnx_writer::_syspage_trace as *const qnx_writer::SyspageTrace;
    let head = qnx_writer::_syspage_trace.tracebuf.load(Ordering::Acquire);
    let bytes = |at: *const u8, len: usize| {
        // SAFETY: the writer's statics, whole, not written while copied (its scenario is over).
        unsafe { std::slice::from_raw_parts(at, len) }.to_vec()
    };
    let buffers = qnx_writer::BUFFERS * std::mem::size_of::<qnx_writer::TraceBuf>();
    Runs(vec![
        (
            syspage as u64,
            bytes(
                syspage.cast(),
                std::mem::size_of::<qnx_writer::SyspageTrace>(),
            ),
        ),
        (head as u64, bytes(head.cast(), buffers)),
    ])
}

struct Cx<'m>(&'m Runs);

impl Resolve for Cx<'_> {
    fn symbol_at(&self, _: u64) -> Option<(String, u64)> {
        None
    }
    fn memory(&self) -> &dyn Memory {
        self.0
    }
}

/// An oracle line's fields, by name: an integer, or text as the writer escapes it.
fn oracle_fields(line: &str) -> HashMap<&str, String> {
    line.split(' ')
        .filter_map(|w| w.strip_prefix("f."))
        .filter_map(|w| w.split_once('='))
        .map(|(name, typed)| {
            let (ty, value) = typed.split_once(':').unwrap();
            let value = match ty {
                "u" | "s" => value.to_string(),
                "x" => u64::from_str_radix(&value[2..], 16).unwrap().to_string(),
                _ => format!("{ty}:{value}"),
            };
            (name, value)
        })
        .collect()
}

/// A schema's value as an oracle line gives it.
fn as_oracle(v: &Value<'_>) -> String {
    match v {
        Value::Unsigned(n) | Value::Hex(n) => n.to_string(),
        Value::Signed(n) => n.to_string(),
        Value::Enum { value, .. } | Value::Flags { value, .. } => value.to_string(),
        Value::Pointer { addr, .. } => addr.to_string(),
        Value::Text(t) => {
            format!("t:{}", String::from_utf8_lossy(t).escape_debug()).replace(' ', "\\u{20}")
        }
        other => panic!("{other:?}"),
    }
}

/// The sample names every event the writer logs, and each field it names has the value the
/// writer's oracle line gives for the raw field it reads.
#[test]
fn the_sample_types_the_writers_events_as_the_writer_wrote_them() {
    let mut s = Schemata::default();
    s.add(Arc::from("qnx-writer.fmt"), "qnx", fmt(SAMPLE).unwrap())
        .unwrap();
    let mut checked = 0;
    let mut seen = Vec::new();
    for scenario in ["qnx-plain", "qnx-combine", "qnx-wrap"] {
        let oracle = Mutex::new(Vec::new());
        let mem = written_ring(scenario, &oracle);
        let oracle = oracle.into_inner().unwrap();
        let by_seq: HashMap<u64, &str> = oracle
            .iter()
            .filter(|l| l.starts_with("QNX-EVENT "))
            .map(|l| {
                let seq = l.split(' ').nth(1).unwrap().strip_prefix("seq=").unwrap();
                (seq.parse().unwrap(), l.as_str())
            })
            .collect();
        let syspage = mem.0[0].0;
        let log = TraceLog::find(&mem, syspage).unwrap();
        for e in log.events(&mem, 0, Order::OldestFirst) {
            let kcrash_plugin::Key::Code(class, event) = e.key else {
                panic!("{e:?} has no code")
            };
            let subject = Subject {
                log: log.kind(),
                ring: "tracebuf ring",
                name: &e.name,
                format: None,
                symbol: None,
                code: Some((class, event)),
            };
            let Lookup::One(schema) = s.lookup(&subject) else {
                panic!("no schema for {}", e.name)
            };
            seen.push(schema.identity.clone());
            if !e.damage.is_empty() {
                // Stray parts: what the schema reads is not there, and it says so.
                continue;
            }
            let applied = schema.apply(&e.fields, log.clock(), &Cx(&mem));
            assert!(applied.marks.is_empty(), "{}: {:?}", e.name, applied.marks);
            let line = by_seq[&e.seq];
            let want = oracle_fields(line);
            for (f, value) in schema.fields.iter().zip(&applied.fields) {
                assert_eq!(
                    as_oracle(&value.value),
                    want[f.from.as_str()],
                    "{line}: {}",
                    f.name
                );
                checked += 1;
            }
            if scenario == "qnx-combine" && e.name == "PROC_THREAD/PROCCREATE_NAME" {
                let shown = applied.display.unwrap();
                // A string goes into the display line bare, as %s puts it.
                assert_eq!(shown, b"/usr/sbin/io-pkt-v6 pid 4100 parent 1");
            }
        }
    }
    assert!(checked > 400, "{checked}");
    // Every event line of the sample met an event but the calls no scenario makes.
    let unseen: Vec<&str> = s
        .events()
        .iter()
        .filter(|e| !seen.contains(&e.identity))
        .map(|e| e.name.as_str())
        .collect();
    let calls = [
        "TRACE_EVENT",
        "THREAD_CREATE",
        "THREAD_DESTROY",
        "TIMER_CREATE",
        "TIMER_SETTIME",
        "INTERRUPT_ATTACH",
    ];
    assert_eq!(unseen.len(), 2 * calls.len(), "{unseen:?}");
    assert!(
        unseen.iter().all(|n| calls.iter().any(|c| n.contains(c))),
        "{unseen:?}"
    );
}

/// What the sample's enum and flags make of the plain scenario's events.
#[test]
fn the_samples_enum_and_flags_name_values() {
    let file = fmt(SAMPLE).unwrap();
    let find = |code| file.events.iter().find(|e| e.identity == code).unwrap();
    let raw = |words: &[(&'static str, Value<'static>)]| -> Vec<kcrash_plugin::Field<'static>> {
        words
            .iter()
            .map(|(n, v)| kcrash_plugin::Field {
                name: (*n).into(),
                value: v.clone(),
            })
            .collect()
    };
    let mem = Runs(Vec::new());
    let clock = Clock::Hz(1000);
    let int = find(Identity::Code(3, 0x21)).apply(
        &raw(&[
            ("vector", Value::Unsigned(0x21)),
            ("ip", Value::Hex(0x8010_0001)),
            ("sp", Value::Hex(0x7ffe_fff0)),
        ]),
        &clock,
        &Cx(&mem),
    );
    assert_eq!(
        int.display.unwrap(),
        b"KEYBOARD ip 0x80100001 sp 0x7ffefff0"
    );
    let magic = find(Identity::Code(21, 0x155)).apply(
        &raw(&[("d0", Value::Hex(0xdead_beef)), ("d1", Value::Hex(7))]),
        &clock,
        &Cx(&mem),
    );
    assert_eq!(
        magic.display.unwrap(),
        b"magic 0xdeadbeef access READ|WRITE|EXEC (0x7)"
    );
}
