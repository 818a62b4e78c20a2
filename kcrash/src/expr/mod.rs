//! C expressions over a dump, as gdb's `print` reads them: a parser that knows no symbols
//! ([`parse`]), an evaluator that resolves names and types through the image's DWARF and reads
//! the dump ([`eval`]), and the gdb-style rendering of a value ([`value`]) and of a type
//! ([`decl`]).

pub mod decl;
pub mod eval;
pub mod parse;
pub mod value;

pub use eval::{EvalError, Evaluator, Place, Ty, Value};
pub use parse::{parse_expr, parse_type, Expr, ParseError, TypeName};
