//! The kernels' oracle: one console line per event, and what it implies for each ring.
//!
//! Line format (documented for kernel writers in tests/kernels/README.md): a tag, then
//! space-separated `key=value` fields; a `msg=` field, if present, is last and runs to the
//! end of the line, escaped with Rust's `str::escape_debug`. Numbers are decimal or `0x` hex.
//!
//! ```text
//! KLOG-RING  subsys=3 name=SCHED num_recs=1024 buffer=0xffffffff80123000
//! KLOG-EVENT subsys=3 seq=17 at=0xffffffff80123440 id=0x.. proc_dom=0x.. clock=123 desc=0x.. d1=0x.. d2=0x.. d3=0x.. fmt=.. msg=..
//! KLOG-TORN  subsys=3 seq=18 at=0xffffffff80123480
//! KLOG-DAMAGE subsys=2 kind=next-write value=0x..
//! KLOG-DIGEST subsys=3 records=.. last_seq=.. fnv1a=0x..
//! ```

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Bytes per record: 8 words (the design's KLogRec).
pub const RECORD_BYTES: u64 = 64;

/// One parsed oracle line: its tag, its fields in order, and its message if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub tag: String,
    pub fields: Vec<(String, String)>,
    pub msg: Option<String>,
}

impl Line {
    /// Parses a console line; None if it is not an oracle line (`KLOG-` tag).
    pub fn parse(text: &str) -> Option<Result<Line>> {
        let text = text.strip_suffix('\r').unwrap_or(text);
        let (tag, rest) = text.split_once(' ').unwrap_or((text, ""));
        if !tag.starts_with("KLOG-") {
            return None;
        }
        Some(Self::parse_fields(tag, rest))
    }

    fn parse_fields(tag: &str, mut rest: &str) -> Result<Line> {
        let mut fields = Vec::new();
        let mut msg = None;
        while !rest.is_empty() {
            if let Some(escaped) = rest.strip_prefix("msg=") {
                msg = Some(unescape(escaped)?);
                break;
            }
            let (field, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let (key, value) = field
                .split_once('=')
                .ok_or_else(|| anyhow!("field {field:?} has no '='"))?;
            let value = if key == "fmt" {
                unescape(value)?
            } else {
                value.to_string()
            };
            fields.push((key.to_string(), value));
            rest = tail;
        }
        Ok(Line {
            tag: tag.to_string(),
            fields,
            msg,
        })
    }

    pub fn str(&self, key: &str) -> Result<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| anyhow!("{} line has no {key}=", self.tag))
    }

    pub fn num(&self, key: &str) -> Result<u64> {
        let text = self.str(key)?;
        let parsed = match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => text.parse(),
        };
        parsed.with_context(|| format!("{} {key}={text} is not a number", self.tag))
    }
}

/// Reverses `str::escape_debug` (the escapes it emits: \t \r \n \\ \' \" \0 \u{..}).
fn unescape(text: &str) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('n') => out.push('\n'),
            Some('0') => out.push('\0'),
            Some(c @ ('\\' | '\'' | '"')) => out.push(c),
            Some('u') => {
                let rest = chars.as_str();
                let body = rest
                    .strip_prefix('{')
                    .and_then(|r| r.split_once('}'))
                    .ok_or_else(|| anyhow!("bad \\u escape in {text:?}"))?;
                let code = u32::from_str_radix(body.0, 16)
                    .with_context(|| format!("bad \\u escape in {text:?}"))?;
                out.push(
                    char::from_u32(code).ok_or_else(|| anyhow!("bad code point in {text:?}"))?,
                );
                chars = body.1.chars();
            }
            other => bail!("unknown escape \\{other:?} in {text:?}"),
        }
    }
    Ok(out)
}

/// What a reader must find in one ring.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedRing {
    pub subsystem: u64,
    pub name: String,
    pub num_recs: u64,
    /// Virtual address of the ring's first record after klog_init.
    pub buffer: u64,
    /// Records the ring must hold, oldest first.
    pub records: Vec<ExpectedRecord>,
    /// Damage a reader must report for this ring.
    pub damage: Vec<Damage>,
    /// For rings too big to list: a digest of `records` instead (records is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
}

/// One record as the kernel meant it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedRecord {
    /// Subsystem that logged it (differs from the ring's for events logged before klog_init).
    pub subsystem: u64,
    /// Sequence number klog-runtime returned for it, in the subsystem that logged it.
    pub seq: u64,
    /// Address of the record.
    pub at: u64,
    pub id: u64,
    pub proc_dom: u64,
    pub clock: u64,
    pub desc: u64,
    pub data: [u64; 3],
    /// The printf format string `desc` points at.
    pub format: String,
    /// The message as the kernel formatted it with core::fmt; an unreadable `%s` argument
    /// appears as `<unreadable:0x...>`.
    pub message: String,
}

/// Something wrong with a ring that a reader must notice and report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Damage {
    /// A writer reserved the slot at `at` (sequence `seq`) and died before its header was
    /// written: the slot holds no whole record.
    TornRecord { seq: u64, at: u64 },
    /// The KLogs entry's field was overwritten with `value`; KLogBuffer is intact.
    Scribbled { field: String, value: u64 },
}

/// Digest of a big ring's surviving records (see tests/kernels/README.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    pub records: u64,
    pub last_seq: u64,
    pub fnv1a: u64,
}

/// The expected result of one crash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expected {
    pub version: u32,
    pub clock_hz: u64,
    pub panic: String,
    pub rings: Vec<ExpectedRing>,
}

enum Slot {
    Record(ExpectedRecord),
    Torn,
}

/// Derives the expected result from a console log.
pub fn derive(console: &str) -> Result<Expected> {
    let mut rings: BTreeMap<u64, ExpectedRing> = BTreeMap::new();
    // Last write to each record address, with its write order.
    let mut slots: HashMap<u64, (usize, Slot)> = HashMap::new();
    let mut clock_hz = None;
    let mut panic = None;
    for (index, text) in console.lines().enumerate() {
        let lineno = index + 1;
        if let Some(message) = text.strip_prefix(crate::qemu::PANIC_LINE_PREFIX) {
            panic = Some(message.to_string());
            continue;
        }
        let Some(line) = Line::parse(text) else {
            continue;
        };
        let line = line.with_context(|| format!("console line {lineno}"))?;
        apply(&line, index, &mut rings, &mut slots, &mut clock_hz)
            .with_context(|| format!("console line {lineno}: {text}"))?;
    }
    let mut by_ring: BTreeMap<u64, Vec<(usize, u64, Slot)>> = BTreeMap::new();
    for (at, (order, slot)) in slots {
        if let Some(ring) = rings
            .values()
            .find(|r| at >= r.buffer && at < r.buffer + r.num_recs * RECORD_BYTES)
        {
            by_ring
                .entry(ring.subsystem)
                .or_default()
                .push((order, at, slot));
        }
    }
    for (subsystem, mut entries) in by_ring {
        entries.sort_by_key(|(order, _, _)| *order);
        let ring = rings
            .get_mut(&subsystem)
            .expect("grouped by an existing ring");
        ring.records = entries
            .into_iter()
            .filter_map(|(_, _, slot)| match slot {
                Slot::Record(record) => Some(record),
                Slot::Torn => None,
            })
            .collect();
    }
    Ok(Expected {
        version: 1,
        clock_hz: clock_hz.ok_or_else(|| anyhow!("no KLOG-CONFIG line"))?,
        panic: panic.ok_or_else(|| anyhow!("no {:?} line", crate::qemu::PANIC_LINE_PREFIX))?,
        rings: rings.into_values().collect(),
    })
}

fn apply(
    line: &Line,
    order: usize,
    rings: &mut BTreeMap<u64, ExpectedRing>,
    slots: &mut HashMap<u64, (usize, Slot)>,
    clock_hz: &mut Option<u64>,
) -> Result<()> {
    let ring = |rings: &mut BTreeMap<u64, ExpectedRing>| -> Result<u64> {
        let subsystem = line.num("subsys")?;
        if rings.contains_key(&subsystem) {
            Ok(subsystem)
        } else {
            bail!("subsystem {subsystem} has no KLOG-RING line before it")
        }
    };
    match line.tag.as_str() {
        "KLOG-CONFIG" => *clock_hz = Some(line.num("clock_hz")?),
        "KLOG-RING" => {
            let num_recs = line.num("num_recs")?;
            if !num_recs.is_power_of_two() {
                bail!("num_recs {num_recs} is not a power of two");
            }
            let subsystem = line.num("subsys")?;
            let previous = rings.insert(
                subsystem,
                ExpectedRing {
                    subsystem,
                    name: line.str("name")?.to_string(),
                    num_recs,
                    buffer: line.num("buffer")?,
                    records: Vec::new(),
                    damage: Vec::new(),
                    digest: None,
                },
            );
            if previous.is_some() {
                bail!("subsystem {subsystem} declared twice");
            }
        }
        "KLOG-EVENT" => {
            ring(rings)?;
            let at = line.num("at")?;
            if at % RECORD_BYTES != 0 {
                bail!("record address {at:#x} is not record-aligned");
            }
            let record = ExpectedRecord {
                subsystem: line.num("subsys")?,
                seq: line.num("seq")?,
                at,
                id: line.num("id")?,
                proc_dom: line.num("proc_dom")?,
                clock: line.num("clock")?,
                desc: line.num("desc")?,
                data: [line.num("d1")?, line.num("d2")?, line.num("d3")?],
                format: line.str("fmt")?.to_string(),
                message: line
                    .msg
                    .clone()
                    .ok_or_else(|| anyhow!("KLOG-EVENT without msg="))?,
            };
            slots.insert(at, (order, Slot::Record(record)));
        }
        "KLOG-TORN" => {
            let subsystem = ring(rings)?;
            let (seq, at) = (line.num("seq")?, line.num("at")?);
            slots.insert(at, (order, Slot::Torn));
            rings
                .get_mut(&subsystem)
                .expect("checked")
                .damage
                .push(Damage::TornRecord { seq, at });
        }
        "KLOG-DAMAGE" => {
            let subsystem = ring(rings)?;
            let damage = match line.str("kind")? {
                "scribbled" => Damage::Scribbled {
                    field: line.str("field")?.to_string(),
                    value: line.num("value")?,
                },
                other => bail!("unknown damage kind {other:?}"),
            };
            rings
                .get_mut(&subsystem)
                .expect("checked")
                .damage
                .push(damage);
        }
        "KLOG-DIGEST" => {
            let subsystem = ring(rings)?;
            let digest = Digest {
                records: line.num("records")?,
                last_seq: line.num("last_seq")?,
                fnv1a: line.num("fnv1a")?,
            };
            rings.get_mut(&subsystem).expect("checked").digest = Some(digest);
        }
        // Events the kernel attempted while logging was off: they must not be in any ring.
        "KLOG-SKIP" => {
            ring(rings)?;
        }
        other => bail!("unknown oracle tag {other}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescape_reverses_escape_debug() {
        let original = "tab\t nl\n quote\" apos' back\\ nul\0 bell\u{7} é";
        let escaped: String = original.escape_debug().collect();
        assert_eq!(unescape(&escaped).unwrap(), original);
    }

    #[test]
    fn message_runs_to_end_of_line() {
        let line = Line::parse("KLOG-EVENT subsys=3 fmt=a\\u{20}%s msg=x y=z")
            .unwrap()
            .unwrap();
        assert_eq!(line.str("fmt").unwrap(), "a %s");
        assert_eq!(line.msg.as_deref(), Some("x y=z"));
        assert_eq!(line.num("subsys").unwrap(), 3);
    }

    #[test]
    fn later_writes_replace_earlier_ones_and_torn_slots_hold_nothing() {
        let log = "\
KLOG-CONFIG clock_hz=1000
KLOG-RING subsys=1 name=A num_recs=2 buffer=0x1000
KLOG-EVENT subsys=1 seq=0 at=0x1000 id=1 proc_dom=0 clock=1 desc=0x10 d1=0 d2=0 d3=0 fmt=a msg=a
KLOG-EVENT subsys=1 seq=1 at=0x1040 id=1 proc_dom=0 clock=2 desc=0x10 d1=0 d2=0 d3=0 fmt=b msg=b
KLOG-EVENT subsys=1 seq=2 at=0x1000 id=1 proc_dom=0 clock=3 desc=0x10 d1=0 d2=0 d3=0 fmt=c msg=c
KLOG-TORN subsys=1 seq=3 at=0x1040
KCRASH-PANIC torn
";
        let expected = derive(log).unwrap();
        let ring = &expected.rings[0];
        let messages: Vec<&str> = ring.records.iter().map(|r| r.message.as_str()).collect();
        assert_eq!(messages, ["c"]);
        assert_eq!(ring.damage, [Damage::TornRecord { seq: 3, at: 0x1040 }]);
        assert_eq!(expected.panic, "torn");
    }

    #[test]
    fn events_for_undeclared_rings_are_errors() {
        let log = "KLOG-CONFIG clock_hz=1\nKLOG-EVENT subsys=9 seq=0 at=0 msg=x\nKCRASH-PANIC x\n";
        assert!(derive(log).is_err());
    }
}
