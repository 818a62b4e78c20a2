//! Events of one or several logs merged by time and printed through one set of filters: what a
//! decoder's command prints for its log, and `timeline` for every log the dump holds.
//!
//! One log is merged on its own clock (ticks, shown as seconds when the rate is known). Several
//! logs are merged in nanoseconds, each converted by its own clock rate; a log whose rate is not
//! known cannot be placed among the others and is left out, with a note.
//!
//! Each ring is read, filtered and rendered a batch at a time on a thread of its own, and the
//! calling thread merges the rendered lines by their keys (`lanes.rs`). Memory stays bounded
//! by a few batches per ring, whatever the logs' length.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context as _, Result};
use kcrash_plugin::{Clock, Event, Log, Memory, Order};
use regex::bytes::Regex;

use crate::event_view::{write_line, EventView, RingPrefix};
use crate::lanes::{self, Batch, Batches};
use crate::paint::Paint;
use crate::report;
use crate::schemata::{Reader, Schematized};
use crate::session::Session;

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
    /// Events as their decoder reads them: no schema names or types their fields.
    #[arg(long)]
    pub raw: bool,
}

/// How one ring's kept events become bytes in the merged stream: a text or JSON line, or an
/// export's record. One per ring, made and used on the thread that reads the ring.
pub trait Emit: Send {
    /// Appends the event's bytes when the filters its output applies (`-g`) keep it; says
    /// whether. `time` is where it sorts: the log's ticks when one log is read, else nanoseconds.
    fn emit(&mut self, event: &Event<'_>, time: u64, out: &mut Vec<u8>) -> bool;
}

/// What one run reads: the logs that can be placed on its time axis, its filters and order,
/// and the schemata events are read through.
pub struct Plan<'a> {
    pub logs: Vec<&'a dyn Log>,
    /// Times on the log's own clock (one log), else in nanoseconds.
    pub own_clock: bool,
    pub filter: Filter,
    pub order: Order,
    pub limit: u64,
    /// Unless `--raw` or none is loaded.
    pub schemata: Option<Reader<'a>>,
    /// A command's own filter besides `select`'s (klog's subsystem and chore).
    pub keep: Option<&'a (dyn Fn(&Event<'_>) -> bool + Sync)>,
}

impl<'a> Plan<'a> {
    /// The logs of `logs` that `select` can place in one time order: with several, those whose
    /// clock rate is known (the others are named on `err`).
    pub fn new(
        logs: &[&'a dyn Log],
        schemata: Option<Reader<'a>>,
        select: &Select,
        err: &mut dyn Write,
    ) -> Result<Plan<'a>> {
        let own_clock = logs.len() == 1;
        let mut placed = Vec::new();
        for &log in logs {
            match log.clock().unknown_because() {
                Some(why) if own_clock => writeln!(err, "times are in ticks: {why}")?,
                Some(why) => writeln!(
                    err,
                    "{}: left out: its clock rate is unknown ({why}), so its events cannot be \
                     placed among the others'",
                    log.kind()
                )?,
                None => {}
            }
            if own_clock || log.clock().hz().is_some() {
                placed.push(log);
            }
        }
        Ok(Plan {
            filter: Filter::new(select, own_clock.then(|| logs[0]))?,
            logs: placed,
            own_clock,
            order: if select.reverse {
                Order::OldestFirst
            } else {
                Order::NewestFirst
            },
            limit: select.limit.unwrap_or(u64::MAX),
            schemata: schemata.filter(|_| !select.raw),
            keep: None,
        })
    }

    /// An event's `time` on the run's axis in nanoseconds: its log's ticks converted when one
    /// log is read on its own clock; ticks as they are when that clock's rate is unknown.
    pub fn nanos(&self, log: &dyn Log, time: u64) -> u64 {
        match self.own_clock {
            true => log.clock().nanos(time).unwrap_or(time),
            false => time,
        }
    }

    /// Whether the axis is nanoseconds (false: ticks of a clock whose rate is unknown).
    pub fn in_nanos(&self) -> bool {
        !self.own_clock || self.logs.iter().all(|l| l.clock().hz().is_some())
    }
}

/// A ring's events as text or JSON lines.
struct Lines<'r> {
    plan: &'r Plan<'r>,
    log: &'r dyn Log,
    prefix: RingPrefix,
    json: bool,
    paint: Paint,
    /// For a -g match in JSON mode, which prints no text line.
    scratch: Vec<u8>,
}

impl Emit for Lines<'_> {
    fn emit(&mut self, event: &Event<'_>, _: u64, out: &mut Vec<u8>) -> bool {
        let filter = &self.plan.filter;
        let clock = self.log.clock();
        let schema = self.plan.schemata.and_then(|s| s.apply(self.log, event));
        let schema = schema.as_ref();
        if !self.json {
            let grep = |body: &[u8]| filter.matches(body);
            return write_line(out, &self.prefix, clock, event, schema, self.paint, grep);
        }
        filter.grep_keeps(&mut self.scratch, &self.prefix, clock, event, schema)
            && report::json_line(&EventView::new(self.log, event, schema), out).is_ok()
    }
}

/// One ring's events, read and emitted a batch at a time.
struct Producer<'a, 'r> {
    /// The ring's stream, opened on first use: on the thread that reads it, since a decoder may
    /// index the ring when it opens the stream.
    events: Option<Box<dyn Iterator<Item = Event<'a>> + Send + 'a>>,
    mem: &'a (dyn Memory + Sync),
    ring: usize,
    log: &'a dyn Log,
    stream: usize,
    plan: &'r Plan<'r>,
    emit: Box<dyn Emit + 'r>,
}

impl Batches for Producer<'_, '_> {
    fn next_batch(&mut self, size: usize, done: &AtomicBool) -> Batch {
        let mut b = Batch::default();
        let plan = self.plan;
        // A batch of kept lines, or the ring's end; filtered-out events do not count.
        while b.lines() < size {
            if done.load(Ordering::Relaxed) || crate::interrupt::requested() {
                break;
            }
            let (log, mem, ring, order) = (self.log, self.mem, self.ring, plan.order);
            let events = self
                .events
                .get_or_insert_with(|| log.events(mem, ring, order));
            let Some(event) = events.next() else {
                break;
            };
            let time = if plan.own_clock {
                event.ticks
            } else {
                self.log.clock().nanos(event.ticks).unwrap_or(u64::MAX)
            };
            if !plan.filter.keeps(time, &event)
                || plan.keep.is_some_and(|keep| !keep(&event))
                || !self.emit.emit(&event, time, &mut b.bytes)
            {
                continue;
            }
            b.push((time, event.seq, self.stream), plan.order);
        }
        b
    }
}

/// Prints the events of `logs` that `select` (and `keep`, a command's own filter) keeps, merged
/// by time; with several logs each text line names its event's log. Says on `err` which logs
/// cannot be merged and when nothing was kept.
pub fn print<'a>(
    logs: &[&'a dyn Log],
    session: &'a Session<'_>,
    select: &Select,
    keep: Option<&'a (dyn Fn(&Event<'_>) -> bool + Sync)>,
    out: &mut dyn Write,
    err: &mut dyn Write,
    paint: Paint,
) -> Result<u64> {
    // With several logs, each line says whose event it is.
    let show_log = logs.len() > 1;
    let mut plan = Plan::new(logs, session.schema_reader(false), select, err)?;
    plan.keep = keep;
    let lines = |log: &'a dyn Log, ring: usize, _: usize| -> Box<dyn Emit + '_> {
        Box::new(Lines {
            plan: &plan,
            log,
            prefix: RingPrefix::new(log, ring, show_log),
            json: select.json,
            paint,
            scratch: Vec::new(),
        })
    };
    let shown = stream(&plan, session, &lines, out)?;
    if shown == 0 {
        writeln!(err, "no event to show")?;
    }
    Ok(shown)
}

/// Makes the [`Emit`] of a ring: its log, its index in the log, its stream number in the run.
pub type MakeEmit<'a, 'r> = dyn Fn(&'a dyn Log, usize, usize) -> Box<dyn Emit + 'r> + Sync + 'r;

/// Reads every ring of the plan's logs on a thread of its own, emits each kept event with the
/// ring's [`Emit`] and writes the bytes to `out` in time order, at most the plan's limit.
/// Returns how many events were written; Ctrl-C stops it with an error.
pub fn stream<'a, 'r>(
    plan: &'r Plan<'a>,
    mem: &'a (dyn Memory + Sync),
    make: &'r MakeEmit<'a, 'r>,
    out: &mut dyn Write,
) -> Result<u64>
where
    'a: 'r,
{
    let mut producers: Vec<Box<dyn Batches + 'r>> = Vec::new();
    for &log in &plan.logs {
        for (r, ring) in log.rings().iter().enumerate() {
            // Every ring is read, whatever --cpu says: which rings a processor writes is the
            // log's business (a KLog processor logs into set `cpu % sets`), its events say.
            if ring.refused.is_some() {
                continue;
            }
            let stream = producers.len();
            producers.push(Box::new(Producer {
                events: None,
                mem,
                ring: r,
                log,
                stream,
                plan,
                emit: make(log, r, stream),
            }));
        }
    }
    lanes::merge(producers, plan.limit, out)
}

/// A time given on the command line (`--since`, `--until`) in ticks: seconds times the clock rate
/// when it is known, else ticks as given. Rounded, not truncated: a time copied from a line
/// (`12.345678901`) is not exact in binary, and truncating it would drop that line's own event.
pub fn ticks_at(t: f64, hz: Option<u64>) -> Result<u64> {
    if !(t.is_finite() && t >= 0.0) {
        bail!("time {t} is not a non-negative number");
    }
    Ok(match hz {
        Some(hz) => (t * hz as f64).round() as u64,
        None => t.round() as u64,
    })
}

/// `-g REGEX`, compiled.
pub fn grep(re: Option<&str>) -> Result<Option<Regex>> {
    re.map(Regex::new).transpose().context("--grep")
}

/// The filters of one invocation.
pub struct Filter {
    cpu: Option<u32>,
    /// `--since` and `--until` on the run's time axis.
    pub since: Option<u64>,
    pub until: Option<u64>,
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
        let time = |t| ticks_at(t, hz);
        Ok(Filter {
            cpu: select.cpu,
            since: select.since.map(time).transpose()?,
            until: select.until.map(time).transpose()?,
            grep: grep(select.grep.as_deref())?,
        })
    }

    /// Whether `-g` keeps a text line whose body (after the processor) is `body`.
    pub fn matches(&self, body: &[u8]) -> bool {
        self.grep.as_ref().is_none_or(|re| re.is_match(body))
    }

    /// Whether `-g` keeps the event, matched on the text line it would print (rendered into
    /// `scratch`), for an output that prints no text line.
    pub fn grep_keeps(
        &self,
        scratch: &mut Vec<u8>,
        prefix: &RingPrefix,
        clock: &Clock,
        event: &Event<'_>,
        schema: Option<&Schematized<'_>>,
    ) -> bool {
        if self.grep.is_none() {
            return true;
        }
        scratch.clear();
        let off = Paint::default();
        write_line(scratch, prefix, clock, event, schema, off, |b| {
            self.matches(b)
        })
    }

    /// Whether the event is of the processor and in the time range asked for (`-g` is matched
    /// on its text line, by the renderer).
    fn keeps(&self, time: u64, event: &Event<'_>) -> bool {
        !(self.cpu.is_some_and(|c| event.processor != Some(c))
            || self.since.is_some_and(|t| time < t)
            || self.until.is_some_and(|t| time > t))
    }
}

#[cfg(test)]
mod tests {
    use super::ticks_at;

    #[test]
    fn a_time_copied_from_a_line_is_that_lines_tick() {
        // 1.000000007 s is 1000000006.9999999 ns in binary: truncated, --until would drop the
        // event printed at that time.
        assert_eq!(
            ticks_at(1.000000007, Some(1_000_000_000)).unwrap(),
            1_000_000_007
        );
        assert_eq!(ticks_at(2.5, Some(2_000)).unwrap(), 5_000);
        assert_eq!(ticks_at(41.6, None).unwrap(), 42);
        assert!(ticks_at(-1.0, None).is_err());
        assert!(ticks_at(f64::NAN, Some(1)).is_err());
    }
}
