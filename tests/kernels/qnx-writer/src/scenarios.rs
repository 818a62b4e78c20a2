//! The crash scenarios both test kernels run (the bare kernel's `klog.scenario=NAME`, the hosted
//! program's first argument): each logs into the ring, leaves it in a known state, and returns
//! what happened, for the message the kernel then panics (or aborts) with. Each event says which processor it
//! plays; the scenarios interleave processors' events and combine parts on purpose.

use crate::codes::{Simple, Wide};
use crate::ring::{Tracer, BUFFERS, ELEMENTS};

/// What a scenario needs of its kernel besides the tracer.
pub struct Env {
    /// The rate of the tracer's clock.
    pub cycles_per_sec: u64,
    /// An address no page table maps (for the damaged ring).
    pub unmapped: u64,
}

type Body = fn(&Tracer<'_>, &Env) -> &'static str;

/// Every scenario, by name.
pub const ALL: &[(&str, Body)] = &[
    ("qnx-plain", plain),
    ("qnx-wrap", wrap),
    ("qnx-combine", combine),
    ("qnx-unfinished", unfinished),
    ("qnx-cycle", cycle),
    ("qnx-unmapped", unmapped),
];

/// The scenarios' names.
pub const NAMES: [&str; ALL.len()] = {
    let mut names = [""; ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = ALL[i].0;
        i += 1;
    }
    names
};

/// Runs scenario `name`; None if there is none.
pub fn run(name: &str, tracer: &Tracer<'_>, env: &Env) -> Option<&'static str> {
    let (_, body) = ALL.iter().find(|(n, _)| *n == name)?;
    tracer.init(env.cycles_per_sec);
    Some(body(tracer, env))
}

/// One round of a kernel's work on `cpu`: a thread made ready and run, a kernel call in and
/// out, an interrupt in and out.
fn round(t: &Tracer<'_>, cpu: u32, i: u32) {
    let pid = 100 + cpu;
    t.simple(cpu, Simple::ThReady { pid, tid: i });
    t.simple(cpu, Simple::ThRunning { pid, tid: i });
    t.simple(
        cpu,
        Simple::KerCallEnter {
            call: 2 + i % 3,
            arg0: 0x1000 * i,
            arg1: i,
        },
    );
    t.simple(
        cpu,
        Simple::IntEnter {
            vector: 0x20 + cpu,
            ip: 0x8010_0000 + i,
            sp: 0x7fff_0000 - 16 * i,
        },
    );
    t.simple(
        cpu,
        Simple::IntExit {
            vector: 0x20 + cpu,
            handlers: 1,
            status: 0,
        },
    );
    t.simple(
        cpu,
        Simple::KerCallExit {
            call: 2 + i % 3,
            ret: if i % 4 == 3 { -3 } else { i as i32 },
            status: 0,
        },
    );
}

/// Every class's events on two processors, one code of each kind the reader has no name for;
/// the ring far from full.
fn plain(t: &Tracer<'_>, _: &Env) -> &'static str {
    t.simple(0, Simple::ProcCreate { ppid: 1, pid: 100 });
    t.simple(0, Simple::ThCreate { pid: 100, tid: 1 });
    for i in 0..4 {
        round(t, i % 2, i);
    }
    t.simple(
        1,
        Simple::KerCallEnter {
            call: 9,
            arg0: 0,
            arg1: 0,
        },
    );
    t.simple(
        1,
        Simple::KerCallExit {
            call: 9,
            ret: 0,
            status: 0,
        },
    );
    t.simple(
        1,
        Simple::KerCallEnter {
            call: 77,
            arg0: 0xabcd,
            arg1: 1,
        },
    );
    t.simple(
        0,
        Simple::Raw {
            class: 21,
            event: 0x155,
            d0: 0xdead_beef,
            d1: 7,
        },
    );
    t.simple(0, Simple::ThDestroy { pid: 100, tid: 1 });
    t.simple(
        0,
        Simple::ProcDestroy {
            pid: 100,
            status: 0x100,
        },
    );
    "done"
}

/// The ring reused: more than three times its traceevents, with combine events among them,
/// ended when the oldest buffer left starts with the last parts of a combine event whose begin
/// part was overwritten (within 48 buffers; most fills cross one).
fn wrap(t: &Tracer<'_>, _: &Env) -> &'static str {
    const MOST: usize = 48;
    let elements = ELEMENTS as u64;
    // By seq_buff_num: whether the buffer starts in the middle of a combine event.
    let mut straddled = [false; MOST];
    let mut i = 0;
    let mut name = *b"proc-000";
    loop {
        let written = t.written();
        let oldest = (written.saturating_sub(1) / elements + 1).saturating_sub(BUFFERS as u64);
        let enough = written >= 3 * (BUFFERS * ELEMENTS) as u64;
        if (enough && straddled[oldest as usize]) || written >= ((MOST - 1) * ELEMENTS) as u64 {
            break;
        }
        round(t, i % 4, i);
        name[5..].copy_from_slice(&three_digits(i));
        let mut c = t.begin(
            1,
            Wide::ProcCreateName {
                ppid: 1,
                pid: 1000 + i,
                name: &name,
            },
        );
        let begun = (t.written() - 1) / elements;
        t.simple(2, Simple::ThRunning { pid: 102, tid: i });
        while !c.step(t) {
            t.simple(3, Simple::ThReady { pid: 103, tid: i });
        }
        let ended = (t.written() - 1) / elements;
        if ended > begun {
            straddled[ended as usize] = true;
        }
        i += 1;
    }
    "done"
}

fn three_digits(i: u32) -> [u8; 3] {
    let d = |n: u32| b'0' + (n % 10) as u8;
    [d(i / 100), d(i / 10), d(i)]
}

/// Combine events of two processors with their parts interleaved with each other's and with
/// simple events: a process name in four parts, a buffer in three, a short one in two.
fn combine(t: &Tracer<'_>, _: &Env) -> &'static str {
    round(t, 0, 0);
    let name = b"/usr/sbin/io-pkt-v6";
    let bytes: [u8; 17] = core::array::from_fn(|i| (i * 13) as u8);
    let mut a = t.begin(
        0,
        Wide::ProcCreateName {
            ppid: 1,
            pid: 4100,
            name,
        },
    );
    let mut b = t.begin(1, Wide::Buffer { bytes: &bytes });
    t.simple(2, Simple::ThRunning { pid: 7, tid: 2 });
    let (mut a_done, mut b_done) = (false, false);
    while !(a_done && b_done) {
        if !b_done {
            b_done = b.step(t);
        }
        t.simple(3, Simple::ThReady { pid: 9, tid: 3 });
        if !a_done {
            a_done = a.step(t);
        }
    }
    let mut short = t.begin(2, Wide::Buffer { bytes: b"ok" });
    round(t, 1, 1);
    short.step(t);
    round(t, 0, 2);
    "done"
}

/// The crash mid-event: processor 0's process name has its begin and one continuation part
/// written when the kernel dies; processor 1's buffer, interleaved with it, was finished.
fn unfinished(t: &Tracer<'_>, _: &Env) -> &'static str {
    round(t, 0, 0);
    let bytes = *b"finished buffer";
    let mut done = t.begin(1, Wide::Buffer { bytes: &bytes });
    let mut cut = t.begin(
        0,
        Wide::ProcCreateName {
            ppid: 1,
            pid: 4200,
            name: b"/sbin/never-finished-at-all",
        },
    );
    done.step(t);
    cut.step(t);
    t.simple(1, Simple::ThRunning { pid: 8, tid: 1 });
    while !done.step(t) {}
    cut.unfinished(t);
    "crashed while logging a combine event"
}

/// Fills three buffers and part of the fourth, then scribbles `next` of buffer 2 so that it
/// points back to buffer 1: the list never returns to the head and buffer 3 is out of reach.
fn cycle(t: &Tracer<'_>, _: &Env) -> &'static str {
    fill_then(t, |t| t.scribble_next(2, t.buffer(1)));
    "done"
}

/// As [`cycle`], but buffer 1's `next` points to unmapped memory.
fn unmapped(t: &Tracer<'_>, env: &Env) -> &'static str {
    fill_then(t, |t| t.scribble_next(1, env.unmapped));
    "done"
}

fn fill_then(t: &Tracer<'_>, scribble: impl FnOnce(&Tracer<'_>)) {
    let mut i = 0;
    while t.written() < (3 * ELEMENTS + ELEMENTS / 2) as u64 {
        round(t, i % 2, i);
        i += 1;
    }
    scribble(t);
}
