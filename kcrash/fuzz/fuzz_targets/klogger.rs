//! The Klogger decoder over hostile memory: the input is the bytes of memory from `fixed::BASE`
//! on, the log `klogger` at its start (its schema, buffers and records wherever its pointers
//! say), anything past it unreadable. The log is read and checked, every ring's events are
//! streamed in both orders, and the input is also parsed as a schema. A panic, an allocation
//! sized by a field, or more events than the memory can hold is a bug.
//!
//! Seeds: `seeds klogger` (the test kernels' writer, relocated to these addresses).

#![no_main]

use kcrash_fuzz::{fixed, Windows};
use kcrash_klogger::{KloggerLog, Schema};
use kcrash_plugin::{Log, Order};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Schema::parse(&String::from_utf8_lossy(data));
    let mem = Windows::at(fixed::BASE, data);
    let Ok(log) = KloggerLog::read(&mem, fixed::BASE, 0) else {
        return;
    };
    for ring in 0..log.rings().len() {
        for order in [Order::NewestFirst, Order::OldestFirst] {
            // A record is at least 8 bytes of the input, and a damaged one ends the ring.
            let most = data.len() / 8 + 1;
            let n = log.events(&mem, ring, order).count();
            assert!(n <= most, "{n} events from {} bytes", data.len());
        }
    }
});
