//! `set`: the session's settings.

use anyhow::{anyhow, bail, Result};

use super::args::{pid_or_task, thread_or_task};
use super::{Context, Flow};

pub const HELP: &str = "\
set: show or change session settings.

  set                 show them
  set scroll off      no pager: long output goes straight to the terminal
  set scroll on       long output to a terminal goes through $PAGER (default less -FRX)
  set silent on       a command file (-i FILE) runs without echoing its commands
  set silent off      each of its commands is shown as `kcrash> CMD` before its output
  set radix 16        p prints integers in hex unless given a format (crash's `hex`)
  set radix 10        and in decimal again
  set PID|TASK        the thread or Linux task a bare `bt` shows (as `task PID|TASK`)

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
            writeln!(cx.out, "radix: {}", if cx.settings.hex { 16 } else { 10 })?;
            match cx.settings.context {
                Some(id) => writeln!(
                    cx.out,
                    "context: {}",
                    thread_or_task(cx.session, id)?.header
                )?,
                None => writeln!(cx.out, "context: the crashed thread or CPU")?,
            }
        }
        [what, value] if what == "scroll" => cx.settings.scroll = on_off(value, what)?,
        [what, value] if what == "silent" => cx.settings.silent = on_off(value, what)?,
        [what, value] if what == "radix" => {
            cx.settings.hex = match value.as_str() {
                "16" => true,
                "10" => false,
                other => bail!("radix is 10 or 16, not {other:?}"),
            }
        }
        [id] => {
            let id = pid_or_task(id).map_err(|e| anyhow!("{e} (help set)"))?;
            let named = thread_or_task(cx.session, id)?;
            cx.settings.context = Some(id);
            writeln!(cx.out, "{}", named.header)?;
        }
        _ => bail!("usage: set scroll|silent on|off, set radix 10|16, set PID|TASK (help set)"),
    }
    Ok(Flow::Continue)
}
