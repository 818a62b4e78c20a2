//! A Klogger writer for kcrash's test kernels: per-CPU memory-resident buffers into which events
//! are logged as a header (type, serial, time stamp) and the payload laid out as the C struct
//! its schema declares. kcrash's `klogger` decoder reads it; plugins/klogger/README.md gives the
//! layout with its offsets.
//!
//! Every event logged, dropped or overwritten is told to a [`Sink`], which the kernels print as
//! their oracle lines.
#![no_std]

pub mod events;
pub mod oracle;
pub mod script;

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub use events::{Event, Value};

/// `Log::magic`.
pub const MAGIC: [u8; 8] = *b"KLOGGER\0";
/// `Log::version`.
pub const VERSION: u32 = 1;
/// Buffers a log has room for.
pub const MAX_CPUS: usize = 4;
/// Bytes of a record header: type (u32), size (u32), serial (u64), time stamp (u64).
pub const HEADER_BYTES: u64 = 24;
/// The type of the filler that takes the rest of the buffer when a record does not fit before
/// its end; its size field says how many bytes it fills.
pub const PAD: u32 = u32::MAX;
/// `Cpu::flags`: a full buffer overwrites its oldest records instead of dropping new ones.
pub const OVERWRITE: u32 = 1;

/// The schema the test kernels are built with, in Klogger's configuration syntax.
pub static SCHEMA: &[u8] =
    include_bytes!("../../../../plugins/klogger/schemas/.klogger.conf.kcrash");

/// One CPU's buffer and its counters. `head` and `tail` count bytes ever written and released,
/// so `head - tail` bytes are in use and the oldest record is at `tail % size`.
#[repr(C)]
pub struct Cpu {
    pub buffer: AtomicU64,
    pub size: AtomicU64,
    pub head: AtomicU64,
    pub tail: AtomicU64,
    /// The serial number the next event gets: the events ever logged or dropped.
    pub next_serial: AtomicU64,
    /// Events dropped because the buffer was full.
    pub lost: AtomicU64,
    /// Events overwritten by newer ones.
    pub overwritten: AtomicU64,
    pub cpu: AtomicU32,
    pub flags: AtomicU32,
}

/// The log: what a reader finds by the symbol `klogger`.
#[repr(C)]
pub struct Log {
    pub magic: [u8; 8],
    pub version: u32,
    /// Buffers in use: `cpus[..ncpus]`.
    pub ncpus: AtomicU32,
    /// Time stamp ticks per second (the TSC's rate); 0 when not known.
    pub clock_hz: AtomicU64,
    /// Address and length of the schema text the kernel was built with.
    pub schema: AtomicU64,
    pub schema_len: AtomicU64,
    pub cpus: [Cpu; MAX_CPUS],
}

/// A buffer's bytes, 8-aligned: records are multiples of 8 bytes.
#[repr(C, align(8))]
pub struct Buffer<const N: usize>(UnsafeCell<[u8; N]>);

// SAFETY: each buffer is written by one CPU's writer only; readers are the dump.
unsafe impl<const N: usize> Sync for Buffer<N> {}

impl<const N: usize> Buffer<N> {
    pub const fn new() -> Self {
        Buffer(UnsafeCell::new([0; N]))
    }

    /// The buffer's address and size, for [`Log::enable`].
    pub fn region(&self) -> (u64, u64) {
        (self.0.get() as u64, N as u64)
    }
}

impl<const N: usize> Default for Buffer<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a kernel's oracle goes: one call per event logged, dropped or overwritten.
pub trait Sink {
    fn logged(&mut self, cpu: u32, serial: u64, ticks: u64, event: &dyn Event);
    fn lost(&mut self, cpu: u32, serial: u64, name: &str);
    fn overwritten(&mut self, cpu: u32, serial: u64);
}

impl Log {
    pub const fn new() -> Log {
        Log {
            magic: MAGIC,
            version: VERSION,
            ncpus: AtomicU32::new(0),
            clock_hz: AtomicU64::new(0),
            schema: AtomicU64::new(0),
            schema_len: AtomicU64::new(0),
            cpus: [const {
                Cpu {
                    buffer: AtomicU64::new(0),
                    size: AtomicU64::new(0),
                    head: AtomicU64::new(0),
                    tail: AtomicU64::new(0),
                    next_serial: AtomicU64::new(0),
                    lost: AtomicU64::new(0),
                    overwritten: AtomicU64::new(0),
                    cpu: AtomicU32::new(0),
                    flags: AtomicU32::new(0),
                }
            }; MAX_CPUS],
        }
    }

    /// Enables logging on one CPU per buffer: CPU `n` into `buffers[n]` (address, size, flags),
    /// its time stamps ticking at `clock_hz` (0: unknown).
    pub fn enable(&self, clock_hz: u64, buffers: &[(u64, u64, u32)]) {
        self.clock_hz.store(clock_hz, Ordering::Relaxed);
        self.schema.store(SCHEMA.as_ptr() as u64, Ordering::Relaxed);
        self.schema_len
            .store(SCHEMA.len() as u64, Ordering::Relaxed);
        let n = buffers.len().min(MAX_CPUS);
        for (i, &(addr, size, flags)) in buffers[..n].iter().enumerate() {
            let cpu = &self.cpus[i];
            cpu.buffer.store(addr, Ordering::Relaxed);
            cpu.size.store(size & !7, Ordering::Relaxed);
            cpu.cpu.store(i as u32, Ordering::Relaxed);
            cpu.flags.store(flags, Ordering::Relaxed);
        }
        self.ncpus.store(n as u32, Ordering::Release);
    }

    /// Logs `event` on `cpu` at `ticks`: allocates its record, overwriting the oldest records or
    /// dropping the event when the buffer is full (as the buffer's flags say). Each CPU's
    /// buffer must have one writer at a time.
    pub fn log(&self, cpu: u32, ticks: u64, event: &dyn Event, sink: &mut dyn Sink) {
        let payload = event.payload();
        let type_id = event.type_id();
        let Some(c) = self.cpus.get(cpu as usize) else {
            return;
        };
        let serial = c.next_serial.fetch_add(1, Ordering::Relaxed);
        let size = c.size.load(Ordering::Relaxed);
        let need = (HEADER_BYTES + payload.len() as u64 + 7) & !7;
        // At most half the buffer, so that a record and the filler before it always fit.
        if need > size / 2 {
            c.lost.fetch_add(1, Ordering::Relaxed);
            sink.lost(cpu, serial, event.name());
            return;
        }
        let mut head = c.head.load(Ordering::Relaxed);
        // A record never straddles the buffer's end: a filler takes the bytes before it.
        let before_end = size - head % size;
        let filler = if before_end < need { before_end } else { 0 };
        let overwrite = c.flags.load(Ordering::Relaxed) & OVERWRITE != 0;
        if !overwrite && head + filler + need - c.tail.load(Ordering::Relaxed) > size {
            c.lost.fetch_add(1, Ordering::Relaxed);
            sink.lost(cpu, serial, event.name());
            return;
        }
        while head + filler + need - c.tail.load(Ordering::Relaxed) > size {
            self.release_oldest(c, cpu, sink);
        }
        let base = c.buffer.load(Ordering::Relaxed);
        if filler > 0 {
            // SAFETY: the filler's 8 header bytes lie in this CPU's buffer (sizes are multiples
            // of 8), which only this writer writes.
            unsafe { write_header(base + head % size, PAD, filler as u32) };
            head += filler;
        }
        let at = base + head % size;
        // SAFETY: `need` bytes from `at` lie in the buffer (no straddling, checked above).
        unsafe {
            write_header(at, type_id, need as u32);
            let rec = at as *mut u8;
            rec.add(8).cast::<u64>().write_volatile(serial);
            rec.add(16).cast::<u64>().write_volatile(ticks);
            core::ptr::write_bytes(
                rec.add(HEADER_BYTES as usize),
                0,
                (need - HEADER_BYTES) as usize,
            );
            core::ptr::copy_nonoverlapping(
                payload.as_ptr(),
                rec.add(HEADER_BYTES as usize),
                payload.len(),
            );
        }
        c.head.store(head + need, Ordering::Release);
        sink.logged(cpu, serial, ticks, event);
    }

    /// Moves `tail` past the oldest record (and a filler after it), telling the sink.
    fn release_oldest(&self, c: &Cpu, cpu: u32, sink: &mut dyn Sink) {
        let size = c.size.load(Ordering::Relaxed);
        let tail = c.tail.load(Ordering::Relaxed);
        let at = c.buffer.load(Ordering::Relaxed) + tail % size;
        // SAFETY: `tail` is the start of a record this writer wrote.
        let (type_id, bytes, serial) = unsafe {
            let rec = at as *const u8;
            (
                rec.cast::<u32>().read_volatile(),
                rec.add(4).cast::<u32>().read_volatile(),
                rec.add(8).cast::<u64>().read_volatile(),
            )
        };
        if type_id != PAD {
            c.overwritten.fetch_add(1, Ordering::Relaxed);
            sink.overwritten(cpu, serial);
        }
        c.tail.store(tail + u64::from(bytes), Ordering::Relaxed);
    }
}

impl Default for Log {
    fn default() -> Self {
        Self::new()
    }
}

/// Writes a record header's type and size words at `at`.
///
/// # Safety
/// `at` must be 8 writable bytes, 4-aligned.
unsafe fn write_header(at: u64, type_id: u32, size: u32) {
    let rec = at as *mut u32;
    rec.write_volatile(type_id);
    rec.add(1).write_volatile(size);
}
