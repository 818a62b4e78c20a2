//! ORC tables for `tests/data/linux_structs.c`'s code, and a stack they walk: what the ORC
//! unwinder's unit test checks and the `linux` fuzz target's seeds start from.

use symbols::Image;

/// Where the first frame's registers are (17 words by DWARF number).
pub const REGISTERS_AT: u64 = 0x30_0000;
/// Where the stack is.
pub const STACK_AT: u64 = 0x31_0000;

/// Memory windows: the tables, the stack and the registers. The fixture's code has a call
/// frame, a call frame that saved rbp, an interrupt's `struct pt_regs` (kernel mode), then the
/// end of the stack; entries in 6.1's layout (`old`) or 6.4's.
pub fn windows(image: &Image, old: bool) -> Vec<(u64, Vec<u8>)> {
    const SP: u16 = 5;
    const PREV_SP: u16 = 1;
    let sym = |name: &str| image.symbol(name).map_or(0, |s| s.address);
    let (text, ips, entries) = (
        sym("_stext"),
        sym("__start_orc_unwind_ip"),
        sym("__start_orc_unwind"),
    );
    // (sp_offset, bp_offset, sp_reg, bp_reg, type: 0 call, 1 regs, 2 end)
    let rows: [(i16, i16, u16, u16, u8); 4] = [
        (8, 0, SP, 0, 0),
        (16, -16, SP, PREV_SP, 0),
        (0, 0, SP, 0, 1),
        (0, 0, 0, 0, 2),
    ];
    // The table's every slot: past the four rows, more ends of the stack further on.
    let count = (sym("__stop_orc_unwind_ip").saturating_sub(ips) / 4) as usize;
    let end = rows[3];
    let mut ip_table = Vec::new();
    let mut entry_table = Vec::new();
    for i in 0..count.max(rows.len()) {
        let (sp_offset, bp_offset, sp_reg, bp_reg, kind) = rows.get(i).copied().unwrap_or(end);
        let ip = text + i as u64 * 0x100;
        let at = ips + i as u64 * 4;
        ip_table.extend_from_slice(&(ip.wrapping_sub(at) as i32).to_le_bytes());
        let (sp_reg, bits) = match (old, kind) {
            (true, 2) => (0, 1 << 10),
            (true, k) => (sp_reg, u16::from(k) << 8),
            (false, 2) => (0, 1 << 8),
            (false, k) => (sp_reg, (u16::from(k) + 2) << 8),
        };
        entry_table.extend_from_slice(&sp_offset.to_le_bytes());
        entry_table.extend_from_slice(&bp_offset.to_le_bytes());
        entry_table.extend_from_slice(&(sp_reg | bp_reg << 4 | bits).to_le_bytes());
    }
    // The walk: rsp at STACK_AT, return to row 1; its frame ends 16 further with rbp under the
    // return address to row 2, whose pt_regs resume row 3 on another stack.
    let mut stack = vec![0u8; 0x200];
    let mut put = |at: usize, v: u64| stack[at..at + 8].copy_from_slice(&v.to_le_bytes());
    put(0, text + 0x110);
    put(8, STACK_AT + 0x100);
    put(16, text + 0x210);
    let regs = 24;
    put(regs + 128, text + 0x310);
    put(regs + 136, 0x10);
    put(regs + 152, STACK_AT + 0x1f8);
    let mut registers = vec![0u8; 17 * 8];
    registers[7 * 8..8 * 8].copy_from_slice(&STACK_AT.to_le_bytes());
    registers[16 * 8..].copy_from_slice(&(text + 0x10).to_le_bytes());
    vec![
        (ips, ip_table),
        (entries, entry_table),
        (STACK_AT, stack),
        (REGISTERS_AT, registers),
    ]
}
