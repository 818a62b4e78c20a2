//! The corpus kernel's crash scenarios, chosen by `klog.scenario=` on the kernel command line. Each logs through
//! klog-runtime (with an oracle line per event), leaves the rings in a known state, and panics.

use crate::chore::{self, Step, CHORES};
use crate::heap;
#[cfg(feature = "klogger")]
use crate::klogger;
use crate::oracle;
use crate::platform::{self, DBG_FS, DBG_PARCHORE, DBG_VM, KLOG_REGISTRY};
use crate::pvh::KERNEL_VMA;
use crate::smp;
use crate::Scenario;
use core::ffi::CStr;
use core::sync::atomic::{AtomicU32, Ordering};

/// A virtual address no page table maps (PDPT_HIGH[511] is not present).
const UNMAPPED: u64 = 0xffff_ffff_c000_1000;
/// Mapped by the boot page tables, but to physical 768 MiB: beyond guest RAM, so in no dump.
const NOT_IN_DUMP: u64 = KERNEL_VMA + 0x3000_0000;

/// Every scenario: its name on the command line and its body.
pub const ALL: &[(&str, Scenario)] = &[
    ("rings", rings),
    ("wrap", wrap),
    ("unfilled", unfilled),
    ("preinit", preinit),
    ("strings", strings),
    ("torn", torn),
    ("scribbled", scribbled),
    #[cfg(feature = "klog-debug")]
    ("off", off),
    ("fault", fault),
    ("smp", smp),
    #[cfg(feature = "per-processor")]
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

/// Chore `c`'s name as text, for the oracle's messages.
fn name(c: usize) -> &'static str {
    CHORES[c].name.to_str().unwrap_or("?")
}

/// Several subsystems with different ring sizes and fill levels, every level and 0-3 data
/// words, each event also echoed on the console by klog-runtime (d_klogprintf): SCHED 300 of 1024, PARCHORE 300 of 256 (wrapped), FS 100 of 128, VM 75 of 64
/// (wrapped), NONE 2 of 64.
fn rings(clock_hz: u64) -> ! {
    oracle::klog_init(clock_hz);
    // Echo every event on the console too (d_klogprintf): klog-runtime's printf interpreter
    // then prints each message right before the oracle's core::fmt version of it.
    #[cfg(feature = "klog-debug")]
    for flags in &platform::DebugFlags {
        use klog_runtime::intensity::{D_KLOGPRINTF, D_PROLOG, D_TERSE, D_VERBOSE};
        flags.set(D_KLOGPRINTF | D_TERSE | D_VERBOSE | D_PROLOG);
    }
    event!(DBG_NONE, KLOG_TERSE, "klog: %d rings ready", 5u64; "klog: 5 rings ready");
    chore::run(&[0, 1, 2, 3], |c, step| {
        let task = chore::ccb_addr(c) ^ (step << 4);
        let pd = (step % 7) as i32 - 3;
        event!(DBG_SCHED, KLOG_VERBOSE, "postProcess: task:%016lx curPD:%d", task, pd as i64 as u64;
            "postProcess: task:{task:016x} curPD:{pd}");
        let chore_name = name(c);
        event!(DBG_PARCHORE, KLOG_PROLOG, "Entering function \"%s\" (%u)", klog_runtime::KLOG_STR!(CHORES[c].name), step;
            "Entering function \"{chore_name}\" ({step})");
        if c == 2 || (c == 3 && step % 3 == 0) {
            let offset = -(step as i64) * 4096;
            event!(DBG_FS, KLOG_TERSE, "lseek fd %d off %ld whence %c", 3 + c as u64, offset as u64, u64::from(b'S');
                "lseek fd {} off {offset} whence S", 3 + c);
        }
        if c == 1 {
            let page = 0x1000u64 * (step + 1);
            event!(DBG_VM, KLOG_TERSE, "fault at %p flags %#o", NOT_IN_DUMP + page, 0o755;
                "fault at {:#x} flags 0755", NOT_IN_DUMP + page);
        }
        if step == 74 {
            event!(DBG_NONE, KLOG_VERBOSE, "chore %-6s exits", klog_runtime::KLOG_STR!(CHORES[c].name);
                "chore {chore_name:<6} exits");
            Step::Done
        } else {
            Step::Yield
        }
    });
    panic!("scenario rings: done");
}

/// The 64-record VM ring wrapped 20 times and then some: 1297 events from three chores.
fn wrap(clock_hz: u64) -> ! {
    oracle::klog_init(clock_hz);
    let mut left = 64 * 20 + 17u64;
    chore::run(&[0, 1, 3], |c, step| {
        if left == 0 {
            return Step::Done;
        }
        left -= 1;
        event!(DBG_VM, KLOG_VERBOSE, "pageout %u of chore %s", step, klog_runtime::KLOG_STR!(CHORES[c].name);
            "pageout {step} of chore {}", name(c));
        Step::Yield
    });
    panic!("scenario wrap: done");
}

/// Rings never filled: FS 5 of 128, SCHED 3 of 1024; the others empty.
fn unfilled(clock_hz: u64) -> ! {
    oracle::klog_init(clock_hz);
    for i in 0..5u64 {
        event!(DBG_FS, KLOG_TERSE, "mount %u: %x", i, 0xabc0 + i; "mount {i}: {:x}", 0xabc0 + i);
    }
    chore::run(&[2], |_, step| {
        event!(DBG_SCHED, KLOG_TERSE, "tick"; "tick");
        if step == 2 {
            Step::Done
        } else {
            Step::Yield
        }
    });
    panic!("scenario unfilled: done");
}

/// Events of every subsystem before klog_init (they land in NONE's ring with their own
/// header), then more events after it.
fn preinit(clock_hz: u64) -> ! {
    for i in 0..3u64 {
        event!(DBG_SCHED, KLOG_TERSE, "early sched %u", i; "early sched {i}");
        event!(DBG_FS, KLOG_TERSE, "early fs %u", i; "early fs {i}");
        event!(DBG_VM, KLOG_TERSE, "early vm %u", i; "early vm {i}");
        event!(DBG_PARCHORE, KLOG_TERSE, "early parchore %u", i; "early parchore {i}");
    }
    event!(DBG_NONE, KLOG_TERSE, "early none"; "early none");
    oracle::klog_init(clock_hz);
    event!(DBG_NONE, KLOG_TERSE, "klog_init done"; "klog_init done");
    chore::run(&[0, 1, 2, 3], |c, step| {
        event!(DBG_SCHED, KLOG_TERSE, "late sched %u", step; "late sched {step}");
        if c == 2 {
            event!(DBG_FS, KLOG_TERSE, "late fs %u", step; "late fs {step}");
        }
        if step == 4 {
            Step::Done
        } else {
            Step::Yield
        }
    });
    panic!("scenario preinit: done");
}

/// `%s` arguments at static strings, at strings built at run time in the heap arena and on the
/// stack, at NULL, at an unmapped address and at a mapped address outside guest RAM.
fn strings(clock_hz: u64) -> ! {
    use klog_runtime::KLOG_STR;
    oracle::klog_init(clock_hz);
    event!(DBG_FS, KLOG_TERSE, "open %s", KLOG_STR!(c"/etc/motd"); "open /etc/motd");
    event!(DBG_FS, KLOG_VERBOSE, "read lock %s, line %d", KLOG_STR!(c"fs/lock.c"), 211;
        "read lock fs/lock.c, line 211");
    let mut heap_names = [c""; 3];
    chore::run(&[1, 2, 3], |c, step| {
        let path = heap::format_cstr(format_args!(
            "/proc/{}/chore-{}",
            step + 10 * c as u64,
            name(c)
        ));
        heap_names[c - 1] = path;
        let text = path.to_str().expect("ASCII");
        event!(DBG_FS, KLOG_TERSE, "doloadTask -> %s (%d)", KLOG_STR!(path), c as u64;
            "doloadTask -> {text} ({c})");
        if step == 1 {
            Step::Done
        } else {
            Step::Yield
        }
    });
    // A NUL-terminated string in this frame, which is live when the kernel panics below.
    let mut stack = *b"stack:chore-name-000\0";
    for (i, digit) in [b'4', b'2', b'7'].into_iter().enumerate() {
        stack[17 + i] = digit;
    }
    let stack_str = CStr::from_bytes_with_nul(&stack).expect("one NUL");
    event!(DBG_SCHED, KLOG_TERSE, "switch to %s from %s", KLOG_STR!(stack_str), KLOG_STR!(c"idle");
        "switch to stack:chore-name-427 from idle");
    event!(DBG_SCHED, KLOG_TERSE, "null name %s", 0; "null name (null)");
    event!(DBG_VM, KLOG_TERSE, "map %s at %p", UNMAPPED, 0x2000;
        "map <unreadable {UNMAPPED:#x}> at 0x2000");
    event!(DBG_VM, KLOG_TERSE, "map %s at %p", NOT_IN_DUMP, 0x3000;
        "map <unreadable {NOT_IN_DUMP:#x}> at 0x3000");
    event!(DBG_VM, KLOG_TERSE, "two strings %s and %.3s", KLOG_STR!(heap_names[0]), KLOG_STR!(c"truncated");
        "two strings {} and tru", heap_names[0].to_str().expect("ASCII"));
    // Keep the stack string's frame (and its bytes) alive through the panic.
    core::hint::black_box(&stack);
    panic!("scenario strings: done");
}

/// Writers interrupted mid-record: a slot of the wrapped PARCHORE ring (over an old record) and
/// the slot after the last record of FS, each reserved with its header zeroed and never finished.
fn torn(clock_hz: u64) -> ! {
    oracle::klog_init(clock_hz);
    chore::run(&[0, 3], |c, step| {
        event!(DBG_PARCHORE, KLOG_PROLOG, "Leaving function \"%s\"", klog_runtime::KLOG_STR!(c"HashChainInt::hash");
            "Leaving function \"HashChainInt::hash\"");
        if c == 3 && step % 15 == 0 {
            event!(DBG_FS, KLOG_TERSE, "sync %u", step; "sync {step}");
        }
        if step == 149 {
            Step::Done
        } else {
            Step::Yield
        }
    });
    for sub in [DBG_PARCHORE, DBG_FS] {
        let ring = sub.ring_here();
        let seq = KLOG_REGISTRY.reserve_torn(ring);
        kprintln!(
            "KLOG-TORN ring={ring} subsys={} seq={seq} at={:#x}",
            sub.id,
            oracle::record_at(ring, seq)
        );
    }
    panic!("scenario torn: writer interrupted mid-record");
}

/// KLogs entries scribbled over while KLogBuffer stays intact: FS's next_write and VM's buffer
/// pointer hold garbage; SCHED is untouched.
fn scribbled(clock_hz: u64) -> ! {
    oracle::klog_init(clock_hz);
    chore::run(&[1, 2], |_, step| {
        event!(DBG_FS, KLOG_TERSE, "write block %u", step; "write block {step}");
        event!(DBG_VM, KLOG_TERSE, "alloc page %#x", 0x1000 * (step + 1); "alloc page {:#x}", 0x1000 * (step + 1));
        event!(DBG_SCHED, KLOG_TERSE, "yield %u", step; "yield {step}");
        if step == 9 {
            Step::Done
        } else {
            Step::Yield
        }
    });
    let logs = &platform::KLogs;
    let next_write = 0xdead_beef_dead_beef_u64;
    logs[DBG_FS.id as usize]
        .next_write
        .store(next_write, Ordering::Relaxed);
    kprintln!(
        "KLOG-DAMAGE ring={} kind=scribbled field=next_write value={next_write:#x}",
        DBG_FS.id
    );
    let buffer = 0x4141_4141_4141_4141_u64;
    logs[DBG_VM.id as usize]
        .buffer
        .store(buffer as *mut u64, Ordering::Relaxed);
    kprintln!(
        "KLOG-DAMAGE ring={} kind=scribbled field=buffer value={buffer:#x}",
        DBG_VM.id
    );
    panic!("scenario scribbled: KLogs overwritten");
}

/// Logging switched off at run time (klogLevel = KLOG_OFF): every event is refused and every
/// ring stays empty.
#[cfg(feature = "klog-debug")]
fn off(clock_hz: u64) -> ! {
    oracle::klog_init(clock_hz);
    KLOG_REGISTRY.set_level(klog_runtime::KLOG_OFF);
    chore::run(&[0, 1, 2, 3], |c, step| {
        event!(DBG_SCHED, KLOG_TERSE, "refused %u", step; "refused {step}");
        event!(DBG_FS, KLOG_PROLOG, "refused too"; "refused too");
        if step == 1 || c == 0 {
            Step::Done
        } else {
            Step::Yield
        }
    });
    panic!("scenario off: nothing logged");
}

/// A real fault instead of a call to panic: after a few events the kernel reads an unmapped
/// address; the page fault handler turns it into the panic.
fn fault(clock_hz: u64) -> ! {
    oracle::klog_init(clock_hz);
    chore::run(&[1], |_, step| {
        event!(DBG_VM, KLOG_TERSE, "pager step %u", step; "pager step {step}");
        if step == 3 {
            Step::Done
        } else {
            Step::Yield
        }
    });
    event!(DBG_VM, KLOG_TERSE, "touching %p", UNMAPPED; "touching {UNMAPPED:#x}");
    // SAFETY: none: this read faults, on purpose.
    let value = unsafe { (UNMAPPED as *const u64).read_volatile() };
    panic!("read {value:#x} from an unmapped address");
}

/// Application processors that printed their line.
static CHECKED_IN: AtomicU32 = AtomicU32::new(0);

/// Every processor QEMU provides (`-smp N`) prints a line from Rust: the boot processor, then
/// each application processor `smp::start_aps` started; the boot processor waits (at most a
/// second) for all of them, then panics while they halt. No logging.
fn smp(_clock_hz: u64) -> ! {
    kprintln!("KCRASH-SMP cpu {} boots", smp::this_cpu());
    let started = smp::start_aps(check_in);
    platform::spin_until(1_000_000, || CHECKED_IN.load(Ordering::Acquire) == started);
    let checked_in = CHECKED_IN.load(Ordering::Acquire);
    panic!("scenario smp: {started} application processors started, {checked_in} checked in");
}

fn check_in(cpu: u32) -> ! {
    kprintln!("KCRASH-SMP cpu {cpu} runs (this_cpu {})", smp::this_cpu());
    CHECKED_IN.fetch_add(1, Ordering::Release);
    smp::halt()
}

/// Application processors that finished logging.
#[cfg(feature = "per-processor")]
static LOGGED: AtomicU32 = AtomicU32::new(0);

/// Every processor QEMU provides logs into its own ring set at once: the boot processor's chores
/// and each application processor; processor 1 overwrites its 1024-record SCHED ring. The boot
/// processor waits (at most 20 s) for the others, then panics.
#[cfg(feature = "per-processor")]
fn percpu(clock_hz: u64) -> ! {
    oracle::klog_init(clock_hz);
    let started = smp::start_aps(log_on_this_processor);
    chore::run(&[0, 1, 2, 3], |c, step| {
        event!(DBG_SCHED, KLOG_TERSE, "chore %u step %u on cpu 0", c as u64, step;
            "chore {c} step {step} on cpu 0");
        if step == 49 {
            Step::Done
        } else {
            Step::Yield
        }
    });
    platform::spin_until(20_000_000, || LOGGED.load(Ordering::Acquire) == started);
    let logged = LOGGED.load(Ordering::Acquire);
    panic!("scenario percpu: {started} application processors started, {logged} logged");
}

#[cfg(feature = "per-processor")]
fn log_on_this_processor(cpu: u32) -> ! {
    let cpu = u64::from(cpu);
    for i in 0..100u64 {
        event!(DBG_SCHED, KLOG_TERSE, "cpu %u tick %u", cpu, i; "cpu {cpu} tick {i}");
        if i % 4 == 0 {
            event!(DBG_FS, KLOG_VERBOSE, "cpu %u flush %u", cpu, i / 4; "cpu {cpu} flush {}", i / 4);
        }
    }
    if cpu == 1 {
        for i in 0..1500u64 {
            event!(DBG_SCHED, KLOG_TERSE, "cpu1 spin %u", i; "cpu1 spin {i}");
        }
    }
    LOGGED.fetch_add(1, Ordering::Release);
    smp::halt()
}
