//! `schema`: the event schema files the session loaded, the ones it refused, and how many events
//! of this dump's logs each one names.

use anyhow::Result;
use clap::Parser;
use kcrash_plugin::Order;
use kcrash_schema::Lookup;
use serde::Serialize;

use super::{Context, Flow};
use crate::escape::escaped;
use crate::paint::Paint;
use crate::plugins::DECODERS;
use crate::report::{self, Dec, Report};
use crate::schemata;

/// The event schemata loaded (those kcrash ships, those in ~/.config/kcrash/schemata or
/// $XDG_CONFIG_HOME/kcrash/schemata, those given by --schema FILE|DIR) and the events of this
/// dump's logs each one names.
///
/// Counting reads every event of every log the dump holds, once.
#[derive(Parser, Debug)]
#[command(name = "schema", no_binary_name = true, disable_version_flag = true)]
#[command(
    after_help = "Examples:\n  schema\n  schema -e | grep -v ' 0$'\n  schema --json | jq '.files[] | select(.matched > 0)'"
)]
pub struct Args {
    /// Every event schema, with the events it names in this dump, instead of one line a file.
    #[arg(short = 'e', long)]
    events: bool,
    /// A JSON document instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct SchemaReport {
    files: Vec<FileRow>,
    /// Files left out: one line each, naming the file and what is wrong.
    refused: Vec<String>,
    /// With -e: every schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<Vec<EventRow>>,
    /// Events two schemata claim: neither is used for them.
    conflicts: Dec,
    /// Logs whose events could not all be counted, and why.
    unread: Vec<String>,
    #[serde(skip)]
    show_events: bool,
}

#[derive(Serialize)]
struct FileRow {
    file: String,
    syntax: &'static str,
    schemata: usize,
    /// Events of this dump its schemata name.
    matched: Dec,
}

#[derive(Serialize)]
struct EventRow {
    log: String,
    identity: String,
    ring: Option<String>,
    name: String,
    origin: String,
    matched: Dec,
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(argv)?;
    let session = cx.session;
    let set = &session.schemata.set;
    let mut matched = vec![0u64; set.events().len()];
    let mut conflicts = 0u64;
    let mut unread = Vec::new();
    for (i, d) in DECODERS.iter().enumerate() {
        let Ok(log) = session.log(i) else { continue };
        if !set.has_log(log.kind()) {
            continue;
        }
        for (r, ring) in log.rings().iter().enumerate() {
            if let Some(why) = &ring.refused {
                unread.push(escaped(
                    format!("{} {}: not read: {why}", d.kind(), ring.name).as_bytes(),
                ));
                continue;
            }
            for event in log.events(session, r, Order::OldestFirst) {
                crate::interrupt::check()?;
                match schemata::lookup(set, log, &event, session) {
                    Lookup::None => {}
                    Lookup::One(s) => {
                        if let Some(n) = set.index_of(s).and_then(|at| matched.get_mut(at)) {
                            *n += 1;
                        }
                    }
                    Lookup::Conflict(..) => conflicts += 1,
                }
            }
        }
    }
    let mut at = 0;
    let files = set
        .files
        .iter()
        .map(|f| {
            let mine = matched.get(at..at + f.events).unwrap_or_default();
            at += f.events;
            FileRow {
                file: escaped(f.file.as_bytes()),
                syntax: f.syntax,
                schemata: f.events,
                matched: Dec(mine.iter().map(|&n| i128::from(n)).sum()),
            }
        })
        .collect();
    let events = set
        .events()
        .iter()
        .zip(&matched)
        .map(|(e, &n)| EventRow {
            log: escaped(e.log.as_bytes()),
            identity: escaped(e.identity.to_string().as_bytes()),
            ring: e.ring.as_deref().map(|r| escaped(r.as_bytes())),
            name: escaped(e.name.as_bytes()),
            origin: escaped(e.origin.to_string().as_bytes()),
            matched: Dec(n.into()),
        })
        .collect();
    let report = SchemaReport {
        files,
        refused: session
            .schemata
            .refused
            .iter()
            .map(|r| escaped(r.as_bytes()))
            .collect(),
        events: args.events.then_some(events),
        conflicts: Dec(conflicts.into()),
        unread,
        show_events: args.events,
    };
    report::document(&report, args.json, cx.out, cx.paint)?;
    Ok(Flow::Continue)
}

impl Report for SchemaReport {
    fn text(&self, out: &mut dyn std::io::Write, paint: Paint) -> std::io::Result<()> {
        match (&self.events, self.show_events) {
            (Some(events), true) => {
                writeln!(
                    out,
                    "{:<10} {:<40} {:<28} {:>8}  ORIGIN",
                    "LOG", "IDENTITY", "NAME", "MATCHED"
                )?;
                for e in events {
                    let identity = match &e.ring {
                        Some(r) => format!("{} in {r}", e.identity),
                        None => e.identity.clone(),
                    };
                    writeln!(
                        out,
                        "{:<10} {identity:<40} {:<28} {:>8}  {}",
                        e.log, e.name, e.matched.0, e.origin
                    )?;
                }
            }
            _ => {
                writeln!(
                    out,
                    "{:<10} {:>8} {:>8}  FILE",
                    "SYNTAX", "SCHEMATA", "MATCHED"
                )?;
                for f in &self.files {
                    writeln!(
                        out,
                        "{:<10} {:>8} {:>8}  {}",
                        f.syntax, f.schemata, f.matched.0, f.file
                    )?;
                }
            }
        }
        if self.conflicts.0 > 0 {
            let line = format!(
                "{} events are claimed by two schemata; neither is used for them",
                self.conflicts.0
            );
            writeln!(out, "{}", paint.bad(line))?;
        }
        for r in &self.refused {
            writeln!(out, "{}", paint.bad(format!("refused: {r}")))?;
        }
        for u in &self.unread {
            writeln!(out, "{u}")?;
        }
        Ok(())
    }
}
