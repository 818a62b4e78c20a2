//! `klog_config!`: a kernel's static KLog configuration, and the const checks behind it.

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

/// Declares a kernel's subsystems and ring sizes, and emits the statics of the design with their
/// fixed names, statically initialised so logging works from the first instruction:
///
/// - `KLogs: [KLog; DBG_MAX]`, one per subsystem, indexed by id; `KLogBuffer: [AtomicU64; _]`
///   holding every ring; `DebugFlags: [DbgIntensity; DBG_MAX]`; `klogLevel: AtomicU32`;
///   `klogClockHz: AtomicU64` (the clock's frequency, 0 until the kernel sets it);
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
        pub static KLogBuffer: [::core::sync::atomic::AtomicU64; __KLOG_WORDS] =
            [const { ::core::sync::atomic::AtomicU64::new(0) }; __KLOG_WORDS];

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

        /// The statics above, for the write path and for `klog_init`.
        pub static KLOG_REGISTRY: $crate::Registry = $crate::Registry {
            logs: &KLogs,
            buffer: &KLogBuffer,
            flags: &DebugFlags,
            level: &klogLevel,
            clock_hz: &klogClockHz,
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
            KLOG_REGISTRY.init();
        }
    };
}
