//! The command of every decoder under `plugins/` (`klogger`, `tracelog`, `dplog`): the log's
//! events, every ring merged by time, newest first, with `klog`'s options; `-s` for its rings.

use anyhow::{bail, Context as _, Result};
use clap::Parser;
use kcrash_plugin::{Clock, Decoder, Event, Merge, Order, RingInfo};
use regex::bytes::Regex;

use super::{Context, Flow};
use crate::event_view::{EventView, Rings};
use crate::report;

/// Print a log that one of kcrash's decoders reads, as it was at the crash.
///
/// Every ring merged by time, most recent first. Times are seconds when the dump gives the log's
/// clock rate, else ticks.
#[derive(Parser, Debug)]
#[command(no_binary_name = true, disable_version_flag = true)]
#[command(
    after_help = "Examples:\n  CMD -n 20\n  CMD --cpu 1 --since 2.5\n  CMD -g 'fault|lost'\n  CMD -s\n  CMD --json | jq .name"
)]
pub struct Args {
    /// Show at most N events.
    #[arg(short = 'n', value_name = "N")]
    limit: Option<u64>,
    /// Oldest event first instead of most recent first.
    #[arg(long)]
    reverse: bool,
    /// Only events logged on this processor.
    #[arg(long, value_name = "N")]
    cpu: Option<u32>,
    /// Only events at or after this time: seconds when the clock rate is known, else ticks.
    #[arg(long, value_name = "TIME")]
    since: Option<f64>,
    /// Only events at or before this time (as --since).
    #[arg(long, value_name = "TIME")]
    until: Option<f64>,
    /// Only events whose line (name, fields, message, damage) matches this regular expression.
    #[arg(short = 'g', long, value_name = "REGEX")]
    grep: Option<String>,
    /// One JSON object per event, or with -s a JSON document of the rings.
    #[arg(long)]
    json: bool,
    /// A table of the rings: capacity, written, overwritten and lost events.
    #[arg(short = 's', long = "summary")]
    summary: bool,
}

/// `help CMD` for a decoder's command.
pub fn help(decoder: &dyn Decoder) -> String {
    use clap::CommandFactory;
    let mut cmd = Args::command()
        .name(decoder.command())
        .about(decoder.summary());
    cmd.render_long_help()
        .to_string()
        .replace("CMD", decoder.command())
}

pub fn run(cx: &mut Context<'_, '_>, decoder: &dyn Decoder, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(argv)?;
    let index = crate::plugins::index_of(decoder);
    let log = cx.session.log(index)?;
    if args.summary {
        let rings = Rings::new(log);
        report::document(&rings, args.json, cx.out, cx.paint)?;
        return Ok(Flow::Continue);
    }
    let filter = Filter::new(&args, log.clock())?;
    if let Some(why) = log.clock().unknown_because() {
        writeln!(cx.err, "{}: times are in ticks: {why}", decoder.command())?;
    }
    let order = if args.reverse {
        Order::OldestFirst
    } else {
        Order::NewestFirst
    };
    let streams = (0..log.rings().len())
        .filter(|&r| filter.reads(&log.rings()[r]))
        .map(|r| log.events(cx.session, r, order))
        .collect();
    let mut shown = 0u64;
    let mut line = Vec::new();
    for event in Merge::new(streams, order) {
        crate::interrupt::check()?;
        if shown >= args.limit.unwrap_or(u64::MAX) {
            break;
        }
        let view = EventView::new(log, &event);
        if !filter.keeps(&event, &view, &mut line) {
            continue;
        }
        report::line(&view, args.json, cx.out, cx.paint)?;
        shown += 1;
    }
    if shown == 0 {
        writeln!(cx.err, "{}: no event to show", decoder.command())?;
    }
    Ok(Flow::Continue)
}

/// The filters of one invocation.
struct Filter {
    cpu: Option<u32>,
    since: Option<u64>,
    until: Option<u64>,
    grep: Option<Regex>,
}

impl Filter {
    fn new(args: &Args, clock: &Clock) -> Result<Filter> {
        let ticks = |t: f64| -> Result<u64> {
            if !(t.is_finite() && t >= 0.0) {
                bail!("time {t} is not a non-negative number");
            }
            Ok(match clock.hz() {
                Some(hz) => (t * hz as f64) as u64,
                None => t as u64,
            })
        };
        Ok(Filter {
            cpu: args.cpu,
            since: args.since.map(ticks).transpose()?,
            until: args.until.map(ticks).transpose()?,
            grep: args
                .grep
                .as_deref()
                .map(Regex::new)
                .transpose()
                .context("--grep")?,
        })
    }

    /// Whether a ring can hold events the filter keeps: one of another processor cannot.
    fn reads(&self, ring: &RingInfo) -> bool {
        ring.refused.is_none()
            && self
                .cpu
                .is_none_or(|c| ring.processor.is_none_or(|p| p == c))
    }

    fn keeps(&self, event: &Event, view: &EventView<'_>, line: &mut Vec<u8>) -> bool {
        if self.cpu.is_some_and(|c| event.processor != Some(c))
            || self.since.is_some_and(|t| event.ticks < t)
            || self.until.is_some_and(|t| event.ticks > t)
        {
            return false;
        }
        let Some(re) = &self.grep else { return true };
        line.clear();
        view.write_body(line);
        re.is_match(line)
    }
}
