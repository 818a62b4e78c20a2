//! The oracle a test program prints, and the expected result it implies for each ring.
//!
//! Line format (tests/hosted-harness/README.md): a tag, then space-separated `key=value` fields; `fmt=`
//! is escaped like Rust's `str::escape_debug` with spaces as `\u{20}`; `msg=`, if present, is
//! last, runs to the end of the line and is escaped the same way (spaces allowed). Numbers are
//! decimal or `0x` hex.
//!
//! ```text
//! KLOG-CONFIG clock_hz=1000000000
//! KLOG-RING   subsys=3 name=SCHED num_recs=1024 buffer=0x55d2c56c8498
//! KLOG-EVENT  subsys=3 seq=17 at=0x.. id=0x.. proc_dom=0x.. clock=.. desc=0x.. d1=0x.. d2=0x.. d3=0x.. fmt=.. msg=..
//! KLOG-TORN   subsys=3 seq=18 at=0x..
//! KLOG-SKIP   subsys=3 fmt=..                       (an event that was off: in no ring)
//! KLOG-DAMAGE subsys=2 kind=scribbled field=next_write value=0x..
//! KLOG-DIGEST subsys=3 records=.. last_seq=.. fnv1a=0x..
//! KCRASH-PANIC <message>
//! ```
//!
//! Threads print their lines in whatever order they get the console, so a ring's survivors are
//! decided by sequence number, not by line order: each slot holds the event or torn reservation
//! with the highest sequence number that mapped to it.

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bytes per record: 8 words (the design's KLogRec).
pub const RECORD_BYTES: u64 = 64;
/// What precedes the message of the program's last line.
pub const PANIC_PREFIX: &str = "KCRASH-PANIC ";

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
                let (hex, rest) = chars
                    .as_str()
                    .strip_prefix('{')
                    .and_then(|r| r.split_once('}'))
                    .ok_or_else(|| anyhow!("bad \\u escape in {text:?}"))?;
                let code = u32::from_str_radix(hex, 16)
                    .with_context(|| format!("bad \\u escape in {text:?}"))?;
                out.push(
                    char::from_u32(code).ok_or_else(|| anyhow!("bad code point in {text:?}"))?,
                );
                chars = rest.chars();
            }
            other => bail!("unknown escape \\{other:?} in {text:?}"),
        }
    }
    Ok(out)
}

/// The expected result of one crash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expected {
    pub version: u32,
    pub clock_hz: u64,
    pub panic: String,
    pub rings: Vec<ExpectedRing>,
}

/// What a reader must find in one ring.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedRing {
    pub subsystem: u64,
    pub name: String,
    pub num_recs: u64,
    /// Virtual address of the ring's first record after klog_init (as the process saw it: a
    /// reader of a PIE's core gets there by the load bias).
    pub buffer: u64,
    /// Records the ring must hold, oldest first.
    pub records: Vec<ExpectedRecord>,
    /// Damage a reader must report for this ring.
    pub damage: Vec<Damage>,
    /// For rings too big to list: a digest of the records instead (`records` is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
}

/// One record as the program meant it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedRecord {
    /// Subsystem that logged it (differs from the ring's for events logged before klog_init).
    pub subsystem: u64,
    /// Sequence number in the ring that holds it.
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
    /// The message as the program formatted it (Rust's format!, or the C library's snprintf);
    /// a `%s` argument the dump cannot hold appears as `<unreadable:0x...>`.
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

/// Digest of a big ring's surviving records: FNV-1a 64 over the little-endian bytes of their
/// eight words, oldest first (the bare kernel's definition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    pub records: u64,
    pub last_seq: u64,
    pub fnv1a: u64,
}

/// What last landed in a ring slot.
enum Slot {
    Record(ExpectedRecord),
    Torn { seq: u64, at: u64 },
}

impl Slot {
    fn seq(&self) -> u64 {
        match self {
            Slot::Record(r) => r.seq,
            Slot::Torn { seq, .. } => *seq,
        }
    }
}

/// A ring being reconstructed: its declaration and its slots by index.
struct Ring {
    declared: ExpectedRing,
    slots: BTreeMap<u64, Slot>,
}

impl Ring {
    /// The slot index of record address `at`, if it is one of this ring's slots.
    fn slot_of(&self, at: u64) -> Option<u64> {
        let offset = at.checked_sub(self.declared.buffer)?;
        (offset % RECORD_BYTES == 0 && offset / RECORD_BYTES < self.declared.num_recs)
            .then_some(offset / RECORD_BYTES)
    }

    fn land(&mut self, slot: u64, new: Slot) -> Result<()> {
        match self.slots.get(&slot) {
            Some(old) if old.seq() == new.seq() => {
                bail!("sequence number {} written twice", new.seq())
            }
            Some(old) if old.seq() > new.seq() => {}
            _ => {
                self.slots.insert(slot, new);
            }
        }
        Ok(())
    }

    /// The survivors oldest first, with the torn ones as damage. Fails if they are not the
    /// last `num_recs` sequence numbers without a hole: the oracle missed an event.
    fn finish(mut self) -> Result<ExpectedRing> {
        let mut slots: Vec<Slot> = std::mem::take(&mut self.slots).into_values().collect();
        slots.sort_by_key(Slot::seq);
        if let (Some(first), Some(last)) = (slots.first(), slots.last()) {
            let span = last.seq() - first.seq() + 1;
            let expected = (last.seq() + 1).min(self.declared.num_recs);
            if span != slots.len() as u64 || slots.len() as u64 != expected {
                bail!(
                    "ring {}: survivors are sequence numbers {}..={} in {} slots: the oracle misses events",
                    self.declared.name,
                    first.seq(),
                    last.seq(),
                    slots.len()
                );
            }
        }
        let mut ring = self.declared;
        for slot in slots {
            match slot {
                Slot::Record(record) => ring.records.push(record),
                Slot::Torn { seq, at } => ring.damage.push(Damage::TornRecord { seq, at }),
            }
        }
        Ok(ring)
    }
}

/// Derives the expected result from a program's console log.
pub fn derive(console: &str) -> Result<Expected> {
    let mut rings: BTreeMap<u64, Ring> = BTreeMap::new();
    let mut clock_hz = None;
    let mut panic = None;
    for (index, text) in console.lines().enumerate() {
        if let Some(message) = text.strip_prefix(PANIC_PREFIX) {
            panic = Some(message.to_string());
            continue;
        }
        let Some(line) = Line::parse(text) else {
            continue;
        };
        let line = line.with_context(|| format!("console line {}", index + 1))?;
        apply(&line, &mut rings, &mut clock_hz)
            .with_context(|| format!("console line {}: {text}", index + 1))?;
    }
    Ok(Expected {
        version: 1,
        clock_hz: clock_hz.ok_or_else(|| anyhow!("no KLOG-CONFIG line"))?,
        panic: panic.ok_or_else(|| anyhow!("no {PANIC_PREFIX:?} line"))?,
        rings: rings
            .into_values()
            .map(Ring::finish)
            .collect::<Result<_>>()?,
    })
}

fn apply(line: &Line, rings: &mut BTreeMap<u64, Ring>, clock_hz: &mut Option<u64>) -> Result<()> {
    let declared = |rings: &BTreeMap<u64, Ring>| -> Result<u64> {
        let subsystem = line.num("subsys")?;
        if rings.contains_key(&subsystem) {
            Ok(subsystem)
        } else {
            bail!("subsystem {subsystem} has no KLOG-RING line before it")
        }
    };
    // The ring whose slots hold record address `at` (NONE's for events before klog_init).
    let holder = |rings: &mut BTreeMap<u64, Ring>, at: u64| -> Result<(u64, u64)> {
        rings
            .iter()
            .find_map(|(&id, ring)| ring.slot_of(at).map(|slot| (id, slot)))
            .ok_or_else(|| anyhow!("{at:#x} is no record slot of any declared ring"))
    };
    match line.tag.as_str() {
        "KLOG-CONFIG" => *clock_hz = Some(line.num("clock_hz")?),
        "KLOG-RING" => {
            let subsystem = line.num("subsys")?;
            let num_recs = line.num("num_recs")?;
            if !num_recs.is_power_of_two() {
                bail!("num_recs {num_recs} is not a power of two");
            }
            let ring = Ring {
                declared: ExpectedRing {
                    subsystem,
                    name: line.str("name")?.to_string(),
                    num_recs,
                    buffer: line.num("buffer")?,
                    records: Vec::new(),
                    damage: Vec::new(),
                    digest: None,
                },
                slots: BTreeMap::new(),
            };
            if rings.insert(subsystem, ring).is_some() {
                bail!("subsystem {subsystem} declared twice");
            }
        }
        "KLOG-EVENT" => {
            declared(rings)?;
            let at = line.num("at")?;
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
            let (ring, slot) = holder(rings, at)?;
            rings
                .get_mut(&ring)
                .expect("found above")
                .land(slot, Slot::Record(record))?;
        }
        "KLOG-TORN" => {
            declared(rings)?;
            let (seq, at) = (line.num("seq")?, line.num("at")?);
            let (ring, slot) = holder(rings, at)?;
            rings
                .get_mut(&ring)
                .expect("found above")
                .land(slot, Slot::Torn { seq, at })?;
        }
        "KLOG-DAMAGE" => {
            let subsystem = declared(rings)?;
            let damage = match line.str("kind")? {
                "scribbled" => Damage::Scribbled {
                    field: line.str("field")?.to_string(),
                    value: line.num("value")?,
                },
                other => bail!("unknown damage kind {other:?}"),
            };
            let ring = rings.get_mut(&subsystem).expect("declared");
            ring.declared.damage.push(damage);
        }
        "KLOG-DIGEST" => {
            let subsystem = declared(rings)?;
            let digest = Digest {
                records: line.num("records")?,
                last_seq: line.num("last_seq")?,
                fnv1a: line.num("fnv1a")?,
            };
            rings.get_mut(&subsystem).expect("declared").declared.digest = Some(digest);
        }
        "KLOG-SKIP" => {
            declared(rings)?;
        }
        other => bail!("unknown oracle tag {other}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "KLOG-CONFIG clock_hz=1000\nKLOG-RING subsys=0 name=NONE num_recs=2 buffer=0x1008\nKLOG-RING subsys=1 name=A num_recs=2 buffer=0x1088\n";

    fn event(subsys: u64, seq: u64, at: u64, msg: &str) -> String {
        format!("KLOG-EVENT subsys={subsys} seq={seq} at={at:#x} id=0x1 proc_dom=0x1 clock=5 desc=0x10 d1=0x0 d2=0x0 d3=0x0 fmt=a\\u{{20}}%s msg={msg}\n")
    }

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
    fn survivors_follow_sequence_numbers_not_line_order() {
        // Two threads: seq 2 printed before seq 1, seq 3 before seq 0; ring of 2 keeps 2 and 3.
        let log = format!(
            "{HEAD}{}{}{}{}KCRASH-PANIC done\n",
            event(1, 2, 0x1088, "two"),
            event(1, 1, 0x10c8, "one"),
            event(1, 3, 0x10c8, "three"),
            event(1, 0, 0x1088, "zero"),
        );
        let expected = derive(&log).unwrap();
        let ring = &expected.rings[1];
        let messages: Vec<&str> = ring.records.iter().map(|r| r.message.as_str()).collect();
        assert_eq!(messages, ["two", "three"]);
        assert_eq!(expected.panic, "done");
    }

    #[test]
    fn torn_survivors_are_damage_and_overwritten_ones_vanish() {
        let log = format!(
            "{HEAD}{}KLOG-TORN subsys=1 seq=1 at=0x10c8\n{}KLOG-TORN subsys=1 seq=3 at=0x10c8\nKCRASH-PANIC x\n",
            event(1, 0, 0x1088, "zero"),
            event(1, 2, 0x1088, "two"),
        );
        let ring = &derive(&log).unwrap().rings[1];
        assert_eq!(ring.records.len(), 1);
        assert_eq!(ring.damage, [Damage::TornRecord { seq: 3, at: 0x10c8 }]);
    }

    #[test]
    fn events_before_init_land_in_the_none_ring() {
        let log = format!("{HEAD}{}KCRASH-PANIC x\n", event(1, 0, 0x1008, "early"));
        let expected = derive(&log).unwrap();
        assert_eq!(expected.rings[0].records[0].subsystem, 1);
        assert!(expected.rings[1].records.is_empty());
    }

    #[test]
    fn a_missing_event_is_an_error() {
        let log = format!(
            "{HEAD}{}{}KCRASH-PANIC x\n",
            event(1, 0, 0x1088, "zero"),
            event(1, 3, 0x10c8, "three")
        );
        let err = derive(&log).unwrap_err();
        assert!(format!("{err:#}").contains("misses events"), "{err:#}");
    }

    #[test]
    fn bad_lines_are_errors() {
        for bad in [
            "KLOG-EVENT subsys=9 seq=0 at=0x1088 msg=x\n",
            "KLOG-RING subsys=2 name=B num_recs=3 buffer=0x2000\n",
            "KLOG-BOGUS subsys=1\n",
            &event(1, 0, 0x1090, "misaligned"),
            &format!("{}{}", event(1, 0, 0x1088, "a"), event(1, 0, 0x1088, "b")),
        ] {
            assert!(
                derive(&format!("{HEAD}{bad}KCRASH-PANIC x\n")).is_err(),
                "{bad}"
            );
        }
        assert!(derive(HEAD).is_err(), "no panic line");
    }
}
