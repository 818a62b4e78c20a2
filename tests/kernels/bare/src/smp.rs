//! Processors: `this_cpu` is the running processor's number, read through %gs from its per-CPU
//! block. The boot processor is number 0.

use core::arch::asm;

/// Processors the kernel has room for (per-CPU blocks).
pub const MAX_CPUS: usize = 8;

#[repr(C, align(64))]
struct PerCpu {
    /// The processor's number; first, so `this_cpu` reads it at %gs:0.
    cpu: u32,
}

static PER_CPU: [PerCpu; MAX_CPUS] = {
    let mut blocks = [const { PerCpu { cpu: 0 } }; MAX_CPUS];
    let mut cpu = 0;
    while cpu < MAX_CPUS {
        blocks[cpu].cpu = cpu as u32;
        cpu += 1;
    }
    blocks
};

/// Makes the running processor number 0: the first thing `kmain` does, so `this_cpu` is right
/// from then on.
pub fn init_boot_cpu() {
    set_gs_base(&PER_CPU[0]);
}

fn set_gs_base(block: &'static PerCpu) {
    let address = block as *const PerCpu as u64;
    // SAFETY: IA32_GS_BASE only moves %gs-relative accesses, which only `this_cpu` makes.
    unsafe {
        asm!("wrmsr", in("ecx") 0xc000_0101u32, in("eax") address as u32,
            in("edx") (address >> 32) as u32, options(nostack, preserves_flags));
    }
}

/// The running processor's number: 0 for the boot processor. One load.
#[inline]
pub fn this_cpu() -> u32 {
    let cpu: u32;
    // SAFETY: %gs points at the running processor's PerCpu (set_gs_base), whose first field is
    // its number, which never changes.
    unsafe {
        asm!("mov {:e}, dword ptr gs:[0]", out(reg) cpu,
            options(nostack, readonly, preserves_flags, pure));
    }
    cpu
}

/// Stops this processor for good (interrupts off; an NMI or INIT only halts it again).
pub fn halt() -> ! {
    loop {
        // SAFETY: halting with interrupts off ends nothing but this processor's work.
        unsafe { asm!("cli", "hlt", options(nomem, nostack)) };
    }
}
