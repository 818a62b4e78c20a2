//! Names for the PLT's stubs, which no symbol table holds: `strcmp@plt`, as objdump and gdb
//! name them. Each x86-64 stub jumps through a GOT slot (`jmp *disp(%rip)`, optionally after
//! `endbr64` and with a `bnd` prefix); the dynamic relocation that fills that slot names the
//! function. The stubs are found by decoding that one instruction, not by counting entries,
//! so `.plt`, `.plt.sec` (IBT) and `.plt.got` all read alike and the first, resolver entry
//! gets no name.

use std::collections::HashMap;

use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget};

/// One stub: its link-time address and size, and the function it calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stub {
    pub(crate) name: String,
    pub(crate) address: u64,
    pub(crate) size: u64,
    pub(crate) section: String,
}

/// The sections linkers put stubs in.
const SECTIONS: [&str; 3] = [".plt", ".plt.sec", ".plt.got"];
/// `endbr64`, which IBT stubs start with.
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
/// The `bnd` prefix MPX-era linkers put before the jump.
const BND: u8 = 0xf2;
/// `jmp *disp32(%rip)`: opcode and ModRM.
const JMP_RIP: [u8; 2] = [0xff, 0x25];

/// Every stub of an x86-64 executable or shared library whose GOT slot a dynamic relocation
/// names; nothing for other machines or a file without a PLT (a separate debug file's `.plt`
/// has no bytes).
pub(crate) fn stubs(file: &object::File<'_>) -> Vec<Stub> {
    if file.architecture() != object::Architecture::X86_64 {
        return Vec::new();
    }
    let slots = got_slots(file);
    if slots.is_empty() {
        return Vec::new();
    }
    let mut stubs = Vec::new();
    for name in SECTIONS {
        let Some(section) = file.section_by_name(name) else {
            continue;
        };
        let Ok(bytes) = section.data() else { continue };
        // Stubs are 16 bytes, 8 in a .plt.got without IBT: what the section says it holds.
        let entry = if name == ".plt.got" && !bytes.starts_with(&ENDBR64) {
            8
        } else {
            16
        };
        for (i, stub) in bytes.chunks_exact(entry).enumerate() {
            let offset = (i * entry) as u64;
            let address = section.address().wrapping_add(offset);
            let Some(slot) = jump_slot(stub, address) else {
                continue;
            };
            if let Some(function) = slots.get(&slot) {
                stubs.push(Stub {
                    name: format!("{function}@plt"),
                    address,
                    size: entry as u64,
                    section: name.to_owned(),
                });
            }
        }
    }
    stubs
}

/// The GOT slot a stub at `address` jumps through, if it is a jump through one.
fn jump_slot(stub: &[u8], address: u64) -> Option<u64> {
    let mut at = 0;
    if stub.starts_with(&ENDBR64) {
        at += ENDBR64.len();
    }
    if stub.get(at) == Some(&BND) {
        at += 1;
    }
    if stub.get(at..at + 2)? != JMP_RIP {
        return None;
    }
    let disp = i32::from_le_bytes(stub.get(at + 2..at + 6)?.try_into().ok()?);
    // RIP-relative: from the end of the 6-byte instruction.
    let next = address.wrapping_add(at as u64 + 6);
    Some(next.wrapping_add_signed(i64::from(disp)))
}

/// The function each GOT slot is filled with, from the dynamic relocations (`.rela.plt`'s
/// JUMP_SLOT and `.rela.dyn`'s GLOB_DAT) that name a symbol.
fn got_slots(file: &object::File<'_>) -> HashMap<u64, String> {
    let (Some(relocations), Some(symbols)) =
        (file.dynamic_relocations(), file.dynamic_symbol_table())
    else {
        return HashMap::new();
    };
    relocations
        .filter_map(|(offset, relocation)| {
            let RelocationTarget::Symbol(index) = relocation.target() else {
                return None;
            };
            let name = symbols.symbol_by_index(index).ok()?.name().ok()?;
            (!name.is_empty()).then(|| (offset, name.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stub_names_the_slot_it_jumps_through() {
        // jmp *0x2fe2(%rip) at 0x1030: the slot is 0x1036 + 0x2fe2.
        let plain = [
            0xff, 0x25, 0xe2, 0x2f, 0, 0, 0x68, 0, 0, 0, 0, 0xe9, 0, 0, 0, 0,
        ];
        assert_eq!(jump_slot(&plain, 0x1030), Some(0x4018));
        // endbr64; bnd jmp *0x2fe2(%rip): the instruction ends 11 bytes in.
        let ibt = [
            0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0xe2, 0x2f, 0, 0, 0x0f, 0x1f, 0x44, 0, 0,
        ];
        assert_eq!(jump_slot(&ibt, 0x1030), Some(0x1030 + 11 + 0x2fe2));
        // A backwards displacement wraps as the CPU's does.
        let back = [0xff, 0x25, 0xfa, 0xff, 0xff, 0xff, 0x66, 0x90];
        assert_eq!(jump_slot(&back, 0x1000), Some(0x1000));
        // The resolver entry pushes first; a cut stub has no slot.
        let resolver = [
            0xff, 0x35, 0xe2, 0x2f, 0, 0, 0xff, 0x25, 0xe4, 0x2f, 0, 0, 0x0f, 0x1f, 0x40, 0,
        ];
        assert_eq!(jump_slot(&resolver, 0x1020), None);
        assert_eq!(jump_slot(&[0xff, 0x25, 0], 0x1000), None);
    }
}
