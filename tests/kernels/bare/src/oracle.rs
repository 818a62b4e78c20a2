//! The oracle: for every event the kernel prints one console line with the record's fields and
//! the message it meant, formatted by core::fmt (never by klog-runtime's printf interpreter).
//! The harness derives each ring's expected content from these lines. Format: see
//! tests/kernels/README.md ("Oracle lines").

use crate::platform::{last_clock, KLogBuffer, DBG_MAX, KLOG_PROCESSORS, RING_NAMES, RING_RECS};
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, Ordering};

/// Bytes per record (8 words).
pub const RECORD_BYTES: u64 = 64;

static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// `klog_init()`, remembered so the oracle knows where pre-init records went.
pub fn klog_init(clock_hz: u64) {
    crate::platform::klog_init();
    crate::platform::KLOG_REGISTRY.set_clock_hz(clock_hz);
    INITIALIZED.store(true, Ordering::Relaxed);
}

/// Address of ring `ring`'s first record after klog_init: the rings sit in id order in
/// KLogBuffer (the design's layout), a processor set after another, computed here from the
/// configured sizes.
pub fn ring_base(ring: usize) -> u64 {
    let set: u64 = RING_RECS.iter().sum();
    let before: u64 = RING_RECS[..ring % DBG_MAX].iter().sum();
    KLogBuffer.as_ptr() as u64 + ((ring / DBG_MAX) as u64 * set + before) * RECORD_BYTES
}

/// The ring an event of subsystem `id` logged with `proc_dom` lands in: the first ring until
/// klog_init, its own in the processor's set after.
pub fn receiving_ring(id: u16, proc_dom: u64) -> usize {
    if INITIALIZED.load(Ordering::Relaxed) {
        let set = match KLOG_PROCESSORS {
            1 => 0,
            n => (proc_dom >> 32) as usize % n,
        };
        set * DBG_MAX + id as usize
    } else {
        0
    }
}

/// Address of record `seq` of `ring`.
pub fn record_at(ring: usize, seq: u64) -> u64 {
    ring_base(ring) + (seq % RING_RECS[ring % DBG_MAX]) * RECORD_BYTES
}

/// Word `index` of the record at `at`, read back from the ring (used for `desc` only: the
/// address of klog-runtime's copy of the format is not known to the kernel otherwise).
pub fn record_word(at: u64, index: usize) -> u64 {
    // SAFETY: `at` is a record address inside KLogBuffer and index < 8.
    unsafe { (at as *const u64).add(index).read_volatile() }
}

/// Prints the configuration lines: clock frequency and every ring.
pub fn print_config(clock_hz: u64) {
    kprintln!("KLOG-CONFIG clock_hz={clock_hz}");
    for ring in 0..KLOG_PROCESSORS * DBG_MAX {
        kprintln!(
            "KLOG-RING ring={ring} name={} num_recs={} buffer={:#x}",
            RING_NAMES[ring % DBG_MAX],
            RING_RECS[ring % DBG_MAX],
            ring_base(ring)
        );
    }
}

/// The oracle line of one event: `seq` is what the KLOG macro returned.
pub fn event(id: u16, seq: Option<u64>, data: [u64; 3], fmt: &str, msg: fmt::Arguments) {
    let Some(seq) = seq else {
        kprintln!(
            "KLOG-SKIP subsys={id} fmt={} msg={}",
            Escaped(fmt, true),
            Escaped(msg, false)
        );
        return;
    };
    let proc_dom = crate::platform::proc_dom();
    let ring = receiving_ring(id, proc_dom);
    let at = record_at(ring, seq);
    kprintln!(
        "KLOG-EVENT ring={ring} subsys={id} seq={seq} at={at:#x} id={:#x} proc_dom={:#x} clock={} desc={:#x} d1={:#x} d2={:#x} d3={:#x} fmt={} msg={}",
        crate::platform::chore_id(),
        proc_dom,
        last_clock(),
        record_word(at, 4),
        data[0],
        data[1],
        data[2],
        Escaped(fmt, true),
        Escaped(msg, false),
    );
}

/// Displays its content with `char::escape_debug`, and spaces as `\u{20}` when `spaces` (for
/// fields other than the final `msg=`).
struct Escaped<T>(T, bool);

impl<T: fmt::Display> fmt::Display for Escaped<T> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        struct Escaper<'a, 'b>(&'a mut fmt::Formatter<'b>, bool);
        impl Write for Escaper<'_, '_> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                for c in s.chars() {
                    if c == ' ' && self.1 {
                        self.0.write_str("\\u{20}")?;
                    } else {
                        for e in c.escape_debug() {
                            self.0.write_char(e)?;
                        }
                    }
                }
                Ok(())
            }
        }
        write!(Escaper(f, self.1), "{}", self.0)
    }
}

/// Logs an event with a KLOG macro and prints its oracle line.
///
/// `event!(DBG_SCHED, KLOG_VERBOSE, "task:%016lx pd:%d", task, pd; "task:{task:016x} pd:{pd}")`:
/// subsystem, level, the C format klog-runtime stores, up to three data words (u64), then after
/// `;` the same message as a Rust format.
macro_rules! event {
    ($sub:ident, $level:ident, $desc:literal; $($msg:tt)+) => {{
        let seq = klog_runtime::KLOG!($crate::platform::$sub, klog_runtime::$level, $desc);
        $crate::oracle::event($crate::platform::$sub.id, seq, [0, 0, 0], $desc, format_args!($($msg)+))
    }};
    ($sub:ident, $level:ident, $desc:literal, $a:expr; $($msg:tt)+) => {{
        let a: u64 = $a;
        let seq = klog_runtime::KLOG!($crate::platform::$sub, klog_runtime::$level, $desc, a);
        $crate::oracle::event($crate::platform::$sub.id, seq, [a, 0, 0], $desc, format_args!($($msg)+))
    }};
    ($sub:ident, $level:ident, $desc:literal, $a:expr, $b:expr; $($msg:tt)+) => {{
        let (a, b): (u64, u64) = ($a, $b);
        let seq = klog_runtime::KLOG!($crate::platform::$sub, klog_runtime::$level, $desc, a, b);
        $crate::oracle::event($crate::platform::$sub.id, seq, [a, b, 0], $desc, format_args!($($msg)+))
    }};
    ($sub:ident, $level:ident, $desc:literal, $a:expr, $b:expr, $c:expr; $($msg:tt)+) => {{
        let (a, b, c): (u64, u64, u64) = ($a, $b, $c);
        let seq = klog_runtime::KLOG!($crate::platform::$sub, klog_runtime::$level, $desc, a, b, c);
        $crate::oracle::event($crate::platform::$sub.id, seq, [a, b, c], $desc, format_args!($($msg)+))
    }};
}
