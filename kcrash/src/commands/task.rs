//! `task [PID|TASK]`: the current context — the thread or Linux task a bare `bt` shows — and
//! with an argument, a new one (as crash's `set PID` and `task PID`). On Linux it prints the
//! task's `struct task_struct` as `p` would.

use anyhow::Result;
use clap::Parser;

use super::args::{pid_or_task, thread_or_task};
use super::{Context, Flow};
use crate::expr::text::Writer;
use crate::expr::value::{Options, Reader};
use crate::expr::{evaluate, parse_expr};

/// The current context (the thread or task a bare `bt` shows), and with PID|TASK a new one.
///
/// On a Linux dump the task is given by PID or by `task_struct` address (hex, as `ps` lists
/// them), and its `struct task_struct` is printed; on a process core a thread by its id.
/// Without an argument and before any `set PID`, `bt` shows the crashed context: so does this.
#[derive(Parser, Debug)]
#[command(name = "task", no_binary_name = true, disable_version_flag = true)]
#[command(after_help = "Examples:\n  task 1\n  task ffff8efb81213080\n  task | grep -w state")]
pub struct Args {
    #[arg(value_name = "PID|TASK", value_parser = pid_or_task)]
    id: Option<u64>,
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(argv)?;
    let Some(id) = args.id.or(cx.settings.context) else {
        writeln!(
            cx.out,
            "no context chosen: bt shows the crashed thread or CPU (task PID|TASK chooses one)"
        )?;
        return Ok(Flow::Continue);
    };
    let named = thread_or_task(cx.session, id)?;
    cx.settings.context = Some(id);
    writeln!(cx.out, "{}", named.header)?;
    if let Some(task) = named.task {
        let images = cx.session.images();
        let text = format!("*(struct task_struct *){:#x}", task.addr);
        let expr = parse_expr(&text).map_err(|e| anyhow::anyhow!("{}", e.show(&text)))?;
        let (ev, value) = evaluate(images.set.images(), cx.session, &expr)?;
        let opts = Options {
            pretty: true,
            format: cx.settings.hex.then_some('x'),
            ..Options::default()
        };
        let node = Reader::new(&ev, opts).read(&value)?;
        writeln!(cx.out, "{}", Writer { ev: &ev, opts }.top(&node)?)?;
    }
    Ok(Flow::Continue)
}
