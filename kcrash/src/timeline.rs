//! Events of one or several logs merged by time and printed through one set of filters: what a
//! decoder's command prints for its log, and `timeline` for every log the dump holds.
//!
//! One log is merged on its own clock (ticks, shown as seconds when the rate is known). Several
//! logs are merged in nanoseconds, each converted by its own clock rate; a log whose rate is not
//! known cannot be placed among the others and is left out, with a note.
//!
//! Each ring is read, filtered and rendered a batch at a time on a thread of its own, so rings
//! are decoded and printed in parallel; the calling thread only merges the rendered lines by
//! their keys, as `klog 0` merges records (a heap holding one line per ring). Memory stays
//! bounded by a few batches per ring, whatever the logs' length.

use std::collections::BinaryHeap;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};

use anyhow::{bail, Context as _, Result};
use kcrash_plugin::{Clock, Event, Log, Memory, Order};
use regex::bytes::Regex;

use crate::event_view::{write_line, EventView, RingPrefix};
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

/// Events rendered per batch: large enough to amortise the hand-over between threads, small
/// enough that every ring's batches stay in memory together.
const BATCH: usize = 1024;
/// The smallest batch, for a short `-n`.
const MIN_BATCH: usize = 16;
/// Rings read on threads of their own at most; beyond, the calling thread reads them.
const MAX_THREADS: usize = 64;

/// Where a line goes in the merged stream: (time, place in its ring, stream), compared in that
/// order and bitwise inverted for oldest-first, so that the max-heap's top is the next line.
type Key = (u64, u64, usize);

/// A ring's next rendered lines, in its order.
#[derive(Default)]
struct Batch {
    keys: Vec<Key>,
    /// Where each line ends in `bytes`.
    ends: Vec<usize>,
    bytes: Vec<u8>,
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
    batch_size: usize,
    /// Set when the merge has written all it will: the rings' threads stop reading.
    done: &'r AtomicBool,
}

impl Producer<'_, '_> {
    /// The next batch of kept lines; an empty one when the ring has no more.
    fn next_batch(&mut self) -> Batch {
        let mut b = Batch::default();
        let plan = self.plan;
        // A batch of kept lines, or the ring's end; filtered-out events do not count.
        while b.ends.len() < self.batch_size {
            if self.done.load(Ordering::Relaxed) || crate::interrupt::requested() {
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
            let key = (time, event.seq, self.stream);
            b.keys.push(match plan.order {
                Order::NewestFirst => key,
                Order::OldestFirst => (!key.0, !key.1, !key.2),
            });
            b.ends.push(b.bytes.len());
        }
        b
    }
}

/// A ring as the merge sees it: its current batch and where the rest comes from.
struct Lane<'a, 'r> {
    batch: Batch,
    at: usize,
    source: Source<'a, 'r>,
}

enum Source<'a, 'r> {
    /// A thread renders the ring ahead of the merge.
    Thread(Receiver<Batch>),
    /// The calling thread renders it when the merge needs it.
    Inline(Producer<'a, 'r>),
}

impl Lane<'_, '_> {
    /// The key of the ring's next line, fetching its next batch when the current one is done.
    fn key(&mut self) -> Option<Key> {
        if self.at == self.batch.keys.len() {
            self.batch = match &mut self.source {
                Source::Thread(rx) => rx.recv().unwrap_or_default(),
                Source::Inline(p) => p.next_batch(),
            };
            self.at = 0;
        }
        self.batch.keys.get(self.at).copied()
    }

    /// Writes the ring's next line.
    fn write(&mut self, out: &mut Vec<u8>) {
        let start = self.at.checked_sub(1).map_or(0, |i| self.batch.ends[i]);
        out.extend_from_slice(&self.batch.bytes[start..self.batch.ends[self.at]]);
        self.at += 1;
    }
}

/// Prints the events of `logs` that `select` keeps, merged by time; `show_log` puts each event's
/// log on its text line. Says on `err` which logs cannot be merged and when nothing was kept.
pub fn print<'a>(
    logs: &[&'a dyn Log],
    session: &'a Session<'_>,
    select: &Select,
    show_log: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
    paint: Paint,
) -> Result<u64> {
    let plan = Plan::new(logs, session.schema_reader(false), select, err)?;
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
    let batch_size = plan.limit.clamp(MIN_BATCH as u64, BATCH as u64) as usize;
    let done = AtomicBool::new(false);
    let mut producers = Vec::new();
    for &log in &plan.logs {
        for (r, ring) in log.rings().iter().enumerate() {
            // Every ring is read, whatever --cpu says: which rings a processor writes is the
            // log's business (a KLog processor logs into set `cpu % sets`), its events say.
            if ring.refused.is_some() {
                continue;
            }
            let stream = producers.len();
            producers.push(Producer {
                events: None,
                mem,
                ring: r,
                log,
                stream,
                plan,
                emit: make(log, r, stream),
                batch_size,
                done: &done,
            });
        }
    }
    let shown = std::thread::scope(|s| {
        let threaded = producers.len() <= MAX_THREADS;
        let lanes: Vec<Lane<'_, '_>> = producers
            .into_iter()
            .map(|mut p| {
                let source = if threaded {
                    // Two batches ahead at most: the thread waits for the merge beyond that.
                    let (tx, rx) = sync_channel(2);
                    s.spawn(move || loop {
                        let b = p.next_batch();
                        let done = b.keys.is_empty();
                        if tx.send(b).is_err() || done {
                            break;
                        }
                    });
                    Source::Thread(rx)
                } else {
                    // Every ring's batch waits in memory for the merge: keep them small.
                    p.batch_size = p.batch_size.min(MIN_BATCH);
                    Source::Inline(p)
                };
                Lane {
                    batch: Batch::default(),
                    at: 0,
                    source,
                }
            })
            .collect();
        let shown = merge(lanes, plan.limit, out);
        // The merge dropped the lanes, closing the channels; a thread still reading stops.
        done.store(true, Ordering::Relaxed);
        shown
    })?;
    crate::interrupt::check()?;
    Ok(shown)
}

/// Writes up to `limit` lines of the lanes in key order; returns how many. Ctrl-C stops it.
fn merge(mut lanes: Vec<Lane<'_, '_>>, limit: u64, out: &mut dyn Write) -> io::Result<u64> {
    let mut heap = BinaryHeap::with_capacity(lanes.len());
    for (i, lane) in lanes.iter_mut().enumerate() {
        if let Some(k) = lane.key() {
            heap.push((k, i));
        }
    }
    let mut buf = Vec::with_capacity(1 << 16);
    let mut shown = 0;
    while shown < limit {
        let Some(mut top) = heap.peek_mut() else {
            break;
        };
        let lane = &mut lanes[top.1];
        lane.write(&mut buf);
        shown += 1;
        match lane.key() {
            Some(k) => top.0 = k,
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
            }
        }
        if buf.len() >= 1 << 16 {
            out.write_all(&buf)?;
            buf.clear();
            if crate::interrupt::requested() {
                break;
            }
        }
    }
    out.write_all(&buf)?;
    Ok(shown)
}

/// A time given on the command line (`--since`, `--until`) in ticks: seconds times the clock rate
/// when it is known, else ticks as given.
pub fn ticks_at(t: f64, hz: Option<u64>) -> Result<u64> {
    if !(t.is_finite() && t >= 0.0) {
        bail!("time {t} is not a non-negative number");
    }
    Ok(match hz {
        Some(hz) => (t * hz as f64) as u64,
        None => t as u64,
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
