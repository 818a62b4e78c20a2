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
