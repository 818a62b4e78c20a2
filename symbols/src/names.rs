//! Types written out the way C (or Rust, for Rust types) spells them: `struct _KLog`,
//! `int64_t *`, `KLog [5]`, `const char *`.

use crate::dwarf::{DwarfFile, MAX_CHAIN};
use crate::error::Result;
use crate::types::{Qualifier, TypeId, TypeKind};

/// The name of type `id`, or of `void` for `None`.
pub(crate) fn type_name(debug: &DwarfFile, id: Option<TypeId>) -> Result<String> {
    name(debug, id, MAX_CHAIN)
}

fn name(debug: &DwarfFile, id: Option<TypeId>, budget: usize) -> Result<String> {
    let Some(id) = id else {
        return Ok("void".into());
    };
    let Some(budget) = budget.checked_sub(1) else {
        return Err(debug.malformed(id.0, "type references form a cycle"));
    };
    let ty = debug.type_(id)?;
    let keyword = match ty.kind {
        _ if ty.rust => "",
        TypeKind::Struct(_) => "struct ",
        TypeKind::Union(_) => "union ",
        TypeKind::Enum(_) => "enum ",
        _ => "",
    };
    if let Some(name) = ty.path.as_ref().or(ty.name.as_ref()) {
        return Ok(format!("{keyword}{name}"));
    }
    Ok(match &ty.kind {
        // rustc names the pointer types of a program; the unnamed ones it makes up (a slice's
        // data pointer) do not say `*const` or `*mut`: shown as `*mut`, as gdb does.
        TypeKind::Pointer(target) if ty.rust => format!("*mut {}", name(debug, *target, budget)?),
        TypeKind::Pointer(target) => pointer_to(name(debug, *target, budget)?),
        TypeKind::Qualified(qualifier, target) => {
            let word = match qualifier {
                Qualifier::Const => "const",
                Qualifier::Volatile => "volatile",
                Qualifier::Restrict => "restrict",
                Qualifier::Atomic => "_Atomic",
            };
            // gcc qualifies both an array and its elements; C spells it once, on the elements.
            if qualifies_array(debug, *target, budget)? {
                return name(debug, *target, budget);
            }
            let inner = name(debug, *target, budget)?;
            // A qualified pointer is written after the star.
            if inner.ends_with('*') {
                format!("{inner} {word}")
            } else {
                format!("{word} {inner}")
            }
        }
        TypeKind::Array(array) if ty.rust => {
            let mut out = name(debug, array.element, budget)?;
            for dim in array.dims.iter().rev() {
                out = match dim {
                    Some(n) => format!("[{out}; {n}]"),
                    None => format!("[{out}]"),
                };
            }
            out
        }
        TypeKind::Array(array) => {
            let mut out = name(debug, array.element, budget)?;
            out.push(' ');
            for dim in &array.dims {
                match dim {
                    Some(n) => out.push_str(&format!("[{n}]")),
                    None => out.push_str("[]"),
                }
            }
            out
        }
        TypeKind::Typedef(target) => name(debug, *target, budget)?,
        TypeKind::Struct(_) | TypeKind::Union(_) | TypeKind::Enum(_) => format!("{keyword}{{...}}"),
        TypeKind::Variants(_) => "enum {...}".into(),
        TypeKind::Void => "void".into(),
        TypeKind::Function => "function".into(),
        TypeKind::Base(_) => "<unnamed base type>".into(),
        TypeKind::Other(tag) => format!("<{tag}>"),
    })
}

/// Whether `id`, under any further qualifiers, is an array.
fn qualifies_array(debug: &DwarfFile, mut id: Option<TypeId>, budget: usize) -> Result<bool> {
    for _ in 0..budget {
        let Some(current) = id else {
            return Ok(false);
        };
        match debug.type_(current)?.kind {
            TypeKind::Array(_) => return Ok(true),
            TypeKind::Qualified(_, target) => id = target,
            _ => return Ok(false),
        }
    }
    Ok(false)
}

fn pointer_to(target: String) -> String {
    if target.ends_with('*') {
        format!("{target}*")
    } else {
        format!("{target} *")
    }
}
