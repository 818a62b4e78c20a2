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
use kcrash_plugin::escape::escape_into;
use kcrash_plugin::memory::{Memory, Unreadable};
use kcrash_plugin::JSON_VERSION;

/// Longest format string or `%s` argument read from the dump.
pub const STRING_MAX: usize = 4096;
/// Format strings remembered by address; the same few hundred descs recur millions of times.
const DESC_CACHE_MAX: usize = 1 << 16;

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
        match self.hz.filter(|&hz| hz > 0) {
            Some(hz) => {
                let rem = ticks % hz;
                // rem < hz, so rem * 10^9 fits in 64 bits for any clock below 18 GHz.
                let nanos = match rem.checked_mul(1_000_000_000) {
                    Some(scaled) => scaled / hz,
                    None => (rem as u128 * 1_000_000_000 / hz as u128) as u64,
                };
                push_dec_padded(out, ticks / hz, 5, b' ');
                out.push(b'.');
                push_dec_padded(out, nanos, 9, b'0');
            }
            None => {
                out.extend_from_slice(b"t=");
                push_dec_padded(out, ticks, 0, b' ');
            }
        }
    }
}

/// A format string as read from the dump.
struct Format {
    bytes: Box<[u8]>,
    /// No NUL within [`STRING_MAX`] bytes: `bytes` is its first STRING_MAX.
    cut: bool,
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
}

impl Decoded {
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
                    desc: DescState::Read,
                };
            }
            Desc::Event => match self.event_format(rec.desc()) {
                Ok(at) => at,
                Err(why) => {
                    text.extend_from_slice(format!("<{why}; args").as_bytes());
                    push_raw_args(text, &args);
                    return Decoded {
                        printf: Outcome::default(),
                        desc: DescState::UnknownEvent,
                    };
                }
            },
        };
        if desc == 0 {
            text.extend_from_slice(b"<no format string: desc is 0; args");
            push_raw_args(text, &args);
            return Decoded {
                printf: Outcome::default(),
                desc: DescState::Null,
            };
        }
        if self.descs.len() >= DESC_CACHE_MAX && !self.descs.contains_key(&desc) {
            self.descs.clear();
        }
        let mem = self.mem;
        let format = self.descs.entry(desc).or_insert_with(|| {
            // One byte more than is kept, to tell a cut format from one of exactly STRING_MAX.
            let mut s = Vec::new();
            mem.read_cstring(desc, STRING_MAX + 1, &mut s).map(|()| {
                let cut = s.len() > STRING_MAX;
                s.truncate(STRING_MAX);
                Format {
                    bytes: s.into_boxed_slice(),
                    cut,
                }
            })
        });
        match format {
            Ok(f) => {
                let mut sink = VecSink(text);
                let printf = printf::format(&mut sink, &f.bytes, &args, &mut self.strings)
                    .unwrap_or_default();
                let desc = if f.cut {
                    text.extend_from_slice(
                        format!("<format cut: no NUL within {STRING_MAX} bytes>").as_bytes(),
                    );
                    DescState::Cut
                } else {
                    DescState::Read
                };
                Decoded { printf, desc }
            }
            Err(e) => {
                text.extend_from_slice(format!("<unreadable desc {e}; args").as_bytes());
                push_raw_args(text, &args);
                Decoded {
                    printf: Outcome::default(),
                    desc: DescState::Unreadable,
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

/// Whether `bytes` shows as is: printable ASCII without a backslash.
fn is_plain(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .all(|&b| (0x20..0x7f).contains(&b) && b != b'\\')
}

/// `v` in decimal, right-aligned to `width` with `pad`.
/// `v` in decimal, padded on the left to `width` with `pad`.
pub fn push_dec_padded(out: &mut Vec<u8>, v: u64, width: usize, pad: u8) {
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(v).as_bytes();
    for _ in digits.len()..width {
        out.push(pad);
    }
    out.extend_from_slice(digits);
}

/// `v` in lower-case hex without a prefix.
/// `v` in lower-case hex, without `0x`.
pub fn push_hex(out: &mut Vec<u8>, v: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 16];
    let mut n = buf.len();
    let mut x = v;
    loop {
        n -= 1;
        buf[n] = HEX[(x & 15) as usize];
        x >>= 4;
        if x == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[n..]);
}

/// What a damaged record says instead of (or after) its message.
fn damage_note(rec: &Record, names: &[String]) -> Option<String> {
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
    let id = rec
        .subsystem
        .unwrap_or((rec.ring % names.len().max(1)) as u16);
    match names.get(id as usize) {
        Some(n) => Cow::Borrowed(n),
        None => Cow::Owned(format!("SUBSYS{id}")),
    }
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
}

impl<'a> Printer<'a> {
    pub fn new(mem: &'a (dyn Memory + Sync), names: Vec<String>, clock: Clock) -> Self {
        Printer {
            decoder: Decoder::new(mem),
            names,
            clock,
            message: Vec::with_capacity(256),
            scratch: Vec::with_capacity(256),
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
        let sub = subsystem_name_of(&self.names, rec);
        if style == Style::Full {
            let (proc_, dom) = split_proc_dom(rec.proc_dom());
            line.push(b'[');
            self.clock.write(line, rec.clock());
            line.extend_from_slice(b"] [");
            push_hex(line, rec.id());
            line.extend_from_slice(b"][");
            push_dec_padded(line, proc_ as u64, 0, b' ');
            line.push(b',');
            push_dec_padded(line, dom as u64, 0, b' ');
            line.push(b',');
            line.extend_from_slice(sub.as_bytes());
            line.extend_from_slice(b"] ");
        } else {
            line.push(b'[');
            line.extend_from_slice(sub.as_bytes());
            line.extend_from_slice(b"] ");
        }
        drop(sub);
        let note = damage_note(rec, &self.names);
        let readable = !rec.damage.no_message();
        if readable {
            // Formatted in place; escaped through the scratch buffer only when it must be.
            let start = line.len();
            self.decoder.message_into(rec, line);
            if !is_plain(&line[start..]) {
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
    /// text lines; the fields are documented in kcrash/README.md.
    pub fn json(&mut self, b: &mut Vec<u8>, rec: &Record, ring_name: &str) {
        let readable = !rec.damage.no_message();
        let start = b.len();
        self.message.clear();
        let outcome = readable.then(|| self.decoder.message_into(rec, &mut self.message));
        let (processor, domain) = split_proc_dom(rec.proc_dom());
        let sub = subsystem_name_of(&self.names, rec);
        let field = |b: &mut Vec<u8>, name: &str| {
            b.extend_from_slice(if b.len() == start { b"{\"" } else { b",\"" });
            b.extend_from_slice(name.as_bytes());
            b.extend_from_slice(b"\":");
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        for (name, v) in [
            ("kcrash_json", u64::from(JSON_VERSION)),
            ("ring", rec.ring as u64),
            ("slot", rec.slot),
            ("seq", rec.seq),
        ] {
            field(b, name);
            push_dec_padded(b, v, 0, b' ');
        }
        field(b, "ring_name");
        json_quoted(b, ring_name.as_bytes());
        field(b, "subsystem");
        match rec.subsystem {
            Some(s) => push_dec_padded(b, s as u64, 0, b' '),
            None => b.extend_from_slice(b"null"),
        }
        field(b, "subsystem_name");
        json_quoted(b, sub.as_bytes());
        for (name, v) in [("header", rec.header()), ("id", rec.id())] {
            field(b, name);
            push_hex_str(b, v);
        }
        for (name, v) in [("processor", processor as u64), ("domain", domain as u64)] {
            field(b, name);
            push_dec_padded(b, v, 0, b' ');
        }
        field(b, "clock");
        b.push(b'"');
        push_dec_padded(b, rec.clock(), 0, b' ');
        b.push(b'"');
        field(b, "desc");
        push_hex_str(b, rec.desc());
        field(b, "desc_kind");
        json_quoted(
            b,
            match rec.desc_kind {
                Desc::Pointer => b"pointer",
                Desc::Inline => b"inline",
                Desc::Event => b"event",
            },
        );
        field(b, "time_s");
        match self.clock.seconds(rec.clock()) {
            // Writing to a Vec cannot fail.
            Some(t) if t.is_finite() => drop(write!(b, "{t}")),
            _ => b.extend_from_slice(b"null"),
        }
        field(b, "format");
        match readable.then(|| self.decoder.format(rec)).flatten() {
            Some(f) => json_str(b, &f, &mut scratch),
            None => b.extend_from_slice(b"null"),
        }
        field(b, "args");
        push_hex_array(b, &rec.data());
        field(b, "args_used");
        match outcome {
            Some(o) => push_dec_padded(b, o.printf.args_used as u64, 0, b' '),
            None => b.extend_from_slice(b"null"),
        }
        field(b, "message");
        if readable {
            json_str(b, &self.message, &mut scratch);
        } else {
            b.extend_from_slice(b"null");
        }
        field(b, "unreadable_strings");
        push_dec_padded(
            b,
            outcome.map_or(0, |o| o.printf.unreadable_strings) as u64,
            0,
            b' ',
        );
        field(b, "damage");
        push_names(b, rec.damage.names());
        field(b, "marks");
        push_names(b, outcome.iter().flat_map(Decoded::names));
        field(b, "note");
        match damage_note(rec, &self.names) {
            Some(n) => json_str(b, n.as_bytes(), &mut scratch),
            None => b.extend_from_slice(b"null"),
        }
        field(b, "words");
        push_hex_array(b, &rec.words);
        b.extend_from_slice(b"}\n");
        drop(sub);
        self.scratch = scratch;
    }
}

/// A JSON string of `raw` as kcrash shows text: escaped for a terminal first (so JSON and text
/// agree), then quoted for JSON.
fn json_str(out: &mut Vec<u8>, raw: &[u8], scratch: &mut Vec<u8>) {
    scratch.clear();
    escape_into(raw, scratch);
    json_quoted(out, scratch);
}

/// A JSON string of text already escaped for a terminal (subsystem names are, when read).
fn json_quoted(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'"');
    let mut rest = text;
    // Plain runs are copied whole; only the bytes JSON must escape are looked at one by one.
    while let Some(at) = rest
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
    {
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

/// `"0x…"`, as kcrash's `report::Hex` writes a 64-bit word.
fn push_hex_str(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(b"\"0x");
    push_hex(out, v);
    out.push(b'"');
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

fn push_hex_array(out: &mut Vec<u8>, values: &[u64]) {
    out.push(b'[');
    for (i, &v) in values.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_hex_str(out, v);
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

    /// Hex as `report::Hex` writes it: no leading zeros, one `0` for zero, every width.
    #[test]
    fn hex_has_no_leading_zeros_at_any_width() {
        for v in [
            0,
            1,
            0xf,
            0x10,
            0xabc,
            u64::from(u32::MAX),
            1 << 63,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            push_hex(&mut out, v);
            assert_eq!(out, format!("{v:x}").as_bytes());
            out.clear();
            push_hex_str(&mut out, v);
            assert_eq!(out, format!("\"0x{v:x}\"").as_bytes());
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
