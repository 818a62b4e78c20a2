//! Klogger's configuration files (`.klogger.conf.NAME`) read as kcrash event schemata: each
//! event the file's level in use logs becomes a schema keyed by the event's name, its fields
//! read from the decoder's fields of the same names (the decoder names them by the schema) and
//! typed as the file declares them. The syntax has no display line, so no schema gets one.
//!
//! The file is parsed by [`Schema::parse`], the decoder's own parser: what it refuses, the
//! importer refuses, with the file, line and column.

use std::sync::Arc;

use kcrash_schema::file::{MAX_FIELDS, MAX_FILE, MAX_NAMES, STRING_MAX};
use kcrash_schema::{Enum, Error, EventSchema, FieldSchema, Identity, Origin, SchemaFile, Type};

use crate::schema::{self, Schema};

/// What the names of files in Klogger's syntax start with.
pub const FILE_PREFIX: &str = ".klogger.conf.";

/// Klogger's configuration files, `.klogger.conf.NAME`.
pub static SYNTAX: kcrash_schema::Syntax = kcrash_schema::Syntax {
    name: "Klogger",
    claims: |name| name.starts_with(FILE_PREFIX),
    parse: import,
};

// The parser's bounds are within the model's, so every schema it reads imports whole.
const _: () = assert!(schema::MAX_TEXT <= MAX_FILE);
const _: () = assert!(schema::MAX_FIELDS <= MAX_FIELDS);
const _: () = assert!(schema::MAX_ITEMS <= MAX_NAMES);
const _: () = assert!(schema::MAX_STRING <= STRING_MAX as u64);

/// Reads one configuration file's text into schemata for the Klogger log; `file` names it in
/// errors and origins.
pub fn import(file: &Arc<str>, text: &str) -> Result<SchemaFile, Error> {
    let parsed = Schema::parse(text).map_err(|e| Error {
        file: file.clone(),
        line: e.line,
        column: e.column,
        what: e.what,
    })?;
    let enums: Vec<Arc<Enum>> = parsed
        .enums
        .iter()
        .map(|e| {
            Arc::new(Enum {
                name: e.name.clone(),
                values: e.values.iter().map(|(n, v)| (*v, n.clone())).collect(),
            })
        })
        .collect();
    let events = parsed
        .events
        .iter()
        .map(|event| EventSchema {
            log: crate::KIND.to_string(),
            identity: Identity::Name(event.name.clone()),
            ring: None,
            name: event.name.clone(),
            fields: event
                .fields
                .iter()
                .map(|f| FieldSchema {
                    name: f.name.clone(),
                    from: f.name.clone(),
                    ty: field_type(&f.ty, &enums),
                })
                .collect(),
            display: None,
            origin: Origin {
                file: file.clone(),
                line: u32::try_from(event.line).unwrap_or(u32::MAX),
            },
        })
        .collect();
    Ok(SchemaFile { events })
}

/// A field's C type as the model types it: integers by their width in bits, `stringN` as a
/// string of at most N bytes, an enumeration by its enumerators.
fn field_type(ty: &schema::Type, enums: &[Arc<Enum>]) -> Type {
    // Integers are 2, 4 or 8 bytes.
    let bits = |bytes: u64| (8 * bytes).min(64) as u8;
    match *ty {
        schema::Type::Signed(bytes) => Type::Signed { bits: bits(bytes) },
        schema::Type::Unsigned(bytes) => Type::Unsigned { bits: bits(bytes) },
        schema::Type::String(len) => Type::String {
            max: u32::try_from(len).unwrap_or(STRING_MAX),
        },
        // The parser gives an index into the enumerations it read.
        schema::Type::Enum(index) => Type::Enum(enums[index].clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../schemas/.klogger.conf.kcrash");

    fn file() -> Arc<str> {
        Arc::from("schemas/.klogger.conf.test")
    }

    fn error(text: &str) -> String {
        import(&file(), text).unwrap_err().to_string()
    }

    #[test]
    fn the_sample_imports() {
        let f = import(&file(), SAMPLE).unwrap();
        let names: Vec<&str> = f.events.iter().map(|e| e.name.as_str()).collect();
        // MARK is omitted by the level in use: the decoder never names an event MARK.
        assert_eq!(
            names,
            [
                "KLOGGER_START",
                "SCHEDOUT",
                "SCHEDIN",
                "TRY_TO_WAKEUP",
                "PROCESS_EXISTS",
                "DUMP_FINISH"
            ]
        );
        for e in &f.events {
            assert_eq!(e.log, "Klogger");
            assert_eq!(e.identity, Identity::Name(e.name.clone()));
            assert!(e.ring.is_none() && e.display.is_none());
            assert!(e.fields.iter().all(|f| f.from == f.name));
        }
        let start = &f.events[0];
        assert_eq!(start.origin.to_string(), "schemas/.klogger.conf.test:28");
        let types: Vec<&Type> = start.fields.iter().map(|f| &f.ty).collect();
        assert_eq!(
            types,
            [
                &Type::Unsigned { bits: 64 },
                &Type::Signed { bits: 32 },
                &Type::String { max: 16 }
            ]
        );
        let sched_in = &f.events[2];
        assert_eq!(sched_in.fields[2].ty, Type::Signed { bits: 16 });
        let Type::Enum(policy) = &sched_in.fields[1].ty else {
            panic!("{:?}", sched_in.fields[1]);
        };
        assert_eq!(policy.name, "sched_policy");
        assert_eq!(policy.name_of(5), Some("IDLE"));
        let wakeup = &f.events[3];
        assert_eq!(wakeup.fields[2].ty, Type::Unsigned { bits: 16 });
        let Type::Enum(state) = &wakeup.fields[1].ty else {
            panic!("{:?}", wakeup.fields[1]);
        };
        assert_eq!(state.name_of(-1), Some("DEAD"));
        // Two fields of one enumeration share it.
        let Type::Enum(again) = &f.events[4].fields[1].ty else {
            panic!("{:?}", f.events[4].fields[1]);
        };
        assert!(Arc::ptr_eq(policy, again));
        assert_eq!(f.events[5].fields[1].ty, Type::Unsigned { bits: 32 });
    }

    #[test]
    fn the_sample_loads_once() {
        let mut all = kcrash_schema::Schemata::default();
        let f = import(&file(), SAMPLE).unwrap();
        all.add(file(), "klogger", f.clone()).unwrap();
        let e = all.add(file(), "klogger", f).unwrap_err().to_string();
        assert!(
            e.starts_with("schemas/.klogger.conf.test:28:1: Klogger event \"KLOGGER_START\""),
            "{e}"
        );
    }

    #[test]
    fn every_error_gives_file_line_and_column() {
        let cases = [
            ("event A {\n  float x;\n}", "2:3: unknown type float"),
            ("event A { int x", "1:16: the file ends where"),
            ("event A int x }", "1:9: expected '{', found `int`"),
            ("event 7 { }", "1:7: expected an event's name, found `7`"),
            ("enum e { a = b }", "1:14: expected a value, found `b`"),
            ("enum e { a, 5 }", "1:13: expected an enumerator, found `5`"),
            (
                "float",
                "1:1: expected enum, event, using, loglevel or arch",
            ),
            ("\tevent A { int x; } @", "1:21: unexpected character '@'"),
            ("using nope", "1:7: no log level nope"),
            ("loglevel a < include b >\nusing a", "1:22: no log level b"),
            (
                "loglevel a < omit Z >\nusing a",
                "1:19: omit Z: log level a",
            ),
            (
                "loglevel a < fire >",
                "1:14: expected include, omit or event",
            ),
            ("arch P4 { counter1 }", "1:20: expected a hardware counter"),
            (
                "loglevel a < include a >\nusing a",
                "1:22: log level a includes itself",
            ),
            ("event A { string0 s }", "1:11: string0: a string's length"),
        ];
        for (text, want) in cases {
            let got = error(text);
            let want = format!("schemas/.klogger.conf.test:{want}");
            assert!(got.starts_with(&want), "{text:?}: {got}");
            assert!(!got.contains('\n'), "{got}");
        }
    }

    #[test]
    fn bad_numbers() {
        let cases = [
            (
                "enum e { a = 99999999999999999999 }",
                "1:14: \"99999999999999999999\"",
            ),
            ("enum e { a = 0xZZ }", "1:14: \"0xZZ\" is not a number"),
            ("enum e {\n a = - }", "2:6: \"-\" is not a number"),
            ("enum e { a = 12ab }", "1:14: \"12ab\" is not a number"),
            (
                "event A { string99999999999999999999999 s }",
                "1:11: string9",
            ),
            (
                "event A { string4097 s }",
                "1:11: string4097: a string's length",
            ),
        ];
        for (text, want) in cases {
            let got = error(text);
            assert!(got.contains(want), "{text:?}: {got}");
        }
        // The largest and smallest numbers C enumerators take.
        let f = import(
            &file(),
            "enum e { lo = -0x7fffffffffffffff, hi = 9223372036854775807 }\nevent A { e x }",
        )
        .unwrap();
        let Type::Enum(e) = &f.events[0].fields[0].ty else {
            panic!()
        };
        assert_eq!(
            e.values,
            [(-i64::MAX, "lo".into()), (i64::MAX, "hi".into())]
        );
    }

    #[test]
    fn duplicates() {
        let cases = [
            (
                "event A { int x }\nevent A { int y }",
                "2:7: event A declared twice",
            ),
            ("event A { int x; uint x }", "1:23: field x twice in A"),
            ("enum e { a, b, a }", "1:16: enumerator a twice"),
            ("enum e { a }\nenum e { b }", "2:6: type e declared twice"),
            ("enum ulong { a }", "1:6: type ulong declared twice"),
            (
                "loglevel a < >\nloglevel a < >",
                "2:10: log level a declared twice",
            ),
            ("using a\nusing a", "2:7: a second `using`"),
            (
                "loglevel a < event A { int x } >\nevent A { int y }",
                "2:7: event A declared twice",
            ),
        ];
        for (text, want) in cases {
            let got = error(text);
            assert!(got.contains(want), "{text:?}: {got}");
        }
        // An event included twice is one event, where it is first included.
        let f = import(
            &file(),
            "using b\nloglevel a < event A { int x } >\nloglevel b < include a event B { int y } include a >",
        )
        .unwrap();
        let names: Vec<&str> = f.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["A", "B"]);
    }

    #[test]
    fn oversize_inputs() {
        let big = format!("# {}\n", "x".repeat(schema::MAX_TEXT));
        assert!(error(&big).contains(":1:1: 65539 bytes of schema, more than 65536"));
        let fields: String = (0..=MAX_FIELDS).map(|i| format!("int f{i}; ")).collect();
        let e = error(&format!("event A {{ {fields}}}"));
        assert!(e.contains(":1:577: more than 64 fields in A"), "{e}");
        let events: String = (0..=schema::MAX_ITEMS)
            .map(|i| format!("event E{i} {{}}\n"))
            .collect();
        let e = error(&events);
        assert!(e.contains(":1025:7: more than 1024 events"), "{e}");
        let enumerators: String = (0..=schema::MAX_ITEMS).map(|i| format!("e{i},")).collect();
        let e = error(&format!("enum e {{ {enumerators} }}"));
        assert!(e.contains("more than 1024 enumerators"), "{e}");
        let strings: String = (0..17).map(|i| format!("string4096 s{i}; ")).collect();
        let e = error(&format!("event A {{ {strings}}}"));
        assert!(e.contains("more than 65536 bytes"), "{e}");
    }
}
