//! The on-dump record format: the contract between every KLog writer (this crate, C kernels using
//! `include/klog.h`) and every reader (kcrash).
//!
//! A ring is an array of 64-bit words; a record is [`REC_WORDS`] consecutive words laid out as
//! [`KLogRec`]. The first word is the header:
//!
//! ```text
//!  63            32 31      24 23      16 15          0
//! +----------------+----------+----------+-------------+
//! | MAGIC "KLOG"   | DESC     | RECSIZE 8| subsystem   |
//! +----------------+----------+----------+-------------+
//! ```
//!
//! DESC says what the record's `desc` word is ([`Desc`]): 0, the address of a NUL-terminated
//! printf format (the design's choice); 1, the description itself, up to 8 bytes of text in the
//! word's bytes as memory holds them, NUL-padded (the design's appendix A.1 "short 8 character
//! trace description"); 2, a minor event ID, the index of the format in the kernel's
//! `KLogDescriptions` table (A.1's "minor event ID"). A reader that does not know a DESC value
//! treats the header as invalid rather than guess.
//!
//! A writer reserves a record by one atomic fetch-add of `rec_size` on its ring's `next_write`,
//! stores 0 in the record's header word, stores the other seven words, then stores the real header
//! last with release ordering. A reader that finds header 0 knows the writer was interrupted.

/// Upper 32 bits of every record header: ASCII "KLOG".
pub const MAGIC: u64 = 0x4B4C_4F47;
/// Words per record, as the design hard-codes it.
pub const REC_WORDS: u64 = 8;
/// The header word of a record whose writer had reserved it but not finished it.
pub const TORN_HEADER: u64 = 0;
/// Subsystem ids occupy the low 16 bits of the header.
pub const MAX_SUBSYSTEMS: usize = 1 << 16;

/// One event record, exactly as it sits in a ring (`KLogRec` of the design).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KLogRec {
    /// `MAGIC:RECSIZE:subsystem`, see [`encode_header`].
    pub header: u64,
    /// The logging chore or thread (`thisChore()`).
    pub id: u64,
    /// `thisProcessor():thisDomain()`, see [`proc_dom`].
    pub proc_dom: u64,
    /// Timestamp from the platform clock, in ticks of `klogClockHz`.
    pub clock: u64,
    /// The printf format: its address, its text or its event ID, as the header's DESC says.
    pub desc: u64,
    pub data1: u64,
    pub data2: u64,
    pub data3: u64,
}

impl KLogRec {
    /// The record in its on-dump word order.
    pub const fn to_words(&self) -> [u64; REC_WORDS as usize] {
        [
            self.header,
            self.id,
            self.proc_dom,
            self.clock,
            self.desc,
            self.data1,
            self.data2,
            self.data3,
        ]
    }

    /// A record from its on-dump words.
    pub const fn from_words(w: [u64; REC_WORDS as usize]) -> Self {
        KLogRec {
            header: w[0],
            id: w[1],
            proc_dom: w[2],
            clock: w[3],
            desc: w[4],
            data1: w[5],
            data2: w[6],
            data3: w[7],
        }
    }
}

/// What a record's `desc` word holds (the DESC byte of its header).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Desc {
    /// The address of a NUL-terminated printf format.
    Pointer = 0,
    /// Up to 8 bytes of format text in the word itself, NUL-padded.
    Inline = 1,
    /// An index into the kernel's `KLogDescriptions` table of format addresses.
    Event = 2,
}

impl Desc {
    pub const fn from_u8(v: u8) -> Option<Desc> {
        match v {
            0 => Some(Desc::Pointer),
            1 => Some(Desc::Inline),
            2 => Some(Desc::Event),
            _ => None,
        }
    }
}

/// The header word a writer stores last for an event of `subsystem` whose `desc` is a format's
/// address.
pub const fn encode_header(subsystem: u16) -> u64 {
    encode_header_desc(subsystem, Desc::Pointer)
}

/// The header word of an event of `subsystem` whose `desc` word holds `desc`.
pub const fn encode_header_desc(subsystem: u16, desc: Desc) -> u64 {
    (MAGIC << 32) | ((desc as u64) << 24) | (REC_WORDS << 16) | subsystem as u64
}

/// What a header word says about its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    /// A complete record of this subsystem.
    Valid { subsystem: u16, desc: Desc },
    /// Header 0: the writer reserved the slot and was interrupted before finishing.
    Torn,
    /// Neither: the slot was never written, or was overwritten by something else. `rec_size`
    /// is bits 16..32: the record size with the DESC byte above it.
    Invalid { magic: u32, rec_size: u16 },
}

/// Reads a header word. Only `MAGIC` with a record size of [`REC_WORDS`] and a known DESC is
/// valid.
pub const fn decode_header(word: u64) -> Header {
    if word == TORN_HEADER {
        return Header::Torn;
    }
    let magic = (word >> 32) as u32;
    let rec_size = (word >> 16) as u16;
    let desc = Desc::from_u8((rec_size >> 8) as u8);
    match desc {
        Some(desc) if magic as u64 == MAGIC && (rec_size & 0xff) as u64 == REC_WORDS => {
            Header::Valid {
                subsystem: word as u16,
                desc,
            }
        }
        _ => Header::Invalid { magic, rec_size },
    }
}

/// The `desc` word of an inline description: its bytes in memory order, NUL-padded. Fails to
/// compile (in a const) when the text is longer than 8 bytes.
pub const fn inline_desc(text: &[u8]) -> u64 {
    assert!(
        text.len() <= 8,
        "an inline description holds at most 8 bytes"
    );
    let mut b = [0u8; 8];
    let mut i = 0;
    while i < text.len() {
        b[i] = text[i];
        i += 1;
    }
    u64::from_ne_bytes(b)
}

/// Packs `thisProcessor():thisDomain()` into the `proc_dom` word: processor in the upper half.
pub const fn proc_dom(processor: u32, domain: u32) -> u64 {
    ((processor as u64) << 32) | domain as u64
}

/// Splits a `proc_dom` word into (processor, domain).
pub const fn split_proc_dom(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

/// Logging levels of the design (`KLOG_OFF` … `KLOG_PROLOG`); `klogLevel` holds one of them.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Off = 0,
    Terse = 1,
    Verbose = 2,
    Prolog = 3,
}

pub const KLOG_OFF: Level = Level::Off;
pub const KLOG_TERSE: Level = Level::Terse;
pub const KLOG_VERBOSE: Level = Level::Verbose;
pub const KLOG_PROLOG: Level = Level::Prolog;
/// One past the last level (the design's `KLOG_ALL`).
pub const KLOG_ALL: u32 = 4;

impl Level {
    /// The level with this number, as stored in `klogLevel`.
    pub const fn from_u32(v: u32) -> Option<Level> {
        match v {
            0 => Some(Level::Off),
            1 => Some(Level::Terse),
            2 => Some(Level::Verbose),
            3 => Some(Level::Prolog),
            _ => None,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Level::Off => "OFF",
            Level::Terse => "TERSE",
            Level::Verbose => "VERBOSE",
            Level::Prolog => "PROLOG",
        }
    }
}

/// Bits of a `Dbg_Intensity` word (the C bit-fields `d_prolog:1 … d_klogprintf:1`, LSB first).
pub mod intensity {
    /// Log function entry/exit.
    pub const D_PROLOG: u32 = 1 << 0;
    /// Important trace messages.
    pub const D_TERSE: u32 = 1 << 1;
    /// Detailed trace messages.
    pub const D_VERBOSE: u32 = 1 << 2;
    /// Record this subsystem's events in its ring.
    pub const D_KLOG: u32 = 1 << 3;
    /// Print this subsystem's events on the console too (when the level's intensity bit is set).
    pub const D_KLOGPRINTF: u32 = 1 << 4;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_for_every_subsystem() {
        for s in 0..=u16::MAX {
            let h = encode_header(s);
            assert_eq!(h >> 32, 0x4B4C4F47);
            assert_eq!((h >> 16) & 0xffff, 8);
            assert_eq!(
                decode_header(h),
                Header::Valid {
                    subsystem: s,
                    desc: Desc::Pointer
                }
            );
        }
    }

    #[test]
    fn desc_kinds_round_trip_and_unknown_ones_are_invalid() {
        for desc in [Desc::Pointer, Desc::Inline, Desc::Event] {
            let h = encode_header_desc(7, desc);
            assert_eq!(decode_header(h), Header::Valid { subsystem: 7, desc });
        }
        assert!(matches!(
            decode_header((MAGIC << 32) | (3 << 24) | (8 << 16) | 7),
            Header::Invalid { .. }
        ));
    }

    #[test]
    fn inline_descriptions_are_memory_ordered_text() {
        assert_eq!(inline_desc(b"pf %lx").to_ne_bytes(), *b"pf %lx\0\0");
        assert_eq!(inline_desc(b"").to_ne_bytes(), [0; 8]);
    }

    #[test]
    fn header_bytes_spell_klog() {
        // Big-endian bytes of the upper half read "KLOG"; a hex dump of a ring shows it.
        assert_eq!(&((encode_header(3) >> 32) as u32).to_be_bytes(), b"KLOG");
    }

    #[test]
    fn torn_and_invalid_headers() {
        assert_eq!(decode_header(0), Header::Torn);
        assert_eq!(
            decode_header(0xdead_beef_0008_0001),
            Header::Invalid {
                magic: 0xdead_beef,
                rec_size: 8
            }
        );
        assert_eq!(
            decode_header((MAGIC << 32) | (4 << 16) | 1),
            Header::Invalid {
                magic: MAGIC as u32,
                rec_size: 4
            }
        );
    }

    #[test]
    fn proc_dom_round_trip() {
        assert_eq!(split_proc_dom(proc_dom(5, 0x5000_0010)), (5, 0x5000_0010));
    }

    #[test]
    fn record_words_round_trip() {
        let r = KLogRec {
            header: encode_header(2),
            id: 1,
            proc_dom: 2,
            clock: 3,
            desc: 4,
            data1: 5,
            data2: 6,
            data3: 7,
        };
        assert_eq!(KLogRec::from_words(r.to_words()), r);
        assert_eq!(core::mem::size_of::<KLogRec>(), 64);
    }
}
