//! The argument forms every command reads alike: numbers, addresses and symbols.

use anyhow::{anyhow, bail, Result};
use symbols::Image;

use crate::session::Session;
use crate::symbolize::lookup;

/// A count or an id: decimal, or hex with 0x (clap's `value_parser` form).
pub fn number(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("{s:?} is not a number: {e}"))
}

/// An address in hex, with or without 0x (crash's habit).
pub fn hex(text: &str) -> Option<u64> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// The session's image, which symbol and type commands need.
pub fn image<'s>(session: &'s Session<'_>) -> Result<&'s Image> {
    session
        .image
        .as_deref()
        .ok_or_else(|| anyhow!("no image: give the kernel image or program for symbols"))
}

/// An address given as hex, a symbol (of the image or a loaded module), or SYMBOL+OFFSET
/// (offset hex with 0x, or decimal). A word that is both a symbol and hex (`add`) is the symbol.
pub fn address(session: &Session<'_>, text: &str) -> Result<u64> {
    if text.starts_with("0x") || text.starts_with("0X") {
        return hex(text).ok_or_else(|| anyhow!("{text}: not a hex address"));
    }
    let (name, offset) = match text.rsplit_once('+') {
        Some((name, off)) => (
            name,
            number(off).map_err(|_| anyhow!("{text}: {off:?} is not an offset"))?,
        ),
        None => (text, 0),
    };
    if let Some(sym) = session
        .images()
        .set
        .images()
        .iter()
        .find_map(|i| lookup(i, name))
    {
        return Ok(sym.address.wrapping_add(offset));
    }
    if offset == 0 {
        if let Some(addr) = hex(text) {
            return Ok(addr);
        }
    }
    match &session.image {
        Some(_) => bail!("{name}: no such symbol, and not a hex address"),
        None => bail!("{name}: not a hex address (no image for symbols)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_hex() {
        assert_eq!(number("42"), Ok(42));
        assert_eq!(number("0x2a"), Ok(42));
        assert!(number("2a").is_err());
        assert!(number("").is_err());
        assert_eq!(hex("2a"), Some(42));
        assert_eq!(hex("0X2A"), Some(42));
        assert_eq!(hex("0x"), None);
        assert_eq!(hex("+1"), None);
        assert_eq!(hex("1ffffffffffffffff"), None);
    }
}
