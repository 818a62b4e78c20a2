//! arm64 Linux's frame records: every kernel function that calls another stores its caller's
//! frame pointer (x29) and its return address (x30) as a pair, and points x29 at it. The kernel
//! is built so (arm64 Linux walks its own stacks this way, exception entries included: their
//! `struct pt_regs` holds a record of the interrupted pc, and the task's first has zeros).
//! Return addresses may carry a pointer-authentication code in their top bits, taken off before
//! use as the kernel does.

use super::{saved, Caller, Frame, How, Registers, Step, Unwinder, PC, SP, X29};
use dumpfmt::Machine;
use symbols::ImageSet;

use crate::memory::Memory;

/// How far above the stack pointer a frame record may be: more than any frame's locals.
const MAX_FRAME: u64 = 1 << 20;
/// arm64 Linux's task, IRQ and overflow stacks: 16 KiB each (4 KiB pages), aligned to their
/// size. A record on another block is on another stack.
const STACK_SIZE: u64 = 16 << 10;

pub struct FrameRecords<'a> {
    /// A return address must be in one of them: a word that points elsewhere is no return
    /// address, and x29 was no frame record.
    pub images: &'a ImageSet,
    pub mem: &'a dyn Memory,
    /// The kernel's virtual address size (VMCOREINFO's `VA_BITS`): the bits above it of a
    /// return address are its authentication code.
    pub va_bits: u32,
    /// How to tell the records exception entries make, when the kernel's symbols and DWARF say.
    pub exceptions: Option<ExceptionEntries>,
}

/// arm64 Linux's exception entries (`el1h_64_irq`, `el0t_64_sync`, … in the entry text) save the
/// interrupted context in a `struct pt_regs` on the stack and point x29 at the frame record
/// inside it, `{interrupted x29, ELR}` (zeros when user space was interrupted). From a frame in
/// the entry text, x29 is that record.
#[derive(Debug, Clone, Copy)]
pub struct ExceptionEntries {
    /// `[__entry_text_start, __entry_text_end)`.
    pub text: (u64, u64),
    /// `offsetof(struct pt_regs, stackframe)`: it moved between releases.
    pub record: u64,
    /// The exception vector table (`vectors`), where a CPU taking an exception starts.
    pub vectors: Option<u64>,
}

/// The vector table: 16 entries of 128 bytes, one for each kind of exception from each kind of
/// context (the architecture's layout, the same in every release).
const VECTOR_ENTRY: u64 = 0x80;
const VECTOR_KINDS: [&str; 4] = ["a synchronous exception", "an IRQ", "an FIQ", "an SError"];
/// Where the exception came from, by group of four entries; the last two are user space.
const VECTOR_FROM: [&str; 4] = [
    "the kernel on SP_EL0 (EL1t)",
    "the kernel (EL1h)",
    "64-bit user space (EL0)",
    "32-bit user space (EL0)",
];

/// `struct user_pt_regs` (the start of `struct pt_regs`, user-space ABI): x0–x30, sp, pc,
/// pstate.
pub mod pt_regs {
    pub const X29: u64 = 29 * 8;
    pub const LR: u64 = 30 * 8;
    pub const SP: u64 = 31 * 8;
    pub const PC: u64 = 32 * 8;
    pub const PSTATE: u64 = 33 * 8;
    /// PSTATE's mode field: 0 is EL0 (user space).
    pub const MODE_MASK: u64 = 0xf;
    /// Every field in crash's order of printing: its name as crash prints it and its offset.
    pub const FIELDS: [(&str, u64); 34] = [
        ("PC", PC),
        ("LR", LR),
        ("SP", SP),
        ("PSTATE", PSTATE),
        ("X29", X29),
        ("X28", 28 * 8),
        ("X27", 27 * 8),
        ("X26", 26 * 8),
        ("X25", 25 * 8),
        ("X24", 24 * 8),
        ("X23", 23 * 8),
        ("X22", 22 * 8),
        ("X21", 21 * 8),
        ("X20", 20 * 8),
        ("X19", 19 * 8),
        ("X18", 18 * 8),
        ("X17", 17 * 8),
        ("X16", 16 * 8),
        ("X15", 15 * 8),
        ("X14", 14 * 8),
        ("X13", 13 * 8),
        ("X12", 12 * 8),
        ("X11", 11 * 8),
        ("X10", 10 * 8),
        ("X9", 9 * 8),
        ("X8", 8 * 8),
        ("X7", 7 * 8),
        ("X6", 6 * 8),
        ("X5", 5 * 8),
        ("X4", 4 * 8),
        ("X3", 3 * 8),
        ("X2", 2 * 8),
        ("X1", 8),
        ("X0", 0),
    ];
}

/// `lr` without its pointer-authentication code, for a machine whose virtual addresses have
/// `va_bits` bits: a kernel address (bit 55 set) with every bit above them set, any other with
/// them clear, as the kernel takes the code off.
pub fn strip_authentication(lr: u64, va_bits: u32) -> u64 {
    let mask = match 1u64.checked_shl(va_bits) {
        Some(top) => top - 1,
        None => return lr,
    };
    if lr & (1 << 55) != 0 {
        lr | !mask
    } else {
        lr & mask
    }
}

impl Unwinder for FrameRecords<'_> {
    fn caller(&self, frame: &Frame, registers: &Registers) -> Step {
        let gap = match self.in_vectors(frame) {
            None => return self.record(frame, registers, true),
            Some(Err(outermost)) => return outermost,
            Some(Ok(gap)) => gap,
        };
        // x29 is the interrupted code's: its record, not an entry's `struct pt_regs`.
        match self.record(frame, registers, false) {
            Step::Caller(mut caller) => {
                caller.gap = Some(gap);
                Step::Caller(caller)
            }
            Step::Lost(why) => Step::Lost(format!("{gap}; {why}")),
            Step::Outermost { why, exception } => Step::Outermost {
                why: format!("{gap}; {why}"),
                exception,
            },
        }
    }
}

impl FrameRecords<'_> {
    /// The caller by the frame record at x29; with `entries`, the `struct pt_regs` around it
    /// when the frame is in the entry text.
    fn record(&self, frame: &Frame, registers: &Registers, entries: bool) -> Step {
        let Some(fp) = registers.get(X29) else {
            return Step::Lost("x29 is unknown".into());
        };
        if fp == 0 {
            return Step::Outermost {
                why: "x29 is 0: the outermost frame".into(),
                exception: None,
            };
        }
        // On this frame's stack above it, or on another stack (an IRQ stack's record of the
        // task stack it came from).
        let new_stack = fp / STACK_SIZE != frame.sp / STACK_SIZE;
        let above = fp >= frame.sp && fp - frame.sp <= MAX_FRAME;
        if !(above || new_stack) || fp % 16 != 0 {
            return Step::Lost(format!(
                "x29 {fp:#x} is no frame record on the stack at {:#x}",
                frame.sp
            ));
        }
        let read = |at: u64, what: &str| saved(self.mem, what, at);
        let record = match (
            read(fp, "the saved x29"),
            read(fp.wrapping_add(8), "the return address"),
        ) {
            (Ok(f), Ok(lr)) => (f, lr),
            (Err(why), _) | (_, Err(why)) => return Step::Lost(why),
        };
        if let Some(entries) = self.exceptions.filter(|_| entries) {
            let (start, end) = entries.text;
            if (start..end).contains(&frame.lookup_pc()) {
                return self
                    .interrupted(frame, fp, record, fp.wrapping_sub(entries.record))
                    .unwrap_or_else(Step::Lost);
            }
        }
        let (caller_fp, lr) = (record.0, strip_authentication(record.1, self.va_bits));
        if lr == 0 && caller_fp == 0 {
            return Step::Outermost {
                why: "the frame record is zeros: the task's outermost frame".into(),
                exception: None,
            };
        }
        if self.images.image_at(lr.wrapping_sub(4)).is_none() {
            return Step::Lost(format!(
                "x29 {fp:#x} is no frame record: its return address {lr:#x} is in no image"
            ));
        }
        let mut caller = registers.callee_saved();
        caller.set(X29, Some(caller_fp));
        // The record is at the bottom of its function's frame: the caller's stack pointer is at
        // least past it.
        caller.set(SP, Some(fp.wrapping_add(16)));
        caller.set(PC, Some(lr));
        Step::Caller(Box::new(Caller {
            registers: caller,
            how: How::FramePointer,
            interrupted: false,
            trampoline: false,
            new_stack,
            exception: None,
            gap: None,
        }))
    }

    /// A CPU stopped in the vector table is taking an exception and has saved nothing of what it
    /// interrupted: x29 and sp are still the interrupted code's, and its pc is in ELR_EL1, which
    /// no dump holds. From user space that is the kernel's outermost frame (`Err`); from the
    /// kernel the walk goes on from x29's record across a gap (`Ok`, why): the interrupted
    /// function, and any it called that made no record, are unknown.
    fn in_vectors(&self, frame: &Frame) -> Option<Result<String, Step>> {
        let vectors = self.exceptions?.vectors?;
        let entry = frame.pc.checked_sub(vectors)? / VECTOR_ENTRY;
        let (Ok(entry), true) = (usize::try_from(entry), frame.exact) else {
            return None;
        };
        let from = *VECTOR_FROM.get(entry / VECTOR_KINDS.len())?;
        let kind = VECTOR_KINDS[entry % VECTOR_KINDS.len()];
        let taking = format!("the CPU is in the exception vectors, taking {kind} from {from}");
        Some(if entry / VECTOR_KINDS.len() >= 2 {
            Err(Step::Outermost {
                why: format!("{taking}: the kernel's outermost frame"),
                exception: None,
            })
        } else {
            Ok(format!(
                "{taking}: what it interrupted is unknown (its pc is in ELR_EL1, which the dump \
                 does not hold); the next frames are x29's records, past the interrupted function \
                 and any it called that made no record"
            ))
        })
    }

    /// The context an exception entry saved at `regs`: every register of the interrupted
    /// kernel code, its pc exact; or, when it came from user space, the kernel's outermost frame.
    /// x29 is the record inside it only once the entry has made the record, and until it
    /// restores the interrupted x29 on the way out: a record that is not the one the entry makes
    /// (the interrupted x29 and pc, or zeros) means the CPU stopped in between. `record` is the
    /// pair read at `fp`.
    fn interrupted(
        &self,
        frame: &Frame,
        fp: u64,
        record: (u64, u64),
        regs: u64,
    ) -> Result<Step, String> {
        let field = |offset: u64, what: &str| saved(self.mem, what, regs.wrapping_add(offset));
        let pstate = field(pt_regs::PSTATE, "the interrupted PSTATE")?;
        let sp = field(pt_regs::SP, "the interrupted sp")?;
        let pc = field(pt_regs::PC, "the interrupted pc (ELR)")?;
        let x29 = field(pt_regs::X29, "the interrupted x29")?;
        if record != (x29, pc) && record != (0, 0) {
            return Err(format!(
                "x29 {fp:#x} is no exception's frame record: it holds {:#x} {:#x}, not the \
                 x29 and pc saved around it (the CPU stopped while an entry or exit was under \
                 way)",
                record.0, record.1
            ));
        }
        if pstate & pt_regs::MODE_MASK == 0 {
            return Ok(Step::Outermost {
                why: "an exception from user space: the kernel's outermost frame".into(),
                exception: Some(regs),
            });
        }
        let mut caller = Registers::new(Machine::Aarch64);
        // A general register that cannot be read is unknown to the caller, not the end.
        for register in 0..=30 {
            let at = regs.wrapping_add(u64::from(register) * 8);
            caller.set(register, self.mem.read_u64(at).ok());
        }
        caller.set(SP, Some(sp));
        caller.set(PC, Some(pc));
        Ok(Step::Caller(Box::new(Caller {
            registers: caller,
            how: How::Registers,
            interrupted: true,
            trampoline: false,
            new_stack: sp / STACK_SIZE != frame.sp / STACK_SIZE,
            exception: Some(regs),
            gap: None,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcrash_plugin::memory::Runs;

    /// A `struct pt_regs` at `REGS` with x`n` = `n`, its frame record `record`, and the frame of
    /// an entry whose x29 points at the record, in the entry text at `ENTRY`.
    const REGS: u64 = 0xffff_8000_0800_3c00;
    const ENTRY: u64 = 0xffff_a1a8_a9e1_1284;
    const INTERRUPTED_PC: u64 = 0xffff_a1a8_aaad_a28c;
    /// The vector table, at the start of the entry text.
    const VECTORS: u64 = ENTRY - 0x284;

    fn records<'a>(mem: &'a Runs, images: &'a ImageSet) -> FrameRecords<'a> {
        FrameRecords {
            images,
            mem,
            va_bits: 48,
            exceptions: Some(ExceptionEntries {
                text: (VECTORS, ENTRY + 0x1000),
                record: 0x130,
                vectors: Some(VECTORS),
            }),
        }
    }

    fn exception(pstate: u64, record: [u64; 2]) -> Step {
        let mut words: Vec<u64> = (0..31).collect();
        words.extend([0xffff_8000_0800_3d50, INTERRUPTED_PC, pstate]);
        words.resize(0x130 / 8, 0);
        words.extend(record);
        let bytes = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mem = Runs(vec![(REGS, bytes)]);
        let mut registers = Registers::new(Machine::Aarch64);
        registers.set(X29, Some(REGS + 0x130));
        let frame = Frame {
            pc: ENTRY + 0x64,
            sp: REGS - 0x20,
            how: How::FramePointer,
            exact: false,
            trampoline: false,
            exception: None,
            gap: None,
        };
        records(&mem, &ImageSet::default()).caller(&frame, &registers)
    }

    #[test]
    fn an_exception_from_the_kernel_gives_every_saved_register() {
        let Step::Caller(caller) = exception(0x6040_0005, [29, INTERRUPTED_PC]) else {
            panic!("a caller");
        };
        assert_eq!(caller.exception, Some(REGS));
        assert!(caller.interrupted, "ELR is exact");
        assert_eq!(caller.registers.pc(), Some(INTERRUPTED_PC));
        assert_eq!(caller.registers.sp(), Some(0xffff_8000_0800_3d50));
        for n in 0..=30 {
            assert_eq!(caller.registers.get(n), Some(u64::from(n)), "x{n}");
        }
        // Later releases make the record zeros from the kernel too.
        assert!(matches!(exception(0x6040_0005, [0, 0]), Step::Caller(_)));
    }

    #[test]
    fn an_exception_from_user_space_is_the_outermost_frame() {
        let Step::Outermost { exception, .. } = exception(0x8000_0000, [0, 0]) else {
            panic!("the outermost frame");
        };
        assert_eq!(exception, Some(REGS));
    }

    /// Stopped in an entry before it made the record, or in an exit after it restored x29: x29
    /// is the interrupted code's, and what lies below it is no `struct pt_regs`.
    #[test]
    fn a_record_the_entry_did_not_make_is_no_exception() {
        let Step::Lost(why) = exception(0x6040_0005, [0xffff_8000_0800_3e00, ENTRY]) else {
            panic!("no caller");
        };
        assert!(why.contains("is no exception's frame record"), "{why}");
    }

    /// A CPU in the vector table has saved nothing: from the kernel the walk goes on from x29's
    /// record (here zeros: the outermost frame) and says what it could not see; from user space
    /// it is the kernel's outermost frame.
    #[test]
    fn a_cpu_taking_an_exception_is_walked_from_its_frame_record() {
        let mem = Runs(vec![(REGS + 0x130, vec![0; 16])]);
        let images = ImageSet::default();
        let at = |offset: u64, exact: bool| {
            let frame = Frame {
                pc: VECTORS + offset,
                sp: REGS,
                how: How::Registers,
                exact,
                trampoline: false,
                exception: None,
                gap: None,
            };
            let mut registers = Registers::new(Machine::Aarch64);
            registers.set(X29, Some(REGS + 0x130));
            records(&mem, &images).caller(&frame, &registers)
        };
        let Step::Outermost { why, exception } = at(0x280, true) else {
            panic!("the record's outermost frame");
        };
        assert!(
            why.contains("taking an IRQ from the kernel (EL1h)")
                && why.ends_with("the frame record is zeros: the task's outermost frame"),
            "{why}"
        );
        assert_eq!(exception, None, "no struct pt_regs");
        let Step::Outermost { why, exception } = at(0x404, true) else {
            panic!("the outermost frame in a system call's entry");
        };
        assert!(
            why.contains("a synchronous exception from 64-bit user space"),
            "{why}"
        );
        assert_eq!(exception, None);
        // A return address is never in the vectors' entries (they branch, never call), and past
        // the table is the rest of the entry text: x29 is read as an entry's record there.
        for (offset, exact) in [(0x280, false), (0x800, true)] {
            let Step::Lost(why) = at(offset, exact) else {
                panic!("no struct pt_regs below the record");
            };
            assert!(why.contains("the interrupted PSTATE"), "{why}");
        }
    }

    #[test]
    fn authentication_codes_come_off_as_the_kernel_takes_them() {
        // A signed kernel return address, and the same unsigned.
        assert_eq!(
            strip_authentication(0x00bc_d5fd_8a63_5060, 48),
            0xffff_d5fd_8a63_5060
        );
        assert_eq!(
            strip_authentication(0xffff_d5fd_8a63_5060, 48),
            0xffff_d5fd_8a63_5060
        );
        // A user one.
        assert_eq!(
            strip_authentication(0x0012_0000_0040_0530, 48),
            0x0000_0000_0040_0530
        );
    }
}
