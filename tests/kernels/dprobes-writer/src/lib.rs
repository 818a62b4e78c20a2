//! The DProbes trace facility of kcrash's test kernels, as "A Universal Dynamic Trace for Linux"
//! (Moore, 2001) lays it out: a probe handler builds a record in its processor's log buffer —
//! a flag word, the header items the flags select, then the logged data (`log b/w/d` values and
//! `log mrf/mrs/arf/ars` items behind a 3-byte prefix, with a fault token instead of data when
//! the read faults) — and on `exit` the record goes to the trace daemon, which keeps it in its
//! per-processor trace buffer. The paper leaves that buffer's layout to the daemon (LTT); ours
//! is in README.md, byte by byte.
//!
//! Every committed record prints one oracle line, from what the writer itself put in it, through
//! a `core::fmt::Write` the kernel gives.
#![no_std]

pub mod probes;

use core::cell::UnsafeCell;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// `dprobes_trace.magic`: "DPTRACE1".
pub const MAGIC: u64 = u64::from_le_bytes(*b"DPTRACE1");
/// Processors the trace has a buffer for.
pub const MAX_CPUS: usize = 4;
/// Bytes of each processor's trace buffer.
pub const BUFFER_BYTES: usize = 8192;
/// Bytes of each processor's log buffer, where a probe handler builds its record.
pub const LOG_BUFFER_BYTES: usize = 512;
/// The LTT event id `trace_create_event` gave the probes' module: every record carries it.
pub const EVENT_ID: u32 = 0x4450;
/// A record's frame before its data: event id, data size, daemon time.
pub const FRAME_BYTES: u64 = 16;
/// The length word ending every record.
pub const TRAILER_BYTES: u64 = 8;

// The header items' flag bits, in the order the items follow the flag word (the paper's table
// in section 5, "Logging to a Trace Daemon").
pub const F_MAJOR: u32 = 0x0001;
pub const F_MINOR: u32 = 0x0002;
pub const F_CPU: u32 = 0x0004;
pub const F_PID: u32 = 0x0008;
pub const F_UID: u32 = 0x0010;
pub const F_CS: u32 = 0x0020;
pub const F_EIP: u32 = 0x0040;
pub const F_SS: u32 = 0x0080;
pub const F_ESP: u32 = 0x0100;
pub const F_TSC: u32 = 0x0200;
pub const F_NAME: u32 = 0x0400;
/// Bytes of the process name item, its NUL included (Linux's TASK_COMM_LEN).
pub const NAME_BYTES: usize = 16;

// The 3-byte prefix's token byte (section 2).
pub const TOKEN_BINARY: u8 = 0;
pub const TOKEN_STRING: u8 = 1;
/// -1: the read faulted at a flat address; the data is that address.
pub const TOKEN_FAULT_FLAT: u8 = 0xff;
/// -2: the selector was bad; the data is the selector.
pub const TOKEN_FAULT_SELECTOR: u8 = 0xfe;

/// One processor's trace buffer: a byte ring of records. `head` and `tail` count bytes since
/// the buffer started (stream positions); a position's byte is at `data[pos % size]`.
#[repr(C)]
pub struct Buffer {
    pub cpu: u32,
    pub event_id: u32,
    pub data: *mut u8,
    pub size: u64,
    /// Where the next record goes.
    pub head: AtomicU64,
    /// Where the oldest record still in the buffer starts.
    pub tail: AtomicU64,
    /// Records ever committed.
    pub written: AtomicU64,
    /// Records dropped to make room for newer ones.
    pub overwritten: AtomicU64,
    /// Records refused because they are bigger than the whole buffer.
    pub lost: AtomicU64,
}

/// The trace daemon's state, found by kcrash at the symbol `dprobes_trace`.
#[repr(C)]
pub struct Trace {
    pub magic: u64,
    pub max_cpus: u32,
    /// Buffers in use: processors `0..cpus`.
    pub cpus: AtomicU32,
    /// Ticks per second of the records' time, 0 while unknown.
    pub tsc_hz: AtomicU64,
    /// The template directory (`dprobes_templates`) and its length.
    pub templates: *const u8,
    pub templates_len: u64,
    pub buffers: [Buffer; MAX_CPUS],
}

// SAFETY: each buffer has one writer, its processor (`Probe` takes the processor's log buffer
// by `&mut` through `LogBuffers::take`); the pointers are to statics.
unsafe impl Sync for Trace {}

#[repr(C, align(8))]
pub struct Bytes<const N: usize>(UnsafeCell<[u8; N]>);

// SAFETY: one writer per processor's bytes, as for `Trace`.
unsafe impl<const N: usize> Sync for Bytes<N> {}

impl<const N: usize> Bytes<N> {
    const fn new() -> Self {
        Bytes(UnsafeCell::new([0; N]))
    }
}

/// The trace buffers' bytes.
static DATA: [Bytes<BUFFER_BYTES>; MAX_CPUS] =
    [Bytes::new(), Bytes::new(), Bytes::new(), Bytes::new()];

/// The probes' formatting templates, in the image beside the trace.
#[no_mangle]
pub static dprobes_templates: [u8; TEMPLATES.len()] = *TEMPLATES;
const TEMPLATES: &[u8; include_bytes!("../templates.dpt").len()] =
    include_bytes!("../templates.dpt");

const fn buffer(cpu: usize) -> Buffer {
    Buffer {
        cpu: cpu as u32,
        event_id: EVENT_ID,
        data: DATA[cpu].0.get() as *mut u8,
        size: BUFFER_BYTES as u64,
        head: AtomicU64::new(0),
        tail: AtomicU64::new(0),
        written: AtomicU64::new(0),
        overwritten: AtomicU64::new(0),
        lost: AtomicU64::new(0),
    }
}

#[no_mangle]
pub static dprobes_trace: Trace = Trace {
    magic: MAGIC,
    max_cpus: MAX_CPUS as u32,
    cpus: AtomicU32::new(0),
    tsc_hz: AtomicU64::new(0),
    templates: dprobes_templates.as_ptr(),
    templates_len: TEMPLATES.len() as u64,
    buffers: [buffer(0), buffer(1), buffer(2), buffer(3)],
};

/// The per-processor log buffers (section 2: "one log buffer is permanently allocated per
/// processor").
static LOG_BUFFERS: [Bytes<LOG_BUFFER_BYTES>; MAX_CPUS] =
    [Bytes::new(), Bytes::new(), Bytes::new(), Bytes::new()];

/// Starts the trace with `cpus` buffers and the clock's rate, and prints the oracle's
/// configuration lines.
pub fn init(cpus: u32, tsc_hz: u64, out: &mut impl Write) {
    let trace = &dprobes_trace;
    trace
        .cpus
        .store(cpus.min(MAX_CPUS as u32), Ordering::Relaxed);
    trace.tsc_hz.store(tsc_hz, Ordering::Relaxed);
    let _ = writeln!(out, "DPROBES-CONFIG cpus={cpus} tsc_hz={tsc_hz}");
    for b in &trace.buffers[..cpus as usize] {
        let _ = writeln!(
            out,
            "DPROBES-BUFFER cpu={} addr={:#x} data={:#x} size={}",
            b.cpu, b as *const Buffer as u64, b.data as u64, b.size
        );
    }
}

/// Why a probe's read of memory failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A page fault at this flat address.
    Flat(u64),
    /// The selector could not be loaded.
    Selector(u16),
}

/// How the kernel reads memory for a probe without dying of a fault: the DProbes event handler
/// intercepts the fault and the read fails instead (section 8, "Fault handling").
pub trait Reader {
    /// Fills `buf` from the flat address `addr`.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault>;
    /// Fills `buf` from `offset` in the segment `selector` names.
    fn read_segmented(&self, selector: u16, offset: u64, buf: &mut [u8]) -> Result<(), Fault>;
}

/// The header items a probe fills; `flags` selects which the record carries.
#[derive(Clone, Copy, Debug, Default)]
pub struct Header<'a> {
    pub flags: u32,
    pub major: u32,
    pub minor: u32,
    pub cpu: u32,
    pub pid: u32,
    pub uid: u32,
    pub cs: u32,
    pub eip: u64,
    pub ss: u32,
    pub esp: u64,
    pub tsc: u64,
    pub name: &'a [u8],
}

/// What the oracle line says of one data item.
#[derive(Clone, Copy, Debug)]
enum Item {
    Unsigned(u64),
    Signed(i64),
    Hex(u64),
    /// Bytes of the record's data (offset, length) shown as text.
    Text(usize, usize),
    /// Bytes of the record's data shown as bytes.
    Bytes(usize, usize),
    /// Bytes of the record's data shown as double-words in hex, `name[i]` each.
    Words(usize, usize),
    Fault(Fault),
}

/// Data items a record can carry, for its oracle line.
const MAX_ITEMS: usize = 16;

/// A probe handler's record, being built in its processor's log buffer.
pub struct Probe<'a> {
    cpu: usize,
    log: &'a mut [u8; LOG_BUFFER_BYTES],
    /// The interpreter's next available location in the log buffer.
    next: usize,
    header: Header<'a>,
    items: [(&'static str, Item); MAX_ITEMS],
    item_count: usize,
}

impl<'a> Probe<'a> {
    /// Enters a probe handler on processor `cpu`: resets the log buffer and writes the flag
    /// word and the header items the flags select.
    ///
    /// # Safety
    /// Only processor `cpu` logs into buffer `cpu`, one probe at a time.
    pub unsafe fn enter(cpu: usize, header: Header<'a>) -> Probe<'a> {
        assert!(cpu < MAX_CPUS, "no trace buffer for processor {cpu}");
        // SAFETY: the caller makes this the buffer's only user.
        let log = unsafe { &mut *LOG_BUFFERS[cpu].0.get() };
        let mut p = Probe {
            cpu,
            log,
            next: 0,
            header,
            items: [("", Item::Unsigned(0)); MAX_ITEMS],
            item_count: 0,
        };
        let h = header;
        p.put(&h.flags.to_le_bytes());
        let words: [(u32, u32); 5] = [
            (F_MAJOR, h.major),
            (F_MINOR, h.minor),
            (F_CPU, h.cpu),
            (F_PID, h.pid),
            (F_UID, h.uid),
        ];
        for (flag, value) in words {
            if h.flags & flag != 0 {
                p.put(&value.to_le_bytes());
            }
        }
        if h.flags & F_CS != 0 {
            p.put(&h.cs.to_le_bytes());
        }
        if h.flags & F_EIP != 0 {
            p.put(&h.eip.to_le_bytes());
        }
        if h.flags & F_SS != 0 {
            p.put(&h.ss.to_le_bytes());
        }
        if h.flags & F_ESP != 0 {
            p.put(&h.esp.to_le_bytes());
        }
        if h.flags & F_TSC != 0 {
            p.put(&h.tsc.to_le_bytes());
        }
        if h.flags & F_NAME != 0 {
            let mut name = [0u8; NAME_BYTES];
            let n = h.name.len().min(NAME_BYTES - 1);
            name[..n].copy_from_slice(&h.name[..n]);
            p.put(&name);
        }
        p
    }

    fn put(&mut self, bytes: &[u8]) -> usize {
        let at = self.next;
        assert!(at + bytes.len() <= LOG_BUFFER_BYTES, "log buffer full");
        self.log[at..at + bytes.len()].copy_from_slice(bytes);
        self.next += bytes.len();
        at
    }

    fn note(&mut self, name: &'static str, item: Item) {
        assert!(self.item_count < MAX_ITEMS, "too many items for the oracle");
        self.items[self.item_count] = (name, item);
        self.item_count += 1;
    }

    /// `log b`, `log w`, `log d` and the 64-bit port's quad-word: the low `width` bytes of
    /// `value`, shown as unsigned.
    pub fn log(&mut self, name: &'static str, width: usize, value: u64) -> &mut Self {
        self.put(&value.to_le_bytes()[..width]);
        let mask = if width >= 8 {
            u64::MAX
        } else {
            (1 << (8 * width)) - 1
        };
        self.note(name, Item::Unsigned(value & mask));
        self
    }

    /// The same, shown as signed.
    pub fn log_signed(&mut self, name: &'static str, width: usize, value: i64) -> &mut Self {
        self.put(&value.to_le_bytes()[..width]);
        let shift = 64 - 8 * width as u32;
        self.note(name, Item::Signed((value << shift) >> shift));
        self
    }

    /// The same, shown in hex.
    pub fn log_hex(&mut self, name: &'static str, width: usize, value: u64) -> &mut Self {
        self.put(&value.to_le_bytes()[..width]);
        let mask = if width >= 8 {
            u64::MAX
        } else {
            (1 << (8 * width)) - 1
        };
        self.note(name, Item::Hex(value & mask));
        self
    }

    /// `log b` of one character, shown as text.
    pub fn log_char(&mut self, name: &'static str, c: u8) -> &mut Self {
        let at = self.put(&[c]);
        self.note(name, Item::Text(at, 1));
        self
    }

    /// Reserves the 3-byte prefix.
    fn prefix(&mut self) -> usize {
        self.put(&[0; 3])
    }

    fn set_prefix(&mut self, at: usize, token: u8, len: u16) {
        self.log[at] = token;
        self.log[at + 1..at + 3].copy_from_slice(&len.to_le_bytes());
    }

    /// Replaces what follows the prefix at `at` by the fault token and its datum.
    fn fault(&mut self, name: &'static str, at: usize, fault: Fault) {
        self.next = at + 3;
        match fault {
            Fault::Flat(addr) => {
                self.set_prefix(at, TOKEN_FAULT_FLAT, 8);
                self.put(&addr.to_le_bytes());
            }
            Fault::Selector(sel) => {
                self.set_prefix(at, TOKEN_FAULT_SELECTOR, 4);
                self.put(&u32::from(sel).to_le_bytes());
            }
        }
        self.note(name, Item::Fault(fault));
    }

    /// `log mrf`: `len` bytes from the flat address `addr`, behind the prefix.
    pub fn log_mrf(
        &mut self,
        name: &'static str,
        reader: &impl Reader,
        addr: u64,
        len: u16,
    ) -> &mut Self {
        self.range(name, len, |buf| reader.read(addr, buf))
    }

    /// `log mrs`: `len` bytes from `selector:offset`, behind the prefix.
    pub fn log_mrs(
        &mut self,
        name: &'static str,
        reader: &impl Reader,
        selector: u16,
        offset: u64,
        len: u16,
    ) -> &mut Self {
        self.range(name, len, |buf| {
            reader.read_segmented(selector, offset, buf)
        })
    }

    /// `log mrf` of `words` double-words, which the template formats as an array (`%r`).
    pub fn log_mrf_words(
        &mut self,
        name: &'static str,
        reader: &impl Reader,
        addr: u64,
        words: u16,
    ) -> &mut Self {
        self.range(name, 4 * words, |buf| reader.read(addr, buf));
        if let Some((_, Item::Bytes(at, n))) = self.items[..self.item_count].last().copied() {
            self.items[self.item_count - 1].1 = Item::Words(at, n);
        }
        self
    }

    fn range(
        &mut self,
        name: &'static str,
        len: u16,
        read: impl FnOnce(&mut [u8]) -> Result<(), Fault>,
    ) -> &mut Self {
        let at = self.prefix();
        let start = self.put_zeros(usize::from(len));
        match read(&mut self.log[start..start + usize::from(len)]) {
            Ok(()) => {
                self.set_prefix(at, TOKEN_BINARY, len);
                self.note(name, Item::Bytes(start, usize::from(len)));
            }
            Err(fault) => self.fault(name, at, fault),
        }
        self
    }

    fn put_zeros(&mut self, n: usize) -> usize {
        let at = self.next;
        assert!(at + n <= LOG_BUFFER_BYTES, "log buffer full");
        self.log[at..at + n].fill(0);
        self.next += n;
        at
    }

    /// `log arf`: the string at the flat address `addr`, at most `max` bytes, up to and
    /// including its NUL, behind a prefix whose length is `max`.
    pub fn log_arf(
        &mut self,
        name: &'static str,
        reader: &impl Reader,
        addr: u64,
        max: u16,
    ) -> &mut Self {
        self.string(name, max, |i, b| reader.read(addr.wrapping_add(i), b))
    }

    /// `log ars`: the same from `selector:offset`.
    pub fn log_ars(
        &mut self,
        name: &'static str,
        reader: &impl Reader,
        selector: u16,
        offset: u64,
        max: u16,
    ) -> &mut Self {
        self.string(name, max, |i, b| {
            reader.read_segmented(selector, offset.wrapping_add(i), b)
        })
    }

    fn string(
        &mut self,
        name: &'static str,
        max: u16,
        read: impl Fn(u64, &mut [u8]) -> Result<(), Fault>,
    ) -> &mut Self {
        let at = self.prefix();
        let start = self.next;
        let mut text = 0;
        for i in 0..u64::from(max) {
            let mut b = [0u8];
            if let Err(fault) = read(i, &mut b) {
                self.fault(name, at, fault);
                return self;
            }
            self.put(&b);
            if b[0] == 0 {
                break;
            }
            text += 1;
        }
        self.set_prefix(at, TOKEN_STRING, max);
        self.note(name, Item::Text(start, text));
        self
    }

    /// `exit`: hands the record to the trace daemon, which keeps it in this processor's trace
    /// buffer stamped with `time`, and prints its oracle line: `name` is the template's desc
    /// and `msg` the message its fmt gives, both as the kernel means them.
    pub fn exit(self, time: u64, name: &str, msg: fmt::Arguments, out: &mut impl Write) {
        let b = &dprobes_trace.buffers[self.cpu];
        let record = &self.log[..self.next];
        let data = record.len() as u64;
        let total = record_len(data);
        if total > b.size {
            b.lost.fetch_add(1, Ordering::Relaxed);
            let _ = writeln!(out, "DPROBES-LOST cpu={} bytes={total}", self.cpu);
            return;
        }
        let head = b.head.load(Ordering::Relaxed);
        let mut tail = b.tail.load(Ordering::Relaxed);
        while head + total - tail > b.size {
            let mut size = [0u8; 4];
            read_ring(b, tail + 4, &mut size);
            tail += record_len(u64::from(u32::from_le_bytes(size)));
            b.overwritten.fetch_add(1, Ordering::Relaxed);
        }
        b.tail.store(tail, Ordering::Release);
        let mut frame = [0u8; FRAME_BYTES as usize];
        frame[..4].copy_from_slice(&b.event_id.to_le_bytes());
        frame[4..8].copy_from_slice(&(data as u32).to_le_bytes());
        frame[8..].copy_from_slice(&time.to_le_bytes());
        write_ring(b, head, &frame);
        write_ring(b, head + FRAME_BYTES, record);
        let pad = total - TRAILER_BYTES - FRAME_BYTES - data;
        write_ring(b, head + FRAME_BYTES + data, &[0u8; 8][..pad as usize]);
        write_ring(b, head + total - TRAILER_BYTES, &total.to_le_bytes());
        b.head.store(head + total, Ordering::Release);
        b.written.fetch_add(1, Ordering::Relaxed);
        self.oracle(head, total, time, name, msg, out);
    }

    /// The record's oracle line: where it went (`seq`, the stream position) and how long it is.
    fn oracle(
        &self,
        seq: u64,
        len: u64,
        time: u64,
        name: &str,
        msg: fmt::Arguments,
        out: &mut impl Write,
    ) {
        let h = &self.header;
        let _ = write!(
            out,
            "DPROBES-EVENT cpu={} seq={seq:#x} len={len} ticks={time:#x} name={} field=flags:x:{:#x}",
            self.cpu,
            Escaped(name),
            h.flags
        );
        let numbers: [(u32, &str, char, u64); 10] = [
            (F_MAJOR, "major", 'u', h.major.into()),
            (F_MINOR, "minor", 'u', h.minor.into()),
            (F_CPU, "cpu", 'u', h.cpu.into()),
            (F_PID, "pid", 'u', h.pid.into()),
            (F_UID, "uid", 'u', h.uid.into()),
            (F_CS, "cs", 'x', h.cs.into()),
            (F_EIP, "eip", 'x', h.eip),
            (F_SS, "ss", 'x', h.ss.into()),
            (F_ESP, "esp", 'x', h.esp),
            (F_TSC, "tsc", 'u', h.tsc),
        ];
        for (flag, field, kind, value) in numbers {
            if h.flags & flag != 0 {
                match kind {
                    'x' => write!(out, " field={field}:x:{value:#x}"),
                    _ => write!(out, " field={field}:u:{value}"),
                }
                .ok();
            }
        }
        if h.flags & F_NAME != 0 {
            let n = h.name.len().min(NAME_BYTES - 1);
            let _ = write!(out, " field=name:t:{}", EscapedBytes(&h.name[..n]));
        }
        for &(field, item) in &self.items[..self.item_count] {
            let _ = match item {
                Item::Unsigned(v) => write!(out, " field={field}:u:{v}"),
                Item::Signed(v) => write!(out, " field={field}:s:{v}"),
                Item::Hex(v) => write!(out, " field={field}:x:{v:#x}"),
                Item::Text(at, n) => write!(
                    out,
                    " field={field}:t:{}",
                    EscapedBytes(&self.log[at..at + n])
                ),
                Item::Bytes(at, n) => {
                    let _ = write!(out, " field={field}:b:");
                    for b in &self.log[at..at + n] {
                        let _ = write!(out, "{b:02x}");
                    }
                    Ok(())
                }
                Item::Words(at, n) => {
                    for (i, w) in self.log[at..at + n].chunks(4).enumerate() {
                        let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                        let _ = write!(out, " field={field}[{i}]:x:{w:#x}");
                    }
                    Ok(())
                }
                Item::Fault(Fault::Flat(addr)) => write!(
                    out,
                    " field={field}:f:{addr:#x}:{}",
                    Escaped("faulted read (flat address)")
                ),
                Item::Fault(Fault::Selector(sel)) => {
                    write!(out, " field={field}:f:{sel:#x}:{}", Escaped("bad selector"))
                }
            };
        }
        let _ = writeln!(out, " msg={}", Escaped(&Fmt(msg)));
    }
}

/// A record's bytes in the trace buffer for `data` bytes of flags, header and log buffer:
/// frame, data padded to 8 bytes, length word.
pub const fn record_len(data: u64) -> u64 {
    FRAME_BYTES + data.div_ceil(8) * 8 + TRAILER_BYTES
}

fn write_ring(b: &Buffer, pos: u64, bytes: &[u8]) {
    for (i, &byte) in bytes.iter().enumerate() {
        let at = (pos + i as u64) % b.size;
        // SAFETY: `at < size`, the buffer's own length; its processor is the only writer.
        unsafe { b.data.add(at as usize).write_volatile(byte) };
    }
}

fn read_ring(b: &Buffer, pos: u64, bytes: &mut [u8]) {
    for (i, byte) in bytes.iter_mut().enumerate() {
        let at = (pos + i as u64) % b.size;
        // SAFETY: as in `write_ring`.
        *byte = unsafe { b.data.add(at as usize).read_volatile() };
    }
}

/// `%z`'s dump format for `bytes` (section 6): per 0x20 bytes, `+OFFSET`, each byte in hex and
/// the bytes as text between stars, a period for each byte outside 0x20-0x7e; lines joined by
/// a new-line.
pub struct Dump<'a>(pub &'a [u8]);

impl fmt::Display for Dump<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, line) in self.0.chunks(0x20).enumerate() {
            if i > 0 {
                f.write_char('\n')?;
            }
            write!(f, "+{:08x}", i * 0x20)?;
            for b in line {
                write!(f, " {b:02x}")?;
            }
            f.write_str(" *")?;
            for &b in line {
                f.write_char(if (0x20..0x7f).contains(&b) {
                    b as char
                } else {
                    '.'
                })?;
            }
            f.write_char('*')?;
        }
        Ok(())
    }
}

/// Text as the oracle writes it: `char::escape_debug`, and spaces as `\u{20}` so a value is one
/// word.
struct Escaped<'a, T: ?Sized>(&'a T);

impl<T: fmt::Display + ?Sized> fmt::Display for Escaped<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        EscapeWriter(f).write_fmt(format_args!("{}", self.0))
    }
}

struct EscapeWriter<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl Write for EscapeWriter<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            if c == ' ' {
                self.0.write_str("\\u{20}")?;
            } else {
                write!(self.0, "{}", c.escape_debug())?;
            }
        }
        Ok(())
    }
}

/// Bytes from memory as escaped text: a byte outside ASCII as `\u{XX}` of its value.
struct EscapedBytes<'a>(&'a [u8]);

impl fmt::Display for EscapedBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let mut w = EscapeWriter(f);
        for &b in self.0 {
            if b.is_ascii() {
                w.write_char(b as char)?;
            } else {
                write!(w.0, "\\u{{{b:x}}}")?;
            }
        }
        Ok(())
    }
}

struct Fmt<'a>(fmt::Arguments<'a>);

impl fmt::Display for Fmt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_fmt(self.0)
    }
}

/// A field of a buffer's control the damaged-control scenario scribbles on.
#[derive(Clone, Copy, Debug)]
pub enum Control {
    Head,
    Tail,
    Written,
}

/// Scribbles `value` on processor `cpu`'s buffer control, saying so.
pub fn scribble(cpu: usize, field: Control, value: u64, out: &mut impl Write) {
    let b = &dprobes_trace.buffers[cpu];
    let (target, name) = match field {
        Control::Head => (&b.head, "head"),
        Control::Tail => (&b.tail, "tail"),
        Control::Written => (&b.written, "written"),
    };
    target.store(value, Ordering::Relaxed);
    let _ = writeln!(
        out,
        "DPROBES-DAMAGE cpu={cpu} field={name} value={value:#x}"
    );
}
