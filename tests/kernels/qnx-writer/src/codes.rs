//! What one traceevent says: the 32-bit header as the design's figure 4 lays it out, and the
//! classes and events the test kernels log, with the names and fields their oracle lines give.

use core::fmt::{self, Write};

/// Bits 31..30: which part of an event the traceevent is.
pub const CONTROL_SHIFT: u32 = 30;
/// Bits 29..24: the processor that logged it.
pub const CPU_SHIFT: u32 = 24;
/// Bits 23..16: flags (none defined by the design; the writer leaves them 0).
pub const FLAGS_SHIFT: u32 = 16;
/// Bits 14..10: the event class (bit 15 is reserved, 0).
pub const CLASS_SHIFT: u32 = 10;
/// Bits 9..0: the event type within its class.
pub const EVENT_MASK: u32 = 0x3ff;

/// The control bits of figure 4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Simple = 0,
    Begin = 1,
    Continuation = 2,
    End = 3,
}

/// A traceevent header.
pub fn header(part: Part, cpu: u32, class: u32, event: u32) -> u32 {
    ((part as u32) << CONTROL_SHIFT)
        | ((cpu & 0x3f) << CPU_SHIFT)
        | ((class & 0x1f) << CLASS_SHIFT)
        | (event & EVENT_MASK)
}

/// The design's six classes, by their 5-bit number.
pub const EMPTY: u32 = 0;
pub const CONTROL: u32 = 1;
pub const KER_CALL: u32 = 2;
pub const INT: u32 = 3;
pub const PROC_THREAD: u32 = 4;
pub const CONTAINER: u32 = 5;
pub const CLASS_NAMES: [&str; 6] = [
    "EMPTY",
    "CONTROL",
    "KER_CALL",
    "INT",
    "PROC_THREAD",
    "CONTAINER",
];

/// CONTROL's time event: the upper 32 bits of the clock, which `timeoff` lacks.
pub const CONTROL_TIME: u32 = 1;
/// KER_CALL and INT events: this bit of the event type marks the exit (clear: the entry).
pub const EXIT: u32 = 0x200;
/// The kernel calls the test kernels log, by number.
pub const KER_CALLS: [(u32, &str); 10] = [
    (1, "TRACE_EVENT"),
    (2, "MSG_SENDV"),
    (3, "MSG_RECEIVEV"),
    (4, "MSG_REPLYV"),
    (5, "THREAD_CREATE"),
    (6, "THREAD_DESTROY"),
    (7, "TIMER_CREATE"),
    (8, "TIMER_SETTIME"),
    (9, "SCHED_YIELD"),
    (10, "INTERRUPT_ATTACH"),
];
/// PROC_THREAD's events.
pub const PROCCREATE: u32 = 1;
pub const PROCDESTROY: u32 = 2;
pub const THCREATE: u32 = 3;
pub const THDESTROY: u32 = 4;
pub const THRUNNING: u32 = 5;
pub const THREADY: u32 = 6;
pub const PROCCREATE_NAME: u32 = 7;
/// CONTAINER's one event: bytes with their length in front.
pub const BUFFER: u32 = 1;

/// One field of an event as its oracle line gives it: name and typed value.
#[derive(Clone, Copy, Debug)]
pub enum Field<'a> {
    Unsigned(&'static str, u64),
    Signed(&'static str, i64),
    Hex(&'static str, u64),
    Text(&'static str, &'a [u8]),
    Bytes(&'static str, &'a [u8]),
}

impl fmt::Display for Field<'_> {
    /// `f.NAME=TYPE:VALUE`: u (decimal), s (decimal), x (0x hex), t (text, escaped as
    /// `str::escape_debug` with spaces as `\u{20}`), b (hex bytes).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Field::Unsigned(n, v) => write!(f, "f.{n}=u:{v}"),
            Field::Signed(n, v) => write!(f, "f.{n}=s:{v}"),
            Field::Hex(n, v) => write!(f, "f.{n}=x:{v:#x}"),
            Field::Text(n, t) => {
                write!(f, "f.{n}=t:")?;
                for chunk in t.utf8_chunks() {
                    for c in chunk.valid().chars() {
                        match c {
                            ' ' => f.write_str("\\u{20}")?,
                            c => write!(f, "{}", c.escape_debug())?,
                        }
                    }
                    for b in chunk.invalid() {
                        write!(f, "\\u{{{:x}}}", 0xdc00 | u32::from(*b))?;
                    }
                }
                Ok(())
            }
            Field::Bytes(n, b) => {
                write!(f, "f.{n}=b:")?;
                b.iter().try_for_each(|b| write!(f, "{b:02x}"))
            }
        }
    }
}

/// A simple event: one traceevent, two data words.
#[derive(Clone, Copy, Debug)]
pub enum Simple {
    /// CONTROL/TIME: the clock's upper and lower halves; the writer logs it itself.
    Time {
        msb: u32,
        lsb: u32,
    },
    KerCallEnter {
        call: u32,
        arg0: u32,
        arg1: u32,
    },
    KerCallExit {
        call: u32,
        ret: i32,
        status: u32,
    },
    IntEnter {
        vector: u32,
        ip: u32,
        sp: u32,
    },
    IntExit {
        vector: u32,
        handlers: u32,
        status: u32,
    },
    ProcCreate {
        ppid: u32,
        pid: u32,
    },
    ProcDestroy {
        pid: u32,
        status: u32,
    },
    ThCreate {
        pid: u32,
        tid: u32,
    },
    ThDestroy {
        pid: u32,
        tid: u32,
    },
    ThRunning {
        pid: u32,
        tid: u32,
    },
    ThReady {
        pid: u32,
        tid: u32,
    },
    /// Any class and event, known or not: for readers' handling of codes they do not know.
    Raw {
        class: u32,
        event: u32,
        d0: u32,
        d1: u32,
    },
}

impl Simple {
    /// Class and event type.
    pub fn code(&self) -> (u32, u32) {
        match *self {
            Simple::Time { .. } => (CONTROL, CONTROL_TIME),
            Simple::KerCallEnter { call, .. } => (KER_CALL, call),
            Simple::KerCallExit { call, .. } => (KER_CALL, EXIT | call),
            Simple::IntEnter { vector, .. } => (INT, vector),
            Simple::IntExit { vector, .. } => (INT, EXIT | vector),
            Simple::ProcCreate { .. } => (PROC_THREAD, PROCCREATE),
            Simple::ProcDestroy { .. } => (PROC_THREAD, PROCDESTROY),
            Simple::ThCreate { .. } => (PROC_THREAD, THCREATE),
            Simple::ThDestroy { .. } => (PROC_THREAD, THDESTROY),
            Simple::ThRunning { .. } => (PROC_THREAD, THRUNNING),
            Simple::ThReady { .. } => (PROC_THREAD, THREADY),
            Simple::Raw { class, event, .. } => (class, event),
        }
    }

    /// The two data words.
    pub fn data(&self) -> [u32; 2] {
        match *self {
            Simple::Time { msb, lsb } => [msb, lsb],
            Simple::KerCallEnter { arg0, arg1, .. } => [arg0, arg1],
            Simple::KerCallExit { ret, status, .. } => [ret as u32, status],
            Simple::IntEnter { ip, sp, .. } => [ip, sp],
            Simple::IntExit {
                handlers, status, ..
            } => [handlers, status],
            Simple::ProcCreate { ppid, pid } => [ppid, pid],
            Simple::ProcDestroy { pid, status } => [pid, status],
            Simple::ThCreate { pid, tid }
            | Simple::ThDestroy { pid, tid }
            | Simple::ThRunning { pid, tid }
            | Simple::ThReady { pid, tid } => [pid, tid],
            Simple::Raw { d0, d1, .. } => [d0, d1],
        }
    }

    /// `CLASS/EVENT`, or `unknown` for a code the kernel has no name for.
    pub fn write_name(&self, out: &mut dyn Write) -> fmt::Result {
        match *self {
            Simple::Time { .. } => out.write_str("CONTROL/TIME"),
            Simple::KerCallEnter { call, .. } | Simple::KerCallExit { call, .. } => {
                let dir = if self.code().1 & EXIT != 0 {
                    "EXIT"
                } else {
                    "ENTER"
                };
                match ker_call_name(call) {
                    Some(name) => write!(out, "KER_CALL/{name}_{dir}"),
                    None => out.write_str("unknown"),
                }
            }
            Simple::IntEnter { .. } => out.write_str("INT/ENTER"),
            Simple::IntExit { .. } => out.write_str("INT/EXIT"),
            Simple::ProcCreate { .. } => out.write_str("PROC_THREAD/PROCCREATE"),
            Simple::ProcDestroy { .. } => out.write_str("PROC_THREAD/PROCDESTROY"),
            Simple::ThCreate { .. } => out.write_str("PROC_THREAD/THCREATE"),
            Simple::ThDestroy { .. } => out.write_str("PROC_THREAD/THDESTROY"),
            Simple::ThRunning { .. } => out.write_str("PROC_THREAD/THRUNNING"),
            Simple::ThReady { .. } => out.write_str("PROC_THREAD/THREADY"),
            Simple::Raw { .. } => out.write_str("unknown"),
        }
    }

    /// The fields an oracle line gives; a code without a name gives its class, event and words.
    pub fn fields(&self, out: &mut dyn FnMut(Field<'_>) -> fmt::Result) -> fmt::Result {
        let (class, event) = self.code();
        let [d0, d1] = self.data();
        match *self {
            Simple::Time { msb, lsb } => {
                out(Field::Hex("msb", msb.into()))?;
                out(Field::Hex("lsb", lsb.into()))
            }
            Simple::KerCallEnter { call, arg0, arg1 } if ker_call_name(call).is_some() => {
                out(Field::Hex("arg0", arg0.into()))?;
                out(Field::Hex("arg1", arg1.into()))
            }
            Simple::KerCallExit { call, ret, status } if ker_call_name(call).is_some() => {
                out(Field::Signed("ret", ret.into()))?;
                out(Field::Hex("status", status.into()))
            }
            Simple::IntEnter { vector, ip, sp } => {
                out(Field::Unsigned("vector", vector.into()))?;
                out(Field::Hex("ip", ip.into()))?;
                out(Field::Hex("sp", sp.into()))
            }
            Simple::IntExit {
                vector,
                handlers,
                status,
            } => {
                out(Field::Unsigned("vector", vector.into()))?;
                out(Field::Unsigned("handlers", handlers.into()))?;
                out(Field::Hex("status", status.into()))
            }
            Simple::ProcCreate { ppid, pid } => {
                out(Field::Unsigned("ppid", ppid.into()))?;
                out(Field::Unsigned("pid", pid.into()))
            }
            Simple::ProcDestroy { pid, status } => {
                out(Field::Unsigned("pid", pid.into()))?;
                out(Field::Hex("status", status.into()))
            }
            Simple::ThCreate { pid, tid }
            | Simple::ThDestroy { pid, tid }
            | Simple::ThRunning { pid, tid }
            | Simple::ThReady { pid, tid } => {
                out(Field::Unsigned("pid", pid.into()))?;
                out(Field::Unsigned("tid", tid.into()))
            }
            Simple::KerCallEnter { .. } | Simple::KerCallExit { .. } | Simple::Raw { .. } => {
                out(Field::Unsigned("class", class.into()))?;
                out(Field::Unsigned("event", event.into()))?;
                out(Field::Hex("d0", d0.into()))?;
                out(Field::Hex("d1", d1.into()))
            }
        }
    }
}

fn ker_call_name(call: u32) -> Option<&'static str> {
    KER_CALLS.iter().find(|(n, _)| *n == call).map(|(_, s)| *s)
}

/// Bytes a combine event's payload may take in this writer: 16 parts.
pub const MAX_PAYLOAD: usize = 16 * 8;

/// A combine event (the design's wide emitting mode): a payload split over several
/// traceevents, 8 bytes each.
#[derive(Clone, Copy, Debug)]
pub enum Wide<'a> {
    /// PROC_THREAD/PROCCREATE_NAME: parent and process ids, then the name, NUL-terminated.
    ProcCreateName { ppid: u32, pid: u32, name: &'a [u8] },
    /// CONTAINER/BUFFER: a 32-bit length, then that many bytes.
    Buffer { bytes: &'a [u8] },
}

impl Wide<'_> {
    pub fn code(&self) -> (u32, u32) {
        match self {
            Wide::ProcCreateName { .. } => (PROC_THREAD, PROCCREATE_NAME),
            Wide::Buffer { .. } => (CONTAINER, BUFFER),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Wide::ProcCreateName { .. } => "PROC_THREAD/PROCCREATE_NAME",
            Wide::Buffer { .. } => "CONTAINER/BUFFER",
        }
    }

    /// Lays the payload out in `out`, zero-padded to whole parts (at least two, so it is a
    /// combine event), and returns its length; None if it does not fit.
    pub fn payload(&self, out: &mut [u8; MAX_PAYLOAD]) -> Option<usize> {
        let (head, tail, nul) = match *self {
            Wide::ProcCreateName { ppid, pid, name } => {
                let mut head = [0u8; 8];
                head[..4].copy_from_slice(&ppid.to_le_bytes());
                head[4..].copy_from_slice(&pid.to_le_bytes());
                (head, name, 1)
            }
            Wide::Buffer { bytes } => {
                let mut head = [0u8; 8];
                head[..4].copy_from_slice(&u32::try_from(bytes.len()).ok()?.to_le_bytes());
                (head, bytes, 0)
            }
        };
        let len = if let Wide::Buffer { .. } = self { 4 } else { 8 };
        let used = len + tail.len() + nul;
        let total = used.div_ceil(8).max(2) * 8;
        if total > MAX_PAYLOAD {
            return None;
        }
        out.fill(0);
        out[..len].copy_from_slice(&head[..len]);
        out[len..len + tail.len()].copy_from_slice(tail);
        Some(total)
    }

    pub fn fields(&self, out: &mut dyn FnMut(Field<'_>) -> fmt::Result) -> fmt::Result {
        match *self {
            Wide::ProcCreateName { ppid, pid, name } => {
                out(Field::Unsigned("ppid", ppid.into()))?;
                out(Field::Unsigned("pid", pid.into()))?;
                out(Field::Text("name", name))
            }
            Wide::Buffer { bytes } => {
                out(Field::Unsigned("len", bytes.len() as u64))?;
                out(Field::Bytes("data", bytes))
            }
        }
    }
}
