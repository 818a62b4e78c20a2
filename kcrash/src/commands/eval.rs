//! `eval EXPR`: an integer expression in hexadecimal, decimal, octal and binary, as crash's
//! `eval` prints it; the expression is `p`'s C (symbols, members, sizeof, casts).

use std::io::{self, Write};

use anyhow::{anyhow, bail, Result};
use serde::Serialize;

use super::{Context, Flow};
use crate::expr::{evaluate, parse_expr};
use crate::paint::Paint;
use crate::report::{self, Report};

pub const HELP: &str = "\
eval [--json] EXPR — an integer expression in hexadecimal, decimal, octal and binary, as crash's

EXPR is C as `p` reads it: integers (0x10, 42), symbols and members (KLogs[1].num_recs),
&SYMBOL, sizeof(TYPE), casts, and `* / % + - << >> & ^ |`. A signed value's decimal is signed;
the other forms show its 64 bits.

Examples:
  eval 0x1000 * 16 + 7
  eval sizeof(struct _KLog) * 5
  eval &KLogs[2]
  eval --json KLogs[1].num_recs
";

/// The value in each base; hex, octal and binary as strings, as kcrash's JSON writes 64-bit
/// values.
#[derive(Serialize)]
struct Bases {
    hexadecimal: String,
    decimal: String,
    octal: String,
    binary: String,
}

impl Report for Bases {
    fn text(&self, out: &mut dyn Write, _: Paint) -> io::Result<()> {
        writeln!(out, "hexadecimal: {}", self.hexadecimal)?;
        writeln!(out, "    decimal: {}", self.decimal)?;
        writeln!(out, "      octal: {}", self.octal)?;
        writeln!(out, "     binary: {}", self.binary)
    }
}

pub fn run(cx: &mut Context<'_, '_>, _: &[String]) -> Result<Flow> {
    let mut text = cx.raw.trim();
    let json = match text.strip_prefix("--json") {
        Some(rest) if rest.is_empty() || rest.starts_with(char::is_whitespace) => {
            text = rest.trim_start();
            true
        }
        _ => false,
    };
    if matches!(text, "--help" | "-h") {
        write!(cx.out, "{HELP}")?;
        return Ok(Flow::Continue);
    }
    if text.is_empty() {
        bail!("eval what? (eval EXPR; eval --help)");
    }
    let images = cx.session.images();
    if images.set.images().is_empty() {
        bail!("no image: give the image with DWARF to evaluate expressions");
    }
    let expr = parse_expr(text).map_err(|e| anyhow!("{}", e.show(text)))?;
    let (ev, value) = evaluate(images.set.images(), cx.session, &expr)?;
    let (bits, int) = ev.scalar(&value)?;
    let decimal = match int.signed {
        true => (bits as i64).to_string(),
        false => bits.to_string(),
    };
    let bases = Bases {
        hexadecimal: format!("{bits:#x}"),
        decimal,
        octal: format!("{bits:#o}"),
        binary: format!("{bits:#066b}"),
    };
    report::line(&bases, json, cx.out, cx.paint)?;
    Ok(Flow::Continue)
}
