//! The QNX trace ring scenarios (`klog.scenario=qnx-…`, from qnx-writer): time stamps from
//! the TSC at the measured rate, oracle lines on the serial console.

use crate::platform;

struct Console;

impl qnx_writer::Sink for Console {
    fn line(&self, line: core::fmt::Arguments<'_>) {
        kprintln!("{line}");
    }
}

/// A virtual address no page table maps (PDPT_HIGH[511] is not present).
const UNMAPPED: u64 = 0xffff_ffff_c000_1000;

/// Runs QNX scenario `name` and panics with its message; returns if there is no such scenario.
pub fn run(name: &str, clock_hz: u64) {
    let tracer = qnx_writer::Tracer {
        now: platform::rdtsc,
        sink: &Console,
    };
    let env = qnx_writer::scenarios::Env {
        cycles_per_sec: clock_hz,
        unmapped: UNMAPPED,
    };
    if let Some(message) = qnx_writer::scenarios::run(name, &tracer, &env) {
        panic!("scenario {name}: {message}");
    }
}
