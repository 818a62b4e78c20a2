//! Perfetto's native trace: a `Trace` of `TracePacket`s holding `TrackEvent`s, as ui.perfetto.dev
//! and trace_processor read it. Written by hand — a few dozen lines of protobuf varints and
//! length-delimited fields — because the crates that write Perfetto traces wrap Perfetto's C++
//! SDK (a C++ toolchain and a large native build for kcrash) or generate code for all of
//! Perfetto's protos; kcrash needs eight of their messages.
//!
//! The layout: a first packet says which dump the trace is of (`TraceAttributes`, and the
//! kernel's release as `SystemInfo`) and describes a track per log; each ring is a packet
//! sequence of its own (written by its own thread), which describes each lane's track when it
//! first uses it and interns event names and argument names (each string once per sequence,
//! defined in the packet that first uses it, after the sequence's first packet has said its
//! incremental state starts cleared). Every event is an instant event on its lane's track with
//! its time in nanoseconds (ticks when the clock rate is unknown: the trace's attributes say so),
//! its message, raw fields, processor, sequence number, damage and schema reading as debug
//! annotations.

use std::collections::{HashMap, HashSet};
use std::io::Write;

use anyhow::Result;
use kcrash_plugin::{Event, Log};

use super::{
    damage_text, event_name, log_uuid, scalar, Identity, LaneBy, LaneKind, Output, RingView,
    Scalar, Source,
};
use crate::schemata::Schematized;
use crate::timeline::{self, Emit, MakeEmit, Plan};

/// Field numbers of the messages written (Perfetto's protos/perfetto/trace/); the tests read the
/// trace with the `perfetto` package's generated classes.
mod num {
    /// `Trace.packet`.
    pub const PACKET: u32 = 1;
    // TracePacket
    pub const TIMESTAMP: u32 = 8;
    pub const SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const SYSTEM_INFO: u32 = 45;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    pub const TRACE_ATTRIBUTES: u32 = 126;
    // TrackEvent
    pub const DEBUG_ANNOTATIONS: u32 = 4;
    pub const TYPE: u32 = 9;
    pub const NAME_IID: u32 = 10;
    pub const TRACK_UUID: u32 = 11;
    // DebugAnnotation
    pub const ANNOTATION_NAME_IID: u32 = 1;
    pub const UINT_VALUE: u32 = 3;
    pub const INT_VALUE: u32 = 4;
    pub const STRING_VALUE: u32 = 6;
    pub const POINTER_VALUE: u32 = 7;
    pub const ANNOTATION_NAME: u32 = 10;
    pub const DICT_ENTRIES: u32 = 11;
    // InternedData, and its EventName and DebugAnnotationName entries
    pub const EVENT_NAMES: u32 = 2;
    pub const ANNOTATION_NAMES: u32 = 3;
    pub const IID: u32 = 1;
    pub const INTERNED_NAME: u32 = 2;
    // TrackDescriptor
    pub const UUID: u32 = 1;
    pub const TRACK_NAME: u32 = 2;
    pub const PARENT_UUID: u32 = 5;
    pub const CHILD_ORDERING: u32 = 11;
    pub const SIBLING_ORDER_RANK: u32 = 12;
    // TraceAttributes.attribute, Attribute
    pub const ATTRIBUTE: u32 = 1;
    pub const KEY: u32 = 1;
    pub const ATTRIBUTE_STRING: u32 = 3;
    // SystemInfo.utsname, Utsname
    pub const UTSNAME: u32 = 1;
    pub const SYSNAME: u32 = 1;
    pub const RELEASE: u32 = 3;
}

/// The interner's and the described lanes' hasher: they are looked up several times an event.
type Fast = foldhash::fast::RandomState;

/// `TrackEvent.Type.TYPE_INSTANT`.
const INSTANT: u64 = 3;
/// `TracePacket.SequenceFlags`.
const STATE_CLEARED: u64 = 1;
const NEEDS_STATE: u64 = 2;
/// `TrackDescriptor.ChildTracksOrdering`.
const CHRONOLOGICAL: u64 = 2;
const EXPLICIT: u64 = 3;
/// The sequence of the first packet; rings' sequences follow.
const HEAD_SEQUENCE: u32 = 1;

/// Writes the trace of `plan`'s events to `out`; returns how many events it holds.
pub fn write<'a>(src: &Source<'a, '_>, out: &mut Output) -> Result<u64> {
    let (plan, lanes) = (src.plan, src.lanes);
    let mut head = Vec::new();
    header(&mut head, plan, src.identity, lanes);
    out.write_all(&head)?;
    let make: &MakeEmit<'a, '_> = &|log, ring, stream| {
        let sequence = HEAD_SEQUENCE + 1 + u32::try_from(stream).unwrap_or(u32::MAX - 1);
        Box::new(RingTrace::new(plan, log, ring, lanes, sequence))
    };
    timeline::stream(plan, src.mem, make, out)
}

/// The first packet: the dump's identity, and a track per log.
fn header(out: &mut Vec<u8>, plan: &Plan<'_>, identity: &Identity, lanes: &LaneBy) {
    let mut pkt = Vec::new();
    put_uint(&mut pkt, num::SEQUENCE_ID, HEAD_SEQUENCE.into());
    nested(&mut pkt, num::TRACE_ATTRIBUTES, |a| {
        for (key, value) in &identity.pairs {
            nested(a, num::ATTRIBUTE, |kv| {
                put_bytes(kv, num::KEY, key.as_bytes());
                put_bytes(kv, num::ATTRIBUTE_STRING, value.as_bytes());
            });
        }
    });
    put_bytes(out, num::PACKET, &pkt);
    if let Some(release) = &identity.release {
        pkt.clear();
        put_uint(&mut pkt, num::SEQUENCE_ID, HEAD_SEQUENCE.into());
        nested(&mut pkt, num::SYSTEM_INFO, |s| {
            nested(s, num::UTSNAME, |u| {
                if identity.linux {
                    put_bytes(u, num::SYSNAME, b"Linux");
                }
                put_bytes(u, num::RELEASE, release.as_bytes());
            })
        });
        put_bytes(out, num::PACKET, &pkt);
    }
    for (i, log) in plan.logs.iter().enumerate() {
        pkt.clear();
        put_uint(&mut pkt, num::SEQUENCE_ID, HEAD_SEQUENCE.into());
        nested(&mut pkt, num::TRACK_DESCRIPTOR, |t| {
            put_uint(t, num::UUID, log_uuid(i));
            put_bytes(t, num::TRACK_NAME, log.kind().as_bytes());
            let order = match lanes {
                LaneBy::Field(_) => CHRONOLOGICAL,
                LaneBy::Ring | LaneBy::Cpu => EXPLICIT,
            };
            put_uint(t, num::CHILD_ORDERING, order);
        });
        put_bytes(out, num::PACKET, &pkt);
    }
}

/// One ring's packet sequence.
struct RingTrace<'r> {
    view: RingView<'r>,
    plan: &'r Plan<'r>,
    lanes: &'r LaneBy,
    sequence: u32,
    /// Whether the sequence's first event packet (which clears its state) is written.
    started: bool,
    interner: Interner,
    /// Lanes whose track this sequence has described.
    described: HashSet<u64, Fast>,
    name: Vec<u8>,
    text: Vec<u8>,
    event: Vec<u8>,
    /// The place of the next annotation in the event being written.
    slot: usize,
}

impl<'r> RingTrace<'r> {
    fn new(
        plan: &'r Plan<'r>,
        log: &'r dyn Log,
        ring: usize,
        lanes: &'r LaneBy,
        sequence: u32,
    ) -> RingTrace<'r> {
        RingTrace {
            view: RingView::new(plan, log, ring),
            plan,
            lanes,
            sequence,
            started: false,
            interner: Interner::default(),
            described: HashSet::default(),
            name: Vec::new(),
            text: Vec::new(),
            event: Vec::new(),
            slot: 0,
        }
    }

    /// A packet describing the track of `event`'s lane, under its log's track.
    fn describe(&mut self, event: &Event<'_>, lane: super::Lane, out: &mut Vec<u8>) {
        let name = self.lanes.name(self.view.log, event, lane);
        let rank = match lane.kind {
            LaneKind::Ring | LaneKind::Cpu | LaneKind::Field => lane.value.min(i32::MAX as u64),
            LaneKind::Unknown => i32::MAX as u64,
        };
        nested(out, num::PACKET, |p| {
            put_uint(p, num::SEQUENCE_ID, self.sequence.into());
            nested(p, num::TRACK_DESCRIPTOR, |t| {
                put_uint(t, num::UUID, lane.uuid());
                put_uint(t, num::PARENT_UUID, log_uuid(lane.log));
                put_bytes(t, num::TRACK_NAME, name.as_bytes());
                put_uint(t, num::SIBLING_ORDER_RANK, rank);
            });
        });
    }

    /// An annotation named `key` holding `value` (its text, if text, in `self.text`).
    fn annotate(&mut self, key: &str, value: Scalar) {
        let iid = self.interner.key(self.slot, key);
        self.slot += 1;
        let text = &self.text;
        nested(&mut self.event, num::DEBUG_ANNOTATIONS, |a| {
            put_uint(a, num::ANNOTATION_NAME_IID, iid);
            put_scalar(a, value, text);
        });
    }

    /// The schema's reading as one dictionary annotation: its name, fields, display and marks.
    fn annotate_schema(&mut self, schema: &Schematized<'_>) {
        let iid = self.interner.key(self.slot, "schema");
        self.slot += 1;
        let text = &mut self.text;
        nested(&mut self.event, num::DEBUG_ANNOTATIONS, |a| {
            put_uint(a, num::ANNOTATION_NAME_IID, iid);
            let entry = |a: &mut Vec<u8>, key: &[u8], value: Scalar, text: &[u8]| {
                nested(a, num::DICT_ENTRIES, |e| {
                    put_bytes(e, num::ANNOTATION_NAME, key);
                    put_scalar(e, value, text);
                })
            };
            let string = |a: &mut Vec<u8>, key: &[u8], s: &[u8], text: &mut Vec<u8>| {
                text.clear();
                crate::escape::escape_into(s, text);
                entry(a, key, Scalar::Text { start: 0 }, text);
            };
            match schema {
                // The event is named by the schema already.
                Schematized::One(applied) => {
                    for f in &applied.fields {
                        text.clear();
                        let v = scalar(&f.value, text);
                        entry(a, f.name.as_bytes(), v, text);
                    }
                    if let Some(d) = &applied.display {
                        string(a, b"display", d, text);
                    }
                    for m in &applied.marks {
                        string(a, b"mark", m.as_bytes(), text);
                    }
                }
                Schematized::Conflict(x, y) => {
                    let why = format!("claimed by {} and {}; neither is used", x.origin, y.origin);
                    string(a, b"conflict", why.as_bytes(), text);
                }
            }
        });
    }
}

impl Emit for RingTrace<'_> {
    fn emit(&mut self, event: &Event<'_>, time: u64, out: &mut Vec<u8>) -> bool {
        let Some(schema) = self.view.read(self.plan, event) else {
            return false;
        };
        let lane = self.lanes.lane_of(self.view.log_index, event);
        if self.described.insert(lane.uuid()) {
            self.describe(event, lane, out);
        }
        self.name.clear();
        event_name(event, schema.as_ref(), &mut self.name);
        let name_iid = self.interner.name(&self.name);
        self.event.clear();
        self.slot = 0;
        put_uint(&mut self.event, num::TYPE, INSTANT);
        put_uint(&mut self.event, num::TRACK_UUID, lane.uuid());
        put_uint(&mut self.event, num::NAME_IID, name_iid);
        if let Some(m) = &event.message {
            self.text.clear();
            crate::escape::escape_into(m, &mut self.text);
            self.annotate("message", Scalar::Text { start: 0 });
        }
        for f in &event.fields {
            self.text.clear();
            let v = scalar(&f.value, &mut self.text);
            self.annotate(&f.name, v);
        }
        if let Some(p) = event.processor {
            self.annotate("processor", Scalar::Unsigned(p.into()));
        }
        self.annotate("seq", Scalar::Unsigned(event.seq));
        if self.lanes != &LaneBy::Ring {
            self.text.clear();
            let ring = self.view.log.rings().get(event.ring);
            crate::escape::escape_into(ring.map_or("?", |r| &r.name).as_bytes(), &mut self.text);
            self.annotate("ring", Scalar::Text { start: 0 });
        }
        if let Some(d) = damage_text(event) {
            self.text.clear();
            crate::escape::escape_into(d.as_bytes(), &mut self.text);
            self.annotate("damage", Scalar::Text { start: 0 });
        }
        if let Some(s) = &schema {
            self.annotate_schema(s);
        }
        let ts = self.plan.nanos(self.view.log, time);
        let first = !std::mem::replace(&mut self.started, true);
        let (event_body, interned) = (&self.event, &mut self.interner.new);
        nested(out, num::PACKET, |p| {
            put_uint(p, num::TIMESTAMP, ts);
            put_uint(p, num::SEQUENCE_ID, self.sequence.into());
            // The first packet says the sequence's state starts cleared; the others, which the
            // flags would only mark as needing it, leave them out (two bytes an event).
            if first {
                put_uint(p, num::SEQUENCE_FLAGS, STATE_CLEARED | NEEDS_STATE);
            }
            put_bytes(p, num::TRACK_EVENT, event_body);
            // After the event it defines names for: a reader takes a packet's fields in any
            // order, and the definitions are complete only once the event is written.
            if !interned.is_empty() {
                put_bytes(p, num::INTERNED_DATA, interned);
                interned.clear();
            }
        });
        true
    }
}

/// A sequence's interned strings, event names and argument names: each is given an id the
/// first time it is used, and its definition waits in `new` for the packet that uses it.
struct Interner {
    names: Table,
    keys: Table,
    /// `InternedData` fields not yet written.
    new: Vec<u8>,
}

impl Default for Interner {
    fn default() -> Interner {
        Interner {
            // Event names come escaped (`event_name`); argument names as the decoder gives them.
            names: Table::new(num::EVENT_NAMES, false),
            keys: Table::new(num::ANNOTATION_NAMES, true),
            new: Vec::new(),
        }
    }
}

impl Interner {
    /// The id of event name `name` (escaped already).
    fn name(&mut self, name: &[u8]) -> u64 {
        self.names.id(0, name, &mut self.new)
    }

    /// The id of annotation name `key`, the event's `slot`-th.
    fn key(&mut self, slot: usize, key: &str) -> u64 {
        self.keys.id(slot, key.as_bytes(), &mut self.new)
    }
}

/// One kind of interned string. Events of a ring mostly repeat the previous one's strings in
/// the same order: each lookup is first compared with the previous event's at its place, which
/// saves hashing it, and that memory is reused, not reallocated.
struct Table {
    ids: HashMap<Vec<u8>, u64, Fast>,
    /// The previous event's strings by place, with their ids.
    recent: Vec<(Vec<u8>, u64)>,
    /// The `InternedData` field that defines one.
    field: u32,
    /// Whether a definition escapes its string.
    escape: bool,
}

impl Table {
    fn new(field: u32, escape: bool) -> Table {
        Table {
            ids: HashMap::default(),
            recent: Vec::new(),
            field,
            escape,
        }
    }

    /// The id of `s`, an event's `slot`-th string of this kind; a new one's definition is
    /// appended to `new`.
    fn id(&mut self, slot: usize, s: &[u8], new: &mut Vec<u8>) -> u64 {
        if let Some((last, iid)) = self.recent.get(slot) {
            if last == s {
                return *iid;
            }
        }
        let iid = match self.ids.get(s) {
            Some(&iid) => iid,
            None => {
                let iid = self.ids.len() as u64 + 1;
                self.ids.insert(s.to_vec(), iid);
                match self.escape {
                    true => {
                        let mut escaped = Vec::new();
                        crate::escape::escape_into(s, &mut escaped);
                        define(new, self.field, iid, &escaped);
                    }
                    false => define(new, self.field, iid, s),
                }
                iid
            }
        };
        match self.recent.get_mut(slot) {
            Some((last, id)) => {
                last.clear();
                last.extend_from_slice(s);
                *id = iid;
            }
            None => self.recent.push((s.to_vec(), iid)),
        }
        iid
    }
}

fn define(out: &mut Vec<u8>, field: u32, iid: u64, name: &[u8]) {
    nested(out, field, |e| {
        put_uint(e, num::IID, iid);
        put_bytes(e, num::INTERNED_NAME, name);
    });
}

/// A debug annotation's value.
fn put_scalar(out: &mut Vec<u8>, value: Scalar, text: &[u8]) {
    match value {
        Scalar::Unsigned(n) => put_uint(out, num::UINT_VALUE, n),
        // int64: the two's complement as a varint.
        Scalar::Signed(n) => put_uint(out, num::INT_VALUE, n as u64),
        Scalar::Hex(n) => put_uint(out, num::POINTER_VALUE, n),
        Scalar::Text { start } => put_bytes(
            out,
            num::STRING_VALUE,
            text.get(start..).unwrap_or_default(),
        ),
    }
}

/// Wire types.
const VARINT: u8 = 0;
const LEN: u8 = 2;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, u64::from(field) << 3 | u64::from(wire));
}

fn put_uint(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, VARINT);
    varint(out, v);
}

fn put_bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(out, field, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A message field whose body `body` writes in place: one byte is kept for its length, and
/// the rare body of 128 bytes or more moves up to make room for a longer one.
fn nested(out: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    key(out, field, LEN);
    let at = out.len();
    out.push(0);
    body(out);
    let len = (out.len() - at - 1) as u64;
    if len < 0x80 {
        out[at] = len as u8;
    } else {
        let mut prefix = Vec::with_capacity(10);
        varint(&mut prefix, len);
        out.splice(at..=at, prefix);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_little_endian_groups_of_seven_bits() {
        for (v, want) in [
            (0u64, vec![0u8]),
            (1, vec![1]),
            (127, vec![0x7f]),
            (128, vec![0x80, 0x01]),
            (300, vec![0xac, 0x02]),
            (u64::MAX, [vec![0xff; 9], vec![0x01]].concat()),
        ] {
            let mut out = Vec::new();
            varint(&mut out, v);
            assert_eq!(out, want, "{v}");
        }
    }

    #[test]
    fn a_nested_body_of_any_length_is_prefixed_by_its_length() {
        for len in [0usize, 1, 127, 128, 300, 20_000] {
            let mut out = vec![0xaa];
            nested(&mut out, 2, |b| b.extend(std::iter::repeat_n(7u8, len)));
            let mut want = vec![0xaa, 2 << 3 | 2];
            varint(&mut want, len as u64);
            want.extend(std::iter::repeat_n(7u8, len));
            assert_eq!(out, want, "{len}");
        }
    }
}
