//! Running command lines against a session: the dispatch shared by `-c`, command files, standard
//! input and the prompt.

use std::io::Write;

use anyhow::{anyhow, Result};

use crate::commands;
use crate::session::Session;

/// Whether the session goes on after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Quit,
}

/// One line per command, for `help`.
const COMMANDS: &[(&str, &str)] = &[
    (
        "klog",
        "the kernel event log: klog [SUBSYS] [full|terse] [options]; klog --help",
    ),
    (
        "p",
        "print an expression as gdb does: p[/x] [--json] EXPR; p --help",
    ),
    ("whatis", "the type of an expression or type name"),
    ("ptype", "a type spelled out, as gdb's ptype"),
    (
        "struct",
        "a struct's layout (-o: offsets), or the object at ADDR: struct [-o] NAME [ADDR]",
    ),
    ("union", "the same for a union"),
    ("help", "this list"),
    ("quit", "leave kcrash (also q, exit)"),
];

/// Runs one command line. Blank lines and `#` comments do nothing.
pub fn run_line(
    session: &Session<'_>,
    line: &str,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<Flow> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(Flow::Continue);
    }
    let words = shell_words::split(line).map_err(|e| anyhow!("cannot split {line:?}: {e}"))?;
    let (name, args) = words
        .split_first()
        .ok_or_else(|| anyhow!("empty command"))?;
    match name.as_str() {
        "q" | "quit" | "exit" => return Ok(Flow::Quit),
        "help" => {
            for (cmd, what) in COMMANDS {
                writeln!(out, "{cmd:<8} {what}")?;
            }
        }
        "klog" => {
            let klog = session.klog().map_err(|e| anyhow!(e))?;
            commands::klog::run(args, session, klog, out, err)?;
        }
        // Expressions take the line as typed: shell quoting would eat C's 'c' literals.
        p if p == "p" || p == "print" || p.starts_with("p/") || p.starts_with("print/") => {
            commands::print::run(session, p, after_word(line), out)?;
        }
        "whatis" => commands::types::whatis(session, after_word(line), out)?,
        "ptype" => commands::types::ptype(session, after_word(line), out)?,
        "struct" | "union" => commands::types::struct_(session, name, args, out)?,
        other => return Err(anyhow!("{other}: no such command (try help)")),
    }
    out.flush()?;
    Ok(Flow::Continue)
}

/// The text after a line's first word.
fn after_word(line: &str) -> &str {
    let line = line.trim_start();
    line.find(char::is_whitespace)
        .map_or("", |at| line[at..].trim())
}
