//! `rd`: memory as crash shows it — hex units with their address and an ASCII column, symbols
//! (`-s`), strings (`-a`), virtual or physical (`-p`). Unreadable memory is marked and the rest
//! still printed.

use std::io::Write as _;

use anyhow::{bail, Result};
use clap::Parser;
use serde::Serialize;

use super::args::{self, address, number};
use super::{Context, Flow};
use crate::interrupt;
use crate::memory::Memory;
use crate::report::{self, Hex};
use crate::session::Session;
use crate::symbolize::describe;

/// Display memory: COUNT units (default 1) from ADDR, a hex address or a symbol (SYMBOL+OFF).
///
/// Each line: the address, the units in hex, and the bytes as ASCII ('.' for the rest). The unit
/// is 64 bits unless -8, -16 or -32 is given. Memory the dump does not hold prints as
/// `<unreadable: reason>` (one line for a whole unreadable run) or as `?` digits within a line.
#[derive(Parser, Debug)]
#[command(name = "rd", no_binary_name = true, disable_version_flag = true)]
#[command(
    after_help = "Examples:\n  rd KLogs 16\n  rd -32 ffffffff80118040 8\n  rd -s KLogs 10\n  rd -a 0xffffffff8010d109\n  rd -p 0x100000 4\n  rd -64 KLogBuffer 8 --json"
)]
pub struct Args {
    /// A hex address (with or without 0x), a symbol, or SYMBOL+OFFSET.
    #[arg(value_name = "ADDR|SYMBOL", allow_hyphen_values = false)]
    address: String,
    /// How many units (bytes with -a).
    #[arg(value_name = "COUNT", value_parser = number)]
    count: Option<u64>,
    /// ADDR is a physical address.
    #[arg(short = 'p')]
    physical: bool,
    /// Unit size in bits; also written -8, -16, -32, -64.
    #[arg(long = "bits", value_name = "BITS", value_parser = ["8", "16", "32", "64"], default_value = "64")]
    bits: String,
    /// Show 64-bit units that point into a symbol as SYMBOL+OFFSET.
    #[arg(short = 's')]
    symbols: bool,
    /// Show the memory as a string (up to the NUL, or COUNT bytes).
    #[arg(short = 'a')]
    ascii: bool,
    /// One JSON object per unit (or per string).
    #[arg(long)]
    json: bool,
}

/// Bytes per line, as crash has it.
const LINE: u64 = 16;
/// Bytes read at once: a page of lines.
const CHUNK: u64 = 4096;
/// `-a` without COUNT stops at 4 KiB when no NUL came.
const STRING_MAX: u64 = 4096;
/// `-a` prints this many source bytes per line.
const STRING_LINE: usize = 60;

/// Virtual (through the session) or physical (straight from the dump) memory.
enum Space<'a, 'd> {
    Virtual(&'a Session<'d>),
    Physical(&'a dumpfmt::Dump),
}

impl Space<'_, '_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), String> {
        match self {
            Space::Virtual(s) => s.read(addr, buf).map_err(|e| e.reason),
            Space::Physical(d) => d.read_phys(addr, buf).map_err(|e| match e {
                dumpfmt::Error::Phys { reason, .. } => reason.to_string(),
                other => other.to_string(),
            }),
        }
    }
}

/// `-8` … `-64` as clap cannot take them: rewritten to `--bits N`.
fn normalise(argv: &[String]) -> Vec<String> {
    argv.iter()
        .map(|a| match a.as_str() {
            "-8" | "-16" | "-32" | "-64" => format!("--bits={}", &a[1..]),
            _ => a.clone(),
        })
        .collect()
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(normalise(argv))?;
    let start = if args.physical {
        args::hex(&args.address)
            .ok_or_else(|| anyhow::anyhow!("{}: not a hex physical address", args.address))?
    } else {
        address(cx.session, &args.address)?
    };
    let space = if args.physical {
        Space::Physical(cx.session.dump)
    } else {
        Space::Virtual(cx.session)
    };
    if args.ascii {
        string(cx, &space, start, args.count, args.json)?;
        return Ok(Flow::Continue);
    }
    let size: u64 = match args.bits.as_str() {
        "8" => 1,
        "16" => 2,
        "32" => 4,
        _ => 8,
    };
    if args.symbols && size != 8 {
        bail!("-s shows 64-bit units only");
    }
    let count = args.count.unwrap_or(1);
    let bytes = count
        .checked_mul(size)
        .filter(|&b| b == 0 || start.checked_add(b - 1).is_some())
        .ok_or_else(|| {
            anyhow::anyhow!("{count} × {size} bytes from {start:#x} run past the end of memory")
        })?;
    let mut dump = Dumper {
        space: &space,
        size,
        symbols: args.symbols && !args.physical,
        json: args.json,
        unreadable: None,
        missing: 0,
        line: Vec::new(),
    };
    // A page's worth of lines is read at once; a chunk that fails is read line by line.
    let mut chunk = vec![0u8; CHUNK as usize];
    let mut at = 0;
    while at < bytes {
        interrupt::check()?;
        let len = CHUNK.min(bytes - at);
        let buf = &mut chunk[..len as usize];
        let whole = space.read(start + at, buf).is_ok();
        for line in 0..len.div_ceil(LINE) {
            let from = line * LINE;
            let n = LINE.min(len - from);
            let addr = start + at + from;
            if whole {
                let mut bytes = [0u8; LINE as usize];
                bytes[..n as usize].copy_from_slice(&buf[from as usize..(from + n) as usize]);
                dump.show(cx, addr, &bytes[..n as usize], &[true; LINE as usize], None)?;
            } else {
                dump.line(cx, addr, n)?;
            }
        }
        at += len;
    }
    dump.flush_unreadable(cx, start.wrapping_add(bytes))?;
    // Everything readable is printed; the status tells a script that not all of it was.
    if dump.missing > 0 {
        bail!(
            "{:#x} of the {bytes:#x} bytes from {start:#x} are unreadable (marked above)",
            dump.missing
        );
    }
    Ok(Flow::Continue)
}

/// One line of `rd --json`.
#[derive(Serialize)]
#[serde(untagged)]
enum Item {
    /// A unit that was read.
    Unit {
        address: Hex,
        size: usize,
        value: Hex,
        /// `-s`: where the value points.
        symbol: Option<String>,
    },
    /// A unit that could not be read, in a line with others that could.
    UnreadableUnit {
        address: Hex,
        size: usize,
        unreadable: String,
    },
    /// A run of unreadable memory, `address` to `end`, for one reason.
    Unreadable {
        address: Hex,
        end: Hex,
        unreadable: String,
    },
    /// `rd -a`.
    String {
        address: Hex,
        string: String,
        bytes: usize,
        terminated: bool,
        unreadable: Option<StringEnd>,
    },
}

/// Where `rd -a` stopped for unreadable memory.
#[derive(Serialize)]
struct StringEnd {
    address: Hex,
    reason: String,
}

struct Dumper<'s, 'a, 'd> {
    space: &'s Space<'a, 'd>,
    size: u64,
    symbols: bool,
    json: bool,
    /// A run of wholly unreadable lines not yet printed: its start and the reason.
    unreadable: Option<(u64, String)>,
    /// Bytes asked for that could not be read.
    missing: u64,
    /// The line being built, kept for its allocation.
    line: Vec<u8>,
}

/// Appends `value` as `digits` lower-case hex digits, zero-padded.
fn hex(out: &mut Vec<u8>, value: u64, digits: usize) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for i in (0..digits).rev() {
        out.push(DIGITS[((value >> (4 * i)) & 0xf) as usize]);
    }
}

impl Dumper<'_, '_, '_> {
    /// One line of `len` bytes at `addr`: read whole, or unit by unit when that fails.
    fn line(&mut self, cx: &mut Context<'_, '_>, addr: u64, len: u64) -> Result<()> {
        let mut buf = [0u8; LINE as usize];
        let buf = &mut buf[..len as usize];
        let mut readable = [true; LINE as usize];
        let mut reason = None;
        if let Err(why) = self.space.read(addr, buf) {
            for (i, chunk) in buf.chunks_mut(self.size as usize).enumerate() {
                if let Err(why) = self.space.read(addr + i as u64 * self.size, chunk) {
                    readable[i] = false;
                    reason.get_or_insert(why);
                }
            }
            reason.get_or_insert(why);
        }
        let units = (len / self.size) as usize;
        self.missing += readable[..units].iter().filter(|r| !**r).count() as u64 * self.size;
        if readable[..units].iter().all(|r| !r) {
            let reason = reason.unwrap_or_default();
            match &self.unreadable {
                Some((_, r)) if *r == reason => {}
                _ => {
                    self.flush_unreadable(cx, addr)?;
                    self.unreadable = Some((addr, reason));
                }
            }
            return Ok(());
        }
        self.show(cx, addr, buf, &readable, reason.as_deref())
    }

    /// Prints one line of `buf` at `addr`; `readable[i]` says whether unit i was read.
    fn show(
        &mut self,
        cx: &mut Context<'_, '_>,
        addr: u64,
        buf: &[u8],
        readable: &[bool],
        reason: Option<&str>,
    ) -> Result<()> {
        self.flush_unreadable(cx, addr)?;
        let size = self.size as usize;
        let units = buf.chunks(size).zip(readable).map(|(b, &ok)| {
            ok.then(|| {
                let mut word = [0u8; 8];
                word[..b.len()].copy_from_slice(b);
                u64::from_le_bytes(word)
            })
        });
        if self.json {
            for (i, v) in units.enumerate() {
                let at = addr + (i * size) as u64;
                let item = match v {
                    Some(v) => Item::Unit {
                        address: Hex(at),
                        size,
                        value: Hex(v),
                        symbol: self.symbol(cx, v),
                    },
                    None => Item::UnreadableUnit {
                        address: Hex(at),
                        size,
                        unreadable: reason.unwrap_or("").to_owned(),
                    },
                };
                report::json_line(&item, cx.out)?;
            }
            return Ok(());
        }
        // The line is built in memory and written once: many small writes through the output's
        // layers cost more than the formatting.
        let width = 2 * size;
        let paint = cx.paint;
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        if paint.on {
            write!(line, "{}:  ", paint.addr(format_args!("{addr:016x}")))?;
        } else {
            hex(&mut line, addr, 16);
            line.extend_from_slice(b":  ");
        }
        let mut shown = 0;
        for (i, v) in units.enumerate() {
            if i > 0 {
                line.push(b' ');
            }
            match (v, v.and_then(|v| self.symbol(cx, v))) {
                (_, Some(name)) => write!(line, "{name:<width$}")?,
                (Some(v), None) => hex(&mut line, v, width),
                (None, None) => write!(line, "{}", paint.bad("?".repeat(width)))?,
            }
            shown += 1;
        }
        if !self.symbols {
            let pad = ((LINE as usize / size) - shown) * (width + 1) + 3;
            line.resize(line.len() + pad, b' ');
            for (i, &c) in buf.iter().enumerate() {
                line.push(match c {
                    _ if !readable[i / size] => b' ',
                    0x20..=0x7e => c,
                    _ => b'.',
                });
            }
        }
        if let Some(reason) = reason {
            write!(
                line,
                "  {}",
                paint.bad(format_args!("<unreadable: {reason}>"))
            )?;
        }
        line.push(b'\n');
        let written = cx.out.write_all(&line);
        self.line = line;
        written?;
        Ok(())
    }

    /// `name+off` for a 64-bit unit in `-s` mode when it points into a symbol.
    fn symbol(&self, cx: &Context<'_, '_>, value: u64) -> Option<String> {
        if !self.symbols {
            return None;
        }
        describe(cx.session.image.as_ref()?, value)
    }

    /// Prints the pending unreadable run, which ends at `end`.
    fn flush_unreadable(&mut self, cx: &mut Context<'_, '_>, end: u64) -> Result<()> {
        let Some((start, reason)) = self.unreadable.take() else {
            return Ok(());
        };
        if self.json {
            let gap = Item::Unreadable {
                address: Hex(start),
                end: Hex(end),
                unreadable: reason,
            };
            report::json_line(&gap, cx.out)?;
            return Ok(());
        }
        let mark = format!(
            "<unreadable {:#x} bytes: {reason}>",
            end.wrapping_sub(start)
        );
        writeln!(
            cx.out,
            "{}:  {}",
            cx.paint.addr(format_args!("{start:016x}")),
            cx.paint.bad(mark)
        )?;
        Ok(())
    }
}

/// `rd -a`: the string at `start`, up to its NUL or `count` bytes, 60 to a line.
fn string(
    cx: &mut Context<'_, '_>,
    space: &Space<'_, '_>,
    start: u64,
    count: Option<u64>,
    json: bool,
) -> Result<()> {
    let max = count.unwrap_or(STRING_MAX);
    let mut bytes = Vec::new();
    let mut failure = None;
    let mut terminated = false;
    let mut at = start;
    while (bytes.len() as u64) < max {
        interrupt::check()?;
        let page_left = 0x1000 - (at & 0xfff);
        let want = page_left.min(max - bytes.len() as u64) as usize;
        let mut chunk = vec![0u8; want];
        if let Err(why) = space.read(at, &mut chunk) {
            failure = Some((at, why));
            break;
        }
        if let Some(nul) = chunk.iter().position(|&b| b == 0) {
            bytes.extend_from_slice(&chunk[..nul]);
            terminated = true;
            break;
        }
        bytes.extend_from_slice(&chunk);
        at = at.wrapping_add(want as u64);
    }
    let stopped_at = failure.as_ref().map(|(at, _)| *at);
    if json {
        let item = Item::String {
            address: Hex(start),
            string: crate::escape::escaped(&bytes),
            bytes: bytes.len(),
            terminated,
            unreadable: failure.map(|(a, reason)| StringEnd {
                address: Hex(a),
                reason,
            }),
        };
        report::json_line(&item, cx.out)?;
    } else {
        for (i, piece) in bytes.chunks(STRING_LINE).enumerate() {
            let addr = start.wrapping_add((i * STRING_LINE) as u64);
            writeln!(
                cx.out,
                "{}:  {}",
                cx.paint.addr(format_args!("{addr:016x}")),
                crate::escape::escaped(piece)
            )?;
        }
        if let Some((addr, why)) = failure {
            writeln!(
                cx.out,
                "{}:  {}",
                cx.paint.addr(format_args!("{addr:016x}")),
                cx.paint.bad(format_args!("<unreadable: {why}>"))
            )?;
        } else if bytes.is_empty() {
            // A NUL first (or COUNT 0): an empty string, said, not a blank.
            writeln!(
                cx.out,
                "{}:  <empty string>",
                cx.paint.addr(format_args!("{start:016x}"))
            )?;
        }
    }
    // What could be read is printed; the status tells a script that the rest could not be.
    match stopped_at {
        Some(at) => bail!("the string at {start:#x} is unreadable from {at:#x} on (marked above)"),
        None => Ok(()),
    }
}
