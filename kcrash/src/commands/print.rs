//! `p EXPR` / `print EXPR`: an expression over the dump, evaluated with the image's DWARF and
//! printed as gdb prints it. `p/x EXPR` takes gdb's format letters; `--json` gives the value as
//! a tree; `--pretty` one member a line.

use anyhow::{anyhow, bail, Result};

use super::{Context, Flow};
use crate::expr::json::to_json;
use crate::expr::text::Writer;
use crate::expr::value::{Options, Reader, FORMATS};
use crate::expr::{evaluate, parse_expr, Expr, Ty};
use crate::report;

pub const HELP: &str = "\
p[/FMT] [--json] [--pretty] EXPR — print an expression as gdb does

EXPR is C: globals (KLogs, hosted::KLogs), integers (0x10, 42, 'a'), `.` `->` `[]`, unary
`* & - ~ !`, casts `(struct _KLog *)ADDR`, `sizeof(TYPE)`, `sizeof EXPR`, and `* / % + - << >>
< > <= >= == != & ^ |`; pointer arithmetic is scaled by the element size.
FMT is one of gdb's letters: x (hex), d (signed), u (unsigned), o (octal), t (binary),
c (character), a (address with symbol), z (zero-padded hex), s (strings: the default).
`EXPR@N` is gdb's artificial array: N objects from where EXPR is (`p *KLogs[1].buffer@8`).

Examples:
  p KLogs[3].next_write
  p *KLogs[3].name
  p &KLogBuffer
  p/x KLogs[2]
  p ((KLog *)0xffffffff80101040)->buffer
  p --json DebugFlags[1]";

/// Runs `p` from the command word (`p`, `print`, `p/x`) and the rest of the line as typed.
pub fn run(cx: &mut Context<'_, '_>, _: &[String]) -> Result<Flow> {
    let (session, name, line, out) = (cx.session, cx.word, cx.raw, &mut *cx.out);
    let mut format = name.split_once('/').map(|(_, f)| f.to_owned());
    let hex = cx.settings.hex;
    let mut opts = Options::default();
    let mut json = false;
    let mut rest = line.trim_start();
    // Options come first, each a word of its own; the expression is the rest, as typed.
    loop {
        let (first, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        match first {
            "--json" => json = true,
            "--pretty" => opts.pretty = true,
            "--help" | "-h" => {
                writeln!(out, "{HELP}")?;
                return Ok(Flow::Continue);
            }
            "--" => {
                rest = tail.trim_start();
                break;
            }
            f if f.starts_with('/') && format.is_none() => format = Some(f[1..].to_owned()),
            _ => break,
        }
        rest = tail.trim_start();
    }
    if format.is_none() && hex {
        // `set radix 16`: gdb's output-radix 16, crash's `hex`.
        opts.format = Some('x');
    }
    if let Some(f) = format {
        let mut letters = f.chars();
        match (letters.next(), letters.next()) {
            // gdb's /s is its default for strings and changes nothing else.
            (Some('s'), None) => {}
            (Some(c), None) if FORMATS.contains(c) => opts.format = Some(c),
            _ => bail!("p/{f}: unknown format (one of {FORMATS})"),
        }
    }
    let text = rest.trim().to_owned();
    if text.trim().is_empty() {
        bail!("print what? (p EXPR; p --help)");
    }
    let images = session.images();
    if images.set.images().is_empty() {
        bail!("no image: give the image with DWARF to print expressions");
    }
    let expr = parse_expr(&text).map_err(|e| anyhow!("{}", e.show(&text)))?;
    let (ev, value) = evaluate(images.set.images(), session, &expr)?;
    if let (Ty::NoDebug, Expr::Name(name)) = (&value.ty, &expr) {
        bail!("'{name}' has unknown type; cast it to its declared type");
    }
    let node = Reader::new(&ev, opts).read(&value)?;
    if json {
        report::json_line(&to_json(&ev, &node), out)?;
    } else {
        writeln!(out, "{}", Writer { ev: &ev, opts }.top(&node)?)?;
    }
    Ok(Flow::Continue)
}
