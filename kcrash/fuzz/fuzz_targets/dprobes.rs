//! The DProbes decoder over hostile memory: the input is the bytes of memory from `BASE` on,
//! `dprobes_trace` first; its buffers' data and templates are wherever their pointers say, read
//! from the input when they point into it and unreadable otherwise. The trace is checked, every
//! buffer's records are read in both orders and every field and message made. A panic, a walk
//! without end, or more events than a buffer can hold, is a bug.
//!
//! Seeds: `seeds dprobes` moves each DProbes corpus dump's trace, first buffer and templates here.

#![no_main]

use kcrash::memory::Memory;
use kcrash_dprobes::DpLog;
use kcrash_fuzz::Windows;
use kcrash_plugin::{Log, Order};
use libfuzzer_sys::fuzz_target;

/// Where the input is, and `dprobes_trace` with it.
const BASE: u64 = 0x10000;
/// The smallest record the decoder accepts, in bytes.
const MIN_RECORD: u64 = 32;

fuzz_target!(|data: &[u8]| {
    let mem = Windows::at(BASE, data);
    let Ok(log) = DpLog::read(&mem as &dyn Memory, BASE) else {
        return;
    };
    for (ring, info) in log.rings().iter().enumerate() {
        let most = info.capacity.clone().unwrap_or(0) / MIN_RECORD + 1;
        for order in [Order::NewestFirst, Order::OldestFirst] {
            let n = log.events(&mem, ring, order).count() as u64;
            assert!(
                n <= most,
                "{n} events from a buffer of {:?} bytes",
                info.capacity
            );
        }
    }
    let _ = (log.notes(), log.clock());
});
