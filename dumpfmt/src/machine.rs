//! Which processor a dump's memory and registers belong to: it decides the page-table format
//! and the layout of each CPU's registers.

use std::fmt;

/// The architectures dumpfmt reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Machine {
    X86_64,
    Aarch64,
}

impl Machine {
    /// ELF `e_machine` values: EM_X86_64, EM_386 (QEMU's dump of a vCPU not in long mode is still
    /// an x86_64 machine's memory) and EM_AARCH64.
    pub fn from_elf(e_machine: u16) -> Option<Machine> {
        match e_machine {
            62 | 3 => Some(Machine::X86_64),
            183 => Some(Machine::Aarch64),
            _ => None,
        }
    }

    /// A kdump header's `utsname.machine` (`uname -m`). QEMU leaves it empty in the dumps it
    /// writes of x86 guests; an empty name is x86_64, the format's first home.
    pub fn from_uname(machine: &str) -> Option<Machine> {
        match machine {
            "" | "x86_64" => Some(Machine::X86_64),
            "aarch64" | "arm64" => Some(Machine::Aarch64),
            _ => None,
        }
    }

    /// The name `uname -m` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Machine::X86_64 => "x86_64",
            Machine::Aarch64 => "aarch64",
        }
    }
}

impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
