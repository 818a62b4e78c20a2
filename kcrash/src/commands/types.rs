//! The type commands: `whatis EXPR|TYPE`, `ptype EXPR|TYPE` (gdb's), and crash's
//! `struct [-o] NAME [ADDR]` / `union [-o] NAME [ADDR]`.

use std::io::Write;

use anyhow::{anyhow, bail, Result};

use super::args::image;
use super::{Context, Flow};
use crate::expr::decl::{self, expanded, Offsets};
use crate::expr::eval::{Place, Shape};
use crate::expr::json::to_json as value_json;
use crate::expr::text::Writer;
use crate::expr::value::{Options, Reader};
use crate::expr::{parse_expr, parse_type, Evaluator, Ty, Value};
use crate::report;

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
or with ADDR their values.

Examples:
  struct _KLog
  struct -o KLog
  struct _KLog 0xffffffff80101040
  struct _KLog &KLogs[2]
  struct _KLog.name,next_write &KLogs[2]
  struct _KLog.next_write";

/// The type `text` names, or `None` when it is not a type name the image has.
fn named_type(ev: &Evaluator<'_>, text: &str) -> Option<Ty> {
    ev.resolve_type(&parse_type(text)?).ok()
}

/// The type of `text`, a type name or an expression (evaluated: `whatis *p` reads `p`).
fn type_of(ev: &Evaluator<'_>, text: &str) -> Result<(Ty, bool)> {
    if let Some(ty) = named_type(ev, text) {
        return Ok((ty, true));
    }
    let expr = parse_expr(text).map_err(|e| anyhow!("{}", e.show(text)))?;
    Ok((ev.eval(&expr)?.ty, false))
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
    let image = image(session)?;
    let ev = Evaluator::new(image, session);
    let (ty, is_type_name) = type_of(&ev, &text)?;
    // A typedef's name shows what it stands for, one level down, as gdb's whatis does.
    let shown = match (&ty, is_type_name) {
        (Ty::Dwarf(id), true) => match image.type_(*id)?.kind {
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
    let image = image(session)?;
    let ev = Evaluator::new(image, session);
    let (ty, _) = type_of(&ev, &text)?;
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
    let image = image(session)?;
    let ev = Evaluator::new(image, session);
    let ty = [format!("{keyword} {name}"), (*name).to_owned()]
        .iter()
        .find_map(|n| named_type(&ev, n))
        .ok_or_else(|| {
            anyhow!(
                "{keyword} {name}: no such type in {}",
                image.path().display()
            )
        })?;
    let is_kind = match ev.shape(&ty)? {
        Shape::Struct(_) | Shape::Variants(_) => keyword == "struct",
        Shape::Union(_) => keyword == "union",
        _ => false,
    };
    if !is_kind {
        bail!("{name} is {}, not a {keyword}", ev.type_name(&ty)?);
    }
    if let Some(members) = members {
        members_of(&ev, &ty, &members, addr, out)?;
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
    let text = addr.join(" ");
    let expr = parse_expr(&text).map_err(|e| anyhow!("{}", e.show(&text)))?;
    let at = address_of(&ev, ev.eval(&expr)?)?;
    let value = Value {
        ty: ty.clone(),
        place: Place::Memory(at),
    };
    let opts = Options {
        pretty: true,
        ..Options::default()
    };
    let node = Reader::new(&ev, opts).read(&value)?;
    if json {
        report::json_line(&value_json(&ev, &node), out)?;
        return Ok(Flow::Continue);
    }
    let shown = match ty {
        Ty::Dwarf(id) => Ty::Dwarf(image.value_type(id)?),
        other => other,
    };
    writeln!(
        out,
        "{} {}",
        ev.type_name(&shown)?,
        Writer { ev: &ev, opts }.top(&node)?
    )?;
    Ok(Flow::Continue)
}

/// `struct NAME.a,b.c [ADDR]`: each member with its offset and declaration, or its value in the
/// object at ADDR, one a line as crash shows them.
fn members_of(
    ev: &Evaluator<'_>,
    ty: &Ty,
    members: &[&str],
    addr: &[&str],
    out: &mut dyn Write,
) -> Result<()> {
    let at = if addr.is_empty() {
        None
    } else {
        let text = addr.join(" ");
        let expr = parse_expr(&text).map_err(|e| anyhow!("{}", e.show(&text)))?;
        Some(address_of(ev, ev.eval(&expr)?)?)
    };
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
                writeln!(out, "  {last} = {text}")?;
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
fn address_of(ev: &Evaluator<'_>, v: Value) -> Result<u64> {
    match ev.shape(&v.ty)? {
        Shape::Int(..) | Shape::Pointer(_) | Shape::Enum(..) => Ok(ev.scalar(&v)?.0),
        _ => match v.place {
            Place::Memory(a) => Ok(a),
            _ => bail!("not an address"),
        },
    }
}
