//! `klog_config!`: a kernel's static KLog configuration, and the const checks behind it.

use crate::descriptor::{
    klog_fields, rec_fields, stored_magic, Addr, Descriptor, Head, ABI_MAJOR, ABI_MINOR,
    BUILD_ID_MAX, ENDIAN, HEAD_SIZE, NAME_SIZE,
};

/// A subsystem's name as its KLog stores it: the identifier without `DBG_`, NUL-terminated.
/// Fails to compile when the identifier lacks the prefix.
pub const fn subsystem_name(ident_nul: &'static [u8]) -> &'static [u8] {
    assert!(
        ident_nul.len() > 5
            && ident_nul[0] == b'D'
            && ident_nul[1] == b'B'
            && ident_nul[2] == b'G'
            && ident_nul[3] == b'_',
        "klog_config!: subsystem names are DBG_<NAME>"
    );
    ident_nul.split_at(4).1
}

/// The same name as a `&str` without NUL, for [`crate::Registry::names`].
pub const fn subsystem_str(ident_nul: &'static [u8]) -> &'static str {
    let name = subsystem_name(ident_nul);
    match core::str::from_utf8(name.split_at(name.len() - 1).0) {
        Ok(s) => s,
        Err(_) => panic!("klog_config!: subsystem names are ASCII identifiers"),
    }
}

/// The number of ring sets `processors = N;` asks for (1 without it): 1 to 65535.
pub const fn processors(given: &[usize]) -> usize {
    let n = match given {
        [] => 1,
        [n] => *n,
        _ => panic!("klog_config!: one processors = N"),
    };
    assert!(
        n >= 1 && n <= u16::MAX as usize,
        "klog_config!: processors is 1 to 65535"
    );
    n
}

/// By subsystem id, the subsystem whose ring receives its events: itself, or the leader its
/// `groups` entry names. Fails to compile unless each leader is declared before its members, is
/// not itself a member, has a ring (a power of two of records), each member is grouped once and
/// declares 0 records, and NONE is no member.
pub const fn leaders<const N: usize>(groups: &[(u16, u16)], recs: &[u64; N]) -> [u16; N] {
    let mut leaders = [0u16; N];
    let mut i = 0;
    while i < N {
        leaders[i] = i as u16;
        i += 1;
    }
    let mut g = 0;
    while g < groups.len() {
        let (member, leader) = groups[g];
        assert!(
            member != 0,
            "klog_config!: DBG_NONE keeps its own ring (pre-init records go there)"
        );
        assert!(
            leader < member,
            "klog_config!: a group's leader is declared before its members"
        );
        assert!(
            leaders[member as usize] == member,
            "klog_config!: a subsystem is grouped twice"
        );
        assert!(
            recs[member as usize] == 0,
            "klog_config!: a grouped subsystem declares 0 records (it has no ring of its own)"
        );
        leaders[member as usize] = leader;
        g += 1;
    }
    let mut s = 0;
    while s < N {
        let l = leaders[s] as usize;
        assert!(
            leaders[l] as usize == l,
            "klog_config!: a group's leader is itself grouped"
        );
        assert!(
            recs[l].is_power_of_two(),
            "klog_config!: a ring size is not a power of two"
        );
        s += 1;
    }
    leaders
}

/// Words of KLogBuffer: every leader's ring, once per processor set.
pub const fn total_words<const N: usize>(
    recs: &[u64; N],
    leaders: &[u16; N],
    processors: usize,
) -> usize {
    let mut words = 0u64;
    let mut i = 0;
    while i < N {
        if leaders[i] as usize == i {
            words += recs[i] * crate::REC_WORDS;
        }
        i += 1;
    }
    words as usize * processors
}

/// `KLogs`: for each processor set, one KLog per subsystem, statically pointing at
/// `buffer_start` until `klog_init`.
pub const fn klogs<const S: usize, const N: usize>(
    names: &[&'static [u8]; S],
    recs: &[u64; S],
    leaders: &[u16; S],
    buffer_start: *mut u64,
) -> [crate::KLog; N] {
    assert!(N % S == 0);
    let mut logs = [const { crate::KLog::new(0, 0, b"\0", 1, core::ptr::null_mut()) }; N];
    let mut i = 0;
    while i < N {
        let s = i % S;
        let leader = leaders[s];
        logs[i] = crate::KLog::new(
            s as u16,
            leader,
            names[s],
            recs[leader as usize],
            buffer_start,
        );
        i += 1;
    }
    logs
}

/// Fails to compile unless the first subsystem is `DBG_NONE`, the ring of pre-init records.
pub const fn check_first_is_none(ident: &str) {
    let b = ident.as_bytes();
    assert!(
        b.len() == 8 && b[4] == b'N' && b[5] == b'O' && b[6] == b'N' && b[7] == b'E',
        "klog_config!: the first subsystem must be DBG_NONE (id 0)"
    );
}

/// The addresses `klogDescriptor` records, taken by `klog_config!`.
pub struct Statics {
    pub this: Addr,
    pub klogs: Addr,
    pub buffer: Addr,
    pub buffer_bytes: u64,
    pub debug_flags: Addr,
    pub klog_level: Addr,
    pub clock_hz: Addr,
    pub commits: Addr,
    pub flags: Addr,
    pub descriptions: Addr,
    pub description_count: u32,
    pub processors: usize,
}

/// A minor event ID of the kernel's `descriptions` (the design's appendix A.1): its index in
/// `KLogDescriptions`, and its format for the compile-time argument check and the console.
#[derive(Clone, Copy, Debug)]
pub struct EventId {
    pub id: u16,
    /// Data words the format converts.
    pub args: usize,
    /// The NUL-terminated format.
    pub text: &'static [u8],
}

impl EventId {
    pub const fn new(id: u16, text: &'static [u8]) -> EventId {
        EventId {
            id,
            args: crate::printf::count_args(text),
            text,
        }
    }
}

/// A kernel's descriptor as the linker can complete it: everything but what `klog_init` seals.
pub const fn descriptor<const N: usize>(at: Statics, names: [[u8; NAME_SIZE]; N]) -> Descriptor<N> {
    use core::mem::size_of;
    use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8};
    Descriptor {
        head: Head {
            magic: stored_magic(),
            abi_major: ABI_MAJOR,
            abi_minor: ABI_MINOR,
            endian: ENDIAN,
            word_size: 8,
            build_id_len: AtomicU8::new(0),
            subsystems: N as u16,
            size: (HEAD_SIZE + NAME_SIZE * N) as u32,
            this: at.this,
            klogs: at.klogs,
            buffer: at.buffer,
            buffer_bytes: at.buffer_bytes,
            debug_flags: at.debug_flags,
            klog_level: at.klog_level,
            clock_hz: at.clock_hz,
            commits: at.commits,
            page_table_root: AtomicU64::new(0),
            klog_stride: size_of::<crate::KLog>() as u16,
            rec_stride: size_of::<crate::KLogRec>() as u16,
            debug_flags_stride: size_of::<crate::DbgIntensity>() as u16,
            commits_stride: size_of::<crate::CacheAligned<AtomicU64>>() as u16,
            klog_level_size: 4,
            clock_hz_size: 8,
            debug_flags_size: 4,
            commits_size: 8,
            zero: 0,
            klog_fields: klog_fields(),
            rec_fields: rec_fields(),
            build_id: [const { AtomicU8::new(0) }; BUILD_ID_MAX],
            checksum: AtomicU32::new(0),
            name_size: NAME_SIZE as u32,
            processors: at.processors as u16,
            description_stride: size_of::<Addr>() as u16,
            description_count: at.description_count,
            descriptions: at.descriptions,
            flags: at.flags,
            flags_size: 4,
            reserved: [0; 7],
        },
        names,
    }
}

/// Declares a kernel's subsystems and ring sizes, and emits the statics of the design with their
/// fixed names, statically initialised so logging works from the first instruction:
///
/// - `KLogs: [KLog; DBG_MAX * KLOG_PROCESSORS]`, one per subsystem per processor set, processor
///   p's KLog of subsystem s at `p * DBG_MAX + s`; `KLogBuffer: CacheAligned<[AtomicU64; _]>`
///   holding every ring, aligned to 64 bytes; `DebugFlags: [DbgIntensity; DBG_MAX]`;
///   `klogLevel: AtomicU32`; `klogClockHz: AtomicU64` (the clock's frequency, 0 until the kernel
///   sets it); `KLogCommits` (records each ring's writers finished, one per KLog);
///   `klogProcessors: u32`; `klogFlags: AtomicU32` ([`crate::ring::flags`]);
///   `KLogDescriptions` (the formats minor event IDs index); and `klogDescriptor`, the
///   [`crate::descriptor`] that lets a reader without debug information find all of them;
/// - `DBG_<NAME>: Subsys<KlogConfig>` constants (ids in declaration order, `DBG_NONE` = 0),
///   `DBG_MAX`, `KLOG_PROCESSORS`, `KLOG_LEADERS`, an [`EventId`] constant per description;
///   `KlogConfig`, `KLOG_REGISTRY`, and `klog_init()` (the design's `klogInit`).
///
/// Optional clauses: `processors = N;` gives each of N processors its own ring per subsystem
/// (the design's appendix A.2; a record goes to the set of the processor in its `proc_dom`);
/// `groups { DBG_VM => DBG_FS }` sends a subsystem's events into another's ring (the member
/// declares 0 records and comes after its leader); `descriptions { EVT_NAME = "format", … }`
/// declares the formats [`crate::KLOG_EVENT!`] logs by ID.
///
/// Ring sizes count records and must be powers of two; anything else fails to compile:
///
/// ```compile_fail
/// # pub struct P;
/// # impl klog_runtime::Platform for P { fn clock() -> u64 { 0 } fn chore_id() -> u64 { 0 } fn proc_dom() -> u64 { 0 } }
/// klog_runtime::klog_config! {
///     platform = P;
///     static_level = klog_runtime::KLOG_VERBOSE;
///     subsystems { DBG_NONE = 64, DBG_SCHED = 100 }
/// }
/// ```
///
/// ```
/// pub struct Kernel;
/// impl klog_runtime::Platform for Kernel {
///     fn clock() -> u64 { 42 }
///     fn chore_id() -> u64 { 1 }
///     fn proc_dom() -> u64 { klog_runtime::proc_dom(0, 0) }
/// }
/// klog_runtime::klog_config! {
///     platform = Kernel;
///     static_level = klog_runtime::KLOG_VERBOSE;
///     subsystems { DBG_NONE = 64, DBG_PARCHORE = 256, DBG_FS = 128, DBG_SCHED = 1024, DBG_VM = 64 }
/// }
/// klog_init();
/// klog_runtime::KLOGV2!(DBG_SCHED, "postProcess: task:%016lx curPD:%d", 7u64, 3);
/// assert_eq!(KLogs[3].records_written(), 1);
/// assert_eq!(DBG_MAX, 5);
/// ```
#[macro_export]
macro_rules! klog_config {
    (
        platform = $platform:ty;
        static_level = $level:expr;
        $(processors = $processors:expr;)?
        subsystems { $first:ident = $first_recs:expr $(, $name:ident = $recs:expr)* $(,)? }
        $(groups { $($member:ident => $leader:ident),* $(,)? })?
        $(descriptions { $($event:ident = $text:literal),* $(,)? })?
    ) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms, dead_code)]
        #[repr(u16)]
        enum __KlogIds { $first, $($name,)* __Max }

        const _: () = $crate::config::check_first_is_none(stringify!($first));

        /// Number of subsystems.
        pub const DBG_MAX: usize = __KlogIds::__Max as usize;
        /// Sets of rings: one per processor, or 1 when processors share each ring.
        pub const KLOG_PROCESSORS: usize = $crate::config::processors(&[$($processors)?]);
        const __KLOG_RECS: [u64; DBG_MAX] = [$first_recs, $($recs),*];
        /// By subsystem id, the subsystem whose ring receives its events.
        pub const KLOG_LEADERS: [u16; DBG_MAX] = $crate::config::leaders(
            &[$($((__KlogIds::$member as u16, __KlogIds::$leader as u16)),*)?],
            &__KLOG_RECS,
        );
        const __KLOG_WORDS: usize =
            $crate::config::total_words(&__KLOG_RECS, &KLOG_LEADERS, KLOG_PROCESSORS);
        // Each name without DBG_: NUL-terminated for KLog::name, as &str for the rest.
        const __KLOG_NAMES: [&[u8]; DBG_MAX] = [
            $crate::config::subsystem_name(concat!(stringify!($first), "\0").as_bytes()),
            $($crate::config::subsystem_name(concat!(stringify!($name), "\0").as_bytes()),)*
        ];
        const __KLOG_STRS: [&str; DBG_MAX] = [
            $crate::config::subsystem_str(concat!(stringify!($first), "\0").as_bytes()),
            $($crate::config::subsystem_str(concat!(stringify!($name), "\0").as_bytes()),)*
        ];

        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static KLogBuffer: $crate::CacheAligned<[::core::sync::atomic::AtomicU64; __KLOG_WORDS]> =
            $crate::CacheAligned([const { ::core::sync::atomic::AtomicU64::new(0) }; __KLOG_WORDS]);

        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static KLogs: [$crate::KLog; DBG_MAX * KLOG_PROCESSORS] = $crate::config::klogs(
            &__KLOG_NAMES,
            &__KLOG_RECS,
            &KLOG_LEADERS,
            (&raw const KLogBuffer) as *mut u64,
        );

        /// Sets of rings in KLogs, for readers with debug information.
        #[no_mangle]
        #[used]
        #[allow(non_upper_case_globals)]
        pub static klogProcessors: u32 = KLOG_PROCESSORS as u32;

        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static klogFlags: ::core::sync::atomic::AtomicU32 = ::core::sync::atomic::AtomicU32::new(0);

        #[allow(non_camel_case_types, clippy::upper_case_acronyms, dead_code)]
        #[repr(u16)]
        enum __KlogEvents { $($($event,)*)? __Max }

        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static KLogDescriptions: [$crate::descriptor::Addr; __KlogEvents::__Max as usize] = [
            $($($crate::descriptor::Addr(concat!($text, "\0").as_ptr()),)*)?
        ];

        $($(
            pub const $event: $crate::EventId = $crate::EventId::new(
                __KlogEvents::$event as u16,
                concat!($text, "\0").as_bytes(),
            );
        )*)?

        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static DebugFlags: [$crate::DbgIntensity; DBG_MAX] = [const { $crate::DbgIntensity::new() }; DBG_MAX];

        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static klogLevel: ::core::sync::atomic::AtomicU32 = ::core::sync::atomic::AtomicU32::new($level as u32);

        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static klogClockHz: ::core::sync::atomic::AtomicU64 = ::core::sync::atomic::AtomicU64::new(0);

        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static KLogCommits: [$crate::CacheAligned<::core::sync::atomic::AtomicU64>; DBG_MAX * KLOG_PROCESSORS] =
            [const { $crate::CacheAligned(::core::sync::atomic::AtomicU64::new(0)) }; DBG_MAX * KLOG_PROCESSORS];

        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static klogDescriptor: $crate::descriptor::Descriptor<DBG_MAX> = $crate::config::descriptor(
            $crate::config::Statics {
                this: $crate::descriptor::Addr((&raw const klogDescriptor).cast()),
                klogs: $crate::descriptor::Addr((&raw const KLogs).cast()),
                buffer: $crate::descriptor::Addr((&raw const KLogBuffer).cast()),
                buffer_bytes: (__KLOG_WORDS * 8) as u64,
                debug_flags: $crate::descriptor::Addr((&raw const DebugFlags).cast()),
                klog_level: $crate::descriptor::Addr((&raw const klogLevel).cast()),
                clock_hz: $crate::descriptor::Addr((&raw const klogClockHz).cast()),
                commits: $crate::descriptor::Addr(if $crate::COUNT_COMMITS {
                    (&raw const KLogCommits).cast()
                } else {
                    ::core::ptr::null()
                }),
                flags: $crate::descriptor::Addr((&raw const klogFlags).cast()),
                descriptions: $crate::descriptor::Addr((&raw const KLogDescriptions).cast()),
                description_count: __KlogEvents::__Max as u32,
                processors: KLOG_PROCESSORS,
            },
            $crate::descriptor::name_slots(__KLOG_STRS),
        );

        /// The statics above, for the write path and for `klog_init`.
        pub static KLOG_REGISTRY: $crate::Registry = $crate::Registry {
            logs: &KLogs,
            names: &__KLOG_STRS,
            buffer: &KLogBuffer.0,
            flags: &DebugFlags,
            level: &klogLevel,
            clock_hz: &klogClockHz,
            commits: &KLogCommits,
            klog_flags: &klogFlags,
            descriptor: &klogDescriptor,
        };

        /// This kernel's platform, static level and rings.
        pub struct KlogConfig;
        impl $crate::Config for KlogConfig {
            type Platform = $platform;
            const STATIC_LEVEL: $crate::Level = $level;
            const PROCESSORS: usize = KLOG_PROCESSORS;
            const LEADERS: &'static [u16] = &KLOG_LEADERS;
        }

        pub const $first: $crate::Subsys<KlogConfig> = $crate::Subsys::new(__KlogIds::$first as u16, &KLOG_REGISTRY);
        $(pub const $name: $crate::Subsys<KlogConfig> = $crate::Subsys::new(__KlogIds::$name as u16, &KLOG_REGISTRY);)*

        /// The design's `klogInit()`: subdivides KLogBuffer among the rings.
        pub fn klog_init() {
            KLOG_REGISTRY.init::<$platform>();
        }
    };
}
