//! Klogger's configuration files (`.klogger.conf.NAME`): enumerations, events with C-typed
//! fields, log levels that include and omit each other's events, `using` the level a kernel
//! is built with, and `arch` counter bindings (read and kept out of the way). The text may come
//! from a dump, so the parser is bounded everywhere and every error names its line.

use std::fmt;

/// Longest schema text read.
pub const MAX_TEXT: usize = 1 << 16;
/// Most events, enumerators and fields per event: more than any schema the HOWTO describes.
const MAX_ITEMS: usize = 1024;
/// Longest `stringN`, and largest payload.
const MAX_STRING: u64 = 4096;
const MAX_PAYLOAD: u64 = 1 << 16;
/// Deepest chain of `include`s.
const MAX_INCLUDE_DEPTH: usize = 16;

/// A schema error: where, and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub line: usize,
    pub what: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for Error {}

/// The events a kernel built with the schema logs, by type number, laid out as C structs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    /// The level in use (`using`), if the schema names one.
    pub using: Option<String>,
    /// Events in use: type number `n` is `events[n - 1]`.
    pub events: Vec<EventType>,
    pub enums: Vec<Enum>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventType {
    pub name: String,
    pub fields: Vec<Field>,
    /// The payload struct's size, trailing padding included.
    pub size: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub offset: u64,
    pub ty: Type,
}

/// A field's type as the payload holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    Signed(u64),
    Unsigned(u64),
    /// A `stringN`: N bytes, NUL-terminated when shorter.
    String(u64),
    /// A C enum (an `int`): an index into [`Schema::enums`].
    Enum(usize),
}

impl Type {
    pub fn size(&self) -> u64 {
        match *self {
            Type::Signed(n) | Type::Unsigned(n) | Type::String(n) => n,
            Type::Enum(_) => 4,
        }
    }

    /// C's alignment on x86_64: an integer's size, a char array's 1.
    fn align(&self) -> u64 {
        match self {
            Type::String(_) => 1,
            other => other.size(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enum {
    pub name: String,
    pub values: Vec<(String, i64)>,
}

impl Enum {
    /// The name of `value`, if the enumeration has one.
    pub fn name_of(&self, value: i64) -> Option<&str> {
        self.values
            .iter()
            .find(|(_, v)| *v == value)
            .map(|(n, _)| n.as_str())
    }
}

impl Schema {
    /// The event of type number `type_id`.
    pub fn event(&self, type_id: u32) -> Option<&EventType> {
        let index = usize::try_from(type_id).ok()?.checked_sub(1)?;
        self.events.get(index)
    }

    /// Parses a configuration file's text.
    pub fn parse(text: &str) -> Result<Schema, Error> {
        if text.len() > MAX_TEXT {
            return Err(Error {
                line: 1,
                what: format!("{} bytes of schema, more than {MAX_TEXT}", text.len()),
            });
        }
        Parser::new(text).file()
    }
}

/// An event as declared, its field types not yet resolved.
struct Declared {
    name: String,
    fields: Vec<(String, String, usize)>,
}

/// One item of a log level, in order.
enum LevelItem {
    Include(String, usize),
    Omit(String, usize),
    Event(usize),
}

struct Level {
    name: String,
    line: usize,
    items: Vec<LevelItem>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token<'a> {
    Word(&'a str),
    Int(i64),
    Punct(char),
}

struct Parser<'a> {
    rest: &'a str,
    line: usize,
    peeked: Option<(Token<'a>, usize)>,
    declared: Vec<Declared>,
    enums: Vec<Enum>,
    levels: Vec<Level>,
    /// Events declared outside any level: always in use.
    top: Vec<usize>,
    using: Option<(String, usize)>,
}

fn err<T>(line: usize, what: impl Into<String>) -> Result<T, Error> {
    Err(Error {
        line,
        what: what.into(),
    })
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Parser {
            rest: text,
            line: 1,
            peeked: None,
            declared: Vec::new(),
            enums: Vec::new(),
            levels: Vec::new(),
            top: Vec::new(),
            using: None,
        }
    }

    /// The next token and its line; `None` at the end.
    fn next(&mut self) -> Result<Option<(Token<'a>, usize)>, Error> {
        if let Some(t) = self.peeked.take() {
            return Ok(Some(t));
        }
        loop {
            let trimmed = self.rest.trim_start_matches([' ', '\t', '\r']);
            self.rest = trimmed;
            if let Some(after) = self.rest.strip_prefix('\n') {
                self.line += 1;
                self.rest = after;
            } else if self.rest.starts_with('#') || self.rest.starts_with("//") {
                let end = self.rest.find('\n').unwrap_or(self.rest.len());
                self.rest = &self.rest[end..];
            } else {
                break;
            }
        }
        let line = self.line;
        let Some(c) = self.rest.chars().next() else {
            return Ok(None);
        };
        let token_end = |s: &str| {
            s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(s.len())
        };
        let token = if c.is_ascii_alphabetic() || c == '_' {
            let end = token_end(self.rest);
            let word = &self.rest[..end];
            self.rest = &self.rest[end..];
            Token::Word(word)
        } else if c.is_ascii_digit() || c == '-' {
            let negative = c == '-';
            let digits = if negative { &self.rest[1..] } else { self.rest };
            let end = token_end(digits);
            let text = &digits[..end];
            let magnitude = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
                Some(hex) => i64::from_str_radix(hex, 16),
                None => text.parse::<i64>(),
            };
            let Ok(magnitude) = magnitude else {
                return err(
                    line,
                    format!(
                        "{:?} is not a number",
                        &self.rest[..end + usize::from(negative)]
                    ),
                );
            };
            self.rest = &digits[end..];
            Token::Int(if negative { -magnitude } else { magnitude })
        } else if "{}<>,;=".contains(c) {
            self.rest = &self.rest[1..];
            Token::Punct(c)
        } else {
            return err(line, format!("unexpected character {:?}", c));
        };
        Ok(Some((token, line)))
    }

    fn peek(&mut self) -> Result<Option<&(Token<'a>, usize)>, Error> {
        if self.peeked.is_none() {
            self.peeked = self.next()?;
        }
        Ok(self.peeked.as_ref())
    }

    /// The next token, which must exist.
    fn need(&mut self, what: &str) -> Result<(Token<'a>, usize), Error> {
        let line = self.line;
        self.next()?.map_or_else(
            || err(line, format!("the file ends where {what} should be")),
            Ok,
        )
    }

    fn word(&mut self, what: &str) -> Result<(&'a str, usize), Error> {
        match self.need(what)? {
            (Token::Word(w), line) => Ok((w, line)),
            (other, line) => err(line, format!("expected {what}, found {}", show(&other))),
        }
    }

    fn punct(&mut self, want: char) -> Result<(), Error> {
        match self.need(&format!("{want:?}"))? {
            (Token::Punct(c), _) if c == want => Ok(()),
            (other, line) => err(line, format!("expected {want:?}, found {}", show(&other))),
        }
    }

    /// Consumes `c` if it is next.
    fn eat(&mut self, c: char) -> Result<bool, Error> {
        if matches!(self.peek()?, Some((Token::Punct(p), _)) if *p == c) {
            self.peeked = None;
            return Ok(true);
        }
        Ok(false)
    }

    fn file(mut self) -> Result<Schema, Error> {
        while let Some((token, line)) = self.next()? {
            match token {
                Token::Word("enum") => self.enumeration()?,
                Token::Word("event") => {
                    let index = self.event()?;
                    self.top.push(index);
                }
                Token::Word("using") => {
                    let (name, line) = self.word("a log level's name")?;
                    if self.using.is_some() {
                        return err(line, "a second `using`");
                    }
                    self.using = Some((name.to_string(), line));
                }
                Token::Word("loglevel") => self.level(line)?,
                Token::Word("arch") => self.arch()?,
                other => {
                    return err(
                        line,
                        format!(
                            "expected enum, event, using, loglevel or arch, found {}",
                            show(&other)
                        ),
                    )
                }
            }
        }
        self.resolve()
    }

    fn enumeration(&mut self) -> Result<(), Error> {
        let (name, line) = self.word("an enumeration's name")?;
        self.unique_type(name, line)?;
        self.punct('{')?;
        let mut values: Vec<(String, i64)> = Vec::new();
        let mut next = 0i64;
        while !self.eat('}')? {
            let (value_name, line) = self.word("an enumerator")?;
            if values.len() >= MAX_ITEMS {
                return err(line, format!("more than {MAX_ITEMS} enumerators"));
            }
            if values.iter().any(|(n, _)| n == value_name) {
                return err(line, format!("enumerator {value_name} twice"));
            }
            if self.eat('=')? {
                match self.need("a value")? {
                    (Token::Int(v), _) => next = v,
                    (other, line) => {
                        return err(line, format!("expected a value, found {}", show(&other)))
                    }
                }
            }
            values.push((value_name.to_string(), next));
            next = next.wrapping_add(1);
            self.eat(',')?;
        }
        self.enums.push(Enum {
            name: name.to_string(),
            values,
        });
        Ok(())
    }

    /// A type name may be declared once.
    fn unique_type(&self, name: &str, line: usize) -> Result<(), Error> {
        if self.enums.iter().any(|e| e.name == name) || builtin(name).is_some() {
            return err(line, format!("type {name} declared twice"));
        }
        if self.enums.len() >= MAX_ITEMS {
            return err(line, format!("more than {MAX_ITEMS} enumerations"));
        }
        Ok(())
    }

    /// An event's declaration; its index in `declared`.
    fn event(&mut self) -> Result<usize, Error> {
        let (name, line) = self.word("an event's name")?;
        if self.declared.iter().any(|d| d.name == name) {
            return err(line, format!("event {name} declared twice"));
        }
        if self.declared.len() >= MAX_ITEMS {
            return err(line, format!("more than {MAX_ITEMS} events"));
        }
        self.punct('{')?;
        let mut fields: Vec<(String, String, usize)> = Vec::new();
        while !self.eat('}')? {
            let (ty, line) = self.word("a field's type")?;
            let (field, _) = self.word("a field's name")?;
            if fields.len() >= MAX_ITEMS {
                return err(line, format!("more than {MAX_ITEMS} fields"));
            }
            if fields.iter().any(|(n, _, _)| n == field) {
                return err(line, format!("field {field} twice in {name}"));
            }
            fields.push((field.to_string(), ty.to_string(), line));
            self.eat(';')?;
        }
        self.declared.push(Declared {
            name: name.to_string(),
            fields,
        });
        Ok(self.declared.len() - 1)
    }

    fn level(&mut self, line: usize) -> Result<(), Error> {
        let (name, _) = self.word("a log level's name")?;
        if self.levels.iter().any(|l| l.name == name) {
            return err(line, format!("log level {name} declared twice"));
        }
        self.punct('<')?;
        let mut items = Vec::new();
        while !self.eat('>')? {
            let (what, line) = self.word("include, omit or event")?;
            let item = match what {
                "include" => {
                    LevelItem::Include(self.word("a log level's name")?.0.to_string(), line)
                }
                "omit" => LevelItem::Omit(self.word("an event's name")?.0.to_string(), line),
                "event" => LevelItem::Event(self.event()?),
                other => {
                    return err(
                        line,
                        format!("expected include, omit or event, found {other}"),
                    )
                }
            };
            if items.len() >= MAX_ITEMS {
                return err(
                    line,
                    format!("more than {MAX_ITEMS} items in log level {name}"),
                );
            }
            items.push(item);
        }
        self.levels.push(Level {
            name: name.to_string(),
            line,
            items,
        });
        Ok(())
    }

    /// `arch NAME { counterN HARDWARE_COUNTER; ... }`: binds performance counters, which the
    /// payload already holds as plain fields; nothing of it is needed to decode.
    fn arch(&mut self) -> Result<(), Error> {
        self.word("an architecture's name")?;
        self.punct('{')?;
        let mut bindings = 0;
        while !self.eat('}')? {
            let (_, line) = self.word("a virtual counter")?;
            self.word("a hardware counter")?;
            self.eat(';')?;
            bindings += 1;
            if bindings > MAX_ITEMS {
                return err(line, format!("more than {MAX_ITEMS} counter bindings"));
            }
        }
        Ok(())
    }

    /// The events in use, laid out.
    fn resolve(self) -> Result<Schema, Error> {
        let mut in_use = self.top.clone();
        if let Some((using, line)) = &self.using {
            let level = self.level_named(using, *line)?;
            for index in self.level_events(level, 0)? {
                if !in_use.contains(&index) {
                    in_use.push(index);
                }
            }
        } else {
            // No level chosen: every event declared.
            in_use = (0..self.declared.len()).collect();
        }
        let events = in_use
            .iter()
            .map(|&i| self.lay_out(&self.declared[i]))
            .collect::<Result<_, _>>()?;
        Ok(Schema {
            using: self.using.map(|(name, _)| name),
            events,
            enums: self.enums,
        })
    }

    fn level_named(&self, name: &str, line: usize) -> Result<&Level, Error> {
        self.levels
            .iter()
            .find(|l| l.name == name)
            .map_or_else(|| err(line, format!("no log level {name}")), Ok)
    }

    /// A level's events in order: its includes' where they are included, then omissions taken
    /// out. `depth` bounds include chains (and so cycles).
    fn level_events(&self, level: &Level, depth: usize) -> Result<Vec<usize>, Error> {
        if depth > MAX_INCLUDE_DEPTH {
            return err(
                level.line,
                format!(
                    "log level {} includes levels more than {MAX_INCLUDE_DEPTH} deep (a cycle?)",
                    level.name
                ),
            );
        }
        let mut events = Vec::new();
        for item in &level.items {
            match item {
                LevelItem::Include(name, line) => {
                    let included = self.level_named(name, *line)?;
                    for index in self.level_events(included, depth + 1)? {
                        if !events.contains(&index) {
                            events.push(index);
                        }
                    }
                }
                LevelItem::Event(index) => events.push(*index),
                LevelItem::Omit(..) => {}
            }
        }
        for item in &level.items {
            if let LevelItem::Omit(name, line) = item {
                let before = events.len();
                events.retain(|&i| self.declared[i].name != *name);
                if events.len() == before {
                    return err(
                        *line,
                        format!("omit {name}: log level {} has no such event", level.name),
                    );
                }
            }
        }
        Ok(events)
    }

    /// An event's fields at their C offsets.
    fn lay_out(&self, declared: &Declared) -> Result<EventType, Error> {
        let mut fields = Vec::with_capacity(declared.fields.len());
        let mut offset = 0u64;
        let mut align = 1u64;
        for (name, ty, line) in &declared.fields {
            let ty = self.field_type(ty, *line)?;
            offset = offset.next_multiple_of(ty.align());
            align = align.max(ty.align());
            fields.push(Field {
                name: name.clone(),
                offset,
                ty: ty.clone(),
            });
            offset += ty.size();
            if offset > MAX_PAYLOAD {
                return err(
                    *line,
                    format!("event {} is more than {MAX_PAYLOAD} bytes", declared.name),
                );
            }
        }
        Ok(EventType {
            name: declared.name.clone(),
            fields,
            size: offset.next_multiple_of(align),
        })
    }

    fn field_type(&self, name: &str, line: usize) -> Result<Type, Error> {
        if let Some(ty) = builtin(name) {
            return Ok(ty);
        }
        if let Some(index) = self.enums.iter().position(|e| e.name == name) {
            return Ok(Type::Enum(index));
        }
        if let Some(n) = name.strip_prefix("string") {
            return match n.parse::<u64>() {
                Ok(n) if (1..=MAX_STRING).contains(&n) => Ok(Type::String(n)),
                _ => err(
                    line,
                    format!("{name}: a string's length must be 1 to {MAX_STRING}"),
                ),
            };
        }
        err(line, format!("unknown type {name}"))
    }
}

/// Klogger's basic types (the HOWTO's table 1) as C has them on x86_64.
fn builtin(name: &str) -> Option<Type> {
    Some(match name {
        "short" => Type::Signed(2),
        "ushort" => Type::Unsigned(2),
        "int" => Type::Signed(4),
        "uint" => Type::Unsigned(4),
        "long" | "longlong" => Type::Signed(8),
        "ulong" | "ulonglong" => Type::Unsigned(8),
        _ => return None,
    })
}

fn show(token: &Token) -> String {
    match token {
        Token::Word(w) => format!("`{w}`"),
        Token::Int(v) => format!("`{v}`"),
        Token::Punct(c) => format!("`{c}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_KERNELS: &str = include_str!("../schemas/.klogger.conf.kcrash");

    #[test]
    fn test_kernels_schema() {
        let schema = Schema::parse(TEST_KERNELS).unwrap();
        let names: Vec<&str> = schema.events.iter().map(|e| e.name.as_str()).collect();
        // MARK is omitted by the level in use.
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
        let sched_in = schema.event(3).unwrap();
        let layout: Vec<(&str, u64)> = sched_in
            .fields
            .iter()
            .map(|f| (f.name.as_str(), f.offset))
            .collect();
        assert_eq!(layout, [("pid", 0), ("policy", 4), ("prio", 8)]);
        assert_eq!(sched_in.size, 12);
        let start = schema.event(1).unwrap();
        assert_eq!(start.size, 32);
        assert_eq!(start.fields[2].ty, Type::String(16));
        let out = schema.event(2).unwrap();
        assert_eq!((out.fields[1].offset, out.size), (8, 16));
        let state = &schema.enums[1];
        assert_eq!(state.name_of(-1), Some("DEAD"));
        assert_eq!(state.name_of(32), Some("ZOMBIE"));
        assert_eq!(state.name_of(3), None);
        assert!(schema.event(0).is_none() && schema.event(7).is_none());
    }

    #[test]
    fn enumerators_count_on_from_the_last_value() {
        let schema =
            Schema::parse("enum e { one, minusone = -1, four = 4, TWO = 2, Three }").unwrap();
        let values: Vec<i64> = schema.enums[0].values.iter().map(|(_, v)| *v).collect();
        assert_eq!(values, [0, -1, 4, 2, 3]);
    }

    #[test]
    fn without_using_every_event_is_in_use() {
        let text = "loglevel a < event A { int x } >\nevent B { short y; }\narch PentiumIV { counter1 l2_cache_misses_user; }";
        let schema = Schema::parse(text).unwrap();
        assert_eq!(schema.events.len(), 2);
    }

    #[test]
    fn errors_name_their_line() {
        let cases = [
            ("event A {\n  float x;\n}", 2, "unknown type float"),
            (
                "event A { int x; }\nevent A { int y; }",
                2,
                "event A declared twice",
            ),
            ("using nope\nevent A { int x }", 1, "no log level nope"),
            (
                "loglevel a < include b >\nloglevel b < include a >\nusing a",
                2,
                "more than 16 deep",
            ),
            ("loglevel a < omit Z >\nusing a", 1, "omit Z"),
            ("event A { string0 s }", 1, "a string's length"),
            ("event A { int x", 1, "the file ends"),
            ("enum e { a = 99999999999999999999 }", 1, "is not a number"),
            ("\n\nevent A { int x; int x; }", 3, "field x twice"),
            (
                "event A { string4096 a; string4096 b; } $",
                1,
                "unexpected character",
            ),
        ];
        for (text, line, what) in cases {
            let e = Schema::parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.what.contains(what), "{text:?}: {e}");
        }
    }

    #[test]
    fn payloads_are_bounded() {
        let fields: String = (0..20).map(|i| format!("string4096 s{i};")).collect();
        let e = Schema::parse(&format!("event BIG {{ {fields} }}")).unwrap_err();
        assert!(e.what.contains("more than 65536 bytes"), "{e}");
    }
}
