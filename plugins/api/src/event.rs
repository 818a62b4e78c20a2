//! One event of any in-memory log, as every decoder gives it and every command prints it.

use std::borrow::Cow;

use crate::escape::escape_into;

/// A name that is usually fixed in the decoder (a field's, an event kind's) but may come from a
/// schema or from the dump itself, borrowed from the log that holds it.
pub type Name<'a> = Cow<'a, str>;

/// One event: when, where, what, and how far it can be believed.
#[derive(Clone, Debug, PartialEq)]
pub struct Event<'a> {
    /// The time stamp in the log's own clock ticks ([`crate::Clock`] says their rate). For an
    /// event whose own stamp is lost (`own_time` false), the time of the event before it in its
    /// ring, so that it sorts where it sits.
    pub ticks: u64,
    /// Whether `ticks` is the event's own time stamp.
    pub own_time: bool,
    /// The event's place in its ring (sequence or serial number, slot): orders events of one
    /// ring whose ticks are equal.
    pub seq: u64,
    /// The ring it was read from: an index into the log's [`crate::Log::rings`].
    pub ring: usize,
    /// The processor that logged it, when the log says.
    pub processor: Option<u32>,
    /// What happened: the event's kind or name (`EVT_PAGE_FAULT`, `KER_CALL/MSG_SENDV`).
    pub name: Name<'a>,
    /// The event's payload, typed.
    pub fields: Vec<Field<'a>>,
    /// The text the log carries for it (a formatted message), when it carries one; escaped when
    /// printed.
    pub message: Option<Vec<u8>>,
    /// What is wrong with it; empty for an event read whole and consistent.
    pub damage: Vec<Damage>,
    /// What a schema knows it by besides its log, ring and name.
    pub key: Key<'a>,
}

/// An event's identity for schemata, as its decoder gives it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Key<'a> {
    /// Nothing beyond its name.
    #[default]
    Name,
    /// A format string it was logged with (KLog's `desc`): its address (0 when the format is not
    /// at an address of its own) and text.
    Format { addr: u64, text: Cow<'a, [u8]> },
    /// A numeric code pair (QNX class and event, DProbes major and minor).
    Code(u32, u32),
}

impl<'a> Event<'a> {
    /// An undamaged event with no fields or message.
    pub fn new(ticks: u64, seq: u64, ring: usize, name: impl Into<Name<'a>>) -> Event<'a> {
        Event {
            ticks,
            own_time: true,
            seq,
            ring,
            processor: None,
            name: name.into(),
            fields: Vec::new(),
            message: None,
            damage: Vec::new(),
            key: Key::Name,
        }
    }

    /// Adds a field.
    pub fn field(&mut self, name: impl Into<Name<'a>>, value: Value<'a>) {
        self.fields.push(Field {
            name: name.into(),
            value,
        });
    }
}

/// A named value of an event's payload.
#[derive(Clone, Debug, PartialEq)]
pub struct Field<'a> {
    pub name: Name<'a>,
    pub value: Value<'a>,
}

/// A payload value, typed as the log's layout or schema types it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    Unsigned(u64),
    Signed(i64),
    /// An address, pointer or bit mask: printed in hex.
    Hex(u64),
    /// A value with a name from an enumeration, when the enumeration names it.
    Enum {
        value: u64,
        name: Option<Name<'a>>,
    },
    /// Text from the dump; escaped when printed.
    Text(Vec<u8>),
    /// Bytes the layout does not type.
    Bytes(Vec<u8>),
    /// Bits with names: the value, the names of its set bits, and the set bits no name covers.
    Flags {
        value: u64,
        names: Vec<Name<'a>>,
        rest: u64,
    },
    /// An address, with the symbol that holds it and the offset into it when one does.
    Pointer {
        addr: u64,
        symbol: Option<(String, u64)>,
    },
    /// A span of time: as logged, and in nanoseconds when its unit or the log's clock says.
    Duration {
        raw: u64,
        nanos: Option<u64>,
    },
    /// A time stamp of the log's clock: its ticks, and nanoseconds when the rate is known.
    Time {
        ticks: u64,
        nanos: Option<u64>,
    },
    /// A value the log says could not be had (a faulted read), or memory the dump lacks: the
    /// address and why. Never printed as a number.
    Unreadable {
        addr: u64,
        reason: String,
    },
}

/// What is wrong with an event. Printed with it, never dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Damage {
    /// The record was being written when the dump was taken, or its parts disagree.
    Torn,
    /// Events the log lost just before this one (a gap in serial numbers), when it can count
    /// them.
    LostBefore(u64),
    /// An event made of parts whose parts are not all in the dump.
    Incomplete(String),
    /// The record could not be read at all: it holds nothing but this mark.
    Unreadable { addr: u64, reason: String },
    /// Anything else the decoder found inconsistent, said in words.
    Inconsistent(String),
}

impl Damage {
    /// The mark's short name, as text and JSON give it.
    pub fn kind(&self) -> &'static str {
        match self {
            Damage::Torn => "torn",
            Damage::LostBefore(_) => "lost-before",
            Damage::Incomplete(_) => "incomplete",
            Damage::Unreadable { .. } => "unreadable",
            Damage::Inconsistent(_) => "inconsistent",
        }
    }

    /// The mark in words.
    pub fn describe(&self) -> String {
        match self {
            Damage::Torn => "torn".into(),
            Damage::LostBefore(n) => format!("{n} event(s) lost before this one"),
            Damage::Incomplete(why) => format!("incomplete: {why}"),
            Damage::Unreadable { addr, reason } => format!("unreadable at {addr:#x}: {reason}"),
            Damage::Inconsistent(why) => format!("inconsistent: {why}"),
        }
    }
}

impl Value<'_> {
    /// The value as gdb would print it: numbers as numbers, enums and flags by name, pointers
    /// with their symbol, text quoted and escaped, faults in angle brackets.
    pub fn write(&self, out: &mut Vec<u8>) {
        // Writing to a Vec cannot fail.
        let _ = self.write_to(out);
    }

    fn write_to(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        use std::io::Write;
        match self {
            // By hand, not `write!`: the timeline writes millions of these.
            Value::Unsigned(n) => push_dec(out, *n),
            Value::Signed(n) => {
                if *n < 0 {
                    out.push(b'-');
                }
                push_dec(out, n.unsigned_abs());
            }
            Value::Hex(n) => push_hex(out, *n),
            Value::Enum { name: Some(n), .. } => escape_into(n.as_bytes(), out),
            Value::Enum { value, name: None } => write!(out, "<unknown {value}>")?,
            Value::Flags { value, names, rest } => {
                let mut sep: &[u8] = b"";
                for n in names {
                    out.extend_from_slice(sep);
                    escape_into(n.as_bytes(), out);
                    sep = b"|";
                }
                if *rest != 0 || names.is_empty() {
                    out.extend_from_slice(sep);
                    write!(out, "{rest:#x}")?;
                }
                if !names.is_empty() {
                    write!(out, " ({value:#x})")?;
                }
            }
            Value::Pointer { addr, symbol } => {
                push_hex(out, *addr);
                if let Some((name, off)) = symbol {
                    out.extend_from_slice(b" <");
                    escape_into(name.as_bytes(), out);
                    if *off != 0 {
                        write!(out, "+{off:#x}")?;
                    }
                    out.push(b'>');
                }
            }
            Value::Duration { raw, nanos: None } => write!(out, "{raw} <unit unknown>")?,
            Value::Duration {
                nanos: Some(ns), ..
            } => write_nanos(out, *ns)?,
            Value::Time { ticks, nanos: None } => write!(out, "{ticks} ticks")?,
            Value::Time {
                nanos: Some(ns), ..
            } => write!(out, "{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)?,
            Value::Text(t) => {
                out.push(b'"');
                escape_into(t, out);
                out.push(b'"');
            }
            Value::Bytes(b) => {
                out.push(b'[');
                for byte in b {
                    write!(out, "{byte:02x}")?;
                }
                out.push(b']');
            }
            Value::Unreadable { addr, reason } => {
                write!(out, "<unreadable at {addr:#x}: ")?;
                escape_into(reason.as_bytes(), out);
                out.push(b'>');
            }
        }
        Ok(())
    }
}

/// A span in the largest unit that keeps it above one: `1.5 ms`, `250 ns`.
fn write_nanos(out: &mut Vec<u8>, ns: u64) -> std::io::Result<()> {
    use std::io::Write;
    let (scale, unit) = match ns {
        0..1_000 => return write!(out, "{ns} ns"),
        1_000..1_000_000 => (1_000, "us"),
        1_000_000..1_000_000_000 => (1_000_000, "ms"),
        _ => (1_000_000_000, "s"),
    };
    let whole = ns / scale;
    let frac = (ns % scale) * 1000 / scale;
    write!(out, "{whole}.{frac:03} {unit}")
}

/// `n` in decimal.
fn push_dec(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// `n` as `0x` and lower-case hex, as `{:#x}` writes it.
fn push_hex(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(b"0x");
    let nibbles = (64 - n.leading_zeros()).div_ceil(4).max(1);
    for i in (0..nibbles).rev() {
        out.push(b"0123456789abcdef"[(n >> (4 * i) & 0xf) as usize]);
    }
}

#[cfg(test)]
mod tests {
    use super::Value;

    #[test]
    fn numbers_are_written_as_std_formats_them() {
        let edges = [
            0,
            1,
            9,
            10,
            15,
            16,
            255,
            256,
            u64::from(u32::MAX),
            i64::MAX as u64,
            u64::MAX,
        ];
        for n in edges.into_iter().chain((0..64).map(|b| 1u64 << b)) {
            for (v, want) in [
                (Value::Unsigned(n), format!("{n}")),
                (Value::Hex(n), format!("{n:#x}")),
                (Value::Signed(n as i64), format!("{}", n as i64)),
            ] {
                let mut out = Vec::new();
                v.write(&mut out);
                assert_eq!(String::from_utf8(out).unwrap(), want);
            }
        }
    }
}
