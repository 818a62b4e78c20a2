//! kcrash's decoder of QNX Neutrino's kernel trace buffers, the log `traceinfo` prints and
//! `tracelogger` saves: the ring of linked `tracebuf`s the instrumented microkernel fills with
//! 16-byte `traceevent`s, simple events and combine events whose parts are interleaved with
//! other events. See README.md for the layout and what is checked.

mod codes;
pub mod import;
mod ring;
mod stream;

use kcrash_plugin::{Clock, Context, Decoder, Event, Found, Log, Memory, Missing, Order, RingInfo};

pub use ring::MAX_EVENTS;
use ring::{Ring, Syspage, SYSPAGE_SYMBOL};
use stream::Span;

/// The log's kind, as its events and schemata name it.
pub const KIND: &str = "QNX trace";

/// The decoder: `tracelog`.
pub struct Qnx;

/// The decoder kcrash is built with.
pub static DECODER: Qnx = Qnx;

impl Decoder for Qnx {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn command(&self) -> &'static str {
        "tracelog"
    }

    fn summary(&self) -> &'static str {
        "QNX Neutrino's kernel trace buffers, as traceinfo/tracelog show them: the ring of tracebufs, simple and combine events"
    }

    fn schemata(&self) -> &'static [(&'static str, &'static str)] {
        &[(
            "plugins/qnx/schemas/qnx-writer.fmt",
            include_str!("../schemas/qnx-writer.fmt"),
        )]
    }

    fn find<'d>(&self, cx: &dyn Context<'d>) -> Result<Found<'d>, Missing> {
        let sym = cx.symbol(SYSPAGE_SYMBOL).ok_or_else(|| {
            Missing::Absent(format!(
                "no {SYSPAGE_SYMBOL} symbol: not an instrumented QNX kernel"
            ))
        })?;
        let log = TraceLog::find(cx.memory(), sym.address).map_err(Missing::Refused)?;
        Ok(Found {
            log: Box::new(log),
            translations: None,
        })
    }
}

/// The trace ring found in a dump.
#[derive(Debug)]
pub struct TraceLog {
    elements: u32,
    /// The buffers that hold events, oldest first.
    spans: Vec<Span>,
    /// Why the ring was not walked whole, when it was not.
    broken: Option<String>,
    rings: Vec<RingInfo>,
    clock: Clock,
    notes: Vec<String>,
}

impl TraceLog {
    /// Reads the syspage entry at `addr` and walks the ring it points to.
    pub fn find(mem: &dyn Memory, addr: u64) -> Result<TraceLog, String> {
        let syspage = Syspage::read(mem, addr)?;
        let ring = Ring::walk(mem, &syspage)?;
        let mut notes = vec![format!(
            "{SYSPAGE_SYMBOL} at {addr:#x}: head tracebuf {:#x}, {} traceevents a buffer, {} buffers reached",
            syspage.head,
            syspage.elements,
            ring.buffers.len()
        )];
        notes.extend(ring.notes.iter().cloned());
        if let Some(why) = &ring.broken {
            notes.push(format!("the ring is broken: {why}"));
        }
        let spans = stream::spans(&ring.buffers, syspage.elements, &mut notes);
        let info = stream::ring_info(&syspage, &ring, &spans);
        let clock = match syspage.cycles_per_sec {
            0 => Clock::Unknown(format!(
                "{SYSPAGE_SYMBOL}.cycles_per_sec at {:#x} is 0",
                addr.wrapping_add(8)
            )),
            hz => Clock::Hz(hz),
        };
        Ok(TraceLog {
            elements: syspage.elements,
            spans,
            broken: ring.broken,
            rings: vec![info],
            clock,
            notes,
        })
    }
}

impl Log for TraceLog {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn rings(&self) -> &[RingInfo] {
        &self.rings
    }

    fn clock(&self) -> &Clock {
        &self.clock
    }

    fn notes(&self) -> &[String] {
        &self.notes
    }

    fn events<'a>(
        &'a self,
        mem: &'a (dyn Memory + Sync),
        ring: usize,
        order: Order,
    ) -> Box<dyn Iterator<Item = Event<'a>> + Send + 'a> {
        if ring != 0 {
            return Box::new(std::iter::empty());
        }
        // A combine event sits at its begin part but is whole only at its end part, after
        // events that follow it: the ring, bounded by ring::MAX_EVENTS when found, is decoded
        // in one pass here.
        Box::new(stream::decode(self, mem, order).into_iter())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcrash_plugin::{Damage, Runs, Value};

    const SYSPAGE: u64 = 0x1000;
    const BUFS: u64 = 0x10_0000;
    const ELEMENTS: u32 = 8;
    const BUF_BYTES: u64 = ring::HEADER_BYTES + ELEMENTS as u64 * 16;

    fn header(part: u32, cpu: u32, class: u32, event: u32) -> u32 {
        (part << 30) | (cpu << 24) | (class << 10) | event
    }

    /// A traceevent: control bits, cpu, class, event, timeoff, data.
    fn ev(part: u32, cpu: u32, class: u32, event: u32, t: u32, d: [u32; 2]) -> [u32; 4] {
        [header(part, cpu, class, event), t, d[0], d[1]]
    }

    fn time(msb: u32, lsb: u32) -> [u32; 4] {
        ev(0, 0, 1, 1, lsb, [msb, lsb])
    }

    fn simple(cpu: u32, t: u32, pid: u32) -> [u32; 4] {
        ev(0, cpu, 4, 5, t, [pid, 1])
    }

    /// A ring of buffers, each (seq_buff_num, events), linked in order; `next[i]` overrides
    /// buffer i's next.
    fn memory(bufs: &[(u32, Vec<[u32; 4]>)], next: &[(usize, u64)]) -> Runs {
        let mut sys = Vec::new();
        sys.extend_from_slice(&BUFS.to_le_bytes());
        sys.extend_from_slice(&1_000_000u64.to_le_bytes());
        sys.extend_from_slice(&ELEMENTS.to_le_bytes());
        sys.extend_from_slice(&0u32.to_le_bytes());
        let mut ring = Vec::new();
        for (i, (seq, events)) in bufs.iter().enumerate() {
            let addr = BUFS + i as u64 * BUF_BYTES;
            let mut nxt = BUFS + ((i + 1) % bufs.len()) as u64 * BUF_BYTES;
            if let Some((_, n)) = next.iter().find(|(j, _)| *j == i) {
                nxt = *n;
            }
            let mut b = Vec::new();
            b.extend_from_slice(&addr.to_le_bytes());
            b.extend_from_slice(&nxt.to_le_bytes());
            for w in [0, events.len() as u32, *seq, (i as u32) << 13, 0, 0] {
                b.extend_from_slice(&w.to_le_bytes());
            }
            let data = addr + ring::HEADER_BYTES;
            b.extend_from_slice(&data.to_le_bytes());
            b.extend_from_slice(&(data + events.len() as u64 * 16).to_le_bytes());
            b.resize(ring::HEADER_BYTES as usize, 0);
            for e in events {
                e.iter().for_each(|w| b.extend_from_slice(&w.to_le_bytes()));
            }
            b.resize(BUF_BYTES as usize, 0);
            ring.extend_from_slice(&b);
        }
        Runs(vec![(SYSPAGE, sys), (BUFS, ring)])
    }

    fn events<'a>(log: &'a TraceLog, mem: &'a Runs, order: Order) -> Vec<Event<'a>> {
        log.events(mem, 0, order).collect()
    }

    fn full(seq: u32, first_pid: u32) -> (u32, Vec<[u32; 4]>) {
        let mut e = vec![time(0, seq * 100)];
        e.extend((1..ELEMENTS).map(|i| simple(0, seq * 100 + i, first_pid + i)));
        (seq, e)
    }

    #[test]
    fn a_wrapped_ring_reads_oldest_buffer_first_either_way() {
        let mem = memory(&[full(4, 40), full(5, 50), full(2, 20), full(3, 30)], &[]);
        let log = TraceLog::find(&mem, SYSPAGE).unwrap();
        let got = events(&log, &mem, Order::OldestFirst);
        assert_eq!(got.len(), 32);
        assert_eq!(got[0].seq, 16);
        assert_eq!(got[0].name, "CONTROL/TIME");
        assert_eq!(got[1].name, "PROC_THREAD/THRUNNING");
        assert_eq!(got[1].fields[0].value, Value::Unsigned(21));
        assert!(got.windows(2).all(|w| w[0].seq < w[1].seq));
        assert!(got.iter().all(|e| e.damage.is_empty()));
        let mut back = events(&log, &mem, Order::NewestFirst);
        back.reverse();
        assert_eq!(back, got);
        let info = &log.rings()[0];
        assert_eq!(info.capacity, Ok(32));
        assert_eq!(info.written, Ok(48));
        assert_eq!(info.overwritten, Ok(16));
        assert!(info.lost.is_err());
        assert_eq!(log.clock(), &Clock::Hz(1_000_000));
    }

    #[test]
    fn time_takes_its_upper_half_from_control_time_events() {
        let mem = memory(
            &[
                (
                    0,
                    vec![time(7, 5), simple(0, 6, 1), time(8, 1), simple(1, 2, 2)],
                ),
                (0, vec![]),
            ],
            &[],
        );
        let log = TraceLog::find(&mem, SYSPAGE).unwrap();
        let got = events(&log, &mem, Order::OldestFirst);
        let ticks: Vec<u64> = got.iter().map(|e| e.ticks).collect();
        assert_eq!(ticks, [7 << 32 | 5, 7 << 32 | 6, 8 << 32 | 1, 8 << 32 | 2]);
        assert_eq!(got[3].processor, Some(1));
        // Without a time event first, the upper half is unknown and said so.
        let mem = memory(&[(0, vec![simple(0, 6, 1)])], &[]);
        let log = TraceLog::find(&mem, SYSPAGE).unwrap();
        let got = events(&log, &mem, Order::OldestFirst);
        assert!(
            matches!(&got[0].damage[0], Damage::Inconsistent(w) if w.contains("upper 32 bits"))
        );
    }

    #[test]
    fn an_unknown_time_is_not_the_events_own_and_keeps_the_stream_in_order() {
        // Buffer 0 starts without a time event; buffer 1 has none at all.
        let mem = memory(
            &[
                (0, vec![simple(0, 4, 1), time(7, 5), simple(0, 6, 2)]),
                (1, vec![simple(0, 3, 3), simple(1, 9, 4)]),
            ],
            &[],
        );
        let log = TraceLog::find(&mem, SYSPAGE).unwrap();
        let got = events(&log, &mem, Order::OldestFirst);
        let ticks: Vec<u64> = got.iter().map(|e| e.ticks).collect();
        let known = 7 << 32;
        assert_eq!(
            ticks,
            [known | 5, known | 5, known | 6, known | 6, known | 6]
        );
        let own: Vec<bool> = got.iter().map(|e| e.own_time).collect();
        assert_eq!(own, [false, true, true, false, false]);
        for e in got.iter().filter(|e| !e.own_time) {
            let said = format!("{:?}", e.damage);
            assert!(said.contains("its time is unknown"), "{said}");
            assert!(!said.contains("taken as 0"), "{said}");
        }
        let mut back = events(&log, &mem, Order::NewestFirst);
        back.reverse();
        assert_eq!(back, got);
        // No time event anywhere: 0, never the event's own.
        let mem = memory(&[(0, vec![simple(0, 6, 1), simple(0, 7, 2)])], &[]);
        let log = TraceLog::find(&mem, SYSPAGE).unwrap();
        let got = events(&log, &mem, Order::OldestFirst);
        assert!(got.iter().all(|e| e.ticks == 0 && !e.own_time));
    }

    #[test]
    fn a_buffer_that_would_end_beyond_the_address_space_is_refused() {
        let high = u64::MAX - 0xff;
        let header = |next: u64| {
            let mut b = Vec::new();
            b.extend_from_slice(&high.to_le_bytes());
            b.extend_from_slice(&next.to_le_bytes());
            for w in [0u32, 1, 1, 1 << 13, 0, 0] {
                b.extend_from_slice(&w.to_le_bytes());
            }
            b.extend_from_slice(&high.wrapping_add(ring::HEADER_BYTES).to_le_bytes());
            b.extend_from_slice(&high.wrapping_add(ring::HEADER_BYTES + 16).to_le_bytes());
            b
        };
        // Buffer 0's next leads to the high buffer: the ring is broken there, buffer 0 read.
        let mut mem = memory(&[full(0, 0)], &[(0, high)]);
        mem.0.push((high, header(BUFS)));
        let log = TraceLog::find(&mem, SYSPAGE).unwrap();
        let note = format!("{high:#x}");
        assert!(
            log.notes()
                .iter()
                .any(|n| n.contains(&note) && n.contains("beyond the address space")),
            "{:?}",
            log.notes()
        );
        assert_eq!(events(&log, &mem, Order::OldestFirst).len(), 8);
        // The head itself there: the ring is refused.
        mem.0[0].1[..8].copy_from_slice(&high.to_le_bytes());
        let why = TraceLog::find(&mem, SYSPAGE).unwrap_err();
        assert!(why.contains(&note) && why.contains("beyond"), "{why}");
    }

    #[test]
    fn interleaved_combine_events_are_reassembled_at_their_begin() {
        // PROCCREATE_NAME "init" on cpu 0 and a BUFFER on cpu 1, parts interleaved.
        let name = u32::from_le_bytes(*b"init");
        let e = vec![
            time(0, 1),
            ev(1, 0, 4, 7, 2, [1, 7]),
            ev(1, 1, 5, 1, 3, [3, 0x0302_0100]),
            simple(0, 4, 9),
            ev(2, 0, 4, 7, 2, [name, 0]),
            ev(3, 1, 5, 1, 3, [0, 0]),
            ev(3, 0, 4, 7, 2, [0, 0]),
        ];
        let mem = memory(&[(0, e)], &[]);
        let log = TraceLog::find(&mem, SYSPAGE).unwrap();
        let got = events(&log, &mem, Order::OldestFirst);
        let names: Vec<&str> = got.iter().map(|e| &*e.name).collect();
        assert_eq!(
            names,
            [
                "CONTROL/TIME",
                "PROC_THREAD/PROCCREATE_NAME",
                "CONTAINER/BUFFER",
                "PROC_THREAD/THRUNNING"
            ]
        );
        assert_eq!(got[1].fields[2].value, Value::Text(b"init".to_vec()));
        assert_eq!(got[1].seq, 1);
        assert_eq!(got[2].fields[1].value, Value::Bytes(vec![0, 1, 2]));
        assert!(got.iter().all(|e| e.damage.is_empty()), "{got:?}");
        let mut back = events(&log, &mem, Order::NewestFirst);
        back.reverse();
        assert_eq!(back, got);
    }

    #[test]
    fn unfinished_combines_and_stray_parts_are_marked_not_dropped() {
        let e = vec![
            time(0, 1),
            ev(3, 0, 4, 7, 0, [0, 0]),
            ev(2, 1, 5, 1, 1, [5, 6]),
            ev(1, 0, 4, 7, 9, [1, 7]),
            ev(2, 0, 4, 7, 9, [0x74696e69, 0]),
        ];
        let mem = memory(&[(0, e)], &[]);
        let log = TraceLog::find(&mem, SYSPAGE).unwrap();
        for order in [Order::OldestFirst, Order::NewestFirst] {
            let got = events(&log, &mem, order);
            assert_eq!(got.len(), 4);
            let incomplete =
                |e: &Event| e.damage.iter().any(|d| matches!(d, Damage::Incomplete(_)));
            assert_eq!(got.iter().filter(|e| incomplete(e)).count(), 3);
            let begun = got.iter().find(|e| e.seq == 3).unwrap();
            assert_eq!(
                begun.fields[0].value,
                Value::Bytes(vec![
                    1, 0, 0, 0, 7, 0, 0, 0, b'i', b'n', b'i', b't', 0, 0, 0, 0
                ])
            );
            assert!(format!("{:?}", begun.damage).contains("being logged at the crash"));
        }
    }

    #[test]
    fn a_next_into_a_cycle_or_unmapped_memory_is_reported_and_the_rest_read() {
        let bufs = [full(0, 0), full(1, 10), full(2, 20), (3, vec![time(0, 1)])];
        for (next, what) in [(BUFS + BUF_BYTES, "cycle"), (0xdead_0000, "cannot be read")] {
            let mem = memory(&bufs, &[(2, next)]);
            let log = TraceLog::find(&mem, SYSPAGE).unwrap();
            assert!(
                log.notes().iter().any(|n| n.contains(what)),
                "{:?}",
                log.notes()
            );
            assert!(log.rings()[0].capacity.is_err());
            assert!(log.rings()[0].written.is_err());
            assert_eq!(events(&log, &mem, Order::OldestFirst).len(), 24);
        }
    }

    #[test]
    fn hostile_headers_are_refused_or_noted() {
        let mut mem = memory(&[full(0, 0), full(1, 10)], &[]);
        // num_events of buffer 1 beyond the buffer.
        mem.0[1].1[BUF_BYTES as usize + 20..][..4].copy_from_slice(&999u32.to_le_bytes());
        let log = TraceLog::find(&mem, SYSPAGE).unwrap();
        assert!(log.notes().iter().any(|n| n.contains("num_events is 999")));
        assert_eq!(events(&log, &mem, Order::NewestFirst).len(), 8);
        // A head that is no trace buffer, and a syspage that points nowhere.
        mem.0[1].1[..8].copy_from_slice(&5u64.to_le_bytes());
        assert!(TraceLog::find(&mem, SYSPAGE)
            .unwrap_err()
            .contains("baseaddr"));
        assert!(TraceLog::find(&Runs(Vec::new()), SYSPAGE).is_err());
    }

    #[test]
    fn unreadable_traceevents_are_one_event_a_run() {
        let mut mem = memory(&[full(0, 0)], &[]);
        mem.0[1].1.truncate(ring::HEADER_BYTES as usize + 2 * 16);
        let log = TraceLog::find(&mem, SYSPAGE).unwrap();
        let got = events(&log, &mem, Order::OldestFirst);
        assert_eq!(got.len(), 3);
        assert!(
            matches!(&got[2].damage[0], Damage::Unreadable { reason, .. }
            if reason.contains("and the 5 traceevents after it"))
        );
    }

    #[test]
    fn many_open_combine_events_cost_one_pass() {
        // 4096 begin parts of distinct time stamps, no end: each incomplete, none lost.
        let elements = 4096u32;
        let mut sys = Vec::new();
        sys.extend_from_slice(&BUFS.to_le_bytes());
        sys.extend_from_slice(&0u64.to_le_bytes());
        sys.extend_from_slice(&elements.to_le_bytes());
        sys.extend_from_slice(&0u32.to_le_bytes());
        let data = BUFS + ring::HEADER_BYTES;
        let mut b = Vec::new();
        for w in [BUFS, BUFS] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        for w in [0, elements, 0, 0, 0, 0] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&data.to_le_bytes());
        b.extend_from_slice(&(data + u64::from(elements) * 16).to_le_bytes());
        b.resize(ring::HEADER_BYTES as usize, 0);
        for t in 0..elements {
            ev(1, 0, 4, 7, t, [1, 2])
                .iter()
                .for_each(|w| b.extend_from_slice(&w.to_le_bytes()));
        }
        let mem = Runs(vec![(SYSPAGE, sys), (BUFS, b)]);
        let log = TraceLog::find(&mem, SYSPAGE).unwrap();
        assert!(matches!(log.clock(), Clock::Unknown(_)));
        let got = events(&log, &mem, Order::NewestFirst);
        assert_eq!(got.len(), elements as usize);
        assert!(got
            .iter()
            .all(|e| e.damage.iter().any(|d| matches!(d, Damage::Incomplete(_)))));
    }
}
