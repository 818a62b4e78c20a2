//! DProbes scenarios: probes log records into the trace buffers of `dprobes-writer`, reading
//! memory the way DProbes' event handler does — a fault during a probe's read is caught (the
//! page fault or general protection handler resumes at the read's fixup) and logged as the
//! fault token, never fatal. See tests/kernels/README.md.

use crate::chore::CHORES;
use crate::platform;
use crate::serial::Console;
use core::arch::{asm, global_asm};
use core::ffi::CStr;
use core::sync::atomic::{AtomicU64, Ordering};
use dprobes_writer::probes::{self, Machine};
use dprobes_writer::{self as dp, Fault, Header, Reader};

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
            (GENERAL_PROTECTION, Some(sel)) => {
                Fault::Selector(if detail != 0 { detail as u16 } else { sel })
            }
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

/// The boot processor, whose chores play the processes.
struct Bare;

// SAFETY: only the boot processor runs the DProbes scenarios, one probe at a time.
unsafe impl Machine for Bare {
    fn cpu(&self) -> usize {
        0
    }

    fn header(&self, task: usize) -> Header<'static> {
        let (cs, ss): (u16, u16);
        let (rsp, rip): (u64, u64);
        // SAFETY: reads of segment registers, the stack pointer and the instruction pointer.
        unsafe {
            asm!("mov {0:x}, cs", "mov {1:x}, ss", "mov {2}, rsp", "lea {3}, [rip]",
                out(reg) cs, out(reg) ss, out(reg) rsp, out(reg) rip,
                options(nomem, nostack, preserves_flags));
        }
        Header {
            cpu: 0,
            pid: task as u32 + 1,
            uid: 1000,
            cs: cs.into(),
            eip: rip,
            ss: ss.into(),
            esp: rsp,
            tsc: platform::rdtsc(),
            name: CHORES[task].name.to_bytes(),
            ..Header::default()
        }
    }

    fn task_name(&self, task: usize) -> &'static CStr {
        CHORES[task].name
    }

    fn tasks(&self) -> usize {
        CHORES.len()
    }

    fn now(&self) -> u64 {
        platform::rdtsc()
    }

    fn console(&self) -> impl core::fmt::Write {
        Console::lock()
    }
}

/// KLog started and left empty (so the KLog oracle holds for these dumps too), then the trace.
fn init(clock_hz: u64) {
    crate::oracle::klog_init(clock_hz);
    dp::init(1, clock_hz, &mut Console::lock());
}

/// A few rounds of every probe: the buffer far from full.
pub fn plain(clock_hz: u64) -> ! {
    init(clock_hz);
    for i in 0..6 {
        probes::round(&Bare, &Probing, i);
    }
    panic!("scenario dprobes-plain: done");
}

/// Ticks until the 8 KiB buffer has wrapped several times: the oldest records overwritten.
pub fn wrap(clock_hz: u64) -> ! {
    init(clock_hz);
    probes::round(&Bare, &Probing, 0);
    probes::ticks(&Bare, 600);
    probes::round(&Bare, &Probing, 1);
    panic!("scenario dprobes-wrap: done");
}

/// Reads that fault, logged as the fault tokens: a flat address no page table maps (-1), and
/// a selector past the GDT's end (-2, from the general protection fault its load raises); and
/// the same reads through good addresses and the kernel's data selector, which succeed.
pub fn faults(clock_hz: u64) -> ! {
    init(clock_hz);
    probes::round(&Bare, &Probing, 0);
    probes::flat_faults(&Bare, &Probing, UNMAPPED);
    let page = *b"page contents, read through a selector\0";
    let offset = page.as_ptr() as u64;
    for selector in [BAD_SELECTOR, DATA_SELECTOR] {
        let mut p = probes::enter(&Bare, dp::F_CS | dp::F_SS, 2, 2, 3);
        p.log_hex("seg", 2, selector.into())
            .log_mrs("data", &Probing, selector, offset, 8);
        if selector == BAD_SELECTOR {
            let msg = format_args!("seg={selector:04x} data=<bad selector {selector:#x}>\n");
            probes::exit(&Bare, p, "segread", msg);
        } else {
            let msg = format_args!("seg={selector:04x} data={}\n", dp::Dump(&page[..8]));
            probes::exit(&Bare, p, "segread", msg);
        }
    }
    let mut p = probes::enter(&Bare, 0, 2, 1, 0);
    p.log_ars("from", &Probing, BAD_SELECTOR, offset, 16)
        .log_ars("to", &Probing, DATA_SELECTOR, offset, 8)
        .log("prio", 1, 7);
    let msg = format_args!("from=<bad selector {BAD_SELECTOR:#x}> to=page con prio=7\n");
    probes::exit(&Bare, p, "switch", msg);
    core::hint::black_box(&page);
    panic!("scenario dprobes-faults: done");
}

/// The buffer wrapped, then its control scribbled on: `tail` past `head`, and `written` less
/// than `overwritten`. The records themselves are intact.
pub fn damaged(clock_hz: u64) -> ! {
    init(clock_hz);
    for n in 0..300 {
        probes::round(&Bare, &Probing, n);
    }
    let mut console = Console::lock();
    let head = dp::dprobes_trace.buffers[0].head.load(Ordering::Relaxed);
    dp::scribble(0, dp::Control::Tail, head + 0x10_0000, &mut console);
    dp::scribble(0, dp::Control::Written, 3, &mut console);
    drop(console);
    panic!("scenario dprobes-damaged: control scribbled");
}
