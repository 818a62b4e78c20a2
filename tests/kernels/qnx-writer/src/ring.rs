//! The ring of trace buffers and the writer's side of the emitting protocol.

use core::fmt;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::codes::{self, Field, Part, Simple, Wide, MAX_PAYLOAD};

/// The design's `_TRACELEMENTS`: traceevents per buffer. The design gives no value; the test
/// kernels use small buffers so that a few hundred events wrap the ring.
pub const ELEMENTS: usize = 64;
/// Buffers in the ring.
pub const BUFFERS: usize = 4;
/// The "hi water mark" (about 80% of a buffer) at which a buffer is handed to the logger.
pub const HIWATER: u32 = (ELEMENTS * 4 / 5) as u32;
/// `flags`: the buffer reached [`HIWATER`] and was handed to the logger.
pub const FLAG_HIWATER: u32 = 1;
/// `flags`: every slot of the buffer is written.
pub const FLAG_FULL: u32 = 2;
/// Most parts a combine event of this writer takes.
const MAX_PARTS: usize = MAX_PAYLOAD / 8;

/// `traceevent_t`: 16 bytes.
#[repr(C)]
pub struct TraceEvent {
    /// Control, CPU, flags, class and event type (figure 4).
    pub header: AtomicU32,
    /// The clock's lower 32 bits; one combine event's parts share it.
    pub timeoff: AtomicU32,
    pub data: [AtomicU32; 2],
}

/// `struct traceheader`, laid out by `repr(C)` on a 64-bit machine: pointers at 0 and 8, the
/// five 32-bit words at 16..36, 4 bytes of padding, `begin_ptr` at 40, `tail_ptr` at 48,
/// `reserved` at 56..180, padded to 184.
#[repr(C)]
pub struct TraceHeader {
    /// The buffer's own address.
    pub baseaddr: AtomicPtr<TraceBuf>,
    /// The next buffer of the ring; the last one's is the first's.
    pub next: AtomicPtr<TraceBuf>,
    /// [`FLAG_HIWATER`], [`FLAG_FULL`].
    pub flags: AtomicU32,
    /// Events written in the buffer since it was last started.
    pub num_events: AtomicU32,
    /// The buffer's number in the sequence of buffers filled since tracing began (0, 1, ...).
    pub seq_buff_num: AtomicU32,
    /// The buffer's place in the ring, shifted left 13 bits.
    pub ls13_rb_num: AtomicU32,
    /// Non-zero while a writer is storing into the buffer.
    pub spin: AtomicU32,
    /// `&data[0]`.
    pub begin_ptr: AtomicPtr<TraceEvent>,
    /// `&data[num_events]`: where the next event goes.
    pub tail_ptr: AtomicPtr<TraceEvent>,
    pub reserved: [u32; 31],
}

/// `tracebuf_t`.
#[repr(C)]
pub struct TraceBuf {
    pub h: TraceHeader,
    pub data: [TraceEvent; ELEMENTS],
}

/// The syspage's trace entry: where the ring starts and how to read its time stamps.
#[repr(C)]
pub struct SyspageTrace {
    /// The ring's first buffer (the writer starts there and never moves it).
    pub tracebuf: AtomicPtr<TraceBuf>,
    /// The rate of the clock the time stamps count (the syspage's `cycles_per_sec`).
    pub cycles_per_sec: AtomicU64,
    /// `_TRACELEMENTS`: the design fixes it at compile time; kept here so that a reader need
    /// not be built with the kernel's value.
    pub tracelements: AtomicU32,
    pub reserved: u32,
}

/// The trace entry of the syspage, the symbol a reader starts from.
#[allow(non_upper_case_globals)]
#[no_mangle]
pub static _syspage_trace: SyspageTrace = SyspageTrace {
    tracebuf: AtomicPtr::new(core::ptr::null_mut()),
    cycles_per_sec: AtomicU64::new(0),
    tracelements: AtomicU32::new(0),
    reserved: 0,
};

/// The ring's buffers.
#[allow(non_upper_case_globals)]
#[no_mangle]
static _trace_buffers: [TraceBuf; BUFFERS] = [const { TraceBuf::new() }; BUFFERS];

impl TraceEvent {
    const fn new() -> TraceEvent {
        TraceEvent {
            header: AtomicU32::new(0),
            timeoff: AtomicU32::new(0),
            data: [AtomicU32::new(0), AtomicU32::new(0)],
        }
    }
}

impl TraceBuf {
    const fn new() -> TraceBuf {
        TraceBuf {
            h: TraceHeader {
                baseaddr: AtomicPtr::new(core::ptr::null_mut()),
                next: AtomicPtr::new(core::ptr::null_mut()),
                flags: AtomicU32::new(0),
                num_events: AtomicU32::new(0),
                seq_buff_num: AtomicU32::new(0),
                ls13_rb_num: AtomicU32::new(0),
                spin: AtomicU32::new(0),
                begin_ptr: AtomicPtr::new(core::ptr::null_mut()),
                tail_ptr: AtomicPtr::new(core::ptr::null_mut()),
                reserved: [0; 31],
            },
            data: [const { TraceEvent::new() }; ELEMENTS],
        }
    }

    fn ptr(&self) -> *mut TraceBuf {
        self as *const TraceBuf as *mut TraceBuf
    }

    fn slot(&self, n: usize) -> *mut TraceEvent {
        self.data.as_ptr().wrapping_add(n) as *mut TraceEvent
    }

    /// Empties the buffer for the `seq`-th fill.
    fn start(&self, seq: u32) {
        self.h.num_events.store(0, Ordering::Relaxed);
        self.h.flags.store(0, Ordering::Relaxed);
        self.h.tail_ptr.store(self.slot(0), Ordering::Relaxed);
        self.h.seq_buff_num.store(seq, Ordering::Release);
    }
}

/// Where the oracle lines go: the console, one whole line per call.
pub trait Sink: Sync {
    fn line(&self, line: fmt::Arguments<'_>);
}

/// The writer's own state, beside the ring.
struct Writer {
    /// The kernel's trace spin lock: one writer at a time.
    lock: AtomicU32,
    /// Index of the buffer being filled.
    current: AtomicUsize,
    /// `seq_buff_num` of the next buffer started.
    next_seq: AtomicU32,
    /// The clock's upper half that the current buffer's last CONTROL/TIME event gave.
    msb: AtomicU32,
}

static WRITER: Writer = Writer {
    lock: AtomicU32::new(0),
    current: AtomicUsize::new(0),
    next_seq: AtomicU32::new(1),
    msb: AtomicU32::new(0),
};

/// Held while writing; released on drop.
struct Locked;

impl Locked {
    fn take() -> Locked {
        while WRITER
            .lock
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
        Locked
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        WRITER.lock.store(0, Ordering::Release);
    }
}

/// The emitting side: the kernel's clock and console.
pub struct Tracer<'a> {
    /// The clock the time stamps count, at `cycles_per_sec`.
    pub now: fn() -> u64,
    pub sink: &'a dyn Sink,
}

impl Tracer<'_> {
    /// Links the buffers into a ring, publishes it in the syspage and prints the QNX-CONFIG
    /// line.
    pub fn init(&self, cycles_per_sec: u64) {
        let _lock = Locked::take();
        for (i, buf) in _trace_buffers.iter().enumerate() {
            let next = &_trace_buffers[(i + 1) % BUFFERS];
            buf.h.baseaddr.store(buf.ptr(), Ordering::Relaxed);
            buf.h.next.store(next.ptr(), Ordering::Relaxed);
            buf.h.ls13_rb_num.store((i as u32) << 13, Ordering::Relaxed);
            buf.h.begin_ptr.store(buf.slot(0), Ordering::Relaxed);
            buf.start(0);
        }
        WRITER.current.store(0, Ordering::Relaxed);
        WRITER.next_seq.store(1, Ordering::Relaxed);
        _syspage_trace
            .cycles_per_sec
            .store(cycles_per_sec, Ordering::Relaxed);
        _syspage_trace
            .tracelements
            .store(ELEMENTS as u32, Ordering::Relaxed);
        _syspage_trace
            .tracebuf
            .store(_trace_buffers[0].ptr(), Ordering::Release);
        self.sink.line(format_args!(
            "QNX-CONFIG elements={ELEMENTS} buffers={BUFFERS} cycles_per_sec={cycles_per_sec} head={:#x} syspage={:#x}",
            _trace_buffers[0].ptr() as u64,
            &_syspage_trace as *const SyspageTrace as u64,
        ));
    }

    /// Logs a simple event and returns its sequence number.
    pub fn simple(&self, cpu: u32, event: Simple) -> u64 {
        let _lock = Locked::take();
        let time = (self.now)();
        let (class, code) = event.code();
        let seq = self.put(Part::Simple, cpu, class, code, time, event.data());
        self.sink.line(format_args!(
            "{}",
            Line {
                seq: &[seq],
                time,
                cpu,
                name: Name::Simple(event),
                payload: &words(event.data()),
                unfinished: false,
                fields: Fields::Simple(event),
            }
        ));
        seq
    }

    /// Logs a combine event's begin part; [`Combine::step`] logs the others.
    pub fn begin<'w>(&self, cpu: u32, event: Wide<'w>) -> Combine<'w> {
        let mut payload = [0u8; MAX_PAYLOAD];
        let len = event.payload(&mut payload).unwrap_or_else(|| {
            panic!("a {} payload longer than {MAX_PAYLOAD} bytes", event.name())
        });
        let _lock = Locked::take();
        let time = (self.now)();
        let mut c = Combine {
            cpu,
            event,
            payload,
            len,
            time,
            seqs: [0; MAX_PARTS],
            written: 0,
        };
        c.put(self);
        c
    }

    /// Stores one traceevent, first a CONTROL/TIME event when the buffer is new or the clock's
    /// upper half changed. Called with the lock held.
    fn put(&self, part: Part, cpu: u32, class: u32, event: u32, time: u64, data: [u32; 2]) -> u64 {
        let msb = (time >> 32) as u32;
        let fresh = current().h.num_events.load(Ordering::Relaxed) as usize % ELEMENTS == 0;
        if fresh || WRITER.msb.load(Ordering::Relaxed) != msb {
            let stamp = Simple::Time {
                msb,
                lsb: time as u32,
            };
            let header = codes::header(Part::Simple, cpu, codes::CONTROL, codes::CONTROL_TIME);
            let seq = store(header, time as u32, stamp.data());
            WRITER.msb.store(msb, Ordering::Relaxed);
            self.sink.line(format_args!(
                "{}",
                Line {
                    seq: &[seq],
                    time,
                    cpu,
                    name: Name::Simple(stamp),
                    payload: &words(stamp.data()),
                    unfinished: false,
                    fields: Fields::Simple(stamp),
                }
            ));
        }
        store(codes::header(part, cpu, class, event), time as u32, data)
    }

    /// Scribbles `value` over ring buffer `index`'s `next` and prints the QNX-DAMAGE line.
    pub fn scribble_next(&self, index: usize, value: u64) {
        let _lock = Locked::take();
        let buf = &_trace_buffers[index % BUFFERS];
        buf.h.next.store(value as *mut TraceBuf, Ordering::Release);
        self.sink.line(format_args!(
            "QNX-DAMAGE buffer={} at={:#x} field=next value={value:#x}",
            index % BUFFERS,
            buf.ptr() as u64
        ));
    }

    /// Traceevents written since [`Tracer::init`].
    pub fn written(&self) -> u64 {
        let _lock = Locked::take();
        let buf = current();
        u64::from(buf.h.seq_buff_num.load(Ordering::Relaxed)) * ELEMENTS as u64
            + u64::from(buf.h.num_events.load(Ordering::Relaxed))
    }

    /// The address of ring buffer `index`.
    pub fn buffer(&self, index: usize) -> u64 {
        _trace_buffers[index % BUFFERS].ptr() as u64
    }
}

fn current() -> &'static TraceBuf {
    &_trace_buffers[WRITER.current.load(Ordering::Relaxed)]
}

/// Stores a traceevent in the current buffer, moving to the next buffer of the ring when it
/// is full, and returns its sequence number (`seq_buff_num * ELEMENTS + slot`).
fn store(header: u32, timeoff: u32, data: [u32; 2]) -> u64 {
    let mut buf = current();
    let mut n = buf.h.num_events.load(Ordering::Relaxed) as usize;
    if n == ELEMENTS {
        let next = (WRITER.current.load(Ordering::Relaxed) + 1) % BUFFERS;
        WRITER.current.store(next, Ordering::Relaxed);
        buf = current();
        buf.start(WRITER.next_seq.fetch_add(1, Ordering::Relaxed));
        n = 0;
    }
    buf.h.spin.store(1, Ordering::Release);
    let slot = &buf.data[n];
    slot.timeoff.store(timeoff, Ordering::Relaxed);
    slot.data[0].store(data[0], Ordering::Relaxed);
    slot.data[1].store(data[1], Ordering::Relaxed);
    slot.header.store(header, Ordering::Release);
    let count = n as u32 + 1;
    buf.h.num_events.store(count, Ordering::Release);
    buf.h.tail_ptr.store(buf.slot(n + 1), Ordering::Release);
    let mut flags = 0;
    if count >= HIWATER {
        flags |= FLAG_HIWATER;
    }
    if count as usize == ELEMENTS {
        flags |= FLAG_FULL;
    }
    buf.h.flags.store(flags, Ordering::Release);
    buf.h.spin.store(0, Ordering::Release);
    u64::from(buf.h.seq_buff_num.load(Ordering::Relaxed)) * ELEMENTS as u64 + n as u64
}

/// A combine event being written, part by part.
pub struct Combine<'w> {
    cpu: u32,
    event: Wide<'w>,
    payload: [u8; MAX_PAYLOAD],
    len: usize,
    /// The time stamp every part carries.
    time: u64,
    seqs: [u64; MAX_PARTS],
    written: usize,
}

impl Combine<'_> {
    /// Logs the next part; true when that was the end part (its oracle line is then out).
    pub fn step(&mut self, tracer: &Tracer<'_>) -> bool {
        if self.done() {
            return true;
        }
        let _lock = Locked::take();
        self.put(tracer);
        if self.done() {
            tracer.sink.line(format_args!("{}", self.line(false)));
        }
        self.done()
    }

    /// Prints the oracle line of a combine event the crash cuts short: the parts written.
    pub fn unfinished(&self, tracer: &Tracer<'_>) {
        tracer.sink.line(format_args!("{}", self.line(true)));
    }

    fn parts(&self) -> usize {
        self.len / 8
    }

    fn done(&self) -> bool {
        self.written == self.parts()
    }

    fn put(&mut self, tracer: &Tracer<'_>) {
        let i = self.written;
        let part = match i {
            0 => Part::Begin,
            i if i + 1 == self.parts() => Part::End,
            _ => Part::Continuation,
        };
        let word = |at: usize| u32::from_le_bytes(self.payload[at..at + 4].try_into().unwrap());
        let data = [word(i * 8), word(i * 8 + 4)];
        let (class, event) = self.event.code();
        self.seqs[i] = tracer.put(part, self.cpu, class, event, self.time, data);
        self.written += 1;
    }

    fn line(&self, unfinished: bool) -> Line<'_> {
        Line {
            seq: &self.seqs[..self.written],
            time: self.time,
            cpu: self.cpu,
            name: Name::Wide(self.event.name()),
            payload: &self.payload[..self.written * 8],
            unfinished,
            fields: Fields::Wide(self.event),
        }
    }
}

fn words(data: [u32; 2]) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&data[0].to_le_bytes());
    b[4..].copy_from_slice(&data[1].to_le_bytes());
    b
}

enum Name {
    Simple(Simple),
    Wide(&'static str),
}

enum Fields<'w> {
    Simple(Simple),
    Wide(Wide<'w>),
}

/// One QNX-EVENT oracle line:
/// `QNX-EVENT seq=S time=T cpu=C name=N parts=S,S.. payload=HEX [unfinished=1] f.NAME=TYPE:VALUE..`
struct Line<'a> {
    /// The sequence numbers of its parts, the first one's the event's.
    seq: &'a [u64],
    time: u64,
    cpu: u32,
    name: Name,
    /// The data words of its parts, in order.
    payload: &'a [u8],
    unfinished: bool,
    fields: Fields<'a>,
}

impl fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "QNX-EVENT seq={} time={} cpu={} name=",
            self.seq.first().copied().unwrap_or(0),
            self.time,
            self.cpu
        )?;
        match self.name {
            Name::Simple(event) => event.write_name(f)?,
            Name::Wide(name) => f.write_str(name)?,
        }
        f.write_str(" parts=")?;
        for (i, seq) in self.seq.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(f, "{sep}{seq}")?;
        }
        f.write_str(" payload=")?;
        self.payload.iter().try_for_each(|b| write!(f, "{b:02x}"))?;
        if self.unfinished {
            f.write_str(" unfinished=1")?;
        }
        let mut field = |field: Field<'_>| write!(f, " {field}");
        match self.fields {
            Fields::Simple(event) => event.fields(&mut field),
            Fields::Wide(event) => event.fields(&mut field),
        }
    }
}
