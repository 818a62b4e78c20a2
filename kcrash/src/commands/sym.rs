//! `sym NAME|ADDR`: symbol to address and back, with size, section and file:line; `sym -l`.

use std::io::{self, Write};

use anyhow::{anyhow, bail, Result};
use clap::Parser;
use regex::Regex;
use serde::Serialize;
use symbols::{Image, Symbol, SymbolKind};

use super::args::{hex, image, named_address};
use super::{Context, Flow};
use crate::error::one_line;
use crate::interrupt;
use crate::linux::live::{Kallsym, Kallsyms};
use crate::paint::Paint;
use crate::report::{self, Hex, Report};
use crate::symbolize::display_name;

/// Translate a symbol to its address or an address to its symbol, or list symbols.
///
/// NAME is a symbol as stored (`KLogs`, `_ZN…`) or demangled without its hash
/// (`klog_runtime::ring::Registry::reserve_torn`); NAME+OFFSET is allowed. ADDR is hex (with or
/// without 0x). Each line: address, nm-style type letter (T text, D data, B bss, R read-only,
/// lower case when local), name+offset, size, section, and file:line when the image has DWARF.
#[derive(Parser, Debug)]
#[command(name = "sym", no_binary_name = true, disable_version_flag = true)]
#[command(
    after_help = "Examples:\n  sym KLogs\n  sym ffffffff80104bb6\n  sym 0xffffffff80104bb6 --json\n  sym -l\n  sym -l 'klog_runtime::ring'"
)]
pub struct Args {
    /// Symbols or addresses to look up.
    #[arg(value_name = "NAME|ADDR", required_unless_present = "list")]
    what: Vec<String>,
    /// List every symbol in address order, or those whose name matches REGEX.
    #[arg(short = 'l', long = "list")]
    list: bool,
    /// One JSON object per symbol.
    #[arg(long)]
    json: bool,
}

/// nm's type letter for a symbol.
fn letter(sym: &Symbol) -> char {
    let section = sym.section.as_deref().unwrap_or("");
    let c = match sym.kind {
        SymbolKind::Function => 't',
        SymbolKind::ThreadLocal => 'd',
        _ if section.starts_with(".bss") || section.starts_with(".tbss") => 'b',
        _ if section.starts_with(".rodata") || section.starts_with(".eh_frame") => 'r',
        _ if section.starts_with(".text") => 't',
        _ => 'd',
    };
    if sym.global {
        c.to_ascii_uppercase()
    } else {
        c
    }
}

/// `sym -l`'s optional pattern.
fn list_pattern(args: &Args) -> Result<Option<Regex>> {
    match args.what.as_slice() {
        [] => Ok(None),
        [p] => Ok(Some(
            Regex::new(p).map_err(|e| anyhow!("{}", one_line(&e.to_string())))?,
        )),
        _ => bail!("sym -l takes one pattern"),
    }
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(argv)?;
    if cx.session.dump.is_live() && cx.session.image.is_none() {
        return run_kallsyms(cx, &args);
    }
    let image = image(cx.session)?;
    if args.list {
        let pattern = list_pattern(&args)?;
        for sym in image.symbols() {
            interrupt::check()?;
            let shown = display_name(&sym.name);
            if pattern
                .as_ref()
                .is_some_and(|re| !re.is_match(&shown) && !re.is_match(&sym.name))
            {
                continue;
            }
            emit(cx, image, &sym, 0, &shown, args.json, false)?;
        }
        return Ok(Flow::Continue);
    }
    let images = cx.session.images();
    for what in &args.what {
        let (addr, name) = named_address(cx.session, what)?;
        // A loaded module's sections hold their addresses; the kernel has the rest.
        let image = images.set.image_at(addr).unwrap_or(image);
        // A name asked for is shown as asked, though another name shares its address
        // (jiffies and jiffies_64), and so is one whose address is no run-time address (a
        // per-CPU variable's offset, `runqueues+8`).
        let named = name
            .map(|s| (addr.wrapping_sub(s.address), s))
            .filter(|(off, s)| *off < s.size.max(1))
            .map(|(off, s)| (s, off));
        let Some((sym, off)) = named.or_else(|| image.symbolize(addr)) else {
            bail!("{addr:#x}: in no symbol");
        };
        let shown = display_name(&sym.name);
        emit(cx, image, &sym, off, &shown, args.json, true)?;
    }
    Ok(Flow::Continue)
}

/// `sym` on a running kernel without a vmlinux: names and addresses from /proc/kallsyms, read
/// afresh (no size, section or line: kallsyms has none).
fn run_kallsyms(cx: &mut Context<'_, '_>, args: &Args) -> Result<Flow> {
    let kallsyms = Kallsyms::read()?;
    let emit = |cx: &mut Context<'_, '_>, s: &Kallsym, off: u64| -> Result<()> {
        let found = Found {
            address: Hex(s.address.wrapping_add(off)),
            symbol: s.name.clone(),
            name: s.name.clone(),
            offset: off,
            symbol_address: Hex(s.address),
            size: None,
            section: None,
            kind: s.kind.to_string(),
            global: None,
            module: s.module.clone(),
            frames: Vec::new(),
            source: Source::Kallsyms,
        };
        Ok(report::line(&found, args.json, cx.out, cx.paint)?)
    };
    if args.list {
        let pattern = list_pattern(args)?;
        for s in kallsyms.iter() {
            interrupt::check()?;
            if pattern.as_ref().is_none_or(|re| re.is_match(&s.name)) {
                emit(cx, s, 0)?;
            }
        }
        return Ok(Flow::Continue);
    }
    for what in &args.what {
        match kallsyms.by_name(what) {
            Some(s) => emit(cx, s, 0)?,
            None => {
                let addr = hex(what).ok_or_else(|| {
                    anyhow!("{what}: not in /proc/kallsyms, and not a hex address")
                })?;
                let (s, off) = kallsyms
                    .by_address(addr)
                    .ok_or_else(|| anyhow!("{addr:#x}: below every kernel symbol"))?;
                emit(cx, s, off)?;
            }
        }
    }
    Ok(Flow::Continue)
}

/// Where a symbol's name and address came from.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Source {
    /// The image's symbol table (and its DWARF for lines).
    Image,
    /// A running kernel's /proc/kallsyms.
    Kallsyms,
}

/// One symbol found: a line of `sym`, or one JSON object.
#[derive(Serialize)]
struct Found {
    address: Hex,
    /// As stored (mangled).
    symbol: String,
    /// As a person reads it.
    name: String,
    offset: u64,
    symbol_address: Hex,
    size: Option<u64>,
    section: Option<String>,
    /// nm's type letter.
    #[serde(rename = "type")]
    kind: String,
    global: Option<bool>,
    /// A running kernel's module that holds it.
    module: Option<String>,
    /// Innermost first: inlined frames, then the function they are in.
    frames: Vec<FoundFrame>,
    source: Source,
}

#[derive(Serialize)]
struct FoundFrame {
    function: Option<String>,
    file: Option<String>,
    line: Option<u32>,
    column: Option<u32>,
}

impl FoundFrame {
    /// `file:line`, or the file alone.
    fn place(&self) -> Option<String> {
        let file = self.file.as_deref()?;
        Some(match self.line {
            Some(line) => format!("{file}:{line}"),
            None => file.to_owned(),
        })
    }
}

impl Report for Found {
    fn text(&self, out: &mut dyn Write, paint: Paint) -> io::Result<()> {
        let name = if self.offset == 0 {
            self.name.clone()
        } else {
            format!("{}+{:#x}", self.name, self.offset)
        };
        write!(
            out,
            "{} ({}) {}",
            paint.addr(format_args!("{:016x}", self.address.0)),
            self.kind,
            paint.name(name)
        )?;
        if let Some(size) = self.size.filter(|&s| s != 0) {
            write!(out, "  size {size:#x}")?;
        }
        if let Some(section) = &self.section {
            write!(out, "  [{section}]")?;
        }
        if let Some(m) = &self.module {
            write!(out, "  [{m}]")?;
        }
        if let Some(mut place) = self.frames.first().and_then(FoundFrame::place) {
            if let [_, .., outer] = self.frames.as_slice() {
                let function = outer.function.as_deref().unwrap_or("?");
                match outer.place() {
                    Some(at) => place.push_str(&format!(" (inlined into {function} at {at})")),
                    None => place.push_str(&format!(" (inlined into {function})")),
                }
            }
            write!(out, "  {place}")?;
        }
        writeln!(out)
    }
}

/// One symbol's line (or JSON object); `lines` adds file:line from DWARF.
fn emit(
    cx: &mut Context<'_, '_>,
    image: &Image,
    sym: &Symbol,
    off: u64,
    shown: &str,
    json: bool,
    lines: bool,
) -> Result<()> {
    let addr = sym.address.wrapping_add(off);
    let frames = if lines {
        image.frames(addr).unwrap_or_default()
    } else {
        Vec::new()
    };
    let found = Found {
        address: Hex(addr),
        symbol: sym.name.clone(),
        name: shown.to_owned(),
        offset: off,
        symbol_address: Hex(sym.address),
        size: Some(sym.size),
        section: sym.section.clone(),
        kind: letter(sym).to_string(),
        global: Some(sym.global),
        module: None,
        frames: frames
            .into_iter()
            .map(|f| FoundFrame {
                function: f.function,
                file: f.file,
                line: f.line,
                column: f.column,
            })
            .collect(),
        source: Source::Image,
    };
    Ok(report::line(&found, json, cx.out, cx.paint)?)
}
