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

use anyhow::{Context as _, Result};
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
    pub since: Option<Time>,
    /// Only events at or before this time (as --since).
    #[arg(long, value_name = "TIME")]
    pub until: Option<Time>,
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

/// A time given on the command line (`--since`, `--until`): seconds, or ticks for a clock of
/// unknown rate, with decimals kept exact to the nanosecond, as lines print them. (A float
/// holds nanoseconds exactly only up to about 104 days.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Time {
    nanos: u128,
}

impl std::str::FromStr for Time {
    type Err = String;

    /// `12`, `12.5`, `12.345678901`; decimals past the ninth round to the nearest nanosecond.
    fn from_str(s: &str) -> std::result::Result<Time, String> {
        let bad = || format!("{s:?} is not a time: digits, then a point and decimals if any");
        let (whole, fraction) = s.split_once('.').unwrap_or((s, ""));
        let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() && fraction.is_empty() || !digits(whole) || !digits(fraction) {
            return Err(bad());
        }
        // Whole seconds past u64's range name no clock's tick.
        let whole: u128 = match whole {
            "" => 0,
            w => w.parse::<u64>().map_err(|_| bad())?.into(),
        };
        let (nine, rest) = fraction.split_at(fraction.len().min(9));
        let mut nanos = match nine {
            "" => 0,
            n => n.parse::<u128>().map_err(|_| bad())? * 10u128.pow(9 - n.len() as u32),
        };
        if rest.as_bytes().first().is_some_and(|&d| d >= b'5') {
            nanos += 1;
        }
        Ok(Time {
            nanos: whole * 1_000_000_000 + nanos,
        })
    }
}

/// Which end of a time window a time given on the command line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge {
    /// `--since`: the window's first tick.
    Since,
    /// `--until`: its last.
    Until,
}

/// A time given on the command line in ticks. With a known clock rate it is seconds as lines
/// print them, truncated to the nanosecond: at a printed time the window starts at the first
/// tick printed with it and ends at the last, so it takes in every event printed there however
/// many ticks a nanosecond holds. Without a rate it is ticks, rounded.
pub fn ticks_at(t: Time, hz: Option<u64>, edge: Edge) -> u64 {
    let Some(hz) = hz.filter(|&hz| hz > 0) else {
        return u64::try_from((t.nanos + 500_000_000) / 1_000_000_000).unwrap_or(u64::MAX);
    };
    // The first tick whose time, truncated to the nanosecond, is `nanos` or later.
    let first_tick = |nanos: u128| {
        nanos
            .checked_mul(u128::from(hz))
            .map_or(u128::MAX, |n| n.div_ceil(1_000_000_000))
    };
    let tick = match edge {
        Edge::Since => first_tick(t.nanos),
        Edge::Until => first_tick(t.nanos + 1).saturating_sub(1),
    };
    u64::try_from(tick).unwrap_or(u64::MAX)
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
        Ok(Filter {
            cpu: select.cpu,
            since: select.since.map(|t| ticks_at(t, hz, Edge::Since)),
            until: select.until.map(|t| ticks_at(t, hz, Edge::Until)),
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
    use super::{ticks_at, Edge, Time};
    use kcrash_klog::render::Clock;

    fn time(s: &str) -> Time {
        s.parse().unwrap()
    }

    #[test]
    fn times_are_read_exactly_to_the_nanosecond() {
        for edge in [Edge::Since, Edge::Until] {
            // 1.000000007 s is 1000000006.9999999 ns in binary: no float comes between.
            assert_eq!(
                ticks_at(time("1.000000007"), Some(1_000_000_000), edge),
                1_000_000_007
            );
            // Past 104 days a float no longer holds the nanoseconds.
            assert_eq!(
                ticks_at(time("9999999.123456789"), Some(1_000_000_000), edge),
                9_999_999_123_456_789
            );
            assert_eq!(ticks_at(time("41.6"), None, edge), 42);
            assert_eq!(ticks_at(time("7"), None, edge), 7);
            assert_eq!(ticks_at(time(".5"), Some(2), edge), 1);
            assert_eq!(
                ticks_at(time("18446744073709551615"), Some(3), edge),
                u64::MAX
            );
        }
        assert_eq!(time("0.1234567894"), time("0.123456789"));
        assert_eq!(time("0.1234567895"), time("0.12345679"));
        assert_eq!(time("2."), time("2"));
        for bad in [
            "",
            ".",
            "-1",
            "+1",
            "1e3",
            "nan",
            "1.2.3",
            " 1",
            "18446744073709551616",
        ] {
            assert!(bad.parse::<Time>().is_err(), "{bad:?}");
        }
    }

    /// With a clock faster than a nanosecond a tick (2.3 GHz, the bare kernel's) several ticks
    /// print as one time: the window at that printed time holds each of them and no other.
    #[test]
    fn the_window_at_a_printed_time_holds_every_tick_printed_with_it() {
        for hz in [2_299_971_083, 3_000_000_000, 999_999_937, 1_000] {
            let clock = Clock { hz: Some(hz) };
            for base in [0u64, 981_234_567, 1 << 40, u64::MAX - 40] {
                for tick in base..base + 40 {
                    let printed = clock.show(tick);
                    let t = time(printed.trim());
                    let since = ticks_at(t, Some(hz), Edge::Since);
                    let until = ticks_at(t, Some(hz), Edge::Until);
                    assert!(
                        (since..=until).contains(&tick),
                        "{hz} Hz, {tick}: {printed}"
                    );
                    assert_eq!(clock.show(since), printed, "{hz} Hz: first of {printed}");
                    assert_eq!(clock.show(until), printed, "{hz} Hz: last of {printed}");
                    if since > 0 {
                        assert_ne!(clock.show(since - 1), printed, "{hz} Hz, before {printed}");
                    }
                    if until < u64::MAX {
                        assert_ne!(clock.show(until + 1), printed, "{hz} Hz, after {printed}");
                    }
                }
            }
        }
    }
}
