//! The DProbes scenarios' oracle — `DPROBES-` lines, printed by tests/kernels/dprobes-writer
//! for every record it commits — what it implies for each processor's trace buffer, and the
//! comparison of kcrash's `dplog --json` output with it.
//!
//! ```text
//! DPROBES-CONFIG cpus=1 tsc_hz=2299969032
//! DPROBES-BUFFER cpu=0 addr=0x.. data=0x.. size=8192
//! DPROBES-EVENT cpu=0 seq=0x78 len=112 ticks=0x.. name=read field=flags:x:0x7ff field=fd:u:3 field=buf:b:6b6c field=path:f:0x..:faulted\u{20}read\u{20}(flat\u{20}address) msg=..
//! DPROBES-LOST cpu=0 bytes=9000
//! DPROBES-DAMAGE cpu=0 field=tail value=0x..
//! ```
//!
//! A field is `NAME:TYPE:VALUE`, TYPE one of u (unsigned, decimal), s (signed), x (hex), t
//! (text, escaped as `fmt=` is), b (bytes in hex) and f (a faulted read: `ADDR:REASON`). The
//! surviving records are what the writer's overwrite rule leaves: a record of `len` bytes at
//! `seq` drops the oldest records until the buffer's `size` holds it.

use anyhow::{anyhow, bail, Context, Result};
use kcrash::escape::escaped;
use kcrash::regress::manifest::{Check, Compare};
use serde_json::Value as Json;
use std::collections::{BTreeMap, VecDeque};

use crate::oracle::unescape;

/// The DProbes scenarios, run by the bare kernel and the hosted program alike.
pub const SCENARIOS: [&str; 4] = [
    "dprobes-plain",
    "dprobes-wrap",
    "dprobes-faults",
    "dprobes-damaged",
];

/// The commands `kcrash regress` runs on every dump of a DProbes entry (`KERNEL/SCENARIO`),
/// with their expected outputs under its `regress/`; `None` for another entry.
pub fn checks(entry: &str) -> Option<Vec<Check>> {
    let scenario = entry.rsplit('/').next()?;
    if !SCENARIOS.contains(&scenario) {
        return None;
    }
    let all = [
        ("dplog -s", "dplog-s.txt", Compare::Text),
        ("dplog -s --json", "dplog-s.json", Compare::Json),
        ("dplog --reverse", "dplog.txt", Compare::Text),
        ("dplog --json -n 16", "dplog-newest16.json", Compare::Json),
    ];
    Some(
        all.into_iter()
            .map(|(command, file, compare)| Check {
                command: command.to_string(),
                expect: format!("{entry}/regress/{file}"),
                compare,
                replace: Vec::new(),
            })
            .collect(),
    )
}

/// A field's value as the oracle gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    Unsigned(u64),
    Signed(i64),
    Hex(u64),
    Text(Vec<u8>),
    Bytes(Vec<u8>),
    Unreadable { addr: u64, reason: String },
}

/// One record the kernel committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub seq: u64,
    pub len: u64,
    pub ticks: u64,
    pub name: String,
    pub fields: Vec<(String, Val)>,
    pub msg: String,
}

/// One processor's trace buffer as the oracle leaves it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Buffer {
    pub cpu: u32,
    pub addr: u64,
    pub size: u64,
    pub written: u64,
    pub overwritten: u64,
    pub lost: u64,
    /// The records still in the buffer, oldest first.
    pub events: VecDeque<Event>,
    /// Control fields the kernel scribbled on, with the value written.
    pub scribbled: Vec<(String, u64)>,
}

/// Every buffer of a DProbes scenario.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expected {
    pub tsc_hz: u64,
    pub buffers: BTreeMap<u32, Buffer>,
}

impl Expected {
    /// Every record still in a buffer.
    pub fn events(&self) -> usize {
        self.buffers.values().map(|b| b.events.len()).sum()
    }
}

/// A line's `key=value` words, in order.
type Words<'a> = Vec<(&'a str, &'a str)>;

/// A line's words, and its `msg=` (the rest of the line), if any.
fn words(rest: &str) -> Result<(Words<'_>, Option<String>)> {
    let mut out = Vec::new();
    let mut rest = rest;
    while !rest.is_empty() {
        if let Some(msg) = rest.strip_prefix("msg=") {
            return Ok((out, Some(unescape(msg)?)));
        }
        let (word, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        let (key, value) = word
            .split_once('=')
            .ok_or_else(|| anyhow!("word {word:?} has no '='"))?;
        out.push((key, value));
        rest = tail;
    }
    Ok((out, None))
}

fn number(text: &str) -> Result<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    }
    .with_context(|| format!("{text:?} is not a number"))
}

fn get<'a>(words: &[(&str, &'a str)], key: &str) -> Result<&'a str> {
    words
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| *v)
        .ok_or_else(|| anyhow!("no {key}="))
}

/// Text the oracle escaped, back to the bytes it was: every char below 0x100 is one byte.
fn text_bytes(escaped: &str) -> Result<Vec<u8>> {
    unescape(escaped)?
        .chars()
        .map(|c| u8::try_from(u32::from(c)).map_err(|_| anyhow!("{c:?} is not a byte")))
        .collect()
}

fn field(spec: &str) -> Result<(String, Val)> {
    let mut parts = spec.splitn(3, ':');
    let (Some(name), Some(kind), Some(value)) = (parts.next(), parts.next(), parts.next()) else {
        bail!("field {spec:?} is not NAME:TYPE:VALUE");
    };
    let val = match kind {
        "u" => Val::Unsigned(number(value)?),
        "s" => Val::Signed(value.parse().with_context(|| format!("{value:?}"))?),
        "x" => Val::Hex(number(value)?),
        "t" => Val::Text(text_bytes(value)?),
        "b" => Val::Bytes(
            (0..value.len() / 2)
                .map(|i| u8::from_str_radix(&value[2 * i..2 * i + 2], 16))
                .collect::<Result<_, _>>()
                .with_context(|| format!("bytes {value:?}"))?,
        ),
        "f" => {
            let (addr, reason) = value
                .split_once(':')
                .ok_or_else(|| anyhow!("fault {value:?} is not ADDR:REASON"))?;
            Val::Unreadable {
                addr: number(addr)?,
                reason: unescape(reason)?,
            }
        }
        other => bail!("unknown field type {other:?}"),
    };
    Ok((name.to_string(), val))
}

/// What the `DPROBES-` lines of a console log imply; an error if they contradict themselves
/// (a record not where the last one ended, a buffer never declared).
pub fn derive(console: &str) -> Result<Expected> {
    let mut expected = Expected::default();
    for (index, line) in console.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let Some((tag, rest)) = line.split_once(' ') else {
            continue;
        };
        if !tag.starts_with("DPROBES-") {
            continue;
        }
        apply(&mut expected, tag, rest)
            .with_context(|| format!("console line {}: {line}", index + 1))?;
    }
    Ok(expected)
}

/// [`derive`] of a console log file.
pub fn derive_file(console: &std::path::Path) -> Result<Expected> {
    let text = std::fs::read_to_string(console)
        .with_context(|| format!("reading {}", console.display()))?;
    derive(&text).with_context(|| format!("the DProbes oracle of {}", console.display()))
}

fn apply(expected: &mut Expected, tag: &str, rest: &str) -> Result<()> {
    let (words, msg) = words(rest)?;
    if tag == "DPROBES-CONFIG" {
        expected.tsc_hz = number(get(&words, "tsc_hz")?)?;
        return Ok(());
    }
    let cpu = u32::try_from(number(get(&words, "cpu")?)?)?;
    if tag == "DPROBES-BUFFER" {
        let buffer = Buffer {
            cpu,
            addr: number(get(&words, "addr")?)?,
            size: number(get(&words, "size")?)?,
            ..Buffer::default()
        };
        expected.buffers.insert(cpu, buffer);
        return Ok(());
    }
    let b = expected
        .buffers
        .get_mut(&cpu)
        .ok_or_else(|| anyhow!("processor {cpu} has no DPROBES-BUFFER line before it"))?;
    match tag {
        "DPROBES-EVENT" => {
            let event = Event {
                seq: number(get(&words, "seq")?)?,
                len: number(get(&words, "len")?)?,
                ticks: number(get(&words, "ticks")?)?,
                name: unescape(get(&words, "name")?)?,
                fields: words
                    .iter()
                    .filter(|(k, _)| *k == "field")
                    .map(|(_, v)| field(v))
                    .collect::<Result<_>>()?,
                msg: msg.ok_or_else(|| anyhow!("no msg="))?,
            };
            let head = b.events.back().map_or(0, |e| e.seq + e.len);
            if event.seq != head || event.len > b.size {
                bail!(
                    "record at {:#x} of {} bytes: the last one ended at {head:#x}",
                    event.seq,
                    event.len
                );
            }
            let end = event.seq + event.len;
            while b.events.front().is_some_and(|old| end - old.seq > b.size) {
                b.events.pop_front();
                b.overwritten += 1;
            }
            b.written += 1;
            b.events.push_back(event);
        }
        "DPROBES-LOST" => b.lost += 1,
        "DPROBES-DAMAGE" => {
            let field = get(&words, "field")?.to_string();
            b.scribbled.push((field, number(get(&words, "value")?)?));
        }
        other => bail!("unknown oracle line {other}"),
    }
    Ok(())
}

fn json_str<'a>(v: &'a Json, key: &str) -> Result<&'a str> {
    v.get(key)
        .and_then(Json::as_str)
        .ok_or_else(|| anyhow!("no string {key:?} in {v}"))
}

fn json_num(v: &Json, key: &str) -> Result<u64> {
    number(json_str(v, key)?)
}

/// The JSON of one field, as kcrash writes it, for `val`.
fn field_matches(json: &Json, name: &str, val: &Val) -> Result<()> {
    if json_str(json, "name")? != escaped(name.as_bytes()) {
        bail!("field {json}: the oracle's is {name}");
    }
    let kind = json_str(json, "type")?;
    let ok = match val {
        Val::Unsigned(n) => kind == "unsigned" && json_num(json, "value")? == *n,
        Val::Hex(n) => kind == "hex" && json_num(json, "value")? == *n,
        Val::Signed(n) => kind == "signed" && json_str(json, "value")?.parse::<i64>()? == *n,
        Val::Text(t) => kind == "text" && json_str(json, "value")? == escaped(t),
        Val::Bytes(b) => {
            let hex: String = b.iter().map(|b| format!("{b:02x}")).collect();
            kind == "bytes" && json_str(json, "value")? == hex
        }
        Val::Unreadable { addr, reason } => {
            kind == "unreadable"
                && json_num(json, "addr")? == *addr
                && json_str(json, "reason")? == reason
        }
    };
    if !ok {
        bail!("field {json}: the oracle says {val:?}");
    }
    Ok(())
}

/// Compares `dplog --json --reverse` output (one JSON object per line, oldest first within
/// each buffer) with the oracle: every surviving record, in order, with its time, place, name,
/// every field and the message; no damage but the gap a scribbled `tail` leaves before the
/// oldest record. Returns the number of events compared.
pub fn compare_events(expected: &Expected, lines: &[Json]) -> Result<usize> {
    let mut by_ring: BTreeMap<u32, Vec<&Json>> = BTreeMap::new();
    for line in lines {
        if json_str(line, "log")? != "DProbes" {
            continue;
        }
        let cpu = line
            .get("processor")
            .and_then(Json::as_u64)
            .ok_or_else(|| anyhow!("no processor in {line}"))?;
        by_ring.entry(u32::try_from(cpu)?).or_default().push(line);
    }
    let mut compared = 0;
    for (cpu, b) in &expected.buffers {
        let got = by_ring.remove(cpu).unwrap_or_default();
        if got.len() != b.events.len() {
            bail!(
                "cpu{cpu}: {} events, the oracle leaves {} records",
                got.len(),
                b.events.len()
            );
        }
        let tail_scribbled = b.scribbled.iter().any(|(f, _)| f == "tail");
        for (i, (json, want)) in got.iter().zip(&b.events).enumerate() {
            compare_event(json, want, i == 0 && tail_scribbled)
                .with_context(|| format!("cpu{cpu} record at {:#x}", want.seq))?;
            compared += 1;
        }
    }
    if let Some((cpu, _)) = by_ring.into_iter().next() {
        bail!("events of cpu{cpu}, which the oracle has no buffer for");
    }
    Ok(compared)
}

fn compare_event(json: &Json, want: &Event, gap_allowed: bool) -> Result<()> {
    let seq = json_num(json, "seq")?;
    let ticks = json_num(json, "ticks")?;
    let name = json_str(json, "name")?;
    if (seq, ticks) != (want.seq, want.ticks) || name != escaped(want.name.as_bytes()) {
        bail!(
            "seq {seq:#x} ticks {ticks:#x} name {name}: the oracle says seq {:#x} ticks {:#x} \
             name {}",
            want.seq,
            want.ticks,
            want.name
        );
    }
    let fields = json
        .get("fields")
        .and_then(Json::as_array)
        .ok_or_else(|| anyhow!("no fields"))?;
    if fields.len() != want.fields.len() {
        bail!(
            "{} fields, the oracle has {}",
            fields.len(),
            want.fields.len()
        );
    }
    for (f, (name, val)) in fields.iter().zip(&want.fields) {
        field_matches(f, name, val)?;
    }
    compare_named(json, want)?;
    let message = json_str(json, "message")?;
    let msg = want.msg.strip_suffix('\n').unwrap_or(&want.msg);
    if message != escaped(msg.as_bytes()) {
        bail!("message {message:?}, the oracle's is {msg:?}");
    }
    let damage = json
        .get("damage")
        .and_then(Json::as_array)
        .ok_or_else(|| anyhow!("no damage"))?;
    let expected_gap = |d: &Json| gap_allowed && json_str(d, "kind").ok() == Some("inconsistent");
    if let Some(d) = damage.iter().find(|d| !expected_gap(d)) {
        bail!("damage {d}, the record is whole");
    }
    Ok(())
}

/// The record as the shipped templates read it: every named field the oracle has a value for
/// holds that value (a number as a number, whatever type the template gives it; an unreadable
/// one at the oracle's address). Records of a code no template names have no `schema`.
fn compare_named(json: &Json, want: &Event) -> Result<()> {
    let Some(named) = json.get("schema").and_then(|s| s["fields"].as_array()) else {
        return Ok(());
    };
    let number = |v: &str| match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok().map(i128::from),
        None => v.parse::<i128>().ok(),
    };
    for f in named {
        let name = json_str(f, "name")?;
        let Some((_, val)) = want
            .fields
            .iter()
            .find(|(n, _)| escaped(n.as_bytes()) == name)
        else {
            continue;
        };
        let value = f["value"].as_str().unwrap_or_default();
        let ok = match val {
            Val::Unsigned(n) | Val::Hex(n) => number(value) == Some(i128::from(*n)),
            Val::Signed(n) => number(value) == Some(i128::from(*n)),
            Val::Text(t) => value == escaped(t),
            // No schema type reads bytes: a named field the oracle has as bytes is wrong.
            Val::Bytes(_) => false,
            Val::Unreadable { addr, .. } => {
                f["type"] == "unreadable" && json_num(f, "addr")? == *addr
            }
        };
        if !ok {
            bail!("named field {f}: the oracle says {val:?}");
        }
    }
    Ok(())
}

/// Compares `dplog -s --json` with the oracle: each buffer's place, size and counts; a count
/// the kernel scribbled on must be unknown.
pub fn compare_rings(expected: &Expected, rings: &Json) -> Result<()> {
    let hz = json_num(rings, "clock_hz")?;
    if hz != expected.tsc_hz {
        bail!("clock {hz} Hz, the oracle's is {}", expected.tsc_hz);
    }
    let list = rings
        .get("rings")
        .and_then(Json::as_array)
        .ok_or_else(|| anyhow!("no rings"))?;
    if list.len() != expected.buffers.len() {
        bail!(
            "{} rings, the oracle has {}",
            list.len(),
            expected.buffers.len()
        );
    }
    for (ring, b) in list.iter().zip(expected.buffers.values()) {
        let what = format!("ring {}", json_str(ring, "name")?);
        if json_num(ring, "addr")? != b.addr || !ring.get("refused").is_some_and(Json::is_null) {
            bail!("{what}: {ring}, the oracle's buffer is at {:#x}", b.addr);
        }
        let written_scribbled = b.scribbled.iter().any(|(f, _)| f == "written");
        for (key, want) in [
            ("capacity", Some(b.size)),
            ("written", (!written_scribbled).then_some(b.written)),
            ("overwritten", (!written_scribbled).then_some(b.overwritten)),
            ("lost", Some(b.lost)),
        ] {
            let count = ring.get(key).ok_or_else(|| anyhow!("{what}: no {key}"))?;
            let known = count.get("known").and_then(Json::as_str).map(number);
            match (want, known) {
                (Some(n), Some(Ok(k))) if n == k => {}
                (None, None) => {}
                _ => bail!("{what}: {key} {count}, the oracle says {want:?}"),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONSOLE: &str = "\
DPROBES-CONFIG cpus=1 tsc_hz=1000
DPROBES-BUFFER cpu=0 addr=0x100 data=0x200 size=128
DPROBES-EVENT cpu=0 seq=0x0 len=48 ticks=0x5 name=tick field=flags:x:0x203 field=n:u:0 msg=n=0\\n
DPROBES-EVENT cpu=0 seq=0x30 len=48 ticks=0x6 name=a\\u{20}b field=p:t:x\\u{20}y field=q:f:0x28:bad\\u{20}selector msg=n=1
DPROBES-EVENT cpu=0 seq=0x60 len=48 ticks=0x7 name=tick field=b:b:00ff field=s:s:-5 msg=n=2
DPROBES-LOST cpu=0 bytes=4096
";

    #[test]
    fn derives_the_survivors() {
        let e = derive(CONSOLE).unwrap();
        let b = &e.buffers[&0];
        assert_eq!((b.written, b.overwritten, b.lost), (3, 1, 1));
        let seqs: Vec<u64> = b.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [0x30, 0x60]);
        assert_eq!(b.events[0].name, "a b");
        assert_eq!(
            b.events[0].fields[0],
            ("p".into(), Val::Text(b"x y".to_vec()))
        );
        assert_eq!(
            b.events[1].fields,
            [
                ("b".into(), Val::Bytes(vec![0, 0xff])),
                ("s".into(), Val::Signed(-5))
            ]
        );
    }

    #[test]
    fn a_missing_record_is_an_error() {
        let console = CONSOLE.replace("seq=0x60", "seq=0x90");
        assert!(derive(&console).is_err());
    }

    fn event_json(seq: u64, ticks: u64, fields: Json, message: &str) -> Json {
        serde_json::json!({"log": "DProbes", "processor": 0, "seq": seq.to_string(),
            "ticks": ticks.to_string(), "name": "tick", "fields": fields,
            "message": message, "damage": []})
    }

    #[test]
    fn compares_every_field() {
        let console = "DPROBES-CONFIG cpus=1 tsc_hz=1000\n\
            DPROBES-BUFFER cpu=0 addr=0x100 data=0x200 size=128\n\
            DPROBES-EVENT cpu=0 seq=0x0 len=48 ticks=0x5 name=tick field=n:u:7 msg=n=7\\n\n";
        let e = derive(console).unwrap();
        let good = event_json(
            0,
            5,
            serde_json::json!([{"name": "n", "type": "unsigned", "value": "7"}]),
            "n=7",
        );
        assert_eq!(compare_events(&e, &[good]).unwrap(), 1);
        let wrong = event_json(
            0,
            5,
            serde_json::json!([{"name": "n", "type": "unsigned", "value": "8"}]),
            "n=7",
        );
        assert!(compare_events(&e, &[wrong]).is_err());
        assert!(compare_events(&e, &[]).is_err());
    }
}
