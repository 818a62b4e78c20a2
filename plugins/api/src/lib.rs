//! The interface between kcrash and the decoders of in-memory logs: the memory and symbols a
//! decoder reads, the events it yields, and the merge that puts several streams in time
//! order. Decoders depend on this crate and not on kcrash; kcrash depends on them.
//!
//! A decoder is a [`Decoder`]: it finds its log in a session's dump through a [`Context`] and
//! gives a [`Log`], whose rings each stream [`Event`]s in time order. `plugins/README.md` says
//! how to write one.

pub mod cache;
pub mod escape;
pub mod event;
pub mod log;
pub mod memory;
pub mod merge;
pub mod pipeline;

pub use event::{Damage, Event, Field, Key, Name, Value};
pub use log::{Clock, Context, Count, Decoder, Found, Log, Missing, Order, RingInfo, Symbol};
pub use memory::{Memory, Runs, Unreadable};
pub use merge::{Keyed, Merge, PeekKey};

/// The version of kcrash's JSON conventions, the first key (`kcrash_json`) of every document and
/// line: a decoder that writes JSON itself writes it too.
pub const JSON_VERSION: u32 = 1;
