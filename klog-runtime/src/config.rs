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

/// Words of KLogBuffer for rings of these record counts; fails to compile unless every count is a
/// power of two and the first subsystem is NONE.
pub const fn total_words(recs: &[u64]) -> usize {
    let mut words = 0u64;
    let mut i = 0;
    while i < recs.len() {
        assert!(
            recs[i].is_power_of_two(),
            "klog_config!: a ring size is not a power of two"
        );
        words += recs[i] * crate::REC_WORDS;
        i += 1;
    }
    words as usize
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
        },
        names,
    }
}

/// Declares a kernel's subsystems and ring sizes, and emits the statics of the design with their
/// fixed names, statically initialised so logging works from the first instruction:
///
/// - `KLogs: [KLog; DBG_MAX]`, one per subsystem, indexed by id; `KLogBuffer:
///   CacheAligned<[AtomicU64; _]>` holding every ring, aligned to 64 bytes; `DebugFlags: [DbgIntensity; DBG_MAX]`; `klogLevel: AtomicU32`;
///   `klogClockHz: AtomicU64` (the clock's frequency, 0 until the kernel sets it); `KLogCommits:
///   [CacheAligned<AtomicU64>; DBG_MAX]` (records each ring's writers finished); and
///   `klogDescriptor`, the [`crate::descriptor`] that lets a reader without debug information
///   find all of them;
/// - `DBG_<NAME>: Subsys<KlogConfig>` constants (ids in declaration order, `DBG_NONE` = 0) and
///   `DBG_MAX`; `KlogConfig`, `KLOG_REGISTRY`, and `klog_init()` (the design's `klogInit`).
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
        subsystems { $first:ident = $first_recs:expr $(, $name:ident = $recs:expr)* $(,)? }
    ) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms, dead_code)]
        #[repr(u16)]
        enum __KlogIds { $first, $($name,)* __Max }

        const _: () = $crate::config::check_first_is_none(stringify!($first));

        /// Number of subsystems.
        pub const DBG_MAX: usize = __KlogIds::__Max as usize;
        const __KLOG_WORDS: usize = $crate::config::total_words(&[$first_recs, $($recs),*]);

        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static KLogBuffer: $crate::CacheAligned<[::core::sync::atomic::AtomicU64; __KLOG_WORDS]> =
            $crate::CacheAligned([const { ::core::sync::atomic::AtomicU64::new(0) }; __KLOG_WORDS]);

        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static KLogs: [$crate::KLog; DBG_MAX] = [
            $crate::KLog::new(
                __KlogIds::$first as u16,
                $crate::config::subsystem_name(concat!(stringify!($first), "\0").as_bytes()),
                $first_recs,
                (&raw const KLogBuffer) as *mut u64,
            ),
            $($crate::KLog::new(
                __KlogIds::$name as u16,
                $crate::config::subsystem_name(concat!(stringify!($name), "\0").as_bytes()),
                $recs,
                (&raw const KLogBuffer) as *mut u64,
            ),)*
        ];

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
        pub static KLogCommits: [$crate::CacheAligned<::core::sync::atomic::AtomicU64>; DBG_MAX] =
            [const { $crate::CacheAligned(::core::sync::atomic::AtomicU64::new(0)) }; DBG_MAX];

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
            },
            $crate::descriptor::name_slots([
                $crate::config::subsystem_str(concat!(stringify!($first), "\0").as_bytes()),
                $($crate::config::subsystem_str(concat!(stringify!($name), "\0").as_bytes()),)*
            ]),
        );

        /// The statics above, for the write path and for `klog_init`.
        pub static KLOG_REGISTRY: $crate::Registry = $crate::Registry {
            logs: &KLogs,
            names: &[
                $crate::config::subsystem_str(concat!(stringify!($first), "\0").as_bytes()),
                $($crate::config::subsystem_str(concat!(stringify!($name), "\0").as_bytes()),)*
            ],
            buffer: &KLogBuffer.0,
            flags: &DebugFlags,
            level: &klogLevel,
            clock_hz: &klogClockHz,
            commits: &KLogCommits,
            descriptor: &klogDescriptor,
        };

        /// This kernel's platform and static level.
        pub struct KlogConfig;
        impl $crate::Config for KlogConfig {
            type Platform = $platform;
            const STATIC_LEVEL: $crate::Level = $level;
        }

        pub const $first: $crate::Subsys<KlogConfig> = $crate::Subsys::new(__KlogIds::$first as u16, &KLOG_REGISTRY);
        $(pub const $name: $crate::Subsys<KlogConfig> = $crate::Subsys::new(__KlogIds::$name as u16, &KLOG_REGISTRY);)*

        /// The design's `klogInit()`: subdivides KLogBuffer among the subsystems.
        pub fn klog_init() {
            KLOG_REGISTRY.init::<$platform>();
        }
    };
}
