//! `dis FUNC` / `dis ADDR [COUNT]`: x86-64 instructions read from the dump, as crash's `dis`
//! prints them — AT&T syntax, as gdb and objdump print it — with branch targets and
//! RIP-relative addresses named `<symbol+offset>`, and with `-l` the source line each comes from.

use std::io::{self, Write};

use anyhow::{bail, Result};
use clap::Parser;
use iced_x86::{
    Decoder, DecoderError, DecoderOptions, Formatter, FormatterOutput, FormatterTextKind,
    GasFormatter, Instruction,
};
use serde::Serialize;

use super::args::{address, number};
use super::{Context, Flow};
use crate::escape::escaped;
use crate::memory::Memory;
use crate::paint::Paint;
use crate::report::{self, Hex, Report};
use crate::session::Session;
use crate::symbolize::{lookup, name_plus};

/// Disassemble a function, or COUNT instructions from an address.
///
/// FUNC is a symbol: every instruction of it, by its size in the symbol table. ADDR is hex, a
/// symbol+offset, or a symbol given with COUNT: COUNT instructions from there (1 without COUNT).
/// The bytes are read from the dump (a process core's text from the files it maps); what cannot
/// be read is said, never decoded from elsewhere.
#[derive(Parser, Debug)]
#[command(name = "dis", no_binary_name = true, disable_version_flag = true)]
#[command(
    after_help = "Examples:\n  dis klog_init\n  dis -l klog_init\n  dis 0xffffffff80104bb6 4\n  dis klog_init+0x10 3\n  dis --json klog_init | jq -r .text"
)]
pub struct Args {
    /// A function, or where to start.
    #[arg(value_name = "FUNC|ADDR")]
    what: String,
    /// How many instructions (at most 100000).
    #[arg(value_name = "COUNT", value_parser = number)]
    count: Option<u64>,
    /// Each source line (file:line, from DWARF) before the instructions it compiled to.
    #[arg(short = 'l')]
    lines: bool,
    /// One JSON object per instruction.
    #[arg(long)]
    json: bool,
}

/// Instructions shown at most, and bytes read at most: a symbol's size is the image's word.
const MAX_COUNT: u64 = 100_000;
const MAX_BYTES: u64 = 1 << 20;
/// The longest x86 instruction.
const MAX_INSN: u64 = 15;

/// One instruction, or the place where reading stopped.
#[derive(Serialize)]
struct Line {
    address: Hex,
    /// `function+offset` of the instruction.
    symbol: Option<String>,
    /// The instruction's bytes in hex.
    bytes: String,
    /// The instruction in AT&T syntax; `(bad)` for bytes that decode to none.
    text: String,
    /// Where a branch goes, or the address a RIP-relative operand reads.
    target: Option<Hex>,
    target_symbol: Option<String>,
    /// `file:line` the instruction comes from (with -l).
    source: Option<String>,
    /// Why the bytes here could not be read; nothing else is set then.
    unreadable: Option<String>,
}

impl Report for Line {
    fn text(&self, out: &mut dyn Write, paint: Paint) -> io::Result<()> {
        let at = paint.addr(format_args!("{:#x}", self.address.0));
        let sym = match &self.symbol {
            Some(s) => format!(" <{}>", paint.name(s)),
            None => String::new(),
        };
        if let Some(why) = &self.unreadable {
            return writeln!(
                out,
                "{at}{sym}: {}",
                paint.bad(format_args!("<unreadable: {why}>"))
            );
        }
        write!(out, "{at}{sym}:\t{}", self.text)?;
        // objdump's habits: a RIP-relative operand's address as a comment, a branch target's
        // name after it.
        if let (Some(t), true) = (&self.target, self.text.contains("(%rip)")) {
            write!(out, "\t# {:#x}", t.0)?;
        }
        match &self.target_symbol {
            Some(name) => writeln!(out, " <{}>", paint.name(name)),
            None => writeln!(out),
        }
    }
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(argv)?;
    let machine = cx.session.dump.machine();
    if machine != dumpfmt::Machine::X86_64 {
        bail!("disassembling {machine} code is not supported: kcrash's disassembler is x86_64's");
    }
    let start = address(cx.session, &args.what)?;
    let (count, end) = match args.count {
        Some(0) => bail!("COUNT must be at least 1"),
        Some(n) if n > MAX_COUNT => bail!("COUNT {n} is more than {MAX_COUNT}"),
        Some(n) => (n, start.saturating_add(n * MAX_INSN)),
        None => match function_size(cx.session, &args.what, start) {
            Some(size) if size > MAX_BYTES => {
                bail!(
                    "{}: {size} bytes is more than {MAX_BYTES}: give a COUNT",
                    args.what
                )
            }
            Some(size) => (MAX_COUNT, start.saturating_add(size)),
            None => (1, start.saturating_add(MAX_INSN)),
        },
    };
    let (bytes, stopped) = read_upto(cx.session, start, end - start);
    let mut insns = Instructions::new(&bytes, start);
    let mut last_source = None;
    let mut shown = 0;
    while shown < count {
        crate::interrupt::check()?;
        let Some(insn) = insns.next_insn().filter(|i| i.addr < end) else {
            break;
        };
        let source = args.lines.then(|| source(cx.session, insn.addr)).flatten();
        if source.is_some() && source != last_source {
            if !args.json {
                writeln!(cx.out, "{}", source.as_deref().unwrap_or_default())?;
            }
            last_source.clone_from(&source);
        }
        let line = Line {
            address: Hex(insn.addr),
            symbol: describe(cx.session, insn.addr),
            bytes: insn.bytes.iter().map(|b| format!("{b:02x}")).collect(),
            text: insn.text.to_owned(),
            target: insn.target.map(Hex),
            target_symbol: insn.target.and_then(|t| describe(cx.session, t)),
            source,
            unreadable: None,
        };
        report::line(&line, args.json, cx.out, cx.paint)?;
        shown += 1;
    }
    let at = start + insns.position() as u64;
    if let Some(why) = stopped.filter(|_| shown < count && at < end) {
        let line = Line {
            address: Hex(at),
            symbol: describe(cx.session, at),
            bytes: String::new(),
            text: String::new(),
            target: None,
            target_symbol: None,
            source: None,
            unreadable: Some(why),
        };
        report::line(&line, args.json, cx.out, cx.paint)?;
        bail!("the instructions from {at:#x} on are unreadable (marked above)");
    }
    Ok(Flow::Continue)
}

/// One instruction decoded.
pub struct Insn<'b> {
    pub addr: u64,
    pub bytes: &'b [u8],
    /// AT&T syntax, or `(bad)` for bytes that decode to no instruction.
    pub text: &'b str,
    /// Where a near branch goes, or the address a RIP-relative operand reads.
    pub target: Option<u64>,
}

/// The instructions of `bytes` placed at `ip`, as objdump and gdb print them, up to the first
/// one the bytes end in the middle of.
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

    /// Where the next instruction starts, from the start of the bytes.
    pub fn position(&self) -> usize {
        self.decoder.position()
    }

    /// The next instruction; its text lives until the next call.
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
            target: branch_target(&self.instr),
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

/// A function's size when `what` names one (not an address, not symbol+offset) that starts at
/// `start` and the symbol table gives its size.
fn function_size(session: &Session<'_>, what: &str, start: u64) -> Option<u64> {
    if what.contains('+') || what.starts_with("0x") || what.starts_with("0X") {
        return None;
    }
    let images = session.images();
    let sym = images.set.images().iter().find_map(|i| lookup(i, what))?;
    (sym.address == start && sym.size > 0).then_some(sym.size)
}

/// Up to `len` bytes from `start`, a page at a time: what was read, and why reading stopped
/// short when it did.
fn read_upto(mem: &dyn Memory, start: u64, len: u64) -> (Vec<u8>, Option<String>) {
    let mut bytes = Vec::new();
    while (bytes.len() as u64) < len {
        let at = start + bytes.len() as u64;
        let n = (0x1000 - (at & 0xfff)).min(len - bytes.len() as u64) as usize;
        let mut page = vec![0; n];
        if let Err(e) = mem.read(at, &mut page) {
            return (bytes, Some(escaped(e.to_string().as_bytes())));
        }
        bytes.extend_from_slice(&page);
    }
    (bytes, None)
}

/// Where a near branch goes, or the address a RIP-relative memory operand reads.
fn branch_target(instr: &Instruction) -> Option<u64> {
    use iced_x86::OpKind;
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

/// `function+0x10` for an address in any image of the session; nothing past the end of a
/// symbol whose size is known (a PLT stub after `_init` is not `_init`).
fn describe(session: &Session<'_>, addr: u64) -> Option<String> {
    let images = session.images();
    let (_, sym, off) = images.set.symbolize(addr)?;
    (sym.size == 0 || off < sym.size).then(|| name_plus(&sym, off))
}

/// The source line an address was compiled from: the innermost inlined frame's `file:line`.
fn source(session: &Session<'_>, addr: u64) -> Option<String> {
    let images = session.images();
    let image = images.set.image_at(addr)?;
    let frames = image.frames(addr).ok()?;
    let f = frames
        .iter()
        .find(|f| f.file.is_some() && f.line.is_some())?;
    Some(escaped(
        format!("{}: {}", f.file.as_deref()?, f.line?).as_bytes(),
    ))
}
