//! Errors as the user sees them.

/// A message on one line: embedded line breaks become "; ".
pub fn one_line(text: &str) -> String {
    text.trim_end().lines().collect::<Vec<_>>().join("; ")
}
