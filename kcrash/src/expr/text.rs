//! A value tree written the way gdb's `print` writes it: `{a = 1, b = 0x… "str"}`, format
//! letters, repeats and the element limit, pretty or on one line.

use std::fmt::Write as _;

use symbols::TypeKind;

use crate::error::Result;

use super::eval::{cannot_access, extend, IntStyle, IntTy, Ty};
use super::value::{symbol_at, CString, Field, Kind, Node, Options};
use super::Evaluator;

/// Writes nodes as gdb's `print` does.
pub struct Writer<'e, 'a> {
    pub ev: &'e Evaluator<'a>,
    pub opts: Options,
}

impl Writer<'_, '_> {
    /// The whole value, as after gdb's `$1 = `: pointers get their type in front, as gdb does for
    /// a value printed on its own.
    pub fn top(&self, n: &Node) -> Result<String> {
        let mut out = String::new();
        if let Kind::Pointer { .. } = n.kind {
            let ty = self.ev.unwrapped(&n.ty)?;
            if self.opts.format.is_none() && !self.is_plain_char_pointer(&ty)? {
                write!(out, "({}) ", self.ev.type_name(&ty)?).ok();
            }
        }
        if let Kind::Function { .. } = n.kind {
            out.push_str("{function} ");
        }
        self.write(n, 0, &mut out);
        Ok(out)
    }

    /// gdb leaves the type off an unnamed pointer to plain `char`: the string says it.
    fn is_plain_char_pointer(&self, ty: &Ty) -> Result<bool> {
        let target = match ty {
            Ty::Pointer(t) => (**t).clone(),
            Ty::Dwarf(id) => {
                let t = self.ev.image.type_(*id)?;
                match t.kind {
                    TypeKind::Pointer(Some(target)) if t.name.is_none() => Ty::Dwarf(target),
                    _ => return Ok(false),
                }
            }
            _ => return Ok(false),
        };
        let Ty::Dwarf(id) = target else {
            return Ok(false);
        };
        let mut id = id;
        // Through qualifiers only: `const char`, not a typedef of char.
        for _ in 0..8 {
            let t = self.ev.image.type_(id)?;
            match t.kind {
                TypeKind::Qualified(_, Some(inner)) => id = inner,
                _ => return Ok(t.name.as_deref() == Some("char")),
            }
        }
        Ok(false)
    }

    pub fn write(&self, n: &Node, indent: usize, out: &mut String) {
        match &n.kind {
            Kind::Int { bits, int, style } => self.int(*bits, *int, *style, out),
            Kind::Float { bits, size } => match self.opts.format {
                // gdb's /c takes a float's value; the other letters take its bits.
                Some('c') => {
                    let v = if *size == 4 {
                        f64::from(f32::from_bits(*bits as u32))
                    } else {
                        f64::from_bits(*bits)
                    };
                    self.formatted(v as i64 as u64, IntTy::LONG, 'c', out)
                }
                Some(f) => self.formatted(
                    *bits,
                    IntTy {
                        size: *size,
                        signed: true,
                    },
                    f,
                    out,
                ),
                None => float(*bits, *size, out),
            },
            Kind::Enum { bits, int, name } => match (self.opts.format, name) {
                (None, Some(name)) => out.push_str(name),
                (None, None) => self.int(*bits, *int, IntStyle::Plain, out),
                (Some(f), _) => self.formatted(*bits, *int, f, out),
            },
            Kind::Pointer {
                addr,
                symbol,
                string,
            } => {
                match self.opts.format {
                    Some(f) if f != 'a' => self.formatted(*addr, IntTy::ULONG, f, out),
                    _ => {
                        write!(out, "{addr:#x}").ok();
                    }
                }
                if let Some(s) = symbol {
                    write!(out, " <{s}>").ok();
                }
                match string {
                    Some(CString::Text { bytes, more }) => {
                        out.push(' ');
                        self.chars(bytes, *more, false, out);
                    }
                    Some(CString::Unreadable(a)) => {
                        write!(out, " <error: {}>", cannot_access(*a)).ok();
                    }
                    None => {}
                }
            }
            Kind::Function { addr, symbol } => {
                write!(out, "{addr:#x}").ok();
                if let Some(s) = symbol {
                    write!(out, " <{s}>").ok();
                }
            }
            Kind::Fields(fields) => self.fields(fields, indent, out),
            Kind::Variant { name, fields } => {
                out.push_str(name);
                let tuple = fields
                    .iter()
                    .all(|f| f.name.as_deref().is_some_and(|n| n.starts_with("__")));
                if fields.is_empty() {
                } else if tuple {
                    out.push('(');
                    for (i, f) in fields.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        self.write(&f.node, indent, out);
                    }
                    out.push(')');
                } else {
                    out.push(' ');
                    self.fields(fields, indent, out);
                }
            }
            Kind::Elements { runs, more } => {
                out.push('{');
                for (i, (node, reps)) in runs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    // gdb's pretty form indents what is inside an array one step more.
                    self.write(node, indent + 2, out);
                    if *reps > 1 {
                        write!(out, " <repeats {reps} times>").ok();
                    }
                }
                if *more {
                    out.push_str("...");
                }
                out.push('}');
            }
            Kind::Chars { bytes, more } => self.chars(bytes, *more, true, out),
            Kind::Str { bytes, more } => self.chars(bytes, *more, false, out),
            Kind::Unreadable(a) => {
                write!(out, "<error: {}>", cannot_access(*a)).ok();
            }
            Kind::Opaque(what) => out.push_str(what),
        }
    }

    fn fields(&self, fields: &[Field], indent: usize, out: &mut String) {
        if fields.is_empty() {
            out.push_str("{<No data fields>}");
            return;
        }
        out.push('{');
        for (i, f) in fields.iter().enumerate() {
            if self.opts.pretty {
                out.push('\n');
                out.push_str(&" ".repeat(indent + 2));
            } else if i > 0 {
                out.push(' ');
            }
            if let Some(name) = &f.name {
                write!(out, "{name} = ").ok();
            }
            self.write(&f.node, indent + 2, out);
            if i + 1 < fields.len() {
                out.push(',');
            }
        }
        if self.opts.pretty {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
        }
        out.push('}');
    }

    fn int(&self, bits: u64, int: IntTy, style: IntStyle, out: &mut String) {
        if let Some(f) = self.opts.format {
            return self.formatted(bits, int, f, out);
        }
        let width = u64::from(int.size) * 8;
        match style {
            IntStyle::Bool if bits == 0 => out.push_str("false"),
            IntStyle::Bool if bits == 1 => out.push_str("true"),
            IntStyle::Char => {
                decimal(bits, width, int.signed, out);
                out.push_str(" '");
                char_escape((bits & 0xff) as u8, b'\'', out);
                out.push('\'');
            }
            IntStyle::Utf => {
                decimal(bits, width, false, out);
                match char::from_u32(bits as u32) {
                    Some(c) if !c.is_control() => write!(out, " '{c}'").ok(),
                    _ => write!(out, " '\\u{{{bits:x}}}'").ok(),
                };
            }
            _ => decimal(bits, width, int.signed, out),
        }
    }

    /// An integer in the format letter `f`, as gdb's `print/f`.
    fn formatted(&self, bits: u64, int: IntTy, f: char, out: &mut String) {
        let width = u64::from(int.size) * 8;
        let unsigned = extend(bits, width, false);
        match f {
            'x' => write!(out, "{unsigned:#x}").unwrap_or(()),
            'z' => write!(out, "0x{unsigned:0w$x}", w = usize::from(int.size) * 2).unwrap_or(()),
            'o' if unsigned == 0 => out.push('0'),
            'o' => write!(out, "0{unsigned:o}").unwrap_or(()),
            't' => write!(out, "{unsigned:b}").unwrap_or(()),
            'd' => decimal(bits, width, true, out),
            'u' => decimal(bits, width, false, out),
            'c' => {
                let b = (bits & 0xff) as u8;
                decimal(u64::from(b), 8, int.signed, out);
                out.push_str(" '");
                char_escape(b, b'\'', out);
                out.push('\'');
            }
            'a' => {
                write!(out, "{unsigned:#x}").ok();
                if let Some(s) = symbol_at(self.ev, unsigned) {
                    write!(out, " <{s}>").ok();
                }
            }
            _ => decimal(bits, width, int.signed, out),
        }
    }

    /// Characters as gdb's printstr: quoted runs, long runs of one character as
    /// `'c' <repeats N times>`, a trailing NUL of an array dropped, `...` when cut.
    fn chars(&self, bytes: &[u8], more: bool, array: bool, out: &mut String) {
        let mut bytes = bytes;
        if array && !more {
            if let Some((0, rest)) = bytes.split_last() {
                bytes = rest;
            }
        }
        if bytes.is_empty() {
            out.push_str("\"\"");
            if more {
                out.push_str("...");
            }
            return;
        }
        // gdb counts whole runs against the limit: a run that crosses it is shown whole.
        let mut i = 0;
        let mut shown = 0u64;
        let mut in_quote = false;
        while i < bytes.len() && shown < self.opts.limit {
            let c = bytes[i];
            let run = bytes[i..].iter().take_while(|&&b| b == c).count();
            shown += run as u64;
            if run as u64 > self.opts.repeats {
                if in_quote {
                    out.push('"');
                    in_quote = false;
                }
                if i > 0 {
                    out.push_str(", ");
                }
                out.push('\'');
                char_escape(c, b'\'', out);
                write!(out, "' <repeats {run} times>").ok();
            } else {
                if !in_quote {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push('"');
                    in_quote = true;
                }
                for _ in 0..run {
                    char_escape(c, b'"', out);
                }
            }
            i += run;
        }
        if in_quote {
            out.push('"');
        }
        if more || i < bytes.len() {
            out.push_str("...");
        }
    }
}

fn decimal(bits: u64, width: u64, signed: bool, out: &mut String) {
    let v = extend(bits, width, signed);
    if signed {
        write!(out, "{}", v as i64).ok();
    } else {
        write!(out, "{v}").ok();
    }
}

/// A float as gdb prints it: C's `%g` with 9 significant digits for a `float`, 17 for a
/// `double` (enough to read back the same bits), NaNs with their payload.
fn float(bits: u64, size: u8, out: &mut String) {
    let (v, digits, payload) = if size == 4 {
        let b = bits as u32;
        (f64::from(f32::from_bits(b)), 9, u64::from(b & 0x7f_ffff))
    } else {
        (f64::from_bits(bits), 17, bits & 0xf_ffff_ffff_ffff)
    };
    let sign = if v.is_sign_negative() { "-" } else { "" };
    if v.is_nan() {
        write!(out, "{sign}nan({payload:#x})").ok();
    } else if v.is_infinite() {
        write!(out, "{sign}inf").ok();
    } else if v == 0.0 {
        write!(out, "{sign}0").ok();
    } else {
        out.push_str(&c_g(v, digits));
    }
}

/// C's `%.Ng` of a finite, non-zero `v`.
fn c_g(v: f64, digits: usize) -> String {
    let sci = format!("{:.*e}", digits - 1, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= digits as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            trim_fraction(mantissa),
            exp.unsigned_abs()
        )
    } else {
        let decimals = (digits as i32 - 1 - exp).max(0) as usize;
        trim_fraction(&format!("{v:.decimals$}")).to_owned()
    }
}

/// `1.500` → `1.5`, `2.000` → `2`: `%g` drops trailing zeros.
fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// One byte as C writes it in a literal quoted by `quote`: `\n`, `\\`, `\"`, `\033`.
fn char_escape(b: u8, quote: u8, out: &mut String) {
    match b {
        b'\n' => out.push_str("\\n"),
        b'\t' => out.push_str("\\t"),
        b'\r' => out.push_str("\\r"),
        0x07 => out.push_str("\\a"),
        0x08 => out.push_str("\\b"),
        0x0c => out.push_str("\\f"),
        0x0b => out.push_str("\\v"),
        0x1b => out.push_str("\\033"),
        b'\\' => out.push_str("\\\\"),
        _ if b == quote => {
            out.push('\\');
            out.push(b as char);
        }
        0x20..=0x7e => out.push(b as char),
        _ => {
            write!(out, "\\{b:03o}").ok();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_c_g() {
        let f = |v: f64| {
            let mut s = String::new();
            float(v.to_bits(), 8, &mut s);
            s
        };
        let f32_ = |v: f32| {
            let mut s = String::new();
            float(u64::from(v.to_bits()), 4, &mut s);
            s
        };
        // Expected values are what gdb 13 prints for the same literals.
        assert_eq!(f(0.1), "0.10000000000000001");
        assert_eq!(f32_(0.1), "0.100000001");
        assert_eq!(f(1e20), "1e+20");
        assert_eq!(f(1e-5), "1.0000000000000001e-05");
        assert_eq!(f(123456789.0), "123456789");
        assert_eq!(f32_(123456789.0), "123456792");
        assert_eq!(f(1.0 / 3.0), "0.33333333333333331");
        assert_eq!(f(100.0), "100");
        assert_eq!(f(1e16), "10000000000000000");
        assert_eq!(f(1e17), "1e+17");
        assert_eq!(f(0.0001), "0.0001");
        assert_eq!(f32_(1e-40), "9.9999461e-41");
        assert_eq!(f(1.5), "1.5");
        assert_eq!(f(-0.0), "-0");
        assert_eq!(f(f64::INFINITY), "inf");
        assert_eq!(f(f64::NAN), "nan(0x8000000000000)");
    }
}
