//! `expected.json`: what a reader of one crash's dumps must report, in the shape of kcrash's
//! `klog --json` records so that a consumer compares field by field. The shape and the
//! comparison rules are documented in corpus/README.md ("expected.json").

use serde::{Deserialize, Serialize};

/// Schema version of `expected.json`.
pub const VERSION: u32 = 2;

/// Bytes per record: 8 words (the design's KLogRec).
pub const RECORD_BYTES: u64 = 64;

/// `"KLOG"` in the upper half of a record header (klog-runtime's README, "The on-dump contract").
const HEADER_MAGIC: u64 = 0x4B4C_4F47;
/// Words per record, in bits 16..32 of its header.
const RECORD_WORDS: u64 = 8;

/// The header word of a whole record logged by `subsystem`, as the design defines it.
pub fn header(subsystem: u64) -> u64 {
    header_desc(subsystem, 0)
}

/// The header of a record whose desc word is of kind `desc` (0 an address, 1 inline text, 2 an
/// event ID: the DESC byte, bits 24..32).
pub fn header_desc(subsystem: u64, desc: u64) -> u64 {
    (HEADER_MAGIC << 32) | (desc << 24) | (RECORD_WORDS << 16) | subsystem
}

/// The expected result of one crash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expected {
    pub version: u32,
    /// What the kernel stored in klogClockHz.
    pub clock_hz: u64,
    /// The panic message (the `KCRASH-PANIC` line).
    pub panic: String,
    /// Every ring, in subsystem order.
    pub rings: Vec<Ring>,
}

/// What a reader must find in one ring.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ring {
    /// The ring's index in KLogs (kcrash's `ring`).
    pub ring: u64,
    /// kcrash's `ring_name`.
    pub ring_name: String,
    pub num_recs: u64,
    /// Virtual address of the ring's first record after klog_init.
    pub buffer: u64,
    /// Records ever written to the ring: the newest sequence number + 1.
    pub written: u64,
    /// Slots that hold a record or a torn reservation: `records.len()` (or the digest's count).
    pub held: u64,
    /// Records written but overwritten by later laps: `written - held`.
    pub overwritten: u64,
    /// Held slots whose writer never finished (damage `torn`).
    pub torn: u64,
    /// KLogs fields the kernel scribbled over: a reader must report the ring untrusted, naming
    /// the field; `records` are what KLogBuffer still holds, for a salvaging reader.
    pub untrusted: Vec<Untrusted>,
    /// For rings too big to list: a digest of the held records (`records` is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    /// The held slots by sequence number, oldest first.
    pub records: Vec<Record>,
}

impl Expected {
    /// The ring called `name`.
    pub fn ring_named(&self, name: &str) -> Option<&Ring> {
        self.rings.iter().find(|r| r.ring_name == name)
    }
}

impl Ring {
    /// The whole records' events, oldest first.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.records.iter().filter_map(|r| r.event.as_ref())
    }

    /// The sequence numbers of the held slots, oldest first.
    pub fn seqs(&self) -> Vec<u64> {
        self.records.iter().map(|r| r.seq).collect()
    }

    /// The held slots whose writer never finished.
    pub fn torn_seqs(&self) -> Vec<u64> {
        self.records
            .iter()
            .filter(|r| r.damage.contains(&RecordDamage::Torn))
            .map(|r| r.seq)
            .collect()
    }

    /// Address of slot `slot`.
    pub fn slot_address(&self, slot: u64) -> u64 {
        self.buffer + slot * RECORD_BYTES
    }
}

/// A KLogs field overwritten with `value`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Untrusted {
    pub field: String,
    pub value: u64,
}

/// Digest of a big ring's held records: FNV-1a 64 over the little-endian bytes of their eight
/// words, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    pub records: u64,
    pub last_seq: u64,
    pub fnv1a: u64,
}

/// The digest's hash: FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3) over
/// the little-endian bytes of words fed in order.
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    pub fn words(&mut self, words: &[u64]) {
        for byte in words.iter().flat_map(|w| w.to_le_bytes()) {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// One held slot, keyed by (ring, seq) like kcrash's records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub seq: u64,
    /// `seq % num_recs`.
    pub slot: u64,
    /// kcrash's damage names: empty for a whole record, `["torn"]` for a torn reservation.
    pub damage: Vec<RecordDamage>,
    /// The whole record's fields; absent for a torn one (its header is 0, its other words
    /// are whatever the slot held before).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub event: Option<Event>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordDamage {
    Torn,
}

/// A whole record as the kernel meant it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Subsystem that logged it (differs from `ring` for events logged before klog_init,
    /// which all land in NONE's ring).
    pub subsystem: u64,
    pub subsystem_name: String,
    pub header: u64,
    pub id: u64,
    pub processor: u32,
    pub domain: u32,
    pub clock: u64,
    pub desc: u64,
    /// The printf format string `desc` points at.
    pub format: String,
    /// The three data words.
    pub args: [u64; 3],
    /// The message the kernel meant, formatted by the kernel (core::fmt, format!, snprintf).
    /// A `%s` argument a dump cannot hold is `<unreadable 0xADDR>`; kcrash writes
    /// `<unreadable 0xADDR: reason>`.
    pub message: String,
    /// Addresses of the `%s` arguments a dump cannot hold, in message order (kcrash's
    /// `unreadable_strings` is their count).
    pub unreadable_at: Vec<u64>,
    /// The eight words: header, id, proc_dom, clock, desc, args.
    pub words: [u64; 8],
}

/// `<unreadable 0xADDR>` in an expected message.
pub fn unreadable_marker(address: u64) -> String {
    format!("<unreadable {address:#x}>")
}

/// The addresses of the `<unreadable 0x…>` markers in a message, in order.
pub fn unreadable_addresses(message: &str) -> Vec<u64> {
    message
        .split("<unreadable 0x")
        .skip(1)
        .filter_map(|rest| u64::from_str_radix(rest.split('>').next()?, 16).ok())
        .collect()
}

/// Whether kcrash's rendering of a message matches the expected one: equal once each
/// `<unreadable 0xADDR: reason>` of `kcrash` drops its `: reason`, so the address is compared
/// and the reason text is not pinned.
pub fn message_matches(expected: &str, kcrash: &str) -> bool {
    let mut rest = kcrash;
    let mut normalised = String::with_capacity(kcrash.len());
    while let Some(start) = rest.find("<unreadable 0x") {
        normalised.push_str(&rest[..start]);
        let marker = &rest[start..];
        let Some(end) = marker.find('>') else {
            normalised.push_str(marker);
            rest = "";
            break;
        };
        let body = &marker[..end];
        normalised.push_str(body.split_once(": ").map_or(body, |(address, _)| address));
        normalised.push('>');
        rest = &marker[end + 1..];
    }
    normalised.push_str(rest);
    normalised == expected
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_markers_match_by_address_not_reason() {
        let expected = format!("open {} now", unreadable_marker(0xdead0000));
        assert!(message_matches(
            &expected,
            "open <unreadable 0xdead0000: not in dump> now"
        ));
        assert!(!message_matches(
            &expected,
            "open <unreadable 0xdead1000: not in dump> now"
        ));
        assert!(!message_matches(&expected, "open /etc/motd now"));
        assert!(message_matches("plain", "plain"));
        assert_eq!(
            unreadable_addresses(&format!(
                "a {} b {}",
                unreadable_marker(0x7f00),
                unreadable_marker(0x10)
            )),
            [0x7f00, 0x10]
        );
        assert!(unreadable_addresses("none").is_empty());
    }

    #[test]
    fn torn_records_carry_no_event_fields() {
        let torn = Record {
            seq: 3,
            slot: 1,
            damage: vec![RecordDamage::Torn],
            event: None,
        };
        let json = serde_json::to_value(&torn).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"seq": 3, "slot": 1, "damage": ["torn"]})
        );
        assert_eq!(serde_json::from_value::<Record>(json).unwrap(), torn);
    }
}
