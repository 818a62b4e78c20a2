//! `log`: the Linux kernel's printk ring, as crash's `log` and `dmesg` print it.

use anyhow::{anyhow, bail, Result};
use clap::Parser;
use serde::Serialize;

use super::{Context, Flow};
use crate::expr::{parse_expr, Evaluator};
use crate::linux::facts::date;
use crate::linux::printk::{self, Record};
use crate::report::{self, Dec};
use crate::session::Session;

/// The kernel's message log (Linux 5.10+ printk ring), oldest first, one line per line of each
/// message, each prefixed by its time since boot: `[    3.699425] sysrq: Trigger a crash`.
/// Works without vmlinux when the dump has VMCOREINFO (which places the ring); the level
/// (-m) and wall-clock times (-T) need the vmlinux's DWARF.
#[derive(Parser, Debug)]
#[command(name = "log", no_binary_name = true, disable_version_flag = true)]
#[command(after_help = "\
Records the kernel committed but had not finalized (the last one before a panic, still open
for a continuation) are printed, as crash and makedumpfile do; records being written
(reserved) and overwritten ones are not. A continuation (pr_cont) is already part of its
record in this ring.

-T's boot time is the kernel's own: tk_core.timekeeper's offs_real - offs_boot (what
getboottime64 returns), to which each record's time since boot is added.

Examples:
  log | tail -50
  log -T | grep -i 'call trace' -A 20
  log -m | grep '^\\[.*\\] <[0-3]>'
  log --json | jq -r 'select(.level <= 3) | .text'")]
pub struct Args {
    /// No timestamps.
    #[arg(short = 't', conflicts_with = "human")]
    no_time: bool,
    /// Wall-clock timestamps (UTC), from the kernel's boot time.
    #[arg(short = 'T', id = "human")]
    human: bool,
    /// Each message's level, `<N>`, after the timestamp.
    #[arg(short = 'm')]
    level: bool,
    /// One JSON object per record (JSON Lines): sequence number, time since boot, caller and the
    /// whole text; -m adds the level, -T the wall-clock time.
    #[arg(long, conflicts_with = "no_time")]
    json: bool,
}

/// One record of `log --json`.
#[derive(Serialize)]
struct Line {
    seq: u64,
    /// Nanoseconds since boot.
    ts_nsec: Dec,
    /// `-T`: the wall-clock time, as the text shows it.
    time: Option<String>,
    level: Option<u8>,
    /// A task id, or a CPU number with the top bit set.
    caller_id: u32,
    text: String,
}

/// The kernel's boot time in nanoseconds since the epoch: offs_real - offs_boot.
fn boot_time(session: &Session<'_>) -> Result<i128> {
    let image = session
        .image
        .as_ref()
        .ok_or_else(|| anyhow!("-T needs the vmlinux (with DWARF) for the kernel's clock"))?;
    let ev = Evaluator::new(image, session);
    let read = |expr: &str| -> Result<i128> {
        let e = parse_expr(expr).map_err(|e| anyhow!("{}", e.show(expr)))?;
        let (bits, _) = ev.scalar(&ev.eval(&e)?)?;
        Ok(bits as i64 as i128)
    };
    Ok(read("tk_core.timekeeper.offs_real")? - read("tk_core.timekeeper.offs_boot")?)
}

/// `[    3.699425] `, as the kernel's console prints it.
pub fn since_boot(ts_nsec: u64) -> String {
    format!(
        "[{:>5}.{:06}] ",
        ts_nsec / 1_000_000_000,
        ts_nsec % 1_000_000_000 / 1000
    )
}

/// `[Sun Nov 22 04:51:35 UTC 2026] `, as crash's `log -T` prints it.
fn wall(boot_nsec: i128, ts_nsec: u64) -> String {
    format!("[{}] ", date_at(boot_nsec, ts_nsec))
}

/// The date `ts_nsec` after boot.
fn date_at(boot_nsec: i128, ts_nsec: u64) -> String {
    date((boot_nsec + ts_nsec as i128).div_euclid(1_000_000_000) as i64)
}

/// Writes what `buf` holds once it is large: a few big writes, not one per line.
fn flush_if_full(buf: &mut Vec<u8>, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    if buf.len() > 1 << 15 {
        out.write_all(buf)?;
        buf.clear();
    }
    Ok(())
}

/// Writes `text` with control characters other than tab as `\xNN`, as dmesg does.
pub fn escaped(text: &[u8], out: &mut Vec<u8>) {
    for &b in text {
        if b < 0x20 && b != b'\t' || b == 0x7f {
            out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
        } else {
            out.push(b);
        }
    }
}

/// The lines of one record, each with its prefix.
pub fn lines(r: &Record, prefix: &str, out: &mut Vec<u8>) {
    for line in r.text.split(|&b| b == b'\n') {
        out.extend_from_slice(prefix.as_bytes());
        escaped(line, out);
        out.push(b'\n');
    }
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(argv)?;
    let session = cx.session;
    let info = session.dump.vmcoreinfo()?;
    let ring = printk::find(info.as_ref(), session.image.as_deref(), session, args.level)?;
    let boot = if args.human {
        Some(boot_time(cx.session)?)
    } else {
        None
    };
    let mut buf = Vec::with_capacity(1 << 16);
    for r in ring.records() {
        crate::interrupt::check()?;
        if args.json {
            let line = Line {
                seq: r.seq,
                ts_nsec: Dec(r.ts_nsec.into()),
                time: boot.map(|boot| date_at(boot, r.ts_nsec)),
                level: r.level,
                caller_id: r.caller_id,
                text: String::from_utf8_lossy(&r.text).into_owned(),
            };
            report::json_line(&line, &mut buf)?;
            flush_if_full(&mut buf, cx.out)?;
            continue;
        }
        let mut prefix = match boot {
            _ if args.no_time => String::new(),
            Some(boot) => wall(boot, r.ts_nsec),
            None => since_boot(r.ts_nsec),
        };
        if args.level {
            match r.level {
                Some(level) => prefix.push_str(&format!("<{level}>")),
                None => bail!("-m needs the vmlinux's DWARF: VMCOREINFO does not place the level"),
            }
        }
        lines(&r, &prefix, &mut buf);
        flush_if_full(&mut buf, cx.out)?;
    }
    cx.out.write_all(&buf)?;
    Ok(Flow::Continue)
}
