//! What a decoder is, what it finds, and what it is given to find it with.

use std::any::Any;
use std::sync::Arc;

use dumpfmt::{AddressSpace, Dump};
use symbols::Image;

use crate::event::Event;
use crate::memory::Memory;

/// Which way events are streamed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    NewestFirst,
    OldestFirst,
}

/// A log's clock: how many ticks make a second, or why that is not known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Clock {
    Hz(u64),
    Unknown(String),
}

impl Clock {
    pub fn hz(&self) -> Option<u64> {
        match self {
            Clock::Hz(hz) if *hz > 0 => Some(*hz),
            _ => None,
        }
    }

    /// Why times are shown in ticks, when they are.
    pub fn unknown_because(&self) -> Option<String> {
        match self {
            Clock::Hz(0) => Some("the clock rate is 0".into()),
            Clock::Hz(_) => None,
            Clock::Unknown(why) => Some(why.clone()),
        }
    }

    /// `ticks` in nanoseconds, when the rate is known (saturating: a hostile count cannot wrap).
    pub fn nanos(&self, ticks: u64) -> Option<u64> {
        let hz = self.hz()?;
        let ns = u128::from(ticks) * 1_000_000_000 / u128::from(hz);
        Some(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

/// A count the log's control structures give, or why it cannot be believed.
pub type Count = Result<u64, String>;

/// One ring (buffer) of a log, for its `-s` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingInfo {
    /// The ring's name as its users know it (`cpu0`, `DBG_VM`, `tracebuf 3`).
    pub name: String,
    /// The processor that writes it, when the log has rings per processor.
    pub processor: Option<u32>,
    /// Where its control structure is.
    pub addr: u64,
    /// How many events (or bytes, as `unit` says) it can hold.
    pub capacity: Count,
    /// What `capacity` counts: "records", "bytes".
    pub unit: &'static str,
    /// Events ever written to it, as its control structure says.
    pub written: Count,
    /// Events overwritten by newer ones.
    pub overwritten: Count,
    /// Events the writer dropped (serial gaps, a full buffer).
    pub lost: Count,
    /// Why the ring is not read at all, when it is not: its events are then none.
    pub refused: Option<String>,
}

/// A log found in a dump: its rings and a stream of events for each.
pub trait Log: Any + Send + Sync {
    /// The log's kind as its users say it ("KLog", "Klogger").
    fn kind(&self) -> &'static str;

    /// Its rings, in the order [`Log::events`] takes their indices.
    fn rings(&self) -> &[RingInfo];

    /// The rate of the ticks its events carry.
    fn clock(&self) -> &Clock;

    /// Where the log was found and how (the symbol, the scan), and what finding it noticed.
    fn notes(&self) -> &[String];

    /// Ring `ring`'s events in `order`, read from `mem` as they are asked for: never the whole
    /// ring at once. A refused ring or one out of range yields nothing. The stream is `Send`:
    /// `timeline` reads each ring on a thread of its own.
    fn events<'a>(
        &'a self,
        mem: &'a (dyn Memory + Sync),
        ring: usize,
        order: Order,
    ) -> Box<dyn Iterator<Item = Event<'a>> + Send + 'a>;

    /// The log as [`Any`], for the log's own command, which knows its type.
    fn as_any(&self) -> &dyn Any;
}

/// A global of an image: where it is and how big.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub address: u64,
    pub size: u64,
}

/// What a session gives a decoder to find its log with.
pub trait Context<'d> {
    /// The crashed system's memory by virtual address.
    fn memory(&self) -> &dyn Memory;

    /// A global by name, in the kernel (or program) image or a loaded module.
    fn symbol(&self, name: &str) -> Option<Symbol>;

    /// The images, the kernel's first, for decoders that read their layout from DWARF.
    fn images(&self) -> Vec<Arc<Image>>;

    /// The dump, for decoders that scan it.
    fn dump(&self) -> &'d Dump;

    /// The dump's own virtual-to-physical translations.
    fn space(&self) -> &AddressSpace<'d>;
}

/// What a decoder found.
pub struct Found<'d> {
    pub log: Box<dyn Log>,
    /// Translations that reading the log needs beyond the dump's own (a descriptor found by
    /// scanning may imply them); the log's notes say what they are.
    pub translations: Option<AddressSpace<'d>>,
}

/// Why a decoder found no log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    /// The dump shows no sign of this log (no symbol, nothing found by a scan).
    #[error("{0}")]
    Absent(String),
    /// Something that looks like the log is there, but it cannot be read: why.
    #[error("{0}")]
    Refused(String),
}

/// One kind of in-memory log kcrash can read.
pub trait Decoder: Sync {
    /// The log's name as its users say it ("Klogger").
    fn kind(&self) -> &'static str;

    /// The session command that prints it, crash-style (`klogger`, `tracelog`, `dplog`).
    fn command(&self) -> &'static str;

    /// One line for `help` and `plugins`.
    fn summary(&self) -> &'static str;

    /// Looks for the log in the session's dump and checks its control structures.
    fn find<'d>(&self, cx: &dyn Context<'d>) -> Result<Found<'d>, Missing>;

    /// The event schema files this decoder ships, built into kcrash: each one's path in the
    /// project (which also says its syntax) and its text.
    fn schemata(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
}
