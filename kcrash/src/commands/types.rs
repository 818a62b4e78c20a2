//! The type commands: `whatis EXPR|TYPE`, `ptype EXPR|TYPE` (gdb's), and crash's
//! `struct [-o] NAME [ADDR]` / `union [-o] NAME [ADDR]`.

use std::io::Write;
use std::sync::Arc;

use anyhow::{anyhow, bail, Result};

use super::per_cpu::{cpus_of, per_cpu_name, tagged, Shown};
use super::{Context, Flow};
use crate::expr::decl::{self, expanded, Offsets};
use crate::expr::eval::{Place, Shape};
use crate::expr::json::to_json as value_json;
use crate::expr::text::Writer;
use crate::expr::value::{Options, Reader};
use crate::expr::{
    evaluate, evaluate_with, named_type, named_type_with, parse_expr, Evaluator, Ty, Value,
};
use crate::linux::percpu;
use crate::memory::Memory;
use crate::report;
use crate::session::{Images, Session};
use symbols::{Image, Search};

pub const WHATIS_HELP: &str = "\
whatis [--json] EXPR|TYPE — the type of an expression, or what a type name names (one typedef unrolled)

Examples:
  whatis KLogs
  whatis KLogs[1].name
  whatis KLog";

pub const PTYPE_HELP: &str = "\
ptype [--json] EXPR|TYPE — a type with its struct, union or enum spelled out, as gdb's ptype

Examples:
  ptype KLog
  ptype struct _KLog
  ptype DebugFlags
  ptype klog_runtime::ring::KLog";

pub const STRUCT_HELP: &str = "\
struct [-o] [--json] NAME [ADDR] — a struct's layout, or the object at ADDR shown as that struct (crash's)
union [-o] NAME [ADDR] — the same for a union

NAME is a tag (_KLog), a typedef (KLog) or a Rust path (klog_runtime::ring::KLog). -o puts each
member's offset in front ([0x8]); the size follows the layout. ADDR is an address, a symbol or any
expression giving one. NAME.m1,m2.sub shows only those members: their offsets and declarations,
or with ADDR their values. On a Linux kernel ADDR may be a per-CPU variable with the CPUs whose
copies to show, as crash takes them: NAME:a (all), NAME:0,2-3, or NAME: (the current context's).

Examples:
  struct _KLog
  struct -o KLog
  struct _KLog 0xffffffff80101040
  struct _KLog &KLogs[2]
  struct _KLog.name,next_write &KLogs[2]
  struct _KLog.next_write
  struct rq.nr_running runqueues:a";

/// The type of `text` — a type name or an expression (evaluated: `whatis *p` reads `p`) — in
/// the first of the session's images that knows it (the kernel's, then each module's), with
/// that image's evaluator, and whether `text` named a type.
fn type_of<'i>(
    images: &'i [Arc<Image>],
    mem: &'i dyn Memory,
    text: &str,
) -> Result<(Evaluator<'i>, Ty, bool)> {
    let expr = parse_expr(text);
    // A type or an expression that the images know cheaply, before any full name index.
    let mut failure = None;
    for search in [Search::Quick, Search::Full] {
        if let Some((ev, ty)) = named_type_with(images, mem, text, search) {
            return Ok((ev, ty, true));
        }
        let Ok(expr) = &expr else { continue };
        match evaluate_with(images, mem, expr, search) {
            Ok((ev, value)) => return Ok((ev, value.ty, false)),
            Err(e @ crate::error::Error::NoSymbol { .. }) => failure = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    match (expr, failure) {
        (Err(e), _) => Err(anyhow!("{}", e.show(text))),
        (Ok(_), Some(e)) => Err(e.into()),
        (Ok(_), None) => bail!("{text}: no such type or symbol"),
    }
}

/// The session's images, or why there are none.
fn all_images(session: &Session<'_>) -> Result<Arc<Images>> {
    let images = session.images();
    if images.set.images().is_empty() {
        bail!("no image: give the kernel image or program for symbols");
    }
    Ok(images)
}

/// The argument of `whatis`/`ptype` as typed (empty for `--help`), and whether `--json` came
/// first.
fn argument(line: &str, what: &str) -> Result<(String, bool)> {
    let line = line.trim();
    let (json, text) = match line.strip_prefix("--json") {
        Some(rest) if rest.is_empty() || rest.starts_with(char::is_whitespace) => {
            (true, rest.trim())
        }
        _ => (false, line),
    };
    match text {
        "" => bail!("{what} what? ({what} --help)"),
        "--help" | "-h" => Ok((String::new(), json)),
        text => Ok((text.to_owned(), json)),
    }
}

pub fn whatis(cx: &mut Context<'_, '_>, _: &[String]) -> Result<Flow> {
    let (session, line, out) = (cx.session, cx.raw, &mut *cx.out);
    let (text, json) = argument(line, "whatis")?;
    if text.is_empty() {
        writeln!(out, "{WHATIS_HELP}")?;
        return Ok(Flow::Continue);
    }
    let images = all_images(session)?;
    let (ev, ty, is_type_name) = type_of(images.set.images(), session, &text)?;
    // A typedef's name shows what it stands for, one level down, as gdb's whatis does.
    let shown = match (&ty, is_type_name) {
        (Ty::Dwarf(id), true) => match ev.image.type_(*id)?.kind {
            symbols::TypeKind::Typedef(target) => target.map_or(Ty::Void, Ty::Dwarf),
            _ => ty.clone(),
        },
        _ => ty.clone(),
    };
    if json {
        report::json_line(&serde_json::json!({ "type": ev.type_name(&shown)? }), out)?;
    } else {
        writeln!(out, "type = {}", ev.type_name(&shown)?)?;
    }
    Ok(Flow::Continue)
}

pub fn ptype(cx: &mut Context<'_, '_>, _: &[String]) -> Result<Flow> {
    let (session, line, out) = (cx.session, cx.raw, &mut *cx.out);
    let (text, json) = argument(line, "ptype")?;
    if text.is_empty() {
        writeln!(out, "{PTYPE_HELP}")?;
        return Ok(Flow::Continue);
    }
    let images = all_images(session)?;
    let (ev, ty, _) = type_of(images.set.images(), session, &text)?;
    if json {
        report::json_line(&decl::layout_json(&ev, &ty)?, out)?;
    } else {
        writeln!(out, "type = {}", expanded(&ev, &ty, Offsets::None)?)?;
    }
    Ok(Flow::Continue)
}

/// `struct` (with `keyword` "struct") and `union`.
pub fn struct_(cx: &mut Context<'_, '_>, args: &[String]) -> Result<Flow> {
    let (session, keyword, out) = (cx.session, cx.word, &mut *cx.out);
    let context = cx.settings.context;
    let mut offsets = Offsets::None;
    let mut json = false;
    let mut rest: Vec<&str> = Vec::new();
    for a in args {
        match a.as_str() {
            "-o" => offsets = Offsets::Hex,
            "--json" => json = true,
            "--help" | "-h" => {
                writeln!(out, "{STRUCT_HELP}")?;
                return Ok(Flow::Continue);
            }
            other => rest.push(other),
        }
    }
    let Some((name, addr)) = rest.split_first() else {
        bail!("{keyword} what? ({keyword} NAME [ADDR]; {keyword} --help)");
    };
    // crash's `struct NAME.member[,member...]`: only those members.
    let (name, members) = match name.split_once('.') {
        Some((n, m)) => (n, Some(m.split(',').collect::<Vec<_>>())),
        None => (*name, None),
    };
    let images = all_images(session)?;
    let (ev, ty) = [format!("{keyword} {name}"), (*name).to_owned()]
        .iter()
        .find_map(|n| named_type(images.set.images(), session, n))
        .ok_or_else(|| {
            let searched: Vec<String> = images
                .set
                .images()
                .iter()
                .map(|i| i.path().display().to_string())
                .collect();
            anyhow!("{keyword} {name}: no such type in {}", searched.join(", "))
        })?;
    let is_kind = match ev.shape(&ty)? {
        Shape::Struct(_) | Shape::Variants(_) => keyword == "struct",
        Shape::Union(_) => keyword == "union",
        _ => false,
    };
    if !is_kind {
        bail!("{name} is {}, not a {keyword}", ev.type_name(&ty)?);
    }
    let addr = addr.join(" ");
    let typed = format!("{keyword} {name}");
    let opts = Options {
        pretty: true,
        ..Options::default()
    };
    let at = |text: &str| address_in(images.set.images(), session, text);
    if json && members.is_some() {
        bail!("--json shows whole types and objects: {keyword} --json {name} [ADDR]");
    }
    if let Some((var, base, cpus)) = per_cpu_name(session, &addr)? {
        let Some(spec) = cpus else {
            bail!(
                "{var} is a per-CPU variable: name the CPUs whose copies to show ({var}:a, \
                 {var}:0-1, or {var}: for the current context's CPU)"
            );
        };
        let areas = percpu::PerCpu::read(session.kernel())?;
        let cpus = cpus_of(session, context, spec, areas.count())?;
        let type_name = ev.type_name(&ty)?;
        let mut shown = Shown::new(var, &type_name, json);
        // The CPUs come from `cpus_of`, below the areas' count.
        for (cpu, copy) in cpus
            .iter()
            .filter_map(|&cpu| Some((cpu, areas.copy(base, cpu)?)))
        {
            let show = |out: &mut dyn Write| {
                // crash's `[CPU]: ADDRESS` before each copy; in JSON, the object's `cpu`.
                if !json {
                    writeln!(out, "[{cpu}]: {copy:x}")?;
                }
                match &members {
                    Some(members) => members_of(&ev, &ty, members, Some(copy), out),
                    None => object_at(&ev, (&ty, &typed), copy, opts, json, Some((var, cpu)), out),
                }
            };
            shown.copy((cpu, copy), out, show, |e| format!("  <{e}>"))?;
        }
        shown.finish()?;
        return Ok(Flow::Continue);
    }
    if let Some(members) = members {
        let at = (!addr.is_empty()).then(|| at(&addr)).transpose()?;
        members_of(&ev, &ty, &members, at, out)?;
        return Ok(Flow::Continue);
    }
    if addr.is_empty() && json {
        report::json_line(&decl::layout_json(&ev, &ty)?, out)?;
        return Ok(Flow::Continue);
    }
    if addr.is_empty() {
        writeln!(out, "{}", expanded(&ev, &ty, offsets)?)?;
        if let Some(size) = ev.size_of(&ty)? {
            writeln!(out, "SIZE: {size}")?;
        }
        return Ok(Flow::Continue);
    }
    object_at(&ev, (&ty, &typed), at(&addr)?, opts, json, None, out)?;
    Ok(Flow::Continue)
}

/// The object at `at` shown as `ty`, as crash's `struct NAME ADDR` shows it (`typed` is the
/// type as the user named it: a typedef of an anonymous struct goes by that name); in JSON,
/// with the per-CPU variable and CPU whose copy it is, when it is one.
fn object_at(
    ev: &Evaluator<'_>,
    (ty, typed): (&Ty, &str),
    at: u64,
    opts: Options,
    json: bool,
    copy_of: Option<(&str, usize)>,
    out: &mut dyn Write,
) -> Result<()> {
    let value = Value {
        ty: ty.clone(),
        place: Place::Memory(at),
    };
    let node = Reader::new(ev, opts).read(&value)?;
    if json {
        let body = value_json(ev, &node);
        let body = match copy_of {
            Some((name, cpu)) => tagged(body, name, cpu),
            None => body,
        };
        report::json_line(&body, out)?;
        return Ok(());
    }
    let name = match ty {
        Ty::Dwarf(id) => {
            let shown = ev.image.value_type(*id)?;
            // An anonymous struct goes by the typedef the user named.
            match ev.image.type_(shown)?.name {
                Some(_) => ev.type_name(&Ty::Dwarf(shown))?,
                None => typed.to_owned(),
            }
        }
        other => ev.type_name(other)?,
    };
    writeln!(out, "{name} {}", Writer { ev, opts }.top(&node)?)?;
    Ok(())
}

/// `struct NAME.a,b.c [ADDR]`: each member with its offset and declaration, or its value in the
/// object at ADDR, one a line as crash shows them (a value with the comma that follows it in
/// the struct).
fn members_of(
    ev: &Evaluator<'_>,
    ty: &Ty,
    members: &[&str],
    at: Option<u64>,
    out: &mut dyn Write,
) -> Result<()> {
    let opts = Options {
        pretty: true,
        ..Options::default()
    };
    for path in members {
        let base = Value {
            ty: ty.clone(),
            place: Place::Memory(at.unwrap_or(0)),
        };
        let v = ev.member_path(base, path)?;
        let last = path.rsplit('.').next().unwrap_or(path);
        match at {
            Some(_) => {
                let node = Reader::new(ev, opts).read(&v)?;
                let mut text = String::new();
                Writer { ev, opts }.write(&node, 2, &mut text);
                writeln!(out, "  {last} = {text},")?;
            }
            None => {
                let (offset, bits) = match v.place {
                    Place::Memory(off) => (off, None),
                    Place::Bits {
                        addr,
                        bit_offset,
                        bit_size,
                    } => (
                        addr.wrapping_add(bit_offset / 8),
                        Some((bit_offset % 8, bit_size)),
                    ),
                    Place::Immediate(_) => bail!("{path} is not in memory"),
                };
                let mut line = decl::declaration(&ev.type_name(&v.ty)?, last);
                let col = match bits {
                    Some((bit, size)) => {
                        line.push_str(&format!(" : {size}"));
                        format!("[{offset:#x}:{bit}]")
                    }
                    None => format!("[{offset:#x}]"),
                };
                writeln!(out, "  {col} {line};")?;
            }
        }
    }
    Ok(())
}

/// An address given as a number or pointer (its value), or as an object (where it is).
/// The address `text` gives — an expression in any of the session's images (a module's type
/// at a kernel variable's address, or the other way round).
fn address_in(images: &[Arc<Image>], mem: &dyn Memory, text: &str) -> Result<u64> {
    let expr = parse_expr(text).map_err(|e| anyhow!("{}", e.show(text)))?;
    let (ev, value) = evaluate(images, mem, &expr)?;
    address_of(&ev, value)
}

fn address_of(ev: &Evaluator<'_>, v: Value) -> Result<u64> {
    match ev.shape(&v.ty)? {
        Shape::Int(..) | Shape::Pointer(_) | Shape::Enum(..) => Ok(ev.scalar(&v)?.0),
        _ => match v.place {
            Place::Memory(a) => Ok(a),
            _ => bail!("not an address"),
        },
    }
}
