//! Value printing over hostile DWARF: the input is an image (u32 LE length, then its bytes)
//! and the memory of its data segment (the rest), placed where the image's `klogLevel` segment
//! says, or at 0. `p` and `ptype` of every variable of the fixtures, and of expressions on them,
//! run over it. A panic is a bug.
//!
//! Seeds: `seeds expr_dwarf` pairs the gcc fixture (DWARF 5 and 4) with its data segment.

#![no_main]

use kcrash_fuzz::{data_segment, print_and_ptype, Windows};
use libfuzzer_sys::fuzz_target;
use symbols::Image;

/// What is printed: the fixture's variables, and forms that follow pointers and index arrays.
const LINES: &[&str] = &[
    "KLogs",
    "KLogs[1]",
    "*KLogs[1].name",
    "KLogBuffer",
    "DebugFlags",
    "klogLevel",
    "klog_chunks",
    "*klog_chunks",
    "klog_last_id",
    "struct _KLog",
    "Dbg_Intensity",
    "&KLogs[2].next_write",
    "sizeof(KLogs) / sizeof(KLogs[0])",
];

fuzz_target!(|data: &[u8]| {
    let Some(len) = data.get(..4) else {
        return;
    };
    let len = u32::from_le_bytes(len.try_into().unwrap_or_default()) as usize;
    let Some(bytes) = data.get(4..4 + len) else {
        return;
    };
    let memory = &data[4 + len..];
    let Ok(image) = Image::from_bytes("fuzz-input", bytes.to_vec()) else {
        return;
    };
    let base = data_segment(&image, "klogLevel").map_or(0, |(at, _)| at);
    let mem = Windows::at(base, memory);
    for line in LINES {
        print_and_ptype(&image, &mem, line);
    }
});
