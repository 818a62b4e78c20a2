//! The guest architectures the Linux pipelines boot: what Debian, QEMU and the kernel's console
//! call each, and how QEMU emulates it.

/// A guest architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    /// The kernel's name (`uname -m`), the one manifests record.
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    /// Debian's architecture: package names (`linux-image-arm64`) and `:arch` qualifiers.
    pub fn debian(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Aarch64 => "arm64",
        }
    }

    /// The QEMU system emulator.
    pub fn qemu(self) -> &'static str {
        match self {
            Arch::X86_64 => crate::tools::QEMU,
            Arch::Aarch64 => crate::tools::QEMU_AARCH64,
        }
    }

    /// The Debian package that brings [`Arch::qemu`].
    pub fn qemu_package(self) -> &'static str {
        match self {
            Arch::X86_64 => "qemu-system-x86",
            Arch::Aarch64 => "qemu-system-arm",
        }
    }

    /// QEMU's board and CPU model, TCG always (no host here has KVM).
    pub fn machine(self) -> &'static str {
        match self {
            Arch::X86_64 => "pc",
            Arch::Aarch64 => "virt",
        }
    }

    pub fn cpu(self) -> &'static str {
        match self {
            Arch::X86_64 => "qemu64",
            Arch::Aarch64 => "cortex-a57",
        }
    }

    /// The pvpanic device Debian's kernel drives without a module, if there is one: x86's ISA
    /// pvpanic is built in; arm64's kernel has no pvpanic driver at all, so a guest there is
    /// known to have panicked by its console only.
    pub fn pvpanic(self) -> Option<&'static str> {
        match self {
            Arch::X86_64 => Some("pvpanic"),
            Arch::Aarch64 => None,
        }
    }

    /// The serial console's device in the guest: the PC's 16550 or the virt board's PL011.
    pub fn console(self) -> &'static str {
        match self {
            Arch::X86_64 => "ttyS0",
            Arch::Aarch64 => "ttyAMA0",
        }
    }

    /// For a kernel module built on this x86_64 host: Kbuild's `ARCH` and the cross compiler's
    /// prefix (Debian's gcc-aarch64-linux-gnu), or None for the host's own.
    pub fn cross_compile(self) -> Option<(&'static str, &'static str)> {
        match self {
            Arch::X86_64 => None,
            Arch::Aarch64 => Some(("arm64", "aarch64-linux-gnu-")),
        }
    }

    /// ELF's `e_machine`, which the dumps of a guest of this architecture carry.
    pub fn elf_machine(self) -> u16 {
        match self {
            Arch::X86_64 => object::elf::EM_X86_64,
            Arch::Aarch64 => object::elf::EM_AARCH64,
        }
    }
}
