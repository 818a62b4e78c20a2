//! Finding the KLog with no image: the input's first 8 bytes are a physical address (its low
//! bit, when set, reseals every descriptor's checksum so that mutations reach the checks behind
//! it), the rest the memory there, made into a kernel ELF core with no notes. A session opened on it with no
//! image scans the memory for the descriptor, checks every candidate, places the chosen one
//! (its implied linear map), reads the rings and renders their first records; `klog --salvage`
//! with no layout scans the same memory for records. A panic, or a scan without end, is a bug.
//!
//! Seeds: `seeds scan` (the memory around each corpus kernel dump's descriptor).

#![no_main]

use kcrash::klog::render::{Clock, Printer, Style};
use kcrash::klog::ring::Order;
use kcrash::klog::{salvage, Selection};
use kcrash::session::Session;
use kcrash_fuzz::{core_with_memory, reseal_descriptors};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (Some(addr), rest) = (data.get(..8), data.get(8..).unwrap_or(&[])) else {
        return;
    };
    let word = u64::from_le_bytes(addr.try_into().unwrap_or_default());
    let paddr = word & !0xfff;
    let mut memory = rest.to_vec();
    if word & 1 == 1 {
        reseal_descriptors(&mut memory);
    }
    let Ok(dump) = dumpfmt::Dump::from_bytes("fuzz-input", core_with_memory(paddr, &memory)) else {
        return;
    };
    let Ok(session) = Session::open(&dump, None) else {
        return;
    };
    if let Ok(klog) = session.klog() {
        let mut printer = Printer::new(
            &session,
            klog.names(),
            Clock {
                hz: klog.clock_rate.hz(),
            },
        );
        let mut line = Vec::new();
        for rec in klog
            .records(&session, Selection::All, Order::NewestFirst)
            .take(256)
        {
            line.clear();
            printer.text(&mut line, &rec, Style::Full);
        }
    }
    let found = salvage::anywhere(&dump, Order::OldestFirst);
    assert!(found.groups.iter().map(Vec::len).sum::<usize>() <= rest.len() / 64);
});
