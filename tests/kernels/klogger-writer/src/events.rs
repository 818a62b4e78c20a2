//! The events of the test kernels' schema (`plugins/klogger/schemas/.klogger.conf.kcrash`), as
//! the C structs Klogger's generator would declare for them: each field at its C offset on
//! x86_64, with the padding C would leave spelled out as `_pad` bytes, so that a payload is its
//! struct's bytes exactly.

use core::mem::{offset_of, size_of};

/// A payload field's value, as the oracle prints it.
pub enum Value<'a> {
    Signed(i64),
    Unsigned(u64),
    /// An enumeration's value and the name the schema gives it.
    Enum(i64, &'a str),
    /// A `stringN` field: its bytes before the first NUL.
    Text(&'a [u8]),
    /// A payload of a type the schema lacks.
    Bytes(&'a [u8]),
}

/// An event the writer can log.
pub trait Event {
    /// Its type number: its place among the schema's events in use, from 1.
    fn type_id(&self) -> u32;
    fn name(&self) -> &str;
    /// The payload's bytes.
    fn payload(&self) -> &[u8];
    /// Every field in declaration order, for the oracle.
    fn fields(&self, each: &mut dyn FnMut(&str, Value));
}

/// A `stringN` field's text: the bytes before the first NUL.
fn text(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// Copies `s` into a `stringN` field, cut to N - 1 bytes so a NUL ends it.
pub fn string<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0; N];
    let n = s.len().min(N - 1);
    out[..n].copy_from_slice(&s.as_bytes()[..n]);
    out
}

/// `sched_policy`'s names by value.
pub fn sched_policy(value: i32) -> &'static str {
    match value {
        0 => "NORMAL",
        1 => "FIFO",
        2 => "RR",
        3 => "BATCH",
        5 => "IDLE",
        _ => "",
    }
}

/// `task_state`'s names by value.
pub fn task_state(value: i32) -> &'static str {
    match value {
        0 => "RUNNING",
        1 => "INTERRUPTIBLE",
        2 => "UNINTERRUPTIBLE",
        4 => "STOPPED",
        32 => "ZOMBIE",
        -1 => "DEAD",
        _ => "",
    }
}

/// Declares an event's payload struct and its [`Event`] impl; the struct's size and field
/// offsets are checked against the C layout at compile time. A field without a value is padding.
macro_rules! event {
    ($ty:ident = $id:literal $name:literal, size $size:literal {
        $($field:ident: $fty:ty = $off:literal $(=> |$v:ident| $value:expr)?,)*
    }) => {
        #[repr(C)]
        #[derive(Clone, Copy)]
        pub struct $ty {
            $($field: $fty,)*
        }

        const _: () = {
            assert!(size_of::<$ty>() == $size);
            $(assert!(offset_of!($ty, $field) == $off);)*
        };

        impl Event for $ty {
            fn type_id(&self) -> u32 {
                $id
            }
            fn name(&self) -> &str {
                $name
            }
            fn payload(&self) -> &[u8] {
                // SAFETY: the struct is repr(C) plain data with every padding byte a field
                // (its size is the sum of its fields': checked above).
                unsafe { core::slice::from_raw_parts((self as *const Self).cast(), $size) }
            }
            fn fields(&self, each: &mut dyn FnMut(&str, Value)) {
                $($(let $v = &self.$field; each(stringify!($field), $value);)?)*
            }
        }
    };
}

event!(KloggerStart = 1 "KLOGGER_START", size 32 {
    buffer_size: u64 = 0 => |v| Value::Unsigned(*v),
    cpu: i32 = 8 => |v| Value::Signed(i64::from(*v)),
    version: [u8; 16] = 12 => |v| Value::Text(text(v)),
    _pad: [u8; 4] = 28,
});

event!(SchedOut = 2 "SCHEDOUT", size 16 {
    pid: i32 = 0 => |v| Value::Signed(i64::from(*v)),
    _pad: [u8; 4] = 4,
    l2_cache_misses_user: u64 = 8 => |v| Value::Unsigned(*v),
});

event!(SchedIn = 3 "SCHEDIN", size 12 {
    pid: i32 = 0 => |v| Value::Signed(i64::from(*v)),
    policy: i32 = 4 => |v| Value::Enum(i64::from(*v), sched_policy(*v)),
    prio: i16 = 8 => |v| Value::Signed(i64::from(*v)),
    _pad: [u8; 2] = 10,
});

event!(TryToWakeup = 4 "TRY_TO_WAKEUP", size 12 {
    pid: i32 = 0 => |v| Value::Signed(i64::from(*v)),
    state: i32 = 4 => |v| Value::Enum(i64::from(*v), task_state(*v)),
    flags: u16 = 8 => |v| Value::Unsigned(u64::from(*v)),
    _pad: [u8; 2] = 10,
});

event!(ProcessExists = 5 "PROCESS_EXISTS", size 40 {
    pid: i32 = 0 => |v| Value::Signed(i64::from(*v)),
    policy: i32 = 4 => |v| Value::Enum(i64::from(*v), sched_policy(*v)),
    comm: [u8; 32] = 8 => |v| Value::Text(text(v)),
});

event!(DumpFinish = 6 "DUMP_FINISH", size 16 {
    bytes: u64 = 0 => |v| Value::Unsigned(*v),
    index: u32 = 8 => |v| Value::Unsigned(u64::from(*v)),
    _pad: [u8; 4] = 12,
});

impl KloggerStart {
    pub fn new(buffer_size: u64, cpu: i32, version: &str) -> Self {
        KloggerStart {
            buffer_size,
            cpu,
            version: string(version),
            _pad: [0; 4],
        }
    }
}

impl SchedOut {
    pub fn new(pid: i32, l2_cache_misses_user: u64) -> Self {
        SchedOut {
            pid,
            l2_cache_misses_user,
            _pad: [0; 4],
        }
    }
}

impl SchedIn {
    pub fn new(pid: i32, policy: i32, prio: i16) -> Self {
        SchedIn {
            pid,
            policy,
            prio,
            _pad: [0; 2],
        }
    }
}

impl TryToWakeup {
    pub fn new(pid: i32, state: i32, flags: u16) -> Self {
        TryToWakeup {
            pid,
            state,
            flags,
            _pad: [0; 2],
        }
    }
}

impl ProcessExists {
    pub fn new(pid: i32, policy: i32, comm: &str) -> Self {
        ProcessExists {
            pid,
            policy,
            comm: string(comm),
        }
    }
}

impl DumpFinish {
    pub fn new(bytes: u64, index: u32) -> Self {
        DumpFinish {
            bytes,
            index,
            _pad: [0; 4],
        }
    }
}

/// A record of a type the schema does not declare: its number and raw payload.
pub struct Unknown<'a> {
    pub type_id: u32,
    pub payload: &'a [u8],
}

impl Event for Unknown<'_> {
    fn type_id(&self) -> u32 {
        self.type_id
    }
    fn name(&self) -> &str {
        "unknown"
    }
    fn payload(&self) -> &[u8] {
        self.payload
    }
    fn fields(&self, each: &mut dyn FnMut(&str, Value)) {
        each("type", Value::Unsigned(u64::from(self.type_id)));
        each("payload", Value::Bytes(self.payload));
    }
}
