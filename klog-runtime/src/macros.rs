//! The KLOG macros of the design: `KLOG!(subsystem, level, desc, d1, d2)` and its short forms.

/// Logs an event: `KLOG!(DBG_SCHED, KLOG_VERBOSE, "postProcess: task:%016lx curPD:%d", task, pd)`.
///
/// `desc` is a C printf format string literal (the macro adds its NUL); up to three data words
/// follow, any integer, bool or raw pointer, or a `KLOG_STR!` for a `%s`. The number of data words
/// must match the format's conversions, or the invocation fails to compile. Evaluates to the
/// record's sequence number in its ring, or `None` when the event is off. Without the `klog-debug`
/// feature, an event whose level is above the subsystem's static level compiles to nothing.
#[macro_export]
macro_rules! KLOG {
    ($sub:expr, $level:expr, $desc:literal $(, $arg:expr)* $(,)?) => {{
        const __DESC: &[u8] = concat!($desc, "\0").as_bytes();
        const _: () = assert!(
            $crate::printf::count_args(__DESC) == $crate::__klog_count!($($arg),*),
            "KLOG: the format's conversions do not match the number of data words"
        );
        $sub.log::<{ $level as u32 }>(
            $crate::Desc::Pointer,
            __DESC.as_ptr() as u64,
            __DESC,
            $crate::__klog_words!($($arg),*),
        )
    }};
}

/// Logs an event whose description is in the record itself, up to 8 bytes of printf format
/// (the design's appendix A.1 "short 8 character trace description"): no string in kernel
/// memory to follow. `KLOG_INLINE!(DBG_VM, KLOG_TERSE, "pf %lx", addr)`. Longer text, or data
/// words that do not match the conversions, fail to compile.
#[macro_export]
macro_rules! KLOG_INLINE {
    ($sub:expr, $level:expr, $desc:literal $(, $arg:expr)* $(,)?) => {{
        const __DESC: &[u8] = concat!($desc, "\0").as_bytes();
        const __WORD: u64 = $crate::inline_desc($desc.as_bytes());
        const _: () = assert!(
            $crate::printf::count_args(__DESC) == $crate::__klog_count!($($arg),*),
            "KLOG_INLINE: the format's conversions do not match the number of data words"
        );
        $sub.log::<{ $level as u32 }>(
            $crate::Desc::Inline,
            __WORD,
            __DESC,
            $crate::__klog_words!($($arg),*),
        )
    }};
}

/// Logs an event by its minor event ID (the design's appendix A.1): the record holds the ID, the
/// format sits in the kernel's `KLogDescriptions` table that `klog_config!`'s `descriptions`
/// declares. `KLOG_EVENT!(DBG_VM, KLOG_TERSE, EVT_PAGE_FAULT, addr)`; data words that do not
/// match the format's conversions fail to compile.
#[macro_export]
macro_rules! KLOG_EVENT {
    ($sub:expr, $level:expr, $event:path $(, $arg:expr)* $(,)?) => {{
        const _: () = assert!(
            $event.args == $crate::__klog_count!($($arg),*),
            "KLOG_EVENT: the event's conversions do not match the number of data words"
        );
        $sub.log::<{ $level as u32 }>(
            $crate::Desc::Event,
            $event.id as u64,
            $event.text,
            $crate::__klog_words!($($arg),*),
        )
    }};
}

/// A `%s` argument: the address of a NUL-terminated string (`&CStr`, `*const c_char`).
#[macro_export]
macro_rules! KLOG_STR {
    ($s:expr) => {
        $crate::KlogStr::str_word($s)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __klog_count {
    () => {
        0
    };
    ($a:expr) => {
        1
    };
    ($a:expr, $b:expr) => {
        2
    };
    ($a:expr, $b:expr, $c:expr) => {
        3
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __klog_words {
    () => {
        [0u64; 3]
    };
    ($a:expr) => {
        [$crate::KlogWord::word($a), 0, 0]
    };
    ($a:expr, $b:expr) => {
        [$crate::KlogWord::word($a), $crate::KlogWord::word($b), 0]
    };
    ($a:expr, $b:expr, $c:expr) => {
        [
            $crate::KlogWord::word($a),
            $crate::KlogWord::word($b),
            $crate::KlogWord::word($c),
        ]
    };
}

/// Emits the design's short forms `KLOG[TVP][012]` (fixed level and count) and `KLOG[012]`
/// (level given), each forwarding to `KLOG!`. `$d` is a literal `$` so the generated macros can
/// declare their own metavariables on stable Rust.
macro_rules! short_forms {
    ($d:tt $($name:ident = $level:ident ($($arg:ident),*);)* | $($lname:ident ($($larg:ident),*);)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "!(subsystem, desc", $(", ", stringify!($arg),)* ")` logs at `", stringify!($level), "`.")]
            #[macro_export]
            macro_rules! $name {
                ($d sub:expr, $d desc:literal $(, $d $arg:expr)* $d(,)?) => {
                    $crate::KLOG!($d sub, $crate::$level, $d desc $(, $d $arg)*)
                };
            }
        )*
        $(
            #[doc = concat!("`", stringify!($lname), "!(subsystem, level, desc", $(", ", stringify!($larg),)* ")`.")]
            #[macro_export]
            macro_rules! $lname {
                ($d sub:expr, $d level:expr, $d desc:literal $(, $d $larg:expr)* $d(,)?) => {
                    $crate::KLOG!($d sub, $d level, $d desc $(, $d $larg)*)
                };
            }
        )*
    };
}

short_forms! {$
    KLOGT0 = KLOG_TERSE();
    KLOGT1 = KLOG_TERSE(d1);
    KLOGT2 = KLOG_TERSE(d1, d2);
    KLOGT = KLOG_TERSE(d1, d2);
    KLOGV0 = KLOG_VERBOSE();
    KLOGV1 = KLOG_VERBOSE(d1);
    KLOGV2 = KLOG_VERBOSE(d1, d2);
    KLOGV = KLOG_VERBOSE(d1, d2);
    KLOGP0 = KLOG_PROLOG();
    KLOGP1 = KLOG_PROLOG(d1);
    KLOGP2 = KLOG_PROLOG(d1, d2);
    KLOGP = KLOG_PROLOG(d1, d2);
    |
    KLOG0();
    KLOG1(d1);
    KLOG2(d1, d2);
}
