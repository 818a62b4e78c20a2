//! Walking a stack by hostile call-frame information over hostile memory: the input is the first
//! frame's registers, an ELF image (its `.eh_frame`, `.eh_frame_hdr`, `.debug_frame`) and the
//! stack's windows (`kcrash_fuzz::unwind_input`). The walk ends within its frame bound with a
//! reason, and every frame is symbolized. A panic, or a walk without end, is a bug.
//!
//! Seeds: `seeds unwind_cfi` (the hosted C program and its stack in the corpus's cores, from its
//! first frame in the program).

#![no_main]

use kcrash::unwind::{walk, Cfi, FramePointer, MAX_FRAMES};
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
    };
    let frame_pointer = FramePointer {
        images: &images,
        mem: &mem,
    };
    let stack = walk(registers, true, &[&cfi, &frame_pointer]);
    assert!(stack.frames.len() <= MAX_FRAMES);
    assert!(!stack.stop.is_empty());
    for frame in &stack.frames {
        let _ = images.symbolize(frame.lookup_pc());
        let _ = images.frames(frame.lookup_pc());
    }
});
