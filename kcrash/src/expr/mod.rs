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

use symbols::Image;

use crate::error::Error;
use crate::memory::Memory;

/// `expr` evaluated by the first of `images` that knows every name in it — the kernel first,
/// then each loaded module, as gdb searches its object files — with the evaluator that did.
pub fn evaluate<'i>(
    images: &'i [Arc<Image>],
    mem: &'i dyn Memory,
    expr: &Expr,
) -> Result<(Evaluator<'i>, Value), Error> {
    let mut failure = None;
    for image in images {
        let ev = Evaluator::new(image, mem);
        match ev.eval(expr) {
            Ok(v) => return Ok((ev, v)),
            Err(e @ Error::NoSymbol { .. }) => {
                failure.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(failure.unwrap_or_else(|| Error::Usage("nothing to evaluate with".into())))
}
