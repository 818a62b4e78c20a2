//! A caller by the frame-pointer chain, for code no table describes: a function built with frame
//! pointers pushes its caller's rbp and points rbp at it, with the return address just above.
//! Only taken where rbp points into the stack above the frame and the word above it into code,
//! and marked as such when printed.

use super::{saved, Caller, Frame, How, Registers, Step, Unwinder, RBP, RIP, RSP};
use symbols::ImageSet;

use crate::memory::Memory;

/// How far above the stack pointer a frame pointer may be: more than any frame's locals.
const MAX_FRAME: u64 = 1 << 20;

pub struct FramePointer<'a> {
    /// A return address must be in one of them: a word that points elsewhere is no return
    /// address, and rbp was no frame pointer.
    pub images: &'a ImageSet,
    pub mem: &'a dyn Memory,
}

impl Unwinder for FramePointer<'_> {
    fn caller(&self, frame: &Frame, registers: &Registers) -> Step {
        let Some(rbp) = registers.get(RBP) else {
            return Step::Lost("rbp is unknown".into());
        };
        if rbp < frame.sp || rbp - frame.sp > MAX_FRAME || rbp % 8 != 0 {
            return Step::Lost(format!(
                "rbp {rbp:#x} is no frame pointer on the stack at {:#x}",
                frame.sp
            ));
        }
        let read = |at: u64, what: &str| saved(self.mem, what, at);
        let (caller_rbp, pc) = match (
            read(rbp, "the saved rbp"),
            read(rbp.wrapping_add(8), "the return address"),
        ) {
            (Ok(b), Ok(pc)) => (b, pc),
            (Err(why), _) | (_, Err(why)) => return Step::Lost(why),
        };
        if self.images.image_at(pc.wrapping_sub(1)).is_none() {
            return Step::Lost(format!(
                "rbp {rbp:#x} is no frame pointer: the word above it, {pc:#x}, is in no image"
            ));
        }
        let mut caller = registers.callee_saved();
        caller.set(RBP, Some(caller_rbp));
        caller.set(RSP, Some(rbp.wrapping_add(16)));
        caller.set(RIP, Some(pc));
        Step::Caller(Box::new(Caller {
            registers: caller,
            how: How::FramePointer,
            interrupted: false,
            trampoline: false,
            new_stack: false,
            exception: None,
            gap: None,
        }))
    }
}
