//! Walking a stack from a context's registers to its outermost frame: the walk and its bounds
//! here, each way of finding a caller (call-frame information, frame pointers) in its own
//! module. Memory and tables are the dump's, so every step is checked and every stop says why.

mod aarch64;
mod cfi;
mod context;
mod frame_pointer;
mod orc;
#[doc(hidden)]
pub mod orc_sample;

use dumpfmt::notes::{Aarch64Regs, X86_64Regs};
use dumpfmt::Machine;
use symbols::ImageSet;

use crate::memory::Memory;

pub use aarch64::{pt_regs as aarch64_pt_regs, ExceptionEntries, FrameRecords};
pub use cfi::Cfi;
pub use context::{contexts, switched_out, Context, Kind};
pub use frame_pointer::FramePointer;
pub use orc::{pt_regs, Orc};

/// Frames walked at most: deeper than any real stack, and the end of a loop no check catches.
pub const MAX_FRAMES: usize = 512;

/// A machine's registers by DWARF number; `None` where unknown. x86_64: rax, rdx, rcx, rbx, rsi,
/// rdi, rbp, rsp, r8–r15, then the return address, which is the caller's rip. arm64: x0–x30, sp,
/// pc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registers {
    machine: Machine,
    values: [Option<u64>; 33],
}

/// x86_64's by default: the unwinders of x86_64 code start from nothing.
impl Default for Registers {
    fn default() -> Registers {
        Registers::new(Machine::X86_64)
    }
}

pub const RBP: u16 = 6;
pub const RSP: u16 = 7;
pub const RIP: u16 = 16;
/// What a called function must give back unchanged (System V ABI): rbx, rbp, r12–r15.
const CALLEE_SAVED: [u16; 6] = [3, 6, 12, 13, 14, 15];

/// arm64's frame pointer (x29), stack pointer and pc.
pub const X29: u16 = 29;
pub const SP: u16 = 31;
pub const PC: u16 = 32;
/// What a called function gives back unchanged (AAPCS64): x19–x29 and sp.
const A64_CALLEE_SAVED: [u16; 12] = [19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, SP];

impl Registers {
    /// None known, of `machine`.
    pub fn new(machine: Machine) -> Registers {
        Registers {
            machine,
            values: [None; 33],
        }
    }

    /// From a NT_PRSTATUS's `user_regs_struct`.
    pub fn from_user(regs: &X86_64Regs) -> Registers {
        const ORDER: [&str; 17] = [
            "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11",
            "r12", "r13", "r14", "r15", "rip",
        ];
        let mut r = Registers::new(Machine::X86_64);
        for (register, name) in (0..).zip(ORDER) {
            r.set(register, regs.get(name));
        }
        r
    }

    /// From an arm64 NT_PRSTATUS's `user_pt_regs`: x0–x30, sp and pc are DWARF's order.
    pub fn from_aarch64(regs: &Aarch64Regs) -> Registers {
        let mut r = Registers::new(Machine::Aarch64);
        for (register, value) in (0..=PC).zip(regs.0) {
            r.set(register, Some(value));
        }
        r
    }

    pub fn machine(&self) -> Machine {
        self.machine
    }

    /// The register's value; None where unknown or past the machine's registers.
    pub fn get(&self, register: u16) -> Option<u64> {
        if register > self.pc_register() {
            return None;
        }
        self.values.get(usize::from(register)).copied().flatten()
    }

    pub fn set(&mut self, register: u16, value: Option<u64>) {
        if register > self.pc_register() {
            return;
        }
        if let Some(slot) = self.values.get_mut(usize::from(register)) {
            *slot = value;
        }
    }

    /// The pc's DWARF number, the machine's last: x86_64's return-address column, arm64's pc.
    fn pc_register(&self) -> u16 {
        match self.machine {
            Machine::X86_64 => RIP,
            Machine::Aarch64 => PC,
        }
    }

    pub fn pc(&self) -> Option<u64> {
        self.get(self.pc_register())
    }

    pub fn sp(&self) -> Option<u64> {
        self.get(self.sp_register())
    }

    fn sp_register(&self) -> u16 {
        match self.machine {
            Machine::X86_64 => RSP,
            Machine::Aarch64 => SP,
        }
    }

    pub fn set_sp(&mut self, sp: u64) {
        self.set(self.sp_register(), Some(sp));
    }

    pub fn set_pc(&mut self, pc: u64) {
        self.set(self.pc_register(), Some(pc));
    }

    /// What a caller still has of these registers before its saved ones are restored: the
    /// callee-saved ones (the rules override any the function did save).
    fn callee_saved(&self) -> Registers {
        let mut kept = Registers::new(self.machine);
        let saved: &[u16] = match self.machine {
            Machine::X86_64 => &CALLEE_SAVED,
            Machine::Aarch64 => &A64_CALLEE_SAVED,
        };
        for &r in saved {
            kept.set(r, self.get(r));
        }
        kept
    }
}

/// How a frame's registers were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum How {
    /// The context's own registers: the first frame's, or those an exception saved of the
    /// code it interrupted.
    Registers,
    CallFrameInfo,
    /// Linux's ORC tables.
    Orc,
    FramePointer,
}

/// One physical frame (inlined functions are a question of symbols, asked when printing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub pc: u64,
    /// The stack pointer in this frame (the caller's frame starts at the next frame's).
    pub sp: u64,
    pub how: How,
    /// `pc` is exactly where execution stopped (the first frame, or one a signal or exception
    /// interrupted); otherwise it is a return address, one past the call.
    pub exact: bool,
    /// The frame is a signal trampoline (its caller was interrupted): `pc` is its own code,
    /// entered by the handler's return.
    pub trampoline: bool,
    /// The frame was entered by an exception or interrupt whose `struct pt_regs` (Linux) is at
    /// this address: the interrupted context's registers.
    pub exception: Option<u64>,
    /// Frames between this one and its caller could not be found, and why: the walk went on
    /// past them.
    pub gap: Option<String>,
}

impl Frame {
    /// The address to look up the frame's function and line at: inside the call for a return
    /// address, which may already be the next function's first byte.
    pub fn lookup_pc(&self) -> u64 {
        if self.exact || self.trampoline {
            self.pc
        } else {
            self.pc.wrapping_sub(1)
        }
    }
}

/// A walked stack: its frames, innermost first, and why the walk ended there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    pub frames: Vec<Frame>,
    pub stop: String,
}

/// A frame's caller, as one step found it.
pub struct Caller {
    pub registers: Registers,
    pub how: How,
    /// The caller was interrupted (by a signal, an exception): its pc is exact.
    pub interrupted: bool,
    /// The frame is a signal trampoline, named by its own pc (its return address is no call's).
    pub trampoline: bool,
    /// The caller's stack may be another one (an IRQ stack's interrupted task, a signal stack).
    pub new_stack: bool,
    /// Where the interrupted registers were read from (Linux's `struct pt_regs`).
    pub exception: Option<u64>,
    /// Frames between this frame and the caller are unknown: why (see [`Frame::gap`]).
    pub gap: Option<String>,
}

/// What one step from a frame found.
pub enum Step {
    Caller(Box<Caller>),
    /// The frame is the outermost one: how that is known, and the registers of the context it
    /// was entered from (a system call's user registers).
    Outermost {
        why: String,
        exception: Option<u64>,
    },
    /// This way finds no caller: why (another way may).
    Lost(String),
}

/// One way of finding a frame's caller.
pub trait Unwinder {
    /// The caller of the frame whose registers are `registers` and whose function is at
    /// `frame.lookup_pc()`.
    fn caller(&self, frame: &Frame, registers: &Registers) -> Step;
}

/// Walks from `registers` with `unwinders`, each tried in turn until one finds the caller or knows
/// the frame is the outermost. Bounded by [`MAX_FRAMES`]; the stack pointer must grow from frame to
/// frame except where the unwinder says the stack changed (an IRQ stack, a signal stack).
///
/// `exact`: the first pc is where execution stopped (a CPU's or thread's registers), not a
/// return address (a switched-out task's).
pub fn walk(registers: Registers, exact: bool, unwinders: &[&dyn Unwinder]) -> Stack {
    let (Some(pc), Some(sp)) = (registers.pc(), registers.sp()) else {
        return Stack {
            frames: Vec::new(),
            stop: "the context's pc or stack pointer is unknown".into(),
        };
    };
    let mut frame = Frame {
        pc,
        sp,
        how: How::Registers,
        exact,
        trampoline: false,
        exception: None,
        gap: None,
    };
    let mut frames = Vec::new();
    let mut registers = registers;
    loop {
        if frames.len() + 1 >= MAX_FRAMES {
            return end(
                frames,
                frame,
                format!("{MAX_FRAMES} frames, the most walked"),
            );
        }
        let mut why = Vec::new();
        let mut found = None;
        for unwinder in unwinders {
            match unwinder.caller(&frame, &registers) {
                Step::Caller(caller) => {
                    found = Some(caller);
                    break;
                }
                Step::Outermost { why, exception } => {
                    frame.exception = exception;
                    return end(frames, frame, why);
                }
                Step::Lost(reason) => why.push(reason),
            }
        }
        let Some(caller) = found else {
            let reason = if why.is_empty() {
                "no way to find the caller".into()
            } else {
                why.join("; ")
            };
            return end(frames, frame, reason);
        };
        frame.exception = caller.exception;
        frame.trampoline = caller.trampoline;
        frame.gap = caller.gap;
        let (Some(pc), Some(sp)) = (caller.registers.pc(), caller.registers.sp()) else {
            return end(
                frames,
                frame,
                "the caller's pc or stack pointer is unknown".into(),
            );
        };
        if pc == 0 {
            let why = "the return address is 0: the outermost frame".into();
            return end(frames, frame, why);
        }
        // An arm64 leaf function keeps no frame: its caller's stack pointer is its own.
        let leaf = frames.is_empty() && sp == frame.sp && registers.machine() == Machine::Aarch64;
        if sp <= frame.sp && !caller.new_stack && !leaf {
            let why = format!(
                "the caller's stack pointer {sp:#x} is not above {:#x}: the stack is damaged or \
                 its unwinding information wrong",
                frame.sp
            );
            return end(frames, frame, why);
        }
        frames.push(frame);
        frame = Frame {
            pc,
            sp,
            how: caller.how,
            exact: caller.interrupted,
            trampoline: false,
            exception: None,
            gap: None,
        };
        registers = caller.registers;
    }
}

fn end(mut frames: Vec<Frame>, last: Frame, stop: String) -> Stack {
    frames.push(last);
    Stack { frames, stop }
}
/// Reads a saved word, or says what could not be read.
fn saved(mem: &dyn Memory, what: &str, at: u64) -> Result<u64, String> {
    mem.read_u64(at)
        .map_err(|e| format!("{what} at {at:#x} is unreadable: {}", e.reason))
}

/// The image holding `pc`, or why there is none.
fn image_at(images: &ImageSet, pc: u64) -> Result<&symbols::Image, String> {
    images
        .image_at(pc)
        .ok_or_else(|| format!("{pc:#x} is in no image kcrash has"))
}
