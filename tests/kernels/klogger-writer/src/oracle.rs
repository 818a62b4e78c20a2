//! The oracle lines the test kernels print for what the writer did, so that the harness can
//! say what a reader of the dump must find. One line per event, with every field typed:
//!
//! ```text
//! KLOGGER-CONFIG clock_hz=2993212000 cpus=2
//! KLOGGER-EVENT cpu=0 serial=4 ticks=81234 name=SCHEDIN pid=s:18 policy=e:1:FIFO prio=s:-3
//! KLOGGER-EVENT cpu=1 serial=9 ticks=81301 name=PROCESS_EXISTS pid=s:1 policy=e:5:IDLE comm=t:696e6974
//! KLOGGER-LOST cpu=1 serial=10 name=PROCESS_EXISTS
//! KLOGGER-OVERWRITTEN cpu=0 serial=0
//! KLOGGER-DAMAGE cpu=1 field=head value=0xdeadbeefdeadbee8
//! ```
//!
//! Values: `s:` signed and `u:` unsigned decimal, `e:VALUE:NAME` an enumerator (NAME empty when
//! the enumeration has none), `t:` text and `b:` raw bytes in hex.

use core::fmt::{self, Write};

use crate::events::{Event, Value};

pub fn config(out: &mut dyn Write, clock_hz: u64, cpus: usize) -> fmt::Result {
    writeln!(out, "KLOGGER-CONFIG clock_hz={clock_hz} cpus={cpus}")
}

pub fn logged(
    out: &mut dyn Write,
    cpu: u32,
    serial: u64,
    ticks: u64,
    event: &dyn Event,
) -> fmt::Result {
    write!(
        out,
        "KLOGGER-EVENT cpu={cpu} serial={serial} ticks={ticks} name={}",
        event.name()
    )?;
    let mut result = Ok(());
    event.fields(&mut |name, value| {
        if result.is_ok() {
            result = field(out, name, &value);
        }
    });
    result?;
    writeln!(out)
}

fn field(out: &mut dyn Write, name: &str, value: &Value) -> fmt::Result {
    match value {
        Value::Signed(v) => write!(out, " {name}=s:{v}"),
        Value::Unsigned(v) => write!(out, " {name}=u:{v}"),
        Value::Enum(v, label) => write!(out, " {name}=e:{v}:{label}"),
        Value::Text(bytes) => write!(out, " {name}=t:").and_then(|()| hex(out, bytes)),
        Value::Bytes(bytes) => write!(out, " {name}=b:").and_then(|()| hex(out, bytes)),
    }
}

fn hex(out: &mut dyn Write, bytes: &[u8]) -> fmt::Result {
    bytes.iter().try_for_each(|b| write!(out, "{b:02x}"))
}

pub fn lost(out: &mut dyn Write, cpu: u32, serial: u64, name: &str) -> fmt::Result {
    writeln!(out, "KLOGGER-LOST cpu={cpu} serial={serial} name={name}")
}

pub fn overwritten(out: &mut dyn Write, cpu: u32, serial: u64) -> fmt::Result {
    writeln!(out, "KLOGGER-OVERWRITTEN cpu={cpu} serial={serial}")
}

pub fn damage(out: &mut dyn Write, cpu: u32, field: &str, value: u64) -> fmt::Result {
    writeln!(
        out,
        "KLOGGER-DAMAGE cpu={cpu} field={field} value={value:#x}"
    )
}

/// A [`crate::Sink`] that prints each line to a console made by `open` (one per line, so that a
/// console locked per line keeps lines whole).
pub struct Printer<W: Write, F: FnMut() -> W>(pub F);

impl<W: Write, F: FnMut() -> W> crate::Sink for Printer<W, F> {
    fn logged(&mut self, cpu: u32, serial: u64, ticks: u64, event: &dyn Event) {
        let _ = logged(&mut (self.0)(), cpu, serial, ticks, event);
    }
    fn lost(&mut self, cpu: u32, serial: u64, name: &str) {
        let _ = lost(&mut (self.0)(), cpu, serial, name);
    }
    fn overwritten(&mut self, cpu: u32, serial: u64) {
        let _ = overwritten(&mut (self.0)(), cpu, serial);
    }
}
