//! The kernels' oracle: one console line per event, and what it implies for each ring. Every
//! kernel (bare, hosted, hosted-c) prints the same lines.
//!
//! The line format is specified in corpus/README.md ("Oracle lines"): a tag, then
//! space-separated `key=value` fields; `fmt=` is escaped with `char::escape_debug` and spaces
//! as `\u{20}`; `msg=`, if present, is last and runs to the end of the line. For example
//!
//! ```text
//! KLOG-RING  ring=3 name=SCHED num_recs=1024 buffer=0xffffffff80133010
//! KLOG-EVENT ring=3 subsys=3 seq=17 at=0xffffffff80133450 id=0x.. proc_dom=0x.. clock=123 desc=0x.. d1=0x.. d2=0x.. d3=0x.. fmt=.. msg=..
//! KLOG-EVENT ring=8 subsys=3 seq=1 at=0x.. … desc=0x1 desc_kind=event d1=0x.. … fmt=.. msg=..
//! KLOG-TORN  ring=1 subsys=1 seq=300 at=0x..
//! KLOG-DAMAGE ring=2 kind=scribbled field=next_write value=0x..
//! KLOG-DIGEST ring=3 records=.. last_seq=.. fnv1a=0x..
//! KCRASH-PANIC <message>
//! ```

use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;

use crate::expected::{self, Digest, Event, Expected, Record, RecordDamage, Ring, Untrusted};

/// What precedes the panic message on the kernel's last line.
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
pub fn unescape(text: &str) -> Result<String> {
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

/// Derives the expected result from a console log. Each slot of each ring holds the record (or
/// torn reservation) with the highest sequence number that maps to it, and a ring lists its
/// slots by sequence number, oldest first: a ring's sequence numbers come from one fetch-add,
/// while processors may print their lines in another order. A ring whose survivors are not the
/// last `min(written, num_recs)` sequence numbers without a hole is an error: the oracle
/// missed an event.
pub fn derive(console: &str) -> Result<Expected> {
    let mut replay = Replay::default();
    for (index, text) in console.lines().enumerate() {
        let lineno = index + 1;
        if let Some(message) = text.strip_prefix(PANIC_PREFIX) {
            replay.panic = Some(message.to_string());
            continue;
        }
        let Some(line) = Line::parse(text) else {
            continue;
        };
        let line = line.with_context(|| format!("console line {lineno}"))?;
        replay
            .apply(&line)
            .with_context(|| format!("console line {lineno}: {text}"))?;
    }
    replay.finish()
}

/// A ring being rebuilt: its declaration, and its slots by index with what last landed there.
struct RingState {
    name: String,
    num_recs: u64,
    buffer: u64,
    untrusted: Vec<Untrusted>,
    digest: Option<Digest>,
    slots: BTreeMap<u64, Record>,
}

#[derive(Default)]
struct Replay {
    rings: BTreeMap<u64, RingState>,
    clock_hz: Option<u64>,
    panic: Option<String>,
}

impl Replay {
    fn ring(&mut self, line: &Line) -> Result<&mut RingState> {
        let id = line.num("ring")?;
        self.rings
            .get_mut(&id)
            .ok_or_else(|| anyhow!("ring {id} has no KLOG-RING line before it"))
    }

    /// Checks that `at` is slot `seq % num_recs` of the ring (relative to the ring's buffer,
    /// whatever the buffer's own alignment) and lands `record` there unless a newer sequence
    /// number already holds it.
    fn land(&mut self, line: &Line, record: impl FnOnce(u64) -> Record) -> Result<()> {
        let (seq, at) = (line.num("seq")?, line.num("at")?);
        let ring = self.ring(line)?;
        let slot = seq % ring.num_recs;
        if at != ring.buffer + slot * expected::RECORD_BYTES {
            bail!("record {seq} of ring {} cannot be at {at:#x}", ring.name);
        }
        match ring.slots.get(&slot) {
            Some(held) if held.seq == seq => bail!("sequence number {seq} written twice"),
            Some(held) if held.seq > seq => {}
            _ => {
                ring.slots.insert(slot, record(slot));
            }
        }
        Ok(())
    }

    fn apply(&mut self, line: &Line) -> Result<()> {
        match line.tag.as_str() {
            "KLOG-CONFIG" => self.clock_hz = Some(line.num("clock_hz")?),
            "KLOG-RING" => {
                let (id, num_recs) = (line.num("ring")?, line.num("num_recs")?);
                if !num_recs.is_power_of_two() {
                    bail!("num_recs {num_recs} is not a power of two");
                }
                let ring = RingState {
                    name: line.str("name")?.to_string(),
                    num_recs,
                    buffer: line.num("buffer")?,
                    untrusted: Vec::new(),
                    digest: None,
                    slots: BTreeMap::new(),
                };
                if self.rings.insert(id, ring).is_some() {
                    bail!("ring {id} declared twice");
                }
            }
            "KLOG-EVENT" => {
                let subsystem = line.num("subsys")?;
                let subsystem_name = self
                    .rings
                    .get(&subsystem)
                    .ok_or_else(|| anyhow!("subsystem {subsystem} has no KLOG-RING line"))?
                    .name
                    .clone();
                let proc_dom = line.num("proc_dom")?;
                let message = line
                    .msg
                    .clone()
                    .ok_or_else(|| anyhow!("KLOG-EVENT without msg="))?;
                // The desc word's kind, when it is not a format's address.
                let desc_kind = match line.str("desc_kind") {
                    Err(_) => 0,
                    Ok("inline") => 1,
                    Ok("event") => 2,
                    Ok(other) => bail!("unknown desc_kind {other:?}"),
                };
                let words = [
                    expected::header_desc(subsystem, desc_kind),
                    line.num("id")?,
                    proc_dom,
                    line.num("clock")?,
                    line.num("desc")?,
                    line.num("d1")?,
                    line.num("d2")?,
                    line.num("d3")?,
                ];
                let event = Event {
                    subsystem,
                    subsystem_name,
                    header: words[0],
                    id: words[1],
                    // The design's proc_dom word: processor in the upper half, domain below.
                    processor: (proc_dom >> 32) as u32,
                    domain: proc_dom as u32,
                    clock: words[3],
                    desc: words[4],
                    format: line.str("fmt")?.to_string(),
                    args: [words[5], words[6], words[7]],
                    unreadable_at: expected::unreadable_addresses(&message),
                    message,
                    words,
                };
                let seq = line.num("seq")?;
                self.land(line, |slot| Record {
                    seq,
                    slot,
                    damage: Vec::new(),
                    event: Some(event),
                })?;
            }
            "KLOG-TORN" => {
                line.num("subsys")?;
                let seq = line.num("seq")?;
                self.land(line, |slot| Record {
                    seq,
                    slot,
                    damage: vec![RecordDamage::Torn],
                    event: None,
                })?;
            }
            "KLOG-DAMAGE" => {
                let untrusted = match line.str("kind")? {
                    "scribbled" => Untrusted {
                        field: line.str("field")?.to_string(),
                        value: line.num("value")?,
                    },
                    other => bail!("unknown damage kind {other:?}"),
                };
                self.ring(line)?.untrusted.push(untrusted);
            }
            "KLOG-DIGEST" => {
                let digest = Digest {
                    records: line.num("records")?,
                    last_seq: line.num("last_seq")?,
                    fnv1a: line.num("fnv1a")?,
                };
                self.ring(line)?.digest = Some(digest);
            }
            // An event refused while logging was off: it must be in no ring.
            "KLOG-SKIP" => {
                line.num("subsys")?;
                line.str("fmt")?;
            }
            other => bail!("unknown oracle tag {other}"),
        }
        Ok(())
    }

    fn finish(self) -> Result<Expected> {
        let rings = self
            .rings
            .into_iter()
            .map(|(id, ring)| ring.finish(id))
            .collect::<Result<_>>()?;
        Ok(Expected {
            version: expected::VERSION,
            clock_hz: self
                .clock_hz
                .ok_or_else(|| anyhow!("no KLOG-CONFIG line"))?,
            panic: self
                .panic
                .ok_or_else(|| anyhow!("no {PANIC_PREFIX:?} line"))?,
            rings,
        })
    }
}

impl RingState {
    fn finish(self, id: u64) -> Result<Ring> {
        let mut records: Vec<Record> = self.slots.into_values().collect();
        records.sort_by_key(|r| r.seq);
        let (written, held) = match (&self.digest, records.first(), records.last()) {
            (Some(_), Some(_), _) => bail!("ring {}: both a digest and records", self.name),
            (Some(digest), None, _) => (digest.last_seq + 1, digest.records),
            (None, Some(first), Some(last)) => {
                let held = records.len() as u64;
                if last.seq - first.seq + 1 != held || held != (last.seq + 1).min(self.num_recs) {
                    bail!(
                        "ring {}: survivors are sequence numbers {}..={} in {held} slots: the oracle misses events",
                        self.name,
                        first.seq,
                        last.seq
                    );
                }
                (last.seq + 1, held)
            }
            (None, _, _) => (0, 0),
        };
        if held > self.num_recs || held > written {
            bail!(
                "ring {}: {held} records held of {written} written in {} slots",
                self.name,
                self.num_recs
            );
        }
        let torn = records
            .iter()
            .filter(|r| r.damage.contains(&RecordDamage::Torn))
            .count() as u64;
        Ok(Ring {
            ring: id,
            ring_name: self.name,
            num_recs: self.num_recs,
            buffer: self.buffer,
            written,
            held,
            overwritten: written - held,
            torn,
            untrusted: self.untrusted,
            digest: self.digest,
            records,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "KLOG-CONFIG clock_hz=1000\nKLOG-RING ring=0 name=NONE num_recs=2 buffer=0x1008\nKLOG-RING ring=1 name=A num_recs=2 buffer=0x1088\n";

    fn event(ring: u64, subsys: u64, seq: u64, msg: &str) -> String {
        let at = if ring == 0 { 0x1008 } else { 0x1088 } + (seq % 2) * 64;
        format!("KLOG-EVENT ring={ring} subsys={subsys} seq={seq} at={at:#x} id=0x1 proc_dom=0x200000001 clock=5 desc=0x10 d1=0x0 d2=0x0 d3=0x0 fmt=a\\u{{20}}%s msg={msg}\n")
    }

    fn seqs(ring: &Ring) -> Vec<u64> {
        ring.records.iter().map(|r| r.seq).collect()
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
    fn records_carry_kcrash_fields() {
        let log = format!(
            "{HEAD}{}KCRASH-PANIC done\n",
            event(1, 1, 0, "x <unreadable 0xdead>")
        );
        let expected = derive(&log).unwrap();
        assert_eq!(expected.panic, "done");
        let ring = &expected.rings[1];
        let event = ring.records[0].event.as_ref().unwrap();
        assert_eq!((event.processor, event.domain), (2, 1));
        assert_eq!(event.subsystem_name, "A");
        assert_eq!(event.header, 0x4B4C_4F47_0008_0001);
        assert_eq!(event.words[..5], [event.header, 1, 0x2_0000_0001, 5, 0x10]);
        assert_eq!(event.unreadable_at, [0xdead]);
        assert_eq!(
            (ring.written, ring.held, ring.overwritten, ring.torn),
            (1, 1, 0, 0)
        );
    }

    #[test]
    fn survivors_follow_sequence_numbers_not_line_order() {
        let log = |order: [u64; 4]| {
            let lines = order.map(|seq| event(1, 1, seq, &format!("m{seq}")));
            format!("{HEAD}{}KCRASH-PANIC x\n", lines.concat())
        };
        let expected = derive(&log([2, 1, 3, 0])).unwrap();
        let ring = &expected.rings[1];
        assert_eq!(seqs(ring), [2, 3]);
        assert_eq!((ring.written, ring.held, ring.overwritten), (4, 2, 2));
        assert_eq!(derive(&log([0, 1, 2, 3])).unwrap(), expected);
    }

    #[test]
    fn torn_slots_are_records_unless_overwritten() {
        let log = format!(
            "{HEAD}{}KLOG-TORN ring=1 subsys=1 seq=1 at=0x10c8\n{}KLOG-TORN ring=1 subsys=1 seq=3 at=0x10c8\nKCRASH-PANIC x\n",
            event(1, 1, 0, "zero"),
            event(1, 1, 2, "two"),
        );
        let ring = &derive(&log).unwrap().rings[1];
        assert_eq!(seqs(ring), [2, 3]);
        assert_eq!(ring.records[1].damage, [RecordDamage::Torn]);
        assert!(ring.records[1].event.is_none());
        assert_eq!(ring.torn, 1);
    }

    #[test]
    fn events_before_init_land_in_the_none_ring() {
        let log = format!("{HEAD}{}KCRASH-PANIC x\n", event(0, 1, 0, "early"));
        let expected = derive(&log).unwrap();
        assert_eq!(
            expected.rings[0].records[0]
                .event
                .as_ref()
                .unwrap()
                .subsystem,
            1
        );
        assert!(expected.rings[1].records.is_empty());
    }

    #[test]
    fn scribbled_fields_make_the_ring_untrusted() {
        let log = format!("{HEAD}KLOG-DAMAGE ring=1 kind=scribbled field=next_write value=0xdead\nKCRASH-PANIC x\n");
        let ring = &derive(&log).unwrap().rings[1];
        assert_eq!(
            ring.untrusted,
            [Untrusted {
                field: "next_write".into(),
                value: 0xdead
            }]
        );
    }

    #[test]
    fn bad_logs_are_errors() {
        for bad in [
            // an undeclared ring
            "KLOG-EVENT ring=9 subsys=1 seq=0 at=0x1088 msg=x\n".to_string(),
            // not a power of two
            "KLOG-RING ring=2 name=B num_recs=3 buffer=0x2000\n".to_string(),
            "KLOG-BOGUS ring=1\n".to_string(),
            // the wrong slot for its sequence number
            event(1, 1, 1, "x").replace("0x10c8", "0x1088"),
            // written twice
            format!("{}{}", event(1, 1, 0, "a"), event(1, 1, 0, "b")),
            // a hole: seq 1 missing
            format!("{}{}", event(1, 1, 0, "a"), event(1, 1, 2, "c")),
        ] {
            assert!(
                derive(&format!("{HEAD}{bad}KCRASH-PANIC x\n")).is_err(),
                "{bad}"
            );
        }
        assert!(derive(HEAD).is_err(), "no panic line");
    }
}
