//! The KLog rings and the write path.

use core::ffi::c_char;
use core::marker::PhantomData;
use core::sync::atomic::{fence, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::record::{encode_header, encode_header_desc, intensity, Desc, Level, REC_WORDS};

/// The control block of one subsystem's ring (`KLog` of the design). Every field is 64 bits.
///
/// `buffer`, `num_recs`, `buffer_size_1` and `next_write` are atomics because they change while
/// the kernel runs (`klog_init`, [`Registry::attach`], every event); the rest is fixed at build
/// time. Each KLog is exactly one 64-byte cache line, aligned so that processors logging to
/// different rings never contend for the same line.
///
/// A subsystem grouped into another's ring keeps a KLog of its own that never receives records:
/// its `subsystem` names the group's leader, and its `buffer`, `num_recs` and `buffer_size_1`
/// mirror the leader's, so a reader learns the grouping from `KLogs` alone.
#[repr(C, align(64))]
pub struct KLog {
    /// The subsystem whose ring this is: the KLog's own id, or its group leader's.
    pub subsystem: u64,
    /// NUL-terminated subsystem name without its `DBG_` prefix ("SCHED").
    pub name: *const c_char,
    /// Records the ring holds.
    pub num_recs: AtomicU64,
    /// Words per record: always [`REC_WORDS`].
    pub rec_size: u64,
    /// The header word of this subsystem's records (with a format pointer).
    pub header: u64,
    /// First word of the ring; every KLog points at the start of `KLogBuffer` until `klog_init`.
    pub buffer: AtomicPtr<u64>,
    /// Ring size in words minus one; ring sizes are powers of two so this is the wrap mask.
    pub buffer_size_1: AtomicU64,
    /// Word index of the next record; only grows, so `next_write / rec_size` counts all records.
    pub next_write: AtomicU64,
}

// SAFETY: `name` points at an immutable static string; everything mutable is atomic.
unsafe impl Sync for KLog {}

impl KLog {
    /// A statically initialised KLog of `subsystem` whose records go to `leader`'s ring (itself
    /// when ungrouped) of `num_recs` records, its buffer pointing at `buffer_start` (the start of
    /// `KLogBuffer`), as the design requires so that logging works before `klog_init`.
    pub const fn new(
        subsystem: u16,
        leader: u16,
        name: &'static [u8],
        num_recs: u64,
        buffer_start: *mut u64,
    ) -> KLog {
        assert!(
            num_recs.is_power_of_two(),
            "KLog ring sizes must be powers of two"
        );
        assert!(
            !name.is_empty() && name[name.len() - 1] == 0,
            "KLog names are NUL-terminated"
        );
        KLog {
            subsystem: leader as u64,
            name: name.as_ptr() as *const c_char,
            num_recs: AtomicU64::new(num_recs),
            rec_size: REC_WORDS,
            header: encode_header(subsystem),
            buffer: AtomicPtr::new(buffer_start),
            buffer_size_1: AtomicU64::new(num_recs * REC_WORDS - 1),
            next_write: AtomicU64::new(0),
        }
    }

    /// Number of records ever written to this ring.
    pub fn records_written(&self) -> u64 {
        self.next_write.load(Ordering::Relaxed) / REC_WORDS
    }

    /// Records the ring holds.
    pub fn capacity(&self) -> u64 {
        self.num_recs.load(Ordering::Relaxed)
    }

    /// Reserves the next record slot: returns its sequence number and its first word.
    #[inline(always)]
    fn reserve(&self) -> (u64, *mut u64) {
        let old = self.next_write.fetch_add(REC_WORDS, Ordering::Relaxed);
        let buffer = self.buffer.load(Ordering::Relaxed);
        // `old & buffer_size_1` is a word index inside the ring; `buffer` is a ring of
        // `buffer_size_1 + 1` words (inside KLogBuffer, or one given to `attach`).
        let mask = self.buffer_size_1.load(Ordering::Relaxed);
        (old / REC_WORDS, buffer.wrapping_add((old & mask) as usize))
    }
}

/// A static aligned to a cache line, so that `KLogBuffer`'s 64-byte records never straddle two.
#[repr(C, align(64))]
pub struct CacheAligned<T>(pub T);

impl<T> core::ops::Deref for CacheAligned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// One subsystem's debugging intensity (`Dbg_Intensity` of the design), an entry of `DebugFlags`.
/// Its bits match the C bit-fields `d_prolog:1 d_terse:1 d_verbose:1 d_klog:1 d_klogprintf:1`.
#[repr(transparent)]
pub struct DbgIntensity(pub AtomicU32);

impl DbgIntensity {
    /// By default every subsystem logs (`d_klog` set), as the design says.
    pub const fn new() -> DbgIntensity {
        DbgIntensity(AtomicU32::new(intensity::D_KLOG))
    }

    pub fn bits(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    pub fn set(&self, bits: u32) {
        self.0.fetch_or(bits, Ordering::Relaxed);
    }

    pub fn clear(&self, bits: u32) {
        self.0.fetch_and(!bits, Ordering::Relaxed);
    }
}

impl Default for DbgIntensity {
    fn default() -> Self {
        Self::new()
    }
}

/// What the embedding kernel supplies. Every hook is called on the logging fast path (the console
/// only with the `klog-debug` feature and `d_klogprintf`), so keep them cheap.
pub trait Platform: 'static {
    /// The time stamp stored in `clock` (e.g. rdtsc); its frequency goes in `klogClockHz`.
    fn clock() -> u64;
    /// The logging chore or thread (`thisChore()`), stored in `id`.
    fn chore_id() -> u64;
    /// `thisProcessor():thisDomain()`, built with [`crate::proc_dom`].
    fn proc_dom() -> u64;
    /// Writes a console line (used for `d_klogprintf`). Does nothing by default.
    fn console(_text: &str) {}
    /// The image's GNU build-id, for the descriptor (`klog_init` copies it once). Empty when the
    /// kernel cannot say.
    fn build_id() -> &'static [u8] {
        &[]
    }
    /// The physical address of the top page table that maps the kernel's statics (CR3's on
    /// x86_64), for the descriptor: with it a reader of raw physical memory can translate every
    /// address. 0 when the kernel cannot say. Called once, by `klog_init`.
    fn page_table_root() -> u64 {
        0
    }
}

/// The statics one `klog_config!` invocation emits, gathered so the write path can reach them.
pub struct Registry {
    /// `KLogs`: `processors` sets of one KLog per subsystem; processor p's KLog of subsystem s
    /// is `logs[p * subsystems + s]`.
    pub logs: &'static [KLog],
    /// Subsystem names without `DBG_`, by id (as `KLog::name`, for code that cannot scan strings).
    pub names: &'static [&'static str],
    pub buffer: &'static [AtomicU64],
    pub flags: &'static [DbgIntensity],
    pub level: &'static AtomicU32,
    pub clock_hz: &'static AtomicU64,
    /// Per ring, the records whose writers stored their header (`KLogCommits`), counted with the
    /// `commit-counts` feature: with `next_write`, a reader knows exactly how many reservations
    /// were never finished.
    pub commits: &'static [CacheAligned<AtomicU64>],
    /// `klogFlags`: what readers must know of the rings beyond their layout ([`flags`]).
    pub klog_flags: &'static AtomicU32,
    /// `klogDescriptor`, sealed by `init`.
    pub descriptor: &'static dyn crate::descriptor::Seal,
}

/// What a record holds but its clock: [`Registry::write`] reads the clock itself.
#[derive(Clone, Copy, Debug)]
pub struct Event {
    pub header: u64,
    pub chore: u64,
    pub proc_dom: u64,
    pub desc: u64,
    pub data: [u64; 3],
}

/// Bits of `klogFlags`.
pub mod flags {
    /// Some ring's buffer was given by [`super::Registry::attach`], outside `KLogBuffer`.
    pub const ATTACHED_BUFFERS: u32 = 1 << 0;
}

/// Why [`Registry::attach`] refused a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachError {
    /// No such ring, or the KLog is a group member (attach to its leader's ring).
    NotARing,
    /// The buffer's words are not a power of two of at least one record.
    Size,
    /// The buffer does not start on a 64-byte boundary.
    Alignment,
}

impl Registry {
    /// Subsystems of the kernel (`DBG_MAX`).
    pub fn subsystems(&self) -> usize {
        self.names.len()
    }

    /// The design's `klogInit()`: gives every ring its own part of `KLogBuffer`, processor by
    /// processor and in subsystem order; a grouped subsystem's KLog mirrors its leader's. The
    /// first ring (processor 0's NONE) stays at the start, so records logged before this call stay
    /// in place. Seals the descriptor with what the platform says of the image and its page
    /// tables. Call it once, early, before other processors log.
    pub fn init<P: Platform>(&self) {
        let base = self.buffer.as_ptr() as *mut u64;
        let subsystems = self.subsystems();
        let mut offset = 0usize;
        for (i, log) in self.logs.iter().enumerate() {
            let leader = (i - i % subsystems) + log.subsystem as usize;
            let at = if leader == i {
                let at = base.wrapping_add(offset);
                offset += (log.buffer_size_1.load(Ordering::Relaxed) + 1) as usize;
                at
            } else {
                // Leaders come before their members (klog_config! checks), so this is set.
                self.logs[leader].buffer.load(Ordering::Relaxed)
            };
            log.buffer.store(at, Ordering::Release);
        }
        debug_assert_eq!(offset, self.buffer.len());
        self.descriptor.seal(P::build_id(), P::page_table_root());
    }

    /// Gives ring `ring` (an index into `KLogs` of a subsystem that is not a group member) a
    /// buffer allocated after boot instead of its part of `KLogBuffer` — any power of two of
    /// words holding at least one record, 64-byte aligned — and starts it empty: its records so
    /// far stay where they were, and its count starts again from 0. Sets
    /// [`flags::ATTACHED_BUFFERS`] so readers accept a ring outside `KLogBuffer`.
    ///
    /// Call it after `klog_init` while nothing logs to that ring (at boot, once an allocator
    /// is up): a writer that reserved a slot in the old buffer would otherwise finish it there.
    pub fn attach(&self, ring: usize, buffer: &'static [AtomicU64]) -> Result<(), AttachError> {
        let subsystems = self.subsystems();
        let log = self.logs.get(ring).ok_or(AttachError::NotARing)?;
        if log.subsystem as usize != ring % subsystems {
            return Err(AttachError::NotARing);
        }
        let words = buffer.len() as u64;
        if !words.is_power_of_two() || words < REC_WORDS {
            return Err(AttachError::Size);
        }
        if buffer.as_ptr() as usize % 64 != 0 {
            return Err(AttachError::Alignment);
        }
        self.klog_flags
            .fetch_or(flags::ATTACHED_BUFFERS, Ordering::Release);
        let set = ring - ring % subsystems;
        for member in &self.logs[set..set + subsystems] {
            if set + member.subsystem as usize == ring {
                member.num_recs.store(words / REC_WORDS, Ordering::Relaxed);
                member.buffer_size_1.store(words - 1, Ordering::Relaxed);
                member
                    .buffer
                    .store(buffer.as_ptr() as *mut u64, Ordering::Release);
            }
        }
        log.next_write.store(0, Ordering::Release);
        if crate::COUNT_COMMITS {
            self.commits[ring].store(0, Ordering::Release);
        }
        Ok(())
    }

    /// Sets the clock frequency readers use to turn `clock` ticks into seconds.
    pub fn set_clock_hz(&self, hz: u64) {
        self.clock_hz.store(hz, Ordering::Relaxed);
    }

    /// Sets `klogLevel` (consulted only with the `klog-debug` feature).
    pub fn set_level(&self, level: Level) {
        self.level.store(level as u32, Ordering::Relaxed);
    }

    /// Writes `event` into ring `ring` (an index into `KLogs`), its clock read after the slot
    /// is reserved, and returns its sequence number in the ring that received it. Before
    /// `klog_init` every record goes to the first ring (see [`Registry::receiving`]).
    #[inline(always)]
    pub fn write(&self, ring: usize, event: Event, clock: impl FnOnce() -> u64) -> u64 {
        let ring = self.receiving(ring);
        let (seq, slot) = self.logs[ring].reserve();
        // SAFETY: `slot` is REC_WORDS aligned words inside the ring (see `KLog::reserve`), and
        // every access to ring words is atomic.
        let words = unsafe { &*(slot as *const [AtomicU64; REC_WORDS as usize]) };
        words[0].store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        words[1].store(event.chore, Ordering::Relaxed);
        words[2].store(event.proc_dom, Ordering::Relaxed);
        // Read after reserving so a ring's clocks follow its slot order as closely as possible.
        words[3].store(clock(), Ordering::Relaxed);
        words[4].store(event.desc, Ordering::Relaxed);
        words[5].store(event.data[0], Ordering::Relaxed);
        words[6].store(event.data[1], Ordering::Relaxed);
        words[7].store(event.data[2], Ordering::Relaxed);
        words[0].store(event.header, Ordering::Release);
        if crate::COUNT_COMMITS {
            self.commits[ring].fetch_add(1, Ordering::Relaxed);
        }
        seq
    }

    /// The ring that receives records meant for ring `ring` now: itself, or the first ring
    /// (processor 0's NONE) before `klog_init`.
    #[inline(always)]
    pub fn receiving(&self, ring: usize) -> usize {
        // Before klog_init every buffer points at the start of KLogBuffer; only the first ring
        // really lives there, so another KLog still pointing there is a pre-init one.
        let own = self.logs[ring].buffer.load(Ordering::Relaxed);
        if ring != 0 && own == self.buffer.as_ptr() as *mut u64 {
            0
        } else {
            ring
        }
    }

    /// Reserves a record in the ring receiving ring `ring`'s records (see
    /// [`Registry::receiving`]) and stops after zeroing its header, as a writer interrupted
    /// mid-record would. Exists so test kernels can leave a torn record in a real dump.
    pub fn reserve_torn(&self, ring: usize) -> u64 {
        let (seq, slot) = self.logs[self.receiving(ring)].reserve();
        // SAFETY: as in `write`.
        unsafe { (*(slot as *const AtomicU64)).store(0, Ordering::Release) };
        seq
    }

    /// The design's d_klog and klogLevel checks (only with the `klog-debug` feature).
    #[inline(always)]
    pub fn enabled(&self, id: u16, level: Level) -> bool {
        self.flags[id as usize].bits() & intensity::D_KLOG != 0
            && level as u32 <= self.level.load(Ordering::Relaxed)
    }

    /// Whether an event at `level` of subsystem `id` also goes to the console (`d_klogprintf` and
    /// the level's intensity bit).
    pub fn echo_to_console(&self, id: u16, level: Level) -> bool {
        let bits = self.flags[id as usize].bits();
        let intensity = match level {
            Level::Off => 0,
            Level::Terse => intensity::D_TERSE,
            Level::Verbose => intensity::D_VERBOSE,
            Level::Prolog => intensity::D_PROLOG,
        };
        bits & intensity::D_KLOGPRINTF != 0 && bits & intensity != 0
    }
}

/// A kernel's configuration as `klog_config!` declares it: its platform, the compile-time level
/// above which events vanish (without the `klog-debug` feature), and how rings are shared.
pub trait Config: 'static {
    type Platform: Platform;
    const STATIC_LEVEL: Level;
    /// Sets of rings: one per processor, or 1 when processors share each ring.
    const PROCESSORS: usize;
    /// By subsystem id, the subsystem whose ring receives its events (its own, or its group's).
    const LEADERS: &'static [u16];

    /// The index in `KLogs` of the ring for subsystem `id`'s events logged with `proc_dom`: the
    /// processor's set (a processor beyond the sets shares set `processor % PROCESSORS`).
    #[inline(always)]
    fn ring(id: u16, proc_dom: u64) -> usize {
        let leader = Self::LEADERS[id as usize] as usize;
        if Self::PROCESSORS == 1 {
            leader
        } else {
            let processor = (proc_dom >> 32) as usize;
            (processor % Self::PROCESSORS) * Self::LEADERS.len() + leader
        }
    }
}

/// A subsystem of one kernel's configuration: its id and the statics it logs into.
pub struct Subsys<C: Config> {
    pub id: u16,
    pub registry: &'static Registry,
    _config: PhantomData<fn() -> C>,
}

impl<C: Config> Subsys<C> {
    pub const fn new(id: u16, registry: &'static Registry) -> Self {
        Subsys {
            id,
            registry,
            _config: PhantomData,
        }
    }

    /// Logs one event at level `LEVEL` whose `desc` word holds `desc` of kind `kind`; `text` is
    /// its NUL-terminated format for the console. Returns its sequence number in the ring, or
    /// `None` when the event is off. Above the static level (and without `klog-debug`) this is
    /// no code at all. The KLOG macros call this.
    #[inline(always)]
    pub fn log<const LEVEL: u32>(
        &self,
        kind: Desc,
        desc: u64,
        text: &'static [u8],
        data: [u64; 3],
    ) -> Option<u64> {
        let level = const {
            match Level::from_u32(LEVEL) {
                Some(l) => l,
                None => panic!("KLOG: not a level"),
            }
        };
        if const { !crate::RUNTIME_CHECKS && LEVEL > C::STATIC_LEVEL as u32 } {
            return None;
        }
        if crate::RUNTIME_CHECKS && !self.registry.enabled(self.id, level) {
            return None;
        }
        let proc_dom = <C::Platform as Platform>::proc_dom();
        let event = Event {
            header: encode_header_desc(self.id, kind),
            chore: <C::Platform as Platform>::chore_id(),
            proc_dom,
            desc,
            data,
        };
        let seq = self.registry.write(
            C::ring(self.id, proc_dom),
            event,
            <C::Platform as Platform>::clock,
        );
        if crate::RUNTIME_CHECKS && self.registry.echo_to_console(self.id, level) {
            let console = <C::Platform as Platform>::console;
            crate::console::echo(console, self.name(), text, &data);
        }
        Some(seq)
    }

    /// The index in `KLogs` of the ring this subsystem's events go to on the calling processor.
    pub fn ring_here(&self) -> usize {
        C::ring(self.id, <C::Platform as Platform>::proc_dom())
    }

    /// The subsystem's name without `DBG_` (from its KLog).
    pub fn name(&self) -> &'static str {
        self.registry.names[self.id as usize]
    }
}
