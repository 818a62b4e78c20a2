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
use kcrash_plugin::{Event, Log, Memory, Order};
use regex::bytes::Regex;

use crate::event_view::{write_line, EventView, RingPrefix};
use crate::paint::Paint;
use crate::report;
use crate::schemata::Reader;
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

/// How a ring's events become lines: the filters, the rendering, the time axis.
struct Render<'r> {
    filter: &'r Filter,
    json: bool,
    paint: Paint,
    /// Times on the log's own clock (one log), else in nanoseconds.
    own_clock: bool,
    order: Order,
    /// The schemata events are read through, unless `--raw` or none is loaded.
    schemata: Option<Reader<'r>>,
    /// Set when the merge has written all it will: the rings' threads stop reading.
    done: AtomicBool,
}

/// One ring's events, read and rendered a batch at a time.
struct Producer<'a, 'r> {
    /// The ring's stream, opened on first use: on the thread that reads it, since a decoder may
    /// index the ring when it opens the stream.
    events: Option<Box<dyn Iterator<Item = Event<'a>> + Send + 'a>>,
    mem: &'a (dyn Memory + Sync),
    ring: usize,
    log: &'a dyn Log,
    stream: usize,
    render: &'r Render<'r>,
    prefix: RingPrefix,
    batch_size: usize,
    /// For a -g match in JSON mode, which prints no text line.
    scratch: Vec<u8>,
}

impl Producer<'_, '_> {
    /// The next batch of kept lines; an empty one when the ring has no more.
    fn next_batch(&mut self) -> Batch {
        let mut b = Batch::default();
        let r = self.render;
        // A batch of kept lines, or the ring's end; filtered-out events do not count.
        while b.ends.len() < self.batch_size {
            if r.done.load(Ordering::Relaxed) || crate::interrupt::requested() {
                break;
            }
            let (log, mem, ring, order) = (self.log, self.mem, self.ring, r.order);
            let events = self
                .events
                .get_or_insert_with(|| log.events(mem, ring, order));
            let Some(event) = events.next() else {
                break;
            };
            let time = if r.own_clock {
                event.ticks
            } else {
                self.log.clock().nanos(event.ticks).unwrap_or(u64::MAX)
            };
            if !r.filter.keeps(time, &event) || !self.render_line(&event, &mut b.bytes) {
                continue;
            }
            let key = (time, event.seq, self.stream);
            b.keys.push(match r.order {
                Order::NewestFirst => key,
                Order::OldestFirst => (!key.0, !key.1, !key.2),
            });
            b.ends.push(b.bytes.len());
        }
        b
    }

    /// Appends the event's line when `-g` keeps it; says whether it did.
    fn render_line(&mut self, event: &Event<'_>, out: &mut Vec<u8>) -> bool {
        let r = self.render;
        let grep = |body: &[u8]| r.filter.grep.as_ref().is_none_or(|re| re.is_match(body));
        let clock = self.log.clock();
        let schema = r.schemata.and_then(|s| s.apply(self.log, event));
        let schema = schema.as_ref();
        if !r.json {
            return write_line(out, &self.prefix, clock, event, schema, r.paint, grep);
        }
        // -g matches the text line, which JSON does not print.
        self.scratch.clear();
        let off = Paint::default();
        if r.filter.grep.is_some()
            && !write_line(
                &mut self.scratch,
                &self.prefix,
                clock,
                event,
                schema,
                off,
                grep,
            )
        {
            return false;
        }
        report::json_line(&EventView::new(self.log, event, schema), out).is_ok()
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
    let own_clock = logs.len() == 1;
    let mut placed = Vec::new();
    for &log in logs {
        match log.clock().unknown_because() {
            Some(why) if own_clock => writeln!(err, "times are in ticks: {why}")?,
            Some(why) => writeln!(
                err,
                "{}: left out: its clock rate is unknown ({why}), so its events cannot be placed \
                 among the others'",
                log.kind()
            )?,
            None => {}
        }
        if own_clock || log.clock().hz().is_some() {
            placed.push(log);
        }
    }
    let filter = Filter::new(select, own_clock.then(|| logs[0]))?;
    let render = Render {
        filter: &filter,
        json: select.json,
        paint,
        own_clock,
        order: if select.reverse {
            Order::OldestFirst
        } else {
            Order::NewestFirst
        },
        schemata: session.schema_reader(select.raw),
        done: AtomicBool::new(false),
    };
    let limit = select.limit.unwrap_or(u64::MAX);
    let batch_size = limit.clamp(MIN_BATCH as u64, BATCH as u64) as usize;
    let mut producers = Vec::new();
    for &log in &placed {
        for (r, ring) in log.rings().iter().enumerate() {
            // Every ring is read, whatever --cpu says: which rings a processor writes is the
            // log's business (a KLog processor logs into set `cpu % sets`), its events say.
            if ring.refused.is_some() {
                continue;
            }
            producers.push(Producer {
                events: None,
                mem: session,
                ring: r,
                log,
                stream: producers.len(),
                render: &render,
                prefix: RingPrefix::new(log, r, show_log),
                batch_size,
                scratch: Vec::new(),
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
        let shown = merge(lanes, limit, out);
        // The merge dropped the lanes, closing the channels; a thread still reading stops.
        render.done.store(true, Ordering::Relaxed);
        shown
    })?;
    crate::interrupt::check()?;
    if shown == 0 {
        writeln!(err, "no event to show")?;
    }
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
        let time = |t| ticks_at(t, hz);
        Ok(Filter {
            cpu: select.cpu,
            since: select.since.map(time).transpose()?,
            until: select.until.map(time).transpose()?,
            grep: grep(select.grep.as_deref())?,
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
