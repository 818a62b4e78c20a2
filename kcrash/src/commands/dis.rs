//! `dis FUNC` / `dis ADDR [COUNT]`: instructions read from the dump, as crash's `dis` prints
//! them — x86-64 in AT&T syntax and arm64 in Arm's, as gdb and objdump print them — with branch
//! targets and PC-relative addresses named `<symbol+offset>`, and with `-l` the source line each
//! comes from.

use std::io::{self, Write};

use anyhow::{bail, Result};
use clap::Parser;
use serde::Serialize;

use super::args::{address, number};
use super::{Context, Flow};
use crate::disasm::Instructions;
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

/// One instruction, or the place where reading stopped.
#[derive(Serialize)]
struct Line {
    address: Hex,
    /// `function+offset` of the instruction.
    symbol: Option<String>,
    /// The instruction's bytes in hex.
    bytes: String,
    /// The instruction as objdump writes it (x86-64 in AT&T syntax); `(bad)` (x86-64) or
    /// `.inst 0x… ; undefined` (arm64) for bytes that decode to none.
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
    let start = address(cx.session, &args.what)?;
    if let Some(why) = Instructions::misplaced(machine, start) {
        bail!("{why}");
    }
    let max_insn = Instructions::max_len(machine);
    let (count, end) = match args.count {
        Some(0) => bail!("COUNT must be at least 1"),
        Some(n) if n > MAX_COUNT => bail!("COUNT {n} is more than {MAX_COUNT}"),
        Some(n) => (n, start.saturating_add(n * max_insn)),
        None => match function_size(cx.session, &args.what, start) {
            Some(size) if size > MAX_BYTES => {
                bail!(
                    "{}: {size} bytes is more than {MAX_BYTES}: give a COUNT",
                    args.what
                )
            }
            Some(size) => (MAX_COUNT, start.saturating_add(size)),
            None => (1, start.saturating_add(max_insn)),
        },
    };
    let (bytes, stopped) = read_upto(cx.session, start, end - start);
    let mut insns = Instructions::new(machine, &bytes, start);
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
