//! `help`: the command list, or one command's full text.

use anyhow::{bail, Result};

use super::{command, decoder_help, Context, Flow, COMMANDS};
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

pub fn run(cx: &mut Context<'_, '_>, args: &[String]) -> Result<Flow> {
    match args {
        [] => {
            for c in COMMANDS {
                writeln!(cx.out, "{:<6} {}", cx.paint.strong(c.name), c.summary)?;
            }
            for d in DECODERS.iter().filter(|d| command(d.command()).is_none()) {
                writeln!(
                    cx.out,
                    "{:<6} {}",
                    cx.paint.strong(d.command()),
                    d.summary()
                )?;
            }
            writeln!(
                cx.out,
                "Output: CMD | pipeline, CMD > file, CMD >> file; !cmd runs a shell command."
            )?;
        }
        [name] => match (command(name), by_command(name)) {
            (Some(c), _) => write!(cx.out, "{}", (c.help)())?,
            (None, Some(d)) => write!(cx.out, "{}", decoder_help(d))?,
            (None, None) => bail!("{name}: no such command"),
        },
        _ => bail!("help takes at most one command name"),
    }
    Ok(Flow::Continue)
}
