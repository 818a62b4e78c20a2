//! The rings as the dump holds them: each KLog's control block, checked, and a cursor that streams
//! its records in either direction.

use klog_runtime::{decode_header, Desc, Header, REC_WORDS};

use super::layout::{Field, KLogLayout};
use kcrash_plugin::escape::escaped;
use kcrash_plugin::memory::{Memory, Unreadable};

/// Bytes of a record.
const REC_BYTES: u64 = REC_WORDS * 8;
/// Records read from memory at a time by a cursor.
const CHUNK: u64 = 512;
/// A record older than the ring's oldest WINDOW records is a stale one (of an earlier lap).
const WINDOW: usize = 64;
/// How far apart in a ring two records may be and still come out in clock order: writers on
/// several processors reserve a slot, then read the clock, and one preempted between the two
/// (as a user-space writer on a busy machine is) reads it after hundreds of others have
/// written. A cursor reorders within at least this many records (and reads a CHUNK more at
/// a time): a whole ring of the usual sizes, a few hundred KiB of records read ahead for the
/// largest.
const REORDER: usize = 4096;
/// Longest subsystem name read.
const NAME_MAX: usize = 64;

/// One `KLogs[i]` as the dump has it, with what is wrong with it.
#[derive(Clone, Debug)]
pub struct Ring {
    pub index: usize,
    /// The processor whose set of rings holds this one, when each processor has its own.
    pub processor: Option<u32>,
    /// The KLog's own subsystem: its index within its processor's set.
    pub own: u16,
    /// The `subsystem` field: the KLog's own subsystem, or the leader of the group it logs into.
    pub subsystem: u64,
    /// Subsystems whose events this ring receives: its own and its group members'; empty for a
    /// group member's KLog, which receives none.
    pub holds: Vec<u16>,
    /// For a group member's KLog: the index of the ring its events go to.
    pub grouped_into: Option<usize>,
    /// The buffer lies outside KLogBuffer, attached after boot (klogFlags says the kernel did).
    pub attached: bool,
    /// The subsystem's name, or what kept kcrash from reading it (then `SUBSYS<i>` is shown).
    pub name: Result<String, Unreadable>,
    pub num_recs: u64,
    pub rec_size: u64,
    pub header: u64,
    pub buffer: u64,
    pub buffer_size_1: u64,
    pub next_write: u64,
    /// Live kernels only: the oldest records the writer overwrote while kcrash was reading the
    /// ring. They are no longer held: what kcrash read of their slots may be half old, half new.
    pub overrun: u64,
    /// Inconsistencies found in the control block. A ring with any is not trusted: its records
    /// are not read (`klog --salvage` scans KLogBuffer instead).
    pub problems: Vec<String>,
    /// The first field of the control block the dump could not give, when one could not be
    /// read: then the ring is not in the dump at all, rather than inconsistent.
    pub unreadable: Option<Unreadable>,
    /// `KLogCommits[i]`: records whose writers finished them, when the writer keeps the count.
    pub committed: Option<Result<u64, Unreadable>>,
}

impl Ring {
    /// The subsystem's name for display.
    pub fn label(&self) -> String {
        match &self.name {
            Ok(n) if !n.is_empty() => n.clone(),
            _ => format!("SUBSYS{}", self.own),
        }
    }

    pub fn trusted(&self) -> bool {
        self.problems.is_empty()
    }

    /// Records ever written to the ring.
    pub fn written(&self) -> u64 {
        self.next_write / REC_WORDS
    }

    /// Records the ring still holds.
    pub fn held(&self) -> u64 {
        self.written()
            .min(self.num_recs)
            .saturating_sub(self.overrun)
    }

    /// Records lost to wrapping.
    pub fn overwritten(&self) -> u64 {
        self.written() - self.held()
    }

    /// Reservations whose writers never stored the header (torn records, stale ones, and any
    /// being written at the crash), when `KLogCommits` says, or why it cannot be known.
    pub fn unfinished(&self) -> Option<Result<u64, String>> {
        Some(match self.committed.as_ref()? {
            Ok(done) => self.written().checked_sub(*done).ok_or_else(|| {
                format!(
                    "KLogCommits says {done} records were finished, but next_write says only {} \
                     were begun",
                    self.written()
                )
            }),
            Err(e) => Err(format!("KLogCommits is unreadable at {e}")),
        })
    }

    /// Times the writer went all the way round.
    pub fn laps(&self) -> u64 {
        self.written().checked_div(self.num_recs).unwrap_or(0)
    }

    /// Sequence number of the oldest record still held.
    pub fn first_seq(&self) -> u64 {
        self.written() - self.held()
    }

    /// Address of the record with sequence number `seq`.
    pub fn record_addr(&self, seq: u64) -> u64 {
        self.buffer + ((seq.wrapping_mul(REC_WORDS) & self.buffer_size_1) * 8)
    }

    /// Index of the record's slot in the ring.
    pub fn slot(&self, seq: u64) -> u64 {
        (seq.wrapping_mul(REC_WORDS) & self.buffer_size_1) / REC_WORDS
    }
}

/// What the rings' checks need beyond the layout: how `KLogs` divides into processor sets, and
/// whether the kernel attached buffers outside KLogBuffer.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub processors: u64,
    /// KLogs per set: the kernel's subsystems.
    pub subsystems: u64,
    pub attached_buffers: bool,
}

/// The largest ring outside KLogBuffer kcrash accepts (bytes): as large as a KLogBuffer may be.
const MAX_ATTACHED: u64 = 1 << 36;

/// Reads and checks every `KLogs[i]`. Fails only if KLogs itself cannot be read at all.
pub fn read_rings(mem: &dyn Memory, layout: &KLogLayout, shape: Shape) -> Vec<Ring> {
    let mut rings: Vec<Ring> = (0..layout.klogs.len)
        .map(|i| read_ring(mem, layout, shape, i as usize))
        .collect();
    // Before the groups: a leader refused for sharing memory takes its members with it.
    check_attached_overlap(&mut rings);
    check_groups(&mut rings);
    rings
}

/// Where `KLogs[index]`'s control block is.
pub fn control_block(layout: &KLogLayout, index: usize) -> u64 {
    layout.klogs.element(index as u64)
}

fn read_ring(mem: &dyn Memory, layout: &KLogLayout, shape: Shape, index: usize) -> Ring {
    let base = control_block(layout, index);
    let f = &layout.fields;
    let mut problems = Vec::new();
    let mut unreadable = None;
    let mut field =
        |name: &str, fld: Field| match mem.read_uint(base.wrapping_add(fld.offset), fld.size) {
            Ok(v) => v,
            Err(e) => {
                problems.push(format!("{name} unreadable at {e}"));
                unreadable.get_or_insert(e);
                0
            }
        };
    let subsystem = field("subsystem", f.subsystem);
    let num_recs = field("num_recs", f.num_recs);
    let rec_size = field("rec_size", f.rec_size);
    let header = field("header", f.header);
    let buffer = field("buffer", f.buffer);
    let buffer_size_1 = field("buffer_size_1", f.buffer_size_1);
    let next_write = field("next_write", f.next_write);
    // Without its pointer there is no name to read (address 0 is not one).
    let name_ptr = mem.read_uint(base.wrapping_add(f.name.offset), f.name.size);
    if let Err(e) = &name_ptr {
        problems.push(format!("name unreadable at {e}"));
        unreadable.get_or_insert(e.clone());
    }
    let own = (index as u64 % shape.subsystems.max(1)) as u16;
    let mut raw = Vec::new();
    let name = name_ptr
        .and_then(|at| mem.read_cstring(at, NAME_MAX, &mut raw))
        .map(|()| escaped(&raw))
        .or_else(|e| layout.names.get(own as usize).cloned().ok_or(e));
    let committed = layout
        .commits
        .map(|c| mem.read_uint(c.array.element(index as u64), c.size));
    let mut ring = Ring {
        index,
        processor: (shape.processors > 1).then(|| (index as u64 / shape.subsystems.max(1)) as u32),
        own,
        subsystem,
        holds: Vec::new(),
        grouped_into: None,
        attached: false,
        name,
        num_recs,
        rec_size,
        header,
        buffer,
        buffer_size_1,
        next_write,
        overrun: 0,
        problems,
        unreadable,
        committed,
    };
    if ring.problems.is_empty() {
        ring.problems = check(&mut ring, layout, shape);
    }
    if ring.subsystem == u64::from(own) {
        ring.holds.push(own);
    }
    ring
}

/// What is inconsistent in a control block whose fields all read. A `subsystem` below the
/// KLog's own names its group's leader; [`check_groups`] checks that against the leader.
fn check(r: &mut Ring, layout: &KLogLayout, shape: Shape) -> Vec<String> {
    let mut p = Vec::new();
    if r.subsystem > u64::from(r.own) {
        p.push(format!(
            "subsystem is {} in KLogs[{}]",
            r.subsystem, r.index
        ));
    }
    if r.rec_size != REC_WORDS {
        p.push(format!("rec_size is {}, not {REC_WORDS}", r.rec_size));
    }
    if r.header != klog_runtime::encode_header(r.own) {
        p.push(format!(
            "header is {:#018x}, not the KLOG header of subsystem {}",
            r.header, r.own
        ));
    }
    let words = r.buffer_size_1.wrapping_add(1);
    if !words.is_power_of_two() {
        p.push(format!("buffer_size_1 + 1 = {words} is not a power of two"));
    } else if r.num_recs.checked_mul(REC_WORDS) != Some(words) {
        p.push(format!(
            "num_recs {} does not fill buffer_size_1 + 1 = {words} words",
            r.num_recs
        ));
    }
    let start = layout.buffer.addr;
    let end = start + layout.buffer_bytes();
    let bytes = words.checked_mul(8);
    let ring_end = bytes.and_then(|b| r.buffer.checked_add(b));
    let inside = r.buffer >= start && ring_end.is_some_and(|e| e <= end) && r.buffer % 8 == 0;
    let outside = ring_end.is_some_and(|e| e <= start || r.buffer >= end);
    let attachable = outside && r.buffer % 64 == 0 && bytes.is_some_and(|b| b <= MAX_ATTACHED);
    if inside {
        // In KLogBuffer, where klog_init puts every ring.
    } else if shape.attached_buffers && attachable {
        r.attached = true;
    } else if shape.attached_buffers {
        p.push(format!(
            "buffer {:#x} (+{words} words) is neither inside KLogBuffer {start:#x}..{end:#x} nor \
             an attached ring (64-byte aligned, outside KLogBuffer, at most {MAX_ATTACHED:#x} \
             bytes)",
            r.buffer
        ));
    } else {
        p.push(format!(
            "buffer {:#x} (+{words} words) is not inside KLogBuffer {start:#x}..{end:#x} (and no \
             klogFlags says a buffer was attached)",
            r.buffer
        ));
    }
    if r.next_write % REC_WORDS != 0 {
        p.push(format!(
            "next_write {} is not a multiple of rec_size",
            r.next_write
        ));
    }
    // 2^56 words is more records than any machine writes between boots: a scribbled counter.
    if r.next_write >= 1 << 56 {
        p.push(format!("next_write {:#x} is absurd", r.next_write));
    }
    p
}

/// A group member's KLog must mirror its leader's (same buffer and size, nothing written to it)
/// and the leader must be one; then the leader's ring holds the member's events.
fn check_groups(rings: &mut [Ring]) {
    for m in 0..rings.len() {
        let r = &rings[m];
        if r.subsystem >= u64::from(r.own) || !r.problems.is_empty() {
            continue;
        }
        let leader = m - r.own as usize + r.subsystem as usize;
        let l = &rings[leader];
        let mut why = Vec::new();
        if l.subsystem != u64::from(l.own) {
            why.push(format!("KLogs[{leader}] is not a ring of its own"));
        }
        if !l.problems.is_empty() {
            why.push(format!("KLogs[{leader}] is not trusted"));
        }
        for (what, mine, theirs) in [
            ("buffer", r.buffer, l.buffer),
            ("num_recs", r.num_recs, l.num_recs),
            ("buffer_size_1", r.buffer_size_1, l.buffer_size_1),
        ] {
            if mine != theirs {
                why.push(format!(
                    "its {what} {mine:#x} is not the leader's {theirs:#x}"
                ));
            }
        }
        if r.next_write != 0 {
            why.push(format!(
                "next_write is {}, but a group member's KLog receives nothing",
                r.next_write
            ));
        }
        if why.is_empty() {
            let own = r.own;
            rings[m].grouped_into = Some(leader);
            rings[leader].holds.push(own);
        } else {
            let msg = format!(
                "subsystem {} says it logs into KLogs[{leader}], but {}",
                r.subsystem,
                why.join(", ")
            );
            rings[m].problems.push(msg);
        }
    }
}

/// Attached rings may sit anywhere outside KLogBuffer, but no two may share memory. Group
/// members mirror their leader's buffer and are left out (`check_groups` checks them).
fn check_attached_overlap(rings: &mut [Ring]) {
    let mut attached: Vec<(u64, u64, usize)> = rings
        .iter()
        .filter(|r| r.attached && r.subsystem == u64::from(r.own) && r.problems.is_empty())
        .map(|r| (r.buffer, r.buffer + (r.buffer_size_1 + 1) * 8, r.index))
        .collect();
    attached.sort_unstable();
    // Sweep in address order: each ring against the one reaching furthest so far.
    let mut furthest: Option<(u64, usize)> = None;
    for (start, end, index) in attached {
        if let Some((reach, other)) = furthest.filter(|&(reach, _)| start < reach) {
            rings[index]
                .problems
                .push(format!("its attached buffer overlaps KLogs[{other}]'s"));
            rings[other]
                .problems
                .push(format!("its attached buffer overlaps KLogs[{index}]'s"));
            if end <= reach {
                continue;
            }
        }
        furthest = Some((end, index));
    }
}

/// What a record's slot says about it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Damage {
    /// Header 0: the writer reserved the slot and was interrupted.
    pub torn: bool,
    /// The header is not a KLOG header: never written, or overwritten by something else.
    pub bad_header: bool,
    /// A KLOG header of a subsystem the ring does not receive (any but the first ring, which
    /// holds every subsystem's pre-init records).
    pub foreign_header: bool,
    /// Its clock is earlier than every one of the ring's oldest records: a stale record of the
    /// previous lap whose slot was reserved again but never rewritten. (Neighbours a little out
    /// of clock order are normal when several processors share a ring, and are not damage.)
    pub clock_backwards: bool,
    /// The slot itself could not be read from the dump.
    pub unreadable: bool,
    /// All eight words are zero in a slot that `next_write` says was reserved on an earlier lap
    /// too: no writer ever touched it, so `next_write` is wrong, and it is not a torn record.
    pub never_written: bool,
}

impl Damage {
    /// Whether any mark is set: one comparison of the whole, asked of every record.
    pub fn any(&self) -> bool {
        *self != Damage::default()
    }

    /// Whether the slot holds no record to print: only the mark is shown.
    pub fn no_message(&self) -> bool {
        self.torn || self.bad_header || self.unreadable || self.never_written
    }

    /// Short names of the damage, for text and JSON.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        [
            (self.torn, "torn"),
            (self.bad_header, "bad_header"),
            (self.foreign_header, "foreign_header"),
            (self.clock_backwards, "clock_backwards"),
            (self.unreadable, "unreadable"),
            (self.never_written, "never_written"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
    }
}

/// One record slot of a ring.
#[derive(Clone, Debug)]
pub struct Record {
    /// Index of the ring (KLogs entry) the record sits in.
    pub ring: usize,
    /// Sequence number in its ring: 0 for the first record ever written.
    pub seq: u64,
    /// Slot index in the ring.
    pub slot: u64,
    pub words: [u64; REC_WORDS as usize],
    /// Subsystem from the header, when it is a valid one.
    pub subsystem: Option<u16>,
    /// What the `desc` word holds, from a valid header (a format's address otherwise).
    pub desc_kind: Desc,
    pub damage: Damage,
    /// Why the slot could not be read, when it could not.
    /// Boxed: rare, and records are moved often.
    pub unreadable: Option<Box<Unreadable>>,
    /// Where the record goes in clock order: its clock, or for a damaged record the clock of the
    /// record before it in its ring, so that it shows where it sits.
    pub sort_clock: u64,
}

impl kcrash_plugin::Keyed for Record {
    fn key(&self) -> (u64, u64, usize) {
        (self.sort_clock, self.seq, self.ring)
    }
}

impl Record {
    pub fn header(&self) -> u64 {
        self.words[0]
    }
    pub fn id(&self) -> u64 {
        self.words[1]
    }
    pub fn proc_dom(&self) -> u64 {
        self.words[2]
    }
    pub fn clock(&self) -> u64 {
        self.words[3]
    }
    pub fn desc(&self) -> u64 {
        self.words[4]
    }
    pub fn data(&self) -> [u64; 3] {
        [self.words[5], self.words[6], self.words[7]]
    }
}

pub use kcrash_plugin::Order;

/// Streams one trusted ring's records, reading `CHUNK` records at a time.
pub struct Cursor<'a> {
    mem: &'a (dyn Memory + Sync),
    ring: &'a Ring,
    order: Order,
    /// Keep only records whose header names this subsystem (for NONE's ring, which holds every
    /// subsystem's pre-init records).
    only: Option<u16>,
    /// Sequence numbers still to yield: `lo..hi`.
    lo: u64,
    hi: u64,
    /// The ring's oldest record held.
    first: u64,
    /// Slots read ahead, `chunk_lo..chunk_lo + chunk.len()`, each with its read result.
    chunk: Vec<Result<[u64; 8], Unreadable>>,
    chunk_lo: u64,
    /// Bytes read for the chunk, kept between fills.
    bytes: Vec<u8>,
    /// The lowest clock among the ring's oldest WINDOW records, when the ring holds more.
    floor: Option<u64>,
    /// Records read but not yet yielded, in the order they will be yielded.
    window: std::collections::VecDeque<Record>,
}

impl<'a> Cursor<'a> {
    pub fn new(
        mem: &'a (dyn Memory + Sync),
        ring: &'a Ring,
        order: Order,
        only: Option<u16>,
    ) -> Self {
        let hi = if ring.trusted() { ring.written() } else { 0 };
        let lo = if ring.trusted() { ring.first_seq() } else { 0 };
        Cursor {
            mem,
            ring,
            order,
            only,
            lo,
            hi,
            first: ring.first_seq(),
            chunk: Vec::new(),
            chunk_lo: 0,
            bytes: Vec::new(),
            floor: if ring.trusted() {
                clock_floor(mem, ring)
            } else {
                None
            },
            window: std::collections::VecDeque::new(),
        }
    }

    /// Leaves out the records before sequence number `seq`.
    pub fn from_seq(mut self, seq: u64) -> Self {
        self.lo = self.lo.max(seq).min(self.hi);
        self
    }

    /// Whether the chunk read ahead holds the slot with sequence number `seq`.
    fn holds(&self, seq: u64) -> bool {
        seq >= self.chunk_lo && seq < self.chunk_lo + self.chunk.len() as u64
    }

    /// Reads the chunk around `seq` that the walk needs next, with one older record for the
    /// neighbour comparison.
    fn fill(&mut self, seq: u64) {
        let first = self.first;
        let (lo, hi) = match self.order {
            Order::NewestFirst => (seq.saturating_sub(CHUNK).max(first), seq + 1),
            Order::OldestFirst => (seq.saturating_sub(1).max(first), (seq + CHUNK).min(self.hi)),
        };
        self.chunk.clear();
        self.chunk_lo = lo;
        let mut bytes = std::mem::take(&mut self.bytes);
        bytes.resize(((hi - lo) * REC_BYTES) as usize, 0);
        // Slots are contiguous except where the ring wraps; read each contiguous run at once and
        // fall back to one record at a time where memory is unreadable.
        let mut s = lo;
        while s < hi {
            let run_end = (s + self.ring.num_recs - self.ring.slot(s)).min(hi);
            let at = ((s - lo) * REC_BYTES) as usize;
            let run = &mut bytes[at..at + ((run_end - s) * REC_BYTES) as usize];
            if self.mem.read(self.ring.record_addr(s), run).is_ok() {
                for rec in run.chunks_exact(REC_BYTES as usize) {
                    self.chunk.push(Ok(words(rec)));
                }
            } else {
                for q in s..run_end {
                    let mut one = [0u8; REC_BYTES as usize];
                    self.chunk.push(
                        self.mem
                            .read(self.ring.record_addr(q), &mut one)
                            .map(|()| words(&one)),
                    );
                }
            }
            s = run_end;
        }
        self.bytes = bytes;
    }

    /// The record with sequence number `seq`, judged beside the slot before it.
    fn record(&mut self, seq: u64) -> Record {
        let has_older = seq > self.first;
        if !self.holds(seq) || (has_older && !self.holds(seq - 1)) {
            // A fill around `seq` holds the slot before it too.
            self.fill(seq);
        }
        let at = (seq - self.chunk_lo) as usize;
        let older = has_older
            .then(|| self.chunk[at - 1].as_ref().ok())
            .flatten();
        classify(
            self.ring,
            self.first,
            seq,
            self.chunk[at].as_ref(),
            older,
            self.floor,
        )
    }

    /// The next slot in walking order, whatever its clock.
    fn next_in_ring(&mut self) -> Option<Record> {
        while self.lo < self.hi {
            let seq = match self.order {
                Order::NewestFirst => {
                    self.hi -= 1;
                    self.hi
                }
                Order::OldestFirst => {
                    self.lo += 1;
                    self.lo - 1
                }
            };
            let rec = self.record(seq);
            match (self.only, rec.subsystem) {
                (Some(want), Some(got)) if want != got => continue,
                (Some(_), None) if self.ring.index == 0 => continue,
                _ => return Some(rec),
            }
        }
        None
    }

    /// Keeps the window filled: REORDER records beyond the next, or as many as the ring has left.
    #[inline]
    fn read_ahead(&mut self) {
        if self.window.len() <= REORDER {
            self.read_more();
        }
    }

    /// Reads a chunk's worth of records beyond REORDER into the window, in one loop rather than
    /// one call a record.
    #[inline(never)]
    fn read_more(&mut self) {
        while self.window.len() <= REORDER + CHUNK as usize {
            match self.next_in_ring() {
                Some(rec) => self.insert(rec),
                None => break,
            }
        }
    }

    /// Puts `rec` in the window at its place in clock order; nearly always the back.
    fn insert(&mut self, rec: Record) {
        let key = (rec.sort_clock, rec.seq);
        let goes_first = |a: (u64, u64), b: (u64, u64)| match self.order {
            Order::NewestFirst => a > b,
            Order::OldestFirst => a < b,
        };
        let mut at = self.window.len();
        while at > 0
            && goes_first(
                key,
                (self.window[at - 1].sort_clock, self.window[at - 1].seq),
            )
        {
            at -= 1;
        }
        if at == self.window.len() {
            // The common case, without insert's general moves.
            self.window.push_back(rec);
        } else {
            self.window.insert(at, rec);
        }
    }
}

/// The lowest clock among the ring's oldest WINDOW whole records, for rings holding more than
/// that; a later record with an earlier clock is stale.
fn clock_floor(mem: &dyn Memory, ring: &Ring) -> Option<u64> {
    if ring.held() <= WINDOW as u64 {
        return None;
    }
    let first = ring.first_seq();
    (first..first + WINDOW as u64)
        .filter_map(|seq| {
            let at = ring.record_addr(seq);
            let header = mem.read_u64(at).ok()?;
            matches!(decode_header(header), Header::Valid { .. })
                .then(|| mem.read_u64(at + 24).ok())?
        })
        .min()
}

fn words(bytes: &[u8]) -> [u64; 8] {
    std::array::from_fn(|i| {
        u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap_or_default())
    })
}

/// Decides a record's subsystem, damage and sort clock from its slot and the slot before it.
fn classify(
    ring: &Ring,
    first: u64,
    seq: u64,
    slot: Result<&[u64; 8], &Unreadable>,
    older: Option<&[u64; 8]>,
    floor: Option<u64>,
) -> Record {
    let mut damage = Damage::default();
    let (words, unreadable) = match slot {
        Ok(w) => (*w, None),
        Err(e) => {
            damage.unreadable = true;
            ([0; 8], Some(Box::new(e.clone())))
        }
    };
    let mut subsystem = None;
    let mut desc_kind = Desc::Pointer;
    if unreadable.is_none() {
        match decode_header(words[0]) {
            // A slot on its second lap or later has held a whole record before.
            Header::Torn if words == [0; 8] && seq >= ring.num_recs => damage.never_written = true,
            Header::Torn => damage.torn = true,
            Header::Invalid { .. } => damage.bad_header = true,
            Header::Valid { subsystem: s, desc } => {
                subsystem = Some(s);
                desc_kind = desc;
                // A ring's first subsystem is its own, nearly every record's: asked before the
                // search, which the compiler leaves a call.
                damage.foreign_header =
                    ring.index != 0 && ring.holds.first() != Some(&s) && !ring.holds.contains(&s);
                damage.clock_backwards =
                    seq >= first + WINDOW as u64 && floor.is_some_and(|f| words[3] < f);
            }
        }
    }
    // The slot before is judged only for a damaged record, whose place it gives: most are not.
    let sort_clock = if damage.any() {
        older
            .filter(|w| matches!(decode_header(w[0]), Header::Valid { .. }))
            .map_or(0, |w| w[3])
    } else {
        words[3]
    };
    Record {
        ring: ring.index,
        seq,
        slot: ring.slot(seq),
        words,
        subsystem,
        desc_kind,
        damage,
        unreadable,
        sort_clock,
    }
}

impl Iterator for Cursor<'_> {
    type Item = Record;

    /// Records in clock order: read ahead by REORDER and reordered, so that neighbours written
    /// out of order by several processors come out most recent (or oldest) first all the same.
    fn next(&mut self) -> Option<Record> {
        self.read_ahead();
        self.window.pop_front()
    }
}

impl kcrash_plugin::PeekKey for Cursor<'_> {
    fn peek_key(&mut self) -> Option<(u64, u64, usize)> {
        self.read_ahead();
        self.window.front().map(kcrash_plugin::Keyed::key)
    }

    /// As the trait's, with the records moved from the window in runs: as many as it holds
    /// beyond REORDER at once.
    fn take_run(
        &mut self,
        out: &mut Vec<Record>,
        max: usize,
        goes_first: impl Fn((u64, u64, usize)) -> bool,
    ) -> Option<(u64, u64, usize)> {
        use kcrash_plugin::Keyed;
        let mut first = true;
        loop {
            self.read_ahead();
            // What the window can give up without reading on: all of it once the ring is read.
            let spare = match self.lo < self.hi {
                true => self.window.len().saturating_sub(REORDER),
                false => self.window.len(),
            };
            let take = spare
                .min(max.saturating_sub(out.len()))
                .max(usize::from(first));
            out.reserve(take);
            // One pass: each record's key looked at, then the record moved while it is in cache.
            let mut taken = 0;
            while taken < take {
                match self.window.front() {
                    Some(rec) if (first && taken == 0) || goes_first(rec.key()) => {
                        out.extend(self.window.pop_front());
                        taken += 1;
                    }
                    _ => break,
                }
            }
            if taken == 0 {
                return self.window.front().map(Keyed::key);
            }
            first = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcrash_plugin::memory::Runs;

    fn ring(index: usize, buffer: u64, records: u64) -> Ring {
        Ring {
            index,
            processor: None,
            own: index as u16,
            subsystem: index as u64,
            holds: vec![index as u16],
            grouped_into: None,
            attached: true,
            name: Ok(format!("R{index}")),
            num_recs: records,
            rec_size: REC_WORDS,
            header: klog_runtime::encode_header(index as u16),
            buffer,
            buffer_size_1: records * REC_WORDS - 1,
            next_write: 0,
            overrun: 0,
            problems: Vec::new(),
            unreadable: None,
            committed: None,
        }
    }

    /// A full ring of `records` (a power of two), record `seq` logged at `clock(seq)`.
    fn ring_of_clocks(records: u64, clock: impl Fn(u64) -> u64) -> (Ring, Runs) {
        let mut r = ring(1, 0x10000, records);
        r.next_write = records * REC_WORDS;
        let bytes: Vec<u8> = (0..records)
            .flat_map(|seq| [r.header, 0xfeed, 0, clock(seq), 0x2000, seq, 0, 0])
            .flat_map(u64::to_le_bytes)
            .collect();
        (r, Runs(vec![(0x10000, bytes)]))
    }

    /// `clocks` as a walk in `order` should yield them.
    fn in_order(clocks: &[u64], order: Order) -> Vec<u64> {
        let mut sorted = clocks.to_vec();
        sorted.sort_unstable();
        if order == Order::NewestFirst {
            sorted.reverse();
        }
        sorted
    }

    /// A writer preempted between reserving its slot and reading the clock logs a clock later
    /// than hundreds of records after it: both walks still yield the ring in clock order.
    #[test]
    fn a_record_whose_writer_was_preempted_still_comes_out_in_clock_order() {
        const RECORDS: u64 = 1024;
        let late = 100;
        let clock = |seq: u64| {
            if seq == late {
                10 * (late + 700) + 5
            } else {
                10 * seq
            }
        };
        let (r, mem) = ring_of_clocks(RECORDS, clock);
        for order in [Order::NewestFirst, Order::OldestFirst] {
            let clocks: Vec<u64> = Cursor::new(&mem, &r, order, None)
                .map(|rec| rec.clock())
                .collect();
            assert_eq!(clocks.len() as u64, RECORDS);
            assert_eq!(clocks, in_order(&clocks, order), "{order:?}");
        }
    }

    /// Runs taken from a cursor are the records it yields one by one, in the same order: across
    /// chunks, around records late by up to REORDER places, whatever stops each run.
    #[test]
    fn runs_hold_the_records_the_cursor_yields() {
        use kcrash_plugin::PeekKey;
        // Every 97th record's clock is late by up to REORDER - 1 places.
        let clock =
            |seq: u64| 10 * (seq + (seq % 97 == 0) as u64 * (seq * 31 % REORDER as u64)) + 5;
        let (r, mem) = ring_of_clocks(4 * REORDER as u64, clock);
        for order in [Order::NewestFirst, Order::OldestFirst] {
            let want: Vec<u64> = Cursor::new(&mem, &r, order, None).map(|r| r.seq).collect();
            let clocks: Vec<u64> = want.iter().map(|&s| clock(s)).collect();
            let sorted = in_order(&clocks, order);
            let bad = clocks.iter().zip(&sorted).position(|(a, b)| a != b);
            assert_eq!(
                bad,
                None,
                "{order:?}: {:?}",
                bad.map(|i| (want[i], clocks.iter().skip(i).take(3).collect::<Vec<_>>()))
            );
            type Key = (u64, u64, usize);
            let stops: [fn(Key) -> bool; 2] = [|_| true, |key| key.0 % 7 != 0];
            for (max, goes_first) in [1, 7, 600, 100_000]
                .into_iter()
                .flat_map(|m| stops.map(|g| (m, g)))
            {
                let mut cursor = Cursor::new(&mem, &r, order, None);
                let mut got = Vec::new();
                let mut out = Vec::new();
                while cursor.take_run(&mut out, max, goes_first).is_some() {
                    assert!(!out.is_empty() && out.len() <= max);
                    got.extend(out.drain(..).map(|r| r.seq));
                }
                got.extend(out.drain(..).map(|r| r.seq));
                assert_eq!(got, want, "{order:?}, runs of at most {max}");
            }
        }
    }

    /// A ring inside another's attached buffer is caught even when a third lies between them in
    /// address order; rings that only touch are not.
    #[test]
    fn attached_rings_that_share_memory_are_all_refused() {
        let mut rings = vec![
            ring(0, 0x10000, 1024), // 0x10000..0x20000
            ring(1, 0x11000, 16),   // inside ring 0
            ring(2, 0x13000, 16),   // inside ring 0 too, after ring 1
            ring(3, 0x20000, 16),   // touches ring 0's end
        ];
        check_attached_overlap(&mut rings);
        let refused: Vec<bool> = rings.iter().map(|r| !r.problems.is_empty()).collect();
        assert_eq!(refused, [true, true, true, false]);
        assert!(rings[2].problems[0].contains("KLogs[0]"));
    }
}
