//! Linux's printk ring as one of the session's logs, so that `plugins` lists it and `timeline`
//! merges its messages with the event rings. `log` prints it with crash's options.

use std::any::Any;

use kcrash_plugin::{
    Clock, Context, Decoder, Event, Found, Log, Memory, Missing, Order, RingInfo, Value,
};

use super::printk::{self, Record, Ring};

/// The printk ring's decoder.
pub struct PrintkDecoder;

pub static DECODER: PrintkDecoder = PrintkDecoder;

/// Why the ring's counts are unknown when no record of it can be read.
const NONE_READABLE: &str = "no record of the ring is readable";

/// The caller id's top bit: the rest is a CPU number, not a task id.
const CALLER_IS_CPU: u32 = 0x8000_0000;

/// Linux's levels by number, as the kernel names them.
const LEVELS: [&str; 8] = [
    "KERN_EMERG",
    "KERN_ALERT",
    "KERN_CRIT",
    "KERN_ERR",
    "KERN_WARNING",
    "KERN_NOTICE",
    "KERN_INFO",
    "KERN_DEBUG",
];

impl Decoder for PrintkDecoder {
    fn kind(&self) -> &'static str {
        "printk"
    }

    fn command(&self) -> &'static str {
        "log"
    }

    fn summary(&self) -> &'static str {
        "Linux's printk ring (5.10 and later): the kernel's messages"
    }

    fn find<'d>(&self, cx: &dyn Context<'d>) -> Result<Found<'d>, Missing> {
        let info = cx
            .dump()
            .vmcoreinfo()
            .map_err(|e| Missing::Refused(e.to_string()))?;
        let images = cx.images();
        // Levels need DWARF: with it they are read, without it they are unknown.
        let image = images.first().map(|i| &**i);
        let levels = image.is_some_and(|i| i.debug_path().is_some());
        let ring =
            printk::find(info.as_ref(), image, cx.memory(), levels).map_err(|e| match e {
                crate::error::Error::Missing(why) => Missing::Absent(why),
                other => Missing::Refused(other.to_string()),
            })?;
        let records: Vec<Record> = ring.records().collect();
        Ok(Found {
            log: Box::new(PrintkLog::new(&ring, records)),
            translations: None,
        })
    }
}

/// The ring's records, read whole when found: the printk ring is copied out of the dump in one
/// piece anyway, and its size is bounded by the reader.
pub struct PrintkLog {
    records: Vec<Record>,
    rings: [RingInfo; 1],
    clock: Clock,
}

impl PrintkLog {
    fn new(ring: &Ring, records: Vec<Record>) -> PrintkLog {
        let info = RingInfo {
            name: "printk".into(),
            processor: None,
            addr: ring.address(),
            capacity: Ok(ring.capacity()),
            unit: "records",
            // Sequence numbers count every record since boot; with no readable record there is
            // none to count from.
            written: records
                .last()
                .map(|r| r.seq.saturating_add(1))
                .ok_or_else(|| NONE_READABLE.to_string()),
            // Records before the oldest readable one.
            overwritten: records
                .first()
                .map(|r| r.seq)
                .ok_or_else(|| NONE_READABLE.to_string()),
            lost: Err("the printk ring does not count dropped messages".into()),
            refused: None,
        };
        PrintkLog {
            records,
            rings: [info],
            // ts_nsec is in nanoseconds.
            clock: Clock::Hz(1_000_000_000),
        }
    }
}

impl Log for PrintkLog {
    fn kind(&self) -> &'static str {
        DECODER.kind()
    }

    fn rings(&self) -> &[RingInfo] {
        &self.rings
    }

    fn clock(&self) -> &Clock {
        &self.clock
    }

    fn notes(&self) -> &[String] {
        &[]
    }

    fn events<'a>(
        &'a self,
        _mem: &'a (dyn Memory + Sync),
        ring: usize,
        order: Order,
    ) -> Box<dyn Iterator<Item = Event<'a>> + Send + 'a> {
        let records = self.records.get(..).filter(|_| ring == 0).unwrap_or(&[]);
        match order {
            Order::OldestFirst => Box::new(records.iter().map(event)),
            Order::NewestFirst => Box::new(records.iter().rev().map(event)),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A record as an event named by its level (`printk` when the level is not known: it needs
/// DWARF).
fn event(r: &Record) -> Event<'_> {
    let name = r
        .level
        .and_then(|l| LEVELS.get(usize::from(l)))
        .copied()
        .unwrap_or("printk");
    let mut e = Event::new(r.ts_nsec, r.seq, 0, name);
    if r.caller_id & CALLER_IS_CPU != 0 {
        e.processor = Some(r.caller_id & !CALLER_IS_CPU);
    } else {
        e.field("task", Value::Unsigned(r.caller_id.into()));
    }
    e.message = Some(r.text.clone());
    e
}
