//! The KLog engine over hostile memory: the input is the bytes of memory from `fixed::BASE` on
//! (KLogs, DebugFlags, klogLevel, klogClockHz, klogProcessors, klogFlags, KLogDescriptions,
//! KLogBuffer, then strings), anything past it
//! unreadable. Every ring is read, merged in both orders (one record at a time and in batches,
//! which must agree), summarised and salvaged, and every
//! record rendered in both text styles and as JSON; every ring is read again as the timeline's
//! events, each read through the shipped schemata (strings they name read from the same memory)
//! and rendered as its text line and its JSON. A panic, or output without bound, is a bug.
//!
//! Seeds: `seeds klog` relocates the corpus dumps' rings to these addresses.

#![no_main]

use kcrash::event_view::{write_line, EventView, RingPrefix};
use kcrash::klog::render::{Clock, Printer, Style};
use kcrash::klog::ring::Order;
use kcrash::klog::{Klog, Selection};
use kcrash::paint::Paint;
use kcrash::schemata::{Catalog, Reader};
use kcrash_fuzz::{fixed, Windows};
use kcrash_plugin::{Log, Memory};
use kcrash_schema::Resolve;
use libfuzzer_sys::fuzz_target;

/// The fuzzed memory, with no symbols.
struct Bare<'a>(&'a Windows<'a>);

impl Resolve for Bare<'_> {
    fn symbol_at(&self, _: u64) -> Option<(String, u64)> {
        None
    }

    fn memory(&self) -> &dyn Memory {
        self.0
    }
}

fuzz_target!(|data: &[u8]| {
    let mem = Windows::at(fixed::BASE, data);
    let klog = Klog::read(&mem, fixed::layout());
    let names = klog.names();
    let mut printer = Printer::new(
        &mem,
        names.clone(),
        Clock {
            hz: klog.clock_rate.hz(),
        },
    )
    .with_descriptions(&klog);
    let mut line = Vec::new();
    let mut render = |rec: &kcrash::klog::ring::Record, line: &mut Vec<u8>| {
        for style in [Style::Full, Style::Terse] {
            line.clear();
            printer.text(line, rec, style);
        }
        line.clear();
        let ring = names.get(rec.ring).map_or("", String::as_str);
        printer.json(line, rec, ring);
    };
    for order in [Order::NewestFirst, Order::OldestFirst] {
        let selections = [
            Selection::All,
            Selection::Subsystem(0),
            Selection::Subsystem(1),
        ];
        for sel in selections {
            // Each ring holds at most RING_RECORDS; more out of one selection is a bug.
            let mut n = 0;
            let mut seen = Vec::new();
            for rec in klog.records(&mem, sel, order) {
                n += 1;
                assert!(n <= 2 * fixed::RECORDS, "more records than slots");
                render(&rec, &mut line);
                seen.push((rec.ring, rec.seq));
            }
            // Batches, as klog fills them, hold the same records in the same order.
            let mut merge = klog.records(&mem, sel, order);
            let mut batched = Vec::new();
            loop {
                let mut batch = Vec::new();
                merge.fill(&mut batch, 7);
                batched.extend(batch.iter().map(|r| (r.ring, r.seq)));
                if batch.len() < 7 {
                    break;
                }
            }
            assert_eq!(batched, seen, "batches differ from the merge's records");
            // One processor's rings: never more than all of them.
            let one = klog.records_from(&mem, sel, order, &[], Some(1)).count() as u64;
            assert!(
                one <= n,
                "one processor's records outnumber every processor's"
            );
        }
        let salvage = klog.salvage(&mem, order);
        for rec in salvage.groups.iter().flatten() {
            render(rec, &mut line);
        }
    }
    klog.summary(&mem);
    // The KLog as every decoder's log: the rings' table, and each ring's events.
    let log: &dyn Log = &klog;
    let catalog = Catalog::shipped();
    let bare = Bare(&mem);
    let schemata = Reader {
        set: &catalog.set,
        resolve: &bare,
    };
    for ring in 0..log.rings().len() {
        let prefix = RingPrefix::new(log, ring, true);
        for order in [Order::NewestFirst, Order::OldestFirst] {
            let mut n = 0;
            for event in log.events(&mem, ring, order) {
                n += 1;
                assert!(n <= fixed::RECORDS, "more events than slots");
                let schema = schemata.apply(log, &event);
                line.clear();
                write_line(
                    &mut line,
                    &prefix,
                    log.clock(),
                    &event,
                    schema.as_ref(),
                    Paint::default(),
                    |_| true,
                );
                line.clear();
                let view = EventView::new(log, &event, schema.as_ref());
                kcrash::report::json_line(&view, &mut line).unwrap();
            }
        }
    }
    for spec in ["0", "1", "3", "4", "vm", "DBG_NONE", ""] {
        let _ = klog.select(spec);
    }
});
