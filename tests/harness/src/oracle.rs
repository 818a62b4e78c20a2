//! The kernels' oracle: one console line per event, and what it implies for each ring.
//!
//! The line format is specified in tests/kernels/README.md ("Oracle lines"): a tag, then
//! space-separated `key=value` fields; `fmt=` is escaped with `char::escape_debug` and spaces
//! as `\u{20}`; `msg=`, if present, is last and runs to the end of the line. For example
//!
//! ```text
//! KLOG-RING  ring=3 name=SCHED num_recs=1024 buffer=0xffffffff80133010
//! KLOG-EVENT ring=3 subsys=3 seq=17 at=0xffffffff80133450 id=0x.. proc_dom=0x.. clock=123 desc=0x.. d1=0x.. d2=0x.. d3=0x.. fmt=.. msg=..
//! KLOG-TORN  ring=1 subsys=1 seq=300 at=0x..
//! KLOG-DAMAGE ring=2 kind=scribbled field=next_write value=0x..
//! KLOG-DIGEST ring=3 records=.. last_seq=.. fnv1a=0x..
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
    /// The ring's subsystem id (its index in KLogs).
    pub subsystem: u64,
    pub name: String,
    pub num_recs: u64,
    /// Virtual address of the ring's first record after klog_init.
    pub buffer: u64,
    /// Records ever written to the ring (`next_write / 8` unless damaged).
    pub written: u64,
    /// The slots a reader must find, oldest first: records, and torn slots.
    pub records: Vec<Slot>,
    /// Damage to the ring's KLogs entry that a reader must report.
    pub damage: Vec<Damage>,
    /// For rings too big to list: a digest of the records instead (records is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
}

/// One slot of a ring as the kernel left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Slot {
    Record(ExpectedRecord),
    /// A writer reserved this slot (sequence `seq`) and died after zeroing its header: the
    /// slot holds header 0 and whatever words it held before.
    Torn {
        seq: u64,
        slot: u64,
        at: u64,
    },
}

/// One record as the kernel meant it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedRecord {
    /// Sequence number in the ring (what the KLOG macro returned).
    pub seq: u64,
    /// Index of the record in the ring: `seq % num_recs`.
    pub slot: u64,
    /// Address of the record.
    pub at: u64,
    /// Subsystem that logged it (differs from the ring's for events logged before klog_init,
    /// which all land in NONE's ring).
    pub subsystem: u64,
    pub id: u64,
    pub proc_dom: u64,
    pub clock: u64,
    pub desc: u64,
    pub data: [u64; 3],
    /// The printf format string `desc` points at.
    pub format: String,
    /// The message as the kernel formatted it with core::fmt. An unreadable `%s` argument
    /// appears as `<unreadable 0x...>`; kcrash adds its reason before the `>`.
    pub message: String,
}

/// Damage to a ring's KLogs entry that a reader must notice and report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Damage {
    /// The KLogs entry's `field` was overwritten with `value`; KLogBuffer is intact, so the
    /// records are still there for a salvaging reader.
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
    /// What the kernel stored in klogClockHz.
    pub clock_hz: u64,
    /// The panic message.
    pub panic: String,
    pub rings: Vec<ExpectedRing>,
}

/// Derives the expected result from a console log: each slot of each ring holds the record
/// (or torn reservation) with the highest sequence number that maps to it, and a ring lists
/// its slots by sequence number, oldest first. Sequence numbers, not line order, decide: a
/// ring's sequence numbers come from one fetch-add, while processors may print their lines
/// in another order.
pub fn derive(console: &str) -> Result<Expected> {
    let mut state = Replay::default();
    for (index, text) in console.lines().enumerate() {
        let lineno = index + 1;
        if let Some(message) = text.strip_prefix(crate::qemu::PANIC_LINE_PREFIX) {
            state.panic = Some(message.to_string());
            continue;
        }
        let Some(line) = Line::parse(text) else {
            continue;
        };
        let line = line.with_context(|| format!("console line {lineno}"))?;
        state
            .apply(&line)
            .with_context(|| format!("console line {lineno}: {text}"))?;
    }
    state.finish()
}

#[derive(Default)]
struct Replay {
    rings: BTreeMap<u64, ExpectedRing>,
    /// The newest write to each (ring, slot), with its sequence number.
    slots: HashMap<(u64, u64), (u64, Slot)>,
    clock_hz: Option<u64>,
    panic: Option<String>,
}

impl Replay {
    fn ring(&mut self, line: &Line) -> Result<&mut ExpectedRing> {
        let id = line.num("ring")?;
        self.rings
            .get_mut(&id)
            .ok_or_else(|| anyhow!("ring {id} has no KLOG-RING line before it"))
    }

    /// Checks that `at` is record `seq` of `ring` and counts the write.
    fn place(&mut self, line: &Line) -> Result<(u64, u64)> {
        let (seq, at) = (line.num("seq")?, line.num("at")?);
        let ring = self.ring(line)?;
        let slot = seq % ring.num_recs;
        if at != ring.buffer + slot * RECORD_BYTES {
            bail!("record {seq} of ring {} cannot be at {at:#x}", ring.name);
        }
        ring.written = ring.written.max(seq + 1);
        Ok((seq, slot))
    }

    /// Keeps `slot` at (`ring`, `index`) unless a newer sequence number already holds it.
    fn store(&mut self, ring: u64, index: u64, seq: u64, slot: Slot) -> Result<()> {
        match self.slots.get(&(ring, index)) {
            Some((held, _)) if *held == seq => {
                bail!("sequence number {seq} of ring {ring} written twice")
            }
            Some((held, _)) if *held > seq => {}
            _ => {
                self.slots.insert((ring, index), (seq, slot));
            }
        }
        Ok(())
    }

    fn apply(&mut self, line: &Line) -> Result<()> {
        match line.tag.as_str() {
            "KLOG-CONFIG" => self.clock_hz = Some(line.num("clock_hz")?),
            "KLOG-RING" => {
                let (subsystem, num_recs) = (line.num("ring")?, line.num("num_recs")?);
                if !num_recs.is_power_of_two() {
                    bail!("num_recs {num_recs} is not a power of two");
                }
                let ring = ExpectedRing {
                    subsystem,
                    name: line.str("name")?.to_string(),
                    num_recs,
                    buffer: line.num("buffer")?,
                    written: 0,
                    records: Vec::new(),
                    damage: Vec::new(),
                    digest: None,
                };
                if self.rings.insert(subsystem, ring).is_some() {
                    bail!("ring {subsystem} declared twice");
                }
            }
            "KLOG-EVENT" => {
                let (seq, slot) = self.place(line)?;
                let at = line.num("at")?;
                let record = ExpectedRecord {
                    seq,
                    slot,
                    at,
                    subsystem: line.num("subsys")?,
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
                self.store(line.num("ring")?, slot, seq, Slot::Record(record))?;
            }
            "KLOG-TORN" => {
                let (seq, slot) = self.place(line)?;
                let at = line.num("at")?;
                self.store(line.num("ring")?, slot, seq, Slot::Torn { seq, slot, at })?;
            }
            "KLOG-DAMAGE" => {
                let damage = match line.str("kind")? {
                    "scribbled" => Damage::Scribbled {
                        field: line.str("field")?.to_string(),
                        value: line.num("value")?,
                    },
                    other => bail!("unknown damage kind {other:?}"),
                };
                self.ring(line)?.damage.push(damage);
            }
            "KLOG-DIGEST" => {
                let digest = Digest {
                    records: line.num("records")?,
                    last_seq: line.num("last_seq")?,
                    fnv1a: line.num("fnv1a")?,
                };
                let ring = self.ring(line)?;
                ring.written = ring.written.max(digest.last_seq + 1);
                ring.digest = Some(digest);
            }
            // An event refused while logging was off: it must be in no ring.
            "KLOG-SKIP" => {
                line.num("subsys")?;
            }
            other => bail!("unknown oracle tag {other}"),
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Expected> {
        let mut slots: Vec<((u64, u64), (u64, Slot))> = self.slots.into_iter().collect();
        slots.sort_by_key(|((ring, _), (seq, _))| (*ring, *seq));
        for ((ring, _), (_, slot)) in slots {
            self.rings
                .get_mut(&ring)
                .expect("placed in a declared ring")
                .records
                .push(slot);
        }
        Ok(Expected {
            version: 1,
            clock_hz: self
                .clock_hz
                .ok_or_else(|| anyhow!("no KLOG-CONFIG line"))?,
            panic: self
                .panic
                .ok_or_else(|| anyhow!("no {:?} line", crate::qemu::PANIC_LINE_PREFIX))?,
            rings: self.rings.into_values().collect(),
        })
    }
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
    fn later_writes_replace_earlier_ones_and_torn_slots_are_kept() {
        let log = "\
KLOG-CONFIG clock_hz=1000
KLOG-RING ring=1 name=A num_recs=2 buffer=0x1000
KLOG-EVENT ring=1 subsys=1 seq=0 at=0x1000 id=1 proc_dom=0 clock=1 desc=0x10 d1=0 d2=0 d3=0 fmt=a msg=a
KLOG-EVENT ring=1 subsys=1 seq=1 at=0x1040 id=1 proc_dom=0 clock=2 desc=0x10 d1=0 d2=0 d3=0 fmt=b msg=b
KLOG-EVENT ring=1 subsys=1 seq=2 at=0x1000 id=1 proc_dom=0 clock=3 desc=0x10 d1=0 d2=0 d3=0 fmt=c msg=c
KLOG-TORN ring=1 subsys=1 seq=3 at=0x1040
KCRASH-PANIC torn
";
        let expected = derive(log).unwrap();
        let ring = &expected.rings[0];
        assert_eq!(ring.written, 4);
        assert!(matches!(&ring.records[0], Slot::Record(r) if r.message == "c" && r.slot == 0));
        assert_eq!(
            ring.records[1],
            Slot::Torn {
                seq: 3,
                slot: 1,
                at: 0x1040
            }
        );
        assert_eq!(ring.records.len(), 2);
        assert_eq!(expected.panic, "torn");
    }

    #[test]
    fn sequence_numbers_not_line_order_decide() {
        let head = "KLOG-CONFIG clock_hz=1\nKLOG-RING ring=1 name=A num_recs=2 buffer=0x1000\n";
        let event = |seq: u64| {
            let at = 0x1000 + (seq % 2) * 64;
            format!("KLOG-EVENT ring=1 subsys=1 seq={seq} at={at:#x} id=1 proc_dom=0 clock={seq} desc=0 d1=0 d2=0 d3=0 fmt=f msg=m{seq}\n")
        };
        let in_order: String = [0, 1, 2, 3, 4].map(event).concat();
        let shuffled: String = [3, 0, 4, 2, 1].map(event).concat();
        let a = derive(&format!("{head}{in_order}KCRASH-PANIC x\n")).unwrap();
        let b = derive(&format!("{head}{shuffled}KCRASH-PANIC x\n")).unwrap();
        assert_eq!(a, b);
        let seqs: Vec<u64> = a.rings[0]
            .records
            .iter()
            .map(|s| match s {
                Slot::Record(r) => r.seq,
                Slot::Torn { seq, .. } => *seq,
            })
            .collect();
        assert_eq!(seqs, [3, 4]);
        let twice = format!("{head}{}{}KCRASH-PANIC x\n", event(1), event(1));
        assert!(derive(&twice).is_err(), "a sequence number written twice");
    }

    #[test]
    fn a_record_at_the_wrong_slot_is_an_error() {
        let log = "\
KLOG-CONFIG clock_hz=1
KLOG-RING ring=1 name=A num_recs=2 buffer=0x1000
KLOG-EVENT ring=1 subsys=1 seq=1 at=0x1000 id=1 proc_dom=0 clock=1 desc=0 d1=0 d2=0 d3=0 fmt=a msg=a
KCRASH-PANIC x
";
        assert!(derive(log).is_err());
    }

    #[test]
    fn events_for_undeclared_rings_are_errors() {
        let log =
            "KLOG-CONFIG clock_hz=1\nKLOG-EVENT ring=9 subsys=9 seq=0 at=0 msg=x\nKCRASH-PANIC x\n";
        assert!(derive(log).is_err());
    }
}
