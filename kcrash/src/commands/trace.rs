//! `trace`: Linux's ftrace ring buffers, as `trace-cmd report` prints a recording of them; the
//! top trace array or a named instance; written as a trace.dat for trace-cmd itself.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use anyhow::{anyhow, bail, Result};
use clap::Parser;
use kcrash_ftrace::latency::TraceFlags;
use kcrash_ftrace::{dat, Item, RingItems, Trace, Traced};
use kcrash_plugin::{Memory, Order, Unreadable};
use regex::bytes::Regex;

use super::{Context, Flow};
use crate::event_view::Rings;
use crate::export::{self, Exports};
use crate::lanes::{self, Batch, Batches};
use crate::report;
use crate::session::Session;
use crate::timeline::{self, Edge, Select, Time};

/// Print the kernel's ftrace ring buffers as they were at the crash, every CPU merged by time,
/// oldest first, as `trace-cmd report` prints a recording: task and PID, CPU, the latency
/// flags, the time, the event and what its print format makes of it.
#[derive(Parser, Debug)]
#[command(name = "trace", no_binary_name = true, disable_version_flag = true)]
#[command(after_help = "\
Events are read from the dump's memory by the kernel's own descriptions of them (fields and
print formats, as tracefs shows them); trace_printk's records by their format strings in memory.
An event kcrash cannot render (a print-format helper it does not know) shows its raw fields,
marked; a page that cannot be read is said in -s's table, never filled in. On a running kernel
(/proc/kcore) the rings move while they are read.

Examples:
  trace -n 20
  trace --cpu 1 -t
  trace --instance kcrash
  trace -g 'sched_switch:.*next_pid=1 ' --since 4.9
  trace --dat /tmp/crash.dat         then: trace-cmd report -i /tmp/crash.dat
  trace -s
  trace --json | jq -r .name | sort | uniq -c")]
pub struct Args {
    /// Show at most N events (the newest N with --reverse).
    #[arg(short = 'n', value_name = "N")]
    limit: Option<u64>,
    /// Only this CPU's events.
    #[arg(long, value_name = "N")]
    cpu: Option<u32>,
    /// A named trace instance (tracefs's instances/NAME) instead of the top trace array.
    #[arg(long, value_name = "NAME")]
    instance: Option<String>,
    /// Most recent first.
    #[arg(short = 'r', long)]
    reverse: bool,
    /// Only events at or after this time, in seconds of the times printed (the trace clock's
    /// in text; with --json, the common timeline's, which is the same but for the `local`
    /// clock, moved by __sched_clock_offset). A time printed to the microsecond, as text prints
    /// without -t, takes in every event printed with it.
    #[arg(long, value_name = "SECONDS")]
    since: Option<Time>,
    /// Only events at or before this time (as --since).
    #[arg(long, value_name = "SECONDS")]
    until: Option<Time>,
    /// Only events whose line from the event's name on (name, message, damage) matches this
    /// regular expression.
    #[arg(short = 'g', long, value_name = "REGEX")]
    grep: Option<String>,
    /// Times to the nanosecond (trace-cmd's -t), not the microsecond.
    #[arg(short = 't')]
    nanoseconds: bool,
    /// The latency flags (irqs off, need-resched, hard/soft irq, preempt and migrate-disable
    /// depth) in trace-cmd's -l layout, lettered as the kernel's trace file letters them.
    #[arg(short = 'l')]
    latency: bool,
    /// A table of the buffers: per CPU, its pages and events written, overwritten and read.
    #[arg(short = 's', long = "summary")]
    summary: bool,
    /// One JSON object per event (the common event model, as `timeline --json`).
    #[arg(long)]
    json: bool,
    /// Write the instance's buffers as a trace.dat (version 6) for trace-cmd.
    #[arg(long, value_name = "FILE")]
    dat: Option<std::path::PathBuf>,
    #[command(flatten)]
    exports: Exports,
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(argv)?;
    let session = cx.session;
    let decoder: &dyn kcrash_plugin::Decoder = &kcrash_ftrace::DECODER;
    let log = session.log(crate::plugins::index_of(decoder))?;
    let trace = log
        .as_any()
        .downcast_ref::<Trace>()
        .ok_or_else(|| anyhow!("the ftrace log is not ftrace's"))?;
    let instance = args.instance.clone().unwrap_or_default();
    let rings: Vec<usize> = trace
        .rings_of(&instance)
        .into_iter()
        .filter(|&r| {
            args.cpu
                .is_none_or(|c| trace.ring(r).is_some_and(|(_, b)| b.cpu == c))
        })
        .collect();
    if !trace.instances.iter().any(|i| i.name == instance) {
        let names: Vec<String> = trace
            .instances
            .iter()
            .map(|i| {
                if i.name.is_empty() {
                    "(top)".into()
                } else {
                    i.name.clone()
                }
            })
            .collect();
        bail!(
            "no trace instance {instance:?}; the dump has {}",
            names.join(", ")
        );
    }
    if session.dump.is_live() {
        writeln!(
            cx.err,
            "trace: the running kernel's rings move while they are read: each page is as it was when read, and pages read early may have been overwritten since"
        )?;
    }
    if let Some(path) = &args.dat {
        return write_dat(cx, trace, &instance, path);
    }
    if args.summary {
        report::document(&Rings::new(log), args.json, cx.out, cx.paint)?;
        return Ok(Flow::Continue);
    }
    if args.json || args.exports.any() {
        // The common event model, through the same merge as `timeline`.
        let select = Select {
            limit: args.limit,
            reverse: !args.reverse,
            cpu: args.cpu,
            since: args.since,
            until: args.until,
            grep: args.grep.clone(),
            json: args.json,
            raw: false,
        };
        let unreadable = AtomicU64::new(0);
        let keep_instance = |e: &kcrash_plugin::Event<'_>| {
            let keep = rings.contains(&e.ring);
            if keep && e.name == kcrash_ftrace::UNREADABLE_PAGE {
                unreadable.fetch_add(1, Relaxed);
            }
            keep
        };
        if args.exports.any() {
            export::run(
                &args.exports,
                &[log],
                session,
                &select,
                Some(&keep_instance),
                cx.out,
                cx.err,
            )?;
        } else {
            timeline::print(
                &[log],
                session,
                &select,
                Some(&keep_instance),
                cx.out,
                cx.err,
                cx.paint,
            )?;
        }
        return unreadable_pages(unreadable.into_inner());
    }
    let order = if args.reverse {
        Order::NewestFirst
    } else {
        Order::OldestFirst
    };
    let mem: &(dyn Memory + Sync) = session;
    let (since, until) = window(&args);
    let choice = Choice {
        since,
        until,
        grep: timeline::grep(args.grep.as_deref())?,
    };
    let unreadable = AtomicU64::new(0);
    // Each CPU's ring rendered on a thread of its own; rings are in CPU order, and events of
    // one time are taken by CPU, lowest first, as the kernel's trace file and trace-cmd take
    // them.
    let streams: Vec<Box<dyn Batches + '_>> = rings
        .iter()
        .enumerate()
        .map(|(stream, &r)| -> Box<dyn Batches + '_> {
            Box::new(RingLines {
                events: trace.items(mem, r, order),
                lines: Lines {
                    trace,
                    mem,
                    latency: args.latency,
                    nanoseconds: args.nanoseconds,
                    scratch: Vec::new(),
                },
                cpu: trace.ring(r).map_or(0, |(_, c)| c.cpu),
                stream,
                order,
                choice: &choice,
                unreadable: &unreadable,
            })
        })
        .collect();
    lanes::merge(streams, args.limit.unwrap_or(u64::MAX), cx.out)?;
    unreadable_pages(unreadable.into_inner())
}

/// `--since` and `--until` in nanoseconds of the trace clock. Text without `-t` prints times
/// rounded to the microsecond, so there a time given holds every event printed with it: from
/// half a microsecond before it to just under half a microsecond after.
fn window(args: &Args) -> (u64, u64) {
    let nanos = |t: Option<Time>, edge| t.map(|t| timeline::ticks_at(t, Some(1_000_000_000), edge));
    let (since, until) = (
        nanos(args.since, Edge::Since),
        nanos(args.until, Edge::Until),
    );
    if args.nanoseconds {
        return (since.unwrap_or(0), until.unwrap_or(u64::MAX));
    }
    // The time given, rounded to the microsecond as lines are.
    let micros = |ns: u64| ns.saturating_add(500) / 1000 * 1000;
    (
        since.map_or(0, |ns| micros(ns).saturating_sub(500)),
        until.map_or(u64::MAX, |ns| micros(ns).saturating_add(499)),
    )
}

/// Which events `trace` shows besides their CPU and instance.
struct Choice {
    /// Nanoseconds of the trace clock.
    since: u64,
    until: u64,
    grep: Option<Regex>,
}

/// One ring's lines, a batch at a time.
struct RingLines<'a> {
    events: RingItems<'a>,
    lines: Lines<'a>,
    cpu: u32,
    /// The ring's place among the merged ones.
    stream: usize,
    order: Order,
    choice: &'a Choice,
    /// Unreadable pages marked, over all rings.
    unreadable: &'a AtomicU64,
}

impl Batches for RingLines<'_> {
    fn next_batch(&mut self, size: usize, done: &AtomicBool) -> Batch {
        let mut b = Batch::default();
        let choice = self.choice;
        while b.lines() < size {
            if done.load(Relaxed) || crate::interrupt::requested() {
                break;
            }
            let Some(item) = self.events.next() else {
                break;
            };
            let (ts, seq) = match &item {
                Item::Event(t) => {
                    if t.ts < choice.since || t.ts > choice.until {
                        continue;
                    }
                    let start = b.bytes.len();
                    let name_at = self.lines.event(&mut b.bytes, t, self.cpu);
                    if choice
                        .grep
                        .as_ref()
                        .is_some_and(|re| !re.is_match(&b.bytes[name_at..]))
                    {
                        b.bytes.truncate(start);
                        continue;
                    }
                    (t.ts, t.seq)
                }
                Item::Unreadable { ts, seq, lost } => {
                    if *ts > choice.until {
                        continue;
                    }
                    write_unreadable(&mut b.bytes, self.cpu, *ts, lost);
                    self.unreadable.fetch_add(1, Relaxed);
                    (*ts, *seq)
                }
            };
            b.push((ts, self.stream as u64, seq as usize), self.order);
        }
        b
    }
}

/// Done, or failed after printing everything when pages of the rings could not be read.
fn unreadable_pages(n: u64) -> Result<Flow> {
    if n > 0 {
        bail!("{n} page(s) of the rings could not be read: their events are not shown");
    }
    Ok(Flow::Continue)
}

/// The line an unreadable page leaves where its events would be, placed at the time of the
/// ring's event before it (marked `~`), whatever `-g` asks: its events may be what was looked
/// for; `--until` drops it only when that time is past (its events came later).
fn write_unreadable(out: &mut Vec<u8>, cpu: u32, ts: u64, lost: &Unreadable) {
    let us = (ts + 500) / 1000;
    let _ = writeln!(
        out,
        "{:>22} [{cpu:03}] ~{:5}.{:06}: {}; the page's events are not shown",
        kcrash_ftrace::UNREADABLE_PAGE,
        us / 1_000_000,
        us % 1_000_000,
        crate::escape::escaped(lost.to_string().as_bytes()),
    );
}

/// Turns events into `trace-cmd report`'s lines.
struct Lines<'a> {
    trace: &'a Trace,
    mem: &'a (dyn Memory + Sync),
    /// trace-cmd's `-l` and `-t`.
    latency: bool,
    nanoseconds: bool,
    /// A message before it is escaped.
    scratch: Vec<u8>,
}

/// Columns an event's name and its colon take, as trace-cmd pads them.
const NAME_COLUMNS: usize = 21;

impl Lines<'_> {
    /// Appends `trace-cmd report`'s line for `t` (`-N`: print formats, no plugins): `comm-pid
    /// [cpu] seconds: name: message`, or with `-l` its latency layout `comm-pid cpuFLAGS
    /// seconds: ...`. Returns where the event's name starts.
    fn event(&mut self, out: &mut Vec<u8>, t: &Traced, cpu: u32) -> usize {
        let trace = self.trace;
        // The command name, escaped, right-aligned in 16 columns (8, cut to 8, with -l).
        let start = out.len();
        crate::escape::escape_into(trace.comm(t.pid()), out);
        let columns = if self.latency { 8 } else { 16 };
        let written = std::str::from_utf8(&out[start..]).map_or(0, |c| c.chars().count());
        if self.latency && written > columns {
            let cut = std::str::from_utf8(&out[start..])
                .ok()
                .and_then(|c| c.char_indices().nth(columns))
                .map_or(out.len(), |(i, _)| start + i);
            out.truncate(cut);
        }
        out.splice(
            start..start,
            std::iter::repeat_n(b' ', columns.saturating_sub(written)),
        );
        let _ = if self.latency {
            write!(
                out,
                "-{:<5} {cpu:>3}{}",
                t.pid(),
                latency(trace.layout.trace_flags.as_ref(), t)
            )
        } else {
            write!(out, "-{:<5} [{cpu:03}]", t.pid())
        };
        let _ = if self.nanoseconds {
            let (secs, rest) = (t.ts / 1_000_000_000, t.ts % 1_000_000_000);
            write!(out, " {secs:5}.{rest:09}: ")
        } else {
            // Rounded to the microsecond, as trace-cmd rounds.
            let us = (t.ts + 500) / 1000;
            write!(out, " {:5}.{:06}: ", us / 1_000_000, us % 1_000_000)
        };
        let format = trace.formats.by_id.get(&t.id());
        let name_at = out.len();
        match format {
            Some(f) => out.extend_from_slice(f.name.as_bytes()),
            None => {
                let _ = write!(out, "<event {}>", t.id());
            }
        }
        out.push(b':');
        let pad = NAME_COLUMNS.saturating_sub(out.len() - name_at);
        out.extend(std::iter::repeat_n(b' ', pad + 1));
        self.scratch.clear();
        match trace.message_into(t, self.mem, &mut self.scratch) {
            Ok(()) => crate::escape::escape_keeping_tabs_into(&self.scratch, out),
            Err(why) => {
                let raw = format.map(|f| raw_fields(t, f)).unwrap_or_default();
                out.extend_from_slice(raw.as_bytes());
                let _ = write!(out, " <raw: {}>", crate::escape::escaped(why.as_bytes()));
            }
        }
        if let Some(why) = &t.broken {
            let _ = write!(out, " <{}>", crate::escape::escaped(why.as_bytes()));
        }
        out.push(b'\n');
        name_at
    }
}

/// `name=value` for each field, when the print format cannot be rendered.
fn raw_fields(t: &Traced, format: &kcrash_ftrace::formats::Format) -> String {
    format
        .fields
        .iter()
        .map(|f| {
            let at = f.offset as usize;
            let bytes = t.data.get(at..at + f.size as usize).unwrap_or_default();
            let value = if f.size <= 8 && !f.ty.contains('[') {
                let mut w = [0u8; 8];
                w[..bytes.len()].copy_from_slice(bytes);
                format!("{:#x}", u64::from_le_bytes(w))
            } else {
                crate::escape::escaped(bytes)
            };
            format!("{}={value}", f.name)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The kernel's latency flags: irqs-off, need-resched, hard/soft irq, preempt depth,
/// migrate-disable depth (`trace_print_lat_fmt`); `???` for the first three when the vmlinux
/// does not say which bit is which.
fn latency(flags: Option<&TraceFlags>, t: &Traced) -> String {
    let [irqs, resched, irq] = flags.map_or(['?'; 3], |f| f.letters(t.flags()));
    let pc = t.preempt_count();
    let nibble = |n: u8| {
        if n == 0 {
            '.'
        } else {
            char::from_digit(u32::from(n), 16).unwrap_or('?')
        }
    };
    format!(
        "{irqs}{resched}{irq}{}{}",
        nibble(pc & 0xf),
        nibble(pc >> 4)
    )
}

/// `trace --dat FILE`: the instance's buffers for trace-cmd, with the kernel's and modules'
/// symbols.
fn write_dat(
    cx: &mut Context<'_, '_>,
    trace: &Trace,
    instance: &str,
    path: &std::path::Path,
) -> Result<Flow> {
    let session = cx.session;
    let kallsyms = kallsyms(session);
    let release = session.linux.as_ref().and_then(|l| l.release.clone());
    let mem: &dyn Memory = session;
    let (written, bytes) = export::write_file(path, "trace.dat", session, |out| {
        Ok(dat::write(
            out,
            trace,
            mem,
            instance,
            &kallsyms,
            release.as_deref(),
        )?)
    })?;
    writeln!(
        cx.out,
        "{}: trace.dat (version 6) of {} events on {} pages of {} CPUs, {bytes} bytes",
        path.display(),
        written.events,
        written.pages,
        written.cpus
    )?;
    for why in &written.left_out {
        writeln!(cx.err, "trace: left out: {why}")?;
    }
    Ok(Flow::Continue)
}

/// Where x86_64's kernel half of the address space starts.
const KERNEL_HALF: u64 = 0xffff_8000_0000_0000;

/// Every symbol of the kernel and its loaded modules, as /proc/kallsyms lists them — but the
/// per-CPU variables, which sit at small offsets from zero: a trace reader takes the nearest
/// symbol below an address, and would name a user address after the last of them.
fn kallsyms(session: &Session<'_>) -> Vec<dat::Kallsym> {
    let images = session.images();
    let modules: Vec<(&str, &std::sync::Arc<symbols::Image>)> = images.modules().collect();
    let mut out = Vec::new();
    for image in images.set.images() {
        let module = modules
            .iter()
            .find(|(_, m)| std::sync::Arc::ptr_eq(m, image))
            .map(|(name, _)| name.to_string());
        // Of several names for one address, the one kcrash prints: trace-cmd's choice among
        // equal addresses is its sort's, so it is given one.
        let alias = |s: &symbols::Symbol| {
            image
                .symbolize(s.address)
                .is_some_and(|(named, off)| off == 0 && named.name != s.name)
        };
        for s in image
            .symbols()
            .filter(|s| s.address >= KERNEL_HALF && !alias(s))
        {
            let kind = match (s.kind, s.global) {
                (symbols::SymbolKind::Function, true) => 'T',
                (symbols::SymbolKind::Function, false) => 't',
                (_, true) => 'D',
                (_, false) => 'd',
            };
            out.push(dat::Kallsym {
                addr: s.address,
                kind,
                name: s.name,
                module: module.clone(),
            });
        }
    }
    out
}
