//! A caller by the call-frame information (`.eh_frame`, `.debug_frame`) of the image that holds
//! the frame's code, as gdb and every C++ runtime unwind.

use dumpfmt::Machine;
use symbols::{CfaRule, ImageSet, RegisterRule};

use super::aarch64::strip_authentication;
use super::{image_at, saved, Caller, Frame, How, Registers, Step, Unwinder, SP};
use crate::memory::Memory;

pub struct Cfi<'a> {
    pub images: &'a ImageSet,
    pub mem: &'a dyn Memory,
    /// An arm64 kernel's virtual address size: the bits of a return address above it are its
    /// authentication code (its functions sign what they save).
    pub va_bits: Option<u32>,
}

impl Unwinder for Cfi<'_> {
    fn caller(&self, frame: &Frame, registers: &Registers) -> Step {
        match self.step(frame, registers) {
            Ok(step) => step,
            Err(why) => Step::Lost(why),
        }
    }
}

impl Cfi<'_> {
    fn step(&self, frame: &Frame, registers: &Registers) -> Result<Step, String> {
        let at = frame.lookup_pc();
        let image = image_at(self.images, at)?;
        let rule = image
            .frame_rule(at)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| {
                format!(
                    "{} has no call-frame information for {at:#x}",
                    image.path().display()
                )
            })?;
        // An arm64 frame found by its frame record has a stack pointer known only to be past
        // the record: a frame address counted from it would be a guess.
        let sp_bounded = frame.how == How::FramePointer && registers.machine() == Machine::Aarch64;
        let cfa = match rule.cfa {
            CfaRule::RegisterOffset { register, .. } if sp_bounded && register == SP => {
                return Err(format!(
                    "the frame's address at {at:#x} is counted from the stack pointer, which a \
                     frame record only bounds"
                ))
            }
            CfaRule::RegisterOffset { register, offset } => registers
                .get(register)
                .map(|base| base.wrapping_add_signed(offset))
                .ok_or_else(|| {
                    format!("the frame's address is kept in register {register}, which is unknown")
                })?,
            CfaRule::AtRegister { register, offset } => {
                let base = registers.get(register).ok_or_else(|| {
                    format!(
                        "the frame's address is read through register {register}, which is unknown"
                    )
                })?;
                saved(
                    self.mem,
                    "the frame's address",
                    base.wrapping_add_signed(offset),
                )?
            }
            CfaRule::Unsupported => {
                return Err(format!(
                    "the frame's address at {at:#x} is a DWARF expression kcrash does not evaluate"
                ))
            }
        };
        let mut caller = registers.callee_saved();
        caller.set_sp(cfa);
        let mut return_address = None;
        for &(register, how) in &rule.registers {
            let value = match how {
                RegisterRule::Undefined | RegisterRule::Unsupported => None,
                RegisterRule::SameValue => registers.get(register),
                RegisterRule::AtCfa(offset) => self.load(
                    register == rule.return_address,
                    cfa.wrapping_add_signed(offset),
                )?,
                RegisterRule::ValCfa(offset) => Some(cfa.wrapping_add_signed(offset)),
                RegisterRule::Register(from) => registers.get(from),
                RegisterRule::AtRegister {
                    register: base,
                    offset,
                } => match registers.get(base) {
                    Some(base) => self.load(
                        register == rule.return_address,
                        base.wrapping_add_signed(offset),
                    )?,
                    None => None,
                },
                RegisterRule::ValRegister {
                    register: base,
                    offset,
                } => registers.get(base).map(|b| b.wrapping_add_signed(offset)),
                RegisterRule::Constant(c) => Some(c),
            };
            if register == rule.return_address {
                return_address = Some((how, value));
            } else {
                caller.set(register, value);
            }
        }
        // DWARF leaves a register without a rule undefined; the entry code marks its return
        // address so to end the stack. On arm64 the return address is a register (x30): a leaf
        // that does not save it gives it no rule, and it still holds the return address, as gdb
        // reads it.
        if return_address.is_none() && registers.machine() == Machine::Aarch64 {
            let lr = registers.get(rule.return_address);
            return_address = Some((RegisterRule::SameValue, lr));
        }
        let pc = match return_address {
            None | Some((RegisterRule::Undefined, _)) => {
                return Ok(Step::Outermost {
                    why: "the return address is undefined: the outermost frame".into(),
                    exception: None,
                })
            }
            Some((_, Some(pc))) => match self.va_bits {
                Some(bits) => strip_authentication(pc, bits),
                None => pc,
            },
            Some((how, None)) => {
                return Err(format!(
                    "the return address at {at:#x} is not found by its rule ({how:?})"
                ))
            }
        };
        caller.set_pc(pc);
        Ok(Step::Caller(Box::new(Caller {
            registers: caller,
            how: How::CallFrameInfo,
            interrupted: rule.signal_frame,
            trampoline: rule.signal_frame,
            // A handler may run on its own stack (sigaltstack).
            new_stack: rule.signal_frame,
            exception: None,
            gap: None,
        })))
    }

    /// A saved register: the return address must read, any other is unknown if it does not.
    fn load(&self, is_return_address: bool, at: u64) -> Result<Option<u64>, String> {
        match saved(self.mem, "the return address", at) {
            Ok(value) => Ok(Some(value)),
            Err(why) if is_return_address => Err(why),
            Err(_) => Ok(None),
        }
    }
}
