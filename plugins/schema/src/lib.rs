//! Event schemata: what a log's events are called and what their raw words mean.
//!
//! A schema file names events of one log by their identity (a KLog format string, a QNX
//! class and event, a DProbes major and minor code, a Klogger event type) and gives each a
//! name, typed fields read from the event's raw fields, and a one-line display template. The
//! files are kcrash's own TOML syntax ([`file`]); the seed systems' own formats are read into
//! the same model by importers in their decoders' crates. [`Schemata`] holds every file a
//! session loaded, refuses two schemata claiming one event, and finds the schema of an event.

pub mod apply;
pub mod display;
pub mod file;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use kcrash_plugin::escape::escaped;

pub use apply::{Applied, Resolve};
pub use display::Display;

/// Where a schema was written: a file and a line, for errors and for `schema` to say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub file: Arc<str>,
    pub line: u32,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// A schema file syntax: which files are in it and how they are read. kcrash's own is
/// [`file::SYNTAX`]; each importer of a seed system's format gives one too.
pub struct Syntax {
    /// As `schema` lists it ("kcrash", "Klogger", "QNX .fmt", "DProbes").
    pub name: &'static str,
    /// Says whether a file of this name (the last part of its path) is in this syntax.
    pub claims: fn(&str) -> bool,
    /// Reads a file's text; the path names it in errors and origins.
    pub parse: fn(&Arc<str>, &str) -> Result<SchemaFile, Error>,
}

/// A schema file that could not be read: the file, the line and column, and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub file: Arc<str>,
    pub line: u32,
    pub column: u32,
    pub what: String,
}

impl Error {
    /// The fault `what` at byte `at` of `text`, the file `file`'s text.
    pub fn at(file: &Arc<str>, text: &str, at: usize, what: String) -> Error {
        let (line, column) = line_column(text, at);
        Error {
            file: file.clone(),
            line,
            column,
            what,
        }
    }

    /// Refuses a text longer than any schema file is let be ([`file::MAX_FILE`]), before any
    /// syntax reads it.
    pub fn check_size(file: &Arc<str>, text: &str) -> Result<(), Error> {
        if text.len() > file::MAX_FILE {
            return Err(Error::at(
                file,
                "",
                0,
                format!("larger than {} bytes", file::MAX_FILE),
            ));
        }
        Ok(())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.what
        )
    }
}

impl std::error::Error for Error {}

/// The 1-based line and column of byte `at` of `text` (for one error; [`Lines`] for many).
pub fn line_column(text: &str, at: usize) -> (u32, u32) {
    Lines::new(text).line_column(at)
}

/// A text's line starts, found once, so that placing each of many items costs a search.
pub struct Lines<'t> {
    text: &'t str,
    starts: Vec<usize>,
}

impl<'t> Lines<'t> {
    pub fn new(text: &'t str) -> Lines<'t> {
        let newlines = text.bytes().enumerate().filter(|&(_, b)| b == b'\n');
        let starts = std::iter::once(0)
            .chain(newlines.map(|(i, _)| i + 1))
            .collect();
        Lines { text, starts }
    }

    /// The 1-based line and column (in characters) of byte `at`.
    pub fn line_column(&self, at: usize) -> (u32, u32) {
        let at = at.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= at);
        let start = self.starts[line - 1];
        let column = String::from_utf8_lossy(&self.text.as_bytes()[start..at])
            .chars()
            .count()
            + 1;
        (
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(column).unwrap_or(u32::MAX),
        )
    }
}

/// What identifies an event to a schema, as its decoder gives it (`kcrash_plugin::Key`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    /// A KLog record's format string.
    Format(Vec<u8>),
    /// A KLog record's format string by the symbol at its address.
    Symbol(String),
    /// A numeric code pair: QNX class and event, DProbes major and minor.
    Code(u32, u32),
    /// The event's name as its log gives it (Klogger's event types).
    Name(String),
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Format(s) => write!(f, "format {:?}", String::from_utf8_lossy(s)),
            Identity::Symbol(s) => write!(f, "symbol {s}"),
            Identity::Code(a, b) => write!(f, "code {a}/{b}"),
            Identity::Name(n) => write!(f, "event {n:?}"),
        }
    }
}

/// One event's schema.
#[derive(Clone, Debug, PartialEq)]
pub struct EventSchema {
    /// The log's kind, as its decoder says it ("KLog", "QNX trace").
    pub log: String,
    pub identity: Identity,
    /// Only in this ring (a KLog subsystem, a processor's buffer), when given.
    pub ring: Option<String>,
    pub name: String,
    pub fields: Vec<FieldSchema>,
    pub display: Option<Display>,
    pub origin: Origin,
}

/// A named, typed field read from one of the event's raw fields.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldSchema {
    pub name: String,
    /// The raw field it is read from, by the decoder's name (`data1`, `d0`, a Klogger field).
    pub from: String,
    pub ty: Type,
}

/// How a raw value is read.
#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    /// The low `bits` bits, unsigned.
    Unsigned {
        bits: u8,
    },
    /// The low `bits` bits, sign-extended.
    Signed {
        bits: u8,
    },
    /// The low `bits` bits in hex.
    Hex {
        bits: u8,
    },
    Enum(Arc<Enum>),
    Flags(Arc<Flags>),
    /// An address, shown as `symbol+offset` when a symbol holds it.
    Pointer,
    /// The address of a NUL-terminated string in the crashed system's memory, read up to
    /// `max` bytes.
    String {
        max: u32,
    },
    /// A span of time in `unit`s.
    Duration(Unit),
    /// A time stamp of the log's own clock.
    Clock,
}

/// The unit of a duration: a fixed fraction of a second, or the log's clock ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Nanoseconds,
    Microseconds,
    Milliseconds,
    Seconds,
    Ticks,
}

impl Unit {
    pub const NAMES: [(&'static str, Unit); 5] = [
        ("ns", Unit::Nanoseconds),
        ("us", Unit::Microseconds),
        ("ms", Unit::Milliseconds),
        ("s", Unit::Seconds),
        ("ticks", Unit::Ticks),
    ];
}

/// Names for values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enum {
    pub name: String,
    pub values: Vec<(i64, String)>,
}

impl Enum {
    pub fn name_of(&self, value: i64) -> Option<&str> {
        self.values
            .iter()
            .find(|(v, _)| *v == value)
            .map(|(_, n)| n.as_str())
    }
}

/// Names for bits: bit number (0 is the least significant) and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flags {
    pub name: String,
    pub bits: Vec<(u8, String)>,
}

/// The schemata of one file, read by [`file::parse`] or an importer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchemaFile {
    pub events: Vec<EventSchema>,
}

/// A file a session loaded: where from, in which syntax, how many events it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    pub file: Arc<str>,
    pub syntax: &'static str,
    pub events: usize,
}

/// Every schema a session loaded, indexed by log and identity.
#[derive(Debug, Default)]
pub struct Schemata {
    pub files: Vec<Loaded>,
    events: Vec<EventSchema>,
    by_log: HashMap<String, Index, Fast>,
}

/// One log's schemata by identity: one map per kind, so that a lookup borrows the event's own
/// bytes and allocates nothing.
#[derive(Debug, Default)]
struct Index {
    formats: HashMap<Vec<u8>, Vec<usize>, Fast>,
    symbols: HashMap<String, Vec<usize>, Fast>,
    codes: HashMap<(u32, u32), Vec<usize>, Fast>,
    names: HashMap<String, Vec<usize>, Fast>,
}

/// A fast hash for the per-event lookups: the keys are the schema files', not the dump's, and
/// `klog` looks up every record's format (SipHash cost a tenth of its time on a big dump).
type Fast = foldhash::fast::RandomState;

impl Index {
    fn slot(&mut self, id: &Identity) -> &mut Vec<usize> {
        match id {
            Identity::Format(f) => self.formats.entry(f.clone()).or_default(),
            Identity::Symbol(s) => self.symbols.entry(s.clone()).or_default(),
            Identity::Code(a, b) => self.codes.entry((*a, *b)).or_default(),
            Identity::Name(n) => self.names.entry(n.clone()).or_default(),
        }
    }

    fn get(&self, id: &Identity) -> &[usize] {
        let list = match id {
            Identity::Format(f) => self.formats.get(f.as_slice()),
            Identity::Symbol(s) => self.symbols.get(s.as_str()),
            Identity::Code(a, b) => self.codes.get(&(*a, *b)),
            Identity::Name(n) => self.names.get(n.as_str()),
        };
        list.map_or(&[], Vec::as_slice)
    }
}

/// Most schemata a session holds: each file is bounded too, this bounds how many are loaded.
pub const MAX_EVENTS: usize = 1 << 16;

/// What a schema is asked about: one event of one log.
#[derive(Clone, Copy, Debug)]
pub struct Subject<'e> {
    pub log: &'e str,
    pub ring: &'e str,
    pub name: &'e str,
    /// The format string (KLog), if the event has one.
    pub format: Option<&'e [u8]>,
    /// The symbol at the format string's address, if one is there.
    pub symbol: Option<&'e str>,
    pub code: Option<(u32, u32)>,
}

/// The schema an event has: none, one, or more than one (which is said, never chosen).
#[derive(Clone, Copy, Debug)]
pub enum Lookup<'s> {
    None,
    One(&'s EventSchema),
    Conflict(&'s EventSchema, &'s EventSchema),
}

impl Schemata {
    /// Adds one file's schemata. A schema claiming an event that one already loaded claims
    /// (same log, identity and ring) is an error naming both; nothing of the file is kept then.
    pub fn add(
        &mut self,
        file: Arc<str>,
        syntax: &'static str,
        f: SchemaFile,
    ) -> Result<(), Error> {
        if self.events.len() + f.events.len() > MAX_EVENTS {
            return Err(Error {
                file,
                line: 1,
                column: 1,
                what: format!("more than {MAX_EVENTS} event schemata in all"),
            });
        }
        // This file's schemata by log and identity, as they are checked: a hash lookup each,
        // so that a file of many events is not compared pairwise.
        let mut this_file: HashMap<(&str, &Identity), Vec<&EventSchema>> = HashMap::new();
        for e in &f.events {
            let loaded = self
                .by_log
                .get(&e.log)
                .map_or(&[][..], |index| index.get(&e.identity))
                .iter()
                .map(|&i| &self.events[i]);
            let key = (e.log.as_str(), &e.identity);
            let same = this_file.get(&key).into_iter().flatten().copied();
            if let Some(other) = loaded.chain(same).find(|o| o.ring == e.ring) {
                return Err(Error {
                    file: e.origin.file.clone(),
                    line: e.origin.line,
                    column: 1,
                    what: format!(
                        "{} {} is claimed here and at {}",
                        escaped(e.log.as_bytes()),
                        e.identity,
                        other.origin
                    ),
                });
            }
            this_file.entry(key).or_default().push(e);
        }
        self.files.push(Loaded {
            file,
            syntax,
            events: f.events.len(),
        });
        for e in f.events {
            let at = self.events.len();
            self.by_log
                .entry(e.log.clone())
                .or_default()
                .slot(&e.identity)
                .push(at);
            self.events.push(e);
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    pub fn events(&self) -> &[EventSchema] {
        &self.events
    }

    /// Where `e`, one of [`Schemata::events`], is among them (for counting matches by schema).
    pub fn index_of(&self, e: &EventSchema) -> Option<usize> {
        // By its address: a lookup per event, so not a search.
        let from_start =
            (e as *const EventSchema as usize).checked_sub(self.events.as_ptr() as usize)?;
        let at = from_start / std::mem::size_of::<EventSchema>().max(1);
        self.events
            .get(at)
            .filter(|x| std::ptr::eq(*x, e))
            .map(|_| at)
    }

    /// Whether a schema of log `log` could claim an event logged with `format`: one names that
    /// format, or names events by anything else. A caller that must build the event to look it
    /// up skips the events no schema can claim.
    pub fn may_claim(&self, log: &str, format: &[u8]) -> bool {
        self.by_log.get(log).is_some_and(|index| {
            index.formats.contains_key(format)
                || !(index.symbols.is_empty() && index.names.is_empty() && index.codes.is_empty())
        })
    }

    /// Whether a schema of log `log` names its event by a format string's symbol: a caller
    /// looks the symbol up only then.
    pub fn keys_symbols(&self, log: &str) -> bool {
        self.by_log
            .get(log)
            .is_some_and(|index| !index.symbols.is_empty())
    }

    /// Whether any schema is for log `log`: a caller skips the per-event lookup otherwise.
    pub fn has_log(&self, log: &str) -> bool {
        self.by_log.contains_key(log)
    }

    /// The schema of `s`: one claiming its identity in its ring or in every ring. Two that
    /// claim it (one by format, one by symbol) are a conflict the caller marks on the event.
    pub fn lookup(&self, s: &Subject<'_>) -> Lookup<'_> {
        let Some(index) = self.by_log.get(s.log) else {
            return Lookup::None;
        };
        let lists = [
            s.format.and_then(|f| index.formats.get(f)),
            s.symbol.and_then(|n| index.symbols.get(n)),
            s.code.and_then(|c| index.codes.get(&c)),
            index.names.get(s.name),
        ];
        let mut found: Option<&EventSchema> = None;
        for list in lists.into_iter().flatten() {
            // The closest ring wins: its own name, then its name without the processor, then
            // every ring. `add` keeps two schemata from having one rank.
            let best = list
                .iter()
                .map(|&i| &self.events[i])
                .filter_map(|e| Some((ring_rank(e.ring.as_deref(), s.ring)?, e)))
                .max_by_key(|&(rank, _)| rank)
                .map(|(_, e)| e);
            if let Some(e) = best {
                match found {
                    None => found = Some(e),
                    Some(first) => return Lookup::Conflict(first, e),
                }
            }
        }
        found.map_or(Lookup::None, Lookup::One)
    }
}

/// How closely a schema's ring names `ring`, if it names it: exactly (2), as every processor's
/// copy of it (`SCHED` for `SCHED/1`, 1), or not at all: every ring (0).
fn ring_rank(schema: Option<&str>, ring: &str) -> Option<u8> {
    match schema {
        None => Some(0),
        Some(r) if r == ring => Some(2),
        Some(r) => ring
            .strip_prefix(r)
            .is_some_and(|rest| rest.starts_with('/'))
            .then_some(1),
    }
}

#[cfg(test)]
mod tests;
