//! One event of any in-memory log, as every decoder gives it and every command prints it.

use std::borrow::Cow;

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
