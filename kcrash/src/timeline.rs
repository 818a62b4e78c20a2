//! Events of one or several logs merged by time and printed through one set of filters: what a
//! decoder's command prints for its log, and `timeline` for every log the dump holds.
//!
//! One log is merged on its own clock (ticks, shown as seconds when the rate is known). Several
//! logs are merged in nanoseconds, each converted by its own clock rate; a log whose rate is not
//! known cannot be placed among the others and is left out, with a note.

use std::io::Write;

use anyhow::{bail, Context as _, Result};
use kcrash_plugin::{Event, Keyed, Log, Memory, Merge, Order};
use regex::bytes::Regex;

use crate::event_view::EventView;
use crate::paint::Paint;
use crate::report;

/// The options every event command takes.
#[derive(clap::Args, Debug)]
pub struct Select {
    /// Show at most N events.
    #[arg(short = 'n', value_name = "N")]
    pub limit: Option<u64>,
    /// Oldest event first instead of most recent first.
    #[arg(long)]
    pub reverse: bool,
    /// Only events logged on this processor.
    #[arg(long, value_name = "N")]
    pub cpu: Option<u32>,
    /// Only events at or after this time: seconds when the clock rate is known, else ticks.
    #[arg(long, value_name = "TIME")]
    pub since: Option<f64>,
    /// Only events at or before this time (as --since).
    #[arg(long, value_name = "TIME")]
    pub until: Option<f64>,
    /// Only events whose line (name, fields, message, damage) matches this regular expression.
    #[arg(short = 'g', long, value_name = "REGEX")]
    pub grep: Option<String>,
    /// One JSON object per event.
    #[arg(long)]
    pub json: bool,
}

/// An event with its place on the common time axis and the log it came from.
struct Stamped {
    /// Ticks of its own log's clock (one log), or nanoseconds (several).
    time: u64,
    /// The log's index among those merged, and the ring's within the log, as one stream id.
    stream: usize,
    log: usize,
    event: Event,
}

impl Keyed for Stamped {
    fn key(&self) -> (u64, u64, usize) {
        (self.time, self.event.seq, self.stream)
    }
}

/// Rings per log at most in a stream id.
const RINGS_PER_LOG: usize = 1 << 24;

/// Prints the events of `logs` that `select` keeps, merged by time; `show_log` puts each event's
/// log on its text line. Says on `err` which logs cannot be merged and when nothing was kept.
pub fn print(
    logs: &[&dyn Log],
    mem: &(dyn Memory + Sync),
    select: &Select,
    show_log: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
    paint: Paint,
) -> Result<u64> {
    let on_own_clock = logs.len() == 1;
    let mut placed = Vec::new();
    for &log in logs {
        match log.clock().unknown_because() {
            Some(why) if on_own_clock => writeln!(err, "times are in ticks: {why}")?,
            Some(why) => writeln!(
                err,
                "{}: left out: its clock rate is unknown ({why}), so its events cannot be placed \
                 among the others'",
                log.kind()
            )?,
            None => {}
        }
        if on_own_clock || log.clock().hz().is_some() {
            placed.push(log);
        }
    }
    let filter = Filter::new(select, on_own_clock.then(|| logs[0]))?;
    let order = if select.reverse {
        Order::OldestFirst
    } else {
        Order::NewestFirst
    };
    let mut streams = Vec::new();
    for (l, &log) in placed.iter().enumerate() {
        let clock = log.clock();
        for (r, ring) in log.rings().iter().enumerate().take(RINGS_PER_LOG) {
            if ring.refused.is_some() || !filter.reads(ring.processor) {
                continue;
            }
            let stamp = move |event: Event| Stamped {
                time: if on_own_clock {
                    event.ticks
                } else {
                    clock.nanos(event.ticks).unwrap_or(u64::MAX)
                },
                stream: l * RINGS_PER_LOG + r,
                log: l,
                event,
            };
            streams.push(log.events(mem, r, order).map(stamp));
        }
    }
    let limit = select.limit.unwrap_or(u64::MAX);
    let mut shown = 0u64;
    let mut line = Vec::new();
    for s in Merge::new(streams, order) {
        if shown >= limit {
            break;
        }
        crate::interrupt::check()?;
        let view = EventView::new(placed[s.log], &s.event, show_log);
        if !filter.keeps(s.time, &s.event, &view, &mut line) {
            continue;
        }
        report::line(&view, select.json, out, paint)?;
        shown += 1;
    }
    if shown == 0 {
        writeln!(err, "no event to show")?;
    }
    Ok(shown)
}

/// The filters of one invocation.
struct Filter {
    cpu: Option<u32>,
    since: Option<u64>,
    until: Option<u64>,
    grep: Option<Regex>,
}

impl Filter {
    /// Times are in `own`'s ticks (its seconds when its clock rate is known), or in nanoseconds
    /// when several logs are merged.
    fn new(select: &Select, own: Option<&dyn Log>) -> Result<Filter> {
        let hz = match own {
            Some(log) => log.clock().hz(),
            None => Some(1_000_000_000),
        };
        let time = |t: f64| -> Result<u64> {
            if !(t.is_finite() && t >= 0.0) {
                bail!("time {t} is not a non-negative number");
            }
            Ok(match hz {
                Some(hz) => (t * hz as f64) as u64,
                None => t as u64,
            })
        };
        Ok(Filter {
            cpu: select.cpu,
            since: select.since.map(time).transpose()?,
            until: select.until.map(time).transpose()?,
            grep: select
                .grep
                .as_deref()
                .map(Regex::new)
                .transpose()
                .context("--grep")?,
        })
    }

    /// Whether a ring can hold events the filter keeps: one of another processor cannot.
    fn reads(&self, processor: Option<u32>) -> bool {
        self.cpu.is_none_or(|c| processor.is_none_or(|p| p == c))
    }

    fn keeps(&self, time: u64, event: &Event, view: &EventView<'_>, line: &mut Vec<u8>) -> bool {
        if self.cpu.is_some_and(|c| event.processor != Some(c))
            || self.since.is_some_and(|t| time < t)
            || self.until.is_some_and(|t| time > t)
        {
            return false;
        }
        let Some(re) = &self.grep else { return true };
        line.clear();
        view.write_body(line);
        re.is_match(line)
    }
}
