//! The QNX trace ring scenarios (`hosted qnx-…`, from qnx-writer): time stamps from
//! CLOCK_MONOTONIC in nanoseconds, oracle lines on stdout. Each event names the processor
//! the scenario has it play; the scenarios run on the main thread, so that the interleaving
//! of processors' events and combine parts is the one they choose.

use crate::platform;

struct Stdout;

impl qnx_writer::Sink for Stdout {
    fn line(&self, line: std::fmt::Arguments<'_>) {
        println!("{line}");
    }
}

/// A page no mapping of this process covers: the first.
const UNMAPPED: u64 = 0x10;

/// Runs QNX scenario `name`; what happened, for the crash message, or None if there is no
/// such scenario.
pub fn run(name: &str) -> Option<&'static str> {
    let tracer = qnx_writer::Tracer {
        now: platform::monotonic_ns,
        sink: &Stdout,
    };
    let env = qnx_writer::scenarios::Env {
        cycles_per_sec: platform::CLOCK_HZ,
        unmapped: UNMAPPED,
    };
    qnx_writer::scenarios::run(name, &tracer, &env)
}
