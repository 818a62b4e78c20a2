//! Types written out as gdb's `ptype` and crash's `struct` write them: a struct, union or enum
//! expanded one level, in C syntax for C types and Rust's for Rust types, optionally with each
//! member's offset.

use std::fmt::Write as _;

use serde_json::{json, Value as Json};

use symbols::{Image, Member, Qualifier, TypeId, TypeKind};

use crate::error::{Error, Result};

use super::eval::{c_spelling, Evaluator, Shape, Ty};
use crate::report::Dec;

/// How members are introduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offsets {
    None,
    /// crash's `struct -o`: `[0x8]` before each member.
    Hex,
}

/// `ptype`'s text for `ty`, without the `type = `: the type with its struct, union or enum
/// expanded, and what is put on it (`} *`, `} [5]`).
pub fn expanded(ev: &Evaluator<'_>, ty: &Ty, offsets: Offsets) -> Result<String> {
    // Rust's arrays and pointers are named, as gdb's Rust ptype does, not expanded.
    if ev.is_rust(ty)
        && !matches!(
            ev.shape(ty)?,
            Shape::Struct(_) | Shape::Union(_) | Shape::Variants(_) | Shape::Enum(..)
        )
    {
        return ev.type_name(&ev.unwrapped(ty)?);
    }
    // The declarator around the base type, built outside in: `*`, `[5]`, `(*)[5]`; typedefs
    // are seen through, as gdb's ptype does, and qualifiers kept on the base type.
    let mut declarator = String::new();
    let mut qualifiers: Vec<&str> = Vec::new();
    let mut current = ty.clone();
    for _ in 0..64 {
        let next = match &current {
            Ty::Pointer(t) => {
                declarator.insert(0, '*');
                qualifiers.clear();
                (**t).clone()
            }
            Ty::Array(t, dims) => {
                wrap_array(&mut declarator, dims);
                (**t).clone()
            }
            Ty::Dwarf(id) => {
                let t = ev.image.type_(*id)?;
                match &t.kind {
                    TypeKind::Typedef(target) => target.map_or(Ty::Void, Ty::Dwarf),
                    TypeKind::Qualified(q, target) => {
                        qualifiers.push(match q {
                            Qualifier::Const => "const",
                            Qualifier::Volatile => "volatile",
                            Qualifier::Restrict => "restrict",
                            Qualifier::Atomic => "_Atomic",
                        });
                        target.map_or(Ty::Void, Ty::Dwarf)
                    }
                    TypeKind::Pointer(target) => {
                        declarator.insert(0, '*');
                        qualifiers.clear();
                        target.map_or(Ty::Void, Ty::Dwarf)
                    }
                    TypeKind::Array(a) => {
                        wrap_array(&mut declarator, &a.dims);
                        a.element.map_or(Ty::Void, Ty::Dwarf)
                    }
                    _ => break,
                }
            }
            _ => break,
        };
        current = next;
    }
    let mut out = String::new();
    for q in qualifiers {
        out.push_str(q);
        out.push(' ');
    }
    out.push_str(&match &current {
        Ty::Dwarf(id) if is_aggregate(ev, *id)? => body(ev.image, *id, offsets, 0)?,
        other => ev.type_name(other)?,
    });
    if !declarator.is_empty() {
        out.push(' ');
        out.push_str(&declarator);
    }
    Ok(out)
}

fn is_aggregate(ev: &Evaluator<'_>, id: TypeId) -> Result<bool> {
    Ok(matches!(
        ev.image.type_(id)?.kind,
        TypeKind::Struct(_) | TypeKind::Union(_) | TypeKind::Enum(_) | TypeKind::Variants(_)
    ))
}

fn wrap_array(declarator: &mut String, dims: &[Option<u64>]) {
    if declarator.starts_with('*') {
        *declarator = format!("({declarator})");
    }
    for d in dims {
        match d {
            Some(n) => write!(declarator, "[{n}]").ok(),
            None => write!(declarator, "[]").ok(),
        };
    }
}

/// The type `id` itself: a struct, union or enum with its members, else its name.
fn body(image: &Image, id: TypeId, offsets: Offsets, indent: usize) -> Result<String> {
    let t = image.type_(id)?;
    let name = image.type_name(id)?;
    let header = if t.name.is_some() {
        name.clone()
    } else {
        name.trim_end_matches("{...}").trim_end().to_owned()
    };
    let mut out = String::new();
    match &t.kind {
        TypeKind::Struct(members) | TypeKind::Union(members) if t.rust => {
            let keyword = if matches!(t.kind, TypeKind::Union(_)) {
                "union"
            } else {
                "struct"
            };
            writeln!(out, "{keyword} {header} {{").ok();
            for m in members {
                let off = offset_column(m, 0, offsets);
                let pad = if off.is_empty() {
                    " ".repeat(indent + 2)
                } else {
                    pad_after(&off, &" ".repeat(indent + 4))
                };
                let ty = name_of(image, m.ty)?;
                writeln!(out, "{off}{pad}{}: {ty},", m.name.as_deref().unwrap_or("_")).ok();
            }
            write!(out, "{}}}", " ".repeat(indent)).ok();
        }
        TypeKind::Struct(members) | TypeKind::Union(members) => {
            writeln!(out, "{header} {{").ok();
            c_members(image, members, 0, offsets, indent + 4, &mut out)?;
            write!(out, "{}}}", " ".repeat(indent)).ok();
        }
        TypeKind::Enum(e) => {
            write!(out, "{header} {{").ok();
            let mut next = 0i128;
            for (i, en) in e.enumerators.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&en.name);
                if en.value != next {
                    write!(out, " = {}", en.value).ok();
                }
                next = en.value.wrapping_add(1);
            }
            out.push('}');
        }
        TypeKind::Variants(vs) => {
            writeln!(out, "enum {header} {{").ok();
            for v in &vs.variants {
                let vname = v.member.name.as_deref().unwrap_or("_");
                let fields = match v.member.ty {
                    Some(vid) => match image.type_(vid)?.kind.clone() {
                        TypeKind::Struct(ms) => ms,
                        _ => Vec::new(),
                    },
                    None => Vec::new(),
                };
                let tuple = fields
                    .iter()
                    .all(|f| f.name.as_deref().is_some_and(|n| n.starts_with("__")));
                let mut parts = Vec::new();
                for f in &fields {
                    let ty = name_of(image, f.ty)?;
                    parts.push(if tuple {
                        ty
                    } else {
                        format!("{}: {ty}", f.name.as_deref().unwrap_or("_"))
                    });
                }
                let shown = match (fields.is_empty(), tuple) {
                    (true, _) => vname.to_owned(),
                    (false, true) => format!("{vname}({})", parts.join(", ")),
                    (false, false) => format!("{vname}{{{}}}", parts.join(", ")),
                };
                writeln!(out, "{}  {shown},", " ".repeat(indent)).ok();
            }
            write!(out, "{}}}", " ".repeat(indent)).ok();
        }
        _ => out = name,
    }
    Ok(out)
}

/// Anonymous structs inside anonymous structs deeper than this are a cycle in broken DWARF.
const MAX_ANONYMOUS_NESTING: usize = 32;

/// C member declarations, one a line, anonymous structs and unions expanded in place.
fn c_members(
    image: &Image,
    members: &[Member],
    base: u64,
    offsets: Offsets,
    indent: usize,
    out: &mut String,
) -> Result<()> {
    for m in members {
        let pad = " ".repeat(indent);
        let off = offset_column(m, base, offsets);
        let anonymous = match m.ty {
            Some(id) => {
                let t = image.type_(id)?;
                (t.name.is_none() && matches!(t.kind, TypeKind::Struct(_) | TypeKind::Union(_)))
                    .then_some(t)
            }
            None => None,
        };
        if let Some(t) = anonymous {
            let (TypeKind::Struct(inner) | TypeKind::Union(inner)) = &t.kind else {
                continue;
            };
            let keyword = if matches!(t.kind, TypeKind::Union(_)) {
                "union"
            } else {
                "struct"
            };
            writeln!(out, "{off}{pad}{keyword} {{").ok();
            if indent > 4 * MAX_ANONYMOUS_NESTING {
                return Err(Error::Damaged(
                    "anonymous members nested too deeply (a type cycle in the DWARF?)".into(),
                ));
            }
            c_members(
                image,
                inner,
                base.wrapping_add(m.offset),
                offsets,
                indent + 4,
                out,
            )?;
            let blank = " ".repeat(off.len());
            let pad = pad_after(&off, &pad);
            match &m.name {
                Some(n) => writeln!(out, "{blank}{pad}}} {n};").ok(),
                None => writeln!(out, "{blank}{pad}}};").ok(),
            };
            continue;
        }
        let ty = name_of(image, m.ty)?;
        let mut line = declaration(&ty, m.name.as_deref().unwrap_or(""));
        if let Some(bf) = m.bit_field {
            write!(line, " : {}", bf.bit_size).ok();
        }
        writeln!(out, "{off}{}{line};", pad_after(&off, &pad)).ok();
    }
    Ok(())
}

/// The indentation after an offset column: one space after the offset, as crash's `struct -o`.
fn pad_after(off: &str, pad: &str) -> String {
    if off.is_empty() {
        pad.to_owned()
    } else {
        " ".repeat(pad.len().saturating_sub(3))
        // (one space, plus the nesting beyond the first level)
    }
}

/// `[0x8] ` for crash's `struct -o`, nothing otherwise.
fn offset_column(m: &Member, base: u64, offsets: Offsets) -> String {
    match offsets {
        Offsets::None => String::new(),
        Offsets::Hex => {
            let at = base.wrapping_add(m.offset);
            let col = match m.bit_field {
                Some(bf) => format!("[{at:#x}:{}]", bf.bit_offset % 8),
                None => format!("[{at:#x}]"),
            };
            format!("{col:>9}")
        }
    }
}

/// A C declaration of `name` with the type named `ty`: `const char *name`, `char name[24]`,
/// `uint64_t (*name)[5]`.
pub fn declaration(ty: &str, name: &str) -> String {
    if let Some(at) = ty.find("(*)") {
        return format!("{}(*{name}){}", &ty[..at], &ty[at + 3..]);
    }
    if let Some(at) = ty.find(" [") {
        return format!("{} {name}{}", &ty[..at], &ty[at + 1..]);
    }
    if ty.ends_with('*') {
        return format!("{ty}{name}");
    }
    format!("{ty} {name}")
}

/// A member's type name, spelt as gdb spells C's base types.
fn name_of(image: &Image, id: Option<TypeId>) -> Result<String> {
    let Some(id) = id else {
        return Ok("void".into());
    };
    let name = image.type_name(id)?;
    Ok(if image.type_(id)?.rust {
        name
    } else {
        c_spelling(&name)
    })
}

/// The type as JSON: `type` (its name), `size`, and for a struct or union (after typedefs and
/// qualifiers) `kind` and `members` (`name`, `type`, `offset`, `size`, `bit_offset` and
/// `bit_size` for a bit-field, nested `members` for an anonymous one), for an enum
/// `enumerators`.
pub fn layout_json(ev: &Evaluator<'_>, ty: &Ty) -> Result<Json> {
    let mut o = json!({ "type": ev.type_name(ty)?, "size": ev.size_of(ty)? });
    let mut id = match ty {
        Ty::Dwarf(id) => *id,
        _ => return Ok(o),
    };
    for _ in 0..64 {
        match ev.image.type_(id)?.kind {
            TypeKind::Typedef(Some(next)) | TypeKind::Qualified(_, Some(next)) => id = next,
            _ => break,
        }
    }
    let t = ev.image.type_(id)?;
    match &t.kind {
        TypeKind::Struct(members) | TypeKind::Union(members) => {
            let kind = if matches!(t.kind, TypeKind::Union(_)) {
                "union"
            } else {
                "struct"
            };
            o["kind"] = json!(kind);
            o["members"] = members_json(ev, members, 0, 0)?;
        }
        TypeKind::Enum(e) => {
            // As p's integers: numbers up to 32 bits, decimal strings when wider.
            let narrow = t.byte_size.is_some_and(|s| s <= 4);
            o["kind"] = json!("enum");
            o["enumerators"] = e
                .enumerators
                .iter()
                .map(|en| {
                    let value = if narrow {
                        json!(en.value)
                    } else {
                        json!(Dec(en.value))
                    };
                    json!({ "name": en.name, "value": value })
                })
                .collect();
        }
        _ => {}
    }
    Ok(o)
}

fn members_json(ev: &Evaluator<'_>, members: &[Member], base: u64, depth: usize) -> Result<Json> {
    if depth > MAX_ANONYMOUS_NESTING {
        return Err(Error::Damaged(
            "anonymous members nested too deeply (a type cycle in the DWARF?)".into(),
        ));
    }
    let mut out = Vec::with_capacity(members.len());
    for m in members {
        let ty = m.ty.map_or(Ty::Void, Ty::Dwarf);
        let offset = base.wrapping_add(m.offset);
        let mut e = json!({
            "name": m.name,
            "type": ev.type_name(&ty)?,
            "offset": offset,
            "size": ev.size_of(&ty)?,
        });
        if let Some(bf) = m.bit_field {
            e["bit_offset"] = json!(bf.bit_offset);
            e["bit_size"] = json!(bf.bit_size);
        }
        if let (None, Some(id)) = (&m.name, m.ty) {
            if let TypeKind::Struct(inner) | TypeKind::Union(inner) = &ev.image.type_(id)?.kind {
                e["members"] = members_json(ev, inner, offset, depth + 1)?;
            }
        }
        out.push(e);
    }
    Ok(Json::Array(out))
}
