//! The evaluator and the value printer over a real image, the gcc fixture
//! `symbols/tests/data/klog.c`, and hostile memory. Input: an expression line, then the bytes of
//! the fixture's data segment (KLogs, KLogBuffer, DebugFlags, ...); other addresses are
//! unreadable. `p`, `ptype` and their forms run on the line. A panic is a bug.

#![no_main]

use std::sync::OnceLock;

use kcrash_fuzz::{data_segment, gcc, line_and_rest, print_and_ptype, Windows};
use libfuzzer_sys::fuzz_target;
use symbols::Image;

/// The fixture and where its data segment starts.
fn fixture() -> &'static (Image, u64) {
    static FIXTURE: OnceLock<(Image, u64)> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let path = gcc("symbols/tests/data/klog.c", &["-g"], "klog");
        let image = Image::open(path).expect("the gcc fixture opens");
        let (base, _) = data_segment(&image, "klogLevel").expect("klogLevel is in a segment");
        (image, base)
    })
}

fuzz_target!(|data: &[u8]| {
    let (image, base) = fixture();
    let (line, memory) = line_and_rest(data);
    print_and_ptype(image, &Windows::at(*base, memory), &line);
});
