//! The QNX trace ring's corpus entries: qnx-writer's scenarios on the bare kernel (`bare-qnx`)
//! and the hosted program (`hosted-qnx`), their oracle (the `QNX-` lines), the expected
//! result it implies, and the check that kcrash's `tracelog --json` gives every event the
//! oracle says the ring holds, in order, field by field, on every dump.
//!
//! ```text
//! QNX-CONFIG elements=64 buffers=4 cycles_per_sec=N head=0x.. syspage=0x..
//! QNX-EVENT seq=S time=T cpu=C name=N parts=S,S.. payload=HEX [unfinished=1] f.NAME=TYPE:VALUE..
//! QNX-DAMAGE buffer=B at=0x.. field=next value=0x..
//! ```

use std::path::Path;

use anyhow::{anyhow, bail, ensure, Context, Result};
use kcrash::regress::manifest::{Check, Compare, Entry};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::oracle::{Line, PANIC_PREFIX};

/// The scenario also taken with gdb's gcore.
pub const GCORE_SCENARIO: &str = "qnx-combine";

/// What `kcrash regress` runs on every dump of a QNX entry.
pub fn checks(entry: &str) -> Vec<Check> {
    [
        ("tracelog -s", "tracelog-s.txt", Compare::Text),
        ("tracelog -s --json", "tracelog-s.json", Compare::Json),
        ("tracelog --reverse", "tracelog.txt", Compare::Text),
        (
            "tracelog --json -n 24",
            "tracelog-newest24.json",
            Compare::Json,
        ),
    ]
    .into_iter()
    .map(|(command, file, compare)| Check {
        command: command.to_string(),
        expect: format!("{entry}/regress/{file}"),
        compare,
        replace: Vec::new(),
    })
    .collect()
}

/// What a reader of one QNX crash's dumps must report: `expected.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expected {
    pub version: u32,
    pub cycles_per_sec: u64,
    pub panic: String,
    /// Traceevents per buffer and buffers in the ring.
    pub elements: u64,
    pub buffers: u64,
    /// Traceevents ever written (the newest sequence number + 1).
    pub written: u64,
    /// Traceevents still in the buffers a reader reaches.
    pub held: u64,
    /// The `next` pointers the kernel scribbled over: buffer index and value. The buffers
    /// after the first one are out of a reader's reach.
    pub scribbled: Vec<(u64, u64)>,
    /// The events a reader finds, oldest first.
    pub events: Vec<Event>,
}

/// One event as kcrash's `tracelog --json` must show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    pub ticks: u64,
    pub cpu: u32,
    /// `unknown` for a code the kernel has no name for: the reader's name then ends so.
    pub name: String,
    pub fields: Vec<Field>,
    /// Damage kinds, sorted.
    pub damage: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    pub name: String,
    /// `unsigned`, `signed`, `hex`, `text`, `bytes` (an unsigned one may be shown as `enum`).
    #[serde(rename = "type")]
    pub kind: String,
    /// As kcrash's JSON gives it: decimal, `0x` hex, text, or hex bytes.
    pub value: String,
}

/// One QNX-EVENT line.
struct Logged {
    parts: Vec<u64>,
    time: u64,
    cpu: u32,
    name: String,
    payload: Vec<u8>,
    unfinished: bool,
    fields: Vec<Field>,
}

const VERSION: u32 = 1;

/// The expected result the oracle lines of a console log imply.
pub fn derive(console: &str) -> Result<Expected> {
    let mut config = None;
    let mut logged = Vec::new();
    let mut scribbled = Vec::new();
    let mut panic = None;
    for (index, text) in console.lines().enumerate() {
        let at = || format!("console line {}: {text}", index + 1);
        if let Some(message) = text.strip_prefix(PANIC_PREFIX) {
            panic = Some(message.to_string());
            continue;
        }
        let Some(rest) = text.strip_prefix("QNX-") else {
            continue;
        };
        // The KLOG- line parser, for the same key=value conventions.
        let line = Line::parse(&format!("KLOG-{rest}"))
            .ok_or_else(|| anyhow!("not an oracle line"))
            .and_then(|l| l)
            .with_context(at)?;
        match line.tag.as_str() {
            "KLOG-CONFIG" => {
                config = Some((
                    line.num("elements")?,
                    line.num("buffers")?,
                    line.num("cycles_per_sec")?,
                ))
            }
            "KLOG-EVENT" => logged.push(parse_event(&line).with_context(at)?),
            "KLOG-DAMAGE" => scribbled.push((line.num("buffer")?, line.num("value")?)),
            _ => bail!("{}: unknown tag", at()),
        }
    }
    let (elements, buffers, cycles_per_sec) =
        config.ok_or_else(|| anyhow!("no QNX-CONFIG line"))?;
    ensure!(elements > 0 && buffers > 0, "an empty ring");
    let written = logged
        .iter()
        .flat_map(|l| l.parts.iter())
        .max()
        .map_or(0, |s| s + 1);
    // Buffers fill whole before the next is started: the newest `buffers` of them survive.
    let newest = written.saturating_sub(1) / elements;
    let oldest_held = (newest + 1).saturating_sub(buffers) * elements;
    let reachable = scribbled.first().map_or(buffers, |&(b, _)| b + 1);
    let read = |s: u64| s >= oldest_held && s < written && (s / elements) % buffers < reachable;
    let mut events = Vec::new();
    for l in &logged {
        events.extend(expect(l, read));
    }
    events.sort_by_key(|e| e.seq);
    Ok(Expected {
        version: VERSION,
        cycles_per_sec,
        panic: panic.ok_or_else(|| anyhow!("no {PANIC_PREFIX:?} line"))?,
        elements,
        buffers,
        written,
        held: (oldest_held..written).filter(|&s| read(s)).count() as u64,
        scribbled,
        events,
    })
}

fn parse_event(line: &Line) -> Result<Logged> {
    let parts = line
        .str("parts")?
        .split(',')
        .map(|s| s.parse::<u64>().with_context(|| format!("part {s:?}")))
        .collect::<Result<Vec<_>>>()?;
    let payload = hex_bytes(line.str("payload")?)?;
    ensure!(
        payload.len() == parts.len() * 8,
        "{} payload bytes for {} parts",
        payload.len(),
        parts.len()
    );
    let mut fields = Vec::new();
    for (key, value) in &line.fields {
        let Some(name) = key.strip_prefix("f.") else {
            continue;
        };
        let (kind, value) = value
            .split_once(':')
            .ok_or_else(|| anyhow!("field {key}={value} has no type"))?;
        let (kind, value) = match kind {
            "u" => ("unsigned", value.parse::<u64>()?.to_string()),
            "s" => ("signed", value.parse::<i64>()?.to_string()),
            "x" => ("hex", value.to_string()),
            "t" => ("text", unescape(value)?),
            "b" => ("bytes", value.to_string()),
            other => bail!("field {key} has unknown type {other:?}"),
        };
        fields.push(Field {
            name: name.to_string(),
            kind: kind.to_string(),
            value,
        });
    }
    Ok(Logged {
        parts,
        time: line.num("time")?,
        cpu: line.num("cpu")? as u32,
        name: line.str("name")?.to_string(),
        payload,
        unfinished: line.num("unfinished").is_ok(),
        fields,
    })
}

/// A text field's value, unescaped as `fmt=` values are.
fn unescape(text: &str) -> Result<String> {
    let line = Line::parse(&format!("KLOG-X fmt={text}")).expect("a KLOG- line")?;
    Ok(line.str("fmt")?.to_string())
}

fn hex_bytes(text: &str) -> Result<Vec<u8>> {
    ensure!(text.len() % 2 == 0, "odd hex {text:?}");
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).with_context(|| format!("hex {text:?}")))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The events one logged event leaves for a reader of the sequence numbers `read` says it
/// reads: itself whole; itself incomplete (its begin part read, not all the others, or the
/// crash came first); or, its begin part gone, each part read as a stray.
fn expect(l: &Logged, read: impl Fn(u64) -> bool) -> Vec<Event> {
    let event = |seq, fields, damage: &[&str]| Event {
        seq,
        ticks: l.time,
        cpu: l.cpu,
        name: l.name.clone(),
        fields,
        damage: damage.iter().map(|d| d.to_string()).collect(),
    };
    let chunk = |i: usize| &l.payload[i * 8..i * 8 + 8];
    if read(l.parts[0]) {
        if !l.unfinished && l.parts.iter().all(|&s| read(s)) {
            return vec![event(l.parts[0], l.fields.clone(), &[])];
        }
        let held: Vec<u8> = (0..l.parts.len())
            .filter(|&i| read(l.parts[i]))
            .flat_map(|i| chunk(i).to_vec())
            .collect();
        return vec![event(
            l.parts[0],
            vec![field("payload", "bytes", hex(&held))],
            &["incomplete"],
        )];
    }
    (1..l.parts.len())
        .filter(|&i| read(l.parts[i]))
        .map(|i| {
            let end = i + 1 == l.parts.len() && !l.unfinished;
            event(
                l.parts[i],
                vec![
                    field("part", "enum", if end { "3" } else { "2" }.into()),
                    field("payload", "bytes", hex(chunk(i))),
                ],
                &["incomplete"],
            )
        })
        .collect()
}

fn field(name: &str, kind: &str, value: String) -> Field {
    Field {
        name: name.into(),
        kind: kind.into(),
        value,
    }
}

/// Runs one kcrash command on a dump, in this process.
fn kcrash(dump: &Path, phys_start: Option<u64>, image: &Path, command: &str) -> Result<String> {
    let dump = kcrash::session::open_dump(dump, phys_start)?;
    let session = kcrash::session::Session::open(&dump, Some(image.to_owned()))?;
    let mut settings = kcrash::commands::Settings::plain();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    kcrash::redirect::run_line(
        &session,
        &mut settings,
        command,
        Some(&mut out),
        &mut err,
        false,
    )
    .with_context(|| format!("{command}: {}", String::from_utf8_lossy(&err)))?;
    Ok(String::from_utf8(out)?)
}

/// Checks one dump: `tracelog --json --reverse` gives exactly the expected events, and
/// `tracelog -s --json` the ring's counts (unknown when the ring is broken).
pub fn check_dump(
    dump: &Path,
    phys_start: Option<u64>,
    image: &Path,
    expected: &Expected,
) -> Result<()> {
    let out = kcrash(dump, phys_start, image, "tracelog --json --reverse")?;
    let got: Vec<Value> = out
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .context("tracelog --json output")?;
    ensure!(
        got.len() == expected.events.len(),
        "tracelog shows {} events, the oracle says {}",
        got.len(),
        expected.events.len()
    );
    for (json, want) in got.iter().zip(&expected.events) {
        compare_event(json, want)
            .with_context(|| format!("the event of seq {}: {json}", want.seq))?;
    }
    let summary: Value =
        serde_json::from_str(&kcrash(dump, phys_start, image, "tracelog -s --json")?)?;
    let ring = &summary["rings"][0];
    let count = |key: &str| {
        ring[key]
            .get("known")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if expected.scribbled.is_empty() {
        let capacity = expected.elements * expected.buffers;
        ensure!(
            count("capacity") == Some(capacity.to_string()),
            "capacity: {ring}"
        );
        ensure!(
            count("written") == Some(expected.written.to_string()),
            "written: {ring}"
        );
        let overwritten = expected.written - expected.held;
        ensure!(
            count("overwritten") == Some(overwritten.to_string()),
            "overwritten: {ring}"
        );
    } else {
        ensure!(
            count("capacity").is_none() && count("written").is_none(),
            "a broken ring's counts: {ring}"
        );
        let notes = summary["notes"].to_string();
        ensure!(
            notes.contains("the ring is broken"),
            "no note of the broken ring: {notes}"
        );
    }
    let hz = summary["clock_hz"].as_str();
    ensure!(
        hz == Some(&expected.cycles_per_sec.to_string()),
        "clock_hz {hz:?}"
    );
    Ok(())
}

fn compare_event(json: &Value, want: &Event) -> Result<()> {
    let text = |key: &str| json[key].as_str().unwrap_or_default().to_string();
    ensure!(text("seq") == want.seq.to_string(), "seq");
    ensure!(
        text("ticks") == want.ticks.to_string(),
        "ticks: want {}",
        want.ticks
    );
    ensure!(
        json["processor"].as_u64() == Some(want.cpu.into()),
        "processor: want {}",
        want.cpu
    );
    let name = text("name");
    let named = if want.name == "unknown" {
        name.ends_with("unknown")
    } else {
        name == want.name
    };
    ensure!(named, "name: want {}", want.name);
    let mut damage: Vec<String> = json["damage"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| d["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    damage.sort();
    ensure!(damage == want.damage, "damage: want {:?}", want.damage);
    let fields = json["fields"].as_array().cloned().unwrap_or_default();
    ensure!(
        fields.len() == want.fields.len(),
        "{} fields, want {}",
        fields.len(),
        want.fields.len()
    );
    for (f, w) in fields.iter().zip(&want.fields) {
        let kind = f["type"].as_str().unwrap_or_default();
        let kind_ok = kind == w.kind || (w.kind == "unsigned" && kind == "enum");
        ensure!(
            f["name"] == w.name.as_str() && kind_ok && f["value"] == w.value.as_str(),
            "field {f}: want {w:?}"
        );
    }
    compare_named(json, want)
}

/// The event as the shipped `.fmt` schemata read it: every event the writer names has one, and
/// each named field the oracle prints has the oracle's value (a number compared as a number,
/// whatever base each gives it in).
fn compare_named(json: &Value, want: &Event) -> Result<()> {
    let schema = &json["schema"];
    if want.name == "unknown" || !want.damage.is_empty() {
        return Ok(());
    }
    ensure!(schema.is_object(), "no schema read the event");
    let number = |v: &str| match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse::<u64>().ok(),
    };
    let named = schema["fields"].as_array().cloned().unwrap_or_default();
    ensure!(
        !named.is_empty() || want.fields.is_empty(),
        "the schema names no field"
    );
    for f in &named {
        let Some(w) = want.fields.iter().find(|w| f["name"] == w.name.as_str()) else {
            continue;
        };
        let got = f["value"].as_str().unwrap_or_default();
        let agree = match (number(got), number(&w.value)) {
            (Some(a), Some(b)) => a == b,
            _ => got == w.value,
        };
        ensure!(agree, "named field {f}: the oracle says {}", w.value);
    }
    Ok(())
}

/// Checks a QNX entry of a corpus directory: its expected.json is what the oracle derives from
/// its console log, and every dump reads as expected.
pub fn check_entry(dir: &Path, image: &Path, entry: &Entry) -> Result<()> {
    let console = std::fs::read_to_string(dir.join(&entry.console))
        .with_context(|| format!("reading {}", entry.console))?;
    let derived = derive(&console)?;
    let stored: Expected = serde_json::from_str(
        &std::fs::read_to_string(dir.join(&entry.expected))
            .with_context(|| format!("reading {}", entry.expected))?,
    )
    .with_context(|| format!("parsing {}", entry.expected))?;
    ensure!(
        stored == derived,
        "{} differs from what the oracle derives from {}",
        entry.expected,
        entry.console
    );
    ensure!(!entry.dumps.is_empty(), "no dumps");
    for dump in &entry.dumps {
        check_dump(&dir.join(&dump.path), dump.phys_start, image, &stored)
            .with_context(|| dump.path.clone())?;
    }
    Ok(())
}

/// Writes the expected result the console log at `console` implies to `path`.
pub fn write_expected(console: &Path, path: &Path) -> Result<Expected> {
    let text = std::fs::read_to_string(console)
        .with_context(|| format!("reading {}", console.display()))?;
    let expected = derive(&text).with_context(|| format!("deriving from {}", console.display()))?;
    std::fs::write(path, serde_json::to_string_pretty(&expected)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONSOLE: &str = "\
QNX-CONFIG elements=4 buffers=2 cycles_per_sec=1000 head=0x10 syspage=0x8
QNX-EVENT seq=0 time=5 cpu=0 name=CONTROL/TIME parts=0 payload=0000000005000000 f.msb=x:0x0 f.lsb=x:0x5
QNX-EVENT seq=1 time=6 cpu=1 name=PROC_THREAD/PROCCREATE_NAME parts=1,3,4 payload=010000000200000061\
000000000000000000000000000000 f.ppid=u:1 f.pid=u:2 f.name=t:a
QNX-EVENT seq=2 time=7 cpu=0 name=unknown parts=2 payload=0000000000000000 f.class=u:21 f.event=u:5 f.d0=x:0x0 f.d1=x:0x0
QNX-EVENT seq=5 time=8 cpu=0 name=PROC_THREAD/PROCCREATE_NAME parts=5,6 payload=01000000020000006100000000000000 unfinished=1 f.ppid=u:1 f.pid=u:2 f.name=t:a\\u{20}b
QNX-EVENT seq=7 time=9 cpu=0 name=PROC_THREAD/THREADY parts=7 payload=0100000002000000 f.pid=u:1 f.tid=u:2
QNX-EVENT seq=8 time=10 cpu=0 name=PROC_THREAD/THREADY parts=8 payload=0100000002000000 f.pid=u:1 f.tid=u:2
KCRASH-PANIC scenario x: done
";

    #[test]
    fn the_oracle_implies_what_survives_and_how() {
        let e = derive(CONSOLE).unwrap();
        assert_eq!((e.written, e.held), (9, 5));
        let seqs: Vec<u64> = e.events.iter().map(|e| e.seq).collect();
        // Buffer 0 (seqs 0..4) was reused for 8..: the begin at 1 is gone, parts 4 stray.
        assert_eq!(seqs, [4, 5, 7, 8]);
        assert_eq!(e.events[0].damage, ["incomplete"]);
        assert_eq!(e.events[0].fields[0].value, "3");
        assert_eq!(
            e.events[1].fields[0].value,
            "01000000020000006100000000000000"
        );
        assert_eq!(e.events[1].damage, ["incomplete"]);
        assert_eq!(e.events[2].name, "PROC_THREAD/THREADY");
        let damaged = derive(&CONSOLE.replace(
            "KCRASH",
            "QNX-DAMAGE buffer=0 at=0x10 field=next value=0x1\nKCRASH",
        ))
        .unwrap();
        assert_eq!(
            damaged.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [8]
        );
    }
}
