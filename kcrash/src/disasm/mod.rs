//! Decoding machine code as objdump and gdb print it, for the dump's machine: x86_64 in AT&T
//! syntax (iced-x86), arm64 in the Arm syntax binutils uses (exarmo-aarch64).

mod aarch64;
mod x86_64;

use dumpfmt::Machine;

/// One instruction decoded.
pub struct Insn<'b> {
    pub addr: u64,
    pub bytes: &'b [u8],
    /// The instruction's text; `(bad)` (x86_64) or `.inst 0x…` (arm64) for bytes that decode to
    /// no instruction, as objdump writes them.
    pub text: &'b str,
    /// Where a direct branch goes, or the address a PC-relative operand reads (x86_64's
    /// RIP-relative memory, arm64's `adr`, `adrp` and literal loads).
    pub target: Option<u64>,
}

/// The instructions of `bytes` placed at `ip`, up to the first one the bytes end in the middle
/// of.
pub enum Instructions<'b> {
    /// Boxed: iced's decoder and formatter are most of a kilobyte.
    X86_64(Box<x86_64::Instructions<'b>>),
    Aarch64(aarch64::Instructions<'b>),
}

impl<'b> Instructions<'b> {
    /// A decoder of `machine`'s code.
    pub fn new(machine: Machine, bytes: &'b [u8], ip: u64) -> Instructions<'b> {
        match machine {
            Machine::X86_64 => Instructions::X86_64(Box::new(x86_64::Instructions::new(bytes, ip))),
            Machine::Aarch64 => Instructions::Aarch64(aarch64::Instructions::new(bytes, ip)),
        }
    }

    /// The longest instruction of the machine.
    pub fn max_len(machine: Machine) -> u64 {
        match machine {
            Machine::X86_64 => x86_64::MAX_LEN,
            Machine::Aarch64 => aarch64::LEN,
        }
    }

    /// Why no instruction of `machine` can start at `addr`, if none can: arm64's are aligned.
    pub fn misplaced(machine: Machine, addr: u64) -> Option<String> {
        (machine == Machine::Aarch64 && !addr.is_multiple_of(aarch64::LEN))
            .then(|| format!("{addr:#x}: arm64 instructions start at multiples of 4"))
    }

    /// Where the next instruction starts, from the start of the bytes.
    pub fn position(&self) -> usize {
        match self {
            Instructions::X86_64(i) => i.position(),
            Instructions::Aarch64(i) => i.position(),
        }
    }

    /// The next instruction; its text lives until the next call.
    pub fn next_insn(&mut self) -> Option<Insn<'_>> {
        match self {
            Instructions::X86_64(i) => i.next_insn(),
            Instructions::Aarch64(i) => i.next_insn(),
        }
    }
}
