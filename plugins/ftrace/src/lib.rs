//! kcrash's decoder of Linux's ftrace ring buffers: every trace array (the top one and each
//! named instance), each CPU's ring buffer walked page by page as the kernel's reader walks it,
//! each event decoded by the kernel's own description of it (fields and print format, read from
//! memory), `trace_printk`'s records by their format strings in memory, and the whole written
//! as trace-cmd's trace.dat (`dat`). Layout and checks: README.md.

pub mod bprint;
pub mod dat;
pub mod formats;
pub mod latency;
pub mod layout;
pub mod print_fmt;
pub mod rings;

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kcrash_plugin::{
    Clock, Context, Damage, Decoder, Event, Field, Found, Log, Memory, Missing, Order, RingInfo,
    Unreadable, Value,
};
use symbols::{Image, ImageSet, Search};

use formats::{FieldDesc, Format, Formats};
use layout::Layout;
use print_fmt::{PrintFmt, Record, Resolve};
use rings::{CpuBuffer, Instance, Page};

/// The decoder of ftrace's ring buffers.
pub struct Ftrace;

/// The decoder kcrash registers.
pub static DECODER: Ftrace = Ftrace;

/// The list of trace arrays, and the list of every event description.
const ARRAYS: &str = "ftrace_trace_arrays";
const EVENTS: &str = "ftrace_events";
/// The name of the mark an unreadable page leaves among the events.
pub const UNREADABLE_PAGE: &str = "<unreadable page>";
/// Most `printk_formats` strings read from one section.
const MAX_PRINTK_STRINGS: u64 = 1 << 16;
/// Most saved command names read (the kernel keeps 128 by default).
const MAX_CMDLINES: u64 = 1 << 16;

impl Decoder for Ftrace {
    fn kind(&self) -> &'static str {
        "ftrace"
    }

    fn command(&self) -> &'static str {
        "trace"
    }

    fn summary(&self) -> &'static str {
        "Linux's ftrace ring buffers, per CPU and instance, decoded by the kernel's event formats"
    }

    fn find<'d>(&self, cx: &dyn Context<'d>) -> Result<Found<'d>, Missing> {
        let arrays = cx.symbol(ARRAYS).ok_or_else(|| {
            Missing::Absent(format!(
                "no symbol {ARRAYS}: not a Linux kernel with ftrace, or no vmlinux"
            ))
        })?;
        let images = cx.images();
        let kernel = images
            .first()
            .ok_or_else(|| Missing::Absent("no kernel image".into()))?;
        let log = Trace::read(cx, kernel, &images, arrays.address)?;
        Ok(Found {
            log: Box::new(log),
            translations: None,
        })
    }
}

/// The trace found in a dump.
pub struct Trace {
    pub instances: Vec<Instance>,
    pub formats: Formats,
    parsed: HashMap<u16, Result<PrintFmt, print_fmt::ParseError>>,
    /// Command names by PID, from the kernel's saved cmdlines: the bytes as the kernel holds
    /// them, escaped where they are printed.
    pub comms: HashMap<i32, Vec<u8>>,
    /// The trace clock's name and whether it counts nanoseconds, by `trace_clocks` index.
    pub clocks: Vec<(String, bool)>,
    pub layout: Layout,
    rings: Vec<RingInfo>,
    /// For each ring of [`Log::rings`]: (instance, index in its `cpus`).
    ring_of: Vec<(usize, usize)>,
    clock: Clock,
    /// Added to every event's time on the common timeline: `__sched_clock_offset` when the
    /// trace clock is `local`, so that its times are `local_clock`'s, as printk's are.
    pub to_local_clock: u64,
    notes: Vec<String>,
    symbols: ImageSet,
    /// The print formats' kernel names and struct sizes, once looked up.
    names: Mutex<HashMap<String, Option<i128>>>,
    sizes: Mutex<HashMap<String, Option<u64>>>,
}

impl Trace {
    fn read(
        cx: &dyn Context<'_>,
        kernel: &Arc<Image>,
        images: &[Arc<Image>],
        arrays: u64,
    ) -> Result<Trace, Missing> {
        let mem = cx.memory();
        let refused =
            |what: &str, e: &dyn std::fmt::Display| Missing::Refused(format!("{what}: {e}"));
        let layout = Layout::read(kernel).map_err(|e| refused("ftrace's layout", &e))?;
        let cpus = cx
            .symbol("nr_cpu_ids")
            .map(|s| mem.read_uint(s.address, 4))
            .transpose()
            .map_err(|e| refused("nr_cpu_ids", &e))?
            .unwrap_or(1);
        let mut notes = Vec::new();
        let top = cx.symbol("global_trace").map(|s| s.address);
        let instances = rings::instances(mem, &layout, arrays, top, cpus, &mut notes)
            .map_err(|e| refused(ARRAYS, &e))?;
        let events = cx
            .symbol(EVENTS)
            .ok_or_else(|| Missing::Refused(format!("no symbol {EVENTS}")))?;
        let formats =
            Formats::read(mem, &layout, events.address).map_err(|e| refused(EVENTS, &e))?;
        notes.extend(formats.problems.iter().cloned());
        let parsed = formats
            .by_id
            .iter()
            .map(|(&id, f)| (id, PrintFmt::parse(&f.print_fmt).map(|p| p.bind(f))))
            .collect();
        let comms = saved_cmdlines(cx, kernel).unwrap_or_else(|e| {
            notes.push(format!("the saved command names cannot be read: {e}"));
            HashMap::new()
        });
        let clocks = trace_clocks(cx, kernel).unwrap_or_default();
        let mut rings = Vec::new();
        let mut ring_of = Vec::new();
        for (i, inst) in instances.iter().enumerate() {
            for (k, cpu) in inst.cpus.iter().enumerate() {
                let info = ring_info(inst, cpu);
                // A ring read in part: what broke, beside the marks its events carry.
                if info.refused.is_none() {
                    for problem in &cpu.problems {
                        notes.push(format!("ring {}: {problem}", info.name));
                    }
                }
                rings.push(info);
                ring_of.push((i, k));
            }
        }
        let top_clock = instances
            .iter()
            .find(|i| i.name.is_empty())
            .and_then(|i| i.clock_id)
            .and_then(|id| clocks.get(id as usize));
        let clock = match top_clock {
            Some((_, true)) | None => Clock::Hz(1_000_000_000),
            Some((name, false)) => {
                Clock::Unknown(format!("the trace clock {name} does not count nanoseconds"))
            }
        };
        let to_local_clock = match top_clock {
            Some((name, _)) if name == "local" => {
                let offset = cx
                    .symbol("__sched_clock_offset")
                    .and_then(|s| mem.read_u64(s.address).ok());
                match offset {
                    // A u64 in the kernel, added with wrapping: negative when sched_clock ran
                    // ahead of local_clock.
                    Some(offset) => notes.push(format!(
                        "trace clock local (sched_clock): on the timeline its times are moved by __sched_clock_offset, {} ns, onto local_clock, printk's clock",
                        offset as i64
                    )),
                    None => notes.push(
                        "trace clock local (sched_clock): __sched_clock_offset cannot be read, so on the timeline its events are placed by sched_clock's own times, which may differ from printk's local_clock".into(),
                    ),
                }
                offset.unwrap_or(0)
            }
            Some((name, true)) if name == "global" || name == "perf" => {
                notes.push(format!(
                    "trace clock {name}: local_clock's time, printk's clock, taken as it is"
                ));
                0
            }
            Some((name, true)) => {
                notes.push(format!(
                    "trace clock {name}: not local_clock (printk's clock): on the timeline its events are placed by their own times"
                ));
                0
            }
            _ => 0,
        };
        let mut symbols = ImageSet::new();
        for image in images {
            symbols.push(Arc::clone(image));
        }
        Ok(Trace {
            instances,
            formats,
            parsed,
            comms,
            clocks,
            layout,
            rings,
            ring_of,
            clock,
            to_local_clock,
            notes,
            symbols,
            names: Mutex::default(),
            sizes: Mutex::default(),
        })
    }

    /// The instance and CPU buffer of ring `ring`.
    pub fn ring(&self, ring: usize) -> Option<(&Instance, &CpuBuffer)> {
        let &(i, k) = self.ring_of.get(ring)?;
        let inst = self.instances.get(i)?;
        Some((inst, inst.cpus.get(k)?))
    }

    /// The addresses of the strings the kernel's `printk_formats` lists: its `trace_printk`
    /// formats and its tracepoint strings (`__trace_bprintk_fmt`, `__tracepoint_str`: arrays
    /// of pointers between their linker symbols), which trace readers print a `%s` pointer by.
    pub fn printk_strings(&self, mem: &dyn Memory) -> Vec<u64> {
        let mut out = Vec::new();
        for section in ["__trace_bprintk_fmt", "__tracepoint_str"] {
            let bound = |end: &str| {
                self.symbols
                    .symbol(&format!("__{end}_{section}"))
                    .map(|(_, s)| s.address)
            };
            let (Some(start), Some(stop)) = (bound("start"), bound("stop")) else {
                continue;
            };
            let count = (stop.saturating_sub(start) / 8).min(MAX_PRINTK_STRINGS);
            out.extend((0..count).filter_map(|i| mem.read_u64(start + i * 8).ok()));
        }
        out
    }

    /// The ring indices of instance `name` (empty: the top one).
    pub fn rings_of(&self, name: &str) -> Vec<usize> {
        (0..self.ring_of.len())
            .filter(|&r| self.ring(r).is_some_and(|(i, _)| i.name == name))
            .collect()
    }

    /// The command name of `pid`, as trace-cmd shows it: `<idle>` for 0, `<...>` when unknown.
    pub fn comm(&self, pid: i32) -> &[u8] {
        match pid {
            0 => b"<idle>",
            _ => self.comms.get(&pid).map_or(b"<...>", Vec::as_slice),
        }
    }

    /// How many pages ring `ring` has to read.
    pub fn pages(&self, ring: usize) -> usize {
        self.ring(ring).map_or(0, |(_, c)| c.pages.len())
    }

    /// Ring `ring`'s events and unreadable pages in `order`.
    pub fn items<'a>(
        &'a self,
        mem: &'a (dyn Memory + Sync),
        ring: usize,
        order: Order,
    ) -> RingItems<'a> {
        let mut pages: Vec<usize> = (0..self.pages(ring)).collect();
        if order == Order::NewestFirst {
            pages.reverse();
        }
        RingItems {
            trace: self,
            mem,
            ring,
            order,
            pages: pages.into_iter(),
            ready: Vec::new().into_iter(),
            last: 0,
        }
    }

    /// The events of page `n` of ring `ring`, oldest first, each numbered by its place in the
    /// ring's stream; or, for a page that cannot be read, where and why (its events are lost
    /// to the dump, never guessed).
    pub fn page(&self, mem: &dyn Memory, ring: usize, n: usize) -> Result<Vec<Traced>, Unreadable> {
        let Some((inst, c)) = self.ring(ring) else {
            return Ok(Vec::new());
        };
        let Some(page) = c.pages.get(n) else {
            return Ok(Vec::new());
        };
        let mut traced = read_page(mem, &self.layout, page, inst.data_size)?;
        for (k, t) in traced.iter_mut().enumerate() {
            t.seq = page_seq(n) | k as u64;
        }
        Ok(traced)
    }

    /// The record's message, as the kernel's trace file renders it, or why it cannot be.
    pub fn message(&self, t: &Traced, mem: &dyn Memory) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        self.message_into(t, mem, &mut out)?;
        Ok(out)
    }

    /// [`Trace::message`], appended to `out` (which may hold part of it on an error).
    pub fn message_into(
        &self,
        t: &Traced,
        mem: &dyn Memory,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let format = self
            .formats
            .by_id
            .get(&t.id())
            .ok_or_else(|| format!("no event has id {}", t.id()))?;
        let syms = Kernel { trace: self, mem };
        match (format.system.as_str(), format.name.as_str()) {
            ("ftrace", "bprint") => {
                let (ip, fmt) = (t.word(format, "ip")?, t.word(format, "fmt")?);
                let buf_at = field(format, "buf")?.offset as usize;
                let mut text = Vec::new();
                mem.read_cstring(fmt, 4096, &mut text)
                    .map_err(|e| format!("its format at {fmt:#x} is unreadable: {e}"))?;
                symbol_prefix(&syms, ip, out);
                out.extend(
                    bprint::render(&text, t.data.get(buf_at..).unwrap_or_default(), &syms)
                        .map_err(|e| e.0)?,
                );
                Ok(())
            }
            ("ftrace", "bputs") => {
                let (ip, s) = (t.word(format, "ip")?, t.word(format, "str")?);
                let mut text = Vec::new();
                mem.read_cstring(s, 4096, &mut text)
                    .map_err(|e| format!("its string at {s:#x} is unreadable: {e}"))?;
                symbol_prefix(&syms, ip, out);
                out.extend(text.strip_suffix(b"\n").unwrap_or(&text));
                Ok(())
            }
            _ => {
                let parsed = self
                    .parsed
                    .get(&t.id())
                    .ok_or_else(|| format!("no event has id {}", t.id()))?
                    .as_ref()
                    .map_err(|e| e.to_string())?;
                let record = Record {
                    data: &t.data,
                    format,
                };
                parsed.render_into(&record, &syms, out).map_err(|e| e.0)
            }
        }
    }

    /// `t` as an event of the common model: its time, processor, name, fields and message.
    fn event<'a>(&'a self, t: Traced, ring: usize, cpu: u32, mem: &dyn Memory) -> Event<'a> {
        let format = self.formats.by_id.get(&t.id());
        let name: std::borrow::Cow<'a, str> = match format {
            Some(f) => f.name.as_str().into(),
            None => format!("<event {}>", t.id()).into(),
        };
        let mut e = Event::new(t.ts.wrapping_add(self.to_local_clock), t.seq, ring, name);
        e.processor = Some(cpu);
        e.field("common_pid", Value::Signed(i64::from(t.pid())));
        e.field("comm", Value::Text(self.comm(t.pid()).to_vec()));
        match format {
            Some(f) => {
                for fd in &f.fields {
                    if let Some(v) = field_value(&t.data, fd) {
                        e.fields.push(Field {
                            name: fd.name.as_str().into(),
                            value: v,
                        });
                    }
                }
                match self.message(&t, mem) {
                    Ok(m) => e.message = Some(m),
                    Err(why) => e
                        .damage
                        .push(Damage::Incomplete(format!("its message: {why}"))),
                }
            }
            None => e.damage.push(Damage::Inconsistent(format!(
                "no event description has id {}",
                t.id()
            ))),
        }
        if let Some(why) = &t.broken {
            e.damage.push(Damage::Inconsistent(why.clone()));
        }
        e
    }
}

/// The sequence number of page `n`'s first event: a page holds fewer than 2^16.
pub fn page_seq(n: usize) -> u64 {
    (n as u64) << 16
}

/// `func: ` for a bprint or bputs record's caller, as the kernel prints it (`%ps: `).
fn symbol_prefix(syms: &Kernel<'_>, ip: u64, out: &mut Vec<u8>) {
    match syms.symbol(ip) {
        Some((name, _, _)) => out.extend_from_slice(name.as_bytes()),
        None => out.extend_from_slice(format!("0x{ip:x}").as_bytes()),
    }
    out.extend_from_slice(b": ");
}

fn field<'f>(format: &'f Format, name: &str) -> Result<&'f FieldDesc, String> {
    format
        .fields
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| format!("{} has no field {name}", format.name))
}

/// A field's value in the common model: integers by their signedness, char arrays and dynamic
/// strings as text, other arrays as bytes.
fn field_value(data: &[u8], f: &FieldDesc) -> Option<Value<'static>> {
    let at = f.offset as usize;
    if f.is_dynamic() {
        return Some(text_or_bytes(&f.ty, f.dynamic_bytes(data)?));
    }
    if f.size == 0 {
        return Some(text_or_bytes(&f.ty, data.get(at..)?));
    }
    let bytes = data.get(at..at.checked_add(f.size as usize)?)?;
    if f.ty.contains('[') || f.size > 8 {
        return Some(text_or_bytes(&f.ty, bytes));
    }
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    let raw = u64::from_le_bytes(word);
    let bits = f.size * 8;
    Some(if f.signed {
        let shift = 64 - bits;
        Value::Signed(((raw << shift) as i64) >> shift)
    } else if f.ty.contains('*') || f.ty.contains("long") && f.name.contains("ip") {
        Value::Hex(raw)
    } else {
        Value::Unsigned(raw)
    })
}

fn text_or_bytes(ty: &str, bytes: &[u8]) -> Value<'static> {
    if ty.contains("char") {
        Value::Text(bytes.iter().take_while(|&&b| b != 0).copied().collect())
    } else {
        Value::Bytes(bytes.to_vec())
    }
}

/// What a ring gives: an event as read, or the mark of a page that cannot be read, placed at
/// the time of the ring's event before it.
pub enum Item {
    Event(Traced),
    Unreadable { ts: u64, seq: u64, lost: Unreadable },
}

/// One ring's [`Item`]s in `order`, a page at a time, so that memory stays one page's worth
/// whichever way the ring is read.
pub struct RingItems<'a> {
    trace: &'a Trace,
    mem: &'a (dyn Memory + Sync),
    ring: usize,
    order: Order,
    /// Pages still to read, in reading order.
    pages: std::vec::IntoIter<usize>,
    ready: std::vec::IntoIter<Traced>,
    /// The time of the last event given: where an unreadable page's mark is placed.
    last: u64,
}

impl Iterator for RingItems<'_> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(t) = self.ready.next() {
                self.last = t.ts;
                return Some(Item::Event(t));
            }
            let n = self.pages.next()?;
            match self.trace.page(self.mem, self.ring, n) {
                Ok(mut page) => {
                    if self.order == Order::NewestFirst {
                        page.reverse();
                    }
                    self.ready = page.into_iter();
                }
                Err(lost) => {
                    return Some(Item::Unreadable {
                        ts: self.last,
                        seq: page_seq(n),
                        lost,
                    });
                }
            }
        }
    }
}

/// One event as read from a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Traced {
    pub ts: u64,
    /// Its place in its ring's stream, increasing from the oldest.
    pub seq: u64,
    /// The record: `struct trace_entry` then the event's fields.
    pub data: Vec<u8>,
    /// Why the page's records stopped making sense after this one, when they did.
    pub broken: Option<String>,
}

impl Traced {
    pub fn id(&self) -> u16 {
        u16::from_le_bytes([self.byte(0), self.byte(1)])
    }

    pub fn flags(&self) -> u8 {
        self.byte(2)
    }

    pub fn preempt_count(&self) -> u8 {
        self.byte(3)
    }

    pub fn pid(&self) -> i32 {
        i32::from_le_bytes([self.byte(4), self.byte(5), self.byte(6), self.byte(7)])
    }

    fn byte(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    /// A word-sized field of the record.
    fn word(&self, format: &Format, name: &str) -> Result<u64, String> {
        let f = field(format, name)?;
        let at = f.offset as usize;
        let bytes = self
            .data
            .get(at..at + 8)
            .ok_or_else(|| format!("{name} is past the record's end"))?;
        Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| "short")?))
    }
}

/// The events of one data page, oldest first.
fn read_page(
    mem: &dyn Memory,
    layout: &Layout,
    page: &Page,
    data_size: u64,
) -> Result<Vec<Traced>, Unreadable> {
    let mut bytes = Vec::new();
    let mut out = Vec::new();
    let end = decode_page(mem, layout, page, data_size, &mut bytes, |raw| {
        out.push(Traced {
            ts: raw.ts,
            seq: 0,
            data: raw.data.to_vec(),
            broken: None,
        })
    })?;
    if let (Some((at, why)), Some(last)) = (end.broken, out.last_mut()) {
        last.broken = Some(format!("the page's records stop at byte {at}: {why}"));
    }
    Ok(out)
}

/// Reads data page `page` (its header and `data_size` bytes of records) into `bytes` and calls
/// `each` with every record of its committed part, oldest first.
pub fn decode_page<'b>(
    mem: &dyn Memory,
    layout: &Layout,
    page: &Page,
    data_size: u64,
    bytes: &'b mut Vec<u8>,
    each: impl FnMut(rings::Raw<'b>),
) -> Result<rings::PageEnd, Unreadable> {
    let data_at = layout.data_offset as usize;
    bytes.clear();
    bytes.resize(data_at.saturating_add(data_size as usize), 0);
    mem.read(page.data.clone()?, bytes)?;
    let word = |at: usize, size: u64| -> u64 {
        let mut w = [0u8; 8];
        let n = (size as usize).min(8);
        if let Some(b) = bytes.get(at..at + n) {
            w[..n].copy_from_slice(b);
        }
        u64::from_le_bytes(w)
    };
    let time_stamp = word(layout.data_time_stamp as usize, 8);
    let commit = word(layout.data_commit.offset as usize, layout.data_commit.size);
    let bytes: &'b [u8] = bytes;
    Ok(rings::events(
        bytes.get(data_at..).unwrap_or_default(),
        time_stamp,
        (commit & rings::COMMIT_MASK) as usize,
        each,
    ))
}

fn ring_info(inst: &Instance, cpu: &CpuBuffer) -> RingInfo {
    let count = |r: &Result<u64, Unreadable>| r.clone().map_err(|e| e.to_string());
    let name = if inst.name.is_empty() {
        format!("cpu{}", cpu.cpu)
    } else {
        format!("{}/cpu{}", inst.name, cpu.cpu)
    };
    RingInfo {
        name,
        processor: Some(cpu.cpu),
        addr: cpu.addr,
        capacity: Ok(cpu.nr_pages.saturating_mul(inst.data_size)),
        unit: "bytes",
        written: count(&cpu.entries),
        overwritten: count(&cpu.overrun),
        lost: match &cpu.lost {
            Some(n) => count(n),
            None => Err("this kernel counts no dropped events".into()),
        },
        refused: (cpu.pages.is_empty() && !cpu.problems.is_empty())
            .then(|| cpu.problems.join("; ")),
    }
}

/// The kernel as print formats see it: the session's images and the dump's memory.
struct Kernel<'a> {
    trace: &'a Trace,
    mem: &'a dyn Memory,
}

/// The longest string a `%s` of a pointer reads.
const STRING_MAX: usize = 1024;

impl Resolve for Kernel<'_> {
    fn symbol(&self, addr: u64) -> Option<(String, u64, u64)> {
        let (_, sym, off) = self.trace.symbols.symbolize(addr)?;
        Some((sym.demangled(), off, sym.size))
    }

    fn string(&self, addr: u64) -> Option<Vec<u8>> {
        let mut bytes = Vec::new();
        self.mem.read_cstring(addr, STRING_MAX, &mut bytes).ok()?;
        Some(bytes)
    }

    /// By its ELF symbol: the value of its size (1 to 8 bytes), unsigned.
    fn variable(&self, name: &str) -> Option<i128> {
        let mut names = self.trace.names.lock().ok()?;
        *names.entry(name.to_owned()).or_insert_with(|| {
            let (_, sym) = self.trace.symbols.symbol(name)?;
            let size = sym.size.clamp(1, 8) as usize;
            self.mem
                .read_uint(sym.address, size as u64)
                .ok()
                .map(i128::from)
        })
    }

    /// From the units read so far, else the image's full type index.
    fn size_of(&self, ty: &str) -> Option<u64> {
        let mut sizes = self.trace.sizes.lock().ok()?;
        *sizes.entry(ty.to_owned()).or_insert_with(|| {
            self.trace.symbols.images().iter().find_map(|image| {
                let id = image
                    .find_type(ty, Search::Quick)
                    .ok()
                    .flatten()
                    .or_else(|| image.find_type(ty, Search::Full).ok().flatten())?;
                image.size_of(id).ok().flatten()
            })
        })
    }
}

/// The kernel's saved command names by PID (`savedcmd`), as the trace file names tasks.
fn saved_cmdlines(cx: &dyn Context<'_>, kernel: &Image) -> Result<HashMap<i32, Vec<u8>>, String> {
    let mem = cx.memory();
    let at = cx.symbol("savedcmd").ok_or("no symbol savedcmd")?.address;
    kernel.consult("trace_find_cmdline");
    let ty = kernel
        .type_by_name("struct saved_cmdlines_buffer")
        .map_err(|e| e.to_string())?
        .ok_or("no struct saved_cmdlines_buffer")?;
    let t = kernel.type_(ty).map_err(|e| e.to_string())?;
    let off = |name: &str| {
        t.member(name)
            .map(|m| m.offset)
            .ok_or(format!("no member {name}"))
    };
    let base = mem.read_u64(at).map_err(|e| e.to_string())?;
    let num = mem
        .read_uint(base + off("cmdline_num")?, 4)
        .map_err(|e| e.to_string())?
        .min(MAX_CMDLINES);
    let pids = mem
        .read_u64(base + off("map_cmdline_to_pid")?)
        .map_err(|e| e.to_string())?;
    // A pointer before the 6.8 rework (backported to some 6.1), an array at the struct's end after.
    let names_member = t
        .member("saved_cmdlines")
        .ok_or("no member saved_cmdlines")?;
    let is_pointer = names_member
        .ty
        .and_then(|id| kernel.value_type(id).ok())
        .and_then(|id| kernel.type_(id).ok())
        .is_some_and(|ty| matches!(ty.kind, symbols::TypeKind::Pointer(_)));
    let names = if is_pointer {
        mem.read_u64(base + names_member.offset)
            .map_err(|e| e.to_string())?
    } else {
        base + names_member.offset
    };
    let mut comms = HashMap::new();
    let mut name = Vec::new();
    for i in 0..num {
        let Ok(pid) = mem.read_uint(pids + i * 4, 4) else {
            continue;
        };
        if pid == u64::from(u32::MAX) || pid == 0 {
            continue;
        }
        if mem.read_cstring(names + i * 16, 16, &mut name).is_ok() {
            comms.insert(pid as i32, name.clone());
        }
    }
    Ok(comms)
}

/// The trace clocks' names and whether each counts nanoseconds (`trace_clocks[]`).
fn trace_clocks(cx: &dyn Context<'_>, kernel: &Image) -> Result<Vec<(String, bool)>, String> {
    let mem = cx.memory();
    let v = kernel
        .variable("trace_clocks")
        .map_err(|e| e.to_string())?
        .ok_or("no trace_clocks")?;
    let (addr, ty) = (v.address.ok_or("no address")?, v.ty.ok_or("no type")?);
    let arr = kernel
        .type_(kernel.value_type(ty).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let symbols::TypeKind::Array(a) = &arr.kind else {
        return Err("trace_clocks is not an array".into());
    };
    let (Some(el), Some(Some(n))) = (a.element, a.dims.first()) else {
        return Err("trace_clocks has no length".into());
    };
    let el = kernel.value_type(el).map_err(|e| e.to_string())?;
    let size = kernel
        .size_of(el)
        .map_err(|e| e.to_string())?
        .ok_or("no size")?;
    let et = kernel.type_(el).map_err(|e| e.to_string())?;
    let name_off = et.member("name").ok_or("no name")?.offset;
    let ns_off = et.member("in_ns").ok_or("no in_ns")?.offset;
    let mut out = Vec::new();
    let mut text = Vec::new();
    for i in 0..(*n).min(64) {
        let e = addr + i * size;
        let name = mem.read_u64(e + name_off).map_err(|e| e.to_string())?;
        mem.read_cstring(name, 64, &mut text)
            .map_err(|e| e.to_string())?;
        let ns = mem.read_uint(e + ns_off, 4).map_err(|e| e.to_string())? != 0;
        out.push((kcrash_plugin::escape::escaped(&text), ns));
    }
    Ok(out)
}

impl Log for Trace {
    fn kind(&self) -> &'static str {
        "ftrace"
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
        let Some((_, cpu)) = self.ring(ring) else {
            return Box::new(std::iter::empty());
        };
        let cpu = cpu.cpu;
        Box::new(self.items(mem, ring, order).map(move |item| match item {
            Item::Event(t) => self.event(t, ring, cpu, mem),
            Item::Unreadable { ts, seq, lost } => {
                let ticks = ts.wrapping_add(self.to_local_clock);
                let mut e = Event::new(ticks, seq, ring, UNREADABLE_PAGE);
                e.own_time = false;
                e.processor = Some(cpu);
                e.damage.push(Damage::Unreadable {
                    addr: lost.addr,
                    reason: format!("a page of the ring, its events lost: {}", lost.reason),
                });
                e
            }
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
