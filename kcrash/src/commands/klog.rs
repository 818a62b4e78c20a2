//! `klog [SUBSYS] [full|terse]`: the design's klogPrint(subsys, type) over a dump.

use std::io::{self, Write};

use anyhow::{bail, Result};
use clap::Parser;
use klog_runtime::intensity::{D_KLOG, D_KLOGPRINTF, D_PROLOG, D_TERSE, D_VERBOSE};
use klog_runtime::{split_proc_dom, Desc, Level};
use regex::bytes::Regex;
use serde::Serialize;

use super::args::number;
use super::{Context, Flow};
use crate::error::one_line;
use crate::event_view::{write_named, SchemaPart};
use crate::export::{self, Exports};
use crate::klog::descriptor::LayoutSource;
use crate::klog::live::Snapshot;
use crate::klog::render::{Clock, Printer, Style};
use crate::klog::ring::{Order, Record, Ring};
use crate::klog::salvage::{self, Salvage};
use crate::klog::{Klog, Selection};
use crate::memory::Memory;
use crate::paint::Paint;
use crate::report::{self, Dec, Hex, Report};
use crate::schemata::Reader;
use crate::session::Session;
use crate::timeline::{grep, ticks_at, Edge, Select, Time};
use kcrash_plugin::cache::DirectMapped;
use kcrash_plugin::pipeline::render_stream;

/// Print the kernel event log (KLog rings) as it was at the crash.
///
/// Records of every subsystem merged by clock (SUBSYS 0), or one subsystem's records from its own
/// ring and from NONE's ring (events logged before klog_init), most recent first.
#[derive(Parser, Debug)]
#[command(name = "klog", no_binary_name = true, disable_version_flag = true)]
#[command(
    after_help = "Examples:\n  klog 0 full\n  klog SCHED\n  klog 0 full -n 20 --cpu 1\n  klog FS --grep 'open .*motd'\n  klog -s\n  klog 0 --json | jq .message\n  klog 0 --perfetto crash.pftrace\n  klog SCHED --svg sched.svg --lanes cpu"
)]
pub struct Args {
    /// 0 for every subsystem, a subsystem number, or a name (SCHED, case-insensitive).
    #[arg(default_value = "0")]
    subsys: String,
    /// `full` (time, chore, processor, domain, subsystem, message) or `terse` (subsystem, message).
    #[arg(default_value = "terse")]
    kind: String,
    /// Show at most N records.
    #[arg(short = 'n', value_name = "N")]
    count: Option<u64>,
    /// Oldest record first instead of most recent first.
    #[arg(long)]
    oldest_first: bool,
    /// Only records logged on this processor.
    #[arg(long, value_name = "N")]
    cpu: Option<u32>,
    /// Only records of this chore (the id word): as FULL prints it (16 hex digits), hex with
    /// 0x, or decimal.
    #[arg(long, value_name = "ID", value_parser = chore_id)]
    chore: Option<u64>,
    /// Only records at or after this time: seconds when the dump knows the clock rate, else ticks.
    #[arg(long, value_name = "TIME")]
    since: Option<Time>,
    /// Only records at or before this time (as --since).
    #[arg(long, value_name = "TIME")]
    until: Option<Time>,
    /// Only records whose message matches this regular expression.
    #[arg(short = 'g', long, value_name = "REGEX")]
    grep: Option<String>,
    /// One JSON object per record (every raw word, slot, sequence number, damage), or with -s a
    /// JSON array of rings.
    #[arg(long)]
    json: bool,
    /// A table per subsystem: capacity, written, overwritten, torn, oldest and newest time, flags.
    #[arg(short = 's', long = "summary")]
    summary: bool,
    /// Ignore the control blocks: scan KLogBuffer for valid records, by subsystem and clock.
    #[arg(long)]
    salvage: bool,
    /// Live kernel only: print the log oldest first, then keep printing new records as they are
    /// logged (polling the rings), until Ctrl-C; records lost between polls are reported.
    #[arg(short = 'f', long, conflicts_with_all = ["summary", "salvage"])]
    follow: bool,
    /// With --follow: seconds between two looks at the rings. A ring that takes in more than
    /// its size in records between two looks loses the difference (and says so).
    #[arg(long, value_name = "SECONDS", default_value = "0.2", requires = "follow", value_parser = parse_interval)]
    interval: std::time::Duration,
    /// Records as the kernel logged them: no schema names or types their data words (by
    /// default a record a schema claims has ` {NAME field=value ...}` after its message, and a
    /// `schema` object in JSON).
    #[arg(long)]
    raw: bool,
    #[command(flatten)]
    exports: Exports,
}

/// A chore id: 16 hex digits as FULL lines print it (`[00005584952875b0]`), else a number.
fn chore_id(s: &str) -> Result<u64, String> {
    let printed = s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit());
    match printed {
        true => u64::from_str_radix(s, 16).map_err(|e| format!("{s:?}: {e}")),
        false => number(s),
    }
}

fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if !(0.01..=3600.0).contains(&secs) {
        return Err(format!("{s} is not between 0.01 and 3600 seconds"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// Render threads at most, the calling thread's among them: beyond a few, the single-threaded
/// merge is the limit.
const MAX_WORKERS: usize = 4;

/// Whether a schema could claim a record, by the record's kind of description and its `desc`
/// word, which name its format: asked once per format, kept per thread. A ring's formats are a
/// few hundred, so 2^CLAIM_BITS slots nearly always hold the one asked for.
type Claims = DirectMapped<(Desc, u64), bool>;
const CLAIM_BITS: u32 = 10;

/// The filters of one `klog` invocation.
struct Filter {
    cpu: Option<u32>,
    chore: Option<u64>,
    since: Option<u64>,
    until: Option<u64>,
    grep: Option<Regex>,
}

impl Filter {
    fn new(args: &Args, clock: Clock) -> Result<Filter> {
        Ok(Filter {
            cpu: args.cpu,
            chore: args.chore,
            since: args.since.map(|t| ticks_at(t, clock.hz, Edge::Since)),
            until: args.until.map(|t| ticks_at(t, clock.hz, Edge::Until)),
            grep: grep(args.grep.as_deref())?,
        })
    }

    fn keeps(&self, rec: &Record, printer: &mut Printer<'_>) -> bool {
        let (proc_, _) = split_proc_dom(rec.proc_dom());
        if self.cpu.is_some_and(|c| c != proc_) || self.chore.is_some_and(|c| c != rec.id()) {
            return false;
        }
        if self.since.is_some_and(|t| rec.clock() < t)
            || self.until.is_some_and(|t| rec.clock() > t)
        {
            return false;
        }
        match &self.grep {
            Some(re) => re.is_match(printer.message_text(rec)),
            None => true,
        }
    }
}

fn parse(argv: &[String]) -> Result<Args> {
    let mut args = Args::try_parse_from(argv)?;
    // `klog full` means every subsystem, full.
    if matches!(args.subsys.as_str(), "full" | "terse") && args.kind == "terse" {
        args.kind = std::mem::replace(&mut args.subsys, "0".into());
    }
    // Following shows records in the order they arrive.
    args.oldest_first |= args.follow;
    Ok(args)
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let klog = match cx.session.klog() {
        Ok(klog) => klog,
        Err(e) if !cx.session.dump.is_live() && argv.iter().any(|a| a == "--salvage") => {
            salvage_anywhere(argv, cx.session, &e.to_string(), cx.out, cx.err)?;
            return Ok(Flow::Continue);
        }
        Err(e) => return Err(e.into()),
    };
    let args = parse(argv)?;
    if args.exports.any() && !(args.summary || args.salvage || args.follow) {
        export(&args, cx.session, klog, cx.out, cx.err)?;
    } else if cx.session.dump.is_live() {
        run_live(argv, cx.session, klog, cx.out, cx.err)?;
    } else {
        let schemata = cx.session.schema_reader(false);
        run_on(argv, cx.session, klog, schemata, cx.out, cx.err)?;
    }
    Ok(Flow::Continue)
}

/// Writes the records `args` select to the files its exports name: the KLog's events as the
/// timeline exports them, with klog's subsystem and chore filters.
fn export(
    args: &Args,
    session: &Session<'_>,
    klog: &Klog,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    if args.kind != "terse" {
        bail!("an export holds every field of a record: full or terse is for printing");
    }
    let subsystem = match klog
        .select(&args.subsys)
        .map_err(crate::error::Error::Usage)?
    {
        Selection::All => None,
        Selection::Subsystem(id) => klog.names().get(usize::from(id)).cloned(),
    };
    let chore = args.chore;
    let keep = move |e: &kcrash_plugin::Event<'_>| {
        subsystem.as_deref().is_none_or(|s| e.name == s)
            && chore.is_none_or(|c| {
                e.fields
                    .iter()
                    .any(|f| f.name == "chore" && f.value == kcrash_plugin::Value::Hex(c))
            })
    };
    let select = Select {
        limit: args.count,
        reverse: args.oldest_first,
        cpu: args.cpu,
        since: args.since,
        until: args.until,
        grep: args.grep.clone(),
        json: args.json,
        raw: args.raw,
    };
    let log: &dyn kcrash_plugin::Log = klog;
    export::run(
        &args.exports,
        &[log],
        session,
        &select,
        Some(&keep),
        out,
        err,
    )
}

/// Runs `klog` with `argv` (without the command name) over `mem`, a dump's memory, reading
/// records through `schemata` when given.
pub fn run_on(
    argv: &[String],
    mem: &(dyn Memory + Sync),
    klog: &Klog,
    schemata: Option<Reader<'_>>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let args = parse(argv)?;
    if args.follow {
        bail!("--follow needs a running kernel (kcrash with no dump reads /proc/kcore)");
    }
    show(&args, mem, klog, schemata, &[], out, err)
}

/// Runs `klog` on a running kernel: each look at the rings is a [`Snapshot`], so nothing read
/// by an earlier command (or poll) is reused.
fn run_live(
    argv: &[String],
    session: &Session<'_>,
    found: &Klog,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let args = parse(argv)?;
    let schemata = session.schema_reader(false);
    let snapshot = |err: &mut dyn Write| -> Result<Snapshot<'_>> {
        let (mut snap, notes) = Snapshot::take(session, found.layout.clone());
        // Where the layout came from is the session's finding, not the snapshot's.
        snap.klog.source = found.source.clone();
        snap.klog.notes = found.notes.clone();
        for note in notes {
            writeln!(err, "klog: {note}")?;
        }
        Ok(snap)
    };
    let snap = snapshot(err)?;
    for note in snap.overrun_notes() {
        writeln!(err, "klog: {note}")?;
    }
    show(&args, &snap, &snap.klog, schemata, &[], out, err)?;
    if !args.follow {
        return Ok(());
    }
    let mut seen: Vec<u64> = snap.klog.rings.iter().map(|r| r.written()).collect();
    drop(snap);
    loop {
        out.flush()?;
        if sleep_unless_interrupted(args.interval) {
            return Ok(());
        }
        // A poll's loss is every record after the last one seen that it cannot show, those
        // overwritten while it read the ring included. Its overrun may also hold records an
        // earlier poll printed, which are not lost, so it is not said on its own.
        let snap = snapshot(err)?;
        for r in snap.klog.rings.iter().filter(|r| r.trusted()) {
            let Some(last) = seen.get_mut(r.index) else {
                continue;
            };
            if r.written() < *last {
                writeln!(
                    err,
                    "klog: KLogs[{}] ({}): next_write went back from {} to {} records: the ring was reset",
                    r.index,
                    r.label(),
                    *last,
                    r.written()
                )?;
            } else if r.first_seq() > *last {
                writeln!(
                    err,
                    "klog: KLogs[{}] ({}): {} records lost between polls (the ring went round)",
                    r.index,
                    r.label(),
                    r.first_seq() - *last
                )?;
            }
        }
        show(&args, &snap, &snap.klog, schemata, &seen, out, err)?;
        for r in &snap.klog.rings {
            if let Some(last) = seen.get_mut(r.index) {
                *last = r.written();
            }
        }
    }
}

/// Sleeps for `d`, waking early for Ctrl-C; whether Ctrl-C was pressed.
fn sleep_unless_interrupted(d: std::time::Duration) -> bool {
    let step = std::time::Duration::from_millis(20);
    let start = std::time::Instant::now();
    while start.elapsed() < d {
        if crate::interrupt::requested() {
            return true;
        }
        std::thread::sleep(step);
    }
    crate::interrupt::requested()
}

/// Prints the records `args` select, leaving out ring `i`'s records before `from[i]`.
fn show(
    args: &Args,
    mem: &(dyn Memory + Sync),
    klog: &Klog,
    schemata: Option<Reader<'_>>,
    from: &[u64],
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let style = match args.kind.as_str() {
        "full" => Style::Full,
        "terse" => Style::Terse,
        other => bail!("{other:?} is neither full nor terse"),
    };
    let sel = klog
        .select(&args.subsys)
        .map_err(crate::error::Error::Usage)?;
    let order = if args.oldest_first {
        Order::OldestFirst
    } else {
        Order::NewestFirst
    };
    let clock = Clock {
        hz: klog.clock_rate.hz(),
    };
    if args.summary {
        return summary(mem, klog, clock, args.json, out);
    }
    if from.is_empty() {
        warn_untrusted(klog, sel, args.salvage, err)?;
    }
    let filter = Filter::new(args, clock)?;
    let limit = args.count.unwrap_or(u64::MAX);
    let ring_names: Vec<String> = klog.rings.iter().map(Ring::label).collect();
    let json = args.json;
    let schemata = schemata.filter(|s| !args.raw && s.reads(klog));
    let render = |(printer, claims): &mut (Printer<'_>, Claims),
                  rec: &Record,
                  buf: &mut Vec<u8>|
     -> io::Result<bool> {
        if !filter.keeps(rec, printer) {
            return Ok(false);
        }
        let start = buf.len();
        if json {
            let ring_name = ring_names.get(rec.ring).map_or("", String::as_str);
            printer.json(buf, rec, ring_name);
        } else {
            printer.text(buf, rec, style);
        }
        // Only a record a schema could claim is made an event and looked up: most are not.
        // Whether one could depends on the format alone, so it is asked once per format.
        let claimable = schemata.filter(|s| {
            let desc = rec.desc();
            *claims.get_or_insert_with((rec.desc_kind, desc), desc ^ rec.desc_kind as u64, |_| {
                printer
                    .decoder
                    .format(rec)
                    .is_some_and(|f| s.may_claim(klog, &f))
            })
        });
        if let Some(schema) =
            claimable.and_then(|s| s.apply(klog, &klog.unformatted_event(printer, rec)))
        {
            // Before the line's end: the object's closing brace, or the newline.
            let end = if json { b"}\n".as_slice() } else { b"\n" };
            if buf[start..].ends_with(end) {
                buf.truncate(buf.len() - end.len());
                if json {
                    let part = serde_json::to_vec(&SchemaPart::new(Some(&schema)))?;
                    let inner = part.strip_prefix(b"{").and_then(|p| p.strip_suffix(b"}"));
                    buf.push(b',');
                    buf.extend_from_slice(inner.unwrap_or_default());
                } else {
                    write_named(buf, &schema);
                }
                buf.extend_from_slice(end);
            }
        }
        Ok(true)
    };
    if args.salvage {
        let found = klog.salvage(mem, order);
        let printer = Printer::new(mem, klog.names(), clock).with_descriptions(klog);
        return print_salvage(args, &found, printer, sel, style, out, err);
    }
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_WORKERS);
    let mut printers: Vec<(Printer<'_>, Claims)> = (0..workers)
        .map(|_| {
            let printer = Printer::new(mem, klog.names(), clock).with_descriptions(klog);
            (printer, Claims::new(CLAIM_BITS))
        })
        .collect();
    // Ctrl-C ends the record stream at a batch; what was rendered is written, then the command
    // says so.
    let mut records = klog.records_from(mem, sel, order, from, args.cpu);
    let next = |batch: &mut Vec<Record>, n| {
        if !crate::interrupt::requested() {
            records.fill(batch, n);
        }
    };
    let shown = render_stream(next, &mut printers, &render, limit, out)?;
    // Ctrl-C is how --follow ends, not a failure.
    if !args.follow {
        crate::interrupt::check()?;
    }
    if shown == 0 && from.is_empty() {
        say_why_nothing_printed(klog, sel, args, err)?;
    }
    Ok(())
}

/// Prints what `klog --salvage` found, subsystem by subsystem, with `printer`'s names and clock.
fn print_salvage(
    args: &Args,
    found: &Salvage,
    mut printer: Printer<'_>,
    sel: Selection,
    style: Style,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let filter = Filter::new(args, printer.clock)?;
    let limit = args.count.unwrap_or(u64::MAX);
    let names = printer.names.clone();
    for e in &found.unreadable {
        writeln!(err, "klog: part of the memory salvaged is unreadable: {e}")?;
    }
    if found.unknown_subsystem > 0 {
        writeln!(
            err,
            "klog: {} valid headers name subsystems this kernel does not declare",
            found.unknown_subsystem
        )?;
    }
    let mut shown = 0u64;
    let mut line = Vec::new();
    for (id, group) in found.groups.iter().enumerate() {
        if !matches!(sel, Selection::All) && sel != Selection::Subsystem(id as u16) {
            continue;
        }
        let name = names.get(id).map_or("?", String::as_str);
        if !args.json && !group.is_empty() {
            writeln!(out, "== {name} ({} records salvaged) ==", group.len())?;
        }
        for rec in group {
            crate::interrupt::check()?;
            if shown >= limit {
                break;
            }
            if !filter.keeps(rec, &mut printer) {
                continue;
            }
            line.clear();
            if args.json {
                printer.json(&mut line, rec, name);
            } else {
                printer.text(&mut line, rec, style);
            }
            out.write_all(&line)?;
            shown += 1;
        }
    }
    if shown == 0 && !filtered(args) {
        if found.groups.iter().all(Vec::is_empty) && !found.unreadable.is_empty() {
            bail!("the memory to salvage could not be read: nothing to salvage");
        }
        writeln!(err, "klog: no valid record found")?;
    }
    Ok(())
}

/// `klog --salvage` when no layout could be found: every record in the Tera layout anywhere in
/// the dump's memory, grouped by the subsystem its header names.
fn salvage_anywhere(
    argv: &[String],
    session: &Session<'_>,
    why: &str,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let args = parse(argv)?;
    let style = match args.kind.as_str() {
        "full" => Style::Full,
        "terse" => Style::Terse,
        other => bail!("{other:?} is neither full nor terse"),
    };
    let order = if args.oldest_first {
        Order::OldestFirst
    } else {
        Order::NewestFirst
    };
    let sel = match args.subsys.parse::<u16>() {
        Ok(0) => Selection::All,
        Ok(n) => Selection::Subsystem(n),
        Err(_) => bail!(
            "{:?}: with no layout there are no subsystem names; select a subsystem by number",
            args.subsys
        ),
    };
    writeln!(
        err,
        "klog: {}; --salvage scans the whole dump for records in the Tera layout (subsystems \
         by number, times in ticks)",
        one_line(why)
    )?;
    let found = salvage::anywhere(session.dump, order);
    if found.capped {
        writeln!(
            err,
            "klog: stopped after {} records: the rest of the dump was not scanned",
            salvage::MAX_RECORDS
        )?;
    }
    let names: Vec<String> = (0..found.groups.len())
        .map(|i| format!("SUBSYS{i}"))
        .collect();
    let printer = Printer::new(session, names, Clock { hz: None });
    print_salvage(&args, &found, printer, sel, style, out, err)
}

/// Whether `args` choose among the records, so that none may be the answer.
fn filtered(args: &Args) -> bool {
    args.cpu.is_some()
        || args.chore.is_some()
        || args.since.is_some()
        || args.until.is_some()
        || args.grep.is_some()
        || args.count == Some(0)
}

/// An empty answer is told apart from an unreadable log: nothing could be read is a failure
/// (exit status 1); rings that were read but hold nothing are an empty log, said on stderr.
fn say_why_nothing_printed(
    klog: &Klog,
    sel: Selection,
    args: &Args,
    err: &mut dyn Write,
) -> Result<()> {
    let rings: Vec<&Ring> = klog.rings.iter().filter(|r| klog.reads(r, sel)).collect();
    if rings.iter().all(|r| !r.trusted()) {
        let missing = rings.iter().filter(|r| r.unreadable.is_some()).count();
        bail!(
            "no ring could be read: {missing} not in the dump, {} inconsistent (above)",
            rings.len() - missing
        );
    }
    if filtered(args) {
        return Ok(writeln!(err, "klog: no record matched")?);
    }
    let level = match &klog.level {
        Some(Ok(v)) => Level::from_u32(*v as u32).map_or(format!("; klogLevel is {v}"), |l| {
            format!("; klogLevel is {v} ({})", l.name())
        }),
        Some(Err(e)) => format!("; klogLevel is unreadable ({e})"),
        None => String::new(),
    };
    writeln!(err, "klog: the log is empty: no record was written{level}")?;
    Ok(())
}

/// Says on stderr which selected rings are not trusted, and why: the rings whose control
/// blocks are not in the dump in one line (a truncated dump loses them together), each
/// inconsistent one in a line of its own.
fn warn_untrusted(klog: &Klog, sel: Selection, salvage: bool, err: &mut dyn Write) -> Result<()> {
    let hint = if salvage {
        ""
    } else {
        "; `klog --salvage` scans KLogBuffer for its records"
    };
    let untrusted = || {
        klog.rings
            .iter()
            .filter(move |r| klog.reads(r, sel) && !r.trusted())
    };
    let unreadable: Vec<&Ring> = untrusted().filter(|r| r.unreadable.is_some()).collect();
    if let Some(first) = unreadable.first().and_then(|r| r.unreadable.as_ref()) {
        let which: Vec<String> = unreadable
            .iter()
            .map(|r| format!("KLogs[{}]", r.index))
            .collect();
        writeln!(
            err,
            "klog: {} not in the dump, {} not read: {first}{hint}",
            which.join(", "),
            if which.len() == 1 {
                "its ring"
            } else {
                "their rings"
            }
        )?;
    }
    for r in untrusted().filter(|r| r.unreadable.is_none()) {
        // Salvage scans KLogBuffer, which an attached ring is not in.
        let hint = match (salvage, r.attached) {
            (false, true) => "; its buffer is outside KLogBuffer, which `klog --salvage` scans",
            _ => hint,
        };
        writeln!(
            err,
            "klog: KLogs[{}] ({}) is inconsistent, its ring is not read: {}{hint}",
            r.index,
            r.label(),
            r.problems.join("; ")
        )?;
    }
    Ok(())
}

fn flag_names(bits: u64) -> String {
    let names: Vec<&str> = [
        (D_PROLOG, "prolog"),
        (D_TERSE, "terse"),
        (D_VERBOSE, "verbose"),
        (D_KLOG, "klog"),
        (D_KLOGPRINTF, "klogprintf"),
    ]
    .iter()
    .filter(|(b, _)| bits & *b as u64 != 0)
    .map(|(_, n)| *n)
    .collect();
    if names.is_empty() {
        "-".into()
    } else {
        names.join(",")
    }
}

/// `klog -s`: the rings' figures.
#[derive(Serialize)]
struct Summary {
    /// Sets of rings: one per processor, or 1 when processors share each ring.
    processors: u64,
    rings: Vec<RingRow>,
    /// `klogLevel`: its value and name, or why it could not be read; absent from the image: null.
    klog_level: Option<String>,
    clock_hz: Option<Dec>,
    /// Why times are in ticks: klogClockHz absent, 0 or unreadable (with where and why).
    clock_unknown: Option<String>,
    /// Where the rings' layout came from, and what finding it noticed.
    layout: LayoutRow,
    /// Not in JSON: how the text shows clock values.
    #[serde(skip)]
    clock: Clock,
}

#[derive(Serialize)]
struct LayoutRow {
    /// `dwarf`, `symbol` (the descriptor at klogDescriptor) or `scan` (the descriptor found in
    /// the dump's memory).
    source: &'static str,
    /// The descriptor's address: virtual for `symbol` and for a process core's `scan`, else
    /// physical.
    descriptor: Option<Hex>,
    /// The same as one line, for people.
    #[serde(skip)]
    text: String,
    notes: Vec<String>,
}

impl LayoutRow {
    fn of(klog: &Klog) -> LayoutRow {
        let (source, descriptor) = match &klog.source {
            LayoutSource::Dwarf => ("dwarf", None),
            LayoutSource::Symbol { addr } => ("symbol", Some(Hex(*addr))),
            LayoutSource::Scan { found, .. } => ("scan", Some(Hex(*found))),
        };
        LayoutRow {
            source,
            descriptor,
            text: klog.source.to_string(),
            notes: klog.notes.clone(),
        }
    }
}

#[derive(Serialize)]
struct RingRow {
    index: usize,
    /// The processor whose set holds the ring; null when every processor shares each ring.
    processor: Option<u32>,
    name: String,
    /// For a subsystem grouped into another's ring: that ring's index (its own KLog receives
    /// nothing).
    grouped_into: Option<usize>,
    /// The ring's buffer was attached after boot, outside KLogBuffer.
    attached: bool,
    /// Raw fields of the control block: null when it is not in the dump.
    capacity: Option<u64>,
    /// Counts from the control block: null when it cannot be believed (`counts_unknown` says why).
    written: Option<u64>,
    held: Option<u64>,
    overwritten: Option<u64>,
    laps: Option<u64>,
    counts_unknown: Option<String>,
    torn: u64,
    /// Reservations never finished, exactly (from KLogCommits): null when the writer keeps no
    /// count or it cannot be believed (`unfinished_unknown` says why).
    unfinished: Option<u64>,
    unfinished_unknown: Option<String>,
    never_written: u64,
    damaged: u64,
    oldest_clock: Option<Dec>,
    newest_clock: Option<Dec>,
    oldest_s: Option<f64>,
    newest_s: Option<f64>,
    buffer: Option<Hex>,
    next_write: Option<Dec>,
    /// The ring's DebugFlags by name, or why they could not be read.
    debug_flags: Option<String>,
    trusted: bool,
    problems: Vec<String>,
}

impl Report for Summary {
    fn text(&self, out: &mut dyn Write, _: Paint) -> io::Result<()> {
        let per_cpu = self.processors > 1;
        let cpu = |c: Option<u32>| match (per_cpu, c) {
            (false, _) => String::new(),
            (true, Some(c)) => format!("{c:>3} "),
            (true, None) => "  - ".into(),
        };
        writeln!(
            out,
            "{}{:>3} {:<12} {:>9} {:>10} {:>9} {:>11} {:>5} {:>10} {:>16} {:>16}  FLAGS",
            if per_cpu { "CPU " } else { "" },
            "ID",
            "NAME",
            "CAPACITY",
            "WRITTEN",
            "HELD",
            "OVERWRITTEN",
            "TORN",
            "UNFINISHED",
            "OLDEST",
            "NEWEST",
        )?;
        let time = |c: Option<Dec>| {
            c.map_or("-".into(), |c| {
                self.clock.show(c.0 as u64).trim().to_owned()
            })
        };
        let count = |c: Option<u64>| c.map_or("?".into(), |c| c.to_string());
        for r in &self.rings {
            writeln!(
                out,
                "{}{:>3} {:<12} {:>9} {:>10} {:>9} {:>11} {:>5} {:>10} {:>16} {:>16}  {}",
                cpu(r.processor),
                r.index,
                r.name,
                count(r.capacity),
                count(r.written),
                count(r.held),
                count(r.overwritten),
                r.torn,
                match (r.unfinished, &r.unfinished_unknown) {
                    (Some(n), _) => n.to_string(),
                    (None, Some(_)) => "?".into(),
                    (None, None) => "-".into(),
                },
                time(r.oldest_clock),
                time(r.newest_clock),
                r.debug_flags.as_deref().unwrap_or("-"),
            )?;
            if let Some(leader) = r.grouped_into {
                writeln!(out, "    GROUPED: its events are in KLogs[{leader}]'s ring")?;
            }
            if r.attached {
                let at = r.buffer.map_or("?".into(), |b| format!("{:#x}", b.0));
                writeln!(
                    out,
                    "    ATTACHED: its buffer at {at} is outside KLogBuffer"
                )?;
            }
            if !r.trusted {
                writeln!(out, "    NOT TRUSTED: {}", r.problems.join("; "))?;
            } else if let Some(why) = &r.counts_unknown {
                writeln!(out, "    COUNTS UNKNOWN: {why}")?;
            } else if let Some(why) = &r.unfinished_unknown {
                writeln!(out, "    UNFINISHED UNKNOWN: {why}")?;
            }
        }
        writeln!(out, "layout: {}", self.layout.text)?;
        for note in &self.layout.notes {
            writeln!(out, "  {note}")?;
        }
        if let Some(level) = &self.klog_level {
            writeln!(out, "klogLevel: {level}")?;
        }
        match (&self.clock_hz, &self.clock_unknown) {
            (Some(hz), _) => writeln!(out, "clock: {} Hz (klogClockHz); times in seconds", hz.0),
            (None, why) => writeln!(
                out,
                "clock: rate unknown ({}); times in ticks",
                why.as_deref().unwrap_or("?")
            ),
        }
    }
}

/// `klog -s`: one row per ring.
fn summary(
    mem: &(dyn Memory + Sync),
    klog: &Klog,
    clock: Clock,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let figures = klog.summary(mem);
    let flags = |i: usize| {
        klog.debug_flags.get(i).map(|f| {
            f.as_ref()
                .map(|b| flag_names(*b))
                .unwrap_or_else(|e| format!("<unreadable {e}>"))
        })
    };
    let klog_level = klog.level.as_ref().map(|l| match l {
        Ok(v) => {
            Level::from_u32(*v as u32).map_or(format!("{v}"), |l| format!("{v} ({})", l.name()))
        }
        Err(e) => format!("<unreadable {e}>"),
    });
    let rings = klog
        .rings
        .iter()
        .zip(&figures)
        .map(|(r, s)| {
            let counts_unknown = s.counts_unknown(r);
            let known = |v: u64| counts_unknown.is_none().then_some(v);
            let raw = |v: u64| r.unreadable.is_none().then_some(v);
            let unfinished = match (&counts_unknown, r.unfinished()) {
                (_, None) => Ok(None),
                (Some(_), Some(_)) => Err("next_write cannot be believed".to_owned()),
                (None, Some(u)) => u.map(Some),
            };
            RingRow {
                index: r.index,
                processor: r.processor,
                name: r.label(),
                grouped_into: r.grouped_into,
                attached: r.attached,
                capacity: raw(r.num_recs),
                written: known(r.written()),
                held: known(r.held()),
                overwritten: known(r.overwritten()),
                laps: known(r.laps()),
                counts_unknown: counts_unknown.clone(),
                torn: s.torn,
                unfinished: unfinished.clone().ok().flatten(),
                unfinished_unknown: unfinished.err(),
                never_written: s.never_written,
                damaged: s.damaged,
                oldest_clock: s.oldest.map(|c| Dec(c.into())),
                newest_clock: s.newest.map(|c| Dec(c.into())),
                oldest_s: s.oldest.and_then(|c| clock.seconds(c)),
                newest_s: s.newest.and_then(|c| clock.seconds(c)),
                buffer: raw(r.buffer).map(Hex),
                next_write: raw(r.next_write).map(|n| Dec(n.into())),
                debug_flags: flags(r.own as usize),
                trusted: r.trusted(),
                problems: r.problems.clone(),
            }
        })
        .collect();
    let summary = Summary {
        processors: klog.shape.processors,
        rings,
        klog_level,
        clock_hz: klog.clock_rate.hz().map(|hz| Dec(hz.into())),
        clock_unknown: klog.clock_rate.unknown_because(),
        layout: LayoutRow::of(klog),
        clock,
    };
    report::document(&summary, json, out, Paint::default())?;
    Ok(())
}
