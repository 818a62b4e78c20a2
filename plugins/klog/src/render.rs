//! Turning records into what the user reads: the message (format string and `%s` arguments read
//! from dump memory, formatted by klog-runtime's printf interpreter), and the FULL, TERSE and JSON
//! forms of a record.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;

use klog_runtime::printf::{self, Outcome, Sink, Strings};
use klog_runtime::{split_proc_dom, Desc};

use super::layout::ArrayAt;
use super::ring::Record;
use kcrash_plugin::cache::DirectMapped;
use kcrash_plugin::escape::{escape_into, is_plain, plain_without};
use kcrash_plugin::memory::{Memory, Unreadable};
use kcrash_plugin::JSON_VERSION;

/// Longest format string or `%s` argument read from the dump.
pub const STRING_MAX: usize = 4096;
/// Format strings remembered by address; the same few hundred descs recur millions of times.
const DESC_CACHE_MAX: usize = 1 << 16;
/// Bytes those may hold (text and pieces), whatever a hostile dump's formats: each printer has
/// its own cache.
const DESC_CACHE_BYTES: usize = 16 << 20;

/// How `klog` prints a record, after the design's KLOG_PRINT_FULL and terse types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// `[time] [chore][proc,dom,SUBSYS] message`
    Full,
    /// `[SUBSYS] message`
    Terse,
}

/// Turns clock ticks into seconds when the kernel recorded its clock frequency.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub hz: Option<u64>,
}

impl Clock {
    pub fn seconds(&self, ticks: u64) -> Option<f64> {
        self.hz
            .filter(|&hz| hz > 0)
            .map(|hz| ticks as f64 / hz as f64)
    }

    /// `   12.345678901` with a known frequency, `t=123456` in raw ticks otherwise.
    pub fn show(&self, ticks: u64) -> String {
        let mut v = Vec::with_capacity(24);
        self.write(&mut v, ticks);
        String::from_utf8(v).unwrap_or_default()
    }

    /// [`Clock::show`] appended to `out`.
    pub fn write(&self, out: &mut Vec<u8>, ticks: u64) {
        match self.split(ticks) {
            Some((secs, nanos)) => {
                push_seconds(out, secs);
                out.push(b'.');
                push_nine_digits(out, nanos);
            }
            None => push_ticks(out, ticks),
        }
    }

    /// Whole seconds and nanoseconds of `ticks`, with a known frequency.
    fn split(&self, ticks: u64) -> Option<(u64, u64)> {
        let hz = self.hz.filter(|&hz| hz > 0)?;
        let rem = ticks % hz;
        // rem < hz, so rem * 10^9 fits in 64 bits for any clock below 18 GHz.
        let nanos = match rem.checked_mul(1_000_000_000) {
            Some(scaled) => scaled / hz,
            None => (rem as u128 * 1_000_000_000 / hz as u128) as u64,
        };
        Some((ticks / hz, nanos))
    }
}

/// `   12`: a clock's whole seconds as lines show them.
fn push_seconds(out: &mut Vec<u8>, secs: u64) {
    push_dec_padded(out, secs, 5, b' ');
}

/// `t=123456`: a clock without a known frequency.
fn push_ticks(out: &mut Vec<u8>, ticks: u64) {
    out.extend_from_slice(b"t=");
    push_dec_padded(out, ticks, 0, b' ');
}

/// The text of the whole second a printer last wrote, which the next record nearly always
/// shares.
#[derive(Default)]
struct LastSecond {
    secs: Option<u64>,
    /// `   12.`: at most 20 digits and the point.
    text: Option<Kept<24>>,
}

impl LastSecond {
    /// [`Clock::write`], the whole seconds copied when they are the last record's.
    fn write(&mut self, clock: Clock, out: &mut Vec<u8>, ticks: u64) {
        let Some((secs, nanos)) = clock.split(ticks) else {
            return push_ticks(out, ticks);
        };
        let whole = |out: &mut Vec<u8>| {
            push_seconds(out, secs);
            out.push(b'.');
        };
        if self.secs != Some(secs) {
            self.text = Kept::of(&mut Vec::new(), whole);
            self.secs = Some(secs);
        }
        match &self.text {
            Some(text) => text.push_to(out),
            None => whole(out),
        }
        push_nine_digits(out, nanos);
    }
}

/// A format string as read from the dump, with its pieces found once for every record that
/// names it.
struct Format {
    bytes: Box<[u8]>,
    pieces: Box<[printf::Piece]>,
    /// The pieces as steps, when all are literal text and bare numbers: formatted with less
    /// work.
    steps: Option<Box<[printf::Step]>>,
    /// No NUL within [`STRING_MAX`] bytes: `bytes` is its first STRING_MAX.
    cut: bool,
    /// What every message of this format is known to be.
    plain: KnownPlain,
}

/// Whether a message is known to need no escaping before anyone looks at it: so when every
/// literal of its format is plain and every conversion a bare number, whose digits always are
/// (and so is the mark a cut format adds). Unknown (`false`) is always safe: the text is looked at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KnownPlain {
    /// Printable ASCII without `\\`: [`is_plain`].
    pub text: bool,
    /// That, and without `"`: a JSON string as it is.
    pub json: bool,
}

impl KnownPlain {
    fn of(fmt: &[u8], pieces: &[printf::Piece]) -> KnownPlain {
        if !pieces
            .iter()
            .all(|p| p.literal().is_some() || p.is_bare_number())
        {
            return KnownPlain::default();
        }
        let literals = || {
            pieces
                .iter()
                .filter_map(|p| p.literal())
                .map(|r| fmt.get(r).unwrap_or_default())
        };
        KnownPlain {
            text: literals().all(is_plain),
            json: literals().all(|l| plain_without(l, b'\\', b'"')),
        }
    }
}

/// What became of a record's format string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DescState {
    #[default]
    Read,
    /// Read, but cut at [`STRING_MAX`] bytes.
    Cut,
    /// `desc` is 0: there is no format string to read.
    Null,
    Unreadable,
    /// A minor event ID with no format: no table, an ID past its end, or an unreadable entry.
    UnknownEvent,
}

/// What decoding a message found besides its text; each mark is also in the text, where it
/// happened.
#[derive(Clone, Copy, Debug, Default)]
pub struct Decoded {
    pub printf: Outcome,
    pub desc: DescState,
    pub plain: KnownPlain,
}

impl Decoded {
    /// Whether decoding left any mark: [`Decoded::names`] is not empty.
    pub fn marked(&self) -> bool {
        self.desc != DescState::Read || self.printf.marked()
    }

    /// Short names of the marks, for JSON's `marks`.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        let o = &self.printf;
        [
            (self.desc == DescState::Null, "desc_null"),
            (self.desc == DescState::Unreadable, "desc_unreadable"),
            (self.desc == DescState::UnknownEvent, "event_unknown"),
            (self.desc == DescState::Cut, "format_cut"),
            (o.missing_args > 0, "missing_arg"),
            (o.unreadable_strings > 0, "string_unreadable"),
            (o.cut_strings > 0, "string_cut"),
            (o.capped_fields > 0, "field_capped"),
            (o.not_implemented > 0, "not_implemented"),
            (o.refused_n > 0, "n_refused"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
    }
}

/// Reads format strings and `%s` arguments from dump memory and formats messages.
pub struct Decoder<'a> {
    mem: &'a (dyn Memory + Sync),
    descs: HashMap<u64, Result<Format, Unreadable>, AddrHash>,
    /// What `descs` holds, in bytes.
    desc_bytes: usize,
    strings: DumpStrings<'a>,
    /// `KLogDescriptions`, which minor event IDs index, when the kernel has it.
    pub descriptions: Option<ArrayAt>,
    /// Format addresses by event ID, read from the table once each.
    events: HashMap<u64, Result<u64, String>, AddrHash>,
}

impl<'a> Decoder<'a> {
    pub fn new(mem: &'a (dyn Memory + Sync)) -> Self {
        Decoder {
            mem,
            descs: HashMap::default(),
            desc_bytes: 0,
            strings: DumpStrings {
                mem,
                buf: Vec::new(),
            },
            descriptions: None,
            events: HashMap::default(),
        }
    }

    /// The address of event `id`'s format, from `KLogDescriptions`, or why there is none.
    fn event_format(&mut self, id: u64) -> Result<u64, String> {
        let (mem, table) = (self.mem, self.descriptions);
        if self.events.len() >= DESC_CACHE_MAX && !self.events.contains_key(&id) {
            self.events.clear();
        }
        self.events
            .entry(id)
            .or_insert_with(|| match table {
                None => Err(format!("event {id}: no KLogDescriptions table is known")),
                Some(t) if id >= t.len => Err(format!(
                    "event {id}: KLogDescriptions has {} entries",
                    t.len
                )),
                Some(t) => mem.read_uint(t.element(id), 8).map_err(|e| {
                    format!("event {id}: KLogDescriptions[{id}] is unreadable at {e}")
                }),
            })
            .clone()
    }

    /// Appends the record's message to `text` (raw bytes) and returns what decoding found.
    /// The format is the desc word's own text (inline), or the string at its address, directly
    /// or through `KLogDescriptions` (event ID); a string is read once per address and kept.
    /// Without a format the arguments are shown raw, so nothing the record holds is hidden.
    pub fn message_into(&mut self, rec: &Record, text: &mut Vec<u8>) -> Decoded {
        let args = rec.data();
        let desc = match rec.desc_kind {
            Desc::Pointer => rec.desc(),
            Desc::Inline => {
                let word = rec.desc().to_le_bytes();
                let format = inline_format(&word);
                let mut sink = VecSink(text);
                let printf =
                    printf::format(&mut sink, format, &args, &mut self.strings).unwrap_or_default();
                return Decoded {
                    printf,
                    ..Decoded::default()
                };
            }
            Desc::Event => match self.event_format(rec.desc()) {
                Ok(at) => at,
                Err(why) => {
                    text.extend_from_slice(format!("<{why}; args").as_bytes());
                    push_raw_args(text, &args);
                    return Decoded {
                        desc: DescState::UnknownEvent,
                        ..Decoded::default()
                    };
                }
            },
        };
        if desc == 0 {
            text.extend_from_slice(b"<no format string: desc is 0; args");
            push_raw_args(text, &args);
            return Decoded {
                desc: DescState::Null,
                ..Decoded::default()
            };
        }
        if (self.descs.len() >= DESC_CACHE_MAX || self.desc_bytes >= DESC_CACHE_BYTES)
            && !self.descs.contains_key(&desc)
        {
            self.descs.clear();
            self.desc_bytes = 0;
        }
        let (mem, desc_bytes) = (self.mem, &mut self.desc_bytes);
        let format = self.descs.entry(desc).or_insert_with(|| {
            // One byte more than is kept, to tell a cut format from one of exactly STRING_MAX.
            let mut s = Vec::new();
            mem.read_cstring(desc, STRING_MAX + 1, &mut s).map(|()| {
                let cut = s.len() > STRING_MAX;
                s.truncate(STRING_MAX);
                let pieces: Box<[printf::Piece]> = printf::pieces(&s).collect();
                let steps: Option<Box<[printf::Step]>> = pieces.iter().map(|p| p.step()).collect();
                let format = Format {
                    plain: KnownPlain::of(&s, &pieces),
                    steps,
                    pieces,
                    bytes: s.into_boxed_slice(),
                    cut,
                };
                *desc_bytes += format.bytes.len()
                    + format.pieces.len() * std::mem::size_of::<printf::Piece>()
                    + format
                        .steps
                        .as_ref()
                        .map_or(0, |s| std::mem::size_of_val(&**s));
                format
            })
        });
        match format {
            Ok(f) => {
                let mut sink = VecSink(text);
                let printf = match &f.steps {
                    Some(steps) => printf::format_steps(&mut sink, &f.bytes, steps, &args),
                    None => {
                        let pieces = f.pieces.iter().copied();
                        printf::format_pieces(&mut sink, &f.bytes, pieces, &args, &mut self.strings)
                    }
                }
                .unwrap_or_default();
                let desc = if f.cut {
                    text.extend_from_slice(
                        format!("<format cut: no NUL within {STRING_MAX} bytes>").as_bytes(),
                    );
                    DescState::Cut
                } else {
                    DescState::Read
                };
                Decoded {
                    printf,
                    desc,
                    plain: f.plain,
                }
            }
            Err(e) => {
                text.extend_from_slice(format!("<unreadable desc {e}; args").as_bytes());
                push_raw_args(text, &args);
                Decoded {
                    desc: DescState::Unreadable,
                    ..Decoded::default()
                }
            }
        }
    }

    /// The record's format, if [`Decoder::message_into`] has read it and could.
    pub fn format(&self, rec: &Record) -> Option<Cow<'_, [u8]>> {
        let desc = match rec.desc_kind {
            Desc::Pointer => rec.desc(),
            Desc::Inline => {
                return Some(Cow::Owned(
                    inline_format(&rec.desc().to_le_bytes()).to_vec(),
                ));
            }
            Desc::Event => self.events.get(&rec.desc())?.clone().ok()?,
        };
        match self.descs.get(&desc)? {
            Ok(f) => Some(Cow::Borrowed(&f.bytes)),
            Err(_) => None,
        }
    }
}

/// An inline description's format: the desc word's bytes (in the dump's order) up to the first
/// NUL.
fn inline_format(word: &[u8; 8]) -> &[u8] {
    word.split(|&b| b == 0).next().unwrap_or(word)
}

/// ` 0x1 0x2 0x3>`: a record's data words when there is no format to print them with.
fn push_raw_args(text: &mut Vec<u8>, args: &[u64]) {
    for &a in args {
        text.extend_from_slice(b" 0x");
        push_hex(text, a);
    }
    text.push(b'>');
}

/// Hashes addresses by one multiplication: the desc cache is looked up once per record, and
/// SipHash's resistance to chosen keys buys nothing for addresses read from a dump.
#[derive(Default, Clone, Copy)]
struct AddrHash;

impl std::hash::BuildHasher for AddrHash {
    type Hasher = AddrHasher;
    fn build_hasher(&self) -> AddrHasher {
        AddrHasher(0)
    }
}

struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

struct VecSink<'v>(&'v mut Vec<u8>);

impl Sink for VecSink<'_> {
    fn put(&mut self, bytes: &[u8]) -> std::fmt::Result {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

/// `%s` arguments read from dump memory.
struct DumpStrings<'a> {
    mem: &'a (dyn Memory + Sync),
    buf: Vec<u8>,
}

impl Strings for DumpStrings<'_> {
    type Error = String;

    fn c_string(&mut self, addr: u64, max: usize) -> Result<&[u8], String> {
        // The formatter asks for one byte past its limit to see whether a string was cut.
        match self
            .mem
            .read_cstring(addr, max.min(STRING_MAX + 1), &mut self.buf)
        {
            Ok(()) => Ok(&self.buf),
            // The formatter prints the address itself.
            Err(e) if e.addr == addr => Err(e.reason),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// `v` in decimal, padded on the left to `width` with `pad`.
pub fn push_dec_padded(out: &mut Vec<u8>, v: u64, width: usize, pad: u8) {
    // Most of a JSON line's numbers (processor, domain, counts) are one digit.
    if v < 10 && width <= 1 {
        out.push(b'0' + v as u8);
        return;
    }
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(v).as_bytes();
    if digits.len() < width {
        out.resize(out.len() + width - digits.len(), pad);
    }
    out.extend_from_slice(digits);
}

/// A short text a printer keeps to copy into many lines, in N bytes: copied whole, then cut to
/// its length, which costs less than a copy of a varying length.
struct Kept<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Kept<N> {
    /// What `write` writes (into `scratch`, cleared first), when it fits in N bytes.
    fn of(scratch: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) -> Option<Kept<N>> {
        scratch.clear();
        write(scratch);
        let mut bytes = [0u8; N];
        bytes.get_mut(..scratch.len())?.copy_from_slice(scratch);
        Some(Kept {
            bytes,
            len: scratch.len(),
        })
    }

    fn push_to(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.extend_from_slice(&self.bytes);
        out.truncate(at + self.len);
    }
}

/// `v` in lower-case hex, without `0x`.
pub fn push_hex(out: &mut Vec<u8>, v: u64) {
    let (digits, shown) = hex_digits(v);
    let len = out.len();
    out.extend_from_slice(&digits);
    out.truncate(len + shown);
}

/// A word's hex digits, first in the array, and how many show.
type HexDigits = ([u8; 16], usize);

/// `v`'s hex digits without leading zeros (one for 0), first in the array, and how many there
/// are. The nibbles are spread one to a byte and turned into digits all at once, instead of a
/// table lookup per digit.
fn hex_digits(v: u64) -> HexDigits {
    // A data word a format does not use is 0 (the writer stores it so), and most records'
    // formats leave one or two unused: one digit, without the spreading.
    if v < 16 {
        let mut digits = [0u8; 16];
        digits[0] = b"0123456789abcdef"[v as usize];
        return (digits, 1);
    }
    let mut x = u128::from(v);
    // Nibble i of v ends in byte i of x.
    x = (x | (x << 32)) & 0x0000_0000_ffff_ffff_0000_0000_ffff_ffff;
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff_0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff_00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f_0f0f_0f0f_0f0f_0f0f;
    const ONES: u128 = 0x0101_0101_0101_0101_0101_0101_0101_0101;
    // 1 in each byte whose nibble is above 9: those take a letter, b'a' - b'0' - 10 further on.
    let letters = ((x + 6 * ONES) >> 4) & ONES;
    let digits = x + u128::from(b'0') * ONES + letters * u128::from(b'a' - b'0' - 10);
    let shown = (16 - v.leading_zeros() as usize / 4).max(1);
    // The leading zeros shifted out at the top; what follows the digits is not shown.
    ((digits << (8 * (16 - shown))).to_be_bytes(), shown)
}

/// A finite `t` as Rust's `Display` writes it (the shortest digits that read back as `t`, never
/// an exponent), from zmij's digits: `Display` took a ninth of `klog --json`'s time. The two
/// differ only where two shortest forms are equally near `t`, which needs an exact value of at
/// most 18 digits: those `Display` writes. A clock's seconds (ticks over a frequency) have far
/// more.
fn push_f64(out: &mut Vec<u8>, t: f64) {
    if !many_digits(t) {
        // Writing to a Vec cannot fail.
        drop(write!(out, "{t}"));
        return;
    }
    let mut buf = zmij::Buffer::new();
    let shown = buf.format_finite(t).as_bytes();
    // A clock's seconds nearly always: already Display's form, digits around a point. With many
    // digits, |t| is below 2^27 (53 bits of mantissa, 26 of them after the point); zmij writes
    // an exponent only below 10^-5, so from 10^-3 up no look at the bytes is needed.
    // (One pass over them below: `contains` calls memchr, dearer than the look for so few.)
    let plain = t.abs() >= 1e-3
        || shown.iter().fold((false, false), |(p, e), &c| {
            (p | (c == b'.'), e | (c == b'e'))
        }) == (true, false);
    if plain {
        out.extend_from_slice(shown);
        return;
    }
    let (negative, shown) = match shown.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, shown),
    };
    let (mantissa, exp) = match shown.iter().position(|&c| c == b'e') {
        Some(at) => (&shown[..at], parse_exp(&shown[at + 1..])),
        None => (shown, 0),
    };
    let (int, frac) = match mantissa.iter().position(|&c| c == b'.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, &b""[..]),
    };
    // The significant digits, and where the point goes among them.
    let mut digits = [0u8; 40];
    let mut n = 0;
    for &d in int.iter().chain(frac).take(digits.len()) {
        digits[n] = d;
        n += 1;
    }
    let mut sig = &digits[..n];
    let mut point = int.len() as i64 + exp;
    while let [b'0', rest @ ..] = sig {
        sig = rest;
        point -= 1;
    }
    while let [rest @ .., b'0'] = sig {
        sig = rest;
    }
    if negative {
        out.push(b'-');
    }
    if sig.is_empty() {
        out.push(b'0');
    } else if point <= 0 {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + point.unsigned_abs() as usize, b'0');
        out.extend_from_slice(sig);
    } else if point as usize >= sig.len() {
        out.extend_from_slice(sig);
        out.resize(out.len() + point as usize - sig.len(), b'0');
    } else {
        out.extend_from_slice(&sig[..point as usize]);
        out.push(b'.');
        out.extend_from_slice(&sig[point as usize..]);
    }
}

/// Whether `t`'s exact decimal value has more than 18 significant digits. `t` is m·2^e with m
/// odd; for e ≤ -26 it is m·5^-e / 10^-e, and 5^26 alone has 19 digits.
fn many_digits(t: f64) -> bool {
    let bits = t.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i64;
    let fraction = bits & ((1 << 52) - 1);
    let (m, e) = match biased {
        0 => (fraction, -1074),
        _ => (fraction | 1 << 52, biased - 1075),
    };
    m != 0 && e + i64::from(m.trailing_zeros()) <= -26
}

/// zmij's exponent (`+16`, `-07`, `5`).
fn parse_exp(text: &[u8]) -> i64 {
    let (sign, digits) = match text {
        [b'-', rest @ ..] => (-1, rest),
        [b'+', rest @ ..] => (1, rest),
        _ => (1, text),
    };
    sign * digits
        .iter()
        .fold(0i64, |v, &d| v * 10 + i64::from(d.wrapping_sub(b'0') % 10))
}

/// `v` (below 10^9) as exactly nine decimal digits, two at a time: a fixed count, so the loop
/// unrolls.
fn push_nine_digits(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 9];
    let mut x = v as u32;
    for at in [7, 5, 3, 1] {
        let pair = (x % 100) as usize * 2;
        x /= 100;
        buf[at..at + 2].copy_from_slice(&printf::DIGIT_PAIRS[pair..pair + 2]);
    }
    buf[0] = b'0' + (x % 10) as u8;
    out.extend_from_slice(&buf);
}

/// What a damaged record says instead of (or after) its message. Asked of every record, most
/// of them whole: the answer for those is inlined.
#[inline]
fn damage_note(rec: &Record, names: &[String]) -> Option<String> {
    match rec.damage.any() {
        true => damage_text(rec, names),
        false => None,
    }
}

#[cold]
fn damage_text(rec: &Record, names: &[String]) -> Option<String> {
    let d = &rec.damage;
    if d.unreadable {
        let why = rec
            .unreadable
            .as_ref()
            .map_or(String::new(), |e| e.to_string());
        return Some(format!("<unreadable record {why}>"));
    }
    if d.torn {
        return Some("<torn: the writer was interrupted before finishing this record>".into());
    }
    if d.never_written {
        return Some(
            "<never written: all eight words are zero, yet next_write says the ring wrapped past \
             this slot>"
                .into(),
        );
    }
    if d.bad_header {
        return Some(format!(
            "<not a KLOG record: header {:#018x}>",
            rec.header()
        ));
    }
    let mut notes = Vec::new();
    if d.foreign_header {
        let s = rec
            .subsystem
            .map_or(String::new(), |s| subsystem_name(names, s));
        notes.push(format!("<header of subsystem {s} in this ring>"));
    }
    if d.clock_backwards {
        notes.push(
            "<clock older than the ring's oldest records: a stale record of the previous lap?>"
                .into(),
        );
    }
    (!notes.is_empty()).then(|| notes.join(" "))
}

/// A subsystem's name by id, `SUBSYS<id>` for ids the kernel did not declare.
pub fn subsystem_name(names: &[String], id: u16) -> String {
    names
        .get(id as usize)
        .cloned()
        .unwrap_or_else(|| format!("SUBSYS{id}"))
}

/// The subsystem a record belongs to: its header's, or its ring's when the header is damaged
/// (KLogs holds a set of `names.len()` KLogs per processor).
pub fn subsystem_name_of<'n>(names: &'n [String], rec: &Record) -> Cow<'n, str> {
    let id = subsystem_id(names, rec);
    match names.get(id as usize) {
        Some(n) => Cow::Borrowed(n),
        None => Cow::Owned(format!("SUBSYS{id}")),
    }
}

/// The id of the subsystem [`subsystem_name_of`] names.
fn subsystem_id(names: &[String], rec: &Record) -> u16 {
    rec.subsystem
        .unwrap_or((rec.ring % names.len().max(1)) as u16)
}

/// Writes records as text lines or JSON objects.
pub struct Printer<'a> {
    pub decoder: Decoder<'a>,
    /// Subsystem names by id (from the rings).
    pub names: Vec<String>,
    pub clock: Clock,
    message: Vec<u8>,
    /// For escaping one JSON string at a time.
    scratch: Vec<u8>,
    /// JSON parts by call site.
    sites: DirectMapped<SiteKey, SiteJson>,
    /// JSON's processor and domain, by their word.
    proc_doms: DirectMapped<u64, ProcDomJson>,
    /// FULL lines' tags by chore, processor and domain, and subsystem.
    tags: DirectMapped<(u64, u64, u16), Tag>,
    last_second: LastSecond,
}

impl<'a> Printer<'a> {
    pub fn new(mem: &'a (dyn Memory + Sync), names: Vec<String>, clock: Clock) -> Self {
        Printer {
            decoder: Decoder::new(mem),
            names,
            clock,
            message: Vec::with_capacity(256),
            scratch: Vec::with_capacity(256),
            sites: DirectMapped::new(SITE_BITS),
            tags: DirectMapped::new(TAG_BITS),
            proc_doms: DirectMapped::new(PROC_DOM_BITS),
            last_second: LastSecond::default(),
        }
    }

    /// The same printer decoding minor event IDs through `klog`'s `KLogDescriptions`.
    pub fn with_descriptions(mut self, klog: &super::Klog) -> Self {
        self.decoder.descriptions = klog.layout.descriptions;
        self
    }

    /// The record's message, raw, formatted into the printer's buffer (for filters on it).
    pub fn message_text(&mut self, rec: &Record) -> &[u8] {
        self.message.clear();
        self.decoder.message_into(rec, &mut self.message);
        &self.message
    }

    /// Appends one line of text for `rec` to `line`.
    pub fn text(&mut self, line: &mut Vec<u8>, rec: &Record, style: Style) {
        if style == Style::Full {
            line.push(b'[');
            self.last_second.write(self.clock, line, rec.clock());
            let sub = subsystem_id(&self.names, rec);
            let key = (rec.id(), rec.proc_dom(), sub);
            let hash = rec.id() ^ rec.proc_dom().rotate_left(29) ^ u64::from(sub);
            let (names, scratch) = (&self.names, &mut self.scratch);
            let tag = self.tags.get_or_insert_with(key, hash, |_| {
                Kept::of(scratch, |t| push_tag(t, rec, names))
            });
            match tag {
                Some(tag) => tag.push_to(line),
                None => push_tag(line, rec, &self.names),
            }
        } else {
            line.push(b'[');
            line.extend_from_slice(subsystem_name_of(&self.names, rec).as_bytes());
            line.extend_from_slice(b"] ");
        }
        let note = damage_note(rec, &self.names);
        let readable = !rec.damage.no_message();
        if readable {
            // Formatted in place; escaped through the scratch buffer only when it must be.
            let start = line.len();
            let decoded = self.decoder.message_into(rec, line);
            if !decoded.plain.text && !is_plain(&line[start..]) {
                self.message.clear();
                self.message.extend_from_slice(&line[start..]);
                line.truncate(start);
                escape_into(&self.message, line);
            }
        }
        if let Some(note) = note {
            if readable {
                line.push(b' ');
            }
            line.extend_from_slice(note.as_bytes());
        }
        line.push(b'\n');
    }

    /// One JSON object (one line) for `rec`, with every raw word. Written byte by byte like the
    /// text lines; the fields are documented in kcrash/README.md. What follows from the call
    /// site alone comes from its [`SiteJson`], rendered once.
    pub fn json(&mut self, b: &mut Vec<u8>, rec: &Record, ring_name: &str) {
        let readable = !rec.damage.no_message();
        let key = SiteKey {
            ring: rec.ring,
            subsystem: rec.subsystem,
            header: rec.words[0],
            id: rec.words[1],
            desc: rec.words[4],
            desc_kind: rec.desc_kind,
            readable,
        };
        let (decoder, message, names) = (&mut self.decoder, &mut self.message, &self.names);
        let site = self.sites.get_or_insert_with(key, key.hash(), |key| {
            // A new site's parts show its format, which decoding the message reads.
            if key.readable {
                message.clear();
                decoder.message_into(rec, message);
            }
            SiteJson::new(key, rec, ring_name, decoder, names)
        });
        let args: [HexDigits; 3] = std::array::from_fn(|i| hex_digits(rec.words[5 + i]));
        // Constant text rides with its neighbours: each piece appended costs a capacity check
        // and a length update, whatever its size.
        b.extend_from_slice(&site.head);
        push_dec_padded(b, rec.slot, 0, b' ');
        b.extend_from_slice(b",\"seq\":");
        push_dec_padded(b, rec.seq, 0, b' ');
        b.extend_from_slice(&site.names);
        let pd = self
            .proc_doms
            .get_or_insert_with(rec.proc_dom(), rec.proc_dom(), |&word| {
                ProcDomJson::new(word)
            });
        match &pd.fields {
            Some(fields) => fields.push_to(b),
            None => push_proc_dom(b, rec.proc_dom()),
        }
        push_dec_padded(b, rec.clock(), 0, b' ');
        b.extend_from_slice(&site.desc);
        match self.clock.seconds(rec.clock()) {
            Some(t) if t.is_finite() => push_f64(b, t),
            _ => b.extend_from_slice(b"null"),
        }
        b.extend_from_slice(&site.format);
        push_hex_quoted::<false>(b, &args[0]);
        push_hex_quoted::<true>(b, &args[1]);
        push_hex_quoted::<true>(b, &args[2]);
        // Whether the message's closing quote is still to write.
        let mut open = false;
        let outcome = if readable {
            // The message is formatted in place, after a digit for the data words it used,
            // which formatting tells.
            b.extend_from_slice(b"],\"args_used\":0,\"message\":\"");
            let start = b.len();
            let digit = start - b"0,\"message\":\"".len();
            let o = self.decoder.message_into(rec, b);
            open = o.plain.json || plain_without(&b[start..], b'\\', b'"');
            if !open {
                self.message.clear();
                self.message.extend_from_slice(&b[start..]);
                b.truncate(start - 1);
                json_str(b, &self.message, &mut self.scratch);
            }
            // At most the record's three data words: one digit.
            match u8::try_from(o.printf.args_used) {
                Ok(d @ 0..=9) => b[digit] = b'0' + d,
                _ => drop(b.splice(digit..=digit, o.printf.args_used.to_string().bytes())),
            }
            Some(o)
        } else {
            b.extend_from_slice(b"],\"args_used\":null,\"message\":null");
            None
        };
        let unreadable = outcome.map_or(0, |o| o.printf.unreadable_strings);
        let marked = outcome.filter(Decoded::marked);
        if unreadable == 0 && !rec.damage.any() && marked.is_none() {
            // Most records: no string unreadable, no damage (so no note), no mark.
            if open {
                b.extend_from_slice(WHOLE);
            } else {
                b.extend_from_slice(&WHOLE[1..]);
            }
        } else {
            if open {
                b.push(b'"');
            }
            b.extend_from_slice(b",\"unreadable_strings\":");
            push_dec_padded(b, unreadable as u64, 0, b' ');
            b.extend_from_slice(b",\"damage\":");
            push_names(b, rec.damage.names());
            b.extend_from_slice(b",\"marks\":");
            push_names(b, marked.iter().flat_map(Decoded::names));
            b.extend_from_slice(b",\"note\":");
            match damage_note(rec, &self.names) {
                Some(n) => json_str(b, n.as_bytes(), &mut self.scratch),
                None => b.extend_from_slice(b"null"),
            }
        }
        b.extend_from_slice(&site.words);
        push_hex_quoted::<false>(b, &pd.hex);
        push_hex_quoted::<true>(b, &hex_digits(rec.words[3]));
        b.extend_from_slice(&site.words_desc);
        for a in &args {
            push_hex_quoted::<true>(b, a);
        }
        b.extend_from_slice(b"]}\n");
    }
}

/// What follows a JSON line's readable message, its closing quote first, when no `%s` string
/// was unreadable and the record is neither damaged nor marked.
const WHOLE: &[u8] = b"\",\"unreadable_strings\":0,\"damage\":[],\"marks\":[],\"note\":null";

/// `] [chore][processor,domain,SUBSYS] `: what follows a FULL line's time, written out.
fn push_tag(out: &mut Vec<u8>, rec: &Record, names: &[String]) {
    let (processor, domain) = split_proc_dom(rec.proc_dom());
    out.extend_from_slice(b"] [");
    push_hex(out, rec.id());
    out.extend_from_slice(b"][");
    push_dec_padded(out, processor as u64, 0, b' ');
    out.push(b',');
    push_dec_padded(out, domain as u64, 0, b' ');
    out.push(b',');
    out.extend_from_slice(subsystem_name_of(names, rec).as_bytes());
    out.extend_from_slice(b"] ");
}

/// A FULL line's tag follows from its chore, its processor and domain word and its subsystem,
/// which few records of a log do not share with many others: a printer keeps the tags of
/// 2^TAG_BITS of them, each in TAG_MAX bytes (a longer one is written out every time).
type Tag = Option<Kept<TAG_MAX>>;
const TAG_BITS: u32 = 8;
const TAG_MAX: usize = 64;

/// What a JSON line shows of its processor and domain word: `P,"domain":D,"clock":"` and the
/// word in hex, kept by the word, which a log's records share many to one (there are as many
/// as processors, times domains).
struct ProcDomJson {
    /// 10 digits at most each, and the keys.
    fields: Option<Kept<48>>,
    hex: HexDigits,
}

impl ProcDomJson {
    fn new(word: u64) -> ProcDomJson {
        ProcDomJson {
            fields: Kept::of(&mut Vec::new(), |t| push_proc_dom(t, word)),
            hex: hex_digits(word),
        }
    }
}

/// `P,"domain":D,"clock":"` of a processor and domain word: the fields, and the key of the
/// clock that follows.
fn push_proc_dom(out: &mut Vec<u8>, word: u64) {
    let (processor, domain) = split_proc_dom(word);
    push_dec_padded(out, u64::from(processor), 0, b' ');
    out.extend_from_slice(b",\"domain\":");
    push_dec_padded(out, u64::from(domain), 0, b' ');
    out.extend_from_slice(b",\"clock\":\"");
}

/// A printer keeps 2^PROC_DOM_BITS [`ProcDomJson`]s.
const PROC_DOM_BITS: u32 = 6;

/// A printer keeps the JSON parts of 2^SITE_BITS call sites: more than a kernel's rings usually
/// hold at once. A site whose slot another took is rendered again, never mixed up with it.
const SITE_BITS: u32 = 8;

/// What the parts of a record's JSON in [`SiteJson`] follow from: its ring and subsystem, the
/// words that name its call site, and whether its message could be read.
#[derive(Clone, Copy, PartialEq, Eq)]
struct SiteKey {
    ring: usize,
    subsystem: Option<u16>,
    header: u64,
    id: u64,
    desc: u64,
    desc_kind: Desc,
    readable: bool,
}

impl SiteKey {
    /// The words that differ most between call sites, mixed, for [`DirectMapped`].
    fn hash(&self) -> u64 {
        self.desc ^ self.id.rotate_left(29) ^ self.ring as u64
    }
}

/// What a record's JSON line has in common with every line of its call site: the names, the
/// header, id and desc words in hex, the format quoted. Rendered once per site instead of once
/// per line, where they were a third of the line's work; in the line's order, each a slice of
/// its own, which a line copies without bounds to check.
struct SiteJson {
    /// `{"kcrash_json":1,"ring":R,"slot":`
    head: Box<[u8]>,
    /// `,"ring_name":…,"subsystem":…,"subsystem_name":…,"header":…,"id":…,"processor":`
    names: Box<[u8]>,
    /// `","desc":…,"desc_kind":…,"time_s":`: the clock's closing quote first
    desc: Box<[u8]>,
    /// `,"format":…,"args":[`
    format: Box<[u8]>,
    /// `,"words":[header,id,`
    words: Box<[u8]>,
    /// `,desc`
    words_desc: Box<[u8]>,
}

impl SiteJson {
    fn new(
        key: &SiteKey,
        rec: &Record,
        ring_name: &str,
        decoder: &Decoder<'_>,
        names: &[String],
    ) -> SiteJson {
        let mut b = Vec::new();
        let mut scratch = Vec::new();
        let part = |b: &mut Vec<u8>| std::mem::take(b).into_boxed_slice();
        b.extend_from_slice(b"{\"kcrash_json\":");
        push_dec_padded(&mut b, u64::from(JSON_VERSION), 0, b' ');
        b.extend_from_slice(b",\"ring\":");
        push_dec_padded(&mut b, key.ring as u64, 0, b' ');
        b.extend_from_slice(b",\"slot\":");
        let head = part(&mut b);
        b.extend_from_slice(b",\"ring_name\":");
        json_quoted(&mut b, ring_name.as_bytes());
        b.extend_from_slice(b",\"subsystem\":");
        match key.subsystem {
            Some(s) => push_dec_padded(&mut b, s as u64, 0, b' '),
            None => b.extend_from_slice(b"null"),
        }
        b.extend_from_slice(b",\"subsystem_name\":");
        json_quoted(&mut b, subsystem_name_of(names, rec).as_bytes());
        // Each word's hex once: header, id and desc show again in `words`.
        let [header, id, desc] = [key.header, key.id, key.desc].map(hex_digits);
        for (name, hex) in [(&b",\"header\":"[..], &header), (b",\"id\":", &id)] {
            b.extend_from_slice(name);
            push_hex_quoted::<false>(&mut b, hex);
        }
        b.extend_from_slice(b",\"processor\":");
        let names = part(&mut b);
        b.extend_from_slice(b"\",\"desc\":");
        push_hex_quoted::<false>(&mut b, &desc);
        b.extend_from_slice(b",\"desc_kind\":");
        b.extend_from_slice(match key.desc_kind {
            Desc::Pointer => b"\"pointer\"",
            Desc::Inline => b"\"inline\"",
            Desc::Event => b"\"event\"",
        });
        b.extend_from_slice(b",\"time_s\":");
        let desc_part = part(&mut b);
        b.extend_from_slice(b",\"format\":");
        match key.readable.then(|| decoder.format(rec)).flatten() {
            Some(f) => json_str(&mut b, &f, &mut scratch),
            None => b.extend_from_slice(b"null"),
        }
        b.extend_from_slice(b",\"args\":[");
        let format = part(&mut b);
        b.extend_from_slice(b",\"words\":[");
        for hex in [&header, &id] {
            push_hex_quoted::<false>(&mut b, hex);
            b.push(b',');
        }
        let words = part(&mut b);
        push_hex_quoted::<true>(&mut b, &desc);
        SiteJson {
            head,
            names,
            desc: desc_part,
            format,
            words,
            words_desc: part(&mut b),
        }
    }
}

/// A JSON string of `raw` as kcrash shows text: escaped for a terminal first (so JSON and text
/// agree), then quoted for JSON.
fn json_str(out: &mut Vec<u8>, raw: &[u8], scratch: &mut Vec<u8>) {
    // Nearly always printable ASCII that neither escape changes: one look, one copy.
    if plain_without(raw, b'\\', b'"') {
        json_plain(out, raw);
        return;
    }
    scratch.clear();
    escape_into(raw, scratch);
    json_quoted(out, scratch);
}

/// A JSON string of `plain` text, which neither escape would change.
fn json_plain(out: &mut Vec<u8>, plain: &[u8]) {
    out.push(b'"');
    out.extend_from_slice(plain);
    out.push(b'"');
}

/// A JSON string of text already escaped for a terminal (subsystem names are, when read).
fn json_quoted(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'"');
    // Nearly always nothing to escape: one look at every byte (16 at a time), one copy.
    if !text.iter().fold(false, |odd, &c| odd | json_escapes(c)) {
        out.extend_from_slice(text);
        out.push(b'"');
        return;
    }
    let mut rest = text;
    // Plain runs are copied whole; only the bytes JSON must escape are looked at one by one.
    while let Some(at) = rest.iter().position(|&c| json_escapes(c)) {
        out.extend_from_slice(&rest[..at]);
        match rest[at] {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            c => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
        }
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

/// Whether JSON must escape byte `c` in a string.
fn json_escapes(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20
}

/// `"0x…"`, as kcrash's `report::Hex` writes a 64-bit word, after a comma if `COMMA` (an
/// array's next item).
fn push_hex_quoted<const COMMA: bool>(out: &mut Vec<u8>, &(digits, shown): &HexDigits) {
    let mut buf = [0u8; 21];
    buf[..4].copy_from_slice(b",\"0x");
    buf[4..20].copy_from_slice(&digits);
    buf[4 + shown] = b'"';
    // Copies of a constant length, then a cut: no call to memcpy for a handful of bytes.
    let lead = usize::from(COMMA);
    let len = out.len();
    out.extend_from_slice(&buf[1 - lead..]);
    out.truncate(len + lead + 4 + shown);
}

/// A JSON array of short names (plain ASCII, nothing to escape).
fn push_names<'n>(out: &mut Vec<u8>, names: impl IntoIterator<Item = &'n str>) {
    out.push(b'[');
    for (i, name) in names.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json_quoted(out, name.as_bytes());
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::Damage;
    use kcrash_plugin::memory::Runs;

    fn record(desc_kind: Desc, desc: u64, data: u64) -> Record {
        Record {
            ring: 0,
            seq: 0,
            slot: 0,
            words: [0, 0, 0, 0, desc, data, 0, 0],
            subsystem: Some(0),
            desc_kind,
            damage: Damage::default(),
            unreadable: None,
            sort_clock: 0,
        }
    }

    /// KLogDescriptions at 0x1000 with one entry, "idle %u" at 0x2000.
    fn memory() -> Runs {
        Runs(vec![
            (0x1000, 0x2000u64.to_le_bytes().to_vec()),
            // A page, as read_cstring reads a string in pieces up to the page's end.
            (0x2000, {
                let mut page = b"idle %u\0".to_vec();
                page.resize(0x1000, 0);
                page
            }),
        ])
    }

    fn message(decoder: &mut Decoder<'_>, rec: &Record) -> (String, Vec<&'static str>) {
        let mut text = Vec::new();
        let d = decoder.message_into(rec, &mut text);
        (String::from_utf8(text).unwrap(), d.names().collect())
    }

    /// A message formatted in place in its JSON line reads as the message escaped on its own,
    /// after the count of data words it used: plain, with quotes, backslashes and control
    /// bytes, with every word used, and for a site seen before and a new one.
    #[test]
    fn json_messages_formatted_in_place_are_escaped_and_count_their_words() {
        let mem = memory();
        let mut printer = Printer::new(&mem, vec!["NONE".into()], Clock { hz: None });
        for round in 0..2 {
            for (text, used) in [
                ("plain", 0),
                ("q\"%u", 1),
                ("b\\%x%x", 2),
                ("t\x01\n%u", 1),
                ("%u%u%u%u", 3),
            ] {
                let rec = record(Desc::Inline, klog_runtime::inline_desc(text.as_bytes()), 7);
                let mut line = Vec::new();
                printer.json(&mut line, &rec, "NONE");
                let raw = printer.message_text(&rec).to_vec();
                let mut want = format!(",\"args_used\":{used},\"message\":").into_bytes();
                json_str(&mut want, &raw, &mut Vec::new());
                want.extend_from_slice(b",\"unreadable_strings\":");
                assert!(
                    line.windows(want.len()).any(|w| w == want),
                    "round {round}, {text:?}: {}",
                    String::from_utf8_lossy(&line)
                );
            }
        }
    }

    /// A format read from the dump (by address or by event ID) is in its site's parts on the
    /// site's first line and after; a desc that cannot be read, and damage with a message or
    /// without, are written out in full after the message.
    #[test]
    fn json_formats_from_the_dump_and_marked_records_read_in_full() {
        let mem = memory();
        let mut printer = Printer::new(&mem, vec!["NONE".into()], Clock { hz: None });
        printer.decoder.descriptions = Some(ArrayAt {
            addr: 0x1000,
            len: 1,
            stride: 8,
        });
        let mut foreign = record(Desc::Pointer, 0x2000, 7);
        foreign.damage.foreign_header = true;
        let mut torn = record(Desc::Pointer, 0x2000, 7);
        torn.damage.torn = true;
        // A message escaped for JSON, then the fields written out in full.
        let mut quoted = record(Desc::Inline, klog_runtime::inline_desc(b"q\"%u"), 7);
        quoted.damage.foreign_header = true;
        let cases: [(Record, &[&str]); 6] = [
            (
                record(Desc::Pointer, 0x2000, 7),
                &["\"format\":\"idle %u\"", "\"args_used\":1,\"message\":\"idle 7\",\"unreadable_strings\":0,\"damage\":[],\"marks\":[],\"note\":null,"],
            ),
            (
                record(Desc::Event, 0, 7),
                &["\"format\":\"idle %u\"", "\"args_used\":1,\"message\":\"idle 7\",\"unreadable_strings\":0,\"damage\":[],\"marks\":[],\"note\":null,"],
            ),
            (
                record(Desc::Pointer, 0x9000, 7),
                &[
                    "\"format\":null",
                    "\"args_used\":0,\"message\":\"<unreadable desc ",
                    "\"marks\":[\"desc_unreadable\"],\"note\":null",
                ],
            ),
            (
                foreign,
                &[
                    "\"message\":\"idle 7\"",
                    "\"damage\":[\"foreign_header\"],\"marks\":[],\"note\":\"",
                ],
            ),
            (
                quoted,
                &["\"args_used\":1,\"message\":\"q\\\"7\",\"unreadable_strings\":0,\"damage\":[\"foreign_header\"],"],
            ),
            (
                torn,
                &[
                    "\"args_used\":null,\"message\":null,\"unreadable_strings\":0",
                    "\"damage\":[\"torn\"]",
                ],
            ),
        ];
        for round in 0..2 {
            for (rec, want) in &cases {
                let mut line = Vec::new();
                printer.json(&mut line, rec, "NONE");
                let line = String::from_utf8_lossy(&line);
                for w in *want {
                    assert!(line.contains(w), "round {round}: {w} not in {line}");
                }
            }
        }
    }

    /// Whole JSON lines, byte for byte, where a line's pieces meet: a plain message beside
    /// damage and its note, a message escaped beside no damage, with a clock's seconds of many
    /// digits, and a desc that cannot be read.
    #[test]
    fn json_lines_whole() {
        let mem = memory();
        let names = vec!["NONE".to_string()];
        let mut printer = Printer::new(
            &mem,
            names,
            Clock {
                hz: Some(1_000_000_000),
            },
        );
        let mut plain = record(Desc::Pointer, 0x2000, 7);
        plain.damage.foreign_header = true;
        plain.words[2] = klog_runtime::proc_dom(1, 2);
        plain.words[3] = 1_500_000_000;
        let mut quoted = record(Desc::Inline, klog_runtime::inline_desc(b"q\"%u"), 0x1f);
        quoted.words[3] = 2_605_818_340;
        quoted.words[7] = 0xffff_ffff_8000_0000;
        quoted.seq = 12345;
        quoted.slot = 57;
        let unreadable = record(Desc::Pointer, 0x9000, 0);
        let cases = [
            (
                plain,
                concat!(
                    r#"{"kcrash_json":1,"ring":0,"slot":0,"seq":0,"ring_name":"NONE","subsystem":0,"#,
                    r#""subsystem_name":"NONE","header":"0x0","id":"0x0","processor":1,"domain":2,"#,
                    r#""clock":"1500000000","desc":"0x2000","desc_kind":"pointer","time_s":1.5,"#,
                    r#""format":"idle %u","args":["0x7","0x0","0x0"],"args_used":1,"#,
                    r#""message":"idle 7","unreadable_strings":0,"damage":["foreign_header"],"#,
                    r#""marks":[],"note":"<header of subsystem NONE in this ring>","#,
                    r#""words":["0x0","0x0","0x100000002","0x59682f00","0x2000","0x7","0x0","0x0"]}"#,
                    "\n"
                ),
            ),
            (
                quoted,
                concat!(
                    r#"{"kcrash_json":1,"ring":0,"slot":57,"seq":12345,"ring_name":"NONE","#,
                    r#""subsystem":0,"subsystem_name":"NONE","header":"0x0","id":"0x0","#,
                    r#""processor":0,"domain":0,"clock":"2605818340","desc":"0x75252271","#,
                    r#""desc_kind":"inline","time_s":2.60581834,"format":"q\"%u","#,
                    r#""args":["0x1f","0x0","0xffffffff80000000"],"args_used":1,"#,
                    r#""message":"q\"31","unreadable_strings":0,"damage":[],"marks":[],"#,
                    r#""note":null,"words":["0x0","0x0","0x0","0x9b51a1e4","0x75252271","#,
                    r#""0x1f","0x0","0xffffffff80000000"]}"#,
                    "\n"
                ),
            ),
            (
                unreadable,
                concat!(
                    r#"{"kcrash_json":1,"ring":0,"slot":0,"seq":0,"ring_name":"NONE","subsystem":0,"#,
                    r#""subsystem_name":"NONE","header":"0x0","id":"0x0","processor":0,"domain":0,"#,
                    r#""clock":"0","desc":"0x9000","desc_kind":"pointer","time_s":0,"format":null,"#,
                    r#""args":["0x0","0x0","0x0"],"args_used":0,"#,
                    r#""message":"<unreadable desc 0x9000: not in the memory given; args 0x0 0x0 0x0>","#,
                    r#""unreadable_strings":0,"damage":[],"marks":["desc_unreadable"],"note":null,"#,
                    r#""words":["0x0","0x0","0x0","0x0","0x9000","0x0","0x0","0x0"]}"#,
                    "\n"
                ),
            ),
        ];
        for (rec, want) in cases {
            let mut line = Vec::new();
            printer.json(&mut line, &rec, "NONE");
            let line = String::from_utf8(line).unwrap();
            assert_eq!(line, want);
        }
    }

    /// The kept second prints what the clock prints, through second changes either way and
    /// without a frequency.
    #[test]
    fn the_last_second_kept_prints_as_the_clock_does() {
        for hz in [
            None,
            Some(0),
            Some(1_000_000_000),
            Some(2_445_000_123),
            Some(u64::MAX),
        ] {
            let clock = Clock { hz };
            let mut last = LastSecond::default();
            let mut t = 0u64;
            for step in [0, 1, 999_999_999, 2, 3_000_000_000, 5, u64::MAX / 3, 7] {
                for ticks in [t.wrapping_add(step), t] {
                    let (mut kept, mut fresh) = (Vec::new(), Vec::new());
                    last.write(clock, &mut kept, ticks);
                    clock.write(&mut fresh, ticks);
                    assert_eq!(kept, fresh, "{hz:?} {ticks}");
                }
                t = t.wrapping_add(step);
            }
        }
    }

    /// A message is said to be plain only when its format makes it so whatever the words, and
    /// what is said holds for the text printed.
    #[test]
    fn messages_known_plain_are_plain() {
        let known = |f: &[u8]| KnownPlain::of(f, &printf::pieces(f).collect::<Vec<_>>());
        let both = KnownPlain {
            text: true,
            json: true,
        };
        assert_eq!(known(b"bench %u chore %x, %d %lX"), both);
        assert_eq!(known(b""), both);
        assert_eq!(
            known(b"said \"%u\""),
            KnownPlain {
                text: true,
                json: false
            }
        );
        for not in [
            &b"ring %s"[..],
            b"%c",
            b"%5d",
            b"%p",
            b"back\\slash %d",
            b"tab\t%d",
            b"\x7f",
            b"\xc3\xa9 %u",
        ] {
            assert_eq!(known(not), KnownPlain::default(), "{not:?}");
        }
        let mem = Runs(vec![(0x2000, {
            let mut page = b"bench %u chore %x, %d %lX\0".to_vec();
            page.resize(0x1000, 0);
            page
        })]);
        let mut decoder = Decoder::new(&mem);
        for data in [0, 1, u64::MAX, 1 << 63, 0x7f, 0x22] {
            let rec = record(Desc::Pointer, 0x2000, data);
            let mut text = Vec::new();
            let d = decoder.message_into(&rec, &mut text);
            assert_eq!(d.plain, both);
            assert!(plain_without(&text, b'\\', b'"'), "{text:?}");
        }
    }

    #[test]
    fn descriptions_inline_and_by_event_id_print_as_formats_do() {
        let mem = memory();
        let mut decoder = Decoder::new(&mem);
        decoder.descriptions = Some(ArrayAt {
            addr: 0x1000,
            len: 1,
            stride: 8,
        });
        let inline = record(Desc::Inline, klog_runtime::inline_desc(b"pf %lx"), 0x1000);
        assert_eq!(message(&mut decoder, &inline).0, "pf 1000");
        assert_eq!(decoder.format(&inline).as_deref(), Some(&b"pf %lx"[..]));
        let event = record(Desc::Event, 0, 7);
        assert_eq!(message(&mut decoder, &event).0, "idle 7");
        assert_eq!(decoder.format(&event).as_deref(), Some(&b"idle %u"[..]));
    }

    /// A line built from a call site's kept parts (and its processor and domain's) is the line a
    /// printer that never saw the site writes, however many sites share a slot and in whatever
    /// order they come.
    #[test]
    fn lines_from_kept_site_parts_are_the_lines_of_a_fresh_printer() {
        let mem = memory();
        let names = vec!["NONE".to_string(), "SCHED".to_string()];
        let clock = Clock { hz: Some(1000) };
        let records: Vec<Record> = (0..3 << SITE_BITS)
            .map(|i| {
                let text = format!("s{i} %x");
                let mut rec = record(Desc::Inline, klog_runtime::inline_desc(text.as_bytes()), i);
                rec.ring = (i % 2) as usize;
                rec.subsystem = Some((i % 2) as u16);
                rec.words[0] = 0x4b4c_4f47_0008_0000 | (i % 2);
                rec.words[1] = 0xffff_ffff_8000_0000 + i / 2;
                // Processor and domain words, more than a printer keeps, each shared by two.
                rec.words[2] = klog_runtime::proc_dom((i / 2 % 5) as u32, (i / 2 * 0x1234) as u32);
                rec.words[3] = i * 7;
                rec.seq = i;
                rec
            })
            .collect();
        let mut kept = Printer::new(&mem, names.clone(), clock);
        for round in 0..2 {
            for (i, rec) in records.iter().enumerate().rev().skip(round) {
                let mut line = Vec::new();
                kept.json(&mut line, rec, &names[rec.ring]);
                let mut want = Vec::new();
                Printer::new(&mem, names.clone(), clock).json(&mut want, rec, &names[rec.ring]);
                assert_eq!(
                    String::from_utf8_lossy(&line),
                    String::from_utf8_lossy(&want)
                );
                let format = format!("\"format\":\"s{i} %x\"");
                assert!(String::from_utf8_lossy(&line).contains(&format), "{format}");
                let (p, d) = split_proc_dom(rec.words[2]);
                let fields = format!("\"processor\":{p},\"domain\":{d},");
                assert!(String::from_utf8_lossy(&line).contains(&fields), "{fields}");
                let word = format!("\"0x{:x}\",\"0x{:x}\"", rec.words[2], rec.words[3]);
                assert!(String::from_utf8_lossy(&line).contains(&word), "{word}");
            }
        }
    }

    /// A FULL line built from a kept tag is the line a printer that never saw the tag writes,
    /// however many tags share a slot, in whatever order they come, with a damaged header (the
    /// ring names the subsystem) and with a name too long to keep.
    #[test]
    fn lines_from_kept_tags_are_the_lines_of_a_fresh_printer() {
        let mem = memory();
        let names = vec!["NONE".to_string(), "SCHED".to_string(), "L".repeat(70)];
        let clock = Clock { hz: Some(1000) };
        let records: Vec<Record> = (0..3 << TAG_BITS)
            .map(|i| {
                let mut rec = record(Desc::Inline, klog_runtime::inline_desc(b"t %x"), i);
                rec.ring = (i % 3) as usize;
                rec.subsystem = (i % 5 != 0).then_some((i % 3) as u16);
                rec.words[1] = 0xffff_ffff_8000_0000 + i / 3;
                // Three records share a chore and a processor: only their subsystems differ.
                rec.words[2] =
                    klog_runtime::proc_dom((i / 3) as u32 % 4, (i / 3 * 0x1234_5678) as u32);
                rec.words[3] = i * 7;
                rec
            })
            .collect();
        let mut kept = Printer::new(&mem, names.clone(), clock);
        for round in 0..2 {
            for rec in records.iter().rev().skip(round) {
                let mut line = Vec::new();
                kept.text(&mut line, rec, Style::Full);
                let mut want = Vec::new();
                Printer::new(&mem, names.clone(), clock).text(&mut want, rec, Style::Full);
                assert_eq!(
                    String::from_utf8_lossy(&line),
                    String::from_utf8_lossy(&want)
                );
                let (p, d) = split_proc_dom(rec.words[2]);
                let name = &names[usize::from(rec.subsystem.unwrap_or(rec.ring as u16))];
                let tag = format!("[{:x}][{p},{d},{name}] ", rec.words[1]);
                assert!(String::from_utf8_lossy(&line).contains(&tag), "{tag}");
            }
        }
    }

    #[test]
    fn an_event_id_without_a_format_is_marked_never_guessed() {
        let mem = memory();
        let mut decoder = Decoder::new(&mem);
        let event = record(Desc::Event, 0, 7);
        assert_eq!(
            message(&mut decoder, &event),
            (
                "<event 0: no KLogDescriptions table is known; args 0x7 0x0 0x0>".into(),
                vec!["event_unknown"]
            )
        );
        decoder.descriptions = Some(ArrayAt {
            addr: 0x1000,
            len: 1,
            stride: 8,
        });
        let beyond = record(Desc::Event, 5, 7);
        assert_eq!(
            message(&mut decoder, &beyond).0,
            "<event 5: KLogDescriptions has 1 entries; args 0x7 0x0 0x0>"
        );
        assert_eq!(decoder.format(&beyond), None);
        decoder.descriptions = Some(ArrayAt {
            addr: 0x3000,
            len: 2,
            stride: 8,
        });
        let unreadable = record(Desc::Event, 1, 7);
        let (text, marks) = message(&mut decoder, &unreadable);
        assert!(
            text.starts_with("<event 1: KLogDescriptions[1] is unreadable at 0x3008"),
            "{text}"
        );
        assert_eq!(marks, ["event_unknown"]);
    }

    /// The next of a repeatable stream of pseudo-random words.
    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// Hex as `report::Hex` writes it: no leading zeros, one `0` for zero, every width, after
    /// whatever the line already holds.
    #[test]
    fn hex_has_no_leading_zeros_at_any_width() {
        let mut words = vec![
            0,
            1,
            9,
            0xa,
            0xf,
            0x10,
            0xabc,
            u64::from(u32::MAX),
            0x0123_4567_89ab_cdef,
            1 << 63,
            u64::MAX,
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let r = xorshift(&mut x);
            words.push(r >> (r % 64));
        }
        for v in words {
            let mut out = b"<".to_vec();
            push_hex(&mut out, v);
            assert_eq!(out, format!("<{v:x}").into_bytes());
            let mut out = b"[".to_vec();
            push_hex_quoted::<false>(&mut out, &hex_digits(v));
            push_hex_quoted::<true>(&mut out, &hex_digits(v));
            assert_eq!(out, format!("[\"0x{v:x}\",\"0x{v:x}\"").into_bytes());
        }
    }

    /// `marked` says whether `names` has any, whatever the marks: JSON's `marks` array is written
    /// empty without a walk when it says none.
    #[test]
    fn marked_is_whether_there_are_mark_names() {
        let descs = [
            DescState::Read,
            DescState::Cut,
            DescState::Null,
            DescState::Unreadable,
            DescState::UnknownEvent,
        ];
        let outcomes = (0..7).map(|field| {
            let mut o = Outcome::default();
            match field {
                1 => o.missing_args = 1,
                2 => o.unreadable_strings = 2,
                3 => o.refused_n = 1,
                4 => o.cut_strings = 1,
                5 => o.capped_fields = 3,
                6 => o.not_implemented = 1,
                _ => o.args_used = 3,
            }
            o
        });
        for printf in outcomes {
            for desc in descs {
                let d = Decoded {
                    printf,
                    desc,
                    plain: KnownPlain::default(),
                };
                assert_eq!(d.marked(), d.names().next().is_some(), "{d:?}");
            }
        }
    }

    /// The clock's fraction: nine digits, zero-padded, after what the line holds.
    #[test]
    fn nine_digits_are_zero_padded() {
        for v in [0, 7, 10, 99_999, 100_000_000, 999_999_999, 123_456_789] {
            let mut out = b".".to_vec();
            push_nine_digits(&mut out, v);
            assert_eq!(out, format!(".{v:09}").into_bytes());
        }
    }

    /// Seconds as `Display` writes them, through zmij: every magnitude a clock gives and the
    /// extremes, which zmij writes with an exponent.
    #[test]
    fn floats_print_as_display_does() {
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            0.5,
            2.605818340,
            1e-7,
            1.5e-7,
            123456789.0,
            1e15,
            1e16,
            1e17,
            1e21,
            1.7976931348623157e308,
            5e-324,
            2.2250738585072014e-308,
            0.1,
            0.3,
            100.0,
            9.999999,
        ];
        // Around where the look at zmij's bytes starts, and where its exponents do.
        for edge in [1e-3, 1e-4, 1e-5, 1e-6] {
            for k in 1..50u32 {
                let t = edge * (1.0 + f64::from(k) / 3e7);
                values.extend([t, -t, edge / (1.0 + f64::from(k) / 3e7)]);
            }
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            xorshift(&mut x);
            let t = f64::from_bits(x);
            if t.is_finite() {
                values.push(t);
            }
            // Clocks: ticks over a frequency.
            values.push((x >> 20) as f64 / 1_000_000_000.0);
            values.push((x >> 30) as f64 / 19_200_000.0);
            // Few fraction bits, where two shortest forms can be equally near: below and above
            // 2^40.
            for top in [24, 30, 36, 40, 44, 50] {
                let fraction = (x >> 52) as f64 / (1u64 << ((x >> 60) + 1)) as f64;
                values.push((x >> (64 - top)) as f64 + fraction);
            }
        }
        // zmij's path, not only Display's, is what is checked.
        let fast = values.iter().filter(|&&t| many_digits(t)).count();
        assert!(fast > values.len() / 4, "{fast} of {}", values.len());
        assert!(many_digits(2605818340.0 / 1e9));
        for t in values {
            let mut out = Vec::new();
            push_f64(&mut out, t);
            assert_eq!(String::from_utf8(out).unwrap(), format!("{t}"), "{t:e}");
        }
    }

    /// A quoted string escapes what JSON must and copies the rest.
    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        for (text, want) in [
            (&b""[..], r#""""#),
            (b"plain", r#""plain""#),
            (b"\"", r#""\"""#),
            (b"a\\b", r#""a\\b""#),
            (b"\x01x\n\"\x1f", r#""\u0001x\u000a\"\u001f""#),
            (b"end\\", r#""end\\""#),
        ] {
            let mut out = Vec::new();
            json_quoted(&mut out, text);
            assert_eq!(String::from_utf8_lossy(&out), want);
        }
    }
}
