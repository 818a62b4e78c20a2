//! `klog --salvage`: records found by their headers rather than through the control blocks —
//! in KLogBuffer when the layout is known, anywhere in the dump's memory when it is not.

use std::ops::ControlFlow;

use klog_runtime::{decode_header, Header, REC_WORDS};

use super::ring::{Damage, Order, Record};
use super::Klog;
use kcrash_plugin::memory::{Memory, Unreadable};

/// The most records a scan of the whole dump collects (64 MiB of them).
pub const MAX_RECORDS: usize = 1 << 20;

impl Klog {
    /// `klog --salvage`: every slot of KLogBuffer that holds a valid KLOG header, whatever the
    /// control blocks say, grouped by subsystem and ordered by clock. Collects, since it has no
    /// ring order to stream in; KLogBuffer's size comes from the image, not the dump.
    pub fn salvage(&self, mem: &dyn Memory, order: Order) -> Salvage {
        let base = self.layout.buffer.addr;
        let slots = self.layout.buffer_bytes() / (REC_WORDS * 8);
        let mut groups: Vec<Vec<Record>> = vec![Vec::new(); self.shape.subsystems as usize];
        let mut unreadable = Vec::new();
        let mut foreign = 0u64;
        const STEP: u64 = 256;
        let mut bytes = vec![0u8; (STEP * REC_WORDS * 8) as usize];
        let mut slot = 0;
        let mut in_hole = false;
        while slot < slots {
            let n = STEP.min(slots - slot);
            let buf = &mut bytes[..(n * REC_WORDS * 8) as usize];
            let addr = base.wrapping_add(slot * REC_WORDS * 8);
            if let Err(e) = mem.read(addr, buf) {
                // One line per unreadable stretch, not per chunk.
                if !in_hole {
                    unreadable.push(e);
                }
                in_hole = true;
                slot += n;
                continue;
            }
            in_hole = false;
            for (i, rec) in buf.chunks_exact((REC_WORDS * 8) as usize).enumerate() {
                let words: [u64; 8] = std::array::from_fn(|w| {
                    u64::from_le_bytes(rec[w * 8..w * 8 + 8].try_into().unwrap_or_default())
                });
                if let Some(rec) = record(slot + i as u64, words) {
                    match groups.get_mut(rec.ring) {
                        Some(group) => group.push(rec),
                        None => foreign += 1,
                    }
                }
            }
            slot += n;
        }
        Salvage {
            groups: in_clock_order(groups, order),
            unreadable,
            unknown_subsystem: foreign,
            capped: false,
        }
    }
}

/// Each group ordered by clock (slot breaking ties), in `order`.
fn in_clock_order(mut groups: Vec<Vec<Record>>, order: Order) -> Vec<Vec<Record>> {
    for g in &mut groups {
        g.sort_by_key(|r| (r.clock(), r.slot));
        if order == Order::NewestFirst {
            g.reverse();
        }
    }
    groups
}

/// A salvaged record in slot `slot` (of KLogBuffer, or of all memory), grouped by the subsystem
/// its header names, if the header is a valid one.
fn record(slot: u64, words: [u64; 8]) -> Option<Record> {
    let Header::Valid { subsystem, desc } = decode_header(words[0]) else {
        return None;
    };
    Some(Record {
        ring: subsystem as usize,
        seq: slot,
        slot,
        words,
        subsystem: Some(subsystem),
        desc_kind: desc,
        damage: Damage::default(),
        unreadable: None,
        sort_clock: words[3],
    })
}

/// Every 64-byte-aligned record with a valid header anywhere in the dump's memory (physical for
/// a kernel dump), grouped by the subsystem its header names and ordered by clock. The header's
/// upper four bytes ("KLOG") are what is searched for, so that records of every description
/// kind are found; the record size and the kind are checked after.
pub fn anywhere(dump: &dumpfmt::Dump, order: Order) -> Salvage {
    let header = klog_runtime::encode_header(0).to_le_bytes();
    let needle = &header[4..];
    let mut groups: Vec<Vec<Record>> = Vec::new();
    let mut count = 0usize;
    let mut unreadable = Vec::new();
    let read = |at: u64, buf: &mut [u8]| {
        if dump.searched_by_virtual_address() {
            dump.read_dump_mapping(at, buf)
                .map_err(|e| e.to_string())
                .and_then(|n| {
                    (n == buf.len())
                        .then_some(())
                        .ok_or_else(|| "not in the core".to_owned())
                })
        } else {
            dump.read_phys(at, buf).map_err(|e| e.to_string())
        }
    };
    dump.search(needle, 4, &mut |at| {
        let Some(slot) = at.checked_sub(4).filter(|s| s % (REC_WORDS * 8) == 0) else {
            return ControlFlow::Continue(());
        };
        let mut bytes = [0u8; (REC_WORDS * 8) as usize];
        if let Err(reason) = read(slot, &mut bytes) {
            unreadable.push(Unreadable { addr: slot, reason });
            return ControlFlow::Continue(());
        }
        let words: [u64; 8] = std::array::from_fn(|w| {
            u64::from_le_bytes(bytes[w * 8..w * 8 + 8].try_into().unwrap_or_default())
        });
        if let Some(rec) = record(slot / (REC_WORDS * 8), words) {
            let id = rec.ring;
            if groups.len() <= id {
                groups.resize_with(id + 1, Vec::new);
            }
            groups[id].push(rec);
            count += 1;
        }
        if count >= MAX_RECORDS {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    Salvage {
        groups: in_clock_order(groups, order),
        unreadable,
        unknown_subsystem: 0,
        capped: count >= MAX_RECORDS,
    }
}

/// What `klog --salvage` found.
pub struct Salvage {
    /// Records by subsystem id.
    pub groups: Vec<Vec<Record>>,
    /// Parts of KLogBuffer that could not be read.
    pub unreadable: Vec<Unreadable>,
    /// Valid headers naming a subsystem this kernel does not declare.
    pub unknown_subsystem: u64,
    /// The scan stopped at [`MAX_RECORDS`].
    pub capped: bool,
}
