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
use crate::linux::percpu;
use crate::paint::Paint;
use crate::report::{self, Hex, Report};
use crate::session::Session;
use crate::symbolize::display_name;

/// Translate a symbol to its address or an address to its symbol, or list symbols.
///
/// NAME is a symbol as stored (`KLogs`, `_ZN…`) or demangled without its hash
/// (`klog_runtime::ring::Registry::reserve_torn`); NAME+OFFSET is allowed. ADDR is hex (with or
/// without 0x). Each line: address, nm-style type letter (T text, D data, B bss, R read-only,
/// lower case when local), name+offset, size, section, and file:line when the image has DWARF.
/// On a Linux kernel, an address in a CPU's copy of a per-CPU variable is named by the
/// variable, and the line ends with the CPU whose copy it is.
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
            // Demangled once, for the pattern and the line.
            let found = Found::of(image, &sym, 0, false);
            if pattern
                .as_ref()
                .is_some_and(|re| !re.is_match(&found.name) && !re.is_match(&found.symbol))
            {
                continue;
            }
            report::line(&found, args.json, cx.out, cx.paint)?;
        }
        return Ok(Flow::Continue);
    }
    let images = cx.session.images();
    // Read once, when an address is in no symbol.
    let mut areas = None;
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
        let found = match named.or_else(|| image.symbolize(addr)) {
            Some((sym, off)) => Found::of(image, &sym, off, true),
            None => per_cpu_copy(cx.session, &mut areas, addr)?,
        };
        report::line(&found, args.json, cx.out, cx.paint)?;
    }
    Ok(Flow::Continue)
}

/// `addr` in CPUs' copy of a per-CPU variable of a Linux kernel's image, named by the variable
/// (`areas`: the per-CPU areas, read at the first call).
fn per_cpu_copy(
    session: &Session<'_>,
    areas: &mut Option<Result<percpu::PerCpu, String>>,
    addr: u64,
) -> Result<Found> {
    let (Some(image), Some(_)) = (session.image.as_deref(), &session.linux) else {
        bail!("{addr:#x}: in no symbol");
    };
    let areas = areas
        .get_or_insert_with(|| percpu::PerCpu::read(session.kernel()).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| anyhow!("{addr:#x}: in no symbol, and the per-CPU areas are unknown: {e}"))?;
    let (sym, off, cpus) = areas.place(image, addr).ok_or_else(|| {
        anyhow!("{addr:#x}: in no symbol, nor in a per-CPU variable of the kernel's image")
    })?;
    let mut found = Found::of(image, &sym, off, false);
    found.address = Hex(addr);
    found.cpus = cpus;
    Ok(found)
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
            cpus: Vec::new(),
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
    /// Whose copy of a per-CPU variable the address is in, several when their areas coincide
    /// (`symbol_address` is then the variable's offset, or its template's address).
    cpus: Vec<usize>,
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
        match self.cpus.as_slice() {
            [] => {}
            [cpu] => write!(out, "  CPU {cpu}'s copy")?,
            cpus => {
                let cpus: Vec<String> = cpus.iter().map(usize::to_string).collect();
                write!(
                    out,
                    "  the copy of CPUs {}, whose areas coincide",
                    cpus.join(",")
                )?
            }
        }
        writeln!(out)
    }
}

impl Found {
    /// `sym` in `image`, `off` bytes in; `lines` adds file:line from DWARF.
    fn of(image: &Image, sym: &Symbol, off: u64, lines: bool) -> Found {
        let addr = sym.address.wrapping_add(off);
        let frames = if lines {
            image.frames(addr).unwrap_or_default()
        } else {
            Vec::new()
        };
        Found {
            address: Hex(addr),
            symbol: sym.name.clone(),
            name: display_name(&sym.name),
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
            cpus: Vec::new(),
        }
    }
}
