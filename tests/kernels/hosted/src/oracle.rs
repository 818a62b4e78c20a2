//! The oracle: one stdout line per event with every field of its record and the message it
//! meant, formatted by Rust's `format!` (never by klog-runtime's printf interpreter). The line
//! format is every test kernel's, documented in corpus/README.md ("Oracle lines").

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use klog_runtime::{Desc, REC_WORDS};

use crate::platform;
use crate::{KLogBuffer, KLogs, KlogConfig, DBG_MAX, KLOG_LEADERS, KLOG_PROCESSORS};

struct State {
    /// Whether the KLOG-RING lines are out; until then event lines wait in `pending`, since the
    /// harness needs every ring declared before its events.
    announced: bool,
    pending: Vec<String>,
}

static STATE: Mutex<State> = Mutex::new(State {
    announced: false,
    pending: Vec::new(),
});

fn emit(line: String) {
    let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if state.announced {
        print_line(&line);
    } else {
        state.pending.push(line);
    }
}

fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    // A broken stdout leaves no oracle: nothing left to do but die loudly.
    if writeln!(out, "{line}").is_err() {
        std::process::exit(3);
    }
}

/// Prints the clock frequency and every KLog's place (each processor set's, a group member's
/// mirroring its leader's), then the events logged before.
pub fn announce_rings() {
    let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    print_line(&format!("KLOG-CONFIG clock_hz={}", platform::CLOCK_HZ));
    for (id, log) in KLogs.iter().enumerate() {
        print_line(&format!(
            "KLOG-RING ring={id} name={} num_recs={} buffer={:#x}",
            subsystem_name(id % DBG_MAX),
            log.num_recs.load(Ordering::Relaxed),
            log.buffer.load(Ordering::Relaxed) as u64
        ));
    }
    for line in std::mem::take(&mut state.pending) {
        print_line(&line);
    }
    state.announced = true;
}

fn subsystem_name(id: usize) -> &'static str {
    crate::SUBSYSTEMS
        .get(id)
        .map_or("?", |s: &klog_runtime::Subsys<KlogConfig>| s.name())
}

/// The ring that receives an event of `subsystem` logged with `proc_dom`: its group leader's
/// in the processor's set (processor modulo the sets), or the first ring before klog_init (while
/// that KLog still points at the start of KLogBuffer).
pub fn receiving_ring(subsystem: u16, proc_dom: u64) -> usize {
    // With one set, every processor's events go to it.
    let set = match KLOG_PROCESSORS {
        1 => 0,
        n => (proc_dom >> 32) as usize % n,
    };
    let ring = set * DBG_MAX + KLOG_LEADERS[subsystem as usize] as usize;
    let buffer = KLogs[ring].buffer.load(Ordering::Relaxed);
    if ring != 0 && buffer == KLogBuffer.as_ptr() as *mut u64 {
        0
    } else {
        ring
    }
}

/// Address of the record with sequence number `seq` in ring `ring`.
pub fn record_address(ring: usize, seq: u64) -> u64 {
    let ring = &KLogs[ring];
    let offset_words = (seq * REC_WORDS) & ring.buffer_size_1.load(Ordering::Relaxed);
    ring.buffer.load(Ordering::Relaxed) as u64 + offset_words * 8
}

/// `text` escaped so it holds no space and the harness can reverse it.
fn field(text: &str) -> String {
    text.escape_debug().to_string().replace(' ', "\\u{20}")
}

/// The oracle line of one event: KLOG-EVENT if it was logged (`seq`), KLOG-SKIP if it was off.
/// `desc` is the record's desc word, of kind `kind`; `text` its NUL-terminated format.
pub fn event(
    subsystem: u16,
    seq: Option<u64>,
    (kind, desc, text): (Desc, u64, &'static [u8]),
    data: [u64; 3],
    message: &str,
) {
    let fmt = std::str::from_utf8(text.strip_suffix(b"\0").unwrap_or(text)).unwrap_or("?");
    let kind = match kind {
        Desc::Pointer => "",
        Desc::Inline => " desc_kind=inline",
        Desc::Event => " desc_kind=event",
    };
    let line = match seq {
        None => format!(
            "KLOG-SKIP subsys={subsystem} fmt={} msg={}",
            field(fmt),
            message.escape_debug()
        ),
        Some(seq) => {
            let hooked = platform::last_hooked();
            let ring = receiving_ring(subsystem, hooked.proc_dom);
            format!(
                "KLOG-EVENT ring={ring} subsys={subsystem} seq={seq} at={:#x} id={:#x} proc_dom={:#x} clock={} desc={:#x}{kind} d1={:#x} d2={:#x} d3={:#x} fmt={} msg={}",
                record_address(ring, seq),
                hooked.chore,
                hooked.proc_dom,
                hooked.clock,
                desc,
                data[0],
                data[1],
                data[2],
                field(fmt),
                message.escape_debug()
            )
        }
    };
    emit(line);
}

/// A record a writer reserved and never finished.
pub fn torn(subsystem: u16, seq: u64) {
    let ring = receiving_ring(subsystem, platform::last_hooked().proc_dom);
    emit(format!(
        "KLOG-TORN ring={ring} subsys={subsystem} seq={seq} at={:#x}",
        record_address(ring, seq)
    ));
}

/// A KLogs field overwritten with garbage.
pub fn scribbled(subsystem: u16, field: &str, value: u64) {
    emit(format!(
        "KLOG-DAMAGE ring={subsystem} kind=scribbled field={field} value={value:#x}"
    ));
}

/// A big ring's surviving records, summarised.
#[cfg(feature = "big-rings")]
pub fn digest(ring: usize, records: u64, last_seq: u64, fnv1a: u64) {
    emit(format!(
        "KLOG-DIGEST ring={ring} records={records} last_seq={last_seq} fnv1a={fnv1a:#x}"
    ));
}

/// The last line before the crash.
pub fn panic(message: &str) {
    emit(format!("KCRASH-PANIC {message}"));
    let _ = std::io::stdout().flush();
}

/// Logs one event through the subsystem's writer and prints its oracle line:
/// `event!(DBG_SCHED, KLOG_VERBOSE, "task:%016lx pd:%d", [task, pd], "task:{task:016x} pd:{pd}")`.
///
/// `desc` lives in a static so the oracle knows the address the record holds (the KLOG! macros
/// keep theirs private); the data words are the arguments as KLOG! would store them. The message
/// is the caller's `format!` rendering of the same arguments.
#[macro_export]
macro_rules! event {
    ($sub:expr, $level:ident, $desc:literal, [$($arg:expr),* $(,)?], $($msg:tt)+) => {{
        static DESC: &[u8] = concat!($desc, "\0").as_bytes();
        const _: () = assert!(
            klog_runtime::printf::count_args(concat!($desc, "\0").as_bytes())
                == 0usize $(+ [stringify!($arg)].len())*,
            "event!: the format's conversions do not match the data words"
        );
        let given: &[u64] = &[$(klog_runtime::KlogWord::word($arg)),*];
        let mut data = [0u64; 3];
        data[..given.len()].copy_from_slice(given);
        let sub = &$sub;
        let desc = (klog_runtime::Desc::Pointer, DESC.as_ptr() as u64, DESC);
        let seq = sub.log::<{ klog_runtime::$level as u32 }>(desc.0, desc.1, desc.2, data);
        $crate::oracle::event(sub.id, seq, desc, data, &format!($($msg)+));
    }};
}

/// As [`event!`] for an event whose format travels in the record (at most 8 bytes) or is a
/// minor event ID of the kernel's descriptions: `described!(DBG_SCHED, KLOG_TERSE,
/// inline "idle %u", [cpu], "idle {cpu}")` or `described!(DBG_VM, KLOG_TERSE, event EVT_FAULT,
/// [va, prot], "fault va={va:#x} prot={prot:x}")`.
#[macro_export]
macro_rules! described {
    (@log $sub:expr, $level:ident, $desc:expr, [$($arg:expr),* $(,)?], $($msg:tt)+) => {{
        let given: &[u64] = &[$(klog_runtime::KlogWord::word($arg)),*];
        let mut data = [0u64; 3];
        data[..given.len()].copy_from_slice(given);
        let (sub, desc) = (&$sub, $desc);
        let seq = sub.log::<{ klog_runtime::$level as u32 }>(desc.0, desc.1, desc.2, data);
        $crate::oracle::event(sub.id, seq, desc, data, &format!($($msg)+));
    }};
    ($sub:expr, $level:ident, inline $text:literal, [$($arg:expr),* $(,)?], $($msg:tt)+) => {{
        const TEXT: &[u8] = concat!($text, "\0").as_bytes();
        const _: () = assert!(
            klog_runtime::printf::count_args(TEXT) == 0usize $(+ [stringify!($arg)].len())*,
            "described!: the format's conversions do not match the data words"
        );
        const WORD: u64 = klog_runtime::inline_desc($text.as_bytes());
        $crate::described!(@log $sub, $level, (klog_runtime::Desc::Inline, WORD, TEXT), [$($arg),*], $($msg)+)
    }};
    ($sub:expr, $level:ident, event $id:path, [$($arg:expr),* $(,)?], $($msg:tt)+) => {{
        const _: () = assert!(
            $id.args == 0usize $(+ [stringify!($arg)].len())*,
            "described!: the event's conversions do not match the data words"
        );
        $crate::described!(@log $sub, $level, (klog_runtime::Desc::Event, $id.id as u64, $id.text), [$($arg),*], $($msg)+)
    }};
}
