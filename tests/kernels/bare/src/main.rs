//! kcrash's bare test kernel: boots under QEMU (PVH), logs through klog-runtime in the
//! scenario named by `klog.scenario=` on its command line, prints an oracle line per event,
//! and panics. See README.md.
#![no_std]
#![no_main]

#[macro_use]
mod serial;
#[macro_use]
mod oracle;
mod acpi;
#[cfg(feature = "big-rings")]
mod big;
mod boot;
mod chore;
#[cfg(feature = "dprobes")]
mod dprobes;
#[cfg(not(feature = "big-rings"))]
mod heap;
mod idt;
#[cfg(feature = "klogger")]
mod klogger;
mod mem;
mod platform;
mod pvh;
mod qnx;
#[cfg(not(feature = "big-rings"))]
mod scenarios;
// The big-rings build has no scenario that starts other processors.
#[cfg_attr(feature = "big-rings", allow(dead_code))]
mod smp;

#[cfg(feature = "big-rings")]
use big as scenarios;

use core::panic::PanicInfo;

/// A scenario's body: gets the measured clock frequency, logs, and panics.
pub type Scenario = fn(u64) -> !;

#[no_mangle]
pub extern "C" fn kmain(start_info: u64) -> ! {
    smp::init_boot_cpu(pvh::rsdp(start_info));
    serial::init();
    idt::install();
    let cmdline = pvh::cmdline(start_info);
    kprintln!("KCRASH-BOOT cmdline={cmdline:?}");
    let clock_hz = platform::tsc_hz();
    oracle::print_config(clock_hz);
    let name = pvh::param(cmdline, "klog.scenario").unwrap_or("");
    qnx::run(name, clock_hz);
    match scenarios::ALL.iter().find(|(n, _)| *n == name) {
        Some((_, run)) => run(clock_hz),
        None => panic!("unknown scenario {name:?}"),
    }
}

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    use core::fmt::Write as _;
    // Kept to the end: no other processor's output follows the panic line.
    let mut console = serial::Console::lock();
    let _ = writeln!(console, "KCRASH-PANIC {}", info.message());
    // pvpanic (ISA, port 0x505): bit 0 = guest panicked. QEMU pauses the guest and sends
    // the QMP GUEST_PANICKED event the harness waits for.
    // SAFETY: an I/O port write; nothing else uses the port.
    unsafe { serial::outb(0x505, 1) };
    smp::halt()
}
