//! The QNX trace decoder over hostile memory: the input is the bytes of memory from
//! `fixed::BASE` on, the syspage's trace entry first, anything past it unreadable. The ring is
//! found, summarised, and every event decoded in both orders. A panic, a hang, or more events
//! than the ring has traceevents is a bug.
//!
//! Seeds: `seeds qnx` relocates the corpus dumps' rings to `fixed::BASE`.

#![no_main]

use kcrash_fuzz::{fixed, Windows};
use kcrash_plugin::{Log, Order};
use kcrash_qnx::TraceLog;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mem = Windows::at(fixed::BASE, data);
    let Ok(log) = TraceLog::find(&mem, fixed::BASE) else {
        return;
    };
    let _ = (log.rings(), log.clock(), log.notes());
    // Every event takes at least one traceevent of 16 bytes of the input.
    let most = data.len() / 16 + 1;
    for order in [Order::NewestFirst, Order::OldestFirst] {
        let n = log.events(&mem, 0, order).count();
        assert!(n <= most, "{n} events from {} bytes", data.len());
    }
});
