//! arm64 (A64) in the syntax binutils' objdump and gdb print, decoded by exarmo-aarch64 (made
//! from Arm's machine-readable specification): aliases as they print them (`mov`, `cmp`,
//! `cset`), x29 and x30 by those names rather than `fp` and `lr`.

use std::fmt::{self, Write};

use exarmo_aarch64::{decode_word, TokenKind, TokenSink};

use super::Insn;

/// Every A64 instruction is one aligned 32-bit word.
pub const LEN: u64 = 4;

pub struct Instructions<'b> {
    bytes: &'b [u8],
    ip: u64,
    at: usize,
    text: String,
}

impl<'b> Instructions<'b> {
    pub fn new(bytes: &'b [u8], ip: u64) -> Instructions<'b> {
        Instructions {
            bytes,
            ip,
            at: 0,
            text: String::new(),
        }
    }

    pub fn position(&self) -> usize {
        self.at
    }

    pub fn next_insn(&mut self) -> Option<Insn<'_>> {
        let bytes = self.bytes.get(self.at..self.at + LEN as usize)?;
        let addr = self.ip.wrapping_add(self.at as u64);
        self.at += LEN as usize;
        let word = u32::from_le_bytes(bytes.try_into().ok()?);
        self.text.clear();
        let mut sink = Sink {
            text: &mut self.text,
            target: None,
        };
        // Writing to a String fails only if a token's own formatting does.
        let written = match decode_word(word) {
            Ok(insn) => insn.at(addr).write_tokens(&mut sink).is_ok(),
            Err(_) => false,
        };
        let target = sink.target;
        if !written {
            self.text.clear();
            let _ = write!(self.text, ".inst\t{word:#010x} ; undefined");
        }
        Some(Insn {
            addr,
            bytes,
            text: &self.text,
            target,
        })
    }
}

/// The decoder's tokens as text, registers named as binutils names them, and the first address
/// an operand names (a branch's target, `adrp`'s page, a literal's place).
struct Sink<'t> {
    text: &'t mut String,
    target: Option<u64>,
}

impl Sink<'_> {
    fn note(&mut self, kind: TokenKind, from: usize) {
        match kind {
            TokenKind::Register => {
                let name = match &self.text[from..] {
                    "fp" => "x29",
                    "lr" => "x30",
                    _ => return,
                };
                self.text.truncate(from);
                self.text.push_str(name);
            }
            TokenKind::Address(at) => {
                self.target.get_or_insert(at);
            }
            _ => {}
        }
    }
}

impl TokenSink for Sink<'_> {
    fn text(&mut self, kind: TokenKind, _: Option<u8>, text: &str) -> fmt::Result {
        let from = self.text.len();
        self.text.push_str(text);
        self.note(kind, from);
        Ok(())
    }

    fn value(&mut self, kind: TokenKind, _: Option<u8>, value: &dyn fmt::Display) -> fmt::Result {
        let from = self.text.len();
        write!(self.text, "{value}")?;
        self.note(kind, from);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(word: u32, at: u64) -> (String, Option<u64>) {
        let bytes = word.to_le_bytes();
        let mut insns = Instructions::new(&bytes, at);
        let i = insns.next_insn().unwrap();
        (i.text.to_owned(), i.target)
    }

    /// Words objdump (binutils 2.40) printed from the corpus's arm64 C writer.
    #[test]
    fn prints_as_binutils_with_targets() {
        // stp x29, x30, [sp, #-208]!
        assert_eq!(one(0xa9b37bfd, 0x400340).0, "stp\tx29, x30, [sp, #-0xd0]!");
        // adrp x0, 49f000
        assert_eq!(
            one(0xf00004e0, 0x400344),
            ("adrp\tx0, 0x49f000".to_owned(), Some(0x49f000))
        );
        // mov x29, sp
        assert_eq!(one(0x910003fd, 0x400348).0, "mov\tx29, sp");
        // b.eq 4003a4
        assert_eq!(
            one(0x54000140, 0x40037c),
            ("b.eq\t0x4003a4".to_owned(), Some(0x4003a4))
        );
    }

    #[test]
    fn undefined_words_and_short_bytes() {
        assert_eq!(one(0xffff_ffff, 0).0, ".inst\t0xffffffff ; undefined");
        let mut insns = Instructions::new(&[1, 2, 3], 0);
        assert!(insns.next_insn().is_none());
        assert_eq!(insns.position(), 0);
    }
}
