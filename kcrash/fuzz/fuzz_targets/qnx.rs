//! The QNX trace decoder over hostile memory: the input is the bytes of memory from
//! `fixed::BASE` on, the syspage's trace entry first, anything past it unreadable. The ring is
//! found, summarised, and every event decoded in both orders. A panic, a hang, orders that
//! disagree, or more events than the decoder's bound on traceevents is a bug.
//!
//! Seeds: `seeds qnx` relocates the corpus dumps' rings to `fixed::BASE`.

#![no_main]

use kcrash_fuzz::{fixed, Windows};
use kcrash_plugin::{Log, Order};
use kcrash_qnx::{TraceLog, MAX_EVENTS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mem = Windows::at(fixed::BASE, data);
    let Ok(log) = TraceLog::find(&mem, fixed::BASE) else {
        return;
    };
    let _ = (log.rings(), log.clock(), log.notes());
    let newest = log.events(&mem, 0, Order::NewestFirst).count();
    let oldest = log.events(&mem, 0, Order::OldestFirst).count();
    assert_eq!(newest, oldest, "the two orders give different events");
    assert!(
        newest as u64 <= MAX_EVENTS,
        "{newest} events: more than the ring's bound"
    );
});
