//! `set`: the session's settings.

use anyhow::{bail, Result};

use super::{Context, Flow};

pub const HELP: &str = "\
set: show or change session settings.

  set                 show them
  set scroll off      no pager: long output goes straight to the terminal
  set scroll on       long output to a terminal goes through $PAGER (default less -FRX)
  set silent on       a command file (-i FILE) runs without echoing its commands
  set silent off      each of its commands is shown as `kcrash> CMD` before its output

The pager is used only when standard output is a terminal; --no-pager starts with scroll off.
";

pub fn run(cx: &mut Context<'_, '_>, args: &[String]) -> Result<Flow> {
    let on_off = |value: &str, what: &str| match value {
        "on" => Ok(true),
        "off" => Ok(false),
        other => bail!("{what} is on or off, not {other:?}"),
    };
    let word = |on: bool| if on { "on" } else { "off" };
    match args {
        [] => {
            writeln!(cx.out, "scroll: {}", word(cx.settings.scroll))?;
            writeln!(cx.out, "silent: {}", word(cx.settings.silent))?;
        }
        [what, value] if what == "scroll" => cx.settings.scroll = on_off(value, what)?,
        [what, value] if what == "silent" => cx.settings.silent = on_off(value, what)?,
        _ => bail!("usage: set scroll|silent on|off (help set)"),
    }
    Ok(Flow::Continue)
}
