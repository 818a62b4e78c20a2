//! `timeline`: every log the dump holds — the KLog rings, the other decoders' logs, Linux's
//! printk ring — merged by time, newest first, each line saying which log it is from.

use anyhow::{bail, Result};
use clap::Parser;
use kcrash_plugin::Log;

use super::{Context, Flow};
use crate::export::{self, Exports};
use crate::plugins::DECODERS;
use crate::timeline::{self, Select};

/// Every log in the dump merged by time, most recent first: what happened just before the
/// crash, whichever log recorded it.
///
/// Each log's ticks are turned into seconds by its own clock rate; a log whose rate the dump
/// does not give is left out (its own command prints it in ticks). Logs on different clocks
/// (a cycle counter, Linux's local_clock) are compared as seconds since each clock's zero.
#[derive(Parser, Debug)]
#[command(name = "timeline", no_binary_name = true, disable_version_flag = true)]
#[command(
    after_help = "Examples:\n  timeline -n 40\n  timeline --log KLog --log printk\n  timeline --since 12.5 --cpu 0\n  timeline --json | jq -r .log\n  timeline --perfetto crash.pftrace\n  timeline --svg last-50ms.svg --since 12.45"
)]
pub struct Args {
    #[command(flatten)]
    select: Select,
    #[command(flatten)]
    exports: Exports,
    /// Only these logs (as `plugins` names them: KLog, printk, ...); may be repeated.
    #[arg(long = "log", value_name = "LOG")]
    logs: Vec<String>,
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(argv)?;
    for want in &args.logs {
        if !DECODERS.iter().any(|d| d.kind().eq_ignore_ascii_case(want)) {
            let kinds: Vec<&str> = DECODERS.iter().map(|d| d.kind()).collect();
            bail!("no log {want:?}; kcrash reads {}", kinds.join(", "));
        }
    }
    let mut logs: Vec<&dyn Log> = Vec::new();
    for (i, d) in DECODERS.iter().enumerate() {
        if !args.logs.is_empty() && !args.logs.iter().any(|w| d.kind().eq_ignore_ascii_case(w)) {
            continue;
        }
        match cx.session.log(i) {
            Ok(log) => logs.push(log),
            // A log the user asked for by name must be there.
            Err(why) if !args.logs.is_empty() => bail!("{}: {why}", d.kind()),
            Err(_) => {}
        }
    }
    if logs.is_empty() {
        bail!("no log found in this dump (plugins says why, log by log)");
    }
    if args.exports.any() {
        let (select, session) = (&args.select, cx.session);
        export::run(&args.exports, &logs, session, select, None, cx.out, cx.err)?;
        return Ok(Flow::Continue);
    }
    timeline::print(
        &logs,
        cx.session,
        &args.select,
        None,
        cx.out,
        cx.err,
        cx.paint,
    )?;
    Ok(Flow::Continue)
}
