//! Chrome's trace-event JSON (the "JSON Object Format" of the Trace Event Format document):
//! `{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}`, read by
//! chrome://tracing, Perfetto's UI and trace_processor, and tools that read only JSON. Each log is
//! a process (`pid`), each lane a thread (`tid`) named by metadata events; each event an instant
//! event (`"ph": "i"`) with its time in microseconds to the nanosecond and the same arguments as
//! the Perfetto trace. Numbers that JSON's doubles cannot hold exactly (2^53 and above) and
//! addresses are strings, as in kcrash's other JSON.

use std::collections::HashSet;
use std::io::Write;

use anyhow::Result;
use kcrash_plugin::{Event, Value};
use serde_json::{json, Map, Value as Json};

use super::{
    damage_text, event_name, scalar, Lane, LaneBy, LaneKind, Output, RingView, Scalar, Source,
};
use crate::schemata::Schematized;
use crate::timeline::{self, Emit, MakeEmit, Plan};

/// Writes the trace of `plan`'s events to `out`; returns how many events it holds.
pub fn write<'a>(src: &Source<'a, '_>, out: &mut Output) -> Result<u64> {
    let (plan, lanes) = (src.plan, src.lanes);
    let other: Map<String, Json> = (src.identity.pairs.iter())
        .map(|(k, v)| ((*k).to_owned(), Json::String(v.clone())))
        .collect();
    // The events follow the array's first element, each after a comma: every log's process
    // name comes first.
    write!(
        out,
        "{{\"displayTimeUnit\":\"ns\",\"otherData\":{},\"traceEvents\":[",
        Json::Object(other)
    )?;
    for (i, log) in plan.logs.iter().enumerate() {
        let name = json!({"name": "process_name", "ph": "M", "pid": i + 1,
                          "args": {"name": log.kind()}});
        write!(out, "{}\n{name}", if i == 0 { "" } else { "," })?;
    }
    let make: &MakeEmit<'a, '_> = &|log, ring, _| {
        Box::new(RingJson {
            view: RingView::new(plan, log, ring),
            plan,
            lanes,
            named: HashSet::new(),
            text: Vec::new(),
            name: Vec::new(),
        })
    };
    let shown = timeline::stream(plan, src.mem, make, out)?;
    writeln!(out, "\n]}}")?;
    Ok(shown)
}

/// One ring's events as JSON lines, each after a comma.
struct RingJson<'r> {
    view: RingView<'r>,
    plan: &'r Plan<'r>,
    lanes: &'r LaneBy,
    /// Lanes whose thread this ring has named.
    named: HashSet<Lane>,
    text: Vec<u8>,
    name: Vec<u8>,
}

/// `s` as a JSON string.
fn put_str(out: &mut Vec<u8>, s: &str) {
    // Writing to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Bytes from the dump as a JSON string: escaped as kcrash prints them (into `scratch`), then
/// quoted.
fn put_escaped(out: &mut Vec<u8>, bytes: &[u8], scratch: &mut Vec<u8>) {
    scratch.clear();
    crate::escape::escape_into(bytes, scratch);
    put_str(out, &String::from_utf8_lossy(scratch));
}

/// `"key":` with the key escaped.
fn put_key(out: &mut Vec<u8>, key: &str, scratch: &mut Vec<u8>) {
    put_escaped(out, key.as_bytes(), scratch);
    out.push(b':');
}

/// A value: a number JSON holds exactly, else a string.
fn put_value(out: &mut Vec<u8>, v: &Value<'_>, scratch: &mut Vec<u8>) {
    scratch.clear();
    let _ = match scalar(v, scratch) {
        Scalar::Unsigned(n) if n < 1 << 53 => write!(out, "{n}"),
        Scalar::Signed(n) if n.unsigned_abs() < 1 << 53 => write!(out, "{n}"),
        Scalar::Unsigned(n) => write!(out, "\"{n}\""),
        Scalar::Signed(n) => write!(out, "\"{n}\""),
        Scalar::Hex(n) => write!(out, "\"{n:#x}\""),
        Scalar::Text { start } => {
            put_str(out, &String::from_utf8_lossy(&scratch[start..]));
            Ok(())
        }
    };
}

/// The schema's reading as an object: its fields, display and marks (the event is named by the
/// schema already).
fn put_schema(out: &mut Vec<u8>, schema: &Schematized<'_>, scratch: &mut Vec<u8>) {
    out.push(b'{');
    match schema {
        Schematized::One(a) => {
            let mut sep = "";
            for f in &a.fields {
                out.extend_from_slice(sep.as_bytes());
                put_key(out, &f.name, scratch);
                put_value(out, &f.value, scratch);
                sep = ",";
            }
            if let Some(d) = &a.display {
                out.extend_from_slice(sep.as_bytes());
                out.extend_from_slice(b"\"display\":");
                put_escaped(out, d, scratch);
                sep = ",";
            }
            if !a.marks.is_empty() {
                out.extend_from_slice(sep.as_bytes());
                out.extend_from_slice(b"\"marks\":[");
                for (i, m) in a.marks.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    put_escaped(out, m.as_bytes(), scratch);
                }
                out.push(b']');
            }
        }
        Schematized::Conflict(x, y) => {
            let why = format!("claimed by {} and {}; neither is used", x.origin, y.origin);
            out.extend_from_slice(b"\"conflict\":");
            put_escaped(out, why.as_bytes(), scratch);
        }
    }
    out.push(b'}');
}

/// A lane's thread number within its log's process: small and stable for rings and
/// processors, the lane's identifier folded to 31 bits for a field's values.
fn tid(lane: Lane) -> u64 {
    match lane.kind {
        LaneKind::Ring | LaneKind::Cpu => lane.value.min(1 << 30) + 1,
        LaneKind::Unknown => 0,
        LaneKind::Field => (lane.uuid() & 0x7fff_ffff) | 1 << 30,
    }
}

impl Emit for RingJson<'_> {
    fn emit(&mut self, event: &Event<'_>, time: u64, out: &mut Vec<u8>) -> bool {
        let Some(schema) = self.view.read(self.plan, event) else {
            return false;
        };
        let lane = self.lanes.lane_of(self.view.log_index, event);
        let (pid, tid) = (self.view.log_index + 1, tid(lane));
        if self.named.insert(lane) {
            let name = self.lanes.name(self.view.log, event, lane);
            let rank = tid.min(i32::MAX as u64);
            for meta in [
                json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                       "args": {"name": name}}),
                json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                       "args": {"sort_index": rank}}),
            ] {
                out.extend_from_slice(b",\n");
                let _ = serde_json::to_writer(&mut *out, &meta);
            }
        }
        let scratch = &mut self.text;
        out.extend_from_slice(b",\n{\"name\":");
        self.name.clear();
        event_name(event, schema.as_ref(), &mut self.name);
        put_str(out, &String::from_utf8_lossy(&self.name));
        out.extend_from_slice(b",\"cat\":");
        put_escaped(out, self.view.log.kind().as_bytes(), scratch);
        // The time by hand: microseconds with the nanoseconds as three decimals, exact.
        let ns = self.plan.nanos(self.view.log, time);
        let _ = write!(
            out,
            ",\"ph\":\"i\",\"s\":\"t\",\"pid\":{pid},\"tid\":{tid},\"ts\":{}.{:03},\"args\":{{",
            ns / 1000,
            ns % 1000
        );
        if let Some(m) = &event.message {
            out.extend_from_slice(b"\"message\":");
            put_escaped(out, m, scratch);
            out.push(b',');
        }
        for f in &event.fields {
            put_key(out, &f.name, scratch);
            put_value(out, &f.value, scratch);
            out.push(b',');
        }
        if let Some(p) = event.processor {
            let _ = write!(out, "\"processor\":{p},");
        }
        if self.lanes != &LaneBy::Ring {
            let ring = self.view.log.rings().get(event.ring);
            out.extend_from_slice(b"\"ring\":");
            put_escaped(out, ring.map_or("?", |r| &r.name).as_bytes(), scratch);
            out.push(b',');
        }
        if let Some(d) = damage_text(event) {
            out.extend_from_slice(b"\"damage\":");
            put_escaped(out, d.as_bytes(), scratch);
            out.push(b',');
        }
        if let Some(s) = &schema {
            out.extend_from_slice(b"\"schema\":");
            put_schema(out, s, scratch);
            out.push(b',');
        }
        out.extend_from_slice(b"\"seq\":");
        put_value(out, &Value::Unsigned(event.seq), scratch);
        out.extend_from_slice(b"}}");
        true
    }
}
