//! `dis`'s decoding and formatting of hostile bytes (iced-x86 under kcrash's options): the
//! instructions are consecutive, each 1 to 15 bytes of the input with text, and they stop only
//! where fewer bytes are left than the next instruction needs. A panic is a bug.

#![no_main]

use kcrash::commands::dis::Instructions;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let ip = 0xffff_ffff_8000_0000u64;
    let mut insns = Instructions::new(data, ip);
    let mut next = ip;
    while let Some(i) = insns.next_insn() {
        assert_eq!(i.addr, next);
        assert!((1..=15).contains(&i.bytes.len()), "{} bytes", i.bytes.len());
        assert!(!i.text.is_empty());
        next += i.bytes.len() as u64;
    }
    assert_eq!(insns.position() as u64, next - ip);
    assert!(data.len() - insns.position() < 15);
});
