//! COM1 console (16550 UART at port 0x3f8). QEMU's `-serial file:` captures it.

use core::arch::asm;
use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering};

const COM1: u16 = 0x3f8;

pub unsafe fn outb(port: u16, value: u8) {
    asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack, preserves_flags));
}

pub unsafe fn inb(port: u16) -> u8 {
    let value: u8;
    asm!("in al, dx", out("al") value, in("dx") port, options(nomem, nostack, preserves_flags));
    value
}

/// 115200 8N1, FIFOs on, interrupts off.
pub fn init() {
    unsafe {
        outb(COM1 + 1, 0x00);
        outb(COM1 + 3, 0x80);
        outb(COM1, 0x01);
        outb(COM1 + 1, 0x00);
        outb(COM1 + 3, 0x03);
        outb(COM1 + 2, 0xc7);
    }
}

fn put_byte(byte: u8) {
    unsafe {
        while inb(COM1 + 5) & 0x20 == 0 {}
        outb(COM1, byte);
    }
}

/// A ticket lock, so lines from several processors never mix and a processor that prints
/// without pause cannot keep another (a panicking one) from its turn.
static NEXT_TICKET: AtomicU32 = AtomicU32::new(0);
static SERVING: AtomicU32 = AtomicU32::new(0);
/// The processor holding the console (its number + 1), 0 when none.
static OWNER: AtomicU32 = AtomicU32::new(0);

/// The console, held by one processor while it prints (`kprintln!` holds it for a line); lines
/// end in "\n" only.
pub struct Console {
    /// This processor already held it: a fault or panic while printing goes on rather than
    /// waiting for itself.
    nested: bool,
}

impl Console {
    pub fn lock() -> Console {
        let me = crate::smp::this_cpu() + 1;
        // Only this processor stores its own number in OWNER.
        if OWNER.load(Ordering::Relaxed) == me {
            return Console { nested: true };
        }
        let ticket = NEXT_TICKET.fetch_add(1, Ordering::Relaxed);
        while SERVING.load(Ordering::Acquire) != ticket {
            core::hint::spin_loop();
        }
        OWNER.store(me, Ordering::Relaxed);
        Console { nested: false }
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        if !self.nested {
            OWNER.store(0, Ordering::Relaxed);
            SERVING.fetch_add(1, Ordering::Release);
        }
    }
}

impl fmt::Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        s.bytes().for_each(put_byte);
        Ok(())
    }
}

/// `println!` for the serial console: one whole line, even with several processors printing.
#[macro_export]
macro_rules! kprintln {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        let _ = writeln!($crate::serial::Console::lock(), $($arg)*);
    }};
}
