//! An event's print format — a printf format and C expressions over the record (`REC->field`)
//! and the kernel's helpers (`__get_str`, `__print_symbolic`, `__print_flags`, ...) — parsed
//! once, then rendered for each record as the kernel's `trace` file renders it. What this does
//! not know (a helper it lacks) makes the parse fail: the caller then shows the raw fields,
//! never a guess.

use std::borrow::Cow;
use std::io::Write;

use crate::formats::{common_fields, FieldDesc, Format};

/// Nesting deeper than any kernel format goes: a hostile format is refused, not recursed into.
const MAX_DEPTH: usize = 64;
/// A rendered line's longest: the rest is cut.
const MAX_LINE: usize = 8192;

/// A parse error: where in the format and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("print fmt at {at}: {why}")]
pub struct ParseError {
    pub at: usize,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Int(i128),
    Str(Vec<u8>),
    Field(String),
    /// A field found in the format the print format was bound to: its index in the format's
    /// fields, then the common fields.
    FieldAt(usize),
    Unary(u8, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A cast: to an integer type, or to a pointer (its value unchanged).
    Cast(Cast, Box<Expr>),
    /// A name that is no field: a kernel variable or constant, resolved when rendered.
    Name(String),
    Call(String, Vec<Expr>),
    /// `{ value, "name" }` in `__print_symbolic` and `__print_flags`.
    Pair(Box<Expr>, Box<Expr>),
    Index(Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
enum Cast {
    /// An integer type's size in bytes and signedness.
    Int(u32, bool),
    /// A pointer to a named struct or union (`struct page *`): adding to it counts elements.
    Pointer(String),
    /// Any other type: the value passes unchanged.
    Other,
}

/// The helpers whose first argument names a field (`__get_str(name)`).
const FIELD_HELPERS: [&str; 5] = [
    "__get_str",
    "__get_rel_str",
    "__get_dynamic_array",
    "__get_dynamic_array_len",
    "__get_bitmask",
];

/// A parsed print format.
#[derive(Debug, Clone, PartialEq)]
pub struct PrintFmt {
    format: Vec<u8>,
    args: Vec<Expr>,
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
    depth: usize,
}

impl PrintFmt {
    pub fn parse(text: &[u8]) -> Result<PrintFmt, ParseError> {
        let mut p = Parser {
            s: text,
            at: 0,
            depth: 0,
        };
        p.skip();
        let format = p.string()?;
        let mut args = Vec::new();
        loop {
            p.skip();
            if p.at >= p.s.len() {
                break;
            }
            p.expect(b",")?;
            args.push(p.expr()?);
        }
        Ok(PrintFmt { format, args })
    }
}

impl PrintFmt {
    /// Names its fields by their place in `format`, once, rather than by name for every record
    /// (a record rendered with it must be of `format`).
    pub fn bind(mut self, format: &Format) -> PrintFmt {
        fn bind(e: &mut Expr, format: &Format) {
            match e {
                Expr::Field(name) => {
                    if let Some(i) = format
                        .fields
                        .iter()
                        .chain(common_fields())
                        .position(|f| f.name == *name)
                    {
                        *e = Expr::FieldAt(i);
                    }
                }
                Expr::Unary(_, a) | Expr::Cast(_, a) => bind(a, format),
                Expr::Binary(_, a, b) | Expr::Pair(a, b) | Expr::Index(a, b) => {
                    bind(a, format);
                    bind(b, format);
                }
                Expr::Cond(c, a, b) => {
                    bind(c, format);
                    bind(a, format);
                    bind(b, format);
                }
                Expr::Call(_, args) => args.iter_mut().for_each(|a| bind(a, format)),
                Expr::Int(_) | Expr::Str(_) | Expr::Name(_) | Expr::FieldAt(_) => {}
            }
        }
        for a in &mut self.args {
            bind(a, format);
            fold(a, format);
        }
        self
    }
}

/// Whether `e` is made of numbers alone (C's constant expressions over literals).
fn is_constant(e: &Expr) -> bool {
    match e {
        Expr::Int(_) => true,
        Expr::Unary(_, a) | Expr::Cast(Cast::Int(..) | Cast::Other, a) => is_constant(a),
        Expr::Binary(_, a, b) => is_constant(a) && is_constant(b),
        Expr::Cond(c, a, b) => is_constant(c) && is_constant(a) && is_constant(b),
        _ => false,
    }
}

/// Folds each constant subexpression into its value once (`__print_flags`' masks are written
/// as casts and ORs of literals), rather than for every record.
fn fold(e: &mut Expr, format: &Format) {
    if is_constant(e) && !matches!(e, Expr::Int(_)) {
        let empty = Record { data: &[], format };
        if let Ok(Val::Int(v)) = eval(e, &empty, &NoKernel, 0) {
            *e = Expr::Int(v);
        }
        return;
    }
    match e {
        Expr::Unary(_, a) | Expr::Cast(_, a) => fold(a, format),
        Expr::Binary(_, a, b) | Expr::Pair(a, b) | Expr::Index(a, b) => {
            fold(a, format);
            fold(b, format);
        }
        Expr::Cond(c, a, b) => {
            fold(c, format);
            fold(a, format);
            fold(b, format);
        }
        Expr::Call(_, args) => args.iter_mut().for_each(|a| fold(a, format)),
        Expr::Int(_) | Expr::Str(_) | Expr::Name(_) | Expr::Field(_) | Expr::FieldAt(_) => {}
    }
}

impl Parser<'_> {
    fn err<T>(&self, why: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError {
            at: self.at,
            why: why.into(),
        })
    }

    fn skip(&mut self) {
        while self.s.get(self.at).is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip();
        self.s.get(self.at).copied()
    }

    fn eat(&mut self, token: &[u8]) -> bool {
        self.skip();
        if self
            .s
            .get(self.at..)
            .is_some_and(|rest| rest.starts_with(token))
        {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, token: &[u8]) -> Result<(), ParseError> {
        if self.eat(token) {
            Ok(())
        } else {
            self.err(format!("expected {:?}", String::from_utf8_lossy(token)))
        }
    }

    /// One or more adjacent string literals, joined.
    fn string(&mut self) -> Result<Vec<u8>, ParseError> {
        let mut out = Vec::new();
        let mut any = false;
        while self.peek() == Some(b'"') {
            any = true;
            self.at += 1;
            loop {
                match self.s.get(self.at) {
                    None => return self.err("a string does not end"),
                    Some(b'"') => {
                        self.at += 1;
                        break;
                    }
                    Some(b'\\') => {
                        let c = self.s.get(self.at + 1).copied().unwrap_or(b'\\');
                        out.push(match c {
                            b'n' => b'\n',
                            b't' => b'\t',
                            b'0' => 0,
                            other => other,
                        });
                        self.at += 2;
                    }
                    Some(&c) => {
                        out.push(c);
                        self.at += 1;
                    }
                }
            }
        }
        if !any {
            return self.err("expected a string");
        }
        Ok(out)
    }

    fn expr(&mut self) -> Result<Expr, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("nested too deep");
        }
        let e = self.cond();
        self.depth -= 1;
        e
    }

    fn cond(&mut self) -> Result<Expr, ParseError> {
        let c = self.binary(0)?;
        if self.eat(b"?") {
            let a = self.expr()?;
            self.expect(b":")?;
            let b = self.expr()?;
            return Ok(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)));
        }
        Ok(c)
    }

    /// Binary operators by precedence level, loosest first.
    fn binary(&mut self, level: usize) -> Result<Expr, ParseError> {
        const LEVELS: [&[&str]; 10] = [
            &["||"],
            &["&&"],
            &["|"],
            &["^"],
            &["&"],
            &["==", "!="],
            &["<=", ">=", "<", ">"],
            &["<<", ">>"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        let Some(ops) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut left = self.binary(level + 1)?;
        loop {
            self.skip();
            let rest = &self.s[self.at..];
            // `|` is not `||`, `&` not `&&`, `<` not `<<`.
            let op = ops.iter().find(|op| {
                rest.starts_with(op.as_bytes())
                    && !(op.len() == 1
                        && rest.len() > 1
                        && matches!(
                            (rest[0], rest[1]),
                            (b'|', b'|')
                                | (b'&', b'&')
                                | (b'<', b'<')
                                | (b'>', b'>')
                                | (b'<', b'=')
                                | (b'>', b'=')
                        ))
            });
            let Some(&op) = op else { break };
            self.at += op.len();
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return self.err("nested too deep");
            }
            let right = self.binary(level + 1)?;
            self.depth -= 1;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("nested too deep");
        }
        let e = match self.peek() {
            Some(c @ (b'-' | b'!' | b'~')) => {
                self.at += 1;
                Ok(Expr::Unary(c, Box::new(self.unary()?)))
            }
            Some(b'&') => {
                // `&REC->field`: the field's bytes themselves (arrays are their address).
                self.at += 1;
                self.unary()
            }
            Some(b'(') => {
                let save = self.at;
                self.at += 1;
                match self.cast_type() {
                    Some(cast) => Ok(Expr::Cast(cast, Box::new(self.unary()?))),
                    None => {
                        self.at = save + 1;
                        let e = self.expr()?;
                        self.expect(b")")?;
                        self.postfix(e)
                    }
                }
            }
            _ => {
                let e = self.primary()?;
                self.postfix(e)
            }
        };
        self.depth -= 1;
        e
    }

    /// A parenthesised type name after `(`, through its `)`: integer types give their size and
    /// signedness, a pointer to a named struct or union its element type, and anything else
    /// named a type passes values through.
    fn cast_type(&mut self) -> Option<Cast> {
        let start = self.at;
        let end = start + self.s[start..].iter().position(|&b| b == b')')?;
        let text = std::str::from_utf8(&self.s[start..end]).ok()?.trim();
        let spaced = text.replace('*', " * ");
        let words: Vec<&str> = spaced
            .split_whitespace()
            .filter(|w| *w != "const")
            .collect();
        const TYPE_WORDS: [&str; 14] = [
            "unsigned", "signed", "int", "long", "short", "char", "void", "u8", "u16", "u32",
            "u64", "s32", "s64", "bool",
        ];
        let aggregate = match words.as_slice() {
            [kind @ ("struct" | "union"), name, rest @ ..]
                if is_identifier(name) && rest.iter().all(|w| *w == "*") =>
            {
                Some((format!("{kind} {name}"), !rest.is_empty()))
            }
            _ => None,
        };
        let is_type = aggregate.is_some()
            || !words.is_empty()
                && words.iter().all(|w| {
                    TYPE_WORDS.contains(w) || *w == "*" || (w.ends_with("_t") && is_identifier(w))
                });
        if !is_type {
            return None;
        }
        self.at = end + 1;
        match aggregate {
            Some((name, true)) => return Some(Cast::Pointer(name)),
            Some((_, false)) => return Some(Cast::Other),
            None if text.contains('*') => return Some(Cast::Other),
            None => {}
        }
        if let [name] = words.as_slice() {
            if name.ends_with("_t") {
                // A typedef: its width when it is one of the kernel's usual ones, else the value
                // as it is (never narrowed by a guess).
                return Some(
                    TYPEDEFS
                        .iter()
                        .find(|(n, _, _)| n == name)
                        .map_or(Cast::Other, |&(_, size, signed)| Cast::Int(size, signed)),
                );
            }
        }
        let signed = !(text.contains("unsigned") || text.starts_with('u') || text == "bool");
        let size = if text.contains("long") || text.contains("64") {
            8
        } else if text.contains("short") || text.contains("16") {
            2
        } else if text.contains("char") || text.contains('8') || text == "bool" {
            1
        } else {
            4
        };
        Some(Cast::Int(size, signed))
    }

    fn postfix(&mut self, mut e: Expr) -> Result<Expr, ParseError> {
        while self.eat(b"[") {
            let i = self.expr()?;
            self.expect(b"]")?;
            e = Expr::Index(Box::new(e), Box::new(i));
        }
        Ok(e)
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        match self.peek() {
            Some(b'"') => Ok(Expr::Str(self.string()?)),
            Some(b'\'') => {
                let Some(&c) = self.s.get(self.at + 1) else {
                    return self.err("a character constant runs past the end");
                };
                self.at += 2;
                self.expect(b"'")?;
                Ok(Expr::Int(i128::from(c)))
            }
            Some(b'{') => {
                self.at += 1;
                let a = self.expr()?;
                self.expect(b",")?;
                let b = self.expr()?;
                self.expect(b"}")?;
                Ok(Expr::Pair(Box::new(a), Box::new(b)))
            }
            Some(c) if c.is_ascii_digit() => self.number(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let word = self.word();
                if word == "REC" {
                    self.expect(b"->")?;
                    return Ok(Expr::Field(self.word()));
                }
                if self.eat(b"(") {
                    let mut args = Vec::new();
                    if FIELD_HELPERS.contains(&word.as_str()) {
                        // `__get_str(name)`, or as some kernels write it `__get_str(REC->name)`.
                        let save = self.at;
                        let field = self.word();
                        if !field.is_empty() && field != "REC" && self.peek() == Some(b')') {
                            args.push(Expr::Field(field));
                        } else {
                            self.at = save;
                        }
                    }
                    if !self.eat(b")") {
                        if !args.is_empty() {
                            self.expect(b",")?;
                        }
                        loop {
                            args.push(self.expr()?);
                            if self.eat(b")") {
                                break;
                            }
                            self.expect(b",")?;
                        }
                    }
                    return Ok(Expr::Call(word, args));
                }
                Ok(Expr::Name(word))
            }
            _ => self.err("expected a value"),
        }
    }

    fn word(&mut self) -> String {
        self.skip();
        let start = self.at;
        while self
            .s
            .get(self.at)
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
        {
            self.at += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.at]).into_owned()
    }

    fn number(&mut self) -> Result<Expr, ParseError> {
        let start = self.at;
        let (radix, digits_start) =
            if self.s[self.at..].starts_with(b"0x") || self.s[self.at..].starts_with(b"0X") {
                (16, self.at + 2)
            } else if self.s[self.at] == b'0' {
                (8, self.at)
            } else {
                (10, self.at)
            };
        self.at = digits_start;
        while self.s.get(self.at).is_some_and(|b| b.is_ascii_hexdigit()) {
            self.at += 1;
        }
        let digits = std::str::from_utf8(&self.s[digits_start..self.at]).unwrap_or("");
        let value = if digits.is_empty() {
            0
        } else {
            match i128::from_str_radix(digits, radix) {
                Ok(v) => v,
                Err(_) => {
                    self.at = start;
                    return self.err("a number out of range");
                }
            }
        };
        while self
            .s
            .get(self.at)
            .is_some_and(|b| matches!(b, b'u' | b'U' | b'l' | b'L'))
        {
            self.at += 1;
        }
        Ok(Expr::Int(value))
    }
}

/// What an expression or argument gives: a string borrowed from the record or the format
/// where it can be.
#[derive(Debug, Clone, PartialEq)]
pub enum Val<'a> {
    Int(i128),
    Str(Cow<'a, [u8]>),
}

impl<'a> Val<'a> {
    fn int(&self) -> i128 {
        match self {
            Val::Int(i) => *i,
            Val::Str(s) => i128::from(!s.is_empty()),
        }
    }

    fn into_bytes(self) -> Cow<'a, [u8]> {
        match self {
            Val::Int(i) => Cow::Owned(i.to_string().into_bytes()),
            Val::Str(s) => s,
        }
    }

    /// A string made here.
    pub fn owned(bytes: Vec<u8>) -> Val<'a> {
        Val::Str(Cow::Owned(bytes))
    }
}

/// What a print format needs of the kernel beyond the record: each `None` when it cannot be
/// had.
pub trait Resolve {
    /// The symbol holding `addr`, the offset into it and its size (`%ps`, `%pS`).
    fn symbol(&self, addr: u64) -> Option<(String, u64, u64)>;
    /// The C string at `addr` (`%s` of a pointer field, as the kernel reads it).
    fn string(&self, addr: u64) -> Option<Vec<u8>>;
    /// A kernel variable's integer value, by name (`vmemmap_base`).
    fn variable(&self, name: &str) -> Option<i128>;
    /// A struct's or union's size (`struct page`), for pointer arithmetic.
    fn size_of(&self, ty: &str) -> Option<u64>;
}

/// No kernel at all: symbols print as addresses, names are unknown.
pub struct NoKernel;

impl Resolve for NoKernel {
    fn symbol(&self, _: u64) -> Option<(String, u64, u64)> {
        None
    }
    fn string(&self, _: u64) -> Option<Vec<u8>> {
        None
    }
    fn variable(&self, _: &str) -> Option<i128> {
        None
    }
    fn size_of(&self, _: &str) -> Option<u64> {
        None
    }
}

/// One record being rendered: its bytes and its event's fields.
pub struct Record<'r> {
    pub data: &'r [u8],
    pub format: &'r Format,
}

impl<'r> Record<'r> {
    fn field_at(&self, i: usize) -> Option<&'r FieldDesc> {
        let format: &'r Format = self.format;
        format.fields.iter().chain(common_fields()).nth(i)
    }

    fn field(&self, name: &str) -> Option<&'r FieldDesc> {
        let format: &'r Format = self.format;
        format
            .fields
            .iter()
            .chain(common_fields().iter())
            .find(|f| f.name == name)
    }

    /// Element `i` of fixed array field `f` (`T name[N]`), an integer of the field's
    /// signedness and `size / N` bytes; `None` when `f` is no such array.
    fn element(&self, f: &FieldDesc, i: i128) -> Option<Val<'r>> {
        let (_, dims) = f.ty.split_once('[')?;
        let n: u32 = match dims.strip_suffix(']')?.trim().parse() {
            Ok(n) => n,
            Err(_) => f.len?,
        };
        let size = f.size.checked_div(n)?;
        if size == 0 || size > 8 || f.size % n != 0 {
            return None;
        }
        let i = u32::try_from(i).ok().filter(|&i| i < n)?;
        let at = (f.offset as usize).checked_add((i * size) as usize)?;
        let bytes = self.data.get(at..at + size as usize)?;
        Some(Val::Int(int_of(bytes, f.signed)))
    }

    /// A field's value: an integer by its size and signedness, a string for a char array or a
    /// dynamic string, the bytes for any other array.
    fn value(&self, f: &FieldDesc) -> Option<Val<'r>> {
        let data: &'r [u8] = self.data;
        let at = f.offset as usize;
        if f.is_dynamic() {
            return Some(Val::Str(Cow::Borrowed(until_nul(f.dynamic_bytes(data)?))));
        }
        let bytes = data.get(at..at.checked_add(f.size as usize)?)?;
        if f.ty.contains('[') || f.size > 8 || f.size == 0 {
            let rest = if f.size == 0 { data.get(at..)? } else { bytes };
            return Some(Val::Str(Cow::Borrowed(until_nul(rest))));
        }
        Some(Val::Int(int_of(bytes, f.signed)))
    }
}

/// A little-endian integer of 1 to 8 bytes.
fn int_of(bytes: &[u8], signed: bool) -> i128 {
    let mut word = [0u8; 8];
    let n = bytes.len().min(8);
    word[..n].copy_from_slice(&bytes[..n]);
    let raw = u64::from_le_bytes(word);
    let bits = n as u32 * 8;
    if signed && bits > 0 && bits < 64 && raw >> (bits - 1) & 1 == 1 {
        i128::from(raw) - (1i128 << bits)
    } else if signed && bits == 64 {
        i128::from(raw as i64)
    } else {
        i128::from(raw)
    }
}

/// The kernel's integer typedefs that print formats cast to: (name, bytes, signed), as x86_64
/// and arm64 define them.
const TYPEDEFS: [(&str, u32, bool); 30] = [
    ("size_t", 8, false),
    ("ssize_t", 8, true),
    ("loff_t", 8, true),
    ("off_t", 8, true),
    ("pid_t", 4, true),
    ("gfp_t", 4, false),
    ("dev_t", 4, false),
    ("sector_t", 8, false),
    ("blkcnt_t", 8, false),
    ("ino_t", 8, false),
    ("uid_t", 4, false),
    ("gid_t", 4, false),
    ("umode_t", 2, false),
    ("time64_t", 8, true),
    ("ktime_t", 8, true),
    ("phys_addr_t", 8, false),
    ("dma_addr_t", 8, false),
    ("pgoff_t", 8, false),
    ("fmode_t", 4, false),
    ("slab_flags_t", 4, false),
    ("blk_opf_t", 4, false),
    ("vm_fault_t", 4, false),
    ("uint8_t", 1, false),
    ("uint16_t", 2, false),
    ("uint32_t", 4, false),
    ("uint64_t", 8, false),
    ("int8_t", 1, true),
    ("int16_t", 2, true),
    ("int32_t", 4, true),
    ("int64_t", 8, true),
];

fn is_identifier(w: &str) -> bool {
    w.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn until_nul(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// Why a record could not be rendered by its format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RenderError(pub String);

impl PrintFmt {
    /// The record rendered as the kernel's `trace` file shows it.
    pub fn render(&self, rec: &Record<'_>, syms: &dyn Resolve) -> Result<Vec<u8>, RenderError> {
        let mut out = Vec::new();
        self.render_into(rec, syms, &mut out)?;
        Ok(out)
    }

    /// [`PrintFmt::render`], appended to `out`; on an error `out` may hold part of the line.
    pub fn render_into(
        &self,
        rec: &Record<'_>,
        syms: &dyn Resolve,
        out: &mut Vec<u8>,
    ) -> Result<(), RenderError> {
        let mut args = self.args.iter();
        printf_into(
            out,
            &self.format,
            |_| {
                let e = args
                    .next()
                    .ok_or_else(|| RenderError("fewer arguments than conversions".into()))?;
                eval(e, rec, syms, 0)
            },
            syms,
        )?;
        if args.next().is_some() {
            return Err(RenderError("more arguments than conversions".into()));
        }
        Ok(())
    }
}

/// What a conversion asks of its argument source: a `*` width, or the value of a conversion
/// (its letter, its size in bytes, its `%p` extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    Width,
    Value {
        conv: u8,
        size: u32,
        pointer: Option<u8>,
    },
}

/// `format` rendered with the kernel's vsprintf rules, each argument from `arg`, trailing
/// newlines dropped (the trace file ends each line itself); at most [`MAX_LINE`] bytes.
pub fn printf<'a>(
    format: &[u8],
    arg: impl FnMut(Want) -> Result<Val<'a>, RenderError>,
    syms: &dyn Resolve,
) -> Result<Vec<u8>, RenderError> {
    let mut out = Vec::new();
    printf_into(&mut out, format, arg, syms)?;
    Ok(out)
}

/// [`printf`], appended to `out`.
pub fn printf_into<'a>(
    out: &mut Vec<u8>,
    format: &[u8],
    mut arg: impl FnMut(Want) -> Result<Val<'a>, RenderError>,
    syms: &dyn Resolve,
) -> Result<(), RenderError> {
    let f = format;
    let start = out.len();
    let mut i = 0;
    while i < f.len() && out.len() - start < MAX_LINE {
        if f[i] != b'%' {
            out.push(f[i]);
            i += 1;
            continue;
        }
        if f.get(i + 1) == Some(&b'%') {
            out.push(b'%');
            i += 2;
            continue;
        }
        let (spec, next) = Spec::parse(f, i + 1);
        i = next;
        let width = match spec.width {
            Width::Star => Some(arg(Want::Width)?.int().clamp(-4096, 4096) as i64),
            Width::Fixed(w) => Some(w as i64),
            Width::None => None,
        };
        let v = arg(Want::Value {
            conv: spec.conv,
            size: spec.size,
            pointer: spec.pointer,
        })?;
        spec.write(out, v, width, syms);
    }
    out.truncate(start + MAX_LINE);
    while out.len() > start && out.last() == Some(&b'\n') {
        out.pop();
    }
    Ok(())
}

fn eval<'a>(
    e: &'a Expr,
    rec: &Record<'a>,
    syms: &dyn Resolve,
    depth: usize,
) -> Result<Val<'a>, RenderError> {
    if depth > MAX_DEPTH {
        return Err(RenderError("nested too deep".into()));
    }
    let ev = |e: &'a Expr| eval(e, rec, syms, depth + 1);
    Ok(match e {
        Expr::Int(i) => Val::Int(*i),
        Expr::Str(s) => Val::Str(Cow::Borrowed(s)),
        Expr::Field(name) => {
            let f = rec
                .field(name)
                .ok_or_else(|| RenderError(format!("no field {name}")))?;
            rec.value(f)
                .ok_or_else(|| RenderError(format!("{name} is past the record's end")))?
        }
        Expr::FieldAt(i) => {
            let f = rec
                .field_at(*i)
                .ok_or_else(|| RenderError(format!("no field number {i}")))?;
            rec.value(f)
                .ok_or_else(|| RenderError(format!("{} is past the record's end", f.name)))?
        }
        Expr::Unary(op, a) => {
            let v = ev(a)?.int();
            Val::Int(match op {
                b'-' => v.wrapping_neg(),
                b'!' => i128::from(v == 0),
                _ => !v & u64::MAX as i128,
            })
        }
        Expr::Binary(op @ ("+" | "-"), a, b) if pointee(a).is_some() => {
            // C's pointer arithmetic: the integer counts elements of the pointed-to type.
            let ty = pointee(a).unwrap_or_default();
            let size = syms
                .size_of(ty)
                .ok_or_else(|| RenderError(format!("the size of {ty} is unknown")))?;
            let (x, y) = (ev(a)?.int(), ev(b)?.int());
            let y = y.wrapping_mul(i128::from(size));
            Val::Int(if *op == "+" {
                x.wrapping_add(y)
            } else {
                x.wrapping_sub(y)
            })
        }
        Expr::Binary(op, a, b) => {
            let (x, y) = (ev(a)?.int(), ev(b)?.int());
            Val::Int(match *op {
                "||" => i128::from(x != 0 || y != 0),
                "&&" => i128::from(x != 0 && y != 0),
                "|" => x | y,
                "^" => x ^ y,
                "&" => x & y,
                "==" => i128::from(x == y),
                "!=" => i128::from(x != y),
                "<" => i128::from(x < y),
                ">" => i128::from(x > y),
                "<=" => i128::from(x <= y),
                ">=" => i128::from(x >= y),
                "<<" => x.checked_shl(y.clamp(0, 127) as u32).unwrap_or(0),
                ">>" => x >> y.clamp(0, 127),
                "+" => x.wrapping_add(y),
                "-" => x.wrapping_sub(y),
                "*" => x.wrapping_mul(y),
                "/" | "%" if y == 0 => return Err(RenderError("division by zero".into())),
                "/" => x.wrapping_div(y),
                _ => x.wrapping_rem(y),
            })
        }
        Expr::Cond(c, a, b) => {
            if ev(c)?.int() != 0 {
                ev(a)?
            } else {
                ev(b)?
            }
        }
        Expr::Cast(Cast::Pointer(_) | Cast::Other, a) => ev(a)?,
        Expr::Name(name) => Val::Int(syms.variable(name).ok_or_else(|| {
            RenderError(format!("the name {name} is not a variable kcrash can read"))
        })?),
        Expr::Cast(Cast::Int(size, signed), a) => match ev(a)? {
            Val::Int(v) => Val::Int(narrow(v, *size, *signed)),
            s => s,
        },
        Expr::Index(a, i) => {
            let i = ev(i)?.int();
            // An array field's element by its own size (`REC->args[1]` of `unsigned long
            // args[6]`); any other value indexed byte by byte.
            let element = match a.as_ref() {
                Expr::Field(name) => rec.field(name).and_then(|f| rec.element(f, i)),
                Expr::FieldAt(at) => rec.field_at(*at).and_then(|f| rec.element(f, i)),
                _ => None,
            };
            match element {
                Some(v) => v,
                None => {
                    let bytes = ev(a)?.into_bytes();
                    Val::Int(i128::from(
                        *usize::try_from(i)
                            .ok()
                            .and_then(|i| bytes.get(i))
                            .unwrap_or(&0),
                    ))
                }
            }
        }
        Expr::Pair(..) => return Err(RenderError("a { value, name } pair out of place".into())),
        Expr::Call(name, args) => call(name, args, rec, syms, depth)?,
    })
}

/// The struct an expression points at, when it is a cast to a pointer to one (possibly in
/// parentheses, which the parser has already dropped).
fn pointee(e: &Expr) -> Option<&str> {
    match e {
        Expr::Cast(Cast::Pointer(ty), _) => Some(ty),
        _ => None,
    }
}

fn narrow(v: i128, size: u32, signed: bool) -> i128 {
    let bits = size * 8;
    let masked = v & ((1i128 << bits) - 1);
    if signed && masked >> (bits - 1) & 1 == 1 {
        masked - (1i128 << bits)
    } else {
        masked
    }
}

fn call<'a>(
    name: &str,
    args: &'a [Expr],
    rec: &Record<'a>,
    syms: &dyn Resolve,
    depth: usize,
) -> Result<Val<'a>, RenderError> {
    let ev = |e: &'a Expr| eval(e, rec, syms, depth + 1);
    let arg = |i: usize| {
        args.get(i)
            .ok_or_else(|| RenderError(format!("{name} needs more arguments")))
    };
    // A pair whose value names what kcrash cannot resolve (an enumerator) matches nothing: the
    // value then prints as a number, as __print_symbolic prints one it has no name for.
    // Each pair's value (None when it cannot be had) and its name's expression.
    let pairs = |from: usize| {
        args[from.min(args.len())..].iter().map(move |p| match p {
            Expr::Pair(v, s) => Ok((ev(v).ok().map(|v| v.int()), s.as_ref())),
            _ => Err(RenderError(format!("{name}: expected {{ value, name }}"))),
        })
    };
    Ok(match name {
        "__get_str" | "__get_dynamic_array" | "__get_rel_str" => ev(arg(0)?)?,
        "__get_dynamic_array_len" => Val::Int(ev(arg(0)?)?.into_bytes().len() as i128),
        "__print_symbolic" | "__print_symbolic_u64" => {
            let v = ev(arg(0)?)?.int();
            let mut found = None;
            for pair in pairs(1) {
                let (k, s) = pair?;
                if k == Some(v) {
                    found = Some(ev(s)?);
                    break;
                }
            }
            found.unwrap_or_else(|| Val::owned(format!("0x{:x}", v as u64).into_bytes()))
        }
        "__print_flags" | "__print_flags_u64" => {
            let mut v = ev(arg(0)?)?.int() as u64;
            let delim = ev(arg(1)?)?.into_bytes();
            let mut out: Vec<u8> = Vec::new();
            for pair in pairs(2) {
                let (Some(mask), s) = pair? else { continue };
                let mask = mask as u64;
                if mask != 0 && v & mask == mask {
                    if !out.is_empty() {
                        out.extend_from_slice(&delim);
                    }
                    out.extend_from_slice(&ev(s)?.into_bytes());
                    v &= !mask;
                }
            }
            if v != 0 {
                if !out.is_empty() {
                    out.extend_from_slice(&delim);
                }
                out.extend(format!("0x{v:x}").bytes());
            }
            Val::owned(out)
        }
        "__print_hex" | "__print_hex_str" => {
            let bytes = ev(arg(0)?)?.into_bytes();
            let len = ev(arg(1)?)?.int().clamp(0, bytes.len() as i128) as usize;
            let sep = if name == "__print_hex" { " " } else { "" };
            let hex: Vec<String> = bytes[..len].iter().map(|b| format!("{b:02x}")).collect();
            Val::owned(hex.join(sep).into_bytes())
        }
        other => {
            return Err(RenderError(format!(
                "the helper {other} is not known to kcrash"
            )))
        }
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Width {
    None,
    Fixed(usize),
    Star,
}

/// One conversion of the format: the kernel's vsprintf subset trace formats use.
#[derive(Debug, Clone, PartialEq)]
struct Spec {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    alt: bool,
    width: Width,
    precision: Option<usize>,
    /// Bytes of the argument: 1 (hh), 2 (h), 4, 8 (l, ll, z).
    size: u32,
    conv: u8,
    /// `%p`'s extension letter (`s`, `S`, `f`, `F`, `K`, ...).
    pointer: Option<u8>,
}

impl Spec {
    fn parse(f: &[u8], mut i: usize) -> (Spec, usize) {
        let mut s = Spec {
            left: false,
            zero: false,
            plus: false,
            space: false,
            alt: false,
            width: Width::None,
            precision: None,
            size: 4,
            conv: b'd',
            pointer: None,
        };
        while let Some(&b) = f.get(i) {
            match b {
                b'-' => s.left = true,
                b'0' => s.zero = true,
                b'+' => s.plus = true,
                b' ' => s.space = true,
                b'#' => s.alt = true,
                _ => break,
            }
            i += 1;
        }
        if f.get(i) == Some(&b'*') {
            s.width = Width::Star;
            i += 1;
        } else {
            let start = i;
            while f.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i > start {
                let w = std::str::from_utf8(&f[start..i])
                    .ok()
                    .and_then(|t| t.parse().ok());
                s.width = Width::Fixed(w.unwrap_or(0).min(4096));
            }
        }
        if f.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while f.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            let p = std::str::from_utf8(&f[start..i])
                .ok()
                .and_then(|t| t.parse().ok());
            s.precision = Some(p.unwrap_or(0).min(4096));
        }
        while let Some(&b) = f.get(i) {
            s.size = match b {
                b'h' if s.size == 2 => 1,
                b'h' => 2,
                b'l' | b'z' | b'L' | b'j' | b't' | b'q' => 8,
                _ => break,
            };
            i += 1;
        }
        if let Some(&c) = f.get(i) {
            s.conv = c;
            i += 1;
            if c == b'p' {
                if let Some(&ext) = f.get(i).filter(|b| b.is_ascii_alphanumeric()) {
                    s.pointer = Some(ext);
                    i += 1;
                    // `%pI4`, `%pi6` and kin: their digit too.
                    if matches!(ext, b'I' | b'i') && f.get(i).is_some_and(u8::is_ascii_digit) {
                        i += 1;
                    }
                }
            }
        }
        (s, i)
    }

    /// Appends `v` converted, padded to `width` (a negative one pads on the right).
    fn write(&self, out: &mut Vec<u8>, v: Val<'_>, width: Option<i64>, syms: &dyn Resolve) {
        let (left, width) = match width {
            Some(w) if w < 0 => (true, w.unsigned_abs() as usize),
            Some(w) => (self.left, w as usize),
            None => (self.left, 0),
        };
        let zero = self.zero && !left;
        let start = out.len();
        let precise = |out: &mut Vec<u8>, b: &[u8]| {
            out.extend_from_slice(&b[..self.precision.map_or(b.len(), |p| p.min(b.len()))]);
        };
        match (self.conv, v) {
            (b's', Val::Int(addr)) => {
                // A pointer to a string in the kernel: read there, or its address as trace-cmd
                // prints one it cannot find.
                let addr = addr as u64;
                match syms.string(addr) {
                    Some(b) => precise(out, &b),
                    None => precise(out, format!("{addr:x}").as_bytes()),
                }
            }
            (b's', Val::Str(b)) => precise(out, &b),
            (b'c', v) => out.push(v.int() as u8),
            (b'p', v) => {
                let addr = v.int() as u64;
                let symbol = match self.pointer {
                    Some(b's' | b'f' | b'S' | b'F' | b'B') => syms.symbol(addr),
                    _ => None,
                };
                let _ = match (self.pointer, symbol) {
                    (Some(b's' | b'f'), Some((name, _, _))) => out.write_all(name.as_bytes()),
                    (_, Some((name, off, _))) => write!(out, "{name}+0x{off:x}"),
                    (None, None) if addr == 0 => out.write_all(b"(nil)"),
                    _ => write!(out, "0x{addr:x}"),
                };
            }
            (c, v) => {
                let n = narrow(v.int(), self.size, matches!(c, b'd' | b'i'));
                let sign: &[u8] = match (c, n < 0) {
                    (b'd' | b'i', true) => b"-",
                    (b'd' | b'i', false) if self.plus => b"+",
                    (b'd' | b'i', false) if self.space => b" ",
                    _ => b"",
                };
                let prefix: &[u8] = match (c, self.alt && n != 0) {
                    (b'x', true) => b"0x",
                    (b'X', true) => b"0X",
                    (b'o', true) => b"0",
                    _ => b"",
                };
                out.extend_from_slice(sign);
                out.extend_from_slice(prefix);
                let digits_at = out.len();
                let u = n as u64 & mask(self.size);
                let _ = match c {
                    b'x' => write!(out, "{u:x}"),
                    b'X' => write!(out, "{u:X}"),
                    b'o' => write!(out, "{u:o}"),
                    b'u' => write!(out, "{u}"),
                    _ => write!(out, "{}", n.unsigned_abs()),
                };
                // Precision is the least count of digits; a zero flag without one pads the
                // digits to the width.
                let digits = out.len() - digits_at;
                let least = match self.precision {
                    Some(p) => p,
                    None if zero => width.saturating_sub(out.len() - start),
                    None => 0,
                };
                let zeros = if self.precision.is_some() {
                    least.saturating_sub(digits)
                } else {
                    least
                };
                out.splice(digits_at..digits_at, std::iter::repeat_n(b'0', zeros));
            }
        }
        let pad = width.saturating_sub(out.len() - start);
        if left {
            out.extend(std::iter::repeat_n(b' ', pad));
        } else {
            out.splice(start..start, std::iter::repeat_n(b' ', pad));
        }
    }
}

fn mask(size: u32) -> u64 {
    if size >= 8 {
        u64::MAX
    } else {
        (1u64 << (size * 8)) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sched_switch's print format as Debian's 6.1 holds it, rendered for a record as the
    /// kernel's trace file shows it.
    #[test]
    fn sched_switch_renders_as_the_kernel_renders_it() {
        let fmt = br#""prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d", REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1), "|", { 0x00000001, "S" }, { 0x00000002, "D" }, { 0x00000004, "T" }, { 0x00000008, "t" }, { 0x00000010, "X" }, { 0x00000020, "Z" }, { 0x00000040, "P" }, { 0x00000080, "I" }) : "R", REC->prev_state & (((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) ? "+" : "", REC->next_comm, REC->next_pid, REC->next_prio"#;
        let format = Format {
            id: 300,
            system: "sched".into(),
            name: "sched_switch".into(),
            fields: vec![
                FieldDesc::new("prev_comm", "char[16]", 8, 16, true),
                FieldDesc::new("prev_pid", "pid_t", 24, 4, true),
                FieldDesc::new("prev_prio", "int", 28, 4, true),
                FieldDesc::new("prev_state", "long", 32, 8, true),
                FieldDesc::new("next_comm", "char[16]", 40, 16, true),
                FieldDesc::new("next_pid", "pid_t", 56, 4, true),
                FieldDesc::new("next_prio", "int", 60, 4, true),
            ],
            fields_unknown: None,
            print_fmt: fmt.to_vec(),
        };
        let mut data = vec![0u8; 64];
        data[8..12].copy_from_slice(b"init");
        data[24..28].copy_from_slice(&1i32.to_le_bytes());
        data[28..32].copy_from_slice(&120i32.to_le_bytes());
        data[32..40].copy_from_slice(&1i64.to_le_bytes());
        data[40..49].copy_from_slice(b"swapper/1");
        data[60..64].copy_from_slice(&120i32.to_le_bytes());
        let p = PrintFmt::parse(fmt).unwrap();
        let rec = Record {
            data: &data,
            format: &format,
        };
        assert_eq!(
            String::from_utf8(p.render(&rec, &NoKernel).unwrap()).unwrap(),
            "prev_comm=init prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120"
        );
        // A running task (state 0) shows R; preempted (the bit above the states) R+.
        data[32..40].copy_from_slice(&0x100i64.to_le_bytes());
        let rec = Record {
            data: &data,
            format: &format,
        };
        let line = String::from_utf8(p.render(&rec, &NoKernel).unwrap()).unwrap();
        assert!(line.contains("prev_state=R+ ==>"), "{line}");
    }

    #[test]
    fn symbolic_values_widths_and_unknown_helpers() {
        let format = Format {
            id: 1,
            system: "irq".into(),
            name: "softirq_entry".into(),
            fields: vec![FieldDesc::new("vec", "unsigned int", 8, 4, false)],
            fields_unknown: None,
            print_fmt: Vec::new(),
        };
        let mut data = vec![0u8; 12];
        data[8] = 3;
        let rec = Record {
            data: &data,
            format: &format,
        };
        let p = PrintFmt::parse(br#""vec=%u [action=%s] %03d|%-4x|", REC->vec, __print_symbolic(REC->vec, { 0, "HI" }, { 3, "NET_RX" }), REC->vec, REC->vec"#).unwrap();
        assert_eq!(
            p.render(&rec, &NoKernel).unwrap(),
            b"vec=3 [action=NET_RX] 003|3   |"
        );
        let unknown = PrintFmt::parse(br#""%s", __get_sockaddr(REC->vec)"#).unwrap();
        assert!(unknown.render(&rec, &NoKernel).is_err());
        // Nesting past the bound is refused at parse time.
        let deep = format!("\"%d\", {}1{}", "(".repeat(200), ")".repeat(200));
        assert!(PrintFmt::parse(deep.as_bytes()).is_err());
    }

    /// A kernel with one variable, one struct, one string and one symbol.
    struct OneOfEach;

    impl Resolve for OneOfEach {
        fn symbol(&self, addr: u64) -> Option<(String, u64, u64)> {
            (0x1000..0x1100)
                .contains(&addr)
                .then(|| ("tick_sched_timer".into(), addr - 0x1000, 0x100))
        }
        fn string(&self, addr: u64) -> Option<Vec<u8>> {
            (addr == 0x2000).then(|| b"Start scheduler-tick".to_vec())
        }
        fn variable(&self, name: &str) -> Option<i128> {
            (name == "vmemmap_base").then_some(0xffff_ea00_0000_0000)
        }
        fn size_of(&self, ty: &str) -> Option<u64> {
            (ty == "struct page").then_some(64)
        }
    }

    /// What Debian 6.1's formats ask beyond fields: array elements by their size, a string
    /// pointer read from memory, C pointer arithmetic over a kernel variable, `__get_str` of a
    /// field named bare, pointers as trace-cmd prints them, constant masks folded once, and a
    /// `__print_symbolic` pair whose value is an unknown name left unmatched.
    #[test]
    fn kernel_names_arrays_and_pointers_render_as_the_kernel_means_them() {
        let format = Format {
            id: 7,
            system: "test".into(),
            name: "event".into(),
            fields: vec![
                FieldDesc::new("args", "unsigned long[3]", 8, 24, false),
                FieldDesc::new("s", "const char *", 32, 8, false),
                FieldDesc::new("pfn", "unsigned long", 40, 8, false),
                FieldDesc::new("name", "__data_loc char[]", 48, 4, true),
                FieldDesc::new("fn", "void *", 52, 8, false),
                FieldDesc::new("mode", "int", 60, 4, true),
            ],
            fields_unknown: None,
            print_fmt: Vec::new(),
        };
        let mut data = vec![0u8; 72];
        for (i, v) in [3u64, 0x3eb5_c070, 0x8000].iter().enumerate() {
            data[8 + i * 8..16 + i * 8].copy_from_slice(&v.to_le_bytes());
        }
        data[32..40].copy_from_slice(&0x2000u64.to_le_bytes());
        data[40..48].copy_from_slice(&0xa8abu64.to_le_bytes());
        data[48..52].copy_from_slice(&(64u32 | 8 << 16).to_le_bytes());
        data[52..60].copy_from_slice(&0x1010u64.to_le_bytes());
        data[60..64].copy_from_slice(&1i32.to_le_bytes());
        data[64..72].copy_from_slice(b"kmalloc\0");
        let rec = Record {
            data: &data,
            format: &format,
        };
        let render = |text: &str| {
            let p = PrintFmt::parse(text.as_bytes()).unwrap().bind(&format);
            String::from_utf8(p.render(&rec, &OneOfEach).unwrap()).unwrap()
        };
        assert_eq!(
            render(r#""NR (%lx, %lx, %lx)", REC->args[0], REC->args[1], REC->args[2]"#),
            "NR (3, 3eb5c070, 8000)"
        );
        assert_eq!(render(r#""%s", REC->s"#), "Start scheduler-tick");
        assert_eq!(
            render(r#""page=%p", (((struct page *)vmemmap_base) + (REC->pfn))"#),
            "page=0xffffea00002a2ac0"
        );
        assert_eq!(render(r#""name=%s", __get_str(name)"#), "name=kmalloc");
        assert_eq!(
            render(r#""%pS %ps %p %p", REC->fn, REC->fn, REC->fn, REC->mode - 1"#),
            "tick_sched_timer+0x10 tick_sched_timer 0x1010 (nil)"
        );
        assert_eq!(
            render(
                r#""mode=%s", __print_symbolic(REC->mode, { HRTIMER_MODE_ABS, "ABS" }, { 0x1 | 0x0, "REL" })"#
            ),
            "mode=REL"
        );
        assert_eq!(
            render(r#""mode=%s", __print_symbolic(REC->mode, { HRTIMER_MODE_ABS, "ABS" })"#),
            "mode=0x1"
        );
        // A flag mask written as casts and ORs of literals: folded, then matched.
        let p = PrintFmt::parse(
            br#""%s", __print_flags(REC->mode, "|", { (( gfp_t)((( gfp_t)0x1u)|(( gfp_t)0x0u))), "ONE" })"#,
        )
        .unwrap()
        .bind(&format);
        assert!(
            p.args.iter().all(|a| !format!("{a:?}").contains("Cast")),
            "{:?}",
            p.args
        );
        assert_eq!(p.render(&rec, &OneOfEach).unwrap(), b"ONE");
        // What the kernel cannot be asked about leaves the event unrendered, never guessed.
        let p = PrintFmt::parse(br#""page=%p", ((struct folio *)vmemmap_base) + REC->pfn"#)
            .unwrap()
            .bind(&format);
        assert!(p.render(&rec, &OneOfEach).is_err());
        let p = PrintFmt::parse(br#""%lu", max_pfn"#).unwrap().bind(&format);
        assert!(p.render(&rec, &OneOfEach).is_err());
    }

    #[test]
    fn a_masked_flag_word_shows_only_the_flags_the_mask_keeps() {
        let fmt = br#""cpu=%u idx=%u flags=%s", REC->flags & 0x0003FFFF, REC->flags >> 22, __print_flags(REC->flags & (0x00040000 | 0x00080000 | 0x00100000 | 0x00200000), "|", { 0x00040000, "M" }, { 0x00080000, "D" }, { 0x00100000, "P" }, { 0x00200000, "I" })"#;
        let format = Format {
            id: 9,
            system: "timer".into(),
            name: "timer_start".into(),
            fields: vec![FieldDesc::new("flags", "unsigned int", 8, 4, false)],
            fields_unknown: None,
            print_fmt: fmt.to_vec(),
        };
        let render = |flags: u32| {
            let mut data = vec![0u8; 12];
            data[8..12].copy_from_slice(&flags.to_le_bytes());
            let rec = Record {
                data: &data,
                format: &format,
            };
            let p = PrintFmt::parse(fmt).unwrap().bind(&format);
            String::from_utf8(p.render(&rec, &NoKernel).unwrap()).unwrap()
        };
        assert_eq!(render(12 << 22), "cpu=0 idx=12 flags=");
        assert_eq!(render((12 << 22) | 0x80001), "cpu=1 idx=12 flags=D");
        assert_eq!(render(0x240000), "cpu=0 idx=0 flags=M|I");
    }

    #[test]
    fn a_parenthesised_cast_is_an_operand_and_typedefs_keep_their_width() {
        let fmt = br#""ofs=%lld-%lld", ((loff_t)REC->index) << 12, ((((loff_t)REC->last_index + 1) << 12) - 1)"#;
        let format = Format {
            id: 9,
            system: "filemap".into(),
            name: "mm_filemap_map_pages".into(),
            fields: vec![
                FieldDesc::new("index", "unsigned long", 8, 8, false),
                FieldDesc::new("last_index", "unsigned long", 16, 8, false),
            ],
            fields_unknown: None,
            print_fmt: fmt.to_vec(),
        };
        let mut data = vec![0u8; 24];
        data[8..16].copy_from_slice(&0x1_0000_0180u64.to_le_bytes());
        data[16..24].copy_from_slice(&0x1_0000_0184u64.to_le_bytes());
        let rec = Record {
            data: &data,
            format: &format,
        };
        let p = PrintFmt::parse(fmt).unwrap().bind(&format);
        assert_eq!(
            String::from_utf8(p.render(&rec, &NoKernel).unwrap()).unwrap(),
            format!(
                "ofs={}-{}",
                0x1_0000_0180u64 << 12,
                ((0x1_0000_0184u64 + 1) << 12) - 1
            )
        );
    }
}
