//! Several processors. The boot processor (number 0) starts the application processors (APs)
//! that ACPI's MADT lists, one at a time, with INIT-SIPI-SIPI through its xAPIC; each comes in
//! through boot.rs's real-mode trampoline, takes the next number (1, 2, … in the order they come
//! up) and that number's stack, and runs Rust. `this_cpu` is the running processor's number,
//! read through %gs from its per-CPU block. See README.md ("Processors").

use crate::pvh::KERNEL_VMA;
use crate::{acpi, idt, platform};
use core::arch::asm;
use core::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// Processors the kernel has room for (per-CPU blocks, boot.rs's AP stacks).
pub const MAX_CPUS: usize = 8;
/// Bytes of each AP's stack.
pub const STACK_BYTES: usize = 16 * 1024;
/// The physical page the AP trampoline is copied to: a SIPI starts a processor in real mode at
/// a page below 1 MiB. The kernel is loaded at 1 MiB and QEMU's PVH start info and command line
/// lie elsewhere, so nothing else uses it.
pub const TRAMPOLINE: u64 = 0x8000;
/// The xAPIC's registers, identity-mapped uncached by boot.rs.
pub const LAPIC: u64 = 0xfee0_0000;

/// How long an AP may take from its SIPI to running Rust before it is given up.
const AP_TIMEOUT_US: u64 = 1_000_000;
/// A per-CPU block's `apic_id` until its processor runs.
const OFFLINE: u32 = u32::MAX;

/// Local APIC registers.
const LAPIC_ID: u64 = 0x20;
const ICR_LOW: u64 = 0x300;
const ICR_HIGH: u64 = 0x310;
/// ICR: INIT, level assert; STARTUP (the vector is the start page's number); delivery pending.
const ICR_INIT: u32 = 0x4500;
const ICR_STARTUP: u32 = 0x4600;
const ICR_PENDING: u32 = 1 << 12;

#[repr(C, align(64))]
struct PerCpu {
    /// The processor's number; first, so `this_cpu` reads it at %gs:0.
    cpu: u32,
    /// Its local APIC ID once it runs Rust, OFFLINE before.
    apic_id: AtomicU32,
}

static PER_CPU: [PerCpu; MAX_CPUS] = {
    let mut blocks = [const {
        PerCpu {
            cpu: 0,
            apic_id: AtomicU32::new(OFFLINE),
        }
    }; MAX_CPUS];
    let mut cpu = 0;
    while cpu < MAX_CPUS {
        blocks[cpu].cpu = cpu as u32;
        cpu += 1;
    }
    blocks
};

/// The RSDP's physical address from the PVH start info (0: none).
static RSDP: AtomicU64 = AtomicU64::new(0);
/// `start_aps`' entry (a `fn(u32) -> !`), stored before the first SIPI.
static ENTRY: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());
/// Starting twice would reset processors that already run.
static STARTED: AtomicBool = AtomicBool::new(false);

/// Makes the running processor number 0 and remembers where ACPI's tables are: the first thing
/// `kmain` does, so `this_cpu` is right from then on.
pub fn init_boot_cpu(rsdp: u64) {
    set_gs_base(&PER_CPU[0]);
    RSDP.store(rsdp, Ordering::Relaxed);
}

fn set_gs_base(block: &'static PerCpu) {
    let address = block as *const PerCpu as u64;
    // SAFETY: IA32_GS_BASE only moves %gs-relative accesses, which only `this_cpu` makes.
    unsafe {
        asm!("wrmsr", in("ecx") 0xc000_0101u32, in("eax") address as u32,
            in("edx") (address >> 32) as u32, options(nostack, preserves_flags));
    }
}

/// The running processor's number: 0 for the boot processor, 1.. for the APs. One load.
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

fn lapic_read(reg: u64) -> u32 {
    // SAFETY: LAPIC is mapped uncached by boot.rs; `reg` is a register's offset.
    unsafe { ((LAPIC + reg) as *const u32).read_volatile() }
}

fn lapic_write(reg: u64, value: u32) {
    // SAFETY: as in lapic_read; the registers written here only send IPIs.
    unsafe { ((LAPIC + reg) as *mut u32).write_volatile(value) }
}

/// Whether this processor's local APIC is an enabled xAPIC at LAPIC (not x2APIC, not moved).
fn xapic_at_lapic() -> bool {
    let (low, high): (u32, u32);
    // SAFETY: IA32_APIC_BASE exists on every processor with a local APIC, as QEMU's all have.
    unsafe {
        asm!("rdmsr", in("ecx") 0x1bu32, out("eax") low, out("edx") high,
            options(nomem, nostack, preserves_flags));
    }
    let base = u64::from(high) << 32 | u64::from(low);
    let (enabled, x2apic) = (base & 1 << 11 != 0, base & 1 << 10 != 0);
    enabled && !x2apic && base & !0xfff == LAPIC
}

fn send_ipi(apic_id: u32, command: u32) {
    lapic_write(ICR_HIGH, apic_id << 24);
    lapic_write(ICR_LOW, command);
    // An APIC that never sends shows as a processor that does not answer.
    platform::spin_until(1_000, || lapic_read(ICR_LOW) & ICR_PENDING == 0);
}

/// The number of the processor whose local APIC ID is `apic_id`, once it runs Rust.
fn cpu_of(apic_id: u32) -> Option<u32> {
    let found = PER_CPU
        .iter()
        .find(|b| b.apic_id.load(Ordering::Acquire) == apic_id)?;
    Some(found.cpu)
}

/// APs running Rust.
fn online_aps() -> u32 {
    let online = PER_CPU[1..]
        .iter()
        .filter(|b| b.apic_id.load(Ordering::Acquire) != OFFLINE);
    online.count() as u32
}

/// Starts every AP the MADT lists as enabled, each running `entry(its number)` on its own
/// stack, and returns how many came up. A processor that does not run Rust within
/// AP_TIMEOUT_US is reported and skipped; without an xAPIC or a MADT, none is started.
pub fn start_aps(entry: fn(u32) -> !) -> u32 {
    if STARTED.swap(true, Ordering::Relaxed) {
        return online_aps();
    }
    if !xapic_at_lapic() {
        kprintln!("KCRASH-SMP no xAPIC at {LAPIC:#x}: no application processors");
        return 0;
    }
    let madt = match acpi::madt(RSDP.load(Ordering::Relaxed)) {
        Ok(madt) => madt,
        Err(why) => {
            kprintln!("KCRASH-SMP {why}: no application processors");
            return 0;
        }
    };
    let bsp = lapic_id();
    PER_CPU[0].apic_id.store(bsp, Ordering::Relaxed);
    ENTRY.store(entry as *mut (), Ordering::Relaxed);
    copy_trampoline();
    // The trampoline and ENTRY are in memory before any SIPI.
    fence(Ordering::SeqCst);
    // Each attempt may use a number, even when its processor answers too late.
    let mut numbers_left = MAX_CPUS - 1;
    for apic_id in acpi::enabled_lapic_ids(madt).map(u32::from) {
        // A second INIT would reset a running processor (firmware listing one twice).
        if apic_id == bsp || cpu_of(apic_id).is_some() {
            continue;
        }
        if numbers_left == 0 {
            kprintln!("KCRASH-SMP lapic {apic_id} skipped: room for {MAX_CPUS} processors only");
            continue;
        }
        numbers_left -= 1;
        match start_ap(apic_id) {
            Some(cpu) => kprintln!("KCRASH-SMP cpu {cpu} is lapic {apic_id}"),
            None => kprintln!(
                "KCRASH-SMP lapic {apic_id} did not answer within {} ms: skipped",
                AP_TIMEOUT_US / 1000
            ),
        }
    }
    online_aps()
}

fn lapic_id() -> u32 {
    lapic_read(LAPIC_ID) >> 24
}

fn copy_trampoline() {
    extern "C" {
        static ap_trampoline: [u8; 0];
        static ap_trampoline_end: [u8; 0];
    }
    // SAFETY: boot.rs brackets the trampoline's code with the two symbols; the page at
    // TRAMPOLINE is free low memory, mapped at KERNEL_VMA (see TRAMPOLINE).
    unsafe {
        let start = (&raw const ap_trampoline).cast::<u8>();
        let len = (&raw const ap_trampoline_end) as usize - start as usize;
        core::ptr::copy_nonoverlapping(start, (KERNEL_VMA + TRAMPOLINE) as *mut u8, len);
    }
}

/// INIT, then up to two SIPIs (Intel SDM vol. 3, "MP Initialization Example"), to the processor
/// with local APIC ID `apic_id`; its number once it runs Rust.
fn start_ap(apic_id: u32) -> Option<u32> {
    send_ipi(apic_id, ICR_INIT);
    platform::spin_until(10_000, || false);
    for _ in 0..2 {
        send_ipi(apic_id, ICR_STARTUP | (TRAMPOLINE >> 12) as u32);
        if platform::spin_until(200, || cpu_of(apic_id).is_some()) {
            break;
        }
    }
    platform::spin_until(AP_TIMEOUT_US, || cpu_of(apic_id).is_some());
    cpu_of(apic_id)
}

/// An AP's first Rust: boot.rs's `ap_high64` calls it on the stack of processor `cpu`.
pub extern "C" fn ap_main(cpu: u32) -> ! {
    let Some(block) = PER_CPU.get(cpu as usize) else {
        halt();
    };
    set_gs_base(block);
    idt::load();
    block.apic_id.store(lapic_id(), Ordering::Release);
    let entry = ENTRY.load(Ordering::Acquire);
    // SAFETY: start_aps stored its `fn(u32) -> !` in ENTRY before sending any SIPI.
    let entry = unsafe { core::mem::transmute::<*mut (), fn(u32) -> !>(entry) };
    entry(cpu)
}
