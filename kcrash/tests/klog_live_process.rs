//! The KLog engine on this process's own memory, read through /proc/self/mem the way kcrash reads
//! a live kernel: rings written by klog-runtime, `%s` arguments in static, heap and unmapped memory,
//! wrapping, pre-init records, a torn record and a scribbled control block. Expected lines are built
//! with Rust's own `format!`, not with the printf interpreter under test. The real dumps of the
//! corpus are checked by the end-to-end tests; this pins down the engine's rules.

use std::ffi::{c_char, CString};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kcrash::klog::descriptor;
use kcrash::klog::layout::KLogLayout;
use kcrash::klog::live::Snapshot;
use kcrash::klog::render::{Clock, Printer, Style};
use kcrash::klog::ring::Order;
use kcrash::klog::{Klog, Selection};
use kcrash::memory::{Memory, Unreadable};
use klog_runtime::KLog;

static CLOCK: AtomicU64 = AtomicU64::new(1000);
/// The tests share the statics; one scribbles on a control block.
static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub struct P;
impl klog_runtime::Platform for P {
    fn clock() -> u64 {
        CLOCK.fetch_add(10, Ordering::Relaxed)
    }
    fn chore_id() -> u64 {
        0x5000_0010
    }
    fn proc_dom() -> u64 {
        klog_runtime::proc_dom(1, 2)
    }
}

klog_runtime::klog_config! {
    platform = P;
    static_level = klog_runtime::KLOG_PROLOG;
    subsystems { DBG_NONE = 4, DBG_FS = 8, DBG_SCHED = 4, DBG_VM = 2 }
}

struct SelfMem(File);

impl Memory for SelfMem {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unreadable> {
        let mut done = 0;
        while done < buf.len() {
            match self.0.read_at(&mut buf[done..], addr + done as u64) {
                Ok(0) | Err(_) => {
                    return Err(Unreadable {
                        addr: addr + done as u64,
                        reason: "not mapped in this process".into(),
                    })
                }
                Ok(n) => done += n,
            }
        }
        Ok(())
    }
}

/// The layout as a reader without debug information gets it: from `klogDescriptor`, read
/// through /proc/self/mem like every other byte (klog_init has sealed it), checked against the
/// statics' own addresses and the compiler's field offsets.
fn layout() -> KLogLayout {
    let mem = SelfMem(File::open("/proc/self/mem").unwrap());
    let read = |at, buf: &mut [u8]| mem.read(at, buf).map_err(|e| e.to_string());
    let described = descriptor::read(&raw const klogDescriptor as u64, &read).unwrap();
    let layout = descriptor::layout(&described);
    assert_eq!(layout.klogs.addr, KLogs.as_ptr() as u64);
    assert_eq!(layout.klogs.len, DBG_MAX as u64);
    assert_eq!(layout.klogs.stride, size_of::<KLog>() as u64);
    let next_write = std::mem::offset_of!(KLog, next_write) as u64;
    assert_eq!(layout.fields.next_write.offset, next_write);
    assert_eq!(layout.buffer.addr, KLogBuffer.as_ptr() as u64);
    assert_eq!(layout.buffer.len, KLogBuffer.len() as u64);
    assert_eq!(
        layout.debug_flags.map(|a| a.addr),
        Some(DebugFlags.as_ptr() as u64)
    );
    assert_eq!(
        layout.klog_level.map(|v| v.addr),
        Some(&raw const klogLevel as u64)
    );
    assert_eq!(
        layout.clock_hz.map(|v| v.addr),
        Some(&raw const klogClockHz as u64)
    );
    // KLogCommits is pointed at only when writers count into it (the commit-counts feature).
    let commits = klog_runtime::COUNT_COMMITS.then_some(KLogCommits.as_ptr() as u64);
    assert_eq!(layout.commits.map(|c| c.array.addr), commits);
    layout
}

fn lines(
    klog: &Klog,
    mem: &(dyn Memory + Sync),
    sel: Selection,
    order: Order,
    style: Style,
) -> Vec<String> {
    let mut printer = Printer::new(
        mem,
        klog.names(),
        Clock {
            hz: klog.clock_rate.hz(),
        },
    );
    let mut out = Vec::new();
    for rec in klog.records(mem, sel, order) {
        printer.text(&mut out, &rec, style);
    }
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// One test: the statics are global, and the scenario is one kernel's life.
#[test]
fn rings_rebuilt_from_memory() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mem = SelfMem(File::open("/proc/self/mem").unwrap());

    // Before klog_init: into NONE's ring, with their own subsystem.
    klog_runtime::KLOGT1!(DBG_VM, "early vm %d", 1);
    klog_init();
    KLOG_REGISTRY.set_clock_hz(100);

    let heap = CString::new("built at run time").unwrap();
    // A page that is mapped, then unmapped: its address reads as unreadable.
    let gone = unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        libc::munmap(p, 4096);
        p as u64
    };
    klog_runtime::KLOGT2!(
        DBG_FS,
        "open %s mode %o",
        klog_runtime::KLOG_STR!(c"/etc/motd"),
        0o644
    );
    klog_runtime::KLOGT1!(
        DBG_FS,
        "heap %s",
        klog_runtime::KLOG_STR!(heap.as_ptr() as *const c_char)
    );
    klog_runtime::KLOGT1!(DBG_FS, "gone %s", gone);
    // SCHED wraps: 4 slots, 10 events; the ring keeps events 6..9.
    for i in 0..10u64 {
        klog_runtime::KLOGV2!(
            DBG_SCHED,
            "postProcess: task:%016lx curPD:%d",
            i,
            -(i as i64)
        );
    }
    // An interrupted writer in VM.
    klog_runtime::KLOGT0!(DBG_VM, "vm ok");
    KLOG_REGISTRY.reserve_torn(DBG_VM.ring_here());

    let klog = Klog::read(&mem, layout());
    assert!(klog.rings.iter().all(|r| r.trusted()), "{:?}", klog.rings);
    assert_eq!(klog.names(), ["NONE", "FS", "SCHED", "VM"]);
    assert_eq!(klog.clock_rate.hz(), Some(100));
    let sched = &klog.rings[2];
    assert_eq!(
        (
            sched.written(),
            sched.held(),
            sched.overwritten(),
            sched.laps()
        ),
        (10, 4, 6, 2)
    );

    // SCHED by name: its ring, newest first, terse.
    let sel = klog.select("sched").unwrap();
    let want: Vec<String> = (6..10u64)
        .rev()
        .map(|i| format!("[SCHED] postProcess: task:{i:016x} curPD:{}", -(i as i64)))
        .collect();
    assert_eq!(
        lines(&klog, &mem, sel, Order::NewestFirst, Style::Terse),
        want
    );

    // VM by name includes its pre-init record from NONE's ring.
    let vm = lines(
        &klog,
        &mem,
        klog.select("DBG_VM").unwrap(),
        Order::OldestFirst,
        Style::Terse,
    );
    assert_eq!(
        vm,
        [
            "[VM] early vm 1",
            "[VM] vm ok",
            "[VM] <torn: the writer was interrupted before finishing this record>"
        ]
    );

    // Everything, newest first, full: merged by clock.
    let all = lines(&klog, &mem, Selection::All, Order::NewestFirst, Style::Full);
    assert_eq!(all.len(), 1 + 3 + 4 + 2);
    // The torn slot was never written beyond its zeroed header, and shows so; it sorts right after
    // the record before it in its ring.
    assert_eq!(all[0], "[    0.000000000] [0][0,0,VM] <torn: the writer was interrupted before finishing this record>");
    assert!(all[1].ends_with("[50000010][1,2,VM] vm ok"), "{}", all[1]);
    assert_eq!(
        all.last().unwrap(),
        "[   10.000000000] [50000010][1,2,VM] early vm 1"
    );
    let fs: Vec<&String> = all.iter().filter(|l| l.contains(",FS]")).collect();
    assert!(
        fs[2].ends_with(&format!("] open /etc/motd mode {:o}", 0o644)),
        "{}",
        fs[2]
    );
    assert!(fs[1].ends_with("] heap built at run time"));
    assert!(
        fs[0].ends_with(&format!(
            "] gone <unreadable {gone:#x}: not mapped in this process>"
        )),
        "{}",
        fs[0]
    );
    let clocks: Vec<&str> = all[1..].iter().map(|l| &l[..16]).collect();
    let mut sorted = clocks.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(clocks, sorted, "merged newest first by clock");

    // Oldest first is the exact reverse.
    let mut rev = lines(&klog, &mem, Selection::All, Order::OldestFirst, Style::Full);
    rev.reverse();
    assert_eq!(rev, all);

    // A scribbled control block: not trusted, named, and salvage still finds its records.
    let saved = KLogs[1].next_write.swap(12345, Ordering::Relaxed);
    let damaged = Klog::read(&mem, layout());
    assert_eq!(
        damaged.rings[1].problems,
        ["next_write 12345 is not a multiple of rec_size"]
    );
    assert_eq!(
        lines(
            &damaged,
            &mem,
            damaged.select("FS").unwrap(),
            Order::NewestFirst,
            Style::Terse
        )
        .len(),
        0
    );
    let salvage = damaged.salvage(&mem, Order::OldestFirst);
    let fs_msgs: Vec<u64> = salvage.groups[1].iter().map(|r| r.data()[1]).collect();
    assert_eq!(fs_msgs, [0o644, 0, 0]);
    KLogs[1].next_write.store(saved, Ordering::Relaxed);

    // A live snapshot while the writer runs: it logs two SCHED records in the middle of the one
    // read of SCHED's words, into the slots of the two oldest records. Those two are dropped and
    // counted, never shown half old, half new.
    let (sched_buffer, sched_recs) = (klog.rings[2].buffer, klog.rings[2].num_recs);
    let writer = WriterMidRead {
        mem: &mem,
        ring: sched_buffer,
        len: (sched_recs * 64) as usize,
        fired: AtomicBool::new(false),
    };
    let (snap, notes) = Snapshot::take(&writer, layout());
    assert!(writer.fired.load(Ordering::Relaxed));
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(
        snap.overrun_notes().collect::<Vec<_>>(),
        ["KLogs[2] (SCHED): 2 of the oldest records were overwritten while being read; not shown"]
    );
    let sched = lines(
        &snap.klog,
        &snap,
        snap.klog.select("SCHED").unwrap(),
        Order::OldestFirst,
        Style::Terse,
    );
    let want: Vec<String> = (8..10u64)
        .map(|i| format!("[SCHED] postProcess: task:{i:016x} curPD:{}", -(i as i64)))
        .collect();
    assert_eq!(sched, want);
    // The next look sees the two new records and nothing overwritten.
    let (snap, notes) = Snapshot::take(&mem, layout());
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(snap.klog.rings[2].written(), 12);
}

/// Memory whose writer logs two SCHED records halfway through the read of SCHED's ring.
struct WriterMidRead<'m> {
    mem: &'m SelfMem,
    ring: u64,
    len: usize,
    fired: AtomicBool,
}

impl Memory for WriterMidRead<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unreadable> {
        if addr != self.ring || buf.len() != self.len || self.fired.swap(true, Ordering::Relaxed) {
            return self.mem.read(addr, buf);
        }
        let half = buf.len() / 2;
        self.mem.read(addr, &mut buf[..half])?;
        for i in 10..12u64 {
            klog_runtime::KLOGV2!(
                DBG_SCHED,
                "postProcess: task:%016lx curPD:%d",
                i,
                -(i as i64)
            );
        }
        self.mem.read(addr + half as u64, &mut buf[half..])
    }
}

/// The `klog` command's own parsing and output, on the same kind of memory.
#[test]
fn klog_command_arguments() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // Seals the descriptor the layout is read from, as klog_init would: the other test, which
    // runs klog_init at its own moment, may not have run yet.
    klog_runtime::descriptor::Seal::seal(&klogDescriptor, &[], 0);
    let mem = SelfMem(File::open("/proc/self/mem").unwrap());
    let klog = Klog::read(&mem, layout());
    let run = |line: &str| {
        let argv: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let r = kcrash::commands::klog::run_on(&argv, &mem, &klog, None, &mut out, &mut err);
        (
            r.map_err(|e| e.to_string()),
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    };
    let (r, _, _) = run("NOSUCH");
    assert!(r
        .unwrap_err()
        .contains("no subsystem named \"NOSUCH\"; this kernel has NONE, FS, SCHED, VM"));
    let (r, _, _) = run("0 sideways");
    assert!(r.is_err());
    let (r, out, _) = run("-s");
    r.unwrap();
    assert!(out.starts_with(" ID NAME"), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.ends_with("  klog")).count(),
        4,
        "every ring has d_klog set:\n{out}"
    );
    let (r, out, _) = run("-s --json");
    r.unwrap();
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["rings"].as_array().unwrap().len(), 4);
}
