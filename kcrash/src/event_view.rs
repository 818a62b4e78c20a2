//! Events of any decoder's log as kcrash shows them: one typed value per event and per ring
//! table, written as text or JSON (`report`), for each decoder's command and for `timeline`.

use std::io::Write;

use kcrash_plugin::{Clock, Damage, Event, Field, Log, Value};
use serde::Serialize;

use crate::escape::{escape_into, escaped};
use crate::klog::render::{push_dec_padded, Clock as TimeText};
use crate::paint::Paint;
use crate::report::{Dec, Hex, Report};
use crate::schemata::Schematized;

/// One event as JSON shows it (text: [`write_line`]).
#[derive(Serialize)]
pub struct EventView {
    log: &'static str,
    ring: String,
    ring_index: usize,
    processor: Option<u32>,
    /// The event's own time stamp; null when it is lost (a torn record).
    ticks: Option<Dec>,
    /// Seconds since the clock's zero, when the log's clock rate and the time stamp are known.
    seconds: Option<f64>,
    /// Where the event sorts: its time stamp, or the one of the event before it in its ring.
    placed_at: Dec,
    seq: Dec,
    name: String,
    fields: Vec<FieldView>,
    message: Option<String>,
    damage: Vec<DamageView>,
    #[serde(flatten)]
    schema: SchemaPart,
}

/// What JSON says of an event's schema, beside its raw fields (`timeline`, the decoders'
/// commands, `klog`); nothing when no schema claims it.
#[derive(Serialize)]
pub struct SchemaPart {
    /// The event read through the schema that claims it.
    #[serde(skip_serializing_if = "Option::is_none")]
    schema: Option<SchemaView>,
    /// Where the two schemata that claim the event are written, when two do (neither is used).
    #[serde(skip_serializing_if = "Option::is_none")]
    schema_conflict: Option<[String; 2]>,
}

/// An event as its schema reads it.
#[derive(Serialize)]
struct SchemaView {
    name: String,
    /// Where the schema is written: `FILE:LINE`.
    origin: String,
    fields: Vec<FieldView>,
    /// The schema's display line filled in, when it has one.
    display: Option<String>,
    /// What did not fit the schema's types, one line each.
    marks: Vec<String>,
}

impl SchemaPart {
    pub fn new(schema: Option<&Schematized<'_>>) -> SchemaPart {
        SchemaPart {
            schema: match schema {
                Some(Schematized::One(a)) => Some(SchemaView {
                    name: escaped(a.schema.name.as_bytes()),
                    origin: escaped(a.schema.origin.to_string().as_bytes()),
                    fields: FieldView::all(&a.fields),
                    display: a.display.as_deref().map(escaped),
                    marks: a.marks.iter().map(|m| escaped(m.as_bytes())).collect(),
                }),
                _ => None,
            },
            schema_conflict: match schema {
                Some(Schematized::Conflict(a, b)) => {
                    Some([a, b].map(|s| escaped(s.origin.to_string().as_bytes())))
                }
                _ => None,
            },
        }
    }
}

#[derive(Serialize)]
struct FieldView {
    name: String,
    #[serde(flatten)]
    value: ValueView,
}

/// A field's value: its type, and the value in the JSON conventions' form.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum ValueView {
    Unsigned {
        value: Dec,
    },
    Signed {
        value: Dec,
    },
    Hex {
        value: Hex,
    },
    Enum {
        value: Dec,
        symbol: Option<String>,
    },
    Flags {
        value: Hex,
        names: Vec<String>,
        rest: Hex,
    },
    Pointer {
        value: Hex,
        symbol: Option<String>,
        offset: Option<Hex>,
    },
    Duration {
        value: Dec,
        nanos: Option<Dec>,
    },
    Time {
        value: Dec,
        nanos: Option<Dec>,
    },
    Text {
        value: String,
    },
    Bytes {
        value: String,
    },
    Unreadable {
        addr: Hex,
        reason: String,
    },
}

#[derive(Serialize)]
struct DamageView {
    kind: &'static str,
    detail: String,
    /// Events lost, for `lost-before`.
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<Dec>,
    /// Where, for `unreadable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    addr: Option<Hex>,
}

impl EventView {
    pub fn new(log: &dyn Log, event: &Event, schema: Option<&Schematized<'_>>) -> EventView {
        let ring = log.rings().get(event.ring).map_or("?", |r| r.name.as_str());
        let clock = log.clock();
        EventView {
            log: log.kind(),
            ring: escaped(ring.as_bytes()),
            ring_index: event.ring,
            processor: event.processor,
            ticks: event.own_time.then(|| Dec(event.ticks.into())),
            seconds: clock
                .hz()
                .filter(|_| event.own_time)
                .map(|hz| event.ticks as f64 / hz as f64),
            placed_at: Dec(event.ticks.into()),
            seq: Dec(event.seq.into()),
            name: escaped(event.name.as_bytes()),
            fields: FieldView::all(&event.fields),
            message: event.message.as_deref().map(escaped),
            damage: event.damage.iter().map(DamageView::of).collect(),
            schema: SchemaPart::new(schema),
        }
    }
}

impl FieldView {
    fn all(fields: &[Field<'_>]) -> Vec<FieldView> {
        fields
            .iter()
            .map(|f| FieldView {
                name: escaped(f.name.as_bytes()),
                value: ValueView::of(&f.value),
            })
            .collect()
    }
}

impl ValueView {
    fn of(v: &Value) -> ValueView {
        match v {
            Value::Unsigned(n) => ValueView::Unsigned {
                value: Dec((*n).into()),
            },
            Value::Signed(n) => ValueView::Signed {
                value: Dec((*n).into()),
            },
            Value::Hex(n) => ValueView::Hex { value: Hex(*n) },
            Value::Enum { value, name } => ValueView::Enum {
                value: Dec((*value).into()),
                symbol: name.as_deref().map(|n| escaped(n.as_bytes())),
            },
            Value::Flags { value, names, rest } => ValueView::Flags {
                value: Hex(*value),
                names: names.iter().map(|n| escaped(n.as_bytes())).collect(),
                rest: Hex(*rest),
            },
            Value::Pointer { addr, symbol } => ValueView::Pointer {
                value: Hex(*addr),
                symbol: symbol.as_ref().map(|(n, _)| escaped(n.as_bytes())),
                offset: symbol.as_ref().map(|&(_, off)| Hex(off)),
            },
            Value::Duration { raw, nanos } => ValueView::Duration {
                value: Dec((*raw).into()),
                nanos: nanos.map(|n| Dec(n.into())),
            },
            Value::Time { ticks, nanos } => ValueView::Time {
                value: Dec((*ticks).into()),
                nanos: nanos.map(|n| Dec(n.into())),
            },
            Value::Text(t) => ValueView::Text { value: escaped(t) },
            Value::Bytes(b) => ValueView::Bytes {
                value: b.iter().map(|b| format!("{b:02x}")).collect(),
            },
            Value::Unreadable { addr, reason } => ValueView::Unreadable {
                addr: Hex(*addr),
                reason: escaped(reason.as_bytes()),
            },
        }
    }
}

impl DamageView {
    fn of(d: &Damage) -> DamageView {
        DamageView {
            kind: d.kind(),
            detail: escaped(d.describe().as_bytes()),
            count: match d {
                Damage::LostBefore(n) => Some(Dec((*n).into())),
                _ => None,
            },
            addr: match d {
                Damage::Unreadable { addr, .. } => Some(Hex(*addr)),
                _ => None,
            },
        }
    }
}

/// What every text line of one ring starts with, escaped and padded once for the ring: the
/// log's kind (when lines name it) and the ring's name.
pub struct RingPrefix {
    log: Vec<u8>,
    ring: Vec<u8>,
}

impl RingPrefix {
    pub fn new(log: &dyn Log, ring: usize, show_log: bool) -> RingPrefix {
        let mut p = RingPrefix {
            log: Vec::new(),
            ring: Vec::new(),
        };
        if show_log {
            pad(&mut p.log, log.kind().as_bytes(), 8);
        }
        let name = log.rings().get(ring).map_or("?", |r| r.name.as_str());
        escape_into(name.as_bytes(), &mut p.ring);
        let width = p.ring.len();
        p.ring.extend(std::iter::repeat_n(
            b' ',
            9usize.saturating_sub(width).max(1),
        ));
        p
    }
}

/// Appends `event`'s text line to `out`: time, log (when `prefix` has it), processor, ring,
/// name, fields as gdb prints values, the message quoted, damage in angle brackets, every string
/// from the dump escaped. Through a schema: its name, its fields, then the raw fields it does
/// not read, its display line for the message when it has one, what did not fit as
/// `<schema: ...>`. `keep` sees the line after the processor (what `-g` matches); when it says
/// no, nothing is appended. Says whether the line was kept.
pub fn write_line(
    out: &mut Vec<u8>,
    prefix: &RingPrefix,
    clock: &Clock,
    event: &Event,
    schema: Option<&Schematized<'_>>,
    paint: Paint,
    keep: impl FnOnce(&[u8]) -> bool,
) -> bool {
    let start = out.len();
    TimeText { hz: clock.hz() }.write(out, event.ticks);
    if !event.own_time {
        // A lost time stamp shows where the event sits, marked.
        out.push(b'~');
    }
    out.push(b' ');
    out.extend_from_slice(&prefix.log);
    let cpu = out.len();
    out.extend_from_slice(b"cpu");
    match event.processor {
        Some(p) => push_dec_padded(out, p.into(), 0, b' '),
        None => out.push(b'?'),
    }
    let used = out.len() - cpu;
    out.extend(std::iter::repeat_n(
        b' ',
        6usize.saturating_sub(used).max(1),
    ));
    let body = out.len();
    out.extend_from_slice(&prefix.ring);
    let applied = match schema {
        Some(Schematized::One(a)) => Some(a),
        _ => None,
    };
    let name = applied.map_or(event.name.as_ref(), |a| a.schema.name.as_str());
    escape_into(name.as_bytes(), out);
    let read = applied.map_or(&[][..], |a| &a.fields[..]);
    let unread = event
        .fields
        .iter()
        .filter(|f| applied.is_none_or(|a| !a.schema.fields.iter().any(|s| s.from == f.name)));
    for f in read.iter().chain(unread) {
        out.push(b' ');
        escape_into(f.name.as_bytes(), out);
        out.push(b'=');
        f.value.write(out);
    }
    let message = applied.and_then(|a| a.display.as_deref());
    if let Some(m) = message.or(event.message.as_deref()) {
        out.extend_from_slice(b" \"");
        escape_into(m, out);
        out.push(b'"');
    }
    for d in &event.damage {
        mark(out, "", &d.describe());
    }
    write_marks(out, schema);
    if !keep(&out[body..]) {
        out.truncate(start);
        return false;
    }
    if !event.damage.is_empty() && paint.on {
        let painted = paint.bad(String::from_utf8_lossy(&out[body..]));
        out.truncate(body);
        out.extend_from_slice(painted.as_bytes());
    }
    out.push(b'\n');
    true
}

/// ` <WHATTEXT>`, escaped.
fn mark(out: &mut Vec<u8>, what: &str, text: &str) {
    out.extend_from_slice(b" <");
    out.extend_from_slice(what.as_bytes());
    escape_into(text.as_bytes(), out);
    out.push(b'>');
}

/// ` <schema: ...>` for each value that did not fit the schema, or for two schemata claiming
/// the event.
fn write_marks(out: &mut Vec<u8>, schema: Option<&Schematized<'_>>) {
    match schema {
        Some(Schematized::One(a)) => a.marks.iter().for_each(|m| mark(out, "schema: ", m)),
        Some(Schematized::Conflict(a, b)) => mark(
            out,
            "schema: ",
            &format!("claimed by {} and {}; neither is used", a.origin, b.origin),
        ),
        None => {}
    }
}

/// What `klog`'s text line adds for a schema, after the kernel's own message:
/// ` {NAME field=value ...}` and the marks.
pub fn write_named(out: &mut Vec<u8>, schema: &Schematized<'_>) {
    if let Schematized::One(a) = schema {
        out.extend_from_slice(b" {");
        escape_into(a.schema.name.as_bytes(), out);
        for f in &a.fields {
            out.push(b' ');
            escape_into(f.name.as_bytes(), out);
            out.push(b'=');
            f.value.write(out);
        }
        out.push(b'}');
    }
    write_marks(out, Some(schema));
}

/// `text` padded with spaces to `width`, and one space after it.
fn pad(out: &mut Vec<u8>, text: &[u8], width: usize) {
    out.extend_from_slice(text);
    out.extend(std::iter::repeat_n(
        b' ',
        width.saturating_sub(text.len()) + 1,
    ));
}

/// `CMD -s`: the log's rings.
#[derive(Serialize)]
pub struct Rings {
    log: &'static str,
    /// The clock rate in Hz, or null when it is not known (`clock_unknown` says why).
    clock_hz: Option<Dec>,
    clock_unknown: Option<String>,
    notes: Vec<String>,
    rings: Vec<RingView>,
}

#[derive(Serialize)]
struct RingView {
    name: String,
    processor: Option<u32>,
    addr: Hex,
    unit: &'static str,
    capacity: CountView,
    written: CountView,
    overwritten: CountView,
    lost: CountView,
    /// Why the ring is not read, when it is not.
    refused: Option<String>,
}

/// A count, or why it is unknown.
#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum CountView {
    Known(Dec),
    Unknown(String),
}

impl CountView {
    fn of(c: &kcrash_plugin::Count) -> CountView {
        match c {
            Ok(n) => CountView::Known(Dec((*n).into())),
            Err(why) => CountView::Unknown(escaped(why.as_bytes())),
        }
    }

    fn text(&self) -> String {
        match self {
            CountView::Known(n) => n.0.to_string(),
            CountView::Unknown(_) => "unknown".into(),
        }
    }
}

impl Rings {
    pub fn new(log: &dyn Log) -> Rings {
        Rings {
            log: log.kind(),
            clock_hz: log.clock().hz().map(|hz| Dec(hz.into())),
            clock_unknown: log.clock().unknown_because(),
            notes: log.notes().iter().map(|n| escaped(n.as_bytes())).collect(),
            rings: log
                .rings()
                .iter()
                .map(|r| RingView {
                    name: escaped(r.name.as_bytes()),
                    processor: r.processor,
                    addr: Hex(r.addr),
                    unit: r.unit,
                    capacity: CountView::of(&r.capacity),
                    written: CountView::of(&r.written),
                    overwritten: CountView::of(&r.overwritten),
                    lost: CountView::of(&r.lost),
                    refused: r.refused.as_deref().map(|w| escaped(w.as_bytes())),
                })
                .collect(),
        }
    }
}

impl Report for Rings {
    fn text(&self, out: &mut dyn Write, paint: Paint) -> std::io::Result<()> {
        writeln!(out, "{}", paint.strong(self.log))?;
        match (&self.clock_hz, &self.clock_unknown) {
            (Some(hz), _) => writeln!(out, "clock: {} Hz", hz.0)?,
            (None, Some(why)) => writeln!(out, "clock: unknown ({why}); times in ticks")?,
            (None, None) => {}
        }
        for n in &self.notes {
            writeln!(out, "note: {n}")?;
        }
        writeln!(
            out,
            "{:<12} {:>4} {:>18} {:>12} {:>12} {:>12} {:>10}  STATE",
            "RING", "CPU", "ADDRESS", "CAPACITY", "WRITTEN", "OVERWRITTEN", "LOST"
        )?;
        for r in &self.rings {
            let cpu = r.processor.map_or_else(|| "-".into(), |p| p.to_string());
            let state = match &r.refused {
                Some(why) => paint.bad(format!("REFUSED: {why}")),
                None => "ok".into(),
            };
            writeln!(
                out,
                "{:<12} {cpu:>4} {:>18} {:>12} {:>12} {:>12} {:>10}  {state}",
                r.name,
                format!("{:#x}", r.addr.0),
                format!("{} {}", r.capacity.text(), r.unit),
                r.written.text(),
                r.overwritten.text(),
                r.lost.text(),
            )?;
        }
        for r in &self.rings {
            for (what, c) in [
                ("capacity", &r.capacity),
                ("written", &r.written),
                ("overwritten", &r.overwritten),
                ("lost", &r.lost),
            ] {
                if let CountView::Unknown(why) = c {
                    writeln!(out, "{}: {what} unknown: {why}", r.name)?;
                }
            }
        }
        Ok(())
    }
}
