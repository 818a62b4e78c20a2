//! The scenarios, chosen by name on the command line. Each ends by crashing.

use std::ffi::CStr;
use std::sync::atomic::Ordering;

use klog_runtime::KLOG_STR;

use crate::event;
#[cfg(feature = "klogger")]
use crate::klogger;
use crate::platform::{self, Task};
use crate::{
    oracle, Crash, KLogs, DBG_FS, DBG_NONE, DBG_PARCHORE, DBG_SCHED, DBG_VM, KLOG_REGISTRY,
};

type Scenario = fn(Crash) -> !;

/// Every scenario this build offers, by name; `big` needs the big-rings build.
const SCENARIOS: &[(&str, Scenario)] = &[
    ("rings", rings),
    ("wrap", wrap),
    ("unfilled", unfilled),
    ("preinit", preinit),
    ("strings", strings),
    ("torn", torn),
    ("scribbled", scribbled),
    ("off", off),
    #[cfg(feature = "big-rings")]
    ("big", big),
    #[cfg(all(feature = "per-processor", not(feature = "big-rings")))]
    ("percpu", percpu),
    #[cfg(feature = "dprobes")]
    ("dprobes-plain", crate::dprobes::plain),
    #[cfg(feature = "dprobes")]
    ("dprobes-wrap", crate::dprobes::wrap),
    #[cfg(feature = "dprobes")]
    ("dprobes-faults", crate::dprobes::faults),
    #[cfg(feature = "dprobes")]
    ("dprobes-damaged", crate::dprobes::damaged),
    #[cfg(feature = "klogger")]
    ("klogger-plain", klogger::plain),
    #[cfg(feature = "klogger")]
    ("klogger-wrap", klogger::wrap),
    #[cfg(feature = "klogger")]
    ("klogger-lost", klogger::lost),
    #[cfg(feature = "klogger")]
    ("klogger-damaged", klogger::damaged),
];

pub const NAMES: [&str; SCENARIOS.len()] = {
    let mut names = [""; SCENARIOS.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = SCENARIOS[i].0;
        i += 1;
    }
    names
};

pub fn find(name: &str) -> Option<Scenario> {
    SCENARIOS.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

/// Processors (threads) of the multi-processor scenarios.
pub const CPUS: u32 = 4;

/// The task the main thread runs.
static BOOT_TASK: Task = Task { cpu: 0 };

/// klog_init, the clock frequency, and the oracle's ring declarations.
pub fn start_logging() {
    crate::klog_init();
    KLOG_REGISTRY.set_clock_hz(platform::CLOCK_HZ);
    oracle::announce_rings();
}

/// Runs `body` on CPUS threads, each the processor of its own heap-allocated task, pinned to a
/// CPU of the machine where it can be (processor modulo the CPUs this program may use).
pub fn on_every_cpu(body: fn(u32)) {
    std::thread::scope(|s| {
        for cpu in 0..CPUS {
            s.spawn(move || {
                pin_to_a_cpu(cpu);
                platform::run_on_this_thread(Box::leak(Box::new(Task { cpu })));
                body(cpu);
            });
        }
    });
}

/// Pins the calling thread to the `n`th CPU it may run on (modulo their number). Best effort:
/// the processor a record names is its task's, whichever CPU ran it.
fn pin_to_a_cpu(n: u32) {
    // SAFETY: cpu_set_t is plain data; the calls read and write only the set given.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of_val(&allowed), &mut allowed) != 0 {
            return;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &allowed))
            .collect();
        let Some(&cpu) = cpus.get(n as usize % cpus.len().max(1)) else {
            return;
        };
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        libc::sched_setaffinity(0, std::mem::size_of_val(&one), &one);
    }
}

const PATHS: [&CStr; 4] = [c"/etc/motd", c"/var/log/klog", c"/dev/console", c"/tmp"];

/// One event of each kind a small kernel logs, varying with `i`.
fn mixed_event(cpu: u32, i: u32) {
    match i % 4 {
        0 => {
            let task = platform::current_task_address() + i as u64;
            let pd = (cpu * 100 + i) as i32;
            event!(
                DBG_SCHED,
                KLOG_VERBOSE,
                "postProcess: task:%016lx curPD:%d",
                [task, pd],
                "postProcess: task:{task:016x} curPD:{pd}"
            );
        }
        1 => {
            let path = PATHS[(i as usize / 4) % 4];
            let shown = path.to_string_lossy();
            event!(
                DBG_FS,
                KLOG_TERSE,
                "open %s -> fd %d",
                [KLOG_STR!(path), i as i32],
                "open {shown} -> fd {i}"
            );
        }
        2 => {
            let va = 0x7f00_0000_0000u64 + i as u64 * 4096;
            let prot = i & 7;
            event!(
                DBG_VM,
                KLOG_VERBOSE,
                "fault va=%#lx prot=%x cpu=%u",
                [va, prot, cpu],
                "fault va={va:#x} prot={prot:x} cpu={cpu}"
            );
        }
        _ => {
            let task = platform::current_task_address();
            let ready = i as i64 - 50;
            event!(
                DBG_PARCHORE,
                KLOG_PROLOG,
                "chore %p spawned, %ld ready",
                [task, ready],
                "chore {task:#x} spawned, {ready} ready"
            );
        }
    }
}

fn rings_body(cpu: u32) {
    for i in 0..150 {
        mixed_event(cpu, i);
    }
}

/// Several subsystems with different ring sizes, four processors logging at once.
fn rings(crash: Crash) -> ! {
    start_logging();
    on_every_cpu(rings_body);
    crash.now("abort after logging")
}

/// The 64-record VM ring wrapped 32 times by four processors.
fn wrap(crash: Crash) -> ! {
    start_logging();
    on_every_cpu(|cpu| {
        for page in 0..64 * 8u32 {
            event!(
                DBG_VM,
                KLOG_TERSE,
                "page %u of cpu %d",
                [page, cpu],
                "page {page} of cpu {cpu}"
            );
        }
    });
    crash.now("abort after logging")
}

/// Rings far from full.
fn unfilled(crash: Crash) -> ! {
    start_logging();
    on_every_cpu(|cpu| match cpu {
        0 => {
            for tick in 0..5 {
                event!(DBG_SCHED, KLOG_TERSE, "tick %d", [tick], "tick {tick}");
            }
        }
        1 => {
            for n in 0..3 {
                event!(DBG_FS, KLOG_TERSE, "sync %d of %d", [n, 3], "sync {n} of 3");
            }
        }
        _ => {}
    });
    crash.now("abort after logging")
}

/// Events of several subsystems before klog_init: they land in the NONE ring.
fn preinit(crash: Crash) -> ! {
    platform::run_on_this_thread(&BOOT_TASK);
    event!(
        DBG_SCHED,
        KLOG_TERSE,
        "boot: sched before klog_init %d",
        [1],
        "boot: sched before klog_init 1"
    );
    event!(
        DBG_VM,
        KLOG_TERSE,
        "boot: %lu pages",
        [8192u64],
        "boot: 8192 pages"
    );
    event!(
        DBG_NONE,
        KLOG_TERSE,
        "boot: console %s",
        [KLOG_STR!(c"ttyS0")],
        "boot: console ttyS0"
    );
    event!(
        DBG_FS,
        KLOG_VERBOSE,
        "boot: root on %s flags %#x",
        [KLOG_STR!(c"/dev/vda1"), 0x41u32],
        "boot: root on /dev/vda1 flags {:#x}",
        0x41
    );
    start_logging();
    on_every_cpu(|cpu| {
        for i in 0..10 {
            mixed_event(cpu, i);
        }
    });
    crash.now("abort after logging")
}

/// `%s` arguments at a static string, a heap string, a stack string, a null pointer and a page
/// unmapped before the crash. Crashes from this frame so the stack string is in the dump.
fn strings(crash: Crash) -> ! {
    platform::run_on_this_thread(&BOOT_TASK);
    start_logging();
    let pid = std::process::id();
    let heap = std::ffi::CString::new(format!("heap-{}", pid % 13)).unwrap_or_default();
    let mut stack = [0u8; 32];
    let stack_text = format!("stack-{}", pid % 7);
    stack[..stack_text.len()].copy_from_slice(stack_text.as_bytes());
    let stack_at = stack.as_ptr() as u64;
    let gone = Unmapped::new(c"unmapped before the crash");
    let heap_text = heap.to_string_lossy().into_owned();

    event!(
        DBG_FS,
        KLOG_TERSE,
        "static %s",
        [KLOG_STR!(c"/etc/motd")],
        "static /etc/motd"
    );
    event!(
        DBG_FS,
        KLOG_TERSE,
        "heap %s len %zu",
        [KLOG_STR!(heap.as_c_str()), heap_text.len()],
        "heap {heap_text} len {}",
        heap_text.len()
    );
    event!(
        DBG_FS,
        KLOG_TERSE,
        "stack %s at %p",
        [KLOG_STR!(stack.as_ptr()), stack_at],
        "stack {stack_text} at {stack_at:#x}"
    );
    event!(
        DBG_FS,
        KLOG_TERSE,
        "two %s and %s",
        [KLOG_STR!(c"/dev/console"), KLOG_STR!(heap.as_c_str())],
        "two /dev/console and {heap_text}"
    );
    event!(
        DBG_FS,
        KLOG_TERSE,
        "precision %.3s|%-8s|",
        [KLOG_STR!(c"truncated"), KLOG_STR!(c"pad")],
        "precision {:.3}|{:<8}|",
        "truncated",
        "pad"
    );
    event!(
        DBG_FS,
        KLOG_TERSE,
        "null %s",
        [KLOG_STR!(std::ptr::null::<u8>())],
        "null (null)"
    );
    let addr = gone.address();
    event!(
        DBG_FS,
        KLOG_TERSE,
        "unmapped %s",
        [addr],
        "unmapped <unreadable {addr:#x}>"
    );
    gone.unmap();
    // The stack buffer and the heap string must stay alive (and in place) until the crash.
    std::hint::black_box((&stack, &heap));
    crash.now("abort with heap, stack, null and unmapped strings logged")
}

/// A page of its own holding a string, unmapped before the crash so no dump holds it.
struct Unmapped {
    page: *mut libc::c_void,
    len: usize,
}

impl Unmapped {
    fn new(text: &CStr) -> Unmapped {
        // SAFETY: sysconf has no preconditions.
        let len = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        // SAFETY: a fresh private anonymous mapping; checked for failure below.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if page == libc::MAP_FAILED {
            eprintln!("hosted: mmap: {}", std::io::Error::last_os_error());
            std::process::exit(2);
        }
        let bytes = text.to_bytes_with_nul();
        // SAFETY: the page is `len` writable bytes, longer than any string we put there.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), page.cast(), bytes.len()) };
        Unmapped { page, len }
    }

    fn address(&self) -> u64 {
        self.page as u64
    }

    fn unmap(self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        if unsafe { libc::munmap(self.page, self.len) } != 0 {
            eprintln!("hosted: munmap: {}", std::io::Error::last_os_error());
            std::process::exit(2);
        }
    }
}

/// Writers interrupted mid-record: one in the middle of the FS ring while others keep logging,
/// one as the very last VM record.
fn torn(crash: Crash) -> ! {
    platform::run_on_this_thread(&BOOT_TASK);
    start_logging();
    on_every_cpu(|cpu| {
        for block in 0..20 {
            event!(
                DBG_FS,
                KLOG_TERSE,
                "write block %d cpu %d",
                [block, cpu],
                "write block {block} cpu {cpu}"
            );
            if cpu == 2 && block == 7 {
                let seq = KLOG_REGISTRY.reserve_torn(DBG_FS.ring_here());
                oracle::torn(DBG_FS.id, seq);
            }
        }
    });
    event!(
        DBG_VM,
        KLOG_TERSE,
        "last whole record %d",
        [1],
        "last whole record 1"
    );
    let seq = KLOG_REGISTRY.reserve_torn(DBG_VM.ring_here());
    oracle::torn(DBG_VM.id, seq);
    crash.now("abort with torn records")
}

/// KLogs entries overwritten after logging, KLogBuffer intact: FS's next_write and SCHED's
/// buffer pointer are garbage.
fn scribbled(crash: Crash) -> ! {
    start_logging();
    on_every_cpu(rings_body);
    let next_write = 0xdead_beef_dead_beef;
    oracle::scribbled(DBG_FS.id, "next_write", next_write);
    KLogs[DBG_FS.id as usize]
        .next_write
        .store(next_write, Ordering::Relaxed);
    let buffer = 0x0bad_c0de_0bad_c0de_u64;
    oracle::scribbled(DBG_SCHED.id, "buffer", buffer);
    KLogs[DBG_SCHED.id as usize]
        .buffer
        .store(buffer as *mut u64, Ordering::Relaxed);
    crash.now("abort with scribbled KLogs")
}

/// klogLevel OFF: every event is skipped and every ring stays empty.
fn off(crash: Crash) -> ! {
    start_logging();
    KLOG_REGISTRY.set_level(klog_runtime::KLOG_OFF);
    on_every_cpu(rings_body);
    crash.now("abort with logging off")
}

/// Rings totalling 4 Mi records, each filled by one processor and then some. The oracle prints a
/// digest per ring instead of millions of lines: FNV-1a over the eight words of each surviving
/// record, oldest first, as the thread knows it wrote them (the bare kernel's digest).
#[cfg(feature = "big-rings")]
fn big(crash: Crash) -> ! {
    use crate::{DBG_MAX, KLOG_PROCESSORS};
    start_logging();
    // One writer per ring: subsystem i on processor i with shared rings; with a set per
    // processor, every subsystem but NONE on every processor.
    let plan: Vec<(klog_runtime::Subsys<crate::KlogConfig>, u32)> = if KLOG_PROCESSORS == 1 {
        vec![(DBG_PARCHORE, 0), (DBG_FS, 1), (DBG_SCHED, 2), (DBG_VM, 3)]
    } else {
        (0..KLOG_PROCESSORS as u32)
            .flat_map(|cpu| [DBG_PARCHORE, DBG_FS, DBG_SCHED, DBG_VM].map(|s| (s, cpu)))
            .collect()
    };
    std::thread::scope(|s| {
        for (sub, cpu) in plan {
            s.spawn(move || {
                static DESC: &[u8] = b"big %lu on cpu %u\0";
                platform::run_on_this_thread(Box::leak(Box::new(Task { cpu })));
                let ring = sub.ring_here();
                debug_assert_eq!(ring % DBG_MAX, sub.id as usize);
                let num_recs = KLogs[ring].capacity();
                let events = num_recs + num_recs / 4 + 3;
                // The clock of the event each slot last received: the one word not known ahead.
                let mut clocks = vec![0u64; num_recs as usize];
                for i in 0..events {
                    let seq = sub.log::<{ klog_runtime::KLOG_TERSE as u32 }>(
                        klog_runtime::Desc::Pointer,
                        DESC.as_ptr() as u64,
                        DESC,
                        [i, cpu as u64, 0],
                    );
                    if seq != Some(i) {
                        eprintln!("hosted: big: ring {ring} gave sequence {seq:?} to event {i}");
                        std::process::exit(2);
                    }
                    clocks[(i % num_recs) as usize] = platform::last_hooked().clock;
                }
                let hooked = platform::last_hooked();
                let header = (0x4B4C_4F47u64 << 32) | (8 << 16) | u64::from(sub.id);
                let survivors = events.saturating_sub(num_recs)..events;
                let mut hash = Fnv1a::new();
                for i in survivors.clone() {
                    let clock = clocks[(i % num_recs) as usize];
                    let desc = DESC.as_ptr() as u64;
                    for word in [
                        header,
                        hooked.chore,
                        hooked.proc_dom,
                        clock,
                        desc,
                        i,
                        cpu as u64,
                        0,
                    ] {
                        hash.word(word);
                    }
                }
                oracle::digest(ring, survivors.end - survivors.start, events - 1, hash.0);
            });
        }
    });
    crash.now("abort with big rings full")
}

/// 64-bit FNV-1a over little-endian words, the big rings' digest.
#[cfg(feature = "big-rings")]
struct Fnv1a(u64);

#[cfg(feature = "big-rings")]
impl Fnv1a {
    fn new() -> Fnv1a {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    fn word(&mut self, word: u64) {
        for b in word.to_le_bytes() {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// A ring set per processor: each of four processors logs into its own rings; FS and VM share
/// one ring per processor; processor 3's PARCHORE ring is a buffer allocated after klog_init;
/// descriptions travel inline or as minor event IDs; processor 1 overwrites most of its SCHED
/// ring (lost events, per processor).
#[cfg(all(feature = "per-processor", not(feature = "big-rings")))]
fn percpu(crash: Crash) -> ! {
    use crate::{DBG_MAX, EVT_FAULT, EVT_IDLE};
    platform::run_on_this_thread(&BOOT_TASK);
    crate::klog_init();
    let words = 64 * klog_runtime::REC_WORDS as usize;
    let layout = std::alloc::Layout::from_size_align(words * 8, 64).expect("ring layout");
    // SAFETY: a non-zero-sized layout; zeroed AtomicU64s are valid; never freed, as a kernel's
    // ring is not.
    let buffer = unsafe {
        let p = std::alloc::alloc_zeroed(layout).cast::<std::sync::atomic::AtomicU64>();
        assert!(!p.is_null(), "out of memory");
        std::slice::from_raw_parts(p, words)
    };
    KLOG_REGISTRY
        .attach(3 * DBG_MAX + DBG_PARCHORE.id as usize, buffer)
        .expect("a 64-record aligned buffer attaches");
    KLOG_REGISTRY.set_clock_hz(platform::CLOCK_HZ);
    oracle::announce_rings();
    on_every_cpu(|cpu| {
        for i in 0..120 {
            mixed_event(cpu, i);
            if i % 10 == 0 {
                let ns = u64::from(i) * 1000;
                crate::described!(
                    DBG_SCHED,
                    KLOG_TERSE,
                    event EVT_IDLE,
                    [cpu, ns],
                    "cpu {cpu} idle for {ns} ns"
                );
                crate::described!(DBG_FS, KLOG_TERSE, inline "sync %u", [i], "sync {i}");
                let va = 0x5000_0000u64 + u64::from(i) * 4096;
                crate::described!(
                    DBG_VM,
                    KLOG_VERBOSE,
                    event EVT_FAULT,
                    [va, 5u32],
                    "fault va={va:#x} prot=5"
                );
            }
        }
        if cpu == 1 {
            for tick in 0..3000u32 {
                event!(
                    DBG_SCHED,
                    KLOG_TERSE,
                    "cpu1 tick %u",
                    [tick],
                    "cpu1 tick {tick}"
                );
            }
        }
    });
    crash.now("abort after logging on every processor")
}
