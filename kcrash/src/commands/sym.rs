//! `sym NAME|ADDR`: symbol to address and back, with size, section and file:line; `sym -l`.

use anyhow::{anyhow, bail, Result};
use clap::Parser;
use regex::Regex;
use serde_json::json;
use symbols::{Image, Symbol, SymbolKind};

use super::args::{address, hex, image};
use super::{Context, Flow};
use crate::error::one_line;
use crate::interrupt;
use crate::linux::live::{Kallsym, Kallsyms};
use crate::session::ImageRef;
use crate::symbolize::{display_name, lookup};

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
        let addr = address(cx.session, what)?;
        // A loaded module's sections hold their addresses; the kernel has the rest.
        let image = images
            .iter()
            .find_map(|i| match i {
                ImageRef::Module(m) if m.image.contains(addr) => Some(&m.image),
                _ => None,
            })
            .unwrap_or(image);
        // A name asked for is shown as asked, though another name shares its address
        // (jiffies and jiffies_64).
        let named = lookup(image, what).filter(|s| s.address == addr);
        let Some((sym, off)) = named.map(|s| (s, 0)).or_else(|| image.symbolize(addr)) else {
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
        let addr = s.address.wrapping_add(off);
        if args.json {
            let doc = json!({
                "address": addr, "symbol": s.name, "name": s.name, "offset": off,
                "symbol_address": s.address, "type": s.kind.to_string(), "module": s.module,
                "source": "kallsyms",
            });
            serde_json::to_writer(&mut *cx.out, &doc)?;
            return Ok(writeln!(cx.out)?);
        }
        let name = if off == 0 {
            s.name.clone()
        } else {
            format!("{}+{off:#x}", s.name)
        };
        write!(
            cx.out,
            "{} ({}) {}",
            cx.paint.addr(format_args!("{addr:016x}")),
            s.kind,
            cx.paint.name(name)
        )?;
        if let Some(m) = &s.module {
            write!(cx.out, "  [{m}]")?;
        }
        Ok(writeln!(cx.out)?)
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
    let at = |f: &symbols::Frame| {
        let file = f.file.as_deref()?;
        Some(match f.line {
            Some(line) => format!("{file}:{line}"),
            None => file.to_owned(),
        })
    };
    let mut place = frames.first().and_then(at);
    if let (Some(place), [_, .., outer]) = (&mut place, frames.as_slice()) {
        let function = outer.function.as_deref().unwrap_or("?");
        match at(outer) {
            Some(where_) => place.push_str(&format!(" (inlined into {function} at {where_})")),
            None => place.push_str(&format!(" (inlined into {function})")),
        }
    }
    if json {
        let frames: Vec<_> = frames
            .iter()
            .map(|f| json!({"function": f.function, "file": f.file, "line": f.line, "column": f.column}))
            .collect();
        let doc = json!({
            "address": addr, "symbol": sym.name, "name": shown, "offset": off,
            "symbol_address": sym.address, "size": sym.size, "section": sym.section,
            "type": letter(sym).to_string(), "global": sym.global, "frames": frames,
        });
        serde_json::to_writer(&mut *cx.out, &doc)?;
        writeln!(cx.out)?;
        return Ok(());
    }
    let name = if off == 0 {
        shown.to_owned()
    } else {
        format!("{shown}+{off:#x}")
    };
    write!(
        cx.out,
        "{} ({}) {}",
        cx.paint.addr(format_args!("{addr:016x}")),
        letter(sym),
        cx.paint.name(name)
    )?;
    if sym.size != 0 {
        write!(cx.out, "  size {:#x}", sym.size)?;
    }
    if let Some(section) = &sym.section {
        write!(cx.out, "  [{section}]")?;
    }
    if let Some(place) = place {
        write!(cx.out, "  {place}")?;
    }
    writeln!(cx.out)?;
    Ok(())
}
