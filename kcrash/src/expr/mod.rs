//! C expressions over a dump, as gdb's `print` reads them: a parser that knows no symbols
//! ([`parse`]), an evaluator that resolves names and types through the image's DWARF and reads
//! the dump ([`eval`]), a value read into a tree ([`value`]) and written as gdb writes it
//! ([`text`]) or as JSON ([`json`]), and a type written out ([`decl`]).

pub mod decl;
pub mod eval;
pub mod json;
pub mod parse;
pub mod text;
pub mod value;

pub use eval::{Evaluator, Place, Ty, Value};
pub use parse::{parse_expr, parse_type, Expr, ParseError, TypeName};

use std::sync::Arc;

use symbols::{Image, Search};

use crate::error::Error;
use crate::memory::Memory;

/// `expr` evaluated by the first of `images` that knows every name in it — the kernel first,
/// then each loaded module, as gdb searches its object files — with the evaluator that did.
/// Every image is first tried with the names it finds cheaply ([`Search::Quick`]), then with
/// its full name index: a module's `KLogs` does not cost indexing the kernel's DWARF.
pub fn evaluate<'i>(
    images: &'i [Arc<Image>],
    mem: &'i dyn Memory,
    expr: &Expr,
) -> Result<(Evaluator<'i>, Value), Error> {
    match evaluate_with(images, mem, expr, Search::Quick) {
        Err(Error::NoSymbol { .. }) => evaluate_with(images, mem, expr, Search::Full),
        done => done,
    }
}

/// `expr` evaluated by the first of `images` that knows every name in it, each searched as
/// `search` says; `NoSymbol` when none does.
pub fn evaluate_with<'i>(
    images: &'i [Arc<Image>],
    mem: &'i dyn Memory,
    expr: &Expr,
    search: Search,
) -> Result<(Evaluator<'i>, Value), Error> {
    let mut failure = None;
    for image in images {
        let ev = Evaluator {
            search,
            ..Evaluator::new(image, mem)
        };
        match ev.eval(expr) {
            // The evaluator goes on searching fully: what a quick search found is what the
            // full one finds, and later names may need more.
            Ok(v) => {
                let ev = Evaluator {
                    search: Search::Full,
                    ..ev
                };
                return Ok((ev, v));
            }
            Err(e @ Error::NoSymbol { .. }) => {
                failure.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(failure.unwrap_or_else(|| Error::Usage("nothing to evaluate with".into())))
}

/// The type `text` names, in the first of `images` that has it (each searched quickly first,
/// as [`evaluate`] does), with that image's evaluator; `None` when `text` is no type name any
/// image has.
pub fn named_type<'i>(
    images: &'i [Arc<Image>],
    mem: &'i dyn Memory,
    text: &str,
) -> Option<(Evaluator<'i>, Ty)> {
    [Search::Quick, Search::Full]
        .into_iter()
        .find_map(|search| named_type_with(images, mem, text, search))
}

/// The type `text` names in the first of `images` that has it, each searched as `search` says.
pub fn named_type_with<'i>(
    images: &'i [Arc<Image>],
    mem: &'i dyn Memory,
    text: &str,
    search: Search,
) -> Option<(Evaluator<'i>, Ty)> {
    let t = parse_type(text)?;
    images.iter().find_map(|image| {
        let ev = Evaluator {
            search,
            ..Evaluator::new(image, mem)
        };
        let ty = ev.resolve_type(&t).ok()?;
        let ev = Evaluator {
            search: Search::Full,
            ..ev
        };
        Some((ev, ty))
    })
}

/// How deep anonymous structs and unions inside one another are looked through for members.
const MAX_ANONYMOUS: usize = 8;

/// The member names of what `expr` is — a struct or union, or (`through_pointer`, for `->`) one
/// a pointer points at — with the members of anonymous members in their place, as C reaches
/// them: what the prompt completes after `.` and `->`. Empty when `expr` is none of these.
pub fn member_names(
    images: &[Arc<Image>],
    mem: &dyn Memory,
    expr: &Expr,
    through_pointer: bool,
) -> Vec<String> {
    let Ok((ev, value)) = evaluate(images, mem, expr) else {
        return Vec::new();
    };
    let mut ty = value.ty;
    if through_pointer {
        match ev.shape(&ty) {
            Ok(eval::Shape::Pointer(target)) => ty = target,
            _ => return Vec::new(),
        }
    }
    let mut names = Vec::new();
    collect_members(&ev, &ty, 0, &mut names);
    names
}

fn collect_members(ev: &Evaluator<'_>, ty: &Ty, depth: usize, names: &mut Vec<String>) {
    let t = match ev.shape(ty) {
        Ok(eval::Shape::Struct(t) | eval::Shape::Union(t)) => t,
        _ => return,
    };
    let (symbols::TypeKind::Struct(members) | symbols::TypeKind::Union(members)) = &t.kind else {
        return;
    };
    for m in members {
        match (&m.name, m.ty) {
            (Some(name), _) => names.push(name.clone()),
            (None, Some(inner)) if depth < MAX_ANONYMOUS => {
                collect_members(ev, &Ty::Dwarf(inner), depth + 1, names)
            }
            _ => {}
        }
    }
}
