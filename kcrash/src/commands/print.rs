//! `p EXPR` / `print EXPR`: an expression over the dump, evaluated with the image's DWARF and
//! printed as gdb prints it. `p/x EXPR` takes gdb's format letters; `--json` gives the value as
//! a tree; `--pretty` one member a line.

use anyhow::{anyhow, bail, Result};

use serde_json::json;

use super::per_cpu::{cpus_of, per_cpu_name, tagged, Shown};
use super::{Context, Flow};
use crate::expr::decl::declaration;
use crate::expr::json::to_json;
use crate::expr::text::Writer;
use crate::expr::value::{Options, Reader, FORMATS};
use crate::expr::{evaluate, parse_expr, Evaluator, Expr, Place, Ty, Value};
use crate::linux::percpu;
use crate::report::{self, Hex};

pub const HELP: &str = "\
p[/FMT] [--json] [--pretty] EXPR — print an expression as gdb does

EXPR is C: globals (KLogs, hosted::KLogs), integers (0x10, 42, 'a'), `.` `->` `[]`, unary
`* & - ~ !`, casts `(struct _KLog *)ADDR`, `sizeof(TYPE)`, `sizeof EXPR`, and `* / % + - << >>
< > <= >= == != & ^ |`; pointer arithmetic is scaled by the element size.
FMT is one of gdb's letters: x (hex), d (signed), u (unsigned), o (octal), t (binary),
c (character), a (address with symbol), z (zero-padded hex), s (strings: the default).
`EXPR@N` is gdb's artificial array: N objects from where EXPR is (`p *KLogs[1].buffer@8`).
A Linux per-CPU variable (`DEFINE_PER_CPU`) is printed as crash prints it: `p NAME` gives its
type and each CPU's address, `p NAME:CPUS` each of those CPUs' copy, CPUS being `a` (all), a
list such as `0,2-3`, or nothing for the current context's CPU.

Examples:
  p KLogs[3].next_write
  p *KLogs[3].name
  p &KLogBuffer
  p/x KLogs[2]
  p ((KLog *)0xffffffff80101040)->buffer
  p --json DebugFlags[1]
  p runqueues:1
  p/x irq_stat:a";

/// Runs `p` from the command word (`p`, `print`, `p/x`) and the rest of the line as typed.
pub fn run(cx: &mut Context<'_, '_>, _: &[String]) -> Result<Flow> {
    let (session, name, line, out) = (cx.session, cx.word, cx.raw, &mut *cx.out);
    let context = cx.settings.context;
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
    if let Some((name, symbol, cpus)) = per_cpu_name(session, &text)? {
        let (ev, value) = evaluate(images.set.images(), session, &Expr::Name(name.into()))?;
        if matches!(value.ty, Ty::NoDebug) {
            bail!("'{name}' is a per-CPU symbol without debug information: its type is unknown");
        }
        // The DWARF variable must be the symbol: a static of the same name elsewhere is not
        // this per-CPU variable.
        if value.place != Place::Memory(symbol) {
            bail!("{name}: the variable the debug information names is not the per-CPU symbol at {symbol:#x}");
        }
        let copies = Copies {
            ev: &ev,
            name,
            base: symbol,
            ty: value.ty,
            areas: percpu::PerCpu::read(session.kernel())?,
            json,
            opts,
        };
        return match cpus {
            None => copies.addresses(out),
            Some(spec) => {
                copies.values(&cpus_of(session, context, spec, copies.areas.count())?, out)
            }
        };
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

/// A per-CPU variable's copies, printed as crash prints them.
struct Copies<'e, 'n> {
    ev: &'e Evaluator<'e>,
    name: &'n str,
    /// Where the symbol places the variable: the offset every CPU's copy is at from its area.
    base: u64,
    ty: Ty,
    areas: percpu::PerCpu,
    json: bool,
    opts: Options,
}

impl Copies<'_, '_> {
    /// `p NAME`: the type, then each CPU's address.
    fn addresses(&self, out: &mut dyn std::io::Write) -> Result<Flow> {
        let ty = self.ev.type_name(&self.ty)?;
        let copies = self.areas.copies(self.base).enumerate();
        if self.json {
            let per_cpu: Vec<_> = copies
                .map(|(cpu, address)| json!({"cpu": cpu, "address": Hex(address)}))
                .collect();
            let body = json!({"type": ty, "address": Hex(self.base), "name": self.name, "per_cpu": per_cpu});
            report::json_line(&body, out)?;
        } else {
            writeln!(
                out,
                "PER-CPU DATA TYPE:\n  {};",
                declaration(&ty, self.name)
            )?;
            writeln!(out, "PER-CPU ADDRESSES:")?;
            for (cpu, address) in copies {
                writeln!(out, "  [{cpu}]: {address:x}")?;
            }
        }
        Ok(Flow::Continue)
    }

    /// `p NAME:CPUS`: each CPU's copy, as `per_cpu(NAME, CPU) = VALUE`. A copy that cannot be
    /// read says why, and the others still print.
    fn values(&self, cpus: &[usize], out: &mut dyn std::io::Write) -> Result<Flow> {
        let ty = self.ev.type_name(&self.ty)?;
        let mut shown = Shown::new(self.name, &ty, self.json);
        // The CPUs come from `cpus_of`, below the areas' count.
        for (cpu, address) in cpus
            .iter()
            .filter_map(|&cpu| Some((cpu, self.areas.copy(self.base, cpu)?)))
        {
            let copy = Value {
                ty: self.ty.clone(),
                place: Place::Memory(address),
            };
            let show = |out: &mut dyn std::io::Write| -> Result<()> {
                let node = Reader::new(self.ev, self.opts).read(&copy)?;
                if self.json {
                    report::json_line(&tagged(to_json(self.ev, &node), self.name, cpu), out)?;
                } else {
                    let text = Writer {
                        ev: self.ev,
                        opts: self.opts,
                    }
                    .top(&node)?;
                    writeln!(out, "per_cpu({}, {cpu}) = {text}", self.name)?;
                }
                Ok(())
            };
            let text = |e: &anyhow::Error| format!("per_cpu({}, {cpu}) = <{e}>", self.name);
            shown.copy((cpu, address), out, show, text)?;
        }
        shown.finish()?;
        Ok(Flow::Continue)
    }
}
