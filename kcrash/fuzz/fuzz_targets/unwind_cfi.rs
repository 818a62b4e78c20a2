//! Walking a stack by hostile call-frame information over hostile memory: the input is the first
//! frame's registers, an ELF image (its `.eh_frame`, `.eh_frame_hdr`, `.debug_frame`) and the
//! stack's windows (`kcrash_fuzz::unwind_input`). The walk ends within its frame bound with a
//! reason, and every frame is symbolized. The same memory is walked as an arm64 kernel's too (its
//! call-frame information, then frame records), from x29, sp and pc taken from the input's rbp,
//! rsp and rip, the first frame's page taken for its exception entries'. A panic, or a walk
//! without end, is a bug.
//!
//! Seeds: `seeds unwind_cfi` (the hosted C program and its stack in the corpus's cores, from its
//! first frame in the program).

#![no_main]

use dumpfmt::Machine;
use kcrash::unwind::{
    walk, Cfi, ExceptionEntries, FramePointer, FrameRecords, Registers, Stack, MAX_FRAMES, PC, RBP,
    RIP, RSP, SP, X29,
};
use kcrash_fuzz::unwind_input;
use libfuzzer_sys::fuzz_target;
use symbols::{Image, ImageSet};

fuzz_target!(|data: &[u8]| {
    let Some((registers, image, mem)) = unwind_input::parse(data) else {
        return;
    };
    let Ok(image) = Image::from_bytes("fuzz-image", image.to_vec()) else {
        return;
    };
    let mut images = ImageSet::new();
    images.push(image);
    let cfi = Cfi {
        images: &images,
        mem: &mem,
        va_bits: None,
    };
    let arm64_cfi = Cfi {
        images: &images,
        mem: &mem,
        va_bits: Some(48),
    };
    let frame_pointer = FramePointer {
        images: &images,
        mem: &mem,
    };
    let mut arm64 = Registers::new(Machine::Aarch64);
    for (from, to) in [(RBP, X29), (RSP, SP), (RIP, PC)] {
        arm64.set(to, registers.get(from));
    }
    // The first frame's page taken for the entry text: its x29 is read as the frame record
    // in a `struct pt_regs` (where 6.1 has it), and the saved registers walked from; the
    // page's upper half is taken for the vector table.
    let page = registers.get(RIP).unwrap_or(0) & !0xfff;
    let records = FrameRecords {
        images: &images,
        mem: &mem,
        va_bits: 48,
        exceptions: Some(ExceptionEntries {
            text: (page, page.wrapping_add(0x1000)),
            record: 0x130,
            vectors: Some(page.wrapping_add(0x800)),
        }),
    };
    let check = |stack: Stack| {
        assert!(stack.frames.len() <= MAX_FRAMES);
        assert!(!stack.stop.is_empty());
        for frame in &stack.frames {
            let _ = images.symbolize(frame.lookup_pc());
            let _ = images.frames(frame.lookup_pc());
        }
    };
    check(walk(registers, true, &[&cfi, &frame_pointer]));
    check(walk(arm64, true, &[&arm64_cfi, &records]));
});
