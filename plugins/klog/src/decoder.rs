//! The KLog as one of kcrash's logs: found through the session like any decoder's, its rings
//! streamed as [`Event`]s for the timeline. `klog` itself reads the [`Klog`] directly, for the
//! design's own options (subsystems, full and terse, salvage, following a live kernel).

use std::any::Any;
use std::borrow::Cow;

use kcrash_plugin::{
    Clock, Context, Damage, Decoder, Event, Field, Found, Key, Log, Memory, Missing, Order,
    RingInfo, Value,
};
use klog_runtime::{split_proc_dom, Desc};

use crate::find::find_layout;
use crate::render::{self, Printer};
use crate::ring::{Cursor, Record, Ring};
use crate::{ClockRate, Klog};

/// The Tera kernel event log's decoder.
pub struct KlogDecoder;

pub static DECODER: KlogDecoder = KlogDecoder;

impl Decoder for KlogDecoder {
    fn kind(&self) -> &'static str {
        "KLog"
    }

    fn command(&self) -> &'static str {
        "klog"
    }

    fn summary(&self) -> &'static str {
        "the Tera kernel event log: every KLogs ring (klog 0 full)"
    }

    fn schemata(&self) -> &'static [(&'static str, &'static str)] {
        &[(
            "plugins/klog/schemas/test-kernels.toml",
            include_str!("../schemas/test-kernels.toml"),
        )]
    }

    fn find<'d>(&self, cx: &dyn Context<'d>) -> Result<Found<'d>, Missing> {
        let found = find_layout(cx)?;
        let mut klog = match &found.space {
            // The rings are read through the translations the descriptor implied.
            Some(space) => Klog::read(space, found.layout),
            None => Klog::read(cx.memory(), found.layout),
        };
        klog.source = found.source;
        // What finding noticed first, then what reading the rings did.
        klog.notes.splice(0..0, found.notes);
        Ok(Found {
            translations: found.space,
            log: Box::new(klog),
        })
    }
}

impl ClockRate {
    /// The rate as every decoder's log gives it.
    pub fn clock(&self) -> Clock {
        match (self.hz(), self.unknown_because()) {
            (Some(hz), _) => Clock::Hz(hz),
            (None, why) => Clock::Unknown(why.unwrap_or_default()),
        }
    }
}

/// A ring's row of the `-s` table every log has.
pub fn ring_info(klog: &Klog, r: &Ring) -> RingInfo {
    let refused = match (&r.unreadable, r.trusted()) {
        (Some(e), _) => Some(format!("the control block is not in the dump: {e}")),
        (None, false) => Some(r.problems.join("; ")),
        (None, true) => None,
    };
    let count = |n: u64| match &refused {
        Some(why) => Err(why.clone()),
        None => Ok(n),
    };
    RingInfo {
        name: match r.processor {
            Some(p) => format!("{}/{p}", r.label()),
            None => r.label(),
        },
        processor: r.processor,
        addr: klog.layout.klogs.element(r.index as u64),
        capacity: count(r.num_recs),
        unit: "records",
        written: count(r.written()),
        overwritten: count(r.overwritten()),
        // The writer never drops an event: it overwrites the oldest.
        lost: count(0),
        refused,
    }
}

impl Log for Klog {
    fn kind(&self) -> &'static str {
        DECODER.kind()
    }

    fn rings(&self) -> &[RingInfo] {
        &self.infos
    }

    fn clock(&self) -> &Clock {
        &self.clock
    }

    fn notes(&self) -> &[String] {
        &self.notes
    }

    fn events<'a>(
        &'a self,
        mem: &'a (dyn Memory + Sync),
        ring: usize,
        order: Order,
    ) -> Box<dyn Iterator<Item = Event<'a>> + Send + 'a> {
        let Some(r) = self.rings.get(ring) else {
            return Box::new(std::iter::empty());
        };
        let clock = render::Clock {
            hz: self.clock_rate.hz(),
        };
        let mut printer = Printer::new(mem, self.names(), clock).with_descriptions(self);
        let names = &self.subsystem_names;
        Box::new(
            Cursor::new(mem, r, order, None).map(move |rec| event(&mut printer, names, &rec, true)),
        )
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Klog {
    /// `rec` as the timeline sees it but without its message, for reading it through a schema
    /// after `printer` has printed it (its format is read then, and kept).
    pub fn unformatted_event<'a>(&'a self, printer: &mut Printer<'_>, rec: &Record) -> Event<'a> {
        event(printer, &self.subsystem_names, rec, false)
    }
}

/// A record as an event: the subsystem names it, its chore, domain and data words are its fields,
/// the format string with its arguments its message (when `message`), and the format string its
/// key.
fn event<'a>(
    printer: &mut Printer<'_>,
    names: &'a [String],
    rec: &Record,
    message: bool,
) -> Event<'a> {
    let mut e = Event::new(
        rec.sort_clock,
        rec.seq,
        rec.ring,
        render::subsystem_name_of(names, rec),
    );
    e.own_time = !rec.damage.any();
    if let Some(u) = &rec.unreadable {
        e.damage.push(Damage::Unreadable {
            addr: u.addr,
            reason: u.reason.clone(),
        });
        return e;
    }
    if rec.damage.any() {
        if rec.damage.torn {
            e.damage.push(Damage::Torn);
        }
        let other: Vec<&str> = rec
            .damage
            .names()
            .filter(|&n| n != "torn" && n != "unreadable")
            .collect();
        if !other.is_empty() {
            e.damage.push(Damage::Inconsistent(other.join(", ")));
        }
        if rec.damage.no_message() {
            return e;
        }
    }
    let (processor, domain) = split_proc_dom(rec.proc_dom());
    e.processor = Some(processor);
    // What klog's FULL line shows besides the message, which holds the data words as its
    // format prints them (klog --json has them raw).
    let [data1, data2, data3] = rec.data();
    e.fields = vec![
        field("chore", Value::Hex(rec.id())),
        field("domain", Value::Unsigned(domain.into())),
        field("data1", Value::Hex(data1)),
        field("data2", Value::Hex(data2)),
        field("data3", Value::Hex(data3)),
    ];
    if message {
        e.message = Some(printer.message_text(rec).to_vec());
    }
    // A schema knows the record by its format string: the text, and the address it is at (a
    // pointer desc's; an inline or numbered desc is no address of a format).
    if let Some(text) = printer.decoder.format(rec) {
        e.key = Key::Format {
            addr: match rec.desc_kind {
                Desc::Pointer => rec.desc(),
                Desc::Inline | Desc::Event => 0,
            },
            text: Cow::Owned(text.into_owned()),
        };
    }
    e
}

fn field(name: &'static str, value: Value<'static>) -> Field<'static> {
    Field {
        name: Cow::Borrowed(name),
        value,
    }
}
