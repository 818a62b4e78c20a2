//! A recursive-descent parser for the C expressions `print` takes: names, literals, `.`, `->`,
//! `[]`, unary `* & - ~ !`, casts, `sizeof`, and the binary operators of C down to `|`.
//!
//! It knows no symbols: `(NAME)x` is taken as a cast when what follows the parenthesis can only
//! start an operand, and `(NAME) - x` as a subtraction, which is how gdb reads them for a NAME
//! that is a type.

use std::fmt;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// A variable: `KLogs`, or a Rust path `hosted::KLogs`.
    Name(String),
    Int(u64),
    /// A character literal: `'S'`.
    Char(u64),
    Member(Box<Expr>, String),
    /// `a->b`.
    Arrow(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// gdb's artificial array `first@count`.
    Repeat(Box<Expr>, Box<Expr>),
    Cast(TypeName, Box<Expr>),
    SizeofType(TypeName),
    SizeofExpr(Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Deref,
    AddrOf,
    Neg,
    BitNot,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Mul,
    Div,
    Rem,
    Add,
    Sub,
    Shl,
    Shr,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
    Ne,
    BitAnd,
    BitXor,
    BitOr,
}

/// A type as written in a cast or `sizeof`: `struct _KLog *`, `unsigned int`, `KLog`,
/// `klog_runtime::ring::KLog`, `*mut u64`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeName {
    /// The name looked up: words joined by one space (`struct _KLog`, `unsigned long`).
    pub base: String,
    /// How many pointers are put on it (`*` in C, `*mut`/`*const`/`&` in Rust).
    pub pointers: usize,
}

impl fmt::Display for TypeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.base)?;
        if self.pointers > 0 {
            write!(f, " {}", "*".repeat(self.pointers))?;
        }
        Ok(())
    }
}

/// The most of an expression an error shows, in characters.
const SHOWN: usize = 80;

/// What is wrong with an expression and where: `pos` is a byte offset into the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub pos: usize,
    pub msg: String,
}

impl ParseError {
    /// The message with the column and the expression, on one line: errors are one line each.
    /// A long expression is shown around the column, control characters escaped.
    pub fn show(&self, input: &str) -> String {
        let col = input
            .get(..self.pos.min(input.len()))
            .map_or(0, |s| s.chars().count());
        let chars: Vec<char> = input.chars().collect();
        let (from, to) = if chars.len() <= SHOWN {
            (0, chars.len())
        } else {
            let from = col.saturating_sub(SHOWN / 2).min(chars.len() - SHOWN);
            (from, from + SHOWN)
        };
        let mut shown: String = chars[from..to]
            .iter()
            .flat_map(|c| c.escape_debug())
            .collect();
        if from > 0 {
            shown.insert(0, '…');
        }
        if to < chars.len() {
            shown.push('…');
        }
        format!("{} at column {} of `{shown}`", self.msg, col + 1)
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at column {})", self.msg, self.pos + 1)
    }
}

impl std::error::Error for ParseError {}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Int(u64),
    Char(u64),
    /// An operator or punctuation: `->`, `<<`, `(`, ...
    Punct(&'static str),
    End,
}

const PUNCTS: &[&str] = &[
    "->", "<<", ">>", "<=", ">=", "==", "!=", "::", "(", ")", "[", "]", ".", "*", "&", "-", "+",
    "~", "!", "/", "%", "<", ">", "^", "|", ",", "@",
];

/// Deepest nesting of parentheses and unary operators; deeper input is refused, not a stack
/// overflow.
const MAX_DEPTH: usize = 256;

/// Most operators in one expression, and most pointers on one type. A chain of them (`1+1+…`,
/// `x[0][0]…`, `a.b.b…`, `T * * …`) is parsed by a loop but makes a tree as deep as it is long,
/// which evaluating, printing and dropping walk by recursion: longer input is refused.
const MAX_OPERATORS: usize = 256;

fn lex(input: &str) -> Result<Vec<(Tok, usize)>, ParseError> {
    let bytes = input.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'$' {
            let start = i;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'$')
            {
                i += 1;
            }
            toks.push((Tok::Ident(input[start..i].to_owned()), start));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
                i += 1;
            }
            toks.push((Tok::Int(number(&input[start..i], start)?), start));
        } else if c == b'\'' {
            let (value, len) = char_literal(&input[i..], i)?;
            toks.push((Tok::Char(value), i));
            i += len;
        } else if let Some(p) = PUNCTS.iter().find(|p| input[i..].starts_with(**p)) {
            toks.push((Tok::Punct(p), i));
            i += p.len();
        } else {
            let ch = input[i..].chars().next().unwrap_or('?');
            return Err(ParseError {
                pos: i,
                msg: format!("unexpected character {ch:?}"),
            });
        }
    }
    toks.push((Tok::End, input.len()));
    Ok(toks)
}

/// A C integer literal: decimal, `0x` hex, `0` octal, `0b` binary, with `u`/`l` suffixes.
fn number(text: &str, pos: usize) -> Result<u64, ParseError> {
    let digits = text.trim_end_matches(['u', 'U', 'l', 'L']);
    let (radix, body) = if let Some(h) = digits.strip_prefix("0x").or(digits.strip_prefix("0X")) {
        (16, h)
    } else if let Some(b) = digits.strip_prefix("0b").or(digits.strip_prefix("0B")) {
        (2, b)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    u64::from_str_radix(body, radix).map_err(|e| ParseError {
        pos,
        msg: format!("invalid number {text:?}: {e}"),
    })
}

/// `'a'`, `'\n'`, `'\0'`, `'\x41'`: the value and the literal's length in bytes.
fn char_literal(text: &str, pos: usize) -> Result<(u64, usize), ParseError> {
    let err = || ParseError {
        pos,
        msg: "invalid character literal".into(),
    };
    let mut chars = text.char_indices().skip(1);
    let (_, c) = chars.next().ok_or_else(err)?;
    let value = if c == '\\' {
        let (_, e) = chars.next().ok_or_else(err)?;
        match e {
            'n' => 10,
            't' => 9,
            'r' => 13,
            '0' => 0,
            '\\' => 92,
            '\'' => 39,
            'x' => {
                let mut v = 0u64;
                let mut any = false;
                while let Some((_, h)) = chars.clone().next().filter(|(_, h)| h.is_ascii_hexdigit())
                {
                    chars.next();
                    v = (v << 4 | u64::from(h.to_digit(16).unwrap_or(0))) & 0xff;
                    any = true;
                }
                if !any {
                    return Err(err());
                }
                v
            }
            _ => return Err(err()),
        }
    } else {
        u64::from(u32::from(c))
    };
    match chars.next() {
        Some((at, '\'')) => Ok((value, at + 1)),
        _ => Err(err()),
    }
}

/// C words that make up a type name, never a variable.
const TYPE_WORDS: &[&str] = &[
    "struct", "union", "enum", "const", "volatile", "unsigned", "signed", "char", "short", "int",
    "long", "void", "_Bool", "float", "double",
];

struct Parser {
    toks: Vec<(Tok, usize)>,
    at: usize,
    depth: usize,
    operators: usize,
}

/// Parses a whole expression.
pub fn parse_expr(input: &str) -> Result<Expr, ParseError> {
    let mut p = Parser::new(input)?;
    let e = p.expr()?;
    p.finish()?;
    Ok(e)
}

/// Parses `input` as a type name alone (`struct _KLog *`, `KLog`), for `whatis`/`ptype`/`struct`;
/// `None` when it is not one.
pub fn parse_type(input: &str) -> Option<TypeName> {
    let mut p = Parser::new(input).ok()?;
    let t = p.type_name().ok()??;
    p.finish().ok()?;
    Some(t)
}

impl Parser {
    fn new(input: &str) -> Result<Parser, ParseError> {
        Ok(Parser {
            toks: lex(input)?,
            at: 0,
            depth: 0,
            operators: 0,
        })
    }

    fn peek(&self) -> &Tok {
        self.peek_at(0)
    }

    fn peek_at(&self, n: usize) -> &Tok {
        self.toks
            .get(self.at + n)
            .or(self.toks.last())
            .map_or(&Tok::End, |(t, _)| t)
    }

    fn pos(&self) -> usize {
        self.toks
            .get(self.at)
            .or(self.toks.last())
            .map_or(0, |(_, p)| *p)
    }

    fn bump(&mut self) -> Tok {
        let t = self.peek().clone();
        if self.at < self.toks.len() {
            self.at += 1;
        }
        t
    }

    fn is(&self, punct: &str) -> bool {
        matches!(self.peek(), Tok::Punct(p) if *p == punct)
    }

    fn eat(&mut self, punct: &str) -> bool {
        let yes = self.is(punct);
        if yes {
            self.bump();
        }
        yes
    }

    fn error<T>(&self, msg: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError {
            pos: self.pos(),
            msg: msg.into(),
        })
    }

    fn expect(&mut self, punct: &str) -> Result<(), ParseError> {
        if self.eat(punct) {
            Ok(())
        } else {
            self.error(format!("expected `{punct}`, found {}", self.describe()))
        }
    }

    fn describe(&self) -> String {
        match self.peek() {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(n) | Tok::Char(n) => format!("`{n}`"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::End => "the end".into(),
        }
    }

    fn finish(&mut self) -> Result<(), ParseError> {
        match self.peek() {
            Tok::End => Ok(()),
            _ => self.error(format!(
                "unexpected {} after the expression",
                self.describe()
            )),
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.error("expression nested too deeply");
        }
        Ok(())
    }

    /// Counts one more operator (or pointer) of the expression.
    fn operator(&mut self) -> Result<(), ParseError> {
        self.operators += 1;
        if self.operators > MAX_OPERATORS {
            return self.error(format!(
                "more than {MAX_OPERATORS} operators in one expression"
            ));
        }
        Ok(())
    }

    /// Binary operators by precedence climbing, loosest first; gdb's `@` is looser than all.
    fn expr(&mut self) -> Result<Expr, ParseError> {
        let mut e = self.binary(0)?;
        while self.eat("@") {
            self.operator()?;
            e = Expr::Repeat(Box::new(e), Box::new(self.binary(0)?));
        }
        Ok(e)
    }

    fn binary(&mut self, level: usize) -> Result<Expr, ParseError> {
        const LEVELS: &[&[(&str, BinOp)]] = &[
            &[("|", BinOp::BitOr)],
            &[("^", BinOp::BitXor)],
            &[("&", BinOp::BitAnd)],
            &[("==", BinOp::Eq), ("!=", BinOp::Ne)],
            &[
                ("<=", BinOp::Le),
                (">=", BinOp::Ge),
                ("<", BinOp::Lt),
                (">", BinOp::Gt),
            ],
            &[("<<", BinOp::Shl), (">>", BinOp::Shr)],
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
            &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Rem)],
        ];
        let Some(ops) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut lhs = self.binary(level + 1)?;
        'outer: loop {
            for (punct, op) in *ops {
                if self.eat(punct) {
                    self.operator()?;
                    let rhs = self.binary(level + 1)?;
                    lhs = Expr::Binary(*op, Box::new(lhs), Box::new(rhs));
                    continue 'outer;
                }
            }
            return Ok(lhs);
        }
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        self.enter()?;
        let e = self.unary_inner();
        self.depth -= 1;
        e
    }

    fn unary_inner(&mut self) -> Result<Expr, ParseError> {
        const OPS: &[(&str, UnOp)] = &[
            ("*", UnOp::Deref),
            ("&", UnOp::AddrOf),
            ("-", UnOp::Neg),
            ("~", UnOp::BitNot),
            ("!", UnOp::Not),
        ];
        for (punct, op) in OPS {
            if self.eat(punct) {
                return Ok(Expr::Unary(*op, Box::new(self.unary()?)));
            }
        }
        if self.eat("+") {
            return self.unary();
        }
        if matches!(self.peek(), Tok::Ident(s) if s == "sizeof") {
            self.bump();
            if self.is("(") {
                let save = self.at;
                self.bump();
                if let Some(t) = self.type_name()? {
                    if self.eat(")") {
                        return Ok(Expr::SizeofType(t));
                    }
                }
                self.at = save;
            }
            return Ok(Expr::SizeofExpr(Box::new(self.unary()?)));
        }
        if self.is("(") {
            if let Some(cast) = self.try_cast()? {
                return Ok(cast);
            }
        }
        self.postfix()
    }

    /// `( TYPE ) operand`, if the parenthesis holds a type; otherwise nothing is consumed.
    fn try_cast(&mut self) -> Result<Option<Expr>, ParseError> {
        let save = self.at;
        self.bump();
        let Some(t) = self.type_name()? else {
            self.at = save;
            return Ok(None);
        };
        if !self.eat(")") {
            self.at = save;
            return Ok(None);
        }
        // `(x)` alone is a parenthesized name unless a type word or a pointer says otherwise, or
        // an operand follows that no binary operator could start.
        let surely_type = t.pointers > 0 || t.base.contains(' ') || is_type_word(&t.base);
        let operand_follows = matches!(self.peek(), Tok::Ident(_) | Tok::Int(_) | Tok::Char(_))
            || self.is("(")
            || self.is("~")
            || self.is("!");
        if surely_type || operand_follows {
            if matches!(self.peek(), Tok::End) || self.is(")") {
                return self.error(format!("expected an expression after the cast to {t}"));
            }
            let operand = self.unary()?;
            return Ok(Some(Expr::Cast(t, Box::new(operand))));
        }
        self.at = save;
        Ok(None)
    }

    /// A type name, or `None` if the tokens here cannot be one (nothing is consumed then).
    fn type_name(&mut self) -> Result<Option<TypeName>, ParseError> {
        let save = self.at;
        let mut pointers = 0;
        // Rust's pointer types put the pointer first: `*mut T`, `*const T`.
        loop {
            if self.is("*")
                && matches!(self.peek_at(1), Tok::Ident(w) if w == "mut" || w == "const")
            {
                self.bump();
                self.bump();
                pointers += 1;
                self.operator()?;
            } else {
                break;
            }
        }
        let mut words: Vec<String> = Vec::new();
        // Rust's reference types are named with their `&` (`&str`, `&[u8]` is not supported):
        // `(&str *)p`.
        if self.is("&")
            && matches!(self.peek_at(1), Tok::Ident(_))
            && matches!(self.peek_at(2), Tok::Punct("*" | ")"))
        {
            self.bump();
            if let Tok::Ident(w) = self.bump() {
                words.push(format!("&{w}"));
            }
        }
        loop {
            match self.peek().clone() {
                Tok::Ident(w) if w == "const" || w == "volatile" => {
                    self.bump();
                }
                Tok::Ident(w) if w == "sizeof" => break,
                Tok::Ident(w) => {
                    let is_word = is_type_word(&w);
                    // After a name that is not a C type word (`KLog`), only type words may follow
                    // (`KLog x` is not a type).
                    if let Some(last) = words.last() {
                        if !is_type_word(last)
                            || (!is_type_word(&w)
                                && !matches!(last.as_str(), "struct" | "union" | "enum"))
                        {
                            break;
                        }
                    }
                    self.bump();
                    let mut name = w;
                    if !is_word {
                        name.push_str(&self.path_rest()?);
                    }
                    words.push(name);
                }
                _ => break,
            }
        }
        if words.is_empty()
            || matches!(
                words.last().map(String::as_str),
                Some("struct" | "union" | "enum")
            )
        {
            self.at = save;
            return Ok(None);
        }
        loop {
            if self.eat("*") {
                pointers += 1;
                self.operator()?;
            } else if matches!(self.peek(), Tok::Ident(w) if w == "const" || w == "volatile") {
                self.bump();
            } else {
                break;
            }
        }
        Ok(Some(TypeName {
            base: words.join(" "),
            pointers,
        }))
    }

    /// The rest of a Rust path or generic name after its first word: `::ring::KLog`,
    /// `<u64>`.
    fn path_rest(&mut self) -> Result<String, ParseError> {
        let mut out = String::new();
        loop {
            if self.is("::") && matches!(self.peek_at(1), Tok::Ident(_)) {
                self.bump();
                if let Tok::Ident(w) = self.bump() {
                    out.push_str("::");
                    out.push_str(&w);
                }
            } else if self.is("<") && self.generic_closes() {
                out.push_str(&self.generic_args()?);
            } else {
                return Ok(out);
            }
        }
    }

    /// Whether the `<` here opens generic arguments closed by a matching `>` before anything
    /// that cannot be in a type.
    fn generic_closes(&self) -> bool {
        let mut depth = 0usize;
        for n in 0.. {
            match self.peek_at(n) {
                Tok::Punct("<") => depth += 1,
                Tok::Punct(">") => {
                    depth -= 1;
                    if depth == 0 {
                        return true;
                    }
                }
                Tok::Punct(">>") => {
                    if depth <= 2 {
                        return depth == 2;
                    }
                    depth -= 2;
                }
                Tok::Ident(_)
                | Tok::Int(_)
                | Tok::Punct("::" | "," | "*" | "&" | "[" | "]" | ";") => {}
                _ => return false,
            }
        }
        false
    }

    /// `<...>` copied as written (spaces after commas), after `generic_closes` said it closes.
    fn generic_args(&mut self) -> Result<String, ParseError> {
        let mut out = String::new();
        let mut depth = 0usize;
        loop {
            match self.bump() {
                Tok::Punct("<") => {
                    depth += 1;
                    out.push('<');
                }
                Tok::Punct(">") => {
                    depth = depth.saturating_sub(1);
                    out.push('>');
                }
                Tok::Punct(">>") => {
                    depth = depth.saturating_sub(2);
                    out.push_str(">>");
                }
                Tok::Punct(",") => out.push_str(", "),
                Tok::Punct(p) => out.push_str(p),
                Tok::Ident(w) => {
                    if out.ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                        out.push(' ');
                    }
                    out.push_str(&w);
                }
                Tok::Int(n) | Tok::Char(n) => out.push_str(&n.to_string()),
                Tok::End => return self.error("unclosed `<`"),
            }
            if depth == 0 {
                return Ok(out);
            }
        }
    }

    fn postfix(&mut self) -> Result<Expr, ParseError> {
        let mut e = self.primary()?;
        loop {
            if self.eat("[") {
                self.operator()?;
                let index = self.expr()?;
                self.expect("]")?;
                e = Expr::Index(Box::new(e), Box::new(index));
            } else if self.eat(".") {
                self.operator()?;
                e = Expr::Member(Box::new(e), self.member_name()?);
            } else if self.eat("->") {
                self.operator()?;
                e = Expr::Arrow(Box::new(e), self.member_name()?);
            } else {
                return Ok(e);
            }
        }
    }

    fn member_name(&mut self) -> Result<String, ParseError> {
        match self.peek().clone() {
            Tok::Ident(w) => {
                self.bump();
                Ok(w)
            }
            // Rust tuple fields: `x.0` is DWARF's `__0`.
            Tok::Int(n) => {
                self.bump();
                Ok(format!("__{n}"))
            }
            _ => self.error(format!("expected a member name, found {}", self.describe())),
        }
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        match self.peek().clone() {
            Tok::Int(n) => {
                self.bump();
                Ok(Expr::Int(n))
            }
            Tok::Char(n) => {
                self.bump();
                Ok(Expr::Char(n))
            }
            Tok::Ident(w) if is_type_word(&w) => self.error(format!(
                "`{w}` starts a type, not an expression (a cast needs parentheses)"
            )),
            Tok::Ident(w) => {
                self.bump();
                let mut name = w;
                while self.is("::") && matches!(self.peek_at(1), Tok::Ident(_)) {
                    self.bump();
                    if let Tok::Ident(part) = self.bump() {
                        name.push_str("::");
                        name.push_str(&part);
                    }
                }
                Ok(Expr::Name(name))
            }
            Tok::Punct("(") => {
                self.bump();
                self.enter()?;
                let e = self.expr();
                self.depth -= 1;
                let e = e?;
                self.expect(")")?;
                Ok(e)
            }
            _ => self.error(format!("expected an expression, found {}", self.describe())),
        }
    }
}

fn is_type_word(w: &str) -> bool {
    TYPE_WORDS.contains(&w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(s: &str) -> Expr {
        parse_expr(s).unwrap_or_else(|e| panic!("{s:?}: {}", e.show(s)))
    }

    fn name(s: &str) -> Box<Expr> {
        Box::new(Expr::Name(s.into()))
    }

    fn int(n: u64) -> Box<Expr> {
        Box::new(Expr::Int(n))
    }

    fn ty(base: &str, pointers: usize) -> TypeName {
        TypeName {
            base: base.into(),
            pointers,
        }
    }

    #[test]
    fn postfix_binds_tighter_than_unary() {
        // *KLogs[3].name is *((KLogs[3]).name)
        assert_eq!(
            p("*KLogs[3].name"),
            Expr::Unary(
                UnOp::Deref,
                Box::new(Expr::Member(
                    Box::new(Expr::Index(name("KLogs"), int(3))),
                    "name".into()
                ))
            )
        );
        assert_eq!(
            p("&KLogs[1]"),
            Expr::Unary(UnOp::AddrOf, Box::new(Expr::Index(name("KLogs"), int(1))))
        );
    }

    #[test]
    fn binary_precedence_and_associativity() {
        // a + b * c - d  is  (a + (b * c)) - d
        assert_eq!(
            p("a + b * c - d"),
            Expr::Binary(
                BinOp::Sub,
                Box::new(Expr::Binary(
                    BinOp::Add,
                    name("a"),
                    Box::new(Expr::Binary(BinOp::Mul, name("b"), name("c")))
                )),
                name("d")
            )
        );
        // | is looser than &, which is looser than ==, << and +
        assert_eq!(
            p("1 | 2 & 3 == 4 << 5 + 6"),
            Expr::Binary(
                BinOp::BitOr,
                int(1),
                Box::new(Expr::Binary(
                    BinOp::BitAnd,
                    int(2),
                    Box::new(Expr::Binary(
                        BinOp::Eq,
                        int(3),
                        Box::new(Expr::Binary(
                            BinOp::Shl,
                            int(4),
                            Box::new(Expr::Binary(BinOp::Add, int(5), int(6)))
                        ))
                    ))
                ))
            )
        );
        assert_eq!(
            p("(1 + 2) * 3"),
            Expr::Binary(
                BinOp::Mul,
                Box::new(Expr::Binary(BinOp::Add, int(1), int(2))),
                int(3)
            )
        );
    }

    #[test]
    fn casts_and_parenthesized_expressions() {
        assert_eq!(
            p("(struct _KLog *)0xffff800000001000"),
            Expr::Cast(ty("struct _KLog", 1), int(0xffff_8000_0000_1000))
        );
        assert_eq!(
            p("((KLog *)ADDR)->next_write"),
            Expr::Arrow(
                Box::new(Expr::Cast(ty("KLog", 1), name("ADDR"))),
                "next_write".into()
            )
        );
        // A cast binds tighter than a postfix operator's operand would: (T *)p->x casts p->x.
        assert_eq!(
            p("(KLog *)p->x"),
            Expr::Cast(ty("KLog", 1), Box::new(Expr::Arrow(name("p"), "x".into())))
        );
        // `(name)` then an operand is a cast; then a binary operator, a parenthesized name.
        assert_eq!(p("(KLog)x"), Expr::Cast(ty("KLog", 0), name("x")));
        assert_eq!(p("(a) - 1"), Expr::Binary(BinOp::Sub, name("a"), int(1)));
        assert_eq!(p("(a)"), Expr::Name("a".into()));
        assert_eq!(p("(a[1])"), Expr::Index(name("a"), int(1)));
        assert_eq!(
            p("(unsigned long)x"),
            Expr::Cast(ty("unsigned long", 0), name("x"))
        );
        assert_eq!(p("(const char **)x"), Expr::Cast(ty("char", 2), name("x")));
        assert_eq!(p("(*mut u64)x"), Expr::Cast(ty("u64", 1), name("x")));
        assert_eq!(p("(&str *)x"), Expr::Cast(ty("&str", 1), name("x")));
        assert_eq!(p("(&x)"), Expr::Unary(UnOp::AddrOf, name("x")));
        assert_eq!(
            p("(&x) + 1"),
            Expr::Binary(
                BinOp::Add,
                Box::new(Expr::Unary(UnOp::AddrOf, name("x"))),
                int(1)
            )
        );
        assert_eq!(
            p("(core::sync::atomic::AtomicPtr<u64> *)x"),
            Expr::Cast(ty("core::sync::atomic::AtomicPtr<u64>", 1), name("x"))
        );
        // `(a < b)` is a comparison, not a generic.
        assert_eq!(p("(a < b)"), Expr::Binary(BinOp::Lt, name("a"), name("b")));
    }

    #[test]
    fn artificial_arrays_bind_loosest() {
        assert_eq!(
            p("*KLogs[1].buffer@2+2"),
            Expr::Repeat(
                Box::new(Expr::Unary(
                    UnOp::Deref,
                    Box::new(Expr::Member(
                        Box::new(Expr::Index(name("KLogs"), int(1))),
                        "buffer".into()
                    ))
                )),
                Box::new(Expr::Binary(BinOp::Add, int(2), int(2)))
            )
        );
    }

    #[test]
    fn sizeof_of_a_type_and_of_an_expression() {
        assert_eq!(
            p("sizeof(struct _KLog)"),
            Expr::SizeofType(ty("struct _KLog", 0))
        );
        assert_eq!(p("sizeof(KLog *)"), Expr::SizeofType(ty("KLog", 1)));
        assert_eq!(
            p("sizeof KLogs[1]"),
            Expr::SizeofExpr(Box::new(Expr::Index(name("KLogs"), int(1))))
        );
        assert_eq!(
            p("sizeof(KLogs) / sizeof(KLogs[0])").to_owned(),
            Expr::Binary(
                BinOp::Div,
                Box::new(Expr::SizeofType(ty("KLogs", 0))),
                Box::new(Expr::SizeofExpr(Box::new(Expr::Index(
                    name("KLogs"),
                    int(0)
                ))))
            )
        );
    }

    #[test]
    fn literals_and_names() {
        assert_eq!(p("0x1F"), Expr::Int(31));
        assert_eq!(p("017"), Expr::Int(15));
        assert_eq!(p("0b101"), Expr::Int(5));
        assert_eq!(p("42UL"), Expr::Int(42));
        assert_eq!(p("'S'"), Expr::Char(83));
        assert_eq!(p("'\\n'"), Expr::Char(10));
        assert_eq!(p("'\\x41'"), Expr::Char(0x41));
        assert_eq!(p("hosted::KLogs"), Expr::Name("hosted::KLogs".into()));
        assert_eq!(p("x.0"), Expr::Member(name("x"), "__0".into()));
        assert_eq!(
            p("- -1"),
            Expr::Unary(UnOp::Neg, Box::new(Expr::Unary(UnOp::Neg, int(1))))
        );
    }

    #[test]
    fn type_names_alone() {
        assert_eq!(parse_type("struct _KLog"), Some(ty("struct _KLog", 0)));
        assert_eq!(parse_type("KLog *"), Some(ty("KLog", 1)));
        assert_eq!(
            parse_type("klog_runtime::ring::KLog"),
            Some(ty("klog_runtime::ring::KLog", 0))
        );
        assert_eq!(parse_type("unsigned int"), Some(ty("unsigned int", 0)));
        assert_eq!(parse_type("KLogs[1]"), None);
        assert_eq!(parse_type("struct"), None);
        assert_eq!(parse_type("KLog x"), None);
    }

    #[test]
    fn errors_say_where() {
        let cases = [
            ("KLogs[", 6, "expected an expression"),
            ("KLogs[1", 7, "expected `]`"),
            ("a +", 3, "expected an expression"),
            ("a b", 2, "unexpected `b`"),
            ("KLogs.", 6, "expected a member name"),
            ("(KLog *)", 8, "expected an expression after the cast"),
            ("0x", 0, "invalid number"),
            ("99999999999999999999", 0, "invalid number"),
            ("a # b", 2, "unexpected character"),
            ("int", 0, "starts a type"),
            ("", 0, "expected an expression"),
            ("'ab'", 0, "invalid character literal"),
        ];
        for (input, pos, msg) in cases {
            let e = parse_expr(input).expect_err(input);
            assert_eq!(e.pos, pos, "{input:?}: {e}");
            assert!(e.msg.contains(msg), "{input:?}: {e}");
        }
        let shown = parse_expr("KLogs[1").unwrap_err().show("KLogs[1");
        assert_eq!(
            shown,
            "expected `]`, found the end at column 8 of `KLogs[1`"
        );
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let deep = "(".repeat(100_000) + "1" + &")".repeat(100_000);
        assert!(parse_expr(&deep)
            .unwrap_err()
            .msg
            .contains("nested too deeply"));
        let stars = "*".repeat(100_000) + "p";
        assert!(parse_expr(&stars).is_err());
        let ok = "(".repeat(100) + "1" + &")".repeat(100);
        assert_eq!(parse_expr(&ok), Ok(Expr::Int(1)));
    }

    #[test]
    fn errors_show_a_long_expression_around_the_column_escaped() {
        let input = "1+".repeat(300) + "1";
        let e = parse_expr(&input).unwrap_err();
        let shown = e.show(&input);
        assert!(shown.len() < 200, "{shown}");
        assert!(shown.contains("at column 515 of `…"), "{shown}");
        let bad = "x\u{7}y+";
        assert_eq!(
            parse_expr(bad).unwrap_err().show(bad),
            "unexpected character '\\u{7}' at column 2 of `x\\u{7}y+`"
        );
    }

    #[test]
    fn long_operator_chains_are_refused_not_a_stack_overflow() {
        let refused = |input: String| {
            let e = parse_expr(&input).unwrap_err();
            assert!(e.msg.contains("operators in one expression"), "{e}");
        };
        refused(vec!["1"; 100_000].join("+"));
        refused("x".to_owned() + &"[0]".repeat(100_000));
        refused("a".to_owned() + &".b".repeat(100_000));
        refused("a".to_owned() + &"->b".repeat(100_000));
        refused("x".to_owned() + &"@2".repeat(100_000));
        refused(format!("(T {})0", "* ".repeat(100_000)));
        refused(format!("sizeof(T {})", "*".repeat(100_000)));
        assert!(parse_type(&format!("T {}", "*".repeat(100_000))).is_none());
        // Long but ordinary expressions still parse.
        let sum = vec!["1"; 200].join("+");
        assert!(parse_expr(&sum).is_ok());
        assert!(parse_expr(&("x".to_owned() + &"[0]".repeat(200))).is_ok());
    }

    proptest! {
        #[test]
        fn no_input_panics(s in "\\PC{0,60}") {
            let _ = parse_expr(&s);
            let _ = parse_type(&s);
        }

        #[test]
        fn no_expression_like_input_panics(s in "[a-z0-9_ ()\\[\\]*&.<>:'\\\\x+-]{0,40}|(->)") {
            if let Err(e) = parse_expr(&s) {
                prop_assert!(e.pos <= s.len());
                let _ = e.show(&s);
            }
            let _ = parse_type(&s);
        }
    }
}
