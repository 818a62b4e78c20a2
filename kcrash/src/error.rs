//! Errors as the user sees them.

use std::path::PathBuf;

use crate::memory::Unreadable;

/// Why the library could not do what was asked. Each variant's message is the whole line the
/// user sees; the errors of dumpfmt and symbols stay sources, so callers can still look at them.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Dump(#[from] dumpfmt::Error),
    #[error(transparent)]
    Symbols(#[from] symbols::Error),
    #[error(transparent)]
    Unreadable(#[from] Unreadable),
    #[error(transparent)]
    Layout(#[from] crate::klog::layout::LayoutError),
    /// An error while doing `what`.
    #[error("{what}: {source}")]
    Context {
        what: String,
        #[source]
        source: Box<Error>,
    },
    /// The operating system refused `what` (a file kcrash reads).
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The expression names something no image has: print tries the next image.
    #[error("No symbol \"{name}\" in current context.")]
    NoSymbol { name: String },
    /// gdb's words for memory an expression needs and cannot read, then why when it is known
    /// (inside a printed value gdb's words stand alone, as gdb prints them).
    #[error("Cannot access memory at address {addr:#x}{}",
        .reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    CannotAccess { addr: u64, reason: Option<String> },
    /// The image given is not the one the dump was taken from.
    #[error("{} does not belong to {}: {why}", image.display(), dump.display())]
    NotBelonging {
        image: PathBuf,
        dump: PathBuf,
        why: String,
    },
    /// What was asked cannot be done as asked (an expression gdb would refuse, a bad name).
    #[error("{0}")]
    Usage(String),
    /// The dump, the image or the system lacks what is needed.
    #[error("{0}")]
    Missing(String),
    /// The dump or the image contradicts itself (a list that does not end, a type cycle).
    #[error("{0}")]
    Damaged(String),
}

impl From<kcrash_plugin::Missing> for Error {
    fn from(m: kcrash_plugin::Missing) -> Error {
        Error::Missing(m.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An expression could not read memory: where and why.
    pub fn cannot_access(u: Unreadable) -> Error {
        Error::CannotAccess {
            addr: u.addr,
            reason: Some(u.reason),
        }
    }

    /// `self` as the cause of a failure while doing `what`.
    pub fn context(self, what: impl Into<String>) -> Error {
        Error::Context {
            what: what.into(),
            source: Box::new(self),
        }
    }
}

/// Adds what was being done to an error on its way up.
pub trait Context<T> {
    fn context(self, what: impl Into<String>) -> Result<T>;
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.map_err(|e| e.into().context(what))
    }

    fn with_context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| e.into().context(what()))
    }
}

/// Longest error line printed, in characters. Errors echo what they were given, and a line
/// of input (or a name from a dump) may be megabytes.
const LINE_MAX: usize = 400;

/// A message on one line, safe for a terminal: embedded line breaks become "; ", control
/// characters are escaped (`\x1b`, `\u{85}`), and a line longer than [`LINE_MAX`] keeps its
/// start and its end (where the reason is) around a note of how much was left out.
pub fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len().min(4 * LINE_MAX));
    let joined = text.trim_end().lines().collect::<Vec<_>>().join("; ");
    let total = joined.chars().count();
    let (head, tail) = (LINE_MAX / 2, LINE_MAX / 4);
    for (i, c) in joined.chars().enumerate() {
        if total > LINE_MAX && i == head {
            line.push_str(&format!("…[{} characters left out]…", total - head - tail));
        }
        if total > LINE_MAX && (head..total - tail).contains(&i) {
            continue;
        }
        match c {
            c if (c as u32) < 0x80 && c.is_control() => {
                line.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => line.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => line.push(c),
        }
    }
    line
}

/// An error with its causes, on one line. Messages here already end with their cause's (ours,
/// and dumpfmt's and symbols' I/O errors), so a cause is added only when it is not there yet.
pub fn report(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.ends_with(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    one_line(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_escapes_and_bounds_what_it_echoes() {
        assert_eq!(
            one_line("rd: \0\x1b[2J\u{85}: bad\nmore\n"),
            r"rd: \x00\x1b[2J\u{85}: bad; more"
        );
        let long = format!("{}: no such command (try help)", "x".repeat(3_000_000));
        let line = one_line(&long);
        assert_eq!(
            line.chars().count(),
            200 + 100 + "…[2999727 characters left out]…".chars().count()
        );
        assert!(line.starts_with(&"x".repeat(200)));
        assert!(line.ends_with("xxxxxx: no such command (try help)"));
        assert!(one_line(&"y".repeat(LINE_MAX)).len() == LINE_MAX);
    }

    #[test]
    fn report_names_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let e = Error::Io {
            what: "vmcore".into(),
            source: io,
        }
        .context("opening");
        assert_eq!(report(&e), "opening: vmcore: gone");
        let outer = anyhow::Error::from(e).context("load");
        assert_eq!(report(outer.as_ref()), "load: opening: vmcore: gone");
    }
}
