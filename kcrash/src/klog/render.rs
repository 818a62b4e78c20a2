//! Turning records into what the user reads: the message (format string and `%s` arguments read
//! from dump memory, formatted by klog-runtime's printf interpreter), and the FULL, TERSE and JSON
//! forms of a record.

use std::collections::HashMap;
use std::io::{self, Write};

use klog_runtime::printf::{self, Outcome, Sink, Strings};
use klog_runtime::split_proc_dom;
use serde::Serialize;

use super::ring::Record;
use crate::memory::{Memory, Unreadable};

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
        match self.hz.filter(|&hz| hz > 0) {
            Some(hz) => format!(
                "{:>5}.{:09}",
                ticks / hz,
                ((ticks % hz) as u128 * 1_000_000_000 / hz as u128)
            ),
            None => format!("t={ticks}"),
        }
    }
}

/// A record's message and what went into it.
pub struct Message {
    /// The format string, or why it could not be read.
    pub format: Result<Vec<u8>, Unreadable>,
    /// The formatted message (raw bytes; escaped when printed).
    pub text: Vec<u8>,
    pub outcome: Outcome,
}

/// Reads format strings and `%s` arguments from dump memory and formats messages.
pub struct Decoder<'a> {
    mem: &'a dyn Memory,
    descs: HashMap<u64, Result<Vec<u8>, Unreadable>>,
    strings: DumpStrings<'a>,
}

impl<'a> Decoder<'a> {
    pub fn new(mem: &'a dyn Memory) -> Self {
        Decoder {
            mem,
            descs: HashMap::new(),
            strings: DumpStrings {
                mem,
                buf: Vec::new(),
            },
        }
    }

    /// The record's message. Damaged records still get one when their desc reads, since a stale
    /// or foreign record is a real event; torn and unreadable ones do not.
    pub fn message(&mut self, rec: &Record) -> Message {
        let desc = rec.desc();
        if self.descs.len() >= DESC_CACHE_MAX {
            self.descs.clear();
        }
        let mem = self.mem;
        let format = self
            .descs
            .entry(desc)
            .or_insert_with(|| {
                let mut s = Vec::new();
                mem.read_cstring(desc, STRING_MAX, &mut s).map(|()| s)
            })
            .clone();
        let mut text = Vec::new();
        let outcome = match &format {
            Ok(f) => {
                let mut sink = VecSink(&mut text);
                printf::format(&mut sink, f, &rec.data(), &mut self.strings).unwrap_or_default()
            }
            Err(e) => {
                text.extend_from_slice(format!("<unreadable desc {e}>").as_bytes());
                Outcome::default()
            }
        };
        Message {
            format,
            text,
            outcome,
        }
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
    mem: &'a dyn Memory,
    buf: Vec<u8>,
}

impl Strings for DumpStrings<'_> {
    type Error = String;

    fn c_string(&mut self, addr: u64, max: usize) -> Result<&[u8], String> {
        match self
            .mem
            .read_cstring(addr, max.min(STRING_MAX), &mut self.buf)
        {
            Ok(()) => Ok(&self.buf),
            // The formatter prints the address itself.
            Err(e) if e.addr == addr => Err(e.reason),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Appends `bytes` so that a terminal shows exactly what they are: printable UTF-8 as is, `\n`,
/// `\t`, `\\` and every other control or invalid byte as an escape.
pub fn escape_into(bytes: &[u8], out: &mut Vec<u8>) {
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\n' => out.extend_from_slice(b"\\n"),
                '\t' => out.extend_from_slice(b"\\t"),
                '\\' => out.extend_from_slice(b"\\\\"),
                c if c.is_control() => {
                    out.extend_from_slice(format!("\\x{:02x}", c as u32).as_bytes())
                }
                c => {
                    let mut b = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
                }
            }
        }
        for &b in chunk.invalid() {
            out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
        }
    }
}

fn escaped(bytes: &[u8]) -> String {
    let mut v = Vec::with_capacity(bytes.len());
    escape_into(bytes, &mut v);
    String::from_utf8(v).unwrap_or_default()
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
            "<clock earlier than the record before it: a stale record of the previous lap?>".into(),
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

/// Writes records as text lines or JSON objects.
pub struct Printer<'a> {
    pub decoder: Decoder<'a>,
    /// Subsystem names by id (from the rings).
    pub names: Vec<String>,
    pub clock: Clock,
    line: Vec<u8>,
}

impl<'a> Printer<'a> {
    pub fn new(mem: &'a dyn Memory, names: Vec<String>, clock: Clock) -> Self {
        Printer {
            decoder: Decoder::new(mem),
            names,
            clock,
            line: Vec::with_capacity(256),
        }
    }

    /// The subsystem a record belongs to: its header's, or its ring's when the header is damaged.
    fn subsystem_of(&self, rec: &Record) -> String {
        subsystem_name(&self.names, rec.subsystem.unwrap_or(rec.ring as u16))
    }

    /// One line of text for `rec`.
    pub fn text(&mut self, out: &mut dyn Write, rec: &Record, style: Style) -> io::Result<()> {
        self.line.clear();
        let sub = self.subsystem_of(rec);
        if style == Style::Full {
            let (proc_, dom) = split_proc_dom(rec.proc_dom());
            let time = self.clock.show(rec.clock());
            write!(self.line, "[{time}] [{:x}][{proc_},{dom},{sub}] ", rec.id())?;
        } else {
            write!(self.line, "[{sub}] ")?;
        }
        let note = damage_note(rec, &self.names);
        let readable = !(rec.damage.torn || rec.damage.bad_header || rec.damage.unreadable);
        if readable {
            let msg = self.decoder.message(rec);
            escape_into(&msg.text, &mut self.line);
        }
        if let Some(note) = note {
            if readable {
                self.line.push(b' ');
            }
            self.line.extend_from_slice(note.as_bytes());
        }
        self.line.push(b'\n');
        out.write_all(&self.line)
    }

    /// One JSON object (one line) for `rec`, with every raw word.
    pub fn json(&mut self, out: &mut dyn Write, rec: &Record, ring_name: &str) -> io::Result<()> {
        let readable = !(rec.damage.torn || rec.damage.bad_header || rec.damage.unreadable);
        let msg = readable.then(|| self.decoder.message(rec));
        let (processor, domain) = split_proc_dom(rec.proc_dom());
        let subsystem_name = self.subsystem_of(rec);
        let obj = JsonRecord {
            ring: rec.ring,
            ring_name,
            slot: rec.slot,
            seq: rec.seq,
            subsystem: rec.subsystem,
            subsystem_name: &subsystem_name,
            header: rec.header(),
            id: rec.id(),
            processor,
            domain,
            clock: rec.clock(),
            time_s: self.clock.seconds(rec.clock()),
            desc: rec.desc(),
            format: msg
                .as_ref()
                .and_then(|m| m.format.as_ref().ok())
                .map(|f| escaped(f)),
            args: rec.data(),
            args_used: msg.as_ref().map(|m| m.outcome.args_used),
            message: msg.as_ref().map(|m| escaped(&m.text)),
            unreadable_strings: msg.as_ref().map_or(0, |m| m.outcome.unreadable_strings),
            damage: rec.damage.names(),
            note: damage_note(rec, &self.names),
            words: rec.words,
        };
        serde_json::to_writer(&mut *out, &obj)?;
        out.write_all(b"\n")
    }
}

/// The JSON form of a record: everything in the slot, and what kcrash made of it.
#[derive(Serialize)]
struct JsonRecord<'r> {
    ring: usize,
    ring_name: &'r str,
    slot: u64,
    seq: u64,
    subsystem: Option<u16>,
    subsystem_name: &'r str,
    header: u64,
    id: u64,
    processor: u32,
    domain: u32,
    clock: u64,
    time_s: Option<f64>,
    desc: u64,
    format: Option<String>,
    args: [u64; 3],
    args_used: Option<usize>,
    message: Option<String>,
    unreadable_strings: usize,
    damage: Vec<&'static str>,
    note: Option<String>,
    words: [u64; 8],
}
