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

/// A message on one line: embedded line breaks become "; ".
pub fn one_line(text: &str) -> String {
    text.trim_end().lines().collect::<Vec<_>>().join("; ")
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
