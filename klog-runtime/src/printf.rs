//! A C printf interpreter over KLog data words, shared by the kernel's console echo and by kcrash so
//! that both render an event the same way.
//!
//! It follows glibc for what C kernels write: `%d %i %u %o %x %X %c %s %p %%`, the flags `- + space
//! # 0 '`, width and precision (digits or `*`), and the length modifiers `hh h l ll q j z Z t L`.
//! Each conversion takes the next 64-bit data word and narrows it as its length modifier says, the
//! way a C varargs call would have passed it. Differences, all deliberate:
//! - `%n` is never executed: it prints `<%n refused>` and consumes its argument.
//! - A conversion with no data word left prints `<missing arg>`.
//! - `%s` reads through [`Strings`], which may fail: `<unreadable 0x…: reason>` is printed instead.
//!   A null `%s` prints `(null)` as glibc does (nothing when the precision is below 6).
//! - Width and precision are capped at [`MAX_FIELD`] so a hostile format cannot demand gigabytes;
//!   the field is followed by `<field capped at 4096>`.
//! - A `%s` without a NUL within [`MAX_FIELD`] bytes (and no precision) prints what was read
//!   followed by `<cut: no NUL within 4096 bytes>`.
//! - Floating-point and wide conversions consume their argument and print
//!   `<not implemented: %f 0x…>` with the raw word, so nothing is lost.
//! - Positional arguments (`%2$s`, `%*3$d`) print `<not implemented: %2$s>` and consume nothing.
//! - Unknown conversions print their text unchanged and consume nothing, as glibc does.
//!
//! Every mark is also counted in [`Outcome`], so a reader can report it beside the text.

use core::fmt::{self, Write as _};

/// Largest width or precision honoured.
pub const MAX_FIELD: usize = 4096;

/// Where formatted bytes go. Bytes, not `str`: a format string from a dump need not be UTF-8.
pub trait Sink {
    fn put(&mut self, bytes: &[u8]) -> fmt::Result;
}

/// Reads the NUL-terminated strings that `%s` arguments point at.
pub trait Strings {
    type Error: fmt::Display;
    /// The string at `addr` without its NUL, at most `max` bytes.
    fn c_string(&mut self, addr: u64, max: usize) -> Result<&[u8], Self::Error>;
}

/// What happened while formatting, for a reader that reports damage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Data words consumed.
    pub args_used: usize,
    /// Conversions that found no data word.
    pub missing_args: usize,
    /// `%s` arguments that could not be read.
    pub unreadable_strings: usize,
    /// `%n` conversions refused.
    pub refused_n: usize,
    /// `%s` arguments cut at [`MAX_FIELD`] bytes because no NUL came before.
    pub cut_strings: usize,
    /// Widths or precisions above [`MAX_FIELD`], capped.
    pub capped_fields: usize,
    /// Conversions this interpreter does not implement (floating point, wide, positional).
    pub not_implemented: usize,
}

impl Outcome {
    /// Whether any conversion printed a mark instead of (or beside) what the format asked for.
    pub fn marked(&self) -> bool {
        self.missing_args
            + self.unreadable_strings
            + self.refused_n
            + self.cut_strings
            + self.capped_fields
            + self.not_implemented
            > 0
    }
}

/// Formats `fmt` with `args` into `out`. Fails only when `out` does.
pub fn format<S: Sink, T: Strings>(
    out: &mut S,
    fmt: &[u8],
    args: &[u64],
    strings: &mut T,
) -> Result<Outcome, fmt::Error> {
    format_pieces(out, fmt, pieces(fmt), args, strings)
}

/// One part of a format string: bytes printed as they are, or one conversion. A reader that
/// formats many records with the same format finds its pieces once ([`pieces`]) and formats
/// with them ([`format_pieces`]), instead of parsing the format again for every record.
#[derive(Clone, Copy, Debug)]
pub struct Piece(Part);

impl Piece {
    /// The bytes of the format this piece prints as they are, when it is literal text.
    pub fn literal(self) -> Option<core::ops::Range<usize>> {
        match self.0 {
            Part::Literal { start, end } => Some(start..end),
            Part::Conversion { .. } => None,
        }
    }

    /// This piece as a step of [`format_steps`], when it is literal text or a bare number.
    pub fn step(self) -> Option<Step> {
        match self.0 {
            Part::Literal { start, end } => Some(Step(StepKind::Literal { start, end })),
            Part::Conversion {
                spec:
                    Parsed {
                        bare: Some(bare),
                        spec,
                        ..
                    },
                ..
            } => Some(Step(StepKind::Bare {
                bare,
                length: spec.length,
            })),
            Part::Conversion { .. } => None,
        }
    }

    /// Whether this is a bare `%d %i %u %x %X`, which prints only ASCII digits, hex letters and
    /// a minus sign (or `<missing arg>`): whoever must escape a message need not look at its
    /// output.
    pub fn is_bare_number(self) -> bool {
        matches!(
            self.0,
            Part::Conversion {
                spec: Parsed { bare: Some(_), .. },
                ..
            }
        )
    }
}

#[derive(Clone, Copy, Debug)]
enum Part {
    /// `fmt[start..end]`, printed as it is.
    Literal { start: usize, end: usize },
    /// The conversion `fmt[start..end]` (its `%` included).
    Conversion {
        spec: Parsed,
        start: usize,
        end: usize,
    },
}

/// The pieces of `fmt`, in order: each run of literal bytes, then the conversion after it.
pub fn pieces(fmt: &[u8]) -> impl Iterator<Item = Piece> + '_ {
    let mut i = 0;
    // A conversion found after a literal run, given on the next call.
    let mut pending: Option<Piece> = None;
    core::iter::from_fn(move || {
        if let Some(conv) = pending.take() {
            return Some(conv);
        }
        if i >= fmt.len() {
            return None;
        }
        let start = i;
        let next = fmt[i..]
            .iter()
            .position(|&b| b == b'%')
            .map_or(fmt.len(), |p| i + p);
        i = next;
        if next < fmt.len() {
            let (spec, end) = Parsed::parse(fmt, next + 1);
            i = end;
            let conv = Piece(Part::Conversion {
                spec,
                start: next,
                end,
            });
            if start == next {
                return Some(conv);
            }
            pending = Some(conv);
        }
        Some(Piece(Part::Literal { start, end: next }))
    })
}

/// Formats `fmt` with `args` into `out`, by its `pieces` (found by [`pieces`] in the same
/// `fmt`). Fails only when `out` does.
pub fn format_pieces<S: Sink, T: Strings>(
    out: &mut S,
    fmt: &[u8],
    pieces: impl IntoIterator<Item = Piece>,
    args: &[u64],
    strings: &mut T,
) -> Result<Outcome, fmt::Error> {
    let mut f = Formatter {
        out,
        args,
        outcome: Outcome::default(),
    };
    // Pieces of another format would name bytes this one may not have: those print nothing.
    let text = |start: usize, end: usize| fmt.get(start..end).unwrap_or_default();
    for piece in pieces {
        match piece.0 {
            Part::Literal { start, end } => f.out.put(text(start, end))?,
            Part::Conversion {
                spec:
                    Parsed {
                        bare: Some(bare),
                        spec,
                        ..
                    },
                ..
            } => f.bare(bare, spec.length)?,
            Part::Conversion { spec, start, end } => {
                let spec = spec.resolve(&mut f);
                f.convert(&spec, text(start, end), strings)?;
            }
        }
    }
    Ok(f.outcome)
}

/// One step of a format made only of literal text and bare numbers: the compact form
/// [`format_steps`] runs, with less work a record than [`format_pieces`].
#[derive(Clone, Copy, Debug)]
pub struct Step(StepKind);

#[derive(Clone, Copy, Debug)]
enum StepKind {
    Literal { start: usize, end: usize },
    Bare { bare: Bare, length: Length },
}

/// What [`format_pieces`] writes and finds for the pieces `steps` were made from (each piece's
/// [`Piece::step`]).
pub fn format_steps<S: Sink>(
    out: &mut S,
    fmt: &[u8],
    steps: &[Step],
    args: &[u64],
) -> Result<Outcome, fmt::Error> {
    let mut f = Formatter {
        out,
        args,
        outcome: Outcome::default(),
    };
    for step in steps {
        match step.0 {
            StepKind::Literal { start, end } => {
                f.out.put(fmt.get(start..end).unwrap_or_default())?
            }
            StepKind::Bare { bare, length } => f.bare(bare, length)?,
        }
    }
    Ok(f.outcome)
}

/// What a conversion prints for want of a data word.
const MISSING_ARG: &[u8] = b"<missing arg>";

/// Number of data words `fmt` consumes (conversions plus `*` fields), for compile-time checks of
/// KLOG invocations.
pub const fn count_args(fmt: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < fmt.len() {
        if fmt[i] != b'%' {
            i += 1;
            continue;
        }
        i += 1;
        while i < fmt.len() && matches!(fmt[i], b'-' | b'+' | b' ' | b'#' | b'0' | b'\'') {
            i += 1;
        }
        if i < fmt.len() && fmt[i] == b'*' {
            n += 1;
            i += 1;
        }
        while i < fmt.len() && fmt[i].is_ascii_digit() {
            i += 1;
        }
        if i < fmt.len() && fmt[i] == b'.' {
            i += 1;
            if i < fmt.len() && fmt[i] == b'*' {
                n += 1;
                i += 1;
            }
            while i < fmt.len() && fmt[i].is_ascii_digit() {
                i += 1;
            }
        }
        while i < fmt.len()
            && matches!(
                fmt[i],
                b'h' | b'l' | b'q' | b'j' | b'z' | b'Z' | b't' | b'L'
            )
        {
            i += 1;
        }
        if i < fmt.len() {
            if takes_arg(fmt[i]) {
                n += 1;
            }
            i += 1;
        }
    }
    n
}

const fn takes_arg(conv: u8) -> bool {
    matches!(
        conv,
        b'd' | b'i'
            | b'u'
            | b'o'
            | b'x'
            | b'X'
            | b'c'
            | b's'
            | b'p'
            | b'n'
            | b'f'
            | b'F'
            | b'e'
            | b'E'
            | b'g'
            | b'G'
            | b'a'
            | b'A'
            | b'C'
            | b'S'
    )
}

/// Argument width, from the length modifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Length {
    Char,
    Short,
    Int,
    Long,
}

#[derive(Clone, Copy, Debug)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    alt: bool,
    zero: bool,
    width: usize,
    precision: Option<usize>,
    length: Length,
    /// The conversion character; `None` when the format ended inside the specification.
    conv: Option<u8>,
    /// A width or precision was above [`MAX_FIELD`] and was capped.
    capped: bool,
    /// It names its arguments by position (`%2$d`, `%*2$d`), which is not implemented.
    positional: bool,
}

/// A specification as the format gives it: a `*` width or precision is known only when a
/// record's data words are.
#[derive(Clone, Copy, Debug)]
struct Parsed {
    spec: Spec,
    /// The width is `*`: the next data word.
    width_arg: bool,
    /// The precision is `*`: the data word after the width's.
    precision_arg: bool,
    /// A bare `%d %i %u %x %X` (any length, no flag, width or precision): its digits alone, the
    /// common case, written without the general field logic.
    bare: Option<Bare>,
}

#[derive(Clone, Copy, Debug)]
enum Bare {
    Signed,
    Unsigned,
    Hex,
    HexUpper,
}

impl Parsed {
    /// Parses the specification after a `%` at `start`; returns it and the index just past it.
    fn parse(fmt: &[u8], start: usize) -> (Parsed, usize) {
        let mut width_arg = false;
        let mut precision_arg = false;
        let mut s = Spec {
            left: false,
            plus: false,
            space: false,
            alt: false,
            zero: false,
            width: 0,
            precision: None,
            length: Length::Int,
            conv: None,
            capped: false,
            positional: false,
        };
        let mut i = start;
        if let Some(after) = position(fmt, i) {
            s.positional = true;
            i = after;
        }
        while let Some(&b) = fmt.get(i) {
            match b {
                b'-' => s.left = true,
                b'+' => s.plus = true,
                b' ' => s.space = true,
                b'#' => s.alt = true,
                b'0' => s.zero = true,
                b'\'' => {} // thousands grouping: nothing in the C locale
                _ => break,
            }
            i += 1;
        }
        if fmt.get(i) == Some(&b'*') {
            i += 1;
            if let Some(after) = position(fmt, i) {
                s.positional = true;
                i = after;
            } else if !s.positional {
                width_arg = true;
            }
        } else {
            let (w, next) = digits(fmt, i);
            s.width = s.cap(w);
            i = next;
        }
        if fmt.get(i) == Some(&b'.') {
            i += 1;
            if fmt.get(i) == Some(&b'*') {
                i += 1;
                if let Some(after) = position(fmt, i) {
                    s.positional = true;
                    i = after;
                } else if !s.positional {
                    precision_arg = true;
                }
            } else {
                let (p, next) = digits(fmt, i);
                s.precision = Some(s.cap(p));
                i = next;
            }
        }
        while let Some(&b) = fmt.get(i) {
            s.length = match (b, s.length) {
                (b'h', Length::Short) => Length::Char,
                (b'h', _) => Length::Short,
                (b'l' | b'q' | b'j' | b'z' | b'Z' | b't' | b'L', _) => Length::Long,
                _ => break,
            };
            i += 1;
        }
        s.conv = fmt.get(i).copied();
        let plain = !(s.left || s.plus || s.space || s.alt || s.zero || s.positional || s.capped)
            && s.width == 0
            && s.precision.is_none()
            && !width_arg
            && !precision_arg;
        let bare = match s.conv {
            Some(b'd' | b'i') if plain => Some(Bare::Signed),
            Some(b'u') if plain => Some(Bare::Unsigned),
            Some(b'x') if plain => Some(Bare::Hex),
            Some(b'X') if plain => Some(Bare::HexUpper),
            _ => None,
        };
        let parsed = Parsed {
            spec: s,
            width_arg,
            precision_arg,
            bare,
        };
        (parsed, (i + 1).min(fmt.len()))
    }

    /// The specification with its `*` fields taken from the formatter's arguments, the width's
    /// first, as a C varargs call passes them.
    fn resolve<S: Sink>(&self, f: &mut Formatter<'_, S>) -> Spec {
        let mut s = self.spec;
        if self.width_arg {
            let w = f.next_arg().unwrap_or(0) as i32;
            if w < 0 {
                s.left = true;
            }
            s.width = s.cap(w.unsigned_abs() as usize);
        }
        if self.precision_arg {
            let p = f.next_arg().unwrap_or(0) as i32;
            // A negative precision is taken as if it were omitted.
            s.precision = (p >= 0).then(|| s.cap(p as usize));
        }
        s
    }
}

impl Spec {
    /// `v` capped at [`MAX_FIELD`], remembering that it was.
    fn cap(&mut self, v: usize) -> usize {
        self.capped |= v > MAX_FIELD;
        v.min(MAX_FIELD)
    }

    fn signed(&self, word: u64) -> i64 {
        self.length.signed(word)
    }

    fn unsigned(&self, word: u64) -> u64 {
        self.length.unsigned(word)
    }
}

impl Length {
    /// The data word narrowed as a C varargs call would have passed it, signed.
    fn signed(self, word: u64) -> i64 {
        match self {
            Length::Char => word as i8 as i64,
            Length::Short => word as i16 as i64,
            Length::Int => word as i32 as i64,
            Length::Long => word as i64,
        }
    }

    /// The data word narrowed, unsigned.
    fn unsigned(self, word: u64) -> u64 {
        match self {
            Length::Char => word as u8 as u64,
            Length::Short => word as u16 as u64,
            Length::Int => word as u32 as u64,
            Length::Long => word,
        }
    }
}

/// A run of decimal digits at `i`; beyond [`MAX_FIELD`] it stays at `MAX_FIELD + 1` (capped later).
fn digits(fmt: &[u8], mut i: usize) -> (usize, usize) {
    let mut v = 0usize;
    while let Some(d) = fmt.get(i).filter(|b| b.is_ascii_digit()) {
        v = (v * 10 + (d - b'0') as usize).min(MAX_FIELD + 1);
        i += 1;
    }
    (v, i)
}

/// The index just past a positional `N$` at `i`, if there is one.
fn position(fmt: &[u8], i: usize) -> Option<usize> {
    let (_, end) = digits(fmt, i);
    (end > i && fmt.get(end) == Some(&b'$')).then_some(end + 1)
}

struct Formatter<'a, S: Sink> {
    out: &'a mut S,
    args: &'a [u64],
    outcome: Outcome,
}

impl<S: Sink> Formatter<'_, S> {
    fn next_arg(&mut self) -> Option<u64> {
        let arg = self.args.get(self.outcome.args_used).copied();
        match arg {
            Some(_) => self.outcome.args_used += 1,
            None => self.outcome.missing_args += 1,
        }
        arg
    }

    /// A bare conversion: what [`Formatter::convert`] writes for it, with less work.
    fn bare(&mut self, bare: Bare, length: Length) -> fmt::Result {
        let Some(word) = self.next_arg() else {
            return self.out.put(MISSING_ARG);
        };
        let mut buf = [0u8; 22];
        let n = match bare {
            Bare::Signed => {
                let v = length.signed(word);
                let mut n = put_digits_dec(&mut buf, v.unsigned_abs());
                if v < 0 {
                    n -= 1;
                    buf[n] = b'-';
                }
                n
            }
            Bare::Unsigned => put_digits_dec(&mut buf, length.unsigned(word)),
            Bare::Hex => put_digits_pow2(&mut buf, length.unsigned(word), 4, b"0123456789abcdef"),
            Bare::HexUpper => {
                put_digits_pow2(&mut buf, length.unsigned(word), 4, b"0123456789ABCDEF")
            }
        };
        self.out.put(&buf[n..])
    }

    fn convert<T: Strings>(&mut self, s: &Spec, text: &[u8], strings: &mut T) -> fmt::Result {
        let Some(conv) = s.conv else {
            return self.out.put(text);
        };
        if conv == b'%' {
            return self.out.put(b"%");
        }
        if !takes_arg(conv) {
            return self.out.put(text);
        }
        if s.positional {
            self.outcome.not_implemented += 1;
            self.out.put(b"<not implemented: ")?;
            self.out.put(text)?;
            return self.out.put(b">");
        }
        let Some(word) = self.next_arg() else {
            return self.out.put(MISSING_ARG);
        };
        self.value(s, conv, word, text, strings)?;
        if s.capped {
            self.outcome.capped_fields += 1;
            write!(ByteWriter(&mut *self.out), "<field capped at {MAX_FIELD}>")?;
        }
        Ok(())
    }

    /// One conversion of `word`.
    fn value<T: Strings>(
        &mut self,
        s: &Spec,
        conv: u8,
        word: u64,
        text: &[u8],
        strings: &mut T,
    ) -> fmt::Result {
        match conv {
            b'd' | b'i' => {
                let v = s.signed(word);
                let sign = if v < 0 {
                    "-"
                } else if s.plus {
                    "+"
                } else if s.space {
                    " "
                } else {
                    ""
                };
                self.number(s, sign, v.unsigned_abs(), 10, false)
            }
            b'u' => self.number(s, "", s.unsigned(word), 10, false),
            b'o' => self.number(s, "", s.unsigned(word), 8, false),
            b'x' => self.number(s, "", s.unsigned(word), 16, false),
            b'X' => self.number(s, "", s.unsigned(word), 16, true),
            b'p' if word == 0 => self.padded(s, b"(nil)"),
            b'p' => {
                // glibc prints a pointer as %#lx and keeps the + and space flags.
                let sign = if s.plus {
                    "+"
                } else if s.space {
                    " "
                } else {
                    ""
                };
                let alt = Spec {
                    alt: true,
                    length: Length::Long,
                    ..*s
                };
                self.number(&alt, sign, word, 16, false)
            }
            b'c' => self.padded(s, &[word as u8]),
            b's' => self.string(s, word, strings),
            b'n' => {
                self.outcome.refused_n += 1;
                self.out.put(b"<%n refused>")
            }
            // Floating-point and wide conversions: the raw word, so nothing is lost.
            _ => {
                self.outcome.not_implemented += 1;
                self.out.put(b"<not implemented: ")?;
                self.out.put(text)?;
                write!(ByteWriter(&mut *self.out), " {word:#x}>")
            }
        }
    }

    fn string<T: Strings>(&mut self, s: &Spec, addr: u64, strings: &mut T) -> fmt::Result {
        let limit = s.precision.unwrap_or(MAX_FIELD);
        if addr == 0 {
            return self.padded(s, if limit >= 6 { b"(null)" } else { b"" });
        }
        // Without a precision one byte more is asked for, to tell a cut string from one that
        // is exactly MAX_FIELD bytes long.
        let ask = if s.precision.is_some() {
            limit
        } else {
            limit + 1
        };
        match strings.c_string(addr, ask) {
            Ok(bytes) if bytes.len() > limit => {
                self.padded(s, &bytes[..limit])?;
                self.outcome.cut_strings += 1;
                write!(
                    ByteWriter(&mut *self.out),
                    "<cut: no NUL within {limit} bytes>"
                )
            }
            Ok(bytes) => self.padded(s, bytes),
            Err(e) => {
                self.outcome.unreadable_strings += 1;
                write!(ByteWriter(&mut *self.out), "<unreadable {addr:#x}: {e}>")
            }
        }
    }

    /// Text padded to the width with spaces (precision applies only to `%s`, handled there).
    fn padded(&mut self, s: &Spec, text: &[u8]) -> fmt::Result {
        let pad = s.width.saturating_sub(text.len());
        if !s.left {
            self.repeat(b' ', pad)?;
        }
        self.out.put(text)?;
        if s.left {
            self.repeat(b' ', pad)?;
        }
        Ok(())
    }

    fn number(&mut self, s: &Spec, sign: &str, v: u64, base: u64, upper: bool) -> fmt::Result {
        let mut buf = [0u8; 22]; // u64::MAX in octal
        let mut n = buf.len();
        let zero_with_zero_precision = v == 0 && s.precision == Some(0);
        if !zero_with_zero_precision {
            let table: &[u8; 16] = if upper {
                b"0123456789ABCDEF"
            } else {
                b"0123456789abcdef"
            };
            n = match base {
                16 => put_digits_pow2(&mut buf, v, 4, table),
                8 => put_digits_pow2(&mut buf, v, 3, table),
                _ => put_digits_dec(&mut buf, v),
            };
        }
        let digits = &buf[n..];
        let prefix: &[u8] = match base {
            16 if s.alt && v != 0 => {
                if upper {
                    b"0X"
                } else {
                    b"0x"
                }
            }
            _ => b"",
        };
        let mut zeros = s.precision.map_or(0, |p| p.saturating_sub(digits.len()));
        // `#o` forces a leading zero digit.
        if base == 8 && s.alt && zeros == 0 && digits.first() != Some(&b'0') {
            zeros = 1;
        }
        let body = sign.len() + prefix.len() + zeros + digits.len();
        let pad = s.width.saturating_sub(body);
        // The plain `%d`, `%x`: nothing around the digits.
        if body == digits.len() && pad == 0 {
            return self.out.put(digits);
        }
        let zero_pad = s.zero && !s.left && s.precision.is_none();
        let (lead_spaces, lead_zeros, trail_spaces) = match (s.left, zero_pad) {
            (true, _) => (0, zeros, pad),
            (false, true) => (0, zeros + pad, 0),
            (false, false) => (pad, zeros, 0),
        };
        // The usual field (`%016lx`, `%d`) fits a small buffer: one write instead of five.
        let mut field = [0u8; 64];
        if body + pad <= field.len() {
            let mut at = 0;
            field[..lead_spaces].fill(b' ');
            at += lead_spaces;
            for part in [sign.as_bytes(), prefix] {
                field[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
            field[at..at + lead_zeros].fill(b'0');
            at += lead_zeros;
            field[at..at + digits.len()].copy_from_slice(digits);
            at += digits.len();
            field[at..at + trail_spaces].fill(b' ');
            at += trail_spaces;
            return self.out.put(&field[..at]);
        }
        self.repeat(b' ', lead_spaces)?;
        self.out.put(sign.as_bytes())?;
        self.out.put(prefix)?;
        self.repeat(b'0', lead_zeros)?;
        self.out.put(digits)?;
        self.repeat(b' ', trail_spaces)
    }

    fn repeat(&mut self, byte: u8, n: usize) -> fmt::Result {
        let chunk = [byte; 32];
        let mut left = n;
        while left > 0 {
            let k = left.min(chunk.len());
            self.out.put(&chunk[..k])?;
            left -= k;
        }
        Ok(())
    }
}

/// Lets `write!` target a [`Sink`].
struct ByteWriter<'a, S: Sink>(&'a mut S);

impl<S: Sink> fmt::Write for ByteWriter<'_, S> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.put(s.as_bytes())
    }
}

/// A [`Sink`] over a fixed buffer that keeps what fits and drops the rest, for no_std callers.
pub struct FixedBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
    truncated: bool,
}

impl<const N: usize> FixedBuf<N> {
    pub const fn new() -> Self {
        FixedBuf {
            buf: [0; N],
            len: 0,
            truncated: false,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Whether output was dropped because the buffer was full.
    pub fn truncated(&self) -> bool {
        self.truncated
    }
}

impl<const N: usize> Default for FixedBuf<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Sink for FixedBuf<N> {
    fn put(&mut self, bytes: &[u8]) -> fmt::Result {
        let room = N - self.len;
        let k = bytes.len().min(room);
        self.buf[self.len..self.len + k].copy_from_slice(&bytes[..k]);
        self.len += k;
        self.truncated |= k < bytes.len();
        Ok(())
    }
}

/// Writes `v`'s digits in base 2^`shift` at the end of `buf`; returns where they start.
fn put_digits_pow2(buf: &mut [u8; 22], v: u64, shift: u32, table: &[u8; 16]) -> usize {
    let mask = (1u64 << shift) - 1;
    let mut n = buf.len();
    let mut x = v;
    loop {
        n -= 1;
        buf[n] = table[(x & mask) as usize];
        x >>= shift;
        if x == 0 {
            return n;
        }
    }
}

/// "00" to "99", for writing decimals two digits per division.
pub const DIGIT_PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Writes `v`'s decimal digits at the end of `buf`, two per division (the division by a
/// constant is a multiply, but still the cost of a digit); returns where they start.
fn put_digits_dec(buf: &mut [u8; 22], v: u64) -> usize {
    let mut n = buf.len();
    let mut x = v;
    while x >= 100 {
        let pair = (x % 100) as usize * 2;
        x /= 100;
        n -= 2;
        buf[n..n + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if x >= 10 {
        let pair = x as usize * 2;
        n -= 2;
        buf[n..n + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        n -= 1;
        buf[n] = b'0' + x as u8;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strings at fake addresses: 0x1000 → "hello", 0x2000 → "", anything else unreadable.
    struct Fake;
    impl Strings for Fake {
        type Error = &'static str;
        fn c_string(&mut self, addr: u64, max: usize) -> Result<&[u8], &'static str> {
            let s: &[u8] = match addr {
                0x1000 => b"hello",
                0x2000 => b"",
                _ => return Err("not in dump"),
            };
            Ok(&s[..s.len().min(max)])
        }
    }

    fn fmt(f: &str, args: &[u64]) -> (String, Outcome) {
        let mut out = FixedBuf::<512>::new();
        let outcome = format(&mut out, f.as_bytes(), args, &mut Fake).unwrap();
        (String::from_utf8(out.as_bytes().to_vec()).unwrap(), outcome)
    }

    fn s(f: &str, args: &[u64]) -> String {
        fmt(f, args).0
    }

    /// Steps print and count what the pieces they come from do, for every bare conversion and
    /// length, any number of data words (too few too), and they exist only when every piece
    /// is literal text or a bare number.
    #[test]
    fn steps_format_as_their_pieces_do() {
        let formats = [
            "",
            "plain text",
            "%d",
            "bench %u chore %u",
            "a %d b %i c %u d %x e %X f",
            "%hhd|%hd|%ld|%lld|%zu|%hhx|%hX|%llu",
            "%u%u%u%u",
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for f in formats {
            let kept: Vec<Piece> = pieces(f.as_bytes()).collect();
            let steps: Vec<Step> = kept
                .iter()
                .map(|p| p.step())
                .collect::<Option<_>>()
                .unwrap();
            for n in 0..6 {
                let args: Vec<u64> = (0..n)
                    .map(|i| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        [0, 1, u64::MAX, 1 << 63, -7i64 as u64, x >> (x % 64)][(i + n) % 6]
                    })
                    .collect();
                let mut by_steps = FixedBuf::<512>::new();
                let outcome = format_steps(&mut by_steps, f.as_bytes(), &steps, &args).unwrap();
                assert_eq!(
                    (
                        String::from_utf8(by_steps.as_bytes().to_vec()).unwrap(),
                        outcome
                    ),
                    fmt(f, &args),
                    "{f:?} with {args:x?}"
                );
            }
        }
        for general in ["%s", "a %5d", "%p %u", "%%", "%*d", "%c"] {
            let stepped: Option<Vec<Step>> = pieces(general.as_bytes()).map(Piece::step).collect();
            assert!(stepped.is_none(), "{general}");
        }
    }

    /// A piece said to be a bare number prints nothing but digits, hex letters and a minus sign
    /// (or `<missing arg>`), whatever the word; every other conversion is not one, and literal
    /// pieces give back their own bytes.
    #[test]
    fn bare_number_pieces_print_only_digits() {
        let bare = ["%d", "%i", "%u", "%x", "%X", "%hhd", "%lu", "%llx", "%zX"];
        let not = [
            "%5d", "%-d", "%+d", "%.3u", "%#x", "%s", "%c", "%p", "%%", "%*d", "%o",
        ];
        for f in bare.iter().chain(&not) {
            let kept: Vec<Piece> = pieces(f.as_bytes()).collect();
            assert_eq!(kept.len(), 1, "{f}");
            assert_eq!(kept[0].is_bare_number(), bare.contains(f), "{f}");
            assert_eq!(kept[0].literal(), None, "{f}");
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for f in bare {
            for _ in 0..2000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let out = s(f, &[x >> (x % 64)]);
                assert!(
                    out.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'),
                    "{f}: {out:?}"
                );
            }
            assert_eq!(s(f, &[]), "<missing arg>");
        }
        let f = b"a %d b";
        let literals: Vec<_> = pieces(f).filter_map(Piece::literal).collect();
        assert_eq!(literals, [0..2, 4..6]);
    }

    /// Pieces found once serve every record: `*` fields come from each record's own words.
    #[test]
    fn pieces_kept_format_each_record_with_its_own_words() {
        let f = b"w=[%*d] p=[%.*s] %%%c end";
        let kept: Vec<Piece> = pieces(f).collect();
        for args in [
            [5, 42, 3, 0x1000, b'x' as u64],
            [-4i64 as u64, 7, 9, 0x1000, b'!' as u64],
        ] {
            let mut out = FixedBuf::<128>::new();
            let with_kept = format_pieces(&mut out, f, kept.iter().copied(), &args, &mut Fake);
            let mut again = FixedBuf::<128>::new();
            let on_the_spot = format(&mut again, f, &args, &mut Fake);
            assert_eq!(with_kept, on_the_spot);
            assert_eq!(out.as_bytes(), again.as_bytes());
        }
        assert_eq!(
            s(
                "w=[%*d] p=[%.*s] %%%c end",
                &[5, 42, 3, 0x1000, b'x' as u64]
            ),
            "w=[   42] p=[hel] %x end"
        );
        // Pieces of a longer format name bytes a shorter one lacks: those print nothing (its
        // conversion still converts), and nothing panics.
        let long: Vec<Piece> = pieces(b"a long literal, then %d").collect();
        let mut out = FixedBuf::<64>::new();
        let outcome = format_pieces(&mut out, b"short", long, &[1], &mut Fake).unwrap();
        assert_eq!(out.as_bytes(), b"1");
        assert_eq!(outcome.args_used, 1);
    }

    /// A bare conversion takes the short path; a width of 1 (never wider than the digits) takes
    /// the general one: both must print the same for every length and word.
    #[test]
    fn bare_conversions_print_as_the_general_path_does() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut words = vec![
            0,
            1,
            9,
            10,
            u64::MAX,
            1 << 63,
            i64::MIN as u64 + 1,
            0x80,
            0x8000,
        ];
        for _ in 0..500 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            words.push(x >> (x % 64));
        }
        for len in ["hh", "h", "", "l", "ll", "z"] {
            for conv in ['d', 'i', 'u', 'x', 'X'] {
                for &w in &words {
                    let bare = format!("[%{len}{conv}]");
                    let general = format!("[%1{len}{conv}]");
                    assert_eq!(s(&bare, &[w]), s(&general, &[w]), "{bare} of {w:#x}");
                }
            }
        }
        assert_eq!(s("%d|%x", &[-7i64 as u64]), "-7|<missing arg>");
    }

    #[test]
    fn integers_narrow_like_varargs() {
        assert_eq!(s("%d", &[u64::MAX]), "-1");
        assert_eq!(s("%ld", &[u64::MAX]), "-1");
        assert_eq!(s("%u", &[u64::MAX]), "4294967295");
        assert_eq!(s("%lu", &[u64::MAX]), "18446744073709551615");
        assert_eq!(s("%hhd %hd %hhu", &[300, 70000, 300]), "44 4464 44");
        assert_eq!(s("%lo", &[u64::MAX]), "1777777777777777777777");
    }

    #[test]
    fn hex64format() {
        assert_eq!(
            s("task:%016lx curPD:%016lx", &[0x1f, 2]),
            "task:000000000000001f curPD:0000000000000002"
        );
        assert_eq!(s("%#x %#X %#o %#x", &[255, 255, 8, 0]), "0xff 0XFF 010 0");
    }

    #[test]
    fn flags_width_precision_as_glibc() {
        // Expected strings printed by glibc's printf for the same formats.
        assert_eq!(
            s("[%.0d][%#.0o][%#.0x][%+u][% u]", &[0, 0, 0, 5, 5]),
            "[][0][][5][5]"
        );
        assert_eq!(
            s(
                "[%#5.3x][%-#8o][%08.3d][%+.0d][% 05d]",
                &[0x1f, 8, -42i64 as u64, 0, -7i64 as u64]
            ),
            "[0x01f][010     ][    -042][+][-0007]"
        );
        assert_eq!(
            s("[%-05d][%5%][%05c]", &[3, b'z' as u64]),
            "[3    ][%][    z]"
        );
        assert_eq!(
            s("[%*d][%-*d][%.*d]", &[5, 42, 4, 7, 3, 9]),
            "[   42][7   ][009]"
        );
        assert_eq!(s("[%*d]", &[-4i64 as u64, 1]), "[1   ]");
    }

    #[test]
    fn pointers_as_glibc() {
        assert_eq!(
            s("[%+p][% p][%010p][%.20p]", &[0x1234; 4]),
            "[+0x1234][ 0x1234][0x00001234][0x00000000000000001234]"
        );
        assert_eq!(s("[%-10p][%10p]", &[0, 0]), "[(nil)     ][     (nil)]");
    }

    #[test]
    fn strings_read_through_the_source() {
        assert_eq!(
            s(
                "[%s][%.3s][%-7s][%7s][%s]",
                &[0x1000, 0x1000, 0x1000, 0x1000, 0x2000]
            ),
            "[hello][hel][hello  ][  hello][]"
        );
        assert_eq!(s("[%s][%.5s][%05s]", &[0, 0, 0x1000]), "[(null)][][hello]");
        let (text, o) = fmt("x=%s y=%d", &[0xdead, 7]);
        assert_eq!(text, "x=<unreadable 0xdead: not in dump> y=7");
        assert_eq!(o.unreadable_strings, 1);
        assert_eq!(o.args_used, 2);
    }

    #[test]
    fn percent_n_is_refused_and_missing_args_are_marked() {
        let (text, o) = fmt("a%nb %d %d", &[0x1000, 1]);
        assert_eq!(text, "a<%n refused>b 1 <missing arg>");
        assert_eq!((o.refused_n, o.missing_args, o.args_used), (1, 1, 2));
    }

    #[test]
    fn unknown_and_unfinished_specs_print_verbatim() {
        assert_eq!(s("%y %d", &[3]), "%y 3");
        assert_eq!(s("100%", &[]), "100%");
        assert_eq!(s("%5", &[]), "%5");
    }

    #[test]
    fn unimplemented_conversions_are_marked_with_their_word() {
        let (text, o) = fmt("%f|%d|%lS", &[0x4009_21fb_5444_2d18, 2, 0x1000]);
        assert_eq!(
            text,
            "<not implemented: %f 0x400921fb54442d18>|2|<not implemented: %lS 0x1000>"
        );
        assert_eq!((o.not_implemented, o.args_used), (2, 3));
        assert!(o.marked());
    }

    #[test]
    fn positional_arguments_are_marked_and_consume_nothing() {
        let (text, o) = fmt("%2$s %d %*3$d %.*1$x", &[7, 8, 9]);
        assert_eq!(
            text,
            "<not implemented: %2$s> 7 <not implemented: %*3$d> <not implemented: %.*1$x>"
        );
        assert_eq!((o.not_implemented, o.args_used), (3, 1));
    }

    #[test]
    fn hostile_widths_are_capped_and_marked() {
        let mut out = FixedBuf::<8192>::new();
        let o = format(&mut out, b"%2147483647d", &[1], &mut Fake).unwrap();
        let mark = b"<field capped at 4096>";
        assert_eq!(out.as_bytes().len(), MAX_FIELD + mark.len());
        assert!(out.as_bytes().ends_with(mark));
        assert_eq!(o.capped_fields, 1);
        // At the limit nothing is capped; one past it is; `*` widths alike.
        assert!(!fmt("%4096d", &[1]).1.marked());
        assert_eq!(fmt("%.4097s", &[0x1000]).1.capped_fields, 1);
        assert_eq!(fmt("%*d", &[5000, 1]).1.capped_fields, 1);
        assert_eq!(fmt("%-*d", &[-4096i64 as u64, 1]).1.capped_fields, 0);
    }

    #[test]
    fn strings_without_nul_are_cut_and_marked() {
        /// A string with no NUL: as many `a`s as asked for.
        struct Endless(Vec<u8>);
        impl Strings for Endless {
            type Error = &'static str;
            fn c_string(&mut self, _: u64, max: usize) -> Result<&[u8], &'static str> {
                self.0 = vec![b'a'; max];
                Ok(&self.0)
            }
        }
        let mut out = FixedBuf::<8192>::new();
        let o = format(&mut out, b"%s|%.10s", &[1, 1], &mut Endless(Vec::new())).unwrap();
        let text = out.as_bytes();
        let mark = b"<cut: no NUL within 4096 bytes>";
        assert_eq!(&text[MAX_FIELD..MAX_FIELD + mark.len()], mark);
        // A precision is the format's own limit: not a cut.
        assert!(text.ends_with(b"|aaaaaaaaaa"));
        assert_eq!(o.cut_strings, 1);
    }

    #[test]
    fn counts_conversions() {
        assert_eq!(count_args(b"no conversions 100%%"), 0);
        assert_eq!(count_args(b"task:%016lx curPD:%d"), 2);
        assert_eq!(count_args(b"%*.*d %s %y"), 4);
        assert_eq!(count_args(b"%"), 0);
    }

    #[test]
    fn fixed_buf_truncates() {
        let mut out = FixedBuf::<4>::new();
        format(&mut out, b"abcdef", &[], &mut Fake).unwrap();
        assert_eq!(out.as_bytes(), b"abcd");
        assert!(out.truncated());
    }
}
