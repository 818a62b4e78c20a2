//! The formatting templates of "A Universal Dynamic Trace for Linux", section 6: a directory of
//! template files (`major=`, then per minor code `minor=`, `desc=`, `fmt=` statements) and the
//! printf-like interpreter that turns a record's logged data into a message and typed fields.

use std::ops::Range;

use kcrash_plugin::{Damage, Field, Value};

/// One probe's template: its description and its `fmt` statements, concatenated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    pub major: u32,
    pub minor: u32,
    pub desc: Vec<u8>,
    pub fmt: Vec<u8>,
    /// Where its `minor` statement starts in the text: an importer's errors say where.
    pub at: usize,
    /// Per `fmt` statement: where its text starts in `fmt`, and where its opening quote is in
    /// the text ([`source_offset`] finds a byte of `fmt` in the text from them).
    pub fmt_at: Vec<(usize, usize)>,
}

/// Every template of a directory, in the order given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Templates(pub Vec<Template>);

/// Why template text does not parse, and the offset in the text where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub at: usize,
    pub what: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "template text offset {:#x}: {}", self.at, self.what)
    }
}

impl Templates {
    /// The template for `(major, minor)`.
    pub fn get(&self, major: u32, minor: u32) -> Option<&Template> {
        self.0.iter().find(|t| t.major == major && t.minor == minor)
    }

    /// Parses template files' text. What parses before an error is kept; the error says where
    /// parsing stopped and why.
    pub fn parse(text: &[u8]) -> (Templates, Option<ParseError>) {
        let mut p = Parser { text, at: 0 };
        let mut out = Templates::default();
        let mut major = None;
        let error = loop {
            let s = match p.statement() {
                Ok(Some(s)) => s,
                Ok(None) => break None,
                Err(e) => break Some(e),
            };
            let fail = |what: &str| {
                Some(ParseError {
                    at: s.at,
                    what: what.into(),
                })
            };
            match (s.key.as_slice(), s.value) {
                (b"major", Literal::Number(n)) => major = Some(n),
                (b"minor", Literal::Number(n)) => match major {
                    Some(major) => out.0.push(Template {
                        major,
                        minor: n,
                        desc: Vec::new(),
                        fmt: Vec::new(),
                        at: s.at,
                        fmt_at: Vec::new(),
                    }),
                    None => break fail("minor before any major"),
                },
                (b"desc", Literal::Text(t)) => match out.0.last_mut() {
                    Some(last) => last.desc = t,
                    None => break fail("desc before any minor"),
                },
                (b"fmt", Literal::Text(t)) => match out.0.last_mut() {
                    Some(last) => {
                        last.fmt_at.push((last.fmt.len(), s.value_at));
                        last.fmt.extend_from_slice(&t);
                    }
                    None => break fail("fmt before any minor"),
                },
                (b"major" | b"minor", _) => break fail("major and minor take a number"),
                (b"desc" | b"fmt", _) => break fail("desc and fmt take a quoted string"),
                (key, _) => {
                    let key = String::from_utf8_lossy(key);
                    break fail(&format!(
                        "unexpected statement {key:?}: major, minor, desc or fmt"
                    ));
                }
            }
        };
        (out, error)
    }
}

/// The offset in `text` of byte `n` of the string literal whose opening quote is at `quote`
/// (its end when it has fewer): escapes make the two differ.
pub fn source_offset(text: &[u8], quote: usize, n: usize) -> usize {
    let mut p = Parser { text, at: quote };
    let _ = p.string(n);
    p.at
}

enum Literal {
    Number(u32),
    Text(Vec<u8>),
}

/// One `keyword=value` statement, with where it and its value start.
struct Statement {
    key: Vec<u8>,
    value: Literal,
    at: usize,
    value_at: usize,
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn error(&self, at: usize, why: &str) -> ParseError {
        ParseError {
            at,
            what: why.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    /// Skips blanks, commas (the statements' optional separators), NULs and comments.
    fn skip(&mut self) -> Result<(), ParseError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\r' | b'\n' | b',' | 0) => self.at += 1,
                Some(b'/') if self.text.get(self.at + 1) == Some(&b'*') => {
                    let end = find(&self.text[self.at + 2..], b"*/")
                        .ok_or_else(|| self.error(self.at, "comment not closed"))?;
                    self.at += 2 + end + 2;
                }
                Some(b'/') if self.text.get(self.at + 1) == Some(&b'/') => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.at += 1;
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn statement(&mut self) -> Result<Option<Statement>, ParseError> {
        self.skip()?;
        if self.peek().is_none() {
            return Ok(None);
        }
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            self.at += 1;
        }
        let key = self.text[start..self.at].to_vec();
        if key.is_empty() || self.peek() != Some(b'=') {
            return Err(self.error(self.at, "expected keyword=value"));
        }
        self.at += 1;
        let value_at = self.at;
        let value = if self.peek() == Some(b'"') {
            Literal::Text(self.string(usize::MAX)?)
        } else {
            Literal::Number(self.number()?)
        };
        Ok(Some(Statement {
            key,
            value,
            at: start,
            value_at,
        }))
    }

    /// A number in C notation: decimal or `0x` hex.
    fn number(&mut self) -> Result<u32, ParseError> {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
            self.at += 1;
        }
        let word = std::str::from_utf8(&self.text[start..self.at]).unwrap_or("");
        let parsed = match word.strip_prefix("0x").or_else(|| word.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16),
            None => word.parse(),
        };
        parsed.map_err(|_| {
            let why = match word {
                "" => "expected a number or a quoted string".into(),
                _ => format!("{word:?} is not a number of 0 to 4294967295"),
            };
            self.error(start, &why)
        })
    }

    /// A C string literal (`\n`, `\t`, `\\`, `\"` and `\0` escapes), its first `most` bytes:
    /// all of it, up to its closing quote, unless [`source_offset`] asks for fewer.
    fn string(&mut self, most: usize) -> Result<Vec<u8>, ParseError> {
        let quote = self.at;
        self.at += 1;
        let mut out = Vec::new();
        while out.len() < most {
            match self.peek() {
                None => return Err(self.error(quote, "string not closed")),
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    let c = match self.text.get(self.at + 1) {
                        Some(b'n') => b'\n',
                        Some(b't') => b'\t',
                        Some(b'0') => 0,
                        Some(&c @ (b'\\' | b'"')) => c,
                        _ => return Err(self.error(self.at, "unknown escape")),
                    };
                    out.push(c);
                    self.at += 2;
                }
                Some(c) => {
                    out.push(c);
                    self.at += 1;
                }
            }
        }
        Ok(out)
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The 3-byte prefix's tokens (section 2).
const TOKEN_BINARY: u8 = 0;
const TOKEN_STRING: u8 = 1;
const TOKEN_FAULT_FLAT: u8 = 0xff;
const TOKEN_FAULT_SELECTOR: u8 = 0xfe;

/// How deep `%r(...)` expressions may nest: templates come from the dump.
pub const MAX_DEPTH: usize = 4;

/// Most message bytes one record's formatting keeps: `%r` and literal text could grow it
/// without bound.
pub const MAX_MESSAGE: usize = 64 << 10;
/// Most fields one record's formatting makes.
pub const MAX_FIELDS: usize = 4096;

/// What formatting a record's data gives.
#[derive(Debug, Default, PartialEq)]
pub struct Formatted {
    pub message: Vec<u8>,
    pub fields: Vec<Field<'static>>,
    pub damage: Vec<Damage>,
}

/// Formats `data` (the logged data after the header) by `fmt`. The message loses one final
/// new-line (the paper's templates end with one; the event is one line). Data the template
/// does not reach is kept as a `rest` field and marked.
pub fn format(fmt: &[u8], data: &[u8]) -> Formatted {
    let mut f = Formatter {
        data,
        at: 0,
        out: Formatted::default(),
        unnamed: 0,
        group: None,
        cut: None,
    };
    let run = f.run(fmt, "", 0).and_then(|()| f.check_caps());
    if let Some(cut) = f.cut.take() {
        f.out.message.truncate(MAX_MESSAGE);
        f.out.fields.truncate(MAX_FIELDS);
        f.out.damage.push(Damage::Incomplete(cut));
    } else if let Err(why) = run {
        f.out.damage.push(Damage::Inconsistent(why));
    } else if f.at < data.len() {
        f.out.damage.push(Damage::Inconsistent(format!(
            "{} bytes of data beyond what the template formats",
            data.len() - f.at
        )));
    }
    if f.at < data.len() {
        f.out
            .fields
            .push(field("rest", Value::Bytes(data[f.at..].to_vec())));
    }
    if f.out.message.last() == Some(&b'\n') {
        f.out.message.pop();
    }
    f.out
}

fn field(name: impl Into<String>, value: Value<'static>) -> Field<'static> {
    Field {
        name: name.into().into(),
        value,
    }
}

struct Formatter<'a> {
    data: &'a [u8],
    at: usize,
    out: Formatted,
    unnamed: usize,
    /// Inside `%r`: the name unnamed fields take (the `%r` item's).
    group: Option<String>,
    /// Why formatting stopped at a cap, when it did.
    cut: Option<String>,
}

/// One parsed control: `%[p|r]<n><letter>`, or `%r(` for a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Control {
    /// `p` (the item behind a prefix) or `r` (repeated over it).
    pub mode: Option<u8>,
    pub count: usize,
    pub letter: u8,
}

/// One piece of a `fmt` template, read the same way by the formatter and the importer.
pub enum Piece<'f> {
    /// A byte of literal text (`%%`, `%(` and `%)` give theirs).
    Text(u8),
    Control {
        control: Control,
        /// The word before a `=` ending the literal text since the last control: the field's
        /// name, when not empty.
        word: &'f [u8],
        /// Where in the template the expression of `%r( … )` is.
        group: Option<Range<usize>>,
        /// Where in the template the control starts.
        at: usize,
    },
}

/// The pieces of a `fmt` template in order; an error (with its offset in the template) ends
/// them.
pub struct Scan<'f> {
    fmt: &'f [u8],
    at: usize,
    /// Where the literal text since the last control starts.
    literal: usize,
}

impl<'f> Scan<'f> {
    pub fn new(fmt: &'f [u8]) -> Self {
        Scan {
            fmt,
            at: 0,
            literal: 0,
        }
    }

    fn control(&mut self, start: usize) -> Result<Piece<'f>, String> {
        let fmt = self.fmt;
        let (control, mut next) = parse_control(fmt, start + 1)?;
        let group = if control.letter == b'(' {
            let end = group_end(fmt, next)?;
            let g = next..end;
            next = end + 1;
            Some(g)
        } else {
            None
        };
        let word = name_word(&fmt[self.literal..start]);
        self.at = next;
        self.literal = next;
        Ok(Piece::Control {
            control,
            word,
            group,
            at: start,
        })
    }
}

impl<'f> Iterator for Scan<'f> {
    type Item = Result<Piece<'f>, (usize, String)>;

    fn next(&mut self) -> Option<Self::Item> {
        let start = self.at;
        let c = *self.fmt.get(start)?;
        if c != b'%' {
            self.at += 1;
            return Some(Ok(Piece::Text(c)));
        }
        let piece = match self.fmt.get(start + 1) {
            Some(&lit @ (b'%' | b'(' | b')')) => {
                self.at += 2;
                return Some(Ok(Piece::Text(lit)));
            }
            None => Err("template ends with a lone %".to_string()),
            _ => self.control(start),
        };
        if piece.is_err() {
            self.at = self.fmt.len();
        }
        Some(piece.map_err(|why| (start, why)))
    }
}

/// The word before a `=` that ends `literal`, or nothing.
fn name_word(literal: &[u8]) -> &[u8] {
    let Some(before) = literal.strip_suffix(b"=") else {
        return &[];
    };
    let start = before
        .iter()
        .rposition(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
        .map_or(0, |p| p + 1);
    &before[start..]
}

/// A field's name: its `word`, else `dN` by the count of unnamed fields so far; `suffix` after
/// it (`[i]` inside a repetition).
pub fn field_name(word: &[u8], unnamed: &mut usize, suffix: &str) -> String {
    if word.is_empty() {
        *unnamed += 1;
        format!("d{}{suffix}", *unnamed - 1)
    } else {
        format!("{}{suffix}", String::from_utf8_lossy(word))
    }
}

impl Formatter<'_> {
    /// Formats by `fmt`; `suffix` goes after every field name (`[i]` inside a repetition).
    fn run(&mut self, fmt: &[u8], suffix: &str, depth: usize) -> Result<(), String> {
        for piece in Scan::new(fmt) {
            self.check_caps()?;
            let (control, word, group) = match piece.map_err(|(_, why)| why)? {
                Piece::Text(c) => {
                    self.out.message.push(c);
                    continue;
                }
                Piece::Control {
                    control,
                    word,
                    group,
                    ..
                } => (control, word, group),
            };
            let name = match &self.group {
                Some(g) if word.is_empty() => format!("{g}{suffix}"),
                _ => field_name(word, &mut self.unnamed, suffix),
            };
            if control.mode == Some(b'r') {
                let group = match group {
                    Some(g) => fmt[g].to_vec(),
                    None => {
                        let mut g = vec![b'%'];
                        if control.count != 1 {
                            g.extend_from_slice(control.count.to_string().as_bytes());
                        }
                        g.push(control.letter);
                        g
                    }
                };
                self.repeat(&name, &group, depth)?;
            } else {
                self.control(&name, &control)?;
            }
        }
        Ok(())
    }

    /// Stops formatting (an error, with `cut` saying why) once the message or the fields pass
    /// their caps.
    fn check_caps(&mut self) -> Result<(), String> {
        let why = if self.out.message.len() > MAX_MESSAGE {
            format!("message cut at {MAX_MESSAGE} bytes")
        } else if self.out.fields.len() > MAX_FIELDS {
            format!("fields cut at {MAX_FIELDS}")
        } else {
            return Ok(());
        };
        self.cut = Some(why.clone());
        Err(why)
    }

    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let left = self.data.len() - self.at;
        if n > left {
            return Err(format!(
                "the template needs {n} bytes at data offset {:#x}, the record has {left}",
                self.at
            ));
        }
        let bytes = &self.data[self.at..self.at + n];
        self.at += n;
        Ok(bytes)
    }

    /// Reads a 3-byte prefix. A fault token gives the field and `None`; otherwise the token and
    /// the length.
    fn prefix(&mut self, name: &str) -> Result<Option<(u8, usize)>, String> {
        let at = self.at;
        let p = self.take(3)?;
        let (token, len) = (p[0], usize::from(u16::from_le_bytes([p[1], p[2]])));
        let (reason, what) = match token {
            TOKEN_BINARY | TOKEN_STRING => return Ok(Some((token, len))),
            TOKEN_FAULT_FLAT if len == 4 || len == 8 => ("faulted read (flat address)", " at"),
            TOKEN_FAULT_SELECTOR if len == 4 => ("bad selector", ""),
            _ => {
                return Err(format!(
                    "prefix at data offset {at:#x}: token {token:#04x} with length {len} is not \
                     one the paper defines"
                ))
            }
        };
        let addr = le(self.take(len)?);
        self.out.fields.push(field(
            name,
            Value::Unreadable {
                addr,
                reason: reason.into(),
            },
        ));
        self.out
            .message
            .extend_from_slice(format!("<{reason}{what} {addr:#x}>").as_bytes());
        Ok(None)
    }

    fn control(&mut self, name: &str, c: &Control) -> Result<(), String> {
        let mut limit = None;
        if c.mode == Some(b'p') {
            let Some((token, len)) = self.prefix(name)? else {
                return Ok(());
            };
            let start = self.at;
            if token == TOKEN_STRING {
                // Copied up to and including its NUL: only that much follows the prefix, whose
                // length is the most that could have.
                let window = &self.data[start..(start + len).min(self.data.len())];
                let text = cut_at_nul(window).to_vec();
                if text.len() == window.len() && window.len() < len {
                    return Err(format!(
                        "string at data offset {start:#x} has no NUL before the record ends"
                    ));
                }
                self.at = start + (text.len() + 1).min(len);
                self.text_field(name, &text);
                return Ok(());
            }
            self.take(len)?;
            self.at = start;
            limit = Some(start + len);
        }
        let n = c.count;
        match c.letter {
            b'c' => {
                let bytes = self.take(n)?.to_vec();
                for &b in &bytes {
                    self.out
                        .message
                        .push(if (0x20..0x7f).contains(&b) { b } else { b'.' });
                }
                self.out.fields.push(field(name, Value::Text(bytes)));
            }
            b'd' | b'u' | b'x' => {
                let v = le(self.take(n)?);
                let (value, text) = match c.letter {
                    b'd' => {
                        let shift = 64 - 8 * n as u32;
                        let s = ((v << shift) as i64) >> shift;
                        (Value::Signed(s), s.to_string())
                    }
                    b'u' => (Value::Unsigned(v), v.to_string()),
                    _ => (Value::Hex(v), format!("{v:0width$x}", width = 2 * n)),
                };
                self.out.message.extend_from_slice(text.as_bytes());
                self.out.fields.push(field(name, value));
            }
            b'f' => {
                // parse_control admits 4 and 8 bytes only.
                let text =
                    match n {
                        4 => f32::from_le_bytes(self.take(4)?.try_into().unwrap_or_default())
                            .to_string(),
                        _ => f64::from_le_bytes(self.take(8)?.try_into().unwrap_or_default())
                            .to_string(),
                    };
                self.out.message.extend_from_slice(text.as_bytes());
                self.out.fields.push(field(name, Value::Text(text.into())));
            }
            b'i' => {
                self.take(n)?;
            }
            b's' => {
                let end = limit.unwrap_or(self.data.len());
                let text = cut_at_nul(&self.data[self.at..end]).to_vec();
                self.at += (text.len() + 1).min(end - self.at);
                self.text_field(name, &text);
            }
            // `z`: parse_control admits no other letter.
            _ => {
                let end = limit.unwrap_or(self.data.len());
                let bytes = self.data[self.at..end].to_vec();
                self.at = end;
                dump(&bytes, &mut self.out.message);
                self.out.fields.push(field(name, Value::Bytes(bytes)));
            }
        }
        if let Some(end) = limit {
            if self.at > end {
                return Err(format!(
                    "the control reads past its item's end at data offset {end:#x}"
                ));
            }
            self.at = end;
        }
        Ok(())
    }

    fn text_field(&mut self, name: &str, text: &[u8]) {
        self.out.message.extend_from_slice(text);
        self.out
            .fields
            .push(field(name, Value::Text(text.to_vec())));
    }

    /// `%r`: the group formatted again and again over the prefixed item's bytes.
    fn repeat(&mut self, name: &str, group: &[u8], depth: usize) -> Result<(), String> {
        if depth >= MAX_DEPTH {
            return Err(format!("%r nested deeper than {MAX_DEPTH}"));
        }
        let Some((_, len)) = self.prefix(name)? else {
            return Ok(());
        };
        let end = self.at + len;
        if end > self.data.len() {
            return Err(format!(
                "the %r item needs {len} bytes at data offset {:#x}, the record has {}",
                self.at,
                self.data.len() - self.at
            ));
        }
        let outer = self.data;
        let base = name.split('[').next().unwrap_or(name).to_string();
        self.data = &outer[..end];
        let mut result = Ok(());
        let mut i = 0;
        while self.at < end {
            let before = self.at;
            let outer_group = self.group.replace(base.clone());
            let run = self.run(group, &format!("[{i}]"), depth + 1);
            self.group = outer_group;
            if let Err(e) = run {
                result = Err(e);
                break;
            }
            if self.at == before {
                result = Err("a %r group that formats no data".into());
                break;
            }
            i += 1;
        }
        self.data = outer;
        result
    }
}

/// Parses `[p|r]<n><letter>` at `fmt[i..]`; a missing count is 1. Returns the control and the
/// index after it (after the `(` of a group).
fn parse_control(fmt: &[u8], mut i: usize) -> Result<(Control, usize), String> {
    let mode = match fmt.get(i) {
        Some(&m @ (b'p' | b'r')) => {
            i += 1;
            Some(m)
        }
        _ => None,
    };
    let start = i;
    while fmt.get(i).is_some_and(u8::is_ascii_digit) && i - start < 6 {
        i += 1;
    }
    let count = std::str::from_utf8(&fmt[start..i])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let letter = *fmt.get(i).ok_or("template ends inside a control")?;
    match (letter, count) {
        (b'(', _) if mode != Some(b'r') => return Err("a ( group without %r".into()),
        (b'(' | b'c' | b'i' | b's' | b'z', _) | (b'f', 4 | 8) | (b'd' | b'u' | b'x', 1..=8) => {}
        (b'f', n) => return Err(format!("%{n}f needs 4 or 8 bytes")),
        (b'd' | b'u' | b'x', n) => {
            return Err(format!("%{n}{} needs 1 to 8 bytes", letter as char))
        }
        // Escaped: the byte may be a newline, and an error is one line.
        (other, _) => return Err(format!("unknown control %{}", other.escape_ascii())),
    }
    Ok((
        Control {
            mode,
            count,
            letter,
        },
        i + 1,
    ))
}

/// The index of the `)` closing a group that starts at `fmt[i..]`, skipping `%)` and `%(`.
fn group_end(fmt: &[u8], mut i: usize) -> Result<usize, String> {
    let mut depth = 0usize;
    while i < fmt.len() {
        match fmt[i] {
            b'%' => i += 1,
            b'(' => depth += 1,
            b')' if depth == 0 => return Ok(i),
            b')' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    Err("%r( without its )".into())
}

fn cut_at_nul(bytes: &[u8]) -> &[u8] {
    bytes
        .iter()
        .position(|&b| b == 0)
        .map_or(bytes, |n| &bytes[..n])
}

/// A little-endian integer of up to 8 bytes.
fn le(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(b)
}

/// `%z`'s dump format: per 0x20 bytes, `+OFFSET`, the bytes in hex and as text between stars
/// (a period for each byte outside 0x20-0x7e), lines joined by new-lines.
fn dump(bytes: &[u8], out: &mut Vec<u8>) {
    use std::io::Write as _;
    for (i, line) in bytes.chunks(0x20).enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        let _ = write!(out, "+{:08x}", i * 0x20);
        for b in line {
            let _ = write!(out, " {b:02x}");
        }
        out.extend_from_slice(b" *");
        out.extend(
            line.iter()
                .map(|&b| if (0x20..0x7f).contains(&b) { b } else { b'.' }),
        );
        out.push(b'*');
    }
    if bytes.is_empty() {
        out.extend_from_slice(b"+00000000 **");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &[u8] = b"/* comment */ major=1\nminor=1, desc=\"open\", fmt=\"fd=%4u \"\n\
        fmt=\"path=%ps\\n\"\nmajor=0x2 minor=3 desc=\"ioctl\" fmt=\"fd=%4u args=%r(%4x)\"";

    #[test]
    fn parses_a_directory() {
        let (t, err) = Templates::parse(DIR);
        assert_eq!(err, None);
        let open = t.get(1, 1).unwrap();
        assert_eq!(open.desc, b"open");
        assert_eq!(open.fmt, b"fd=%4u path=%ps\n");
        assert_eq!(t.get(2, 3).unwrap().desc, b"ioctl");
        assert!(t.get(1, 2).is_none());
    }

    #[test]
    fn parse_errors_keep_what_parsed() {
        let (t, err) = Templates::parse(b"major=1 minor=1 desc=\"a\" fmt=\"unclosed");
        assert_eq!(t.0.len(), 1);
        assert!(err.unwrap().what.contains("string not closed"));
        let (_, err) = Templates::parse(b"minor=1");
        assert!(err.unwrap().what.contains("minor before any major"));
    }

    fn prefixed(token: u8, bytes: &[u8]) -> Vec<u8> {
        let mut v = vec![token];
        v.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        v.extend_from_slice(bytes);
        v
    }

    #[test]
    fn formats_numbers_and_prefixed_strings() {
        let mut data = 3u32.to_le_bytes().to_vec();
        let mut s = prefixed(1, b"/etc/motd\0");
        s[1] = 64; // max length 64, only the string and its NUL follow
        data.extend_from_slice(&s);
        let f = format(b"fd=%4u path=%ps\n", &data);
        assert_eq!(f.message, b"fd=3 path=/etc/motd");
        assert_eq!(f.damage, vec![]);
        assert_eq!(f.fields[0], field("fd", Value::Unsigned(3)));
        assert_eq!(
            f.fields[1],
            field("path", Value::Text(b"/etc/motd".to_vec()))
        );
    }

    #[test]
    fn fault_tokens_are_unreadable_fields() {
        let mut data = prefixed(0xff, &0xdead_0000u64.to_le_bytes());
        data.extend_from_slice(&prefixed(0xfe, &0x28u32.to_le_bytes()));
        let f = format(b"a=%pz b=%ps", &data);
        assert_eq!(
            f.fields[0].value,
            Value::Unreadable {
                addr: 0xdead_0000,
                reason: "faulted read (flat address)".into()
            }
        );
        assert_eq!(
            f.fields[1].value,
            Value::Unreadable {
                addr: 0x28,
                reason: "bad selector".into()
            }
        );
        assert_eq!(
            String::from_utf8(f.message).unwrap(),
            "a=<faulted read (flat address) at 0xdead0000> b=<bad selector 0x28>"
        );
    }

    #[test]
    fn repeats_and_dumps() {
        let mut words = Vec::new();
        for w in [1u32, 0xabc] {
            words.extend_from_slice(&w.to_le_bytes());
        }
        let mut data = prefixed(0, &words);
        data.extend_from_slice(&prefixed(0, b"ab\x01"));
        let f = format(b"args=%r(%4x ) buf=%pz", &data);
        assert_eq!(f.damage, vec![]);
        let names: Vec<&str> = f.fields.iter().map(|f| &*f.name).collect();
        assert_eq!(names, ["args[0]", "args[1]", "buf"]);
        assert_eq!(
            String::from_utf8(f.message).unwrap(),
            "args=00000001 00000abc  buf=+00000000 61 62 01 *ab.*"
        );
    }

    #[test]
    fn short_or_long_data_is_marked() {
        let f = format(b"a=%4u b=%4u", &[1, 0, 0, 0, 2]);
        assert_eq!(f.fields[0].value, Value::Unsigned(1));
        assert!(matches!(&f.damage[0], Damage::Inconsistent(w) if w.contains("needs 4 bytes")));
        assert_eq!(f.fields.last().unwrap().value, Value::Bytes(vec![2]));
        let f = format(b"a=%1u", &[1, 2]);
        assert!(
            matches!(&f.damage[0], Damage::Inconsistent(w) if w.contains("1 bytes of data beyond"))
        );
    }

    #[test]
    fn messages_and_fields_are_capped() {
        // 100 literal bytes per data byte: 1000 bytes would make a 100 000-byte message.
        let mut fmt = b"%r(".to_vec();
        fmt.extend_from_slice(&[b'x'; 100]);
        fmt.extend_from_slice(b"%1u)");
        let f = format(&fmt, &prefixed(0, &[7; 1000]));
        assert_eq!(f.message.len(), MAX_MESSAGE);
        assert_eq!(
            f.damage,
            vec![Damage::Incomplete("message cut at 65536 bytes".into())]
        );
        let f = format(b"%r(%1u)", &prefixed(0, &[7; 5000]));
        assert_eq!(
            f.damage,
            vec![Damage::Incomplete("fields cut at 4096".into())]
        );
        // The cut fields, and the data not reached as `rest`.
        assert_eq!(f.fields.len(), MAX_FIELDS + 1);
        assert_eq!(f.fields.last().unwrap().name, "rest");
    }

    #[test]
    fn hostile_templates_do_not_loop() {
        for fmt in [
            &b"%r(%i0)"[..],
            b"%r(%r(%r(%r(%r(%1u)))))",
            b"%q",
            b"%",
            b"%r(",
            b"%8x%9x",
        ] {
            let _ = format(fmt, &prefixed(0, &[0; 16]));
        }
    }
}
