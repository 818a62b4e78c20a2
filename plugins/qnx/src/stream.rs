//! The ring's traceevents in sequence order, and the events they make: simple events as they
//! are, combine events reassembled from their parts, strays and damage marked.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};

use kcrash_plugin::{Count, Damage, Event, Field, Memory, Order, RingInfo, Unreadable, Value};

use crate::codes::{self, Key, Part, Raw, MAX_PARTS};

use crate::ring::{Buffer, Ring, Syspage};
use crate::TraceLog;

/// How far after its begin part a combine event's parts may come.
pub const WINDOW: usize = 4096;

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
        unit: "records",
        overwritten: written.clone().map(|w| w.saturating_sub(held)),
        written,
        lost: Err("the trace buffers keep no count of events dropped".into()),
        refused: None,
    }
}

/// One traceevent slot of the ring, read, or a run of unreadable ones.
struct Slot {
    raw: Result<Raw, Unreadable>,
    seq: u64,
    span: usize,
    /// The clock reading: the last CONTROL/TIME event's upper half before it in its buffer,
    /// and its `timeoff`. For a slot whose reading is not known whole (unreadable, or no
    /// CONTROL/TIME event before it in its buffer), the last whole reading before it in the
    /// stream, or, with none, the first after it (0 with none at all): a sort key that keeps
    /// the stream in time order, not its own time.
    ticks: u64,
    /// Whether a CONTROL/TIME event gave the upper half.
    time_known: bool,
    /// Unreadable slots right after this unreadable one, in the same buffer.
    more: u64,
}

/// Every slot of the spans, in order.
fn read_slots(log: &TraceLog, mem: &dyn Memory) -> Vec<Slot> {
    let mut slots: Vec<Slot> = Vec::new();
    let mut chunk = Vec::new();
    // The last whole clock reading in the stream, and how many slots lead it with none.
    let mut last_known: Option<u64> = None;
    let mut leading = 0;
    for (span, s) in log.spans.iter().enumerate() {
        let n = s.buf.events as usize;
        chunk.resize(n * Raw::BYTES, 0);
        let whole = mem.read(s.buf.data(), &mut chunk).is_ok();
        let mut msb = None;
        for i in 0..n {
            let addr = s.buf.data().wrapping_add((i * Raw::BYTES) as u64);
            let mut b = [0u8; Raw::BYTES];
            let raw = if whole {
                b.copy_from_slice(&chunk[i * Raw::BYTES..][..Raw::BYTES]);
                Ok(Raw::parse(&b))
            } else {
                mem.read(addr, &mut b).map(|()| Raw::parse(&b))
            };
            match (&raw, slots.last_mut()) {
                (Err(_), Some(prev)) if i > 0 && prev.raw.is_err() => {
                    prev.more += 1;
                    continue;
                }
                (Ok(r), _) => {
                    msb = r.time_msb().or(msb);
                    if let Some(msb) = msb {
                        last_known = Some((u64::from(msb) << 32) | u64::from(r.timeoff));
                    }
                }
                (Err(_), _) => {}
            }
            let time_known = raw.is_ok() && msb.is_some();
            if last_known.is_none() {
                leading += 1;
            }
            slots.push(Slot {
                time_known,
                raw,
                seq: u64::from(s.buf.seq_buff_num) * u64::from(log.elements) + i as u64,
                span,
                ticks: last_known.unwrap_or(0),
                more: 0,
            });
        }
    }
    // Slots before the first whole reading take it (the first slot after them that has one).
    let first = slots.get(leading).map_or(0, |s| s.ticks);
    for slot in &mut slots[..leading] {
        slot.ticks = first;
    }
    slots
}

/// The ring's events in `order`.
pub fn decode(log: &TraceLog, mem: &dyn Memory, order: Order) -> Vec<Event<'static>> {
    let slots = read_slots(log, mem);
    let mut events = Assembler::new(log, &slots).run();
    // Each event sits at its first slot: a combine event at its begin part, so the stream
    // stays in time order.
    events.sort_by_key(|(p, _)| *p);
    let events = events.into_iter().map(|(_, e)| e);
    match order {
        Order::OldestFirst => events.collect(),
        Order::NewestFirst => events.rev().collect(),
    }
}

/// Why a combine event ended.
#[derive(Debug, PartialEq, Eq)]
enum Ending {
    Ended,
    /// Another begin part with the same key (its sequence number).
    NewBegin(u64),
    /// A buffer missing from the sequence.
    Gap,
    RingEnd,
    Window,
    TooMany,
}

/// A combine event whose end part has not come yet.
struct Open {
    raw: Raw,
    parts: Vec<usize>,
    /// Unreadable slots seen before its begin part and by its last part.
    unreadable_at_begin: u64,
    unreadable_at_last: u64,
}

/// One pass over the slots: simple events as they are; each begin part opens a combine event
/// that later parts with its key join until its end part, another begin with its key, a gap
/// in the sequence, [`WINDOW`] slots or [`MAX_PARTS`] parts; a part with no open event is a
/// stray.
struct Assembler<'a> {
    log: &'a TraceLog,
    slots: &'a [Slot],
    open: HashMap<Key, Open>,
    /// Begin parts by position, oldest first, for closing those [`WINDOW`] slots behind.
    begun: VecDeque<(usize, Key)>,
    unreadable: u64,
    /// Events and the slot each starts at.
    out: Vec<(usize, Event<'static>)>,
}

impl<'a> Assembler<'a> {
    fn new(log: &'a TraceLog, slots: &'a [Slot]) -> Self {
        Assembler {
            log,
            slots,
            open: HashMap::new(),
            begun: VecDeque::new(),
            unreadable: 0,
            out: Vec::new(),
        }
    }

    fn run(mut self) -> Vec<(usize, Event<'static>)> {
        for p in 0..self.slots.len() {
            if p > 0 && self.gap_before(p) {
                let keys: Vec<Key> = self.open.keys().copied().collect();
                for key in keys {
                    self.close(key, Ending::Gap);
                }
            }
            while let Some(&(b, key)) = self.begun.front() {
                if p - b <= WINDOW {
                    break;
                }
                self.begun.pop_front();
                if self.open.get(&key).is_some_and(|o| o.parts[0] == b) {
                    self.close(key, Ending::Window);
                }
            }
            self.slot(p);
        }
        let keys: Vec<Key> = self.open.keys().copied().collect();
        for key in keys {
            self.close(key, Ending::RingEnd);
        }
        self.out
    }

    /// Whether slot `p` is the first of a buffer after a gap in the sequence.
    fn gap_before(&self, p: usize) -> bool {
        let (a, b) = (&self.slots[p - 1], &self.slots[p]);
        a.span != b.span && self.log.spans[b.span].gap.is_some()
    }

    fn slot(&mut self, p: usize) {
        let slot = &self.slots[p];
        let raw = match &slot.raw {
            Ok(raw) => *raw,
            Err(e) => {
                self.unreadable += 1;
                let mut event = Event::new(slot.ticks, slot.seq, 0, "traceevent");
                event.own_time = false;
                let more = match slot.more {
                    0 => String::new(),
                    n => format!(" (and the {n} traceevents after it)"),
                };
                event.damage.push(Damage::Unreadable {
                    addr: e.addr,
                    reason: format!("{}{more}", e.reason),
                });
                self.out.push((p, event));
                return;
            }
        };
        let key = raw.key();
        match raw.part() {
            Part::Simple => {
                let mut event = self.base(p, raw);
                let fields =
                    codes::fields(raw.class(), raw.event(), &raw.payload(), &mut event.damage);
                self.out.push((p, with_fields(event, fields, raw)));
            }
            Part::Begin => {
                if self.open.contains_key(&key) {
                    self.close(key, Ending::NewBegin(slot.seq));
                }
                self.open.insert(
                    key,
                    Open {
                        raw,
                        parts: vec![p],
                        unreadable_at_begin: self.unreadable,
                        unreadable_at_last: self.unreadable,
                    },
                );
                self.begun.push_back((p, key));
            }
            part @ (Part::Continuation | Part::End) => {
                let unreadable = self.unreadable;
                match self.open.get_mut(&key) {
                    Some(o) if o.parts.len() < MAX_PARTS => {
                        o.parts.push(p);
                        o.unreadable_at_last = unreadable;
                        if part == Part::End {
                            self.close(key, Ending::Ended);
                        }
                    }
                    Some(_) => {
                        self.close(key, Ending::TooMany);
                        self.stray(p, raw, part);
                    }
                    None => self.stray(p, raw, part),
                }
            }
        }
    }

    /// A continuation or end part that belongs to no begin part in the ring.
    fn stray(&mut self, p: usize, raw: Raw, part: Part) {
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
        self.out.push((p, with_fields(event, fields, raw)));
    }

    /// An event with what every traceevent gives: time, place, processor, name, and the
    /// damage its header or time shows.
    fn base(&self, p: usize, raw: Raw) -> Event<'static> {
        let slot = &self.slots[p];
        let mut event = Event::new(
            slot.ticks,
            slot.seq,
            0,
            codes::name(raw.class(), raw.event()),
        );
        event.processor = Some(raw.cpu());
        event.key = kcrash_plugin::Key::Code(raw.class(), raw.event());
        if let Some(gap) = &self.log.spans[slot.span].gap {
            if p == 0 || self.slots[p - 1].span != slot.span {
                event.damage.push(Damage::Inconsistent(gap.clone()));
            }
        }
        if !slot.time_known {
            event.own_time = false;
            event.damage.push(Damage::Inconsistent(format!(
                "no CONTROL/TIME event precedes it in its buffer: the upper 32 bits of its time stamp are unknown, so its time is unknown (its timeoff, the lower 32 bits, is {:#x}); it is placed at the time of the nearest event before it whose time is known (after it, when none before is)",
                raw.timeoff
            )));
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

    /// Ends the open combine event of `key` and gives its event.
    fn close(&mut self, key: Key, ending: Ending) {
        let Some(o) = self.open.remove(&key) else {
            return;
        };
        let begin = o.parts[0];
        let mut event = self.base(begin, o.raw);
        let mut payload = Vec::with_capacity(o.parts.len() * 8);
        for &p in &o.parts {
            if let Ok(r) = &self.slots[p].raw {
                payload.extend_from_slice(&r.payload());
            }
        }
        if o.unreadable_at_last > o.unreadable_at_begin {
            event.damage.push(Damage::Inconsistent(
                "a traceevent between its parts cannot be read: a part may be missing".into(),
            ));
        }
        let why = match ending {
            Ending::Ended => {
                let raw = o.raw;
                let fields = codes::fields(raw.class(), raw.event(), &payload, &mut event.damage);
                self.out.push((begin, with_fields(event, fields, raw)));
                return;
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
            o.parts.len()
        )));
        let fields = vec![field("payload", Value::Bytes(payload))];
        self.out.push((begin, with_fields(event, fields, o.raw)));
    }
}

fn field(name: &'static str, value: Value<'static>) -> Field<'static> {
    Field {
        name: Cow::Borrowed(name),
        value,
    }
}

/// `event` with `fields`, and the header's flags when any are set.
fn with_fields(mut event: Event<'static>, fields: Vec<Field<'static>>, raw: Raw) -> Event<'static> {
    event.fields = fields;
    if raw.flags() != 0 {
        event
            .fields
            .push(field("flags", Value::Hex(raw.flags().into())));
    }
    event
}
