//! Symbols as a person reads them: demangled names, lookups by either spelling, and
//! `name+0x10` for an address.

use symbols::{Image, Symbol};

/// A symbol's name as a person reads it: Rust names demangled without hashes, C++ demangled,
/// control characters escaped (a symbol table is the image's, as untrusted as a dump).
pub fn display_name(name: &str) -> String {
    let shown = match rustc_demangle::try_demangle(name) {
        Ok(d) => format!("{d:#}"),
        Err(_) => addr2line::demangle_auto(name.into(), None).into_owned(),
    };
    crate::escape::escaped(shown.as_bytes())
}

/// A symbol by stored name, or by demangled name (hash left out).
pub fn lookup(image: &Image, name: &str) -> Option<Symbol> {
    image
        .symbol(name)
        .or_else(|| image.symbols().find(|s| display_name(&s.name) == name))
}

/// `name+0x10` for an address inside a symbol, or nothing.
pub fn describe(image: &Image, addr: u64) -> Option<String> {
    let (sym, off) = image.symbolize(addr)?;
    Some(name_plus(&sym, off))
}

/// `name+0x10`, or `name` at offset 0, the name as a person reads it.
pub fn name_plus(sym: &Symbol, off: u64) -> String {
    let name = display_name(&sym.name);
    if off == 0 {
        name
    } else {
        format!("{name}+{off:#x}")
    }
}
