//! `help`: the command list, or one command's full text.

use anyhow::{bail, Result};

use super::{command, decoder_help, Context, Flow, COMMANDS};
use crate::paint::Paint;
use crate::plugins::{by_command, DECODERS};

pub const HELP: &str = "\
help: list the commands, one line each; help CMD prints CMD's full text with examples.

Every command line can end in crash's output plumbing:
  CMD | pipeline      CMD's output goes to `sh -c pipeline`     klog 0 full | grep SCHED
  CMD > file          to a file (created or truncated)          sym -l > symbols.txt
  CMD >> file         appended to a file                        rd KLogs 16 >> notes
  !command            runs a shell command                      !ls -l /var/crash
| and > inside quotes or brackets, or glued to what precedes them, are the command's own:
klog -g 'open|close', p a->b, p (x >> 32), p a|b.
Ctrl-C stops the running command. Commands that print data take --json.
";

/// Every command a line each, name then summary, the summaries in one column whatever the
/// names' length (padding is counted before colour, which adds invisible bytes).
pub fn list(paint: Paint) -> String {
    let decoders = DECODERS.iter().filter(|d| command(d.command()).is_none());
    let rows: Vec<(&str, &str)> = COMMANDS
        .iter()
        .map(|c| (c.name, c.summary))
        .chain(decoders.map(|d| (d.command(), d.summary())))
        .collect();
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, summary) in rows {
        let pad = " ".repeat(width - name.len() + 1);
        out.push_str(&format!("{}{pad}{summary}\n", paint.strong(name)));
    }
    out.push_str("Output: CMD | pipeline, CMD > file, CMD >> file; !cmd runs a shell command.\n");
    out
}

pub fn run(cx: &mut Context<'_, '_>, args: &[String]) -> Result<Flow> {
    match args {
        [] => write!(cx.out, "{}", list(cx.paint))?,
        [name] => match (command(name), by_command(name)) {
            (Some(c), _) => write!(cx.out, "{}", (c.help)())?,
            (None, Some(d)) => write!(cx.out, "{}", decoder_help(d))?,
            (None, None) => bail!("{name}: no such command"),
        },
        _ => bail!("help takes at most one command name"),
    }
    Ok(Flow::Continue)
}
