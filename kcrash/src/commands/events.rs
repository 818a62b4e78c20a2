//! The command of every decoder with no command of its own (`klogger`, `tracelog`, `dplog`):
//! the log's events, every ring merged by time, newest first, with `klog`'s options; `-s` for
//! its rings.

use anyhow::Result;
use clap::Parser;
use kcrash_plugin::Decoder;

use super::{Context, Flow};
use crate::event_view::Rings;
use crate::export::{self, Exports};
use crate::report;
use crate::timeline::{self, Select};

/// Print a log that one of kcrash's decoders reads, as it was at the crash.
///
/// Every ring merged by time, most recent first. Times are seconds when the dump gives the log's
/// clock rate, else ticks.
#[derive(Parser, Debug)]
#[command(no_binary_name = true, disable_version_flag = true)]
#[command(
    after_help = "Examples:\n  CMD -n 20\n  CMD --cpu 1 --since 2.5\n  CMD -g 'fault|lost'\n  CMD -s\n  CMD --json | jq .name\n  CMD --perfetto trace.pftrace --lanes cpu"
)]
pub struct Args {
    #[command(flatten)]
    select: Select,
    #[command(flatten)]
    exports: Exports,
    /// A table of the rings: capacity, written, overwritten and lost events (with --json, a
    /// JSON document).
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
    let log = cx.session.log(crate::plugins::index_of(decoder))?;
    if args.summary {
        report::document(&Rings::new(log), args.select.json, cx.out, cx.paint)?;
    } else if args.exports.any() {
        let (session, select) = (cx.session, &args.select);
        export::run(&args.exports, &[log], session, select, None, cx.out, cx.err)?;
    } else {
        timeline::print(
            &[log],
            cx.session,
            &args.select,
            None,
            cx.out,
            cx.err,
            cx.paint,
        )?;
    }
    Ok(Flow::Continue)
}
