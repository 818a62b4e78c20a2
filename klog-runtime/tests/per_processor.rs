//! The design's alternatives (appendix A): a ring per processor, subsystems grouped into one
//! ring, a buffer attached after boot, and descriptions without pointers — as the statics hold
//! them, read back without klog-runtime's own accessors where the layout is the contract.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use klog_runtime::{
    decode_header, descriptor, flags, inline_desc, AttachError, Desc, Header, KLogRec, REC_WORDS,
};

thread_local! {
    static PROCESSOR: Cell<u32> = const { Cell::new(0) };
}

pub struct Platform;
impl klog_runtime::Platform for Platform {
    fn clock() -> u64 {
        7
    }
    fn chore_id() -> u64 {
        1
    }
    fn proc_dom() -> u64 {
        klog_runtime::proc_dom(PROCESSOR.with(Cell::get), 0)
    }
}

klog_runtime::klog_config! {
    platform = Platform;
    static_level = klog_runtime::KLOG_PROLOG;
    processors = 2;
    subsystems { DBG_NONE = 8, DBG_FS = 16, DBG_VM = 0, DBG_SCHED = 4 }
    groups { DBG_VM => DBG_FS }
    descriptions { EVT_FAULT = "fault at %lx", EVT_IDLE = "idle" }
}

static LOCK: Mutex<()> = Mutex::new(());

/// Serialises tests (they share the statics) and starts each from klog_init with empty rings.
fn fresh() -> MutexGuard<'static, ()> {
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // Undo what an attach did: each KLog back to its configured ring.
    for (i, log) in KLogs.iter().enumerate() {
        let recs = __KLOG_RECS[KLOG_LEADERS[i % DBG_MAX] as usize];
        log.num_recs.store(recs, Ordering::Relaxed);
        log.buffer_size_1
            .store(recs * REC_WORDS - 1, Ordering::Relaxed);
        log.next_write.store(0, Ordering::Relaxed);
    }
    klog_init();
    guard
}

fn on(processor: u32) {
    PROCESSOR.with(|p| p.set(processor));
}

/// The newest record of KLogs[ring].
fn newest(ring: usize) -> KLogRec {
    let log = &KLogs[ring];
    let seq = log.records_written() - 1;
    let mask = log.buffer_size_1.load(Ordering::Relaxed);
    let base = log.buffer.load(Ordering::Relaxed);
    // SAFETY: the slot is inside the ring `log` describes; the test holds the lock.
    let words: [u64; 8] =
        std::array::from_fn(|i| unsafe { *base.add(((seq * REC_WORDS) & mask) as usize + i) });
    KLogRec::from_words(words)
}

#[test]
fn each_processor_has_a_set_of_rings_and_members_mirror_their_leader() {
    let _g = fresh();
    assert_eq!((DBG_MAX, KLOG_PROCESSORS, KLogs.len()), (4, 2, 8));
    assert_eq!(KLOG_LEADERS, [0, 1, 1, 3]);
    // Two sets of NONE 8, FS 16, SCHED 4 records; VM has no ring of its own.
    assert_eq!(KLogBuffer.len(), 2 * 8 * (8 + 16 + 4));
    let base = KLogBuffer.as_ptr() as u64;
    let offsets: Vec<u64> = KLogs
        .iter()
        .map(|l| (l.buffer.load(Ordering::Relaxed) as u64 - base) / 8)
        .collect();
    assert_eq!(offsets, [0, 64, 64, 192, 224, 288, 288, 416]);
    for (i, log) in KLogs.iter().enumerate() {
        let s = i % DBG_MAX;
        assert_eq!(log.subsystem, u64::from(KLOG_LEADERS[s]));
        assert_eq!(log.header, klog_runtime::encode_header(s as u16));
    }
    assert_eq!(KLogs[2].capacity(), KLogs[1].capacity());
    assert_eq!(klogProcessors, 2);
}

#[test]
fn a_record_goes_to_its_processors_set_and_its_groups_ring() {
    let _g = fresh();
    on(1);
    klog_runtime::KLOGT1!(DBG_VM, "vm %d", 5);
    on(0);
    klog_runtime::KLOGT1!(DBG_SCHED, "sched %d", 6);
    // Processor 3 is beyond the sets: it shares set 3 % 2.
    on(3);
    klog_runtime::KLOGT0!(DBG_FS, "fs");
    assert_eq!(KLogs[4 + 1].records_written(), 2, "processor 1's FS ring");
    assert_eq!(
        KLogs[4 + 2].records_written(),
        0,
        "VM's KLog never receives"
    );
    assert_eq!(KLogs[3].records_written(), 1);
    let r = newest(5);
    assert_eq!(
        decode_header(r.header),
        Header::Valid {
            subsystem: 1,
            desc: Desc::Pointer
        }
    );
    assert_eq!(r.proc_dom >> 32, 3);
    on(1);
    assert_eq!(DBG_VM.ring_here(), 5);
}

#[test]
fn before_init_every_record_goes_to_the_first_ring() {
    let _g = fresh();
    for log in &KLogs {
        log.buffer
            .store(KLogBuffer.as_ptr() as *mut u64, Ordering::Relaxed);
    }
    on(1);
    klog_runtime::KLOGT0!(DBG_SCHED, "early");
    assert_eq!(KLogs[0].records_written(), 1);
    assert_eq!(KLogs[7].records_written(), 0);
}

#[test]
fn descriptions_without_pointers() {
    let _g = fresh();
    on(0);
    klog_runtime::KLOG_INLINE!(DBG_FS, klog_runtime::KLOG_TERSE, "pf %lx", 0x1000u64);
    let r = newest(1);
    assert_eq!(
        decode_header(r.header),
        Header::Valid {
            subsystem: 1,
            desc: Desc::Inline
        }
    );
    assert_eq!(r.desc.to_ne_bytes(), *b"pf %lx\0\0");
    assert_eq!(r.desc, inline_desc(b"pf %lx"));
    klog_runtime::KLOG_EVENT!(DBG_VM, klog_runtime::KLOG_TERSE, EVT_FAULT, 0x2000u64);
    let r = newest(1);
    assert_eq!(
        decode_header(r.header),
        Header::Valid {
            subsystem: 2,
            desc: Desc::Event
        }
    );
    assert_eq!((r.desc, r.data1), (0, 0x2000));
    assert_eq!(EVT_IDLE.id, 1);
    // The table holds each format's address, NUL-terminated.
    let at = KLogDescriptions[1].0;
    // SAFETY: the table's entries point at static NUL-terminated strings.
    let text = unsafe { std::ffi::CStr::from_ptr(at.cast()) };
    assert_eq!(text.to_bytes(), b"idle");
    let d = descriptor::parse(&descriptor_bytes()).expect("sealed");
    assert_eq!(d.processors, 2);
    assert_eq!(d.klog_entries(), 8);
    assert_eq!(
        d.descriptions,
        Some((KLogDescriptions.as_ptr() as u64, 2, 8))
    );
}

fn descriptor_bytes() -> Vec<u8> {
    let size = std::mem::size_of_val(&klogDescriptor);
    let base = (&raw const klogDescriptor).cast::<u8>();
    // SAFETY: the descriptor's own bytes.
    unsafe { std::slice::from_raw_parts(base, size) }.to_vec()
}

#[test]
fn an_attached_buffer_replaces_the_ring_and_its_members() {
    let _g = fresh();
    assert_eq!(
        KLOG_REGISTRY.attach(2, leak(64)),
        Err(AttachError::NotARing),
        "VM is a member of FS's group"
    );
    assert_eq!(KLOG_REGISTRY.attach(1, leak(24)), Err(AttachError::Size));
    let buffer = leak(32 * REC_WORDS as usize);
    on(0);
    klog_runtime::KLOGT0!(DBG_FS, "before");
    assert_eq!(KLOG_REGISTRY.attach(1, buffer), Ok(()));
    assert_ne!(
        klogFlags.load(Ordering::Relaxed) & flags::ATTACHED_BUFFERS,
        0
    );
    for ring in [1, 2] {
        assert_eq!(
            KLogs[ring].buffer.load(Ordering::Relaxed),
            buffer.as_ptr() as *mut u64
        );
        assert_eq!(KLogs[ring].capacity(), 32);
    }
    assert_eq!(
        KLogs[1].records_written(),
        0,
        "an attached ring starts empty"
    );
    klog_runtime::KLOGT1!(DBG_VM, "after %d", 9);
    assert_eq!(
        buffer[0].load(Ordering::Relaxed) as u16,
        2,
        "VM's record, first slot"
    );
    klogFlags.store(0, Ordering::Relaxed);
}

/// A zeroed 64-byte-aligned buffer of `words` words that lives as long as the test binary.
fn leak(words: usize) -> &'static [AtomicU64] {
    let layout = std::alloc::Layout::from_size_align(words * 8, 64).expect("layout");
    // SAFETY: a non-zero-sized layout; zeroed AtomicU64s are valid; never freed.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout).cast::<AtomicU64>();
        assert!(!p.is_null());
        std::slice::from_raw_parts(p, words)
    }
}
