//! The ring's traceevents in sequence order, and the events they make: simple events as they
//! are, combine events reassembled from their parts, strays and damage marked.

use std::borrow::Cow;

use kcrash_plugin::{Count, Damage, Event, Field, Memory, Order, RingInfo, Unreadable, Value};

use crate::codes::{self, Part, Raw};
use crate::ring::{Buffer, Ring, Syspage};
use crate::TraceLog;

/// How far after its begin part a combine event's parts are looked for.
pub const WINDOW: usize = 4096;
/// Most parts of one combine event.
pub const MAX_PARTS: usize = 256;

/// A buffer that holds events, in sequence order.
#[derive(Clone, Debug)]
pub struct Span {
    pub buf: Buffer,
    /// Why events before its first are missing, when some are: buffers of the sequence not in
    /// the ring.
    pub gap: Option<String>,
}

/// The buffers holding events, oldest first (by `seq_buff_num`, then ring place).
pub fn spans(buffers: &[Buffer], elements: u32, notes: &mut Vec<String>) -> Vec<Span> {
    let mut held: Vec<&Buffer> = buffers.iter().filter(|b| b.events > 0).collect();
    held.sort_by_key(|b| (b.seq_buff_num, b.index));
    let mut spans: Vec<Span> = Vec::with_capacity(held.len());
    for (i, buf) in held.iter().enumerate() {
        let gap = match i.checked_sub(1).map(|p| held[p]) {
            Some(prev) if prev.seq_buff_num == buf.seq_buff_num => {
                notes.push(format!(
                    "buffers {} and {} both say seq_buff_num {}: their order is a guess",
                    prev.index, buf.index, buf.seq_buff_num
                ));
                None
            }
            Some(prev) if prev.seq_buff_num + 1 != buf.seq_buff_num => Some(format!(
                "buffers {} to {} of the sequence are not in the ring: events before this one are missing",
                prev.seq_buff_num + 1,
                buf.seq_buff_num - 1
            )),
            Some(prev) if prev.events < elements => {
                notes.push(format!(
                    "buffer {} (seq_buff_num {}) was left with {} of {elements} traceevents",
                    prev.index, prev.seq_buff_num, prev.events
                ));
                None
            }
            _ => None,
        };
        spans.push(Span {
            buf: (*buf).clone(),
            gap,
        });
    }
    spans
}

/// The `-s` line of the ring.
pub fn ring_info(syspage: &Syspage, ring: &Ring, spans: &[Span]) -> RingInfo {
    let elements = u64::from(syspage.elements);
    let reached = ring.buffers.len() as u64 * elements;
    let held: u64 = spans.iter().map(|s| u64::from(s.buf.events)).sum();
    let broken = |what: &str| {
        ring.broken
            .as_ref()
            .map(|_| format!("the ring is broken: {what}"))
    };
    let capacity = match broken(&format!(
        "the {reached} traceevents of the buffers reached, and more"
    )) {
        Some(why) => Err(why),
        None => Ok(reached),
    };
    let written: Count = if let Some(why) = broken("its newest buffer may not have been reached") {
        Err(why)
    } else if let Some(short) = spans
        .iter()
        .rev()
        .skip(1)
        .find(|s| u64::from(s.buf.events) < elements)
    {
        Err(format!(
            "buffer {} was left before it was full: how many earlier buffers held is unknown",
            short.buf.index
        ))
    } else {
        Ok(spans.last().map_or(0, |s| {
            u64::from(s.buf.seq_buff_num) * elements + u64::from(s.buf.events)
        }))
    };
    RingInfo {
        name: "tracebuf ring".into(),
        processor: None,
        addr: syspage.head,
        capacity,
        unit: "traceevents",
        overwritten: written.clone().map(|w| w.saturating_sub(held)),
        written,
        lost: Err("the trace buffers keep no count of events dropped".into()),
        refused: None,
    }
}

/// One traceevent slot of the ring, read.
struct Slot {
    raw: Result<Raw, Unreadable>,
    seq: u64,
    span: usize,
    /// The clock reading: the last CONTROL/TIME event's upper half before it in its buffer,
    /// and its `timeoff`.
    ticks: u64,
    /// Whether a CONTROL/TIME event gave the upper half.
    time_known: bool,
}

/// Every slot of the spans, in order.
fn read_slots(log: &TraceLog, mem: &dyn Memory) -> Vec<Slot> {
    let mut slots = Vec::new();
    let mut chunk = Vec::new();
    let mut last_ticks = 0;
    for (span, s) in log.spans.iter().enumerate() {
        let n = s.buf.events as usize;
        chunk.resize(n * Raw::BYTES, 0);
        let whole = mem.read(s.buf.data(), &mut chunk).is_ok();
        let mut msb = None;
        for i in 0..n {
            let addr = s.buf.data() + (i * Raw::BYTES) as u64;
            let mut b = [0u8; Raw::BYTES];
            let raw = if whole {
                b.copy_from_slice(&chunk[i * Raw::BYTES..][..Raw::BYTES]);
                Ok(Raw::parse(&b))
            } else {
                mem.read(addr, &mut b).map(|()| Raw::parse(&b))
            };
            if let Ok(r) = &raw {
                msb = r.time_msb().or(msb);
                last_ticks = (u64::from(msb.unwrap_or(0)) << 32) | u64::from(r.timeoff);
            }
            slots.push(Slot {
                time_known: raw.is_ok() && msb.is_some(),
                raw,
                seq: u64::from(s.buf.seq_buff_num) * u64::from(log.elements) + i as u64,
                span,
                ticks: last_ticks,
            });
        }
    }
    slots
}

/// The ring's events in `order`.
pub fn decode(log: &TraceLog, mem: &dyn Memory, order: Order) -> Vec<Event> {
    let slots = read_slots(log, mem);
    let asm = Assembler { log, slots: &slots };
    let at = |p: usize| asm.event_at(p);
    match order {
        Order::OldestFirst => (0..slots.len()).filter_map(at).collect(),
        Order::NewestFirst => (0..slots.len()).rev().filter_map(at).collect(),
    }
}

struct Assembler<'a> {
    log: &'a TraceLog,
    slots: &'a [Slot],
}

/// Why a combine event's collection stopped.
#[derive(Debug, PartialEq, Eq)]
enum Ending {
    Ended,
    /// Another begin part with the same key (the slot's sequence number).
    NewBegin(u64),
    /// A buffer missing from the sequence.
    Gap,
    RingEnd,
    Window,
    TooMany,
}

struct Collected {
    parts: Vec<usize>,
    ending: Ending,
    /// A slot between its parts could not be read.
    unreadable_between: bool,
}

impl Assembler<'_> {
    fn raw(&self, p: usize) -> Option<Raw> {
        self.slots[p].raw.as_ref().ok().copied()
    }

    /// Whether slots `p` and `p + 1` are in buffers with a gap in the sequence between them.
    fn gap_after(&self, p: usize) -> bool {
        let (a, b) = (&self.slots[p], &self.slots[p + 1]);
        a.span != b.span && self.log.spans[b.span].gap.is_some()
    }

    /// The event slot `p` starts, or None for a part that belongs to a combine event begun
    /// earlier.
    fn event_at(&self, p: usize) -> Option<Event> {
        let slot = &self.slots[p];
        let raw = match &slot.raw {
            Ok(raw) => *raw,
            Err(e) => {
                let mut event = Event::new(slot.ticks, slot.seq, 0, "traceevent");
                event.damage.push(Damage::Unreadable {
                    addr: e.addr,
                    reason: e.reason.clone(),
                });
                return Some(event);
            }
        };
        match raw.part() {
            Part::Simple => {
                let mut event = self.base(p, raw);
                let fields =
                    codes::fields(raw.class(), raw.event(), &raw.payload(), &mut event.damage);
                Some(with_fields(event, fields, raw))
            }
            Part::Begin => Some(self.combine(p, raw)),
            Part::Continuation | Part::End if self.claimed(p, raw) => None,
            part @ (Part::Continuation | Part::End) => {
                let mut event = self.base(p, raw);
                event.damage.push(Damage::Incomplete(format!(
                    "a combine event's {} part whose begin part is not in the ring (overwritten, or in a buffer not read)",
                    part.describe()
                )));
                let fields = vec![
                    field(
                        "part",
                        Value::Enum {
                            value: (raw.header >> 30).into(),
                            name: Some(Cow::Borrowed(part.describe())),
                        },
                    ),
                    field("payload", Value::Bytes(raw.payload().to_vec())),
                ];
                Some(with_fields(event, fields, raw))
            }
        }
    }

    /// An event with what every traceevent gives: time, place, processor, name, and the
    /// damage its header or time shows.
    fn base(&self, p: usize, raw: Raw) -> Event {
        let slot = &self.slots[p];
        let mut event = Event::new(
            slot.ticks,
            slot.seq,
            0,
            codes::name(raw.class(), raw.event()),
        );
        event.processor = Some(raw.cpu());
        if let Some(gap) = &self.log.spans[slot.span].gap {
            if p == 0 || self.slots[p - 1].span != slot.span {
                event.damage.push(Damage::Inconsistent(gap.clone()));
            }
        }
        if !slot.time_known {
            event.damage.push(Damage::Inconsistent(
                "no CONTROL/TIME event precedes it in its buffer: the upper 32 bits of its time are unknown, taken as 0".into(),
            ));
        }
        if raw.reserved() {
            event.damage.push(Damage::Inconsistent(
                "its header's reserved bit 15 is set".into(),
            ));
        }
        if raw.time_msb().is_some() && raw.data[1] != raw.timeoff {
            event.damage.push(Damage::Inconsistent(format!(
                "a CONTROL/TIME event whose lsb {:#x} is not its timeoff {:#x}",
                raw.data[1], raw.timeoff
            )));
        }
        event
    }

    /// The combine event begun at `b`.
    fn combine(&self, b: usize, raw: Raw) -> Event {
        let mut event = self.base(b, raw);
        let c = self.collect(b, raw);
        let mut payload = Vec::with_capacity(c.parts.len() * 8);
        for &p in &c.parts {
            if let Some(r) = self.raw(p) {
                payload.extend_from_slice(&r.payload());
            }
        }
        if c.unreadable_between {
            event.damage.push(Damage::Inconsistent(
                "a traceevent between its parts cannot be read: a part may be missing".into(),
            ));
        }
        let why = match c.ending {
            Ending::Ended => {
                let fields = codes::fields(raw.class(), raw.event(), &payload, &mut event.damage);
                return with_fields(event, fields, raw);
            }
            Ending::NewBegin(seq) => format!(
                "a new begin part of the same processor, class, event and time stamp (seq {seq}) comes before its end part"
            ),
            Ending::Gap => "its later parts would be in buffers missing from the ring".into(),
            Ending::RingEnd if self.log.broken.is_some() => {
                "no end part in the buffers read (the ring is broken)".into()
            }
            Ending::RingEnd => {
                "no end part follows it in the ring: it was being logged at the crash".into()
            }
            Ending::Window => format!("no end part within {WINDOW} traceevents"),
            Ending::TooMany => format!("more than {MAX_PARTS} parts without an end part"),
        };
        event.damage.push(Damage::Incomplete(format!(
            "{} part(s) of a combine event: {why}",
            c.parts.len()
        )));
        with_fields(event, vec![field("payload", Value::Bytes(payload))], raw)
    }

    /// The parts of the combine event begun at `b`: its begin and every later continuation
    /// or end part with its key, up to its end part, the next begin part with its key, a gap
    /// in the sequence, or [`WINDOW`] slots.
    fn collect(&self, b: usize, raw: Raw) -> Collected {
        let key = raw.key();
        let mut c = Collected {
            parts: vec![b],
            ending: Ending::RingEnd,
            unreadable_between: false,
        };
        let last = self.slots.len().min(b + 1 + WINDOW);
        for q in b + 1..last {
            if self.gap_after(q - 1) {
                c.ending = Ending::Gap;
                return c;
            }
            let Some(r) = self.raw(q) else {
                c.unreadable_between = true;
                continue;
            };
            if r.key() != key {
                continue;
            }
            match r.part() {
                Part::Simple => continue,
                Part::Begin => {
                    c.ending = Ending::NewBegin(self.slots[q].seq);
                    return c;
                }
                Part::Continuation | Part::End if c.parts.len() == MAX_PARTS => {
                    c.ending = Ending::TooMany;
                    return c;
                }
                Part::Continuation => c.parts.push(q),
                Part::End => {
                    c.parts.push(q);
                    c.ending = Ending::Ended;
                    return c;
                }
            }
        }
        if last < self.slots.len() {
            c.ending = Ending::Window;
        }
        c
    }

    /// Whether the continuation or end part at `p` belongs to a combine event begun earlier:
    /// the nearest earlier begin part with its key, if no end part with its key comes
    /// between, collects it.
    fn claimed(&self, p: usize, raw: Raw) -> bool {
        let key = raw.key();
        for q in (p.saturating_sub(WINDOW)..p).rev() {
            if self.gap_after(q) {
                return false;
            }
            let Some(r) = self.raw(q) else { continue };
            if r.key() != key {
                continue;
            }
            match r.part() {
                Part::Begin => return self.collect(q, r).parts.contains(&p),
                Part::End => return false,
                Part::Simple | Part::Continuation => {}
            }
        }
        false
    }
}

fn field(name: &'static str, value: Value) -> Field {
    Field {
        name: Cow::Borrowed(name),
        value,
    }
}

/// `event` with `fields`, and the header's flags when any are set.
fn with_fields(mut event: Event, fields: Vec<Field>, raw: Raw) -> Event {
    event.fields = fields;
    if raw.flags() != 0 {
        event
            .fields
            .push(field("flags", Value::Hex(raw.flags().into())));
    }
    event
}
