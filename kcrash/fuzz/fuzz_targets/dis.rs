//! `dis`'s decoding and formatting of hostile bytes, for each machine (iced-x86 and
//! exarmo-aarch64 under kcrash's options): the instructions are consecutive, each of the
//! machine's lengths (1 to 15 bytes on x86_64, 4 on arm64) with text, and they stop only where
//! fewer bytes are left than the next instruction needs. A panic is a bug.

#![no_main]

use dumpfmt::Machine;
use kcrash::disasm::Instructions;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let ip = 0xffff_ffff_8000_0000u64;
    for (machine, lengths) in [(Machine::X86_64, 1..=15), (Machine::Aarch64, 4..=4)] {
        let mut insns = Instructions::new(machine, data, ip);
        let mut next = ip;
        while let Some(i) = insns.next_insn() {
            assert_eq!(i.addr, next);
            assert!(lengths.contains(&i.bytes.len()), "{} bytes", i.bytes.len());
            assert!(!i.text.is_empty());
            next += i.bytes.len() as u64;
        }
        assert_eq!(insns.position() as u64, next - ip);
        assert!(((data.len() - insns.position()) as u64) < Instructions::max_len(machine));
    }
});
