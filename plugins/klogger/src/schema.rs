//! Klogger's configuration files (`.klogger.conf.NAME`): enumerations, events with C-typed
//! fields, log levels that include and omit each other's events, `using` the level a kernel
//! is built with, and `arch` counter bindings (read and kept out of the way). The text may come
//! from a dump, so the parser is bounded everywhere and every error names its line and column.

use std::fmt;

/// Longest schema text read.
pub const MAX_TEXT: usize = 1 << 16;
/// Most events, enumerators, log levels and items per level: more than any schema the HOWTO
/// describes.
pub(crate) const MAX_ITEMS: usize = 1024;
/// Most fields per event: kcrash's schema model's bound, so that every schema the decoder reads
/// imports (`import`).
pub(crate) const MAX_FIELDS: usize = kcrash_schema::file::MAX_FIELDS;
/// Longest `stringN`, and largest payload.
pub(crate) const MAX_STRING: u64 = 4096;
const MAX_PAYLOAD: u64 = 1 << 16;
/// Deepest chain of `include`s.
const MAX_INCLUDE_DEPTH: usize = 16;

/// A schema error: where (1-based line and column, in characters), and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub line: u32,
    pub column: u32,
    pub what: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.what
        )
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
    /// The line of its declaration.
    pub line: usize,
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
        let parsed = if text.len() > MAX_TEXT {
            fault(
                Pos { line: 1, at: 0 },
                format!("{} bytes of schema, more than {MAX_TEXT}", text.len()),
            )
        } else {
            Parser::new(text).file()
        };
        parsed.map_err(|f| {
            let (line, column) = kcrash_schema::line_column(text, f.pos.at);
            Error {
                line,
                column,
                what: f.what,
            }
        })
    }
}

/// A place in the text: its line, counted as the text is read, and its byte offset, from which
/// an error's column is found (once, when there is an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pos {
    line: usize,
    at: usize,
}

/// An error as the parser finds it.
struct Fault {
    pos: Pos,
    what: String,
}

/// An event as declared, its field types not yet resolved.
struct Declared {
    name: String,
    pos: Pos,
    /// Name, type and the type's place.
    fields: Vec<(String, String, Pos)>,
}

/// One item of a log level, in order.
enum LevelItem {
    Include(String, Pos),
    Omit(String, Pos),
    Event(usize),
}

struct Level {
    name: String,
    items: Vec<LevelItem>,
}

/// A level's events as resolution finds them: each level is resolved once, however often it
/// is included, so that includes cannot multiply the work.
#[derive(Clone)]
enum Resolved {
    Not,
    /// Being resolved: including it again is a cycle.
    Busy,
    Done(Vec<usize>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token<'a> {
    Word(&'a str),
    Int(i64),
    Punct(char),
}

struct Parser<'a> {
    text: &'a str,
    rest: &'a str,
    line: usize,
    peeked: Option<(Token<'a>, Pos)>,
    declared: Vec<Declared>,
    enums: Vec<Enum>,
    levels: Vec<Level>,
    /// Events declared outside any level: always in use.
    top: Vec<usize>,
    using: Option<(String, Pos)>,
}

fn fault<T>(pos: Pos, what: impl Into<String>) -> Result<T, Fault> {
    Err(Fault {
        pos,
        what: what.into(),
    })
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Parser {
            text,
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

    /// Where the unread text starts.
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            at: self.text.len() - self.rest.len(),
        }
    }

    /// The next token and its place; `None` at the end.
    fn next(&mut self) -> Result<Option<(Token<'a>, Pos)>, Fault> {
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
        let pos = self.pos();
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
                return fault(
                    pos,
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
            return fault(pos, format!("unexpected character {:?}", c));
        };
        Ok(Some((token, pos)))
    }

    fn peek(&mut self) -> Result<Option<&(Token<'a>, Pos)>, Fault> {
        if self.peeked.is_none() {
            self.peeked = self.next()?;
        }
        Ok(self.peeked.as_ref())
    }

    /// The next token, which must exist.
    fn need(&mut self, what: &str) -> Result<(Token<'a>, Pos), Fault> {
        match self.next()? {
            Some(t) => Ok(t),
            // At the end, where the token should have been.
            None => fault(self.pos(), format!("the file ends where {what} should be")),
        }
    }

    fn word(&mut self, what: &str) -> Result<(&'a str, Pos), Fault> {
        match self.need(what)? {
            (Token::Word(w), pos) => Ok((w, pos)),
            (other, pos) => fault(pos, format!("expected {what}, found {}", show(&other))),
        }
    }

    fn punct(&mut self, want: char) -> Result<(), Fault> {
        match self.need(&format!("{want:?}"))? {
            (Token::Punct(c), _) if c == want => Ok(()),
            (other, pos) => fault(pos, format!("expected {want:?}, found {}", show(&other))),
        }
    }

    /// Consumes `c` if it is next.
    fn eat(&mut self, c: char) -> Result<bool, Fault> {
        if matches!(self.peek()?, Some((Token::Punct(p), _)) if *p == c) {
            self.peeked = None;
            return Ok(true);
        }
        Ok(false)
    }

    fn file(mut self) -> Result<Schema, Fault> {
        while let Some((token, pos)) = self.next()? {
            match token {
                Token::Word("enum") => self.enumeration()?,
                Token::Word("event") => {
                    let index = self.event(pos)?;
                    self.top.push(index);
                }
                Token::Word("using") => {
                    let (name, pos) = self.word("a log level's name")?;
                    if self.using.is_some() {
                        return fault(pos, "a second `using`");
                    }
                    self.using = Some((name.to_string(), pos));
                }
                Token::Word("loglevel") => self.level()?,
                Token::Word("arch") => self.arch()?,
                other => {
                    return fault(
                        pos,
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

    fn enumeration(&mut self) -> Result<(), Fault> {
        let (name, pos) = self.word("an enumeration's name")?;
        self.unique_type(name, pos)?;
        self.punct('{')?;
        let mut values: Vec<(String, i64)> = Vec::new();
        let mut next = 0i64;
        while !self.eat('}')? {
            let (value_name, pos) = self.word("an enumerator")?;
            if values.len() >= MAX_ITEMS {
                return fault(pos, format!("more than {MAX_ITEMS} enumerators"));
            }
            if values.iter().any(|(n, _)| n == value_name) {
                return fault(pos, format!("enumerator {value_name} twice"));
            }
            if self.eat('=')? {
                match self.need("a value")? {
                    (Token::Int(v), _) => next = v,
                    (other, pos) => {
                        return fault(pos, format!("expected a value, found {}", show(&other)))
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
    fn unique_type(&self, name: &str, pos: Pos) -> Result<(), Fault> {
        if self.enums.iter().any(|e| e.name == name) || builtin(name).is_some() {
            return fault(pos, format!("type {name} declared twice"));
        }
        if self.enums.len() >= MAX_ITEMS {
            return fault(pos, format!("more than {MAX_ITEMS} enumerations"));
        }
        Ok(())
    }

    /// An event's declaration (its `event` keyword at `pos`); its index in `declared`.
    fn event(&mut self, pos: Pos) -> Result<usize, Fault> {
        let (name, name_pos) = self.word("an event's name")?;
        if self.declared.iter().any(|d| d.name == name) {
            return fault(name_pos, format!("event {name} declared twice"));
        }
        if self.declared.len() >= MAX_ITEMS {
            return fault(name_pos, format!("more than {MAX_ITEMS} events"));
        }
        self.punct('{')?;
        let mut fields: Vec<(String, String, Pos)> = Vec::new();
        while !self.eat('}')? {
            let (ty, ty_pos) = self.word("a field's type")?;
            let (field, field_pos) = self.word("a field's name")?;
            if fields.len() >= MAX_FIELDS {
                return fault(ty_pos, format!("more than {MAX_FIELDS} fields in {name}"));
            }
            if fields.iter().any(|(n, _, _)| n == field) {
                return fault(field_pos, format!("field {field} twice in {name}"));
            }
            fields.push((field.to_string(), ty.to_string(), ty_pos));
            self.eat(';')?;
        }
        self.declared.push(Declared {
            name: name.to_string(),
            pos,
            fields,
        });
        Ok(self.declared.len() - 1)
    }

    fn level(&mut self) -> Result<(), Fault> {
        let (name, name_pos) = self.word("a log level's name")?;
        if self.levels.iter().any(|l| l.name == name) {
            return fault(name_pos, format!("log level {name} declared twice"));
        }
        if self.levels.len() >= MAX_ITEMS {
            return fault(name_pos, format!("more than {MAX_ITEMS} log levels"));
        }
        self.punct('<')?;
        let mut items = Vec::new();
        while !self.eat('>')? {
            let (what, item_pos) = self.word("include, omit or event")?;
            let item = match what {
                "include" => {
                    let (level, pos) = self.word("a log level's name")?;
                    LevelItem::Include(level.to_string(), pos)
                }
                "omit" => {
                    let (event, pos) = self.word("an event's name")?;
                    LevelItem::Omit(event.to_string(), pos)
                }
                "event" => LevelItem::Event(self.event(item_pos)?),
                other => {
                    return fault(
                        item_pos,
                        format!("expected include, omit or event, found {other}"),
                    )
                }
            };
            if items.len() >= MAX_ITEMS {
                return fault(
                    item_pos,
                    format!("more than {MAX_ITEMS} items in log level {name}"),
                );
            }
            items.push(item);
        }
        self.levels.push(Level {
            name: name.to_string(),
            items,
        });
        Ok(())
    }

    /// `arch NAME { counterN HARDWARE_COUNTER; ... }`: binds performance counters, which the
    /// payload already holds as plain fields; nothing of it is needed to decode.
    fn arch(&mut self) -> Result<(), Fault> {
        self.word("an architecture's name")?;
        self.punct('{')?;
        let mut bindings = 0;
        while !self.eat('}')? {
            let (_, pos) = self.word("a virtual counter")?;
            self.word("a hardware counter")?;
            self.eat(';')?;
            bindings += 1;
            if bindings > MAX_ITEMS {
                return fault(pos, format!("more than {MAX_ITEMS} counter bindings"));
            }
        }
        Ok(())
    }

    /// The events in use, laid out.
    fn resolve(self) -> Result<Schema, Fault> {
        let mut in_use = self.top.clone();
        if let Some((using, pos)) = &self.using {
            let level = self.level_named(using, *pos)?;
            let mut resolved = vec![Resolved::Not; self.levels.len()];
            for index in self.level_events(level, *pos, &mut resolved, 0)? {
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

    /// The level named `name` (named at `pos`), by its index.
    fn level_named(&self, name: &str, pos: Pos) -> Result<usize, Fault> {
        self.levels
            .iter()
            .position(|l| l.name == name)
            .map_or_else(|| fault(pos, format!("no log level {name}")), Ok)
    }

    /// Level `index`'s events in order (named at `from`): its includes' where they are
    /// included, then omissions taken out. Each level is resolved once (`resolved`); `depth`
    /// bounds include chains, so the recursion too.
    fn level_events(
        &self,
        index: usize,
        from: Pos,
        resolved: &mut [Resolved],
        depth: usize,
    ) -> Result<Vec<usize>, Fault> {
        let level = &self.levels[index];
        match &resolved[index] {
            Resolved::Done(events) => return Ok(events.clone()),
            Resolved::Busy => {
                return fault(from, format!("log level {} includes itself", level.name))
            }
            Resolved::Not if depth > MAX_INCLUDE_DEPTH => {
                return fault(
                    from,
                    format!("log levels include each other more than {MAX_INCLUDE_DEPTH} deep"),
                )
            }
            Resolved::Not => {}
        }
        resolved[index] = Resolved::Busy;
        // Which declared events are already in: merging costs the included list's length.
        let mut seen = vec![false; self.declared.len()];
        let mut events = Vec::new();
        for item in &level.items {
            let added = match item {
                LevelItem::Include(name, pos) => {
                    let included = self.level_named(name, *pos)?;
                    self.level_events(included, *pos, resolved, depth + 1)?
                }
                LevelItem::Event(index) => vec![*index],
                LevelItem::Omit(..) => continue,
            };
            for index in added {
                if !std::mem::replace(&mut seen[index], true) {
                    events.push(index);
                }
            }
        }
        for item in &level.items {
            if let LevelItem::Omit(name, pos) = item {
                let before = events.len();
                events.retain(|&i| self.declared[i].name != *name);
                if events.len() == before {
                    return fault(
                        *pos,
                        format!("omit {name}: log level {} has no such event", level.name),
                    );
                }
            }
        }
        resolved[index] = Resolved::Done(events.clone());
        Ok(events)
    }

    /// An event's fields at their C offsets.
    fn lay_out(&self, declared: &Declared) -> Result<EventType, Fault> {
        let mut fields = Vec::with_capacity(declared.fields.len());
        let mut offset = 0u64;
        let mut align = 1u64;
        for (name, ty, pos) in &declared.fields {
            let ty = self.field_type(ty, *pos)?;
            offset = offset.next_multiple_of(ty.align());
            align = align.max(ty.align());
            fields.push(Field {
                name: name.clone(),
                offset,
                ty: ty.clone(),
            });
            offset += ty.size();
            if offset > MAX_PAYLOAD {
                return fault(
                    *pos,
                    format!("event {} is more than {MAX_PAYLOAD} bytes", declared.name),
                );
            }
        }
        Ok(EventType {
            name: declared.name.clone(),
            line: declared.pos.line,
            fields,
            size: offset.next_multiple_of(align),
        })
    }

    fn field_type(&self, name: &str, pos: Pos) -> Result<Type, Fault> {
        if let Some(ty) = builtin(name) {
            return Ok(ty);
        }
        if let Some(index) = self.enums.iter().position(|e| e.name == name) {
            return Ok(Type::Enum(index));
        }
        if let Some(n) = name.strip_prefix("string") {
            return match n.parse::<u64>() {
                Ok(n) if (1..=MAX_STRING).contains(&n) => Ok(Type::String(n)),
                _ => fault(
                    pos,
                    format!("{name}: a string's length must be 1 to {MAX_STRING}"),
                ),
            };
        }
        fault(pos, format!("unknown type {name}"))
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
    fn errors_name_their_line_and_column() {
        let cases = [
            ("event A {\n  float x;\n}", (2, 3), "unknown type float"),
            (
                "event A { int x; }\nevent A { int y; }",
                (2, 7),
                "event A declared twice",
            ),
            ("using nope\nevent A { int x }", (1, 7), "no log level nope"),
            (
                "loglevel a < include b >\nloglevel b < include a >\nusing a",
                (2, 22),
                "log level a includes itself",
            ),
            ("loglevel a < omit Z >\nusing a", (1, 19), "omit Z"),
            ("event A { string0 s }", (1, 11), "a string's length"),
            ("event A { int x", (1, 16), "the file ends"),
            (
                "enum e { a = 99999999999999999999 }",
                (1, 14),
                "is not a number",
            ),
            ("\n\nevent A { int x; int x; }", (3, 22), "field x twice"),
            ("enum e { a, a }", (1, 13), "enumerator a twice"),
            ("enum int { a }", (1, 6), "type int declared twice"),
            ("loglevel a < >\nloglevel a < >", (2, 10), "declared twice"),
            ("using a\nusing b", (2, 7), "a second `using`"),
            (
                "loglevel a < event A { int x } mark >",
                (1, 32),
                "found mark",
            ),
            // Columns count characters, not bytes.
            ("# é\névent A { int x }", (2, 1), "unexpected character 'é'"),
            (
                "event A { string4096 a; string4096 b; } $",
                (1, 41),
                "unexpected character",
            ),
        ];
        for (text, (line, column), what) in cases {
            let e = Schema::parse(text).unwrap_err();
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
            assert!(e.what.contains(what), "{text:?}: {e}");
        }
    }

    #[test]
    fn include_chains_are_bounded() {
        let chain = |n: usize, includes: usize| {
            let mut text = String::from("using l0\n");
            for i in 0..n {
                text.push_str(&format!("loglevel l{i} < event E{i} {{ int x }}"));
                for _ in 0..includes {
                    text.push_str(&format!(" include l{}", i + 1));
                }
                text.push_str(" >\n");
            }
            text.push_str(&format!("loglevel l{n} < >\n"));
            text
        };
        let e = Schema::parse(&chain(20, 1)).unwrap_err();
        assert!(e.what.contains("more than 16 deep"), "{e}");
        // Each level included many times over is resolved once: this would be 40^16 walks.
        let schema = Schema::parse(&chain(16, 40)).unwrap();
        assert_eq!(schema.events.len(), 16);
        assert_eq!(schema.events[15].name, "E15");
    }

    #[test]
    fn payloads_are_bounded() {
        let fields: String = (0..20).map(|i| format!("string4096 s{i};")).collect();
        let e = Schema::parse(&format!("event BIG {{ {fields} }}")).unwrap_err();
        assert!(e.what.contains("more than 65536 bytes"), "{e}");
    }
}
