//! Linux's readers over hostile VMCOREINFO and memory: the input is VMCOREINFO's text up to the
//! first NUL, then memory windows (`kcrash_fuzz::Windows::parse`). The printk ring is found
//! and read whole, the panic message looked for, and with an image of the kernel structures
//! (`kcrash/tests/data/linux_structs.c`: 6.1's and 6.4's module layouts, 6.1's task layout and
//! an older one) the module list is walked, each module's sections read, the task lists walked
//! and each task read, the `sys` facts read, and a stack walked by the fixture's ORC tables
//! (6.4's and 6.1's entry) from the registers at `orc_sample::REGISTERS_AT`. A panic, or a walk
//! without end, is a bug.
//!
//! Seeds: `seeds linux` (the 6.1 guest's VMCOREINFO, a module list, a task list and ORC tables
//! with a stack they walk at the fixture's addresses, and the guest dump's printk ring structures when the guest is on this
//! machine).

#![no_main]

use std::sync::OnceLock;

use kcrash::linux::{facts, modules, printk, tasks, Kernel};
use kcrash::memory::Memory;
use kcrash::unwind::{orc_sample, walk, Orc, Registers, MAX_FRAMES};
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
        if let Ok(list) = tasks::tasks(kernel) {
            for t in list.tasks {
                std::hint::black_box(t.state.ok().map(|s| s.name()));
            }
        }
        let _ = facts::Utsname::read(kernel, info);
        let _ = facts::cpus(kernel);
        let _ = facts::memory(kernel, 4096);
        let _ = facts::crash_time(kernel);
        let _ = facts::uptime_nsec(kernel);
        let _ = printk::find(info, Some(image), &mem, true);
        if let Ok(orc) = Orc::new(kernel) {
            let mut registers = Registers::default();
            for r in 0..17u16 {
                let at = orc_sample::REGISTERS_AT + u64::from(r) * 8;
                registers.set(r, mem.read_u64(at).ok());
            }
            let stack = walk(registers, true, &[&orc]);
            assert!(stack.frames.len() <= MAX_FRAMES);
        }
    }
});
