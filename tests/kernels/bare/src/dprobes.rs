//! DProbes scenarios: probes log records into the trace buffers of `dprobes-writer`, reading
//! memory the way DProbes' event handler does — a fault during a probe's read is caught (the
//! page fault or general protection handler resumes at the read's fixup) and logged as the
//! fault token, never fatal. See tests/kernels/README.md.

use crate::chore::CHORES;
use crate::platform;
use crate::serial::Console;
use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicU64, Ordering};
use dprobes_writer::{self as dp, Fault, Header, Probe, Reader};

/// A virtual address no page table maps (as in scenarios.rs).
const UNMAPPED: u64 = 0xffff_ffff_c000_1000;
/// A selector past the end of the GDT (three entries): loading it raises #GP(0x28).
const BAD_SELECTOR: u16 = 0x28;
/// The kernel's data segment: base 0, so `0x10:offset` is the flat address `offset`.
const DATA_SELECTOR: u16 = 0x10;

global_asm!(
    r#"
    .text
    .p2align 4
/* u64 dprobes_read_byte(u64 addr): the byte at addr, or bit 63 | the vector if it faulted. */
dprobes_read_byte:
    xor %eax, %eax
dprobes_read_byte_at:
    movzbl (%rdi), %eax
    ret
/* u64 dprobes_read_seg_byte(u64 selector, u64 offset): the byte at selector:offset (through
   %fs, which nothing else uses), or bit 63 | the vector if loading the selector or reading
   faulted. */
dprobes_read_seg_byte:
    xor %eax, %eax
dprobes_read_seg_load:
    mov %di, %fs
dprobes_read_seg_at:
    movzbl %fs:(%rsi), %eax
    xor %ecx, %ecx
    mov %cx, %fs
    ret
/* Where a faulting read resumes: the exception handler put the vector in %rax. */
dprobes_read_fault:
    bts $63, %rax
    xor %ecx, %ecx
    mov %cx, %fs
    ret
"#,
    options(att_syntax)
);

extern "C" {
    fn dprobes_read_byte(addr: u64) -> u64;
    fn dprobes_read_seg_byte(selector: u64, offset: u64) -> u64;
    static dprobes_read_byte_at: u8;
    static dprobes_read_seg_load: u8;
    static dprobes_read_seg_at: u8;
    static dprobes_read_fault: u8;
}

/// The last recovered fault: the faulting address (page fault) or error code (#GP).
static FAULT_DETAIL: AtomicU64 = AtomicU64::new(0);

const PAGE_FAULT: u64 = 14;
const GENERAL_PROTECTION: u64 = 13;
const FAULTED: u64 = 1 << 63;

/// Called by the exception handler: where to resume if the fault is a probe's read.
pub fn recover(vector: u64, error: u64, rip: u64, cr2: u64) -> Option<u64> {
    let reads = [
        &raw const dprobes_read_byte_at,
        &raw const dprobes_read_seg_load,
        &raw const dprobes_read_seg_at,
    ];
    if !reads.iter().any(|&r| r as u64 == rip) {
        return None;
    }
    let detail = match vector {
        PAGE_FAULT => cr2,
        GENERAL_PROTECTION => error,
        _ => return None,
    };
    FAULT_DETAIL.store(detail, Ordering::Relaxed);
    Some(&raw const dprobes_read_fault as u64)
}

/// Reads as the probe handler does: byte by byte, each fault caught.
struct Probing;

impl Probing {
    fn fault(result: u64, selector: Option<u16>) -> Fault {
        let detail = FAULT_DETAIL.load(Ordering::Relaxed);
        match (result & !FAULTED, selector) {
            (GENERAL_PROTECTION, Some(sel)) => Fault::Selector(if detail != 0 {
                detail as u16
            } else {
                sel
            }),
            _ => Fault::Flat(detail),
        }
    }
}

impl Reader for Probing {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        for (i, b) in buf.iter_mut().enumerate() {
            // SAFETY: a fault in the read is recovered by `recover`.
            let v = unsafe { dprobes_read_byte(addr.wrapping_add(i as u64)) };
            if v & FAULTED != 0 {
                return Err(Self::fault(v, None));
            }
            *b = v as u8;
        }
        Ok(())
    }

    fn read_segmented(&self, selector: u16, offset: u64, buf: &mut [u8]) -> Result<(), Fault> {
        for (i, b) in buf.iter_mut().enumerate() {
            // SAFETY: as in `read`; %fs is reset to the null selector after.
            let v = unsafe {
                dprobes_read_seg_byte(u64::from(selector), offset.wrapping_add(i as u64))
            };
            if v & FAULTED != 0 {
                return Err(Self::fault(v, Some(selector)));
            }
            *b = v as u8;
        }
        Ok(())
    }
}

/// Every header item.
const ALL_ITEMS: u32 = 0x07ff;

/// A probe on the boot processor for `(major, minor)` with the header items `flags` selects,
/// filled from the processor's real state; `chore` plays the process.
fn enter(flags: u32, major: u32, minor: u32, chore: usize) -> Probe<'static> {
    let (cs, ss): (u16, u16);
    let (rsp, rip): (u64, u64);
    // SAFETY: reads of segment registers, the stack pointer and the instruction pointer.
    unsafe {
        asm!("mov {0:x}, cs", "mov {1:x}, ss", "mov {2}, rsp", "lea {3}, [rip]",
            out(reg) cs, out(reg) ss, out(reg) rsp, out(reg) rip,
            options(nomem, nostack, preserves_flags));
    }
    let header = Header {
        flags: flags | dp::F_MAJOR | dp::F_MINOR,
        major,
        minor,
        cpu: 0,
        pid: chore as u32 + 1,
        uid: 1000,
        cs: cs.into(),
        eip: rip,
        ss: ss.into(),
        esp: rsp,
        tsc: platform::rdtsc(),
        name: CHORES[chore].name.to_bytes(),
    };
    // SAFETY: only the boot processor logs, one probe at a time.
    unsafe { Probe::enter(0, header) }
}

fn exit(p: Probe, name: &str, msg: core::fmt::Arguments) {
    let time = platform::rdtsc();
    p.exit(time, name, msg, &mut Console::lock());
}

fn init(clock_hz: u64) {
    dp::init(1, clock_hz, &mut Console::lock());
}

/// Paths the `open` probe logs: static strings of the image.
const PATHS: [&core::ffi::CStr; 4] = [c"/etc/motd", c"/var/log/messages", c"/dev/ttyS0", c""];

/// One round of every probe with successful reads: `i` varies the values and the header items.
fn round(i: u64) {
    let flags = [ALL_ITEMS, 0, dp::F_PID | dp::F_TSC, dp::F_NAME | dp::F_CPU][i as usize % 4];
    let chore = i as usize % CHORES.len();
    let path = PATHS[i as usize % PATHS.len()];
    let fd = 3 + i % 5;
    let mut p = enter(flags, 1, 1, chore);
    p.log("fd", 4, fd).log_arf("path", &Probing, path.as_ptr() as u64, 64);
    let text = path.to_str().unwrap_or("?");
    exit(p, "open", format_args!("fd={fd} path={text}\n"));

    let buf = *b"klog\x00\x01\xfe line";
    let count = 1 + i % buf.len() as u64;
    let mut p = enter(flags, 1, 2, chore);
    p.log("fd", 4, fd)
        .log("count", 2, count)
        .log_mrf("buf", &Probing, buf.as_ptr() as u64, count as u16);
    let data = &buf[..count as usize];
    exit(p, "read", format_args!("fd={fd} count={count} buf={}\n", dp::Dump(data)));

    let off = -(i as i64) * 4096 + 17;
    let mut p = enter(flags, 1, 3, chore);
    p.log("fd", 4, fd).log_signed("off", 8, off).log_char("whence", b"SCE"[i as usize % 3]);
    let whence = b"SCE"[i as usize % 3] as char;
    exit(p, "seek", format_args!("fd={fd} off={off} whence={whence}\n"));

    let args = [0x5401u32, i as u32, 0xdead];
    let words: usize = 1 + i as usize % 3;
    let mut p = enter(flags, 1, 5, chore);
    p.log("fd", 4, fd);
    // `%r(%4x)` over a prefixed array of `words` double-words.
    p.log_mrf_words("args", &Probing, args.as_ptr() as u64, words as u16);
    exit(
        p,
        "ioctl",
        format_args!("fd={fd} args={}\n", Words(&args[..words])),
    );

    let from = CHORES[chore].name;
    let to = CHORES[(chore + 1) % CHORES.len()].name;
    let prio = (i % 40) as u8;
    let mut p = enter(flags | dp::F_CS | dp::F_EIP, 2, 1, chore);
    p.log_arf("from", &Probing, from.as_ptr() as u64, 16)
        .log_arf("to", &Probing, to.as_ptr() as u64, 16)
        .log("prio", 1, prio.into());
    exit(
        p,
        "switch",
        format_args!(
            "from={} to={} prio={prio}\n",
            from.to_str().unwrap_or("?"),
            to.to_str().unwrap_or("?")
        ),
    );
}

/// `%4x` each, as `%r(%4x)` formats them.
struct Words<'a>(&'a [u32]);

impl core::fmt::Display for Words<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        self.0.iter().try_for_each(|w| write!(f, "{w:08x}"))
    }
}

/// A few rounds of every probe: the buffer far from full.
pub fn plain(clock_hz: u64) -> ! {
    init(clock_hz);
    for i in 0..6 {
        round(i);
    }
    panic!("scenario dprobes-plain: done");
}

/// Ticks until the 8 KiB buffer has wrapped several times: the oldest records overwritten.
pub fn wrap(clock_hz: u64) -> ! {
    init(clock_hz);
    round(0);
    for n in 0..600u64 {
        let mut p = enter(dp::F_TSC, 2, 3, n as usize % CHORES.len());
        p.log("n", 8, n);
        exit(p, "tick", format_args!("n={n}\n"));
    }
    round(1);
    panic!("scenario dprobes-wrap: done");
}

/// Reads that fault, logged as the fault tokens: a flat address no page table maps (-1), and
/// a selector past the GDT's end (-2, from the general protection fault its load raises); and
/// the same reads through good addresses and the kernel's data selector, which succeed.
pub fn faults(clock_hz: u64) -> ! {
    init(clock_hz);
    round(0);
    let page = *b"page contents, read through a selector\0";
    for (n, va) in [(0u64, UNMAPPED), (1, page.as_ptr() as u64), (2, UNMAPPED + 0x7ff)] {
        let mut p = enter(dp::F_PID, 1, 4, 1);
        p.log_hex("va", 8, va).log_mrf("data", &Probing, va, 16);
        let data = if n == 1 { Ok(&page[..16]) } else { Err(va) };
        match data {
            Ok(d) => exit(p, "fault", format_args!("va={va:016x} data={}\n", dp::Dump(d))),
            Err(at) => exit(
                p,
                "fault",
                format_args!("va={va:016x} data=<faulted read (flat address) at {at:#x}>\n"),
            ),
        }
    }
    let mut p = enter(dp::F_NAME, 1, 1, 2);
    p.log("fd", 4, 9).log_arf("path", &Probing, UNMAPPED + 0x10, 64);
    exit(
        p,
        "open",
        format_args!(
            "fd=9 path=<faulted read (flat address) at {:#x}>\n",
            UNMAPPED + 0x10
        ),
    );
    for selector in [BAD_SELECTOR, DATA_SELECTOR] {
        let mut p = enter(dp::F_CS | dp::F_SS, 2, 2, 3);
        p.log_hex("seg", 2, selector.into()).log_mrs(
            "data",
            &Probing,
            selector,
            page.as_ptr() as u64,
            8,
        );
        if selector == BAD_SELECTOR {
            exit(
                p,
                "segread",
                format_args!("seg={selector:04x} data=<bad selector {selector:#x}>\n"),
            );
        } else {
            exit(
                p,
                "segread",
                format_args!("seg={selector:04x} data={}\n", dp::Dump(&page[..8])),
            );
        }
    }
    let mut p = enter(0, 2, 1, 0);
    p.log_ars("from", &Probing, BAD_SELECTOR, page.as_ptr() as u64, 16)
        .log_ars("to", &Probing, DATA_SELECTOR, page.as_ptr() as u64, 8)
        .log("prio", 1, 7);
    exit(
        p,
        "switch",
        format_args!("from=<bad selector {BAD_SELECTOR:#x}> to=page con prio=7\n"),
    );
    core::hint::black_box(&page);
    panic!("scenario dprobes-faults: done");
}

/// The buffer wrapped, then its control scribbled on: `tail` past `head`, and `written` less
/// than `overwritten`. The records themselves are intact.
pub fn damaged(clock_hz: u64) -> ! {
    init(clock_hz);
    for n in 0..300u64 {
        round(n);
    }
    let mut console = Console::lock();
    let head = dp::dprobes_trace.buffers[0].head.load(Ordering::Relaxed);
    dp::scribble(0, dp::Control::Tail, head + 0x10_0000, &mut console);
    dp::scribble(0, dp::Control::Written, 3, &mut console);
    drop(console);
    panic!("scenario dprobes-damaged: control scribbled");
}
