//! x86-64 in AT&T syntax, as objdump and gdb print it.

use iced_x86::{
    Decoder, DecoderError, DecoderOptions, Formatter, FormatterOutput, FormatterTextKind,
    GasFormatter, Instruction, OpKind,
};

use super::Insn;

/// The longest x86 instruction.
pub const MAX_LEN: u64 = 15;

pub struct Instructions<'b> {
    bytes: &'b [u8],
    decoder: Decoder<'b>,
    formatter: GasFormatter,
    instr: Instruction,
    text: Text,
}

impl<'b> Instructions<'b> {
    pub fn new(bytes: &'b [u8], ip: u64) -> Instructions<'b> {
        let mut formatter = GasFormatter::new();
        let options = formatter.options_mut();
        // As objdump and gdb print: `call *%rax` not `callq`, `$0x1` not `$1`, operands in a
        // column.
        options.set_first_operand_char_index(7);
        options.set_uppercase_hex(false);
        options.set_show_branch_size(false);
        options.set_branch_leading_zeros(false);
        options.set_small_hex_numbers_in_decimal(false);
        // A RIP-relative operand as it is encoded, `0x2f0e(%rip)`; the address it reads follows.
        options.set_rip_relative_addresses(true);
        Instructions {
            bytes,
            decoder: Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE),
            formatter,
            instr: Instruction::default(),
            text: Text(String::new()),
        }
    }

    pub fn position(&self) -> usize {
        self.decoder.position()
    }

    pub fn next_insn(&mut self) -> Option<Insn<'_>> {
        if !self.decoder.can_decode() {
            return None;
        }
        let (at, from) = (self.decoder.ip(), self.decoder.position());
        self.decoder.decode_out(&mut self.instr);
        if self.decoder.last_error() == DecoderError::NoMoreBytes {
            // Cut short by the end of the bytes: the caller says why they end.
            let _ = self.decoder.set_position(from);
            self.decoder.set_ip(at);
            return None;
        }
        self.text.0.clear();
        if self.instr.is_invalid() {
            self.text.0.push_str("(bad)");
        } else {
            self.formatter.format(&self.instr, &mut self.text);
        }
        let len = self.instr.len();
        Some(Insn {
            addr: at,
            bytes: &self.bytes[from..from + len],
            text: &self.text.0,
            target: target(&self.instr),
        })
    }
}

/// The formatter's text, without colour.
struct Text(String);

impl FormatterOutput for Text {
    fn write(&mut self, text: &str, _: FormatterTextKind) {
        self.0.push_str(text);
    }
}

/// Where a near branch goes, or the address a RIP-relative memory operand reads.
fn target(instr: &Instruction) -> Option<u64> {
    if (0..instr.op_count()).any(|i| {
        matches!(
            instr.op_kind(i),
            OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
        )
    }) {
        return Some(instr.near_branch_target());
    }
    instr
        .is_ip_rel_memory_operand()
        .then(|| instr.ip_rel_memory_address())
}
