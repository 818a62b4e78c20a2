//! Events of any decoder's log as kcrash shows them: one typed value per event and per ring
//! table, written as text or JSON (`report`), for each decoder's command and for `timeline`.

use std::io::Write;

use kcrash_plugin::{Clock, Damage, Event, Log, Value};
use serde::Serialize;

use crate::escape::escaped;
use crate::klog::render::Clock as TimeText;
use crate::paint::Paint;
use crate::report::{Dec, Hex, Report};

/// One event as text and JSON show it.
#[derive(Serialize)]
pub struct EventView<'a> {
    log: &'static str,
    ring: &'a str,
    ring_index: usize,
    processor: Option<u32>,
    /// The event's own time stamp; null when it is lost (a torn record).
    ticks: Option<Dec>,
    /// Seconds since the clock's zero, when the log's clock rate and the time stamp are known.
    seconds: Option<f64>,
    /// Where the event sorts: its time stamp, or the one of the event before it in its ring.
    placed_at: Dec,
    seq: Dec,
    name: &'a str,
    fields: Vec<FieldView>,
    message: Option<String>,
    damage: Vec<DamageView>,
    #[serde(skip)]
    clock: &'a Clock,
    /// Text lines name the log (the timeline's lines, where several are merged).
    #[serde(skip)]
    show_log: bool,
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
    Unsigned { value: Dec },
    Signed { value: Dec },
    Hex { value: Hex },
    Enum { value: Dec, symbol: Option<String> },
    Text { value: String },
    Bytes { value: String },
    Unreadable { addr: Hex, reason: String },
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

impl<'a> EventView<'a> {
    pub fn new(log: &'a dyn Log, event: &'a Event, show_log: bool) -> EventView<'a> {
        let ring = log.rings().get(event.ring).map_or("?", |r| r.name.as_str());
        let clock = log.clock();
        EventView {
            log: log.kind(),
            ring,
            ring_index: event.ring,
            processor: event.processor,
            ticks: event.own_time.then(|| Dec(event.ticks.into())),
            seconds: clock
                .hz()
                .filter(|_| event.own_time)
                .map(|hz| event.ticks as f64 / hz as f64),
            placed_at: Dec(event.ticks.into()),
            seq: Dec(event.seq.into()),
            name: &event.name,
            fields: event
                .fields
                .iter()
                .map(|f| FieldView {
                    name: escaped(f.name.as_bytes()),
                    value: ValueView::of(&f.value),
                })
                .collect(),
            message: event.message.as_deref().map(escaped),
            damage: event.damage.iter().map(DamageView::of).collect(),
            clock,
            show_log,
        }
    }

    /// The line after the time and processor: ring, name, fields, message, damage.
    pub fn write_body(&self, out: &mut Vec<u8>) {
        use std::io::Write as _;
        let _ = write!(out, "{:<8} {}", self.ring, escaped(self.name.as_bytes()));
        for f in &self.fields {
            let _ = write!(out, " {}={}", f.name, f.value.text());
        }
        if let Some(m) = &self.message {
            let _ = write!(out, " \"{m}\"");
        }
        for d in &self.damage {
            let _ = write!(out, " <{}>", d.detail);
        }
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

    /// As gdb would print it: numbers as numbers, enums by name, text quoted, faults in angle
    /// brackets.
    fn text(&self) -> String {
        match self {
            ValueView::Unsigned { value } | ValueView::Signed { value } => value.0.to_string(),
            ValueView::Hex { value } => format!("{:#x}", value.0),
            ValueView::Enum { value, symbol } => match symbol {
                Some(s) => s.clone(),
                None => format!("<unknown {}>", value.0),
            },
            ValueView::Text { value } => format!("\"{value}\""),
            ValueView::Bytes { value } => format!("[{value}]"),
            ValueView::Unreadable { addr, reason } => {
                format!("<unreadable at {:#x}: {reason}>", addr.0)
            }
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

impl Report for EventView<'_> {
    fn text(&self, out: &mut dyn Write, paint: Paint) -> std::io::Result<()> {
        let time = TimeText {
            hz: self.clock.hz(),
        }
        .show(self.placed_at.0 as u64);
        // A lost time stamp shows where the event sits, marked.
        let time = if self.ticks.is_some() {
            time
        } else {
            format!("{}~", time.trim_end())
        };
        let cpu = self
            .processor
            .map_or_else(|| "cpu?".to_string(), |p| format!("cpu{p}"));
        let mut body = Vec::new();
        self.write_body(&mut body);
        let body = String::from_utf8_lossy(&body);
        let log = if self.show_log {
            format!("{:<8} ", self.log)
        } else {
            String::new()
        };
        if self.damage.is_empty() {
            writeln!(out, "{time} {log}{cpu:<5} {body}")
        } else {
            writeln!(out, "{time} {log}{cpu:<5} {}", paint.bad(body))
        }
    }
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
