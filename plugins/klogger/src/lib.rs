//! kcrash's decoder of Klogger logs (Etsion, Ben-Nun, Tsafrir and Feitelson, "The Klogger
//! HOWTO"): per-CPU memory-resident buffers of events, each a header (type, serial number,
//! cycle-counter time stamp) and a payload laid out as the C struct the kernel's schema
//! declares. Lost events show as gaps in a buffer's serial numbers.
//!
//! The decoder finds the log by its symbol `klogger`, checks every CPU's control structure
//! before reading its buffer, and types payloads by the schema the kernel embeds (or the one
//! built in, [`BUILT_IN_SCHEMA`]). README.md gives the layout.

pub mod import;
pub mod schema;

use std::any::Any;
use std::borrow::Cow;

use kcrash_plugin::{
    Clock, Context, Count, Damage, Decoder, Event, Field, Found, Key, Log, Memory, Missing, Order,
    RingInfo, Value,
};

pub use schema::Schema;

/// The schema of kcrash's test kernels, for a kernel whose own is not in the dump.
pub const BUILT_IN_SCHEMA: &str = include_str!("../schemas/.klogger.conf.kcrash");
const BUILT_IN_NAME: &str = "plugins/klogger/schemas/.klogger.conf.kcrash";

/// The log's kind, as its users say it: what schemata name it by.
pub const KIND: &str = "Klogger";

/// The log's symbol.
pub const SYMBOL: &str = "klogger";
const MAGIC: [u8; 8] = *b"KLOGGER\0";
const VERSION: u32 = 1;

/// The log's fixed part: magic, version, ncpus, clock_hz, schema, schema_len; then the CPUs'.
const LOG_BYTES: u64 = 40;
/// One CPU's control structure: buffer, size, head, tail, next_serial, lost, overwritten
/// (u64 each), cpu, flags (u32 each).
const CPU_BYTES: u64 = 64;
/// CPUs read when the symbol's size does not say how many the array holds.
const MAX_CPUS: u64 = 256;
/// Biggest buffer read: the HOWTO's examples go to 128 MiB per CPU.
const MAX_BUFFER: u64 = 256 << 20;
// A record's offset in its buffer fits a u32 (newest first keeps one per record).
const _: () = assert!(MAX_BUFFER <= 1 << 32);
/// A record header: type (u32), size (u32), serial (u64), time stamp (u64).
const HEADER_BYTES: u64 = 24;
/// The filler's type: it takes the bytes left before the buffer's end.
const PAD: u32 = u32::MAX;
/// Most bytes of an unknown event's payload shown.
const MAX_RAW: u64 = 4096;

/// The Klogger decoder.
pub struct Klogger;

/// The decoder, for kcrash's registry.
pub static DECODER: Klogger = Klogger;

impl Decoder for Klogger {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn command(&self) -> &'static str {
        "klogger"
    }

    fn summary(&self) -> &'static str {
        "Klogger's per-CPU event buffers, payloads typed by the kernel's schema"
    }

    fn schemata(&self) -> &'static [(&'static str, &'static str)] {
        &[(
            "plugins/klogger/schemas/.klogger.conf.kcrash",
            BUILT_IN_SCHEMA,
        )]
    }

    fn find<'d>(&self, cx: &dyn Context<'d>) -> Result<Found<'d>, Missing> {
        let symbol = cx
            .symbol(SYMBOL)
            .ok_or_else(|| Missing::Absent(format!("no symbol {SYMBOL}")))?;
        let log = KloggerLog::read(cx.memory(), symbol.address, symbol.size)?;
        Ok(Found {
            log: Box::new(log),
            translations: None,
        })
    }
}

/// A Klogger log found in a dump.
pub struct KloggerLog {
    schema: Schema,
    clock: Clock,
    rings: Vec<RingInfo>,
    /// Each ring's buffer, `None` when its control structure was refused.
    buffers: Vec<Option<Buffer>>,
    notes: Vec<String>,
}

/// A CPU's buffer as its checked control structure gives it.
#[derive(Clone, Copy, Debug)]
struct Buffer {
    cpu: u32,
    base: u64,
    size: u64,
    tail: u64,
    head: u64,
}

impl Buffer {
    /// The place in the byte count (`tail` to `head`) of the record at `offset` in the buffer:
    /// `head - tail` is at most `size`, so one place in `tail..tail + size` has that offset.
    fn pos_of(&self, offset: u32) -> u64 {
        let ahead = (u64::from(offset) + self.size - self.tail % self.size) % self.size;
        self.tail + ahead
    }
}

/// A CPU's control structure as read.
struct Control {
    buffer: u64,
    size: u64,
    head: u64,
    tail: u64,
    next_serial: u64,
    lost: u64,
    overwritten: u64,
    cpu: u32,
}

impl KloggerLog {
    /// Reads and checks the log at `addr` (`size` bytes by its symbol, 0 if not known).
    pub fn read(mem: &dyn Memory, addr: u64, size: u64) -> Result<KloggerLog, Missing> {
        let mut fixed = [0u8; LOG_BYTES as usize];
        mem.read(addr, &mut fixed)
            .map_err(|e| Missing::Refused(format!("{SYMBOL} at {addr:#x} is unreadable: {e}")))?;
        if fixed[..8] != MAGIC {
            return Err(Missing::Refused(format!(
                "{SYMBOL} at {addr:#x}: magic is {}, not \"KLOGGER\\0\"",
                kcrash_plugin::escape::escaped(&fixed[..8])
            )));
        }
        let version = u32_at(&fixed, 8);
        if version != VERSION {
            return Err(Missing::Refused(format!(
                "{SYMBOL} at {addr:#x}: version {version}, this decoder reads {VERSION}"
            )));
        }
        let ncpus = u64::from(u32_at(&fixed, 12));
        let room = match size {
            0 => MAX_CPUS,
            _ => size.saturating_sub(LOG_BYTES) / CPU_BYTES,
        };
        if ncpus > room {
            return Err(Missing::Refused(format!(
                "{SYMBOL}.ncpus at {:#x} is {ncpus}, but the log has room for {room} CPUs",
                addr + 12
            )));
        }
        let mut notes = vec![format!("{SYMBOL} at {addr:#x}: {ncpus} CPU buffer(s)")];
        let clock = match u64_at(&fixed, 16) {
            0 => Clock::Unknown(format!(
                "{SYMBOL}.clock_hz at {:#x} is 0: the kernel did not record its cycle counter's rate",
                addr + 16
            )),
            hz => Clock::Hz(hz),
        };
        let schema = load_schema(
            mem,
            addr,
            u64_at(&fixed, 24),
            u64_at(&fixed, 32),
            &mut notes,
        );
        let mut log = KloggerLog {
            schema,
            clock,
            rings: Vec::new(),
            buffers: Vec::new(),
            notes,
        };
        for i in 0..ncpus {
            let at = addr + LOG_BYTES + i * CPU_BYTES;
            log.add_ring(mem, i as u32, at);
        }
        Ok(log)
    }

    /// The schema events are typed by.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Reads CPU `cpu`'s control structure at `at`, checks it, and walks its buffer once for
    /// the counts the `-s` table shows.
    fn add_ring(&mut self, mem: &dyn Memory, cpu: u32, at: u64) {
        let name = format!("cpu{cpu}");
        let refused = |why: String| RingInfo {
            name: name.clone(),
            processor: Some(cpu),
            addr: at,
            capacity: Err(why.clone()),
            unit: "bytes",
            written: Err(why.clone()),
            overwritten: Err(why.clone()),
            lost: Err(why.clone()),
            refused: Some(why),
        };
        let control = match read_control(mem, at) {
            Ok(c) => c,
            Err(why) => {
                self.rings.push(refused(why));
                self.buffers.push(None);
                return;
            }
        };
        let checked = check_control(&control, at, cpu).and_then(|b| self.check_overlap(b, at));
        let buffer = match checked {
            Ok(b) => b,
            Err(why) => {
                self.rings.push(refused(why));
                self.buffers.push(None);
                return;
            }
        };
        if control.cpu != cpu {
            self.notes.push(format!(
                "{name}: its control structure at {at:#x} names cpu {}",
                control.cpu
            ));
        }
        let scan = Scan::of(mem, &buffer);
        if let Some(damage) = &scan.stopped {
            self.notes.push(format!(
                "{name}: read stops after {} record(s): {}",
                scan.held,
                damage.describe()
            ));
        }
        self.rings.push(counts(cpu, name, at, &control, &scan));
        self.buffers.push(Some(buffer));
    }

    /// `b` (from the control structure at `at`), or why not: a buffer that overlaps one an
    /// earlier CPU's control structure gave is refused, so no byte of the dump is walked twice.
    fn check_overlap(&self, b: Buffer, at: u64) -> Result<Buffer, String> {
        let end = b.base + b.size;
        match self
            .buffers
            .iter()
            .flatten()
            .find(|o| b.base < o.base + o.size && o.base < end)
        {
            Some(o) => Err(format!(
                "buffer (at {at:#x}) {:#x}..{end:#x} overlaps cpu{}'s buffer {:#x}..{:#x}",
                b.base,
                o.cpu,
                o.base,
                o.base + o.size
            )),
            None => Ok(b),
        }
    }

    /// The event a record holds; `previous` is the record before it in the buffer (serial,
    /// ticks), for the serial gap and the clock's order.
    fn event<'s>(
        &'s self,
        mem: &dyn Memory,
        ring: usize,
        h: &Header,
        previous: Option<&Header>,
    ) -> Event<'s> {
        let mut damage = Vec::new();
        if let Some(p) = previous {
            match h.serial.checked_sub(p.serial) {
                Some(1) => {}
                Some(0) | None => damage.push(Damage::Inconsistent(format!(
                    "serial {} at {:#x} does not follow serial {}",
                    h.serial, h.at, p.serial
                ))),
                Some(d) => damage.push(Damage::LostBefore(d - 1)),
            }
            if h.ticks < p.ticks {
                damage.push(Damage::Inconsistent(format!(
                    "time stamp {:#x} is earlier than the previous record's {:#x}",
                    h.ticks, p.ticks
                )));
            }
        }
        let payload_at = h.at + HEADER_BYTES;
        let payload_len = u64::from(h.bytes) - HEADER_BYTES;
        let (name, fields) = match self.schema.event(h.type_id) {
            Some(ty) => {
                let want = (HEADER_BYTES + ty.size).next_multiple_of(8);
                if want != u64::from(h.bytes) {
                    damage.push(Damage::Inconsistent(format!(
                        "the record at {:#x} is {} bytes, but {}'s payload makes {want}",
                        h.at, h.bytes, ty.name
                    )));
                }
                let fields = self.fields(mem, ty, payload_at, payload_len, &mut damage);
                (Cow::Borrowed(ty.name.as_str()), fields)
            }
            None => {
                let shown = payload_len.min(MAX_RAW);
                if shown < payload_len {
                    damage.push(Damage::Incomplete(format!(
                        "a payload of {payload_len} bytes, the first {MAX_RAW} shown"
                    )));
                }
                let payload = raw(mem, payload_at, shown, &mut damage);
                let fields = vec![
                    Field {
                        name: "type".into(),
                        value: Value::Unsigned(u64::from(h.type_id)),
                    },
                    Field {
                        name: "payload".into(),
                        value: payload,
                    },
                ];
                (Cow::Borrowed("unknown"), fields)
            }
        };
        Event {
            ticks: h.ticks,
            own_time: true,
            seq: h.serial,
            ring,
            processor: self.buffers.get(ring).copied().flatten().map(|b| b.cpu),
            name,
            fields,
            message: None,
            damage,
            key: Key::Name,
        }
    }

    /// A payload's fields as the schema types them.
    fn fields<'s>(
        &'s self,
        mem: &dyn Memory,
        ty: &'s schema::EventType,
        at: u64,
        len: u64,
        damage: &mut Vec<Damage>,
    ) -> Vec<Field<'s>> {
        let have = len.min(ty.size);
        let mut bytes = vec![0u8; have as usize];
        let read = mem.read(at, &mut bytes);
        if let Err(e) = &read {
            damage.push(Damage::Unreadable {
                addr: e.addr,
                reason: e.reason.clone(),
            });
        }
        let mut past_end = false;
        let fields = ty
            .fields
            .iter()
            .map(|f| {
                let addr = at + f.offset;
                let end = f.offset + f.ty.size();
                let value = match &read {
                    Err(e) => Value::Unreadable {
                        addr,
                        reason: e.reason.clone(),
                    },
                    Ok(()) if end > have => {
                        past_end = true;
                        Value::Unreadable {
                            addr,
                            reason: format!("past the end of the record's {len}-byte payload"),
                        }
                    }
                    Ok(()) => typed(&self.schema, &f.ty, &bytes[f.offset as usize..end as usize]),
                };
                Field {
                    name: Cow::Borrowed(f.name.as_str()),
                    value,
                }
            })
            .collect();
        if past_end {
            damage.push(Damage::Incomplete(format!(
                "{}'s payload is {} bytes; the record holds {len}",
                ty.name, ty.size
            )));
        }
        fields
    }
}

impl Log for KloggerLog {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn rings(&self) -> &[RingInfo] {
        &self.rings
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
        let Some(Some(buffer)) = self.buffers.get(ring).copied() else {
            return Box::new(std::iter::empty());
        };
        let mut walk = Walk::new(mem, buffer);
        match order {
            Order::OldestFirst => {
                let mut previous: Option<Header> = None;
                Box::new(std::iter::from_fn(move || {
                    let event = match walk.next()? {
                        Ok(h) => {
                            let e = self.event(mem, ring, &h, previous.as_ref());
                            previous = Some(h);
                            e
                        }
                        Err(damage) => stopped(previous.as_ref(), ring, buffer.cpu, damage),
                    };
                    Some(event)
                }))
            }
            Order::NewestFirst => {
                // Records are found only from the oldest on: note where each starts, as its
                // offset in the buffer (the buffer bounds how many), then read them back newest
                // first.
                let mut starts: Vec<u32> = Vec::new();
                let mut stop = None;
                for step in walk.by_ref() {
                    match step {
                        // Below the buffer's size, at most MAX_BUFFER: fits (asserted above).
                        Ok(h) => starts.push((h.pos % buffer.size) as u32),
                        Err(damage) => stop = Some(damage),
                    }
                }
                let header = move |offset: u32| {
                    Walk::at(mem, buffer, buffer.pos_of(offset))
                        .next()
                        .and_then(Result::ok)
                };
                let newest = starts.last().copied().and_then(header);
                let mark = stop.map(|damage| stopped(newest.as_ref(), ring, buffer.cpu, damage));
                let events = (0..starts.len()).rev().map(move |i| {
                    let Some(h) = header(starts[i]) else {
                        // Read once already: memory that changes under us is a live system's.
                        return stopped(
                            None,
                            ring,
                            buffer.cpu,
                            Damage::Inconsistent(format!(
                                "the record at offset {:#x} changed while being read",
                                starts[i]
                            )),
                        );
                    };
                    let previous = i.checked_sub(1).and_then(|p| header(starts[p]));
                    self.event(mem, ring, &h, previous.as_ref())
                });
                Box::new(mark.into_iter().chain(events))
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The mark where reading a buffer stopped, as an event after the last one read (at its time).
fn stopped(last: Option<&Header>, ring: usize, cpu: u32, damage: Damage) -> Event<'static> {
    let (ticks, seq) = last.map_or((0, 0), |h| (h.ticks, h.serial.saturating_add(1)));
    let mut event = Event::new(ticks, seq, ring, "(damaged)");
    event.own_time = false;
    event.processor = Some(cpu);
    event.damage.push(damage);
    event
}

/// `len` bytes at `at`, untyped, or unreadable (with the damage noted).
fn raw(mem: &dyn Memory, at: u64, len: u64, damage: &mut Vec<Damage>) -> Value<'static> {
    let mut bytes = vec![0u8; len as usize];
    match mem.read(at, &mut bytes) {
        Ok(()) => Value::Bytes(bytes),
        Err(e) => {
            damage.push(Damage::Unreadable {
                addr: e.addr,
                reason: e.reason.clone(),
            });
            Value::Unreadable {
                addr: e.addr,
                reason: e.reason,
            }
        }
    }
}

/// One field's value from its bytes (exactly its type's size).
fn typed<'s>(schema: &'s Schema, ty: &schema::Type, bytes: &[u8]) -> Value<'s> {
    let mut word = [0u8; 8];
    let n = bytes.len().min(8);
    word[..n].copy_from_slice(&bytes[..n]);
    let unsigned = u64::from_le_bytes(word);
    // Sign-extends from the field's width.
    let signed = |width: usize| {
        let shift = 64 - 8 * width.clamp(1, 8) as u32;
        ((unsigned << shift) as i64) >> shift
    };
    match ty {
        schema::Type::Unsigned(_) => Value::Unsigned(unsigned),
        schema::Type::Signed(_) => Value::Signed(signed(bytes.len())),
        schema::Type::String(_) => {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            Value::Text(bytes[..end].to_vec())
        }
        schema::Type::Enum(index) => {
            let value = signed(bytes.len());
            let name = schema.enums.get(*index).and_then(|e| e.name_of(value));
            Value::Enum {
                value: value as u64,
                name: name.map(Cow::Borrowed),
            }
        }
    }
}

/// The kernel's own schema (the text at `schema`, `len` bytes), or the built-in one when the
/// kernel's is not in the dump; a schema that does not parse types nothing.
fn load_schema(
    mem: &dyn Memory,
    log: u64,
    schema: u64,
    len: u64,
    notes: &mut Vec<String>,
) -> Schema {
    let kernels = if schema == 0 || len == 0 {
        Err(format!("{SYMBOL}.schema at {:#x} is not set", log + 24))
    } else if len > schema::MAX_TEXT as u64 {
        Err(format!(
            "{SYMBOL}.schema_len at {:#x} is {len}, more than {} bytes",
            log + 32,
            schema::MAX_TEXT
        ))
    } else {
        let mut text = vec![0u8; len as usize];
        mem.read(schema, &mut text)
            .map_err(|e| format!("the kernel's schema at {schema:#x} is unreadable: {e}"))
            .map(|()| text)
    };
    let (text, source) = match kernels {
        Ok(text) => (
            String::from_utf8_lossy(&text).into_owned(),
            format!("the kernel's schema ({len} bytes at {schema:#x})"),
        ),
        Err(why) => {
            notes.push(format!("{why}; using the schema built into kcrash"));
            (
                BUILT_IN_SCHEMA.to_string(),
                format!("the built-in schema {BUILT_IN_NAME}"),
            )
        }
    };
    match Schema::parse(&text) {
        Ok(schema) => {
            let level = schema
                .using
                .as_deref()
                .map_or(String::new(), |l| format!(", level {l}"));
            notes.push(format!(
                "events typed by {source}: {} event type(s){level}",
                schema.events.len()
            ));
            schema
        }
        Err(e) => {
            notes.push(format!(
                "{source} does not parse ({e}): every event is shown as unknown, with its raw payload"
            ));
            Schema {
                using: None,
                events: Vec::new(),
                enums: Vec::new(),
            }
        }
    }
}

fn read_control(mem: &dyn Memory, at: u64) -> Result<Control, String> {
    let mut b = [0u8; CPU_BYTES as usize];
    mem.read(at, &mut b)
        .map_err(|e| format!("its control structure at {at:#x} is unreadable: {e}"))?;
    Ok(Control {
        buffer: u64_at(&b, 0),
        size: u64_at(&b, 8),
        head: u64_at(&b, 16),
        tail: u64_at(&b, 24),
        next_serial: u64_at(&b, 32),
        lost: u64_at(&b, 40),
        overwritten: u64_at(&b, 48),
        cpu: u32_at(&b, 56),
    })
}

/// The buffer a control structure at `at` describes, or which field is wrong and why.
fn check_control(c: &Control, at: u64, cpu: u32) -> Result<Buffer, String> {
    let field = |offset: u64, name: &str| format!("{name} (at {:#x})", at + offset);
    if c.buffer == 0 {
        return Err(format!("{} is null", field(0, "buffer")));
    }
    if c.size < 2 * HEADER_BYTES || c.size > MAX_BUFFER || c.size % 8 != 0 {
        return Err(format!(
            "{} is {:#x}: not a multiple of 8 from {} to {MAX_BUFFER:#x}",
            field(8, "size"),
            c.size,
            2 * HEADER_BYTES
        ));
    }
    if c.buffer.checked_add(c.size).is_none() {
        return Err(format!(
            "{} {:#x} plus the size {:#x} wraps the address space",
            field(0, "buffer"),
            c.buffer,
            c.size
        ));
    }
    for (offset, name, value) in [(16, "head", c.head), (24, "tail", c.tail)] {
        if value % 8 != 0 {
            return Err(format!(
                "{} is {value:#x}: records are 8-byte aligned",
                field(offset, name)
            ));
        }
    }
    match c.head.checked_sub(c.tail) {
        None => Err(format!(
            "{} {:#x} is past {} {:#x}",
            field(24, "tail"),
            c.tail,
            field(16, "head"),
            c.head
        )),
        Some(used) if used > c.size => Err(format!(
            "{} {:#x} is {used:#x} bytes past tail {:#x}: more than the buffer's {:#x}",
            field(16, "head"),
            c.head,
            c.tail,
            c.size
        )),
        Some(_) => Ok(Buffer {
            cpu,
            base: c.buffer,
            size: c.size,
            tail: c.tail,
            head: c.head,
        }),
    }
}

/// What one walk over a buffer found: for the counts, before any event is asked for.
struct Scan {
    held: u64,
    /// Serial numbers missing between held records.
    gaps: u64,
    newest_serial: Option<u64>,
    stopped: Option<Damage>,
}

impl Scan {
    fn of(mem: &dyn Memory, buffer: &Buffer) -> Scan {
        let mut scan = Scan {
            held: 0,
            gaps: 0,
            newest_serial: None,
            stopped: None,
        };
        for step in Walk::new(mem, *buffer) {
            match step {
                Ok(h) => {
                    if let Some(d) = scan.newest_serial.and_then(|p| h.serial.checked_sub(p)) {
                        scan.gaps = scan.gaps.saturating_add(d.saturating_sub(1));
                    }
                    scan.held += 1;
                    scan.newest_serial = Some(h.serial);
                }
                Err(damage) => scan.stopped = Some(damage),
            }
        }
        scan
    }
}

/// A ring's `-s` counts from its control structure, each checked against what the buffer
/// holds.
fn counts(cpu: u32, name: String, at: u64, c: &Control, scan: &Scan) -> RingInfo {
    let whole = scan.stopped.is_none();
    // Events after the newest held one got serial numbers but no record.
    let trailing = match scan.newest_serial {
        Some(s) if whole => c.next_serial.checked_sub(s.saturating_add(1)),
        _ => Some(0),
    };
    let lost: Count = match trailing {
        None => Err(format!(
            "next_serial (at {:#x}) is {}, not past the newest record's serial {}",
            at + 32,
            c.next_serial,
            scan.newest_serial.unwrap_or(0)
        )),
        Some(t) if scan.gaps.saturating_add(t) > c.lost => Err(format!(
            "{} serial number(s) are missing from the buffer, but lost (at {:#x}) says {}",
            scan.gaps.saturating_add(t),
            at + 40,
            c.lost
        )),
        Some(_) => Ok(c.lost),
    };
    let balanced = scan
        .held
        .checked_add(c.overwritten)
        .and_then(|n| n.checked_add(c.lost))
        == Some(c.next_serial);
    let overwritten: Count = if !whole {
        Err("the buffer could not be read to its end".into())
    } else if !balanced {
        Err(format!(
            "{} held + {} overwritten (at {:#x}) + {} lost is not next_serial {}",
            scan.held,
            c.overwritten,
            at + 48,
            c.lost,
            c.next_serial
        ))
    } else {
        Ok(c.overwritten)
    };
    let written: Count = c.next_serial.checked_sub(c.lost).ok_or_else(|| {
        format!(
            "lost (at {:#x}) {} is more than next_serial {}",
            at + 40,
            c.lost,
            c.next_serial
        )
    });
    RingInfo {
        processor: Some(cpu),
        name,
        addr: at,
        capacity: Ok(c.size),
        unit: "bytes",
        written,
        overwritten,
        lost,
        refused: None,
    }
}

/// A record's header, read and checked.
#[derive(Clone, Copy, Debug)]
struct Header {
    /// Its place in the byte count `tail` and `head` keep.
    pos: u64,
    at: u64,
    type_id: u32,
    bytes: u32,
    serial: u64,
    ticks: u64,
}

/// The records of a buffer from `tail` (or a record's start) to `head`, fillers skipped; ends
/// after the first record it cannot read or believe. Each step moves on by at least 8 bytes,
/// so a walk takes at most `size / 8` steps.
struct Walk<'a, M: Memory + ?Sized> {
    mem: &'a M,
    buffer: Buffer,
    pos: u64,
    done: bool,
}

impl<'a, M: Memory + ?Sized> Walk<'a, M> {
    fn new(mem: &'a M, buffer: Buffer) -> Self {
        Self::at(mem, buffer, buffer.tail)
    }

    fn at(mem: &'a M, buffer: Buffer, pos: u64) -> Self {
        Walk {
            mem,
            buffer,
            pos,
            done: false,
        }
    }

    fn step(&mut self) -> Option<Result<Header, Damage>> {
        let b = self.buffer;
        while self.pos < b.head {
            let offset = self.pos % b.size;
            let at = b.base + offset;
            let unreadable = |e: kcrash_plugin::Unreadable| Damage::Unreadable {
                addr: e.addr,
                reason: e.reason,
            };
            let mut word = [0u8; 8];
            if let Err(e) = self.mem.read(at, &mut word) {
                return Some(Err(unreadable(e)));
            }
            let (type_id, bytes) = (u32_at(&word, 0), u32_at(&word, 4));
            let left = b.size - offset;
            if type_id == PAD {
                if u64::from(bytes) != left || self.pos + left > b.head {
                    return Some(Err(Damage::Inconsistent(format!(
                        "the filler at {at:#x} is {bytes} bytes, but {left} remain before the buffer's end"
                    ))));
                }
                self.pos += left;
                continue;
            }
            let bytes64 = u64::from(bytes);
            let why = if type_id == 0 {
                Some("type 0: never written".to_string())
            } else if bytes64 < HEADER_BYTES || bytes64 % 8 != 0 {
                Some(format!(
                    "its size {bytes} is not a multiple of 8 of at least {HEADER_BYTES}"
                ))
            } else if bytes64 > left {
                Some(format!("its size {bytes} runs past the buffer's end"))
            } else if self.pos + bytes64 > b.head {
                Some(format!("its size {bytes} runs past head"))
            } else {
                None
            };
            if let Some(why) = why {
                return Some(Err(Damage::Inconsistent(format!(
                    "the record at {at:#x}: {why}"
                ))));
            }
            let mut rest = [0u8; 16];
            if let Err(e) = self.mem.read(at + 8, &mut rest) {
                return Some(Err(unreadable(e)));
            }
            let header = Header {
                pos: self.pos,
                at,
                type_id,
                bytes,
                serial: u64_at(&rest, 0),
                ticks: u64_at(&rest, 8),
            };
            self.pos += bytes64;
            return Some(Ok(header));
        }
        None
    }
}

impl<M: Memory + ?Sized> Iterator for Walk<'_, M> {
    type Item = Result<Header, Damage>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.step();
        self.done = !matches!(step, Some(Ok(_)));
        step
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests;
