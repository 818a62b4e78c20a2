//! `plugins`: the log decoders kcrash is built with, and which of their logs the dump holds.

use anyhow::Result;
use clap::Parser;
use kcrash_plugin::Missing;
use serde::Serialize;

use super::{Context, Flow};
use crate::escape::escaped;
use crate::paint::Paint;
use crate::plugins::DECODERS;
use crate::report::{self, Report};

/// List the log decoders and look for each one's log in the dump.
///
/// Each decoder's command prints its log (help CMD); `timeline` merges them all.
#[derive(Parser, Debug)]
#[command(name = "plugins", no_binary_name = true, disable_version_flag = true)]
pub struct Args {
    /// A JSON document instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Plugins {
    decoders: Vec<Plugin>,
}

#[derive(Serialize)]
struct Plugin {
    kind: &'static str,
    command: &'static str,
    summary: &'static str,
    /// `found`, `absent` (no sign of the log) or `refused` (there, but unreadable).
    state: &'static str,
    /// For a found log, its rings; otherwise why it was not found.
    rings: Option<usize>,
    why: Option<String>,
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(argv)?;
    let decoders = DECODERS
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let (state, rings, why) = match cx.session.log(i) {
                Ok(log) => ("found", Some(log.rings().len()), None),
                Err(Missing::Absent(why)) => ("absent", None, Some(escaped(why.as_bytes()))),
                Err(Missing::Refused(why)) => ("refused", None, Some(escaped(why.as_bytes()))),
            };
            Plugin {
                kind: d.kind(),
                command: d.command(),
                summary: d.summary(),
                state,
                rings,
                why,
            }
        })
        .collect();
    report::document(&Plugins { decoders }, args.json, cx.out, cx.paint)?;
    Ok(Flow::Continue)
}

impl Report for Plugins {
    fn text(&self, out: &mut dyn std::io::Write, paint: Paint) -> std::io::Result<()> {
        writeln!(out, "{:<10} {:<10} IN THIS DUMP", "LOG", "COMMAND")?;
        for p in &self.decoders {
            let found = match (p.rings, &p.why) {
                (Some(n), _) => format!("found: {n} ring(s)"),
                (None, Some(why)) if p.state == "refused" => paint.bad(format!("refused: {why}")),
                (None, Some(why)) => format!("absent: {why}"),
                (None, None) => String::new(),
            };
            writeln!(
                out,
                "{:<10} {:<10} {found}",
                p.kind,
                paint.strong(p.command)
            )?;
            writeln!(out, "{:<10} {}", "", p.summary)?;
        }
        Ok(())
    }
}
