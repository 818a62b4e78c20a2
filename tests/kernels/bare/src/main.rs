//! kcrash's bare test kernel. See README.md.
#![no_std]
#![no_main]

mod boot;
mod mem;
#[macro_use]
mod serial;

use core::panic::PanicInfo;

#[no_mangle]
pub extern "C" fn kmain(start_info: u64) -> ! {
    serial::init();
    kprintln!("KCRASH-BOOT start_info={start_info:#x}");
    panic!("test panic");
}

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    kprintln!("KCRASH-PANIC {}", info.message());
    // pvpanic (ISA, port 0x505): bit 0 = guest panicked. QEMU pauses the guest and sends
    // the QMP GUEST_PANICKED event the harness waits for.
    unsafe { serial::outb(0x505, 1) };
    loop {
        unsafe { core::arch::asm!("cli", "hlt") };
    }
}
