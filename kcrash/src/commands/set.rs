//! `set`: the session's settings.

use anyhow::{bail, Result};

use super::{Context, Flow};

pub const HELP: &str = "\
set: show or change session settings.

  set                 show them
  set scroll off      no pager: long output goes straight to the terminal
  set scroll on       long output to a terminal goes through $PAGER (default less -FRX)

The pager is used only when standard output is a terminal; --no-pager starts with scroll off.
";

pub fn run(cx: &mut Context<'_, '_>, args: &[String]) -> Result<Flow> {
    match args {
        [] => writeln!(
            cx.out,
            "scroll: {}",
            if cx.settings.scroll { "on" } else { "off" }
        )?,
        [what, value] if what == "scroll" => {
            cx.settings.scroll = match value.as_str() {
                "on" => true,
                "off" => false,
                other => bail!("scroll is on or off, not {other:?}"),
            }
        }
        _ => bail!("usage: set scroll on|off (help set)"),
    }
    Ok(Flow::Continue)
}
