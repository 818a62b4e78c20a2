//! `alias`: names for command lines, as crash's `alias` (kept for the session; `.kcrashrc`
//! defines the ones a user always wants).

use anyhow::{bail, Result};

use super::{command, Context, Flow};
use crate::escape::escaped;

pub const HELP: &str = "\
alias: name a command line, as crash's alias.

  alias                    list the aliases
  alias NAME               show what NAME stands for
  alias NAME COMMAND...    NAME, as a command line's first word, stands for COMMAND...

The rest of the line follows the alias's text: after `alias kl klog 0 full`, `kl -n 5` runs
`klog 0 full -n 5`. An alias's text is not expanded again, and a command's own name cannot be
an alias. Put the ones you always want in ~/.kcrashrc (or ./.kcrashrc), one command a line.

Examples:
  alias kl klog 0 full
  alias last timeline -n 40
  alias
";

pub fn run(cx: &mut Context<'_, '_>, args: &[String]) -> Result<Flow> {
    let aliases = &mut cx.settings.aliases;
    match args {
        [] => {
            for (name, text) in aliases.iter() {
                writeln!(cx.out, "{name}\t{}", escaped(text.as_bytes()))?;
            }
        }
        [name] => match aliases.get(name) {
            Some(text) => writeln!(cx.out, "{name}\t{}", escaped(text.as_bytes()))?,
            None => bail!("{}: no such alias", escaped(name.as_bytes())),
        },
        [name, ..] => {
            if command(name).is_some() || crate::plugins::by_command(name).is_some() {
                bail!("{name} is a command: an alias cannot hide it");
            }
            if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '!') {
                bail!("{:?} cannot be an alias's name", name);
            }
            // The text as typed after the name's word, quotes and all (the word as typed may be
            // longer than the name: quotes).
            let text = super::after_word(cx.raw);
            aliases.insert(name.clone(), text.to_owned());
        }
    }
    Ok(Flow::Continue)
}
