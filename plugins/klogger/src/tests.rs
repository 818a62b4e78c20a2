//! The decoder over memory the test kernels' writer really wrote (copied into `Runs`), and over
//! that memory damaged.

use super::*;
use kcrash_plugin::Runs;
use klogger_writer::events::{ProcessExists, SchedIn, SchedOut, TryToWakeup, Unknown};
use klogger_writer::{Buffer, Log as Writer, Sink, OVERWRITE};

/// What the writer told its sink, as (cpu, serial) lists.
#[derive(Default)]
struct Told {
    logged: Vec<(u32, u64, String)>,
    lost: Vec<(u32, u64)>,
    overwritten: Vec<(u32, u64)>,
}

impl Sink for Told {
    fn logged(&mut self, cpu: u32, serial: u64, _ticks: u64, event: &dyn klogger_writer::Event) {
        self.logged.push((cpu, serial, event.name().to_string()));
    }
    fn lost(&mut self, cpu: u32, serial: u64, _name: &str) {
        self.lost.push((cpu, serial));
    }
    fn overwritten(&mut self, cpu: u32, serial: u64) {
        self.overwritten.push((cpu, serial));
    }
}

/// A writer with two CPUs' buffers: cpu0 overwrites when full, cpu1 drops.
struct Kernel {
    log: Box<Writer>,
    buffers: [Box<Buffer<512>>; 2],
    told: Told,
}

impl Kernel {
    fn new() -> Kernel {
        let k = Kernel {
            log: Box::new(Writer::new()),
            buffers: [Box::new(Buffer::new()), Box::new(Buffer::new())],
            told: Told::default(),
        };
        let (a, b) = (k.buffers[0].region(), k.buffers[1].region());
        k.log
            .enable(1_000_000_000, &[(a.0, a.1, OVERWRITE), (b.0, b.1, 0)]);
        k
    }

    fn log(&mut self, cpu: u32, ticks: u64, event: &dyn klogger_writer::Event) {
        self.log.log(cpu, ticks, event, &mut self.told);
    }

    fn addr(&self) -> u64 {
        &*self.log as *const Writer as u64
    }

    /// The log, its buffers and its schema as a dump would hold them.
    fn memory(&self) -> Runs {
        let copy = |addr: u64, len: usize| {
            // SAFETY: the writer's structures and buffers, not written while copied.
            (
                addr,
                unsafe { std::slice::from_raw_parts(addr as *const u8, len) }.to_vec(),
            )
        };
        let mut runs = vec![copy(self.addr(), std::mem::size_of::<Writer>())];
        for b in &self.buffers {
            let (addr, len) = b.region();
            runs.push(copy(addr, len as usize));
        }
        runs.push(copy(
            klogger_writer::SCHEMA.as_ptr() as u64,
            klogger_writer::SCHEMA.len(),
        ));
        Runs(runs)
    }
}

fn read(mem: &Runs, addr: u64) -> KloggerLog {
    let size = std::mem::size_of::<Writer>() as u64;
    KloggerLog::read(mem, addr, size).unwrap_or_else(|e| panic!("{e}"))
}

fn events<'a>(log: &'a KloggerLog, mem: &'a Runs, ring: usize, order: Order) -> Vec<Event<'a>> {
    log.events(mem, ring, order).collect()
}

#[test]
fn every_event_typed_in_both_orders() {
    let mut k = Kernel::new();
    k.log(0, 10, &SchedOut::new(17, 1 << 40));
    k.log(0, 11, &SchedIn::new(18, 1, -3));
    k.log(1, 12, &TryToWakeup::new(19, -1, 0x8001));
    k.log(1, 13, &ProcessExists::new(1, 5, "init"));
    k.log(
        1,
        14,
        &Unknown {
            type_id: 99,
            payload: &[1, 2, 3],
        },
    );
    let mem = k.memory();
    let log = read(&mem, k.addr());
    assert_eq!(log.clock(), &Clock::Hz(1_000_000_000));
    assert_eq!(log.rings().len(), 2);
    let oldest = events(&log, &mem, 0, Order::OldestFirst);
    assert_eq!(oldest.len(), 2);
    assert_eq!(oldest[0].name, "SCHEDOUT");
    assert_eq!(
        oldest[0].fields[1].value,
        Value::Unsigned(1 << 40),
        "{:?}",
        oldest[0]
    );
    assert_eq!(oldest[1].fields[0].value, Value::Signed(18));
    assert_eq!(
        oldest[1].fields[1].value,
        Value::Enum {
            value: 1,
            name: Some("FIFO".into())
        }
    );
    assert_eq!(oldest[1].fields[2].value, Value::Signed(-3));
    assert!(oldest
        .iter()
        .all(|e| e.damage.is_empty() && e.processor == Some(0)));
    let cpu1 = events(&log, &mem, 1, Order::OldestFirst);
    assert_eq!(
        cpu1[0].fields[1].value,
        Value::Enum {
            value: u64::MAX,
            name: Some("DEAD".into())
        }
    );
    assert_eq!(cpu1[0].fields[2].value, Value::Unsigned(0x8001));
    assert_eq!(cpu1[1].fields[2].value, Value::Text(b"init".to_vec()));
    assert_eq!(cpu1[2].name, "unknown");
    assert_eq!(cpu1[2].fields[0].value, Value::Unsigned(99));
    // The raw payload, padded to the record's 8 bytes by the writer's zeroes.
    assert_eq!(
        cpu1[2].fields[1].value,
        Value::Bytes(vec![1, 2, 3, 0, 0, 0, 0, 0])
    );
    let mut newest = events(&log, &mem, 1, Order::NewestFirst);
    newest.reverse();
    assert_eq!(newest, cpu1);
}

#[test]
fn overwritten_and_lost_counted() {
    let mut k = Kernel::new();
    for i in 0..40 {
        k.log(0, i, &SchedOut::new(i as i32, i));
        // cpu1 drops: the big events first, while small ones still fit.
        k.log(1, i, &SchedIn::new(i as i32, 0, 0));
        k.log(1, i, &ProcessExists::new(i as i32, 0, "x"));
    }
    let mem = k.memory();
    let log = read(&mem, k.addr());
    let ring0 = &log.rings()[0];
    assert_eq!(ring0.overwritten, Ok(k.told.overwritten.len() as u64));
    assert!(ring0.overwritten.clone().unwrap() > 0);
    assert_eq!(ring0.lost, Ok(0));
    let ring1 = &log.rings()[1];
    assert_eq!(ring1.lost, Ok(k.told.lost.len() as u64));
    assert_eq!(ring1.written, Ok(80 - k.told.lost.len() as u64));
    let held: Vec<u64> = k
        .told
        .logged
        .iter()
        .filter(|l| l.0 == 1)
        .map(|l| l.1)
        .collect();
    let cpu1 = events(&log, &mem, 1, Order::OldestFirst);
    assert_eq!(cpu1.iter().map(|e| e.seq).collect::<Vec<_>>(), held);
    // Every gap is marked on the event after it, with its size.
    for pair in cpu1.windows(2) {
        let gap = pair[1].seq - pair[0].seq - 1;
        let marked: Vec<_> = pair[1]
            .damage
            .iter()
            .filter(|d| matches!(d, Damage::LostBefore(_)))
            .collect();
        match gap {
            0 => assert!(marked.is_empty()),
            n => assert_eq!(marked, [&Damage::LostBefore(n)]),
        }
    }
    assert!(cpu1
        .iter()
        .any(|e| e.damage.contains(&Damage::LostBefore(1))));
    // The wrapped ring newest first: the same events.
    let mut newest = events(&log, &mem, 0, Order::NewestFirst);
    newest.reverse();
    assert_eq!(newest, events(&log, &mem, 0, Order::OldestFirst));
    let kept: Vec<u64> = k
        .told
        .logged
        .iter()
        .filter(|l| l.0 == 0)
        .map(|l| l.1)
        .collect();
    let survivors = &kept[k.told.overwritten.len()..];
    assert_eq!(newest.iter().map(|e| e.seq).collect::<Vec<_>>(), survivors);
}

/// Overwrites the u64 at `addr` in whichever run holds it.
fn poke(mem: &mut Runs, addr: u64, value: u64) {
    for (base, bytes) in &mut mem.0 {
        if addr >= *base && addr + 8 <= *base + bytes.len() as u64 {
            let at = (addr - *base) as usize;
            bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
            return;
        }
    }
    panic!("{addr:#x} is in no run");
}

#[test]
fn a_scribbled_head_refuses_its_ring_only() {
    let mut k = Kernel::new();
    for i in 0..5 {
        k.log(0, i, &SchedOut::new(1, i));
        k.log(1, i, &SchedOut::new(2, i));
    }
    let mut mem = k.memory();
    let cpu1 = k.addr() + LOG_BYTES + CPU_BYTES;
    poke(&mut mem, cpu1 + 16, 0xdead_beef_dead_bee8);
    let log = read(&mem, k.addr());
    let refused = log.rings()[1].refused.as_deref().unwrap();
    assert!(
        refused.contains(&format!("head (at {:#x})", cpu1 + 16)),
        "{refused}"
    );
    assert!(refused.contains("more than the buffer's"), "{refused}");
    assert_eq!(events(&log, &mem, 1, Order::NewestFirst), []);
    assert_eq!(events(&log, &mem, 0, Order::NewestFirst).len(), 5);
}

#[test]
fn a_damaged_record_ends_the_walk_with_a_mark() {
    let mut k = Kernel::new();
    for i in 0..5 {
        k.log(0, i, &SchedOut::new(1, i));
    }
    let mut mem = k.memory();
    // The third record's type and size: type 7, size 3.
    let third = k.buffers[0].region().0 + 2 * 40;
    poke(&mut mem, third, 7 | (3 << 32));
    let log = read(&mem, k.addr());
    for order in [Order::OldestFirst, Order::NewestFirst] {
        let got = events(&log, &mem, 0, order);
        assert_eq!(got.len(), 3, "{got:?}");
        let mark = got.iter().find(|e| e.name == "(damaged)").unwrap();
        let Damage::Inconsistent(why) = &mark.damage[0] else {
            panic!("{mark:?}")
        };
        assert!(why.contains(&format!("{third:#x}")), "{why}");
    }
    assert!(log.rings()[0].overwritten.is_err());
    assert!(log.notes().iter().any(|n| n.contains("read stops after 2")));
}

#[test]
fn the_built_in_schema_when_the_kernels_is_missing() {
    let mut k = Kernel::new();
    k.log(0, 1, &SchedIn::new(1, 2, 3));
    let mut mem = k.memory();
    // Drop the schema's run: the dump does not hold it.
    mem.0.pop();
    let log = read(&mem, k.addr());
    assert!(log
        .notes()
        .iter()
        .any(|n| n.contains("using the schema built into kcrash")));
    assert_eq!(events(&log, &mem, 0, Order::OldestFirst)[0].name, "SCHEDIN");
}

#[test]
fn a_schema_that_does_not_parse_types_nothing() {
    let mut k = Kernel::new();
    k.log(0, 1, &SchedIn::new(1, 2, 3));
    let mut mem = k.memory();
    let schema = mem.0.last_mut().unwrap();
    schema.1[..5].copy_from_slice(b"$$$$$");
    let log = read(&mem, k.addr());
    assert!(
        log.notes()
            .iter()
            .any(|n| n.contains("line 1, column 1: unexpected character")),
        "{:?}",
        log.notes()
    );
    let e = &events(&log, &mem, 0, Order::OldestFirst)[0];
    assert_eq!(e.name, "unknown");
    assert_eq!(e.fields[0].value, Value::Unsigned(3));
}

#[test]
fn bad_magic_and_cpu_count_are_refused() {
    let k = Kernel::new();
    let mut mem = k.memory();
    poke(&mut mem, k.addr() + 8, 1 | (9999 << 32));
    let e = KloggerLog::read(&mem, k.addr(), std::mem::size_of::<Writer>() as u64)
        .err()
        .unwrap();
    assert!(e.to_string().contains("ncpus"), "{e}");
    poke(&mut mem, k.addr(), 0);
    let e = KloggerLog::read(&mem, k.addr(), 0).err().unwrap();
    assert!(e.to_string().contains("magic"), "{e}");
    assert!(KloggerLog::read(&Runs(Vec::new()), 0x1000, 0).is_err());
}

#[test]
fn a_buffer_overlapping_an_earlier_cpus_is_refused() {
    let mut k = Kernel::new();
    for i in 0..5 {
        k.log(0, i, &SchedOut::new(1, i));
        k.log(1, i, &SchedOut::new(2, i));
    }
    let mut mem = k.memory();
    let cpu0 = k.buffers[0].region().0;
    let cpu1 = k.addr() + LOG_BYTES + CPU_BYTES;
    // cpu1's buffer pointer now points into cpu0's buffer.
    poke(&mut mem, cpu1, cpu0 + 64);
    let log = read(&mem, k.addr());
    assert_eq!(log.rings()[0].refused, None);
    let refused = log.rings()[1].refused.as_deref().unwrap();
    assert!(refused.contains(&format!("{:#x}", cpu0 + 64)), "{refused}");
    assert!(
        refused.contains(&format!("cpu0's buffer {cpu0:#x}")),
        "{refused}"
    );
    assert_eq!(events(&log, &mem, 1, Order::NewestFirst), []);
    assert_eq!(events(&log, &mem, 0, Order::NewestFirst).len(), 5);
}

/// What a schema reads besides the event: no symbols, the dump's memory.
struct Dump<'m>(&'m Runs);

impl kcrash_schema::Resolve for Dump<'_> {
    fn symbol_at(&self, _addr: u64) -> Option<(String, u64)> {
        None
    }
    fn memory(&self) -> &dyn Memory {
        self.0
    }
}

#[test]
fn the_sample_schemata_read_decoded_events() {
    use klogger_writer::events::{DumpFinish, KloggerStart};
    let mut k = Kernel::new();
    k.log(0, 1, &KloggerStart::new(512, 0, "0.98-kcrash"));
    k.log(0, 2, &SchedOut::new(17, 1 << 40));
    k.log(0, 3, &SchedIn::new(18, 4, -3));
    k.log(1, 4, &TryToWakeup::new(19, -1, 0x8001));
    k.log(1, 5, &ProcessExists::new(20, 5, "kworker/0:1"));
    k.log(1, 6, &DumpFinish::new(4096, 7));
    let mem = k.memory();
    let log = read(&mem, k.addr());
    let file: std::sync::Arc<str> = BUILT_IN_NAME.into();
    let sample = import::import(&file, BUILT_IN_SCHEMA).unwrap();
    let mut schemata = kcrash_schema::Schemata::default();
    schemata.add(file, "klogger", sample).unwrap();
    let mut seen = Vec::new();
    let mut marks = Vec::new();
    for ring in 0..2 {
        for event in events(&log, &mem, ring, Order::OldestFirst) {
            let subject = kcrash_schema::Subject {
                log: log.kind(),
                ring: &log.rings()[ring].name,
                name: &event.name,
                format: None,
                symbol: None,
                code: None,
            };
            let kcrash_schema::Lookup::One(schema) = schemata.lookup(&subject) else {
                panic!("no one schema for {event:?}");
            };
            let applied = schema.apply(&event.fields, log.clock(), &Dump(&mem));
            marks.extend(applied.marks.iter().map(|m| format!("{}: {m}", event.name)));
            let values: Vec<(&str, &Value)> = applied
                .fields
                .iter()
                .map(|f| (f.name.as_ref(), &f.value))
                .collect();
            seen.push((event.name.to_string(), format!("{values:?}")));
        }
    }
    let enumerated = |value: i64, name: Option<&'static str>| Value::Enum {
        value: value as u64,
        name: name.map(Into::into),
    };
    let want: [(&str, Vec<(&str, Value)>); 6] = [
        (
            "KLOGGER_START",
            vec![
                ("buffer_size", Value::Unsigned(512)),
                ("cpu", Value::Signed(0)),
                ("version", Value::Text(b"0.98-kcrash".to_vec())),
            ],
        ),
        (
            "SCHEDOUT",
            vec![
                ("pid", Value::Signed(17)),
                ("l2_cache_misses_user", Value::Unsigned(1 << 40)),
            ],
        ),
        (
            "SCHEDIN",
            vec![
                ("pid", Value::Signed(18)),
                ("policy", enumerated(4, None)),
                ("prio", Value::Signed(-3)),
            ],
        ),
        (
            "TRY_TO_WAKEUP",
            vec![
                ("pid", Value::Signed(19)),
                ("state", enumerated(-1, Some("DEAD"))),
                ("flags", Value::Unsigned(0x8001)),
            ],
        ),
        (
            "PROCESS_EXISTS",
            vec![
                ("pid", Value::Signed(20)),
                ("policy", enumerated(5, Some("IDLE"))),
                ("comm", Value::Text(b"kworker/0:1".to_vec())),
            ],
        ),
        (
            "DUMP_FINISH",
            vec![
                ("bytes", Value::Unsigned(4096)),
                ("index", Value::Unsigned(7)),
            ],
        ),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(name, fields)| {
            let fields: Vec<(&str, &Value)> = fields.iter().map(|(n, v)| (*n, v)).collect();
            (name.to_string(), format!("{fields:?}"))
        })
        .collect();
    assert_eq!(seen, want);
    // A value the enumeration has no name for is read and marked, as the decoder shows it.
    assert_eq!(marks, ["SCHEDIN: policy: 4 has no name in the enum"]);
}
