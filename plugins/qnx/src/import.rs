//! Reading `.fmt` files, the formatting files `traceinfo` takes from /usr/trace for custom trace
//! events, into kcrash's event schemata. The seed documents name the files but not their
//! syntax; this one is line-based and printf-like (README.md, "Schemata"):
//!
//! ```text
//! # class     event  name                        format
//! INT         0x21   INT/ENTER                   "%{enum:irq}:vector ip %p:ip sp %x:sp"
//! PROC_THREAD 7      PROC_THREAD/PROCCREATE_NAME "%3$.64s:name pid %2$u:pid parent %1$u:ppid"
//! 21          0x155  USER21/MAGIC                "magic %x:magic access %{flags:access}:access"
//! enum irq 0x20=TIMER 0x21=KEYBOARD
//! flags access 0=READ 1=WRITE 2=EXEC
//! ```
//!
//! An event line names one code (class and event, as the decoder numbers them); each conversion
//! of its format names a field and reads the event's next raw field (or the `N$`th), as the
//! decoder names them ([`codes::raw_field`]). The text around the conversions is the event's
//! display line.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kcrash_schema::display::{Display, Part, MAX_TEMPLATE};
use kcrash_schema::file::{parse_int, MAX_FIELDS, MAX_NAMES, STRING_DEFAULT, STRING_MAX};
use kcrash_schema::{
    line_column, Enum, Error, EventSchema, FieldSchema, Flags, Identity, Origin, SchemaFile, Type,
    Unit,
};

use crate::codes;

/// QNX's formatting files, `*.fmt`.
pub static SYNTAX: kcrash_schema::Syntax = kcrash_schema::Syntax {
    name: "QNX .fmt",
    claims: |name| name.ends_with(".fmt"),
    parse: import,
};

/// Reads one `.fmt` file's text; `file` names it in errors and origins.
pub fn import(file: &Arc<str>, text: &str) -> Result<SchemaFile, Error> {
    Error::check_size(file, text)?;
    let error = |(at, what): Located| Error::at(file, text, at, what);
    let mut fmt = Fmt::default();
    let mut start = 0;
    for (n, line) in text.split('\n').enumerate() {
        let tokens = tokens(line, start).map_err(error)?;
        fmt.line(&tokens, n + 1).map_err(error)?;
        start += line.len() + 1;
    }
    fmt.finish(file, text).map_err(error)
}

/// An error and the byte of the file it is at.
type Located = (usize, String);

/// A word of a line, or a quoted string's text between its quotes (escapes not yet taken).
struct Token<'t> {
    at: usize,
    text: &'t str,
    quoted: bool,
}

/// Splits a line (starting at byte `start` of the file) into words and quoted strings, up to a
/// `#` that begins a word.
fn tokens(line: &str, start: usize) -> Result<Vec<Token<'_>>, Located> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut out = Vec::new();
    let mut rest = line;
    loop {
        rest = rest.trim_start_matches([' ', '\t']);
        let at = start + line.len() - rest.len();
        if rest.is_empty() || rest.starts_with('#') {
            return Ok(out);
        }
        let (token, after) = match rest.strip_prefix('"') {
            Some(quoted) => {
                let end = closing_quote(quoted).ok_or((at, "the string is not closed".into()))?;
                let token = Token {
                    at: at + 1,
                    text: &quoted[..end],
                    quoted: true,
                };
                (token, &quoted[end + 1..])
            }
            None => {
                let end = rest.find([' ', '\t', '"']).unwrap_or(rest.len());
                let token = Token {
                    at,
                    text: &rest[..end],
                    quoted: false,
                };
                (token, &rest[end..])
            }
        };
        if !(after.is_empty() || after.starts_with([' ', '\t'])) {
            let at = start + line.len() - after.len();
            return Err((at, "a space goes between a word and a string".into()));
        }
        out.push(token);
        rest = after;
    }
}

/// Where the closing quote of a string whose text starts `s` is: `\` escapes the next
/// character.
fn closing_quote(s: &str) -> Option<usize> {
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some(i),
            '\\' => {
                chars.next();
            }
            _ => {}
        }
    }
    None
}

/// A quoted string's characters with their bytes in the file: `\"` is a quote and `\\` a
/// backslash.
fn unescape(t: &Token<'_>) -> Result<Vec<(usize, char)>, Located> {
    let mut out = Vec::new();
    let mut chars = t.text.char_indices();
    while let Some((i, c)) = chars.next() {
        let c = match c {
            '\\' => match chars.next() {
                Some((_, c @ ('"' | '\\'))) => c,
                _ => return Err((t.at + i, "the escapes are \\\" and \\\\".into())),
            },
            c => c,
        };
        out.push((t.at + i, c));
    }
    Ok(out)
}

/// A name of a field, enum or flag set: a letter or `_`, then letters, digits and `_`.
fn identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A field's type, or the enum or flag set it names (tables may come after their use).
enum Ty {
    Is(Type),
    Enum(String, usize),
    Flags(String, usize),
}

struct Field {
    name: String,
    from: String,
    ty: Ty,
}

/// An event line read, its tables not yet resolved.
struct Event {
    class: u32,
    event: u32,
    name: String,
    fields: Vec<Field>,
    display: Option<Display>,
    /// Its first byte in the file.
    at: usize,
}

/// An enum's or a flag set's names by number, and the line of each.
type Table<K> = BTreeMap<K, (String, usize)>;

/// What a file says, line by line.
#[derive(Default)]
struct Fmt {
    events: Vec<Event>,
    /// The line each code was named on, to refuse a second.
    codes: HashMap<(u32, u32), usize>,
    enums: BTreeMap<String, Table<i64>>,
    flags: BTreeMap<String, Table<u8>>,
}

impl Fmt {
    /// Line `n`'s tokens.
    fn line(&mut self, tokens: &[Token<'_>], n: usize) -> Result<(), Located> {
        let Some(first) = tokens.first() else {
            return Ok(());
        };
        if first.quoted {
            return Err((first.at, "a line starts with a class, enum or flags".into()));
        }
        match first.text {
            "enum" => table(&mut self.enums, tokens, n, "enum", parse_int),
            "flags" => table(&mut self.flags, tokens, n, "flag set", |k| {
                parse_int(k)
                    .and_then(|b| u8::try_from(b).ok())
                    .filter(|&b| b < 64)
            }),
            _ => self.event(tokens, n),
        }
    }

    /// `CLASS EVENT NAME ["FORMAT"]`.
    fn event(&mut self, tokens: &[Token<'_>], n: usize) -> Result<(), Located> {
        let at = tokens[0].at;
        let [class, event, name, format @ ..] = tokens else {
            return Err((at, "an event line is CLASS EVENT NAME \"FORMAT\"".into()));
        };
        if let Some(t) = [class, event, name].into_iter().find(|t| t.quoted) {
            return Err((
                t.at,
                "a class, event or name is a word, not a string".into(),
            ));
        }
        let format = match format {
            [] => None,
            [f] if f.quoted => Some(f),
            [f] => return Err((f.at, "the format is quoted".into())),
            [_, extra, ..] => {
                return Err((
                    extra.at,
                    "an event line ends with its one quoted format".into(),
                ))
            }
        };
        let class_no = parse_int(class.text)
            .and_then(|n| u32::try_from(n).ok())
            .or_else(|| codes::class_number(class.text))
            .filter(|&n| n < 32)
            .ok_or_else(|| {
                (
                    class.at,
                    format!(
                        "{:?} is not a class: a number 0 to 31 or one of {}",
                        class.text,
                        codes::CLASSES.join(", ")
                    ),
                )
            })?;
        let event_no = parse_int(event.text)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n < 1024)
            .ok_or_else(|| {
                (
                    event.at,
                    format!("{:?} is not an event: a number 0 to 1023", event.text),
                )
            })?;
        if let Some(&earlier) = self.codes.get(&(class_no, event_no)) {
            return Err((
                at,
                format!("class {class_no} event {event_no:#x} is named here and on line {earlier}"),
            ));
        }
        let (fields, display) = match format {
            None => (Vec::new(), None),
            Some(f) => conversions(&unescape(f)?, class_no, event_no, f.at)?,
        };
        self.codes.insert((class_no, event_no), n);
        self.events.push(Event {
            class: class_no,
            event: event_no,
            name: name.text.to_string(),
            fields,
            display,
            at,
        });
        Ok(())
    }

    /// The schemata, each enum and flag set its field names resolved.
    fn finish(self, file: &Arc<str>, text: &str) -> Result<SchemaFile, Located> {
        let enums: BTreeMap<&str, Arc<Enum>> = self
            .enums
            .iter()
            .map(|(name, values)| {
                let values = values.iter().map(|(&v, (n, _))| (v, n.clone())).collect();
                let e = Enum {
                    name: name.clone(),
                    values,
                };
                (name.as_str(), Arc::new(e))
            })
            .collect();
        let flags: BTreeMap<&str, Arc<Flags>> = self
            .flags
            .iter()
            .map(|(name, bits)| {
                let bits = bits.iter().map(|(&b, (n, _))| (b, n.clone())).collect();
                let f = Flags {
                    name: name.clone(),
                    bits,
                };
                (name.as_str(), Arc::new(f))
            })
            .collect();
        let mut events = Vec::with_capacity(self.events.len());
        for e in self.events {
            let mut fields = Vec::with_capacity(e.fields.len());
            for f in e.fields {
                let ty = match f.ty {
                    Ty::Is(ty) => ty,
                    Ty::Enum(name, at) => Type::Enum(
                        enums
                            .get(name.as_str())
                            .ok_or_else(|| (at, format!("no enum {name} in the file")))?
                            .clone(),
                    ),
                    Ty::Flags(name, at) => Type::Flags(
                        flags
                            .get(name.as_str())
                            .ok_or_else(|| (at, format!("no flags {name} in the file")))?
                            .clone(),
                    ),
                };
                fields.push(FieldSchema {
                    name: f.name,
                    from: f.from,
                    ty,
                });
            }
            events.push(EventSchema {
                log: crate::KIND.to_string(),
                identity: Identity::Code(e.class, e.event),
                ring: None,
                name: e.name,
                fields,
                display: e.display,
                origin: Origin {
                    file: file.clone(),
                    line: line_column(text, e.at).0,
                },
            });
        }
        Ok(SchemaFile { events })
    }
}

/// `enum NAME VALUE=LABEL ...` or `flags NAME BIT=LABEL ...`: names added to the table (a later
/// line of the same name adds to it).
fn table<K: Ord + Copy>(
    tables: &mut BTreeMap<String, Table<K>>,
    tokens: &[Token<'_>],
    n: usize,
    what: &str,
    key: impl Fn(&str) -> Option<K>,
) -> Result<(), Located> {
    let [keyword, name, pairs @ ..] = tokens else {
        return Err((
            tokens[0].at,
            format!("{} NAME NUMBER=LABEL ...", tokens[0].text),
        ));
    };
    if name.quoted || !identifier(name.text) {
        return Err((name.at, format!("{:?} is not a {what}'s name", name.text)));
    }
    if pairs.is_empty() {
        return Err((
            keyword.at,
            format!("{} NAME NUMBER=LABEL ...", keyword.text),
        ));
    }
    if !tables.contains_key(name.text) && tables.len() >= MAX_NAMES {
        return Err((name.at, format!("more than {MAX_NAMES} of them")));
    }
    let table = tables.entry(name.text.to_string()).or_default();
    for pair in pairs {
        let Some((number, label)) = pair.text.split_once('=').filter(|_| !pair.quoted) else {
            return Err((pair.at, "a name is given as NUMBER=LABEL".into()));
        };
        let Some(k) = key(number) else {
            return Err((
                pair.at,
                format!("{number:?} is not a number this {what} takes"),
            ));
        };
        if label.is_empty() {
            return Err((pair.at + number.len() + 1, "the label is empty".into()));
        }
        if let Some((other, line)) = table.get(&k) {
            return Err((
                pair.at,
                format!("{number} is named {other} already, on line {line}"),
            ));
        }
        if table.len() >= MAX_NAMES {
            return Err((pair.at, format!("more than {MAX_NAMES} names")));
        }
        table.insert(k, (label.to_string(), n));
    }
    Ok(())
}

/// A format's fields and its display line. `class` and `event` say which raw fields there are.
fn conversions(
    chars: &[(usize, char)],
    class: u32,
    event: u32,
    at: usize,
) -> Result<(Vec<Field>, Option<Display>), Located> {
    if chars.len() > MAX_TEMPLATE {
        return Err((at, format!("a format is at most {MAX_TEMPLATE} characters")));
    }
    let mut fields: Vec<Field> = Vec::new();
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut next = 0;
    let mut i = 0;
    while let Some(&(at, c)) = chars.get(i) {
        i += 1;
        if c != '%' {
            text.push(c);
            continue;
        }
        if chars.get(i).is_some_and(|&(_, c)| c == '%') {
            i += 1;
            text.push('%');
            continue;
        }
        let mut spec = Spec { chars, i };
        let (index, ty) = spec.conversion(at, next)?;
        let name = spec.name(at)?;
        i = spec.i;
        if fields.iter().any(|f| f.name == name) {
            return Err((at, format!("field {name} is named twice")));
        }
        if fields.len() >= MAX_FIELDS {
            return Err((at, format!("more than {MAX_FIELDS} fields")));
        }
        let from = codes::raw_field(class, event, index).map_err(|there| {
            (
                at,
                format!(
                    "{} has no raw field {}: its raw fields are {there}",
                    codes::name(class, event),
                    index + 1
                ),
            )
        })?;
        next = index + 1;
        if !text.is_empty() {
            parts.push(Part::Text(std::mem::take(&mut text)));
        }
        parts.push(Part::Field(fields.len()));
        fields.push(Field {
            name,
            from: from.into_owned(),
            ty,
        });
    }
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
    let display = (!parts.is_empty()).then_some(Display(parts));
    Ok((fields, display))
}

/// One conversion being read, from the character after its `%`.
struct Spec<'c> {
    chars: &'c [(usize, char)],
    i: usize,
}

impl Spec<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).map(|&(_, c)| c)
    }

    /// Where the next character is (the format's end: its last character's).
    fn here(&self) -> usize {
        self.chars
            .get(self.i)
            .or(self.chars.last())
            .map_or(0, |&(at, _)| at)
    }

    fn eat(&mut self, c: char) -> bool {
        let ate = self.peek() == Some(c);
        self.i += usize::from(ate);
        ate
    }

    /// Decimal digits (saturating); None if there are none.
    fn number(&mut self) -> Option<usize> {
        let mut n: Option<usize> = None;
        while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
            self.i += 1;
            n = Some(n.unwrap_or(0).saturating_mul(10).saturating_add(d as usize));
        }
        n
    }

    /// `[N$]` and the conversion proper: the raw field's index (`next` when no `N$`) and
    /// the type.
    fn conversion(&mut self, at: usize, next: usize) -> Result<(usize, Ty), Located> {
        let start = self.i;
        let index = match self.number() {
            Some(n) if self.eat('$') => {
                if !(1..=codes::MAX_WORDS).contains(&n) {
                    let most = codes::MAX_WORDS;
                    return Err((at, format!("raw fields are counted 1$ to {most}$")));
                }
                n - 1
            }
            Some(_) => return Err((self.chars[start].0, WIDTH.into())),
            None => next,
        };
        if self.eat('{') {
            return Ok((index, self.braced(at)?));
        }
        if matches!(self.peek(), Some('-' | '+' | ' ' | '#' | '0' | '\'' | '*')) {
            return Err((self.here(), WIDTH.into()));
        }
        let precision = if self.eat('.') {
            let p = self.number();
            Some(p.ok_or((self.here(), "a precision is digits: %.64s".into()))?)
        } else {
            None
        };
        let length = if self.eat('h') {
            Some(if self.eat('h') { 8 } else { 16 })
        } else {
            None
        };
        let c_at = self.here();
        let c = self
            .peek()
            .ok_or((c_at, "the format ends in a conversion".into()))?;
        self.i += 1;
        let bits = length.unwrap_or(32);
        let ty = match c {
            'd' | 'i' => Type::Signed { bits },
            'u' => Type::Unsigned { bits },
            'x' | 'X' => Type::Hex { bits },
            'p' if length.is_none() => Type::Pointer,
            's' if length.is_none() => Type::String {
                max: match precision.map(u32::try_from) {
                    None => STRING_DEFAULT,
                    Some(Ok(p)) if (1..=STRING_MAX).contains(&p) => p,
                    Some(_) => return Err((at, format!("%s reads 1 to {STRING_MAX} bytes"))),
                },
            },
            'p' | 's' => return Err((c_at, format!("%{c} takes no h or hh"))),
            'l' | 'L' | 'j' | 'z' | 't' | 'q' => {
                return Err((
                    c_at,
                    "a traceevent's data words are 32 bits: the lengths are h and hh".into(),
                ))
            }
            'e' | 'E' | 'f' | 'F' | 'g' | 'G' | 'a' | 'A' => {
                return Err((c_at, format!("%{c}: no floating-point type")))
            }
            c => {
                return Err((
                    c_at,
                    format!("%{c} is not a conversion: d, i, u, x, X, p, s or %{{...}}"),
                ))
            }
        };
        if precision.is_some() && c != 's' {
            return Err((at, "a precision is for %s only".into()));
        }
        Ok((index, Ty::Is(ty)))
    }

    /// `{enum:NAME}`, `{flags:NAME}`, `{duration:UNIT}` or `{clock}`, past the `{`.
    fn braced(&mut self, at: usize) -> Result<Ty, Located> {
        let start = self.i;
        while self.peek().is_some_and(|c| c != '}') {
            self.i += 1;
        }
        let inner: String = self.chars[start..self.i].iter().map(|&(_, c)| c).collect();
        if !self.eat('}') {
            return Err((at, "'%{' is not closed by '}'".into()));
        }
        let inner_at = self.chars.get(start).map_or(at, |&(a, _)| a);
        let (kind, arg) = match inner.split_once(':') {
            Some((k, a)) => (k, Some(a)),
            None => (inner.as_str(), None),
        };
        let named = |arg: Option<&str>| match arg {
            Some(n) if identifier(n) => Ok(n.to_string()),
            _ => Err((inner_at, format!("%{{{kind}:NAME}} names its table"))),
        };
        Ok(match (kind, arg) {
            ("enum", arg) => Ty::Enum(named(arg)?, inner_at),
            ("flags", arg) => Ty::Flags(named(arg)?, inner_at),
            ("clock", None) => Ty::Is(Type::Clock),
            ("duration", Some(unit)) => match Unit::NAMES.iter().find(|(n, _)| *n == unit) {
                Some(&(_, unit)) => Ty::Is(Type::Duration(unit)),
                None => {
                    return Err((
                        inner_at,
                        "a duration's unit is ns, us, ms, s or ticks".into(),
                    ))
                }
            },
            _ => {
                return Err((
                    inner_at,
                    format!(
                        "%{{{inner}}}: the braced conversions are enum:NAME, flags:NAME, duration:UNIT and clock"
                    ),
                ))
            }
        })
    }

    /// `:NAME` after the conversion.
    fn name(&mut self, at: usize) -> Result<String, Located> {
        if !self.eat(':') {
            return Err((self.here(), "a conversion names its field: %u:pid".into()));
        }
        let start = self.i;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            self.i += 1;
        }
        let name: String = self.chars[start..self.i].iter().map(|&(_, c)| c).collect();
        if identifier(&name) {
            Ok(name)
        } else {
            Err((
                at,
                "a field's name is a letter or _, then letters, digits and _".into(),
            ))
        }
    }
}

const WIDTH: &str = "printf's widths and flags are not kept: write %x, %u, ...";

#[cfg(test)]
mod tests;
