//! Klogger entries (tests/kernels/klogger-writer): the expected result a console's
//! `KLOGGER-*` oracle lines imply, and the check that kcrash's `klogger` output on each dump is
//! that result, event by event and field by field.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// The scenarios every kernel with the Klogger writer offers.
pub const SCENARIOS: [&str; 4] = [
    "klogger-plain",
    "klogger-wrap",
    "klogger-lost",
    "klogger-damaged",
];

/// Schema version of a Klogger entry's `expected.json`.
const VERSION: u32 = 1;
const PANIC_PREFIX: &str = "KCRASH-PANIC ";

/// Whether `scenario` is one of Klogger's (its entry has this module's expected result).
pub fn owns(scenario: &str) -> bool {
    SCENARIOS.contains(&scenario)
}

/// The commands `kcrash regress` runs on a Klogger entry's dumps, and their files.
pub const CHECKS: [(&str, &str); 4] = [
    ("klogger -s", "klogger-s.txt"),
    ("klogger -s --json", "klogger-s.json"),
    ("klogger --reverse", "klogger-oldest.txt"),
    ("klogger --json -n 16", "klogger-newest16.json"),
];

/// What a reader of one crash's dumps must report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expected {
    pub version: u32,
    pub clock_hz: u64,
    pub panic: String,
    /// Every CPU's buffer, by CPU.
    pub rings: Vec<Ring>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ring {
    pub cpu: u32,
    /// Events stored (logged, whether or not overwritten since).
    pub written: u64,
    pub overwritten: u64,
    pub lost: u64,
    /// The control structure's field the kernel scribbled over: the ring must be refused,
    /// naming it.
    pub damaged: Option<String>,
    /// The events the buffer holds, oldest first.
    pub events: Vec<Event>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub serial: u64,
    pub ticks: u64,
    pub name: String,
    pub fields: Vec<Field>,
    /// Serial numbers missing just before this one (0: none).
    pub lost_before: u64,
}

/// A field as kcrash's JSON gives it: type, value, and an enumerator's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    pub value: String,
    pub symbol: Option<String>,
}

/// One CPU's lines, as the console gave them.
#[derive(Default)]
struct Cpu {
    logged: BTreeMap<u64, Event>,
    lost: u64,
    overwritten: Vec<u64>,
    damaged: Option<String>,
}

/// The expected result of a console log's oracle lines.
pub fn derive(console: &str) -> Result<Expected> {
    let mut clock_hz = None;
    let mut cpus: BTreeMap<u32, Cpu> = BTreeMap::new();
    let mut panic = None;
    for (index, text) in console.lines().enumerate() {
        let context = || format!("console line {}: {text}", index + 1);
        if let Some(message) = text.strip_prefix(PANIC_PREFIX) {
            panic = Some(message.to_string());
            continue;
        }
        let Some((kind, rest)) = text.split_once(' ') else {
            continue;
        };
        let words: Vec<(&str, &str)> = rest.split(' ').filter_map(|w| w.split_once('=')).collect();
        let get = |key: &str| {
            words
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| *v)
                .ok_or_else(|| anyhow!("no {key}="))
        };
        let num = |key: &str| -> Result<u64> { Ok(get(key)?.parse()?) };
        match kind {
            "KLOGGER-CONFIG" => {
                clock_hz = Some(num("clock_hz").with_context(context)?);
                for cpu in 0..num("cpus").with_context(context)? {
                    cpus.entry(cpu as u32).or_default();
                }
            }
            "KLOGGER-EVENT" => {
                ensure!(
                    words.get(3).map(|w| w.0) == Some("name"),
                    "{}: fields before name=",
                    context()
                );
                let cpu = num("cpu").with_context(context)? as u32;
                let serial = num("serial").with_context(context)?;
                let fields = words[4..]
                    .iter()
                    .map(|(name, value)| field(name, value))
                    .collect::<Result<_>>()
                    .with_context(context)?;
                let event = Event {
                    serial,
                    ticks: num("ticks").with_context(context)?,
                    name: get("name").with_context(context)?.to_string(),
                    fields,
                    lost_before: 0,
                };
                let slot = cpus.entry(cpu).or_default();
                ensure!(
                    slot.logged.insert(serial, event).is_none(),
                    "{}: serial twice",
                    context()
                );
            }
            "KLOGGER-LOST" => {
                cpus.entry(num("cpu").with_context(context)? as u32)
                    .or_default()
                    .lost += 1
            }
            "KLOGGER-OVERWRITTEN" => {
                let cpu = num("cpu").with_context(context)? as u32;
                let serial = num("serial").with_context(context)?;
                cpus.entry(cpu).or_default().overwritten.push(serial);
            }
            "KLOGGER-DAMAGE" => {
                let cpu = num("cpu").with_context(context)? as u32;
                cpus.entry(cpu).or_default().damaged =
                    Some(get("field").with_context(context)?.to_string());
            }
            _ => {}
        }
    }
    let clock_hz = clock_hz.ok_or_else(|| anyhow!("no KLOGGER-CONFIG line"))?;
    let rings = cpus
        .into_iter()
        .map(|(cpu, mut c)| {
            let written = c.logged.len() as u64;
            for serial in &c.overwritten {
                c.logged.remove(serial).ok_or_else(|| {
                    anyhow!("cpu {cpu}: serial {serial} overwritten but never logged")
                })?;
            }
            let mut events: Vec<Event> = c.logged.into_values().collect();
            let serials: Vec<u64> = events.iter().map(|e| e.serial).collect();
            for (event, before) in events.iter_mut().skip(1).zip(serials) {
                event.lost_before = event.serial - before - 1;
            }
            if c.damaged.is_some() {
                events.clear();
            }
            Ok(Ring {
                cpu,
                written,
                overwritten: c.overwritten.len() as u64,
                lost: c.lost,
                damaged: c.damaged,
                events,
            })
        })
        .collect::<Result<_>>()?;
    Ok(Expected {
        version: VERSION,
        clock_hz,
        panic: panic.ok_or_else(|| anyhow!("no {PANIC_PREFIX}line"))?,
        rings,
    })
}

/// An oracle value (`s:-3`, `u:7`, `e:1:FIFO`, `t:68`, `b:dead`) as kcrash's JSON shows it.
fn field(name: &str, value: &str) -> Result<Field> {
    let (kind, text) = value
        .split_once(':')
        .ok_or_else(|| anyhow!("{name}={value}: no type"))?;
    let field = |ty: &str, value: String, symbol: Option<String>| Field {
        name: name.to_string(),
        ty: ty.to_string(),
        value,
        symbol,
    };
    let hex = |text: &str| -> Result<Vec<u8>> {
        (0..text.len())
            .step_by(2)
            .map(|i| {
                Ok(u8::from_str_radix(
                    text.get(i..i + 2).ok_or_else(|| anyhow!("odd hex"))?,
                    16,
                )?)
            })
            .collect()
    };
    Ok(match kind {
        "s" => field("signed", text.parse::<i64>()?.to_string(), None),
        "u" => field("unsigned", text.parse::<u64>()?.to_string(), None),
        "e" => {
            let (v, label) = text
                .split_once(':')
                .ok_or_else(|| anyhow!("{name}={value}: no name"))?;
            // A C enum is an int; the event model keeps it sign-extended to 64 bits.
            let v = v.parse::<i64>()? as u64;
            field(
                "enum",
                v.to_string(),
                (!label.is_empty()).then(|| label.to_string()),
            )
        }
        "t" => field("text", kcrash::escape::escaped(&hex(text)?), None),
        "b" => field("bytes", text.to_string(), None),
        _ => bail!("{name}={value}: unknown type {kind}"),
    })
}

/// Reads `dump` (with `image`) with kcrash's `klogger -s --json` and `klogger --json --reverse`
/// and requires exactly `expected`: every ring's counts (a damaged ring refused, naming the
/// field) and every event in order with every field. Returns the events compared.
pub fn check_dump(
    dump: &Path,
    phys_start: Option<u64>,
    image: &Path,
    expected: &Expected,
) -> Result<usize> {
    use kcrash::commands::Settings;
    use kcrash::session::{open_dump, Session};
    let dump_file = open_dump(dump, phys_start)?;
    let session = Session::open(&dump_file, Some(image.to_owned()))?;
    let mut settings = Settings::plain();
    let mut run = |command: &str| -> Result<String> {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        kcrash::redirect::run_line(
            &session,
            &mut settings,
            command,
            Some(&mut out),
            &mut err,
            false,
        )
        .map_err(|e| anyhow!("{command}: {e:#}"))?;
        Ok(String::from_utf8(out)?)
    };
    let summary: Json = serde_json::from_str(&run("klogger -s --json")?)?;
    let rings = summary
        .pointer("/rings")
        .or_else(|| summary.pointer("/data/rings"))
        .and_then(Json::as_array)
        .ok_or_else(|| anyhow!("klogger -s --json has no rings: {summary}"))?;
    ensure!(
        rings.len() == expected.rings.len(),
        "{} rings, the oracle has {}",
        rings.len(),
        expected.rings.len()
    );
    let hz = summary
        .pointer("/clock_hz")
        .or_else(|| summary.pointer("/data/clock_hz"));
    ensure!(
        hz.and_then(Json::as_str) == Some(expected.clock_hz.to_string().as_str()),
        "clock_hz {hz:?}, the oracle says {}",
        expected.clock_hz
    );
    for (got, want) in rings.iter().zip(&expected.rings) {
        check_ring(got, want).with_context(|| format!("cpu{}", want.cpu))?;
    }
    let events: Vec<Json> = run("klogger --json --reverse")?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let mut compared = 0;
    for want in &expected.rings {
        let got: Vec<&Json> = events
            .iter()
            .filter(|e| e["ring_index"].as_u64() == Some(u64::from(want.cpu)))
            .collect();
        ensure!(
            got.len() == want.events.len(),
            "cpu{}: {} events, the oracle has {}",
            want.cpu,
            got.len(),
            want.events.len()
        );
        for (got, want_event) in got.into_iter().zip(&want.events) {
            check_event(got, want_event, want.cpu)
                .with_context(|| format!("cpu{} serial {}: {got}", want.cpu, want_event.serial))?;
            compared += 1;
        }
    }
    Ok(compared)
}

fn check_ring(got: &Json, want: &Ring) -> Result<()> {
    let refused = got["refused"].as_str();
    match &want.damaged {
        Some(field) => {
            let why =
                refused.ok_or_else(|| anyhow!("not refused, but its {field} was scribbled"))?;
            ensure!(
                why.contains(field.as_str()),
                "refused for {why:?}, not naming {field}"
            );
            return Ok(());
        }
        None => ensure!(refused.is_none(), "refused: {refused:?}"),
    }
    for (key, value) in [
        ("written", want.written),
        ("overwritten", want.overwritten),
        ("lost", want.lost),
    ] {
        let known = got[key]["known"].as_str();
        ensure!(
            known == Some(value.to_string().as_str()),
            "{key} is {}, the oracle says {value}",
            got[key]
        );
    }
    Ok(())
}

/// A JSON list of fields as the oracle's.
fn fields_of(list: &Json) -> Option<Vec<Field>> {
    Some(
        list.as_array()?
            .iter()
            .map(|f| Field {
                name: f["name"].as_str().unwrap_or_default().to_string(),
                ty: f["type"].as_str().unwrap_or_default().to_string(),
                value: f["value"].as_str().unwrap_or_default().to_string(),
                symbol: f["symbol"].as_str().map(str::to_string),
            })
            .collect(),
    )
}

fn check_event(got: &Json, want: &Event, cpu: u32) -> Result<()> {
    let text = |key: &str| got[key].as_str().unwrap_or_default().to_string();
    ensure!(
        got["processor"].as_u64() == Some(u64::from(cpu)),
        "processor"
    );
    ensure!(text("seq") == want.serial.to_string(), "seq");
    ensure!(text("ticks") == want.ticks.to_string(), "ticks");
    ensure!(text("name") == want.name, "name");
    let fields = fields_of(&got["fields"]).ok_or_else(|| anyhow!("no fields"))?;
    // The decoder shows an unknown type's whole record payload, padded to 8 bytes by zeroes.
    let padded: Vec<Field> = want
        .fields
        .iter()
        .map(|f| match f.ty.as_str() {
            "bytes" => Field {
                value: format!(
                    "{:0<width$}",
                    f.value,
                    width = f.value.len().next_multiple_of(16)
                ),
                ..f.clone()
            },
            _ => f.clone(),
        })
        .collect();
    ensure!(
        fields == padded,
        "fields {fields:?}, the oracle says {padded:?}"
    );
    // The shipped .klogger.conf names the same fields with the same types: read through it,
    // every event the oracle names has them with the oracle's values.
    if want.name != "unknown" && !want.fields.iter().any(|f| f.ty == "bytes") {
        let named = fields_of(&got["schema"]["fields"])
            .ok_or_else(|| anyhow!("no schema read the event"))?;
        ensure!(
            named == want.fields,
            "named fields {named:?}, the oracle says {:?}",
            want.fields
        );
    }
    let damage: Vec<(String, Option<String>)> = got["damage"]
        .as_array()
        .ok_or_else(|| anyhow!("no damage list"))?
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap_or_default().to_string(),
                d["count"].as_str().map(str::to_string),
            )
        })
        .collect();
    let want_damage: Vec<(String, Option<String>)> = match want.lost_before {
        0 => Vec::new(),
        n => vec![("lost-before".to_string(), Some(n.to_string()))],
    };
    ensure!(
        damage == want_damage,
        "damage {damage:?}, the oracle says {want_damage:?}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONSOLE: &str = "\
KLOGGER-CONFIG clock_hz=1000 cpus=2
KLOGGER-EVENT cpu=0 serial=0 ticks=5 name=SCHEDIN pid=s:-3 policy=e:-1:DEAD prio=s:2
KLOGGER-OVERWRITTEN cpu=0 serial=0
KLOGGER-EVENT cpu=0 serial=1 ticks=6 name=PROCESS_EXISTS pid=s:1 policy=e:7: comm=t:696e6974
KLOGGER-LOST cpu=0 serial=2 name=PROCESS_EXISTS
KLOGGER-EVENT cpu=0 serial=3 ticks=8 name=unknown type=u:42 payload=b:dead
KLOGGER-EVENT cpu=1 serial=0 ticks=9 name=SCHEDOUT pid=s:1 l2_cache_misses_user=u:2
KLOGGER-DAMAGE cpu=1 field=head value=0x8
KCRASH-PANIC scenario: done
";

    #[test]
    fn derives_survivors_gaps_and_damage() {
        let e = derive(CONSOLE).unwrap();
        assert_eq!(e.clock_hz, 1000);
        assert_eq!(e.panic, "scenario: done");
        let cpu0 = &e.rings[0];
        assert_eq!((cpu0.written, cpu0.overwritten, cpu0.lost), (3, 1, 1));
        let serials: Vec<(u64, u64)> = cpu0
            .events
            .iter()
            .map(|e| (e.serial, e.lost_before))
            .collect();
        assert_eq!(serials, [(1, 0), (3, 1)]);
        assert_eq!(cpu0.events[0].fields[1].value, "7");
        assert_eq!(cpu0.events[0].fields[1].symbol, None);
        assert_eq!(cpu0.events[0].fields[2].value, "init");
        let cpu1 = &e.rings[1];
        assert_eq!(cpu1.damaged.as_deref(), Some("head"));
        assert!(cpu1.events.is_empty());
    }

    #[test]
    fn enums_are_sign_extended() {
        assert_eq!(
            field("state", "e:-1:DEAD").unwrap().value,
            u64::MAX.to_string()
        );
    }

    #[test]
    fn an_overwritten_event_never_logged_is_an_error() {
        let console = "KLOGGER-CONFIG clock_hz=1 cpus=1\nKLOGGER-OVERWRITTEN cpu=0 serial=4\nKCRASH-PANIC x\n";
        assert!(derive(console).is_err());
    }
}
