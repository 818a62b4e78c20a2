//! The KLog of a running kernel. Its writers do not stop while kcrash reads, so each command
//! takes a snapshot: the control blocks, then each ring's words in one read, then each ring's
//! `next_write` again. A slot the writer reached again before that second look may hold half a
//! record from before and half from after: such records are dropped and counted, never shown
//! stitched from two moments.

use klog_runtime::REC_WORDS;

use super::layout::KLogLayout;
use super::ring::control_block;
use super::Klog;
use kcrash_plugin::memory::{Memory, Unreadable};

const REC_BYTES: u64 = REC_WORDS * 8;
/// The least a snapshot may hold (bytes of ring words), whatever KLogBuffer's size.
const SNAPSHOT_MIN: u64 = 1 << 30;

/// One moment of the rings: their control blocks and words, over the live memory the rest (the
/// format strings, `%s` arguments) is read from.
pub struct Snapshot<'m> {
    pub klog: Klog,
    mem: &'m (dyn Memory + Sync),
    /// (address, words) of each trusted ring whose buffer could be read.
    rings: Vec<(u64, Vec<u8>)>,
}

impl<'m> Snapshot<'m> {
    /// Takes a snapshot; the second value says, one line per ring, what could not be read in
    /// one pass or checked. What was overwritten while it was read is each ring's `overrun`
    /// ([`Snapshot::overrun_notes`] says it).
    pub fn take(mem: &'m (dyn Memory + Sync), layout: KLogLayout) -> (Snapshot<'m>, Vec<String>) {
        let mut klog = Klog::read(mem, layout);
        let mut rings = Vec::new();
        let mut notes = Vec::new();
        // Trusted rings inside KLogBuffer add up to its size; attached ones may lie anywhere, so
        // the snapshot as a whole is held to KLogBuffer's size or SNAPSHOT_MIN, whichever is more.
        let mut budget = klog.layout.buffer_bytes().max(SNAPSHOT_MIN);
        // A group member's KLog mirrors its leader's ring and receives nothing.
        for r in klog
            .rings
            .iter()
            .filter(|r| r.trusted() && r.grouped_into.is_none())
        {
            let bytes = r.num_recs * REC_BYTES;
            let Some(left) = budget.checked_sub(bytes) else {
                notes.push(format!(
                    "KLogs[{}] ({}): its ring does not fit the snapshot's {} bytes: its records are read piece by piece, and may be from different moments",
                    r.index,
                    r.label(),
                    klog.layout.buffer_bytes().max(SNAPSHOT_MIN)
                ));
                continue;
            };
            budget = left;
            let mut words = vec![0u8; bytes as usize];
            match mem.read(r.buffer, &mut words) {
                Ok(()) => rings.push((r.buffer, words)),
                Err(e) => notes.push(format!(
                    "KLogs[{}] ({}): its ring cannot be read in one pass ({e}): its records are read piece by piece, and may be from different moments",
                    r.index,
                    r.label()
                )),
            }
        }
        let field = klog.layout.fields.next_write;
        for r in klog.rings.iter_mut().filter(|r| r.trusted()) {
            let at = control_block(&klog.layout, r.index) + field.offset;
            match mem.read_uint(at, field.size) {
                Ok(now) => {
                    // Slot of record s is taken again by record s + num_recs.
                    let reached = (now / REC_WORDS).saturating_sub(r.num_recs);
                    r.overrun = reached.saturating_sub(r.first_seq()).min(r.held());
                }
                Err(e) => notes.push(format!(
                    "KLogs[{}] ({}): next_write unreadable after reading the ring ({e}): records overwritten meanwhile cannot be told",
                    r.index,
                    r.label()
                )),
            }
        }
        (Snapshot { klog, mem, rings }, notes)
    }

    /// One line per ring whose oldest records were overwritten while it was read.
    pub fn overrun_notes(&self) -> impl Iterator<Item = String> + '_ {
        self.klog.rings.iter().filter(|r| r.overrun > 0).map(|r| {
            format!(
                "KLogs[{}] ({}): {} of the oldest records were overwritten while being read; not shown",
                r.index,
                r.label(),
                r.overrun
            )
        })
    }
}

impl Memory for Snapshot<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unreadable> {
        let end = addr.saturating_add(buf.len() as u64);
        for (start, words) in &self.rings {
            if addr >= *start && end <= start + words.len() as u64 {
                let at = (addr - start) as usize;
                buf.copy_from_slice(&words[at..at + buf.len()]);
                return Ok(());
            }
        }
        self.mem.read(addr, buf)
    }
}
