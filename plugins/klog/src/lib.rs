//! The Tera kernel event log rebuilt from memory: every `KLogs` ring, checked, streamed, merged by
//! clock and printed as the design's klogPrint(subsys, type) does. kcrash's first decoder: see
//! [`decoder`] for the KLog as one of the session's logs.

pub mod decoder;
pub mod descriptor;
pub mod dwarf;
pub mod find;
pub mod layout;
pub mod live;
pub mod render;
pub mod ring;
pub mod salvage;

use descriptor::LayoutSource;
use kcrash_plugin::memory::{Memory, Unreadable};
use kcrash_plugin::Merge;
use layout::{KLogLayout, Processors};
use ring::{Cursor, Order, Ring, Shape};

/// The most KLogs entries kcrash reads (64 MiB of control blocks): a layout from a damaged
/// descriptor or DWARF cannot make it read or hold more.
pub const MAX_KLOGS: u64 = 1 << 20;

/// Which records `klog SUBSYS` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Subsystem 0: every ring merged by clock.
    All,
    /// One subsystem's records, wherever they sit: its own ring, and NONE's ring for those logged
    /// before klog_init.
    Subsystem(u16),
}

/// The KLog state of one dump: the rings' control blocks and the globals around them.
pub struct Klog {
    pub layout: KLogLayout,
    pub rings: Vec<Ring>,
    /// How KLogs divides into processor sets, as read and checked.
    pub shape: Shape,
    /// `klogClockHz` at the crash, or why it is not known.
    pub clock_rate: ClockRate,
    /// `klogLevel` at the crash.
    pub level: Option<Result<u64, Unreadable>>,
    /// `DebugFlags[i]` at the crash.
    pub debug_flags: Vec<Result<u64, Unreadable>>,
    /// Where the layout came from.
    pub source: LayoutSource,
    /// What finding the layout noticed: a descriptor that disagrees with DWARF, descriptors
    /// refused, the translations a scan implied.
    pub notes: Vec<String>,
    /// Each ring's row of the table every log has.
    infos: Vec<kcrash_plugin::RingInfo>,
    /// `clock_rate` as every log gives its clock.
    clock: kcrash_plugin::Clock,
    /// Subsystem names by id, which the events borrow.
    subsystem_names: Vec<String>,
}

/// What the dump says of the clock's frequency.
#[derive(Clone, Debug)]
pub enum ClockRate {
    Hz(u64),
    /// The image has no `klogClockHz`.
    Absent,
    /// `klogClockHz` is 0: the kernel never set it.
    Zero,
    Unreadable(Unreadable),
}

impl ClockRate {
    /// The frequency, when it is known.
    pub fn hz(&self) -> Option<u64> {
        match self {
            ClockRate::Hz(hz) => Some(*hz),
            _ => None,
        }
    }

    /// Why times are shown in ticks, when they are.
    pub fn unknown_because(&self) -> Option<String> {
        match self {
            ClockRate::Hz(_) => None,
            ClockRate::Absent => Some("the image has no klogClockHz".into()),
            ClockRate::Zero => Some("klogClockHz is 0".into()),
            ClockRate::Unreadable(e) => Some(format!("klogClockHz is unreadable at {e}")),
        }
    }
}

impl Klog {
    /// Reads the control blocks and globals; records are read later, as they are printed.
    pub fn read(mem: &dyn Memory, mut layout: KLogLayout) -> Klog {
        let mut notes = Vec::new();
        if layout.klogs.len > MAX_KLOGS {
            notes.push(format!(
                "KLogs has {} entries; kcrash reads the first {MAX_KLOGS}",
                layout.klogs.len
            ));
            layout.klogs.len = MAX_KLOGS;
        }
        let shape = shape(mem, &layout, &mut notes);
        let rings = ring::read_rings(mem, &layout, shape);
        let clock_rate = match layout.clock_hz.map(|v| mem.read_uint(v.addr, v.size)) {
            None => ClockRate::Absent,
            Some(Ok(0)) => ClockRate::Zero,
            Some(Ok(hz)) => ClockRate::Hz(hz),
            Some(Err(e)) => ClockRate::Unreadable(e),
        };
        let level = layout.klog_level.map(|v| mem.read_uint(v.addr, v.size));
        let debug_flags = layout.debug_flags.map_or_else(Vec::new, |a| {
            (0..a.len)
                .map(|i| mem.read_uint(a.element(i), a.stride.min(8)))
                .collect()
        });
        let mut klog = Klog {
            layout,
            rings,
            shape,
            clock: clock_rate.clock(),
            clock_rate,
            level,
            debug_flags,
            source: LayoutSource::Dwarf,
            notes,
            infos: Vec::new(),
            subsystem_names: Vec::new(),
        };
        klog.subsystem_names = klog.names();
        klog.infos = klog
            .rings
            .iter()
            .map(|r| decoder::ring_info(&klog, r))
            .collect();
        klog
    }

    /// Subsystem names by id (from the first processor's KLogs).
    pub fn names(&self) -> Vec<String> {
        self.rings
            .iter()
            .take(self.shape.subsystems as usize)
            .map(Ring::label)
            .collect()
    }

    /// Whether `sel` reads ring `r`: every ring that receives the subsystem's events, the
    /// subsystem's own KLogs (so that one the checks refused is still named), and the first ring
    /// (which holds every subsystem's events from before klog_init).
    pub fn reads(&self, r: &Ring, sel: Selection) -> bool {
        match sel {
            Selection::All => true,
            Selection::Subsystem(s) => r.index == 0 || r.own == s || r.holds.contains(&s),
        }
    }

    /// `0`, a subsystem number, or a subsystem name (case-insensitive, `DBG_` optional).
    /// The error says what is wrong with `spec`, for the user.
    pub fn select(&self, spec: &str) -> Result<Selection, String> {
        if let Ok(n) = spec.parse::<u64>() {
            return match n {
                0 => Ok(Selection::All),
                n if n < self.shape.subsystems => Ok(Selection::Subsystem(n as u16)),
                n => Err(format!(
                    "no subsystem {n}: this kernel has {} (0 means all)",
                    self.shape.subsystems
                )),
            };
        }
        let want = spec
            .strip_prefix("DBG_")
            .or_else(|| spec.strip_prefix("dbg_"))
            .unwrap_or(spec);
        self.names()
            .iter()
            .position(|n| n.eq_ignore_ascii_case(want))
            .map(|i| Selection::Subsystem(i as u16))
            .ok_or_else(|| {
                format!(
                    "no subsystem named {spec:?}; this kernel has {}",
                    self.names().join(", ")
                )
            })
    }

    /// The selected records in `order`, streamed from memory.
    pub fn records<'a>(
        &'a self,
        mem: &'a (dyn Memory + Sync),
        sel: Selection,
        order: Order,
    ) -> Merge<Cursor<'a>> {
        self.records_from(mem, sel, order, &[], None)
    }

    /// As [`Klog::records`], leaving out records of ring `i` before sequence number `from[i]`
    /// (those already shown by `klog --follow`), and, with `cpu`, the rings of the sets that
    /// processor does not log into (it logs into set `cpu % processors`, which it may share).
    /// With one set every ring is read.
    pub fn records_from<'a>(
        &'a self,
        mem: &'a (dyn Memory + Sync),
        sel: Selection,
        order: Order,
        from: &[u64],
        cpu: Option<u32>,
    ) -> Merge<Cursor<'a>> {
        let cursors = self
            .rings
            .iter()
            .filter(|r| self.reads(r, sel))
            .filter(|r| {
                cpu.is_none_or(|c| {
                    r.processor
                        .is_none_or(|p| u64::from(p) == u64::from(c) % self.shape.processors)
                })
            })
            .map(|r| {
                // A ring holding only the subsystem needs no filter; the first ring and a
                // group's ring hold others too.
                let only = match sel {
                    Selection::Subsystem(s) if r.index == 0 || r.holds != [s] => Some(s),
                    _ => None,
                };
                Cursor::new(mem, r, order, only).from_seq(from.get(r.index).copied().unwrap_or(0))
            })
            .collect();
        Merge::new(cursors, order)
    }

    /// Per-ring figures for `klog -s`, from one pass over each trusted ring.
    pub fn summary(&self, mem: &(dyn Memory + Sync)) -> Vec<RingSummary> {
        self.rings
            .iter()
            .map(|r| {
                let mut s = RingSummary {
                    torn: 0,
                    never_written: 0,
                    damaged: 0,
                    oldest: None,
                    newest: None,
                };
                for rec in Cursor::new(mem, r, Order::OldestFirst, None) {
                    s.torn += u64::from(rec.damage.torn);
                    s.never_written += u64::from(rec.damage.never_written);
                    if rec.damage.any() {
                        s.damaged += 1;
                        continue;
                    }
                    s.oldest.get_or_insert(rec.clock());
                    s.newest = Some(rec.clock());
                }
                s
            })
            .collect()
    }
}

/// Figures of one ring for `klog -s`.
#[derive(Clone, Debug)]
pub struct RingSummary {
    pub torn: u64,
    /// Slots `next_write` says were written that no writer touched.
    pub never_written: u64,
    /// Records with any damage (torn included).
    pub damaged: u64,
    /// Clock of the oldest and newest undamaged records.
    pub oldest: Option<u64>,
    pub newest: Option<u64>,
}

impl RingSummary {
    /// Why the ring's counts (written, held, overwritten, laps), which come from its control
    /// block, cannot be believed; `None` when they can.
    pub fn counts_unknown(&self, ring: &Ring) -> Option<String> {
        if let Some(e) = &ring.unreadable {
            return Some(format!("the control block is not in the dump: {e}"));
        }
        if !ring.trusted() {
            return Some("the control block is inconsistent".into());
        }
        (self.never_written > 0).then(|| {
            format!(
                "next_write {} says the ring wrapped, but {} of its slots were never written",
                ring.next_write, self.never_written
            )
        })
    }
}

/// How KLogs divides into processor sets: `klogProcessors` (or the descriptor's count) checked
/// against KLogs' and DebugFlags' lengths. When they disagree or it cannot be read, the sets are
/// taken from the lengths and a note says so; with neither, KLogs is one set.
fn shape(mem: &dyn Memory, layout: &KLogLayout, notes: &mut Vec<String>) -> Shape {
    let entries = layout.klogs.len;
    let from_lengths = layout
        .debug_flags
        .map(|d| d.len)
        .filter(|&s| s > 0 && entries % s == 0 && entries >= s)
        .map(|s| entries / s);
    let said = match layout.processors {
        Processors::Known(n) => Ok(n),
        Processors::At(at) => mem
            .read_uint(at.addr, at.size)
            .map_err(|e| format!("klogProcessors is unreadable at {e}")),
    };
    let fallback = |why: String, notes: &mut Vec<String>| {
        let sets = from_lengths.unwrap_or(1);
        let whence = if from_lengths.is_some() {
            "from KLogs' and DebugFlags' lengths"
        } else {
            "as KLogs' and DebugFlags' lengths do not say otherwise"
        };
        notes.push(format!("{why}; reading {sets} set(s) of rings, {whence}"));
        sets
    };
    let processors = match said {
        Ok(n) if n >= 1 && entries % n == 0 && from_lengths.is_none_or(|f| f == n) => n,
        Ok(n) => fallback(
            format!(
                "{} {n} does not divide KLogs' {entries} entries into sets of DBG_MAX",
                match layout.processors {
                    Processors::Known(_) => "the layout's processor count",
                    Processors::At(_) => "klogProcessors",
                }
            ),
            notes,
        ),
        Err(why) => fallback(why, notes),
    };
    let attached_buffers = layout.flags.is_some_and(|f| {
        mem.read_uint(f.addr, f.size)
            .is_ok_and(|v| v & u64::from(klog_runtime::flags::ATTACHED_BUFFERS) != 0)
    });
    Shape {
        processors,
        subsystems: entries / processors,
        attached_buffers,
    }
}

#[cfg(test)]
mod tests {
    use super::layout::{ArrayAt, Field, KLogFields, ScalarAt};
    use super::*;
    use kcrash_plugin::memory::Runs;

    fn layout(klogs: u64, debug_flags: u64, processors: Processors) -> KLogLayout {
        let array = |len| ArrayAt {
            addr: 0x1000,
            len,
            stride: 64,
        };
        KLogLayout {
            klogs: array(klogs),
            processors,
            fields: KLogFields::in_order([Field { offset: 0, size: 8 }; 8]),
            buffer: array(0),
            debug_flags: Some(array(debug_flags)),
            klog_level: None,
            clock_hz: None,
            commits: None,
            flags: None,
            descriptions: None,
            names: Vec::new(),
        }
    }

    /// Lengths and counts that cannot agree give a note and a usable shape, never a panic.
    #[test]
    fn a_processor_count_that_does_not_fit_is_noted() {
        let at = Processors::At(ScalarAt {
            addr: 0x10,
            size: 4,
        });
        // KLogs' and DebugFlags' lengths, the count, then the sets read and the notes made.
        for (klogs, flags, processors, sets, noted) in [
            (0, 5, at, 1, 1),
            (10, 5, at, 2, 1),
            (10, 5, Processors::Known(3), 2, 1),
            (10, 0, Processors::Known(0), 1, 1),
            (7, 5, Processors::Known(1), 1, 0),
        ] {
            let mut notes = Vec::new();
            let shape = shape(
                &Runs(Vec::new()),
                &layout(klogs, flags, processors),
                &mut notes,
            );
            assert_eq!(shape.processors, sets, "{klogs} {flags} {processors:?}");
            assert_eq!(shape.subsystems, klogs / sets);
            assert_eq!(notes.len(), noted, "{notes:?}");
        }
        let mut notes = Vec::new();
        let shape = shape(
            &Runs(Vec::new()),
            &layout(20, 5, Processors::Known(4)),
            &mut notes,
        );
        assert_eq!((shape.processors, shape.subsystems, notes.len()), (4, 5, 0));
    }
}
