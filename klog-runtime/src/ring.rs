//! The KLog rings and the write path.

use core::ffi::c_char;
use core::marker::PhantomData;
use core::sync::atomic::{fence, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::record::{encode_header, intensity, Level, REC_WORDS};

/// The control block of one subsystem's ring (`KLog` of the design). Every field is 64 bits.
///
/// `buffer` and `next_write` are atomics because they change while the kernel runs; the rest is
/// fixed at build time. Each KLog is exactly one 64-byte cache line, aligned so that processors
/// logging to different subsystems never contend for the same line.
#[repr(C, align(64))]
pub struct KLog {
    pub subsystem: u64,
    /// NUL-terminated subsystem name without its `DBG_` prefix ("SCHED").
    pub name: *const c_char,
    /// Records the ring holds.
    pub num_recs: u64,
    /// Words per record: always [`REC_WORDS`].
    pub rec_size: u64,
    /// The header word of this subsystem's records.
    pub header: u64,
    /// First word of the ring; every KLog points at the start of `KLogBuffer` until `klog_init`.
    pub buffer: AtomicPtr<u64>,
    /// Ring size in words minus one; ring sizes are powers of two so this is the wrap mask.
    pub buffer_size_1: u64,
    /// Word index of the next record; only grows, so `next_write / rec_size` counts all records.
    pub next_write: AtomicU64,
}

// SAFETY: `name` points at an immutable static string; everything mutable is atomic.
unsafe impl Sync for KLog {}

impl KLog {
    /// A statically initialised KLog whose buffer points at `buffer_start` (the start of
    /// `KLogBuffer`), as the design requires so that logging works before `klog_init`.
    pub const fn new(
        subsystem: u16,
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
            subsystem: subsystem as u64,
            name: name.as_ptr() as *const c_char,
            num_recs,
            rec_size: REC_WORDS,
            header: encode_header(subsystem),
            buffer: AtomicPtr::new(buffer_start),
            buffer_size_1: num_recs * REC_WORDS - 1,
            next_write: AtomicU64::new(0),
        }
    }

    /// Number of records ever written to this ring.
    pub fn records_written(&self) -> u64 {
        self.next_write.load(Ordering::Relaxed) / REC_WORDS
    }

    /// Reserves the next record slot: returns its sequence number and its first word.
    #[inline(always)]
    fn reserve(&self) -> (u64, *mut u64) {
        let old = self.next_write.fetch_add(REC_WORDS, Ordering::Relaxed);
        let buffer = self.buffer.load(Ordering::Relaxed);
        // `old & buffer_size_1` is a word index inside the ring; `buffer` is set by
        // `klog_init` to a ring of `buffer_size_1 + 1` words inside KLogBuffer.
        (
            old / REC_WORDS,
            buffer.wrapping_add((old & self.buffer_size_1) as usize),
        )
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
    /// `klogDescriptor`, sealed by `init`.
    pub descriptor: &'static dyn crate::descriptor::Seal,
}

impl Registry {
    /// The design's `klogInit()`: gives every subsystem its own part of `KLogBuffer`, in subsystem
    /// order. The NONE ring stays at the start, so records logged before this call stay in place.
    /// Seals the descriptor with what the platform says of the image and its page tables.
    /// Call it once, early, before other processors log.
    pub fn init<P: Platform>(&self) {
        let base = self.buffer.as_ptr() as *mut u64;
        let mut offset = 0usize;
        for log in self.logs {
            log.buffer
                .store(base.wrapping_add(offset), Ordering::Release);
            offset += (log.buffer_size_1 + 1) as usize;
        }
        debug_assert_eq!(offset, self.buffer.len());
        self.descriptor.seal(P::build_id(), P::page_table_root());
    }

    /// Sets the clock frequency readers use to turn `clock` ticks into seconds.
    pub fn set_clock_hz(&self, hz: u64) {
        self.clock_hz.store(hz, Ordering::Relaxed);
    }

    /// Sets `klogLevel` (consulted only with the `klog-debug` feature).
    pub fn set_level(&self, level: Level) {
        self.level.store(level as u32, Ordering::Relaxed);
    }

    /// Writes one record for subsystem `id` and returns its sequence number in the ring that
    /// received it. Before `klog_init` every subsystem's records go to the NONE ring.
    #[inline(always)]
    pub fn write(
        &self,
        id: u16,
        chore: u64,
        proc_dom: u64,
        clock: impl FnOnce() -> u64,
        desc: u64,
        data: [u64; 3],
    ) -> u64 {
        let ring = self.ring_of(id) as usize;
        let (seq, slot) = self.logs[ring].reserve();
        // SAFETY: `slot` is REC_WORDS aligned words inside KLogBuffer (see `KLog::reserve`), and
        // every access to KLogBuffer words is atomic.
        let words = unsafe { &*(slot as *const [AtomicU64; REC_WORDS as usize]) };
        words[0].store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        words[1].store(chore, Ordering::Relaxed);
        words[2].store(proc_dom, Ordering::Relaxed);
        // Read after reserving so a ring's clocks follow its slot order as closely as possible.
        words[3].store(clock(), Ordering::Relaxed);
        words[4].store(desc, Ordering::Relaxed);
        words[5].store(data[0], Ordering::Relaxed);
        words[6].store(data[1], Ordering::Relaxed);
        words[7].store(data[2], Ordering::Relaxed);
        words[0].store(encode_header(id), Ordering::Release);
        if crate::COUNT_COMMITS {
            self.commits[ring].fetch_add(1, Ordering::Relaxed);
        }
        seq
    }

    /// The ring that receives subsystem `id`'s events now: its own, or NONE's (0) before
    /// `klog_init`.
    #[inline(always)]
    pub fn ring_of(&self, id: u16) -> u16 {
        // Before klog_init every buffer points at the start of KLogBuffer; only NONE's ring really
        // lives there, so a non-NONE KLog still pointing there is a pre-init one.
        let own = self.logs[id as usize].buffer.load(Ordering::Relaxed);
        if id != 0 && own == self.buffer.as_ptr() as *mut u64 {
            0
        } else {
            id
        }
    }

    /// Reserves a record for `id` in the ring that receives it (see [`Registry::ring_of`]) and stops
    /// after zeroing its header, as a writer interrupted mid-record would. Exists so test kernels
    /// can leave a torn record in a real dump.
    pub fn reserve_torn(&self, id: u16) -> u64 {
        let (seq, slot) = self.logs[self.ring_of(id) as usize].reserve();
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

/// A kernel's configuration as `klog_config!` declares it: its platform and the compile-time level
/// above which events vanish (without the `klog-debug` feature).
pub trait Config: 'static {
    type Platform: Platform;
    const STATIC_LEVEL: Level;
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

    /// Logs one event at level `LEVEL`; returns its sequence number in the ring, or `None` when
    /// the event is off. Above the static level (and without `klog-debug`) this is no code at all.
    /// The KLOG macros call this.
    #[inline(always)]
    pub fn log<const LEVEL: u32>(&self, desc: &'static [u8], data: [u64; 3]) -> Option<u64> {
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
        let seq = self.registry.write(
            self.id,
            <C::Platform as Platform>::chore_id(),
            <C::Platform as Platform>::proc_dom(),
            <C::Platform as Platform>::clock,
            desc.as_ptr() as u64,
            data,
        );
        if crate::RUNTIME_CHECKS && self.registry.echo_to_console(self.id, level) {
            let console = <C::Platform as Platform>::console;
            crate::console::echo(console, self.name(), desc, &data);
        }
        Some(seq)
    }

    /// The subsystem's name without `DBG_` (from its KLog).
    pub fn name(&self) -> &'static str {
        self.registry.names[self.id as usize]
    }
}
