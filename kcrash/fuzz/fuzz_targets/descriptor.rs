//! The KLog descriptor over hostile bytes: the input is a flag byte, then memory from
//! `fixed::BASE` on, the descriptor at its start; an odd flag reseals the descriptor's checksum
//! first, so that mutations reach the checks behind it. It is parsed by klog-runtime's reader and by kcrash's (which also
//! fetches its names and checks the record layout); when accepted, its layout is used to read
//! every ring's control block and the first records of each. A panic, an allocation sized by a
//! field, or a read without end is a bug.
//!
//! Seeds: `seeds descriptor` (each corpus dump's descriptor and the memory after it).

#![no_main]

use kcrash::klog::descriptor;
use kcrash::klog::ring::Order;
use kcrash::klog::{Klog, Selection};
use kcrash::memory::Memory;
use kcrash_fuzz::{fixed, reseal_descriptors, Windows};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flag, rest)) = data.split_first() else {
        return;
    };
    let mut memory = rest.to_vec();
    if flag & 1 == 1 {
        reseal_descriptors(&mut memory);
    }
    let _ = klog_runtime::descriptor::parse(&memory);
    let mem = Windows::at(fixed::BASE, &memory);
    let read = |at, buf: &mut [u8]| mem.read(at, buf).map_err(|e| e.to_string());
    let Ok(described) = descriptor::read(fixed::BASE, &read) else {
        return;
    };
    let klog = Klog::read(&mem, descriptor::layout(&described));
    let _ = klog.names();
    for rec in klog
        .records(&mem, Selection::All, Order::NewestFirst)
        .take(256)
    {
        let _ = rec.clock();
    }
});
