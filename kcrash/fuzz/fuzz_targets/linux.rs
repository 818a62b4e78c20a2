//! Linux's readers over hostile VMCOREINFO and memory: the input is VMCOREINFO's text up to the
//! first NUL, then memory windows (`kcrash_fuzz::Windows::parse`). The printk ring is found
//! and read whole, the panic message looked for, and with an image of the kernel structures
//! (`kcrash/tests/data/linux_structs.c`, 6.1's and 6.4's module layouts) the module list is
//! walked, each module's sections read, and the `sys` facts read. A panic, or a walk without
//! end, is a bug.
//!
//! Seeds: `seeds linux` (the 6.1 guest's VMCOREINFO, a module list at the fixture's addresses,
//! and the guest dump's printk ring structures when the guest is on this machine).

#![no_main]

use std::sync::OnceLock;

use kcrash::linux::{facts, modules, printk, Kernel};
use kcrash_fuzz::{core_with_vmcoreinfo, gcc, Windows};
use libfuzzer_sys::fuzz_target;
use symbols::Image;

/// The structures in both module layouts.
fn images() -> &'static [Image; 2] {
    static IMAGES: OnceLock<[Image; 2]> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let open = |flags: &[&str], name| {
            Image::open(gcc("kcrash/tests/data/linux_structs.c", flags, name))
                .expect("fixture opens")
        };
        [
            open(&["-g"], "linux"),
            open(&["-g", "-DOLD_LAYOUT"], "linux-old"),
        ]
    })
}

fuzz_target!(|data: &[u8]| {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let (text, windows) = (&data[..end], data.get(end + 1..).unwrap_or(&[]));
    let mem = Windows::parse(windows);
    let core = dumpfmt::Dump::from_bytes("fuzz-input", core_with_vmcoreinfo(text));
    let info = core
        .as_ref()
        .ok()
        .and_then(|d| d.vmcoreinfo().ok().flatten());
    let info = info.as_ref();
    if let Ok(ring) = printk::find(info, None, &mem, false) {
        for record in ring.records().take(1 << 16) {
            std::hint::black_box(record);
        }
        facts::panic_message(&ring);
    }
    for image in images() {
        let kernel = Kernel {
            image: Some(image),
            mem: &mem,
        };
        if let Ok(list) = modules::modules(kernel) {
            for m in list {
                m.taint_letters();
                let _ = m.sections(kernel);
            }
        }
        let _ = facts::Utsname::read(kernel, info);
        let _ = facts::cpus(kernel);
        let _ = facts::memory(kernel, 4096);
        let _ = facts::crash_time(kernel);
        let _ = facts::uptime_nsec(kernel);
        let _ = printk::find(info, Some(image), &mem, true);
    }
});
