//! The big-ring kernel's one scenario, for benchmarks (built with `--features big-rings`,
//! without klog-debug: the static-level fast path).

use crate::chore::{self, Step, CHORES};
use crate::oracle;
use crate::platform::{self, DBG_FS, DBG_PARCHORE, DBG_SCHED, RING_RECS};
use crate::Scenario;

/// Every scenario of this build.
pub const ALL: &[(&str, Scenario)] = &[("big", big)];

/// Big rings for benchmarks: PARCHORE 1 Mi + 1000 events (wrapped), FS 1 Mi - 10 (almost
/// full), SCHED 2 Mi + 12345 (wrapped): 4,207,639 events, 4,194,294 of them kept. No oracle
/// line per event; a digest per ring (see tests/kernels/README.md).
fn big(clock_hz: u64) -> ! {
    oracle::klog_init(clock_hz);
    let total: u64 = RING_RECS.iter().sum();
    event!(DBG_NONE, KLOG_TERSE, "big rings: %u records, first chore %s", total, klog_runtime::KLOG_STR!(CHORES[0].name);
        "big rings: {total} records, first chore {}", CHORES[0].name.to_str().unwrap_or("?"));
    let plan = [
        (DBG_PARCHORE, RING_RECS[1] + 1000),
        (DBG_FS, RING_RECS[2] - 10),
        (DBG_SCHED, RING_RECS[3] + 12345),
    ];
    for (sub, total) in plan {
        let ring = sub.id as usize;
        let keep_from = total.saturating_sub(RING_RECS[ring]);
        let mut digest = Fnv1a::new();
        let mut last_seq = 0;
        let mut i = 0u64;
        chore::run(&[0, 1, 2, 3], |c, _| {
            if i == total {
                return Step::Done;
            }
            let seq = klog_runtime::KLOG!(
                sub,
                klog_runtime::KLOG_TERSE,
                "bench %u chore %u",
                i,
                c as u64
            )
            .expect("the static level logs terse events");
            if seq >= keep_from {
                let at = oracle::record_at(ring, seq);
                let ccb = &CHORES[c];
                for word in [
                    (0x4B4C_4F47u64 << 32) | (8 << 16) | u64::from(sub.id),
                    chore::ccb_addr(c),
                    klog_runtime::proc_dom(ccb.processor, ccb.domain),
                    platform::last_clock(),
                    oracle::record_word(at, 4),
                    i,
                    c as u64,
                    0,
                ] {
                    digest.word(word);
                }
            }
            last_seq = seq;
            i += 1;
            Step::Yield
        });
        event!(DBG_NONE, KLOG_TERSE, "ring %s filled", klog_runtime::KLOG_STR!(c"big");
            "ring big filled");
        kprintln!(
            "KLOG-DIGEST ring={ring} records={} last_seq={last_seq} fnv1a={:#x}",
            total - keep_from,
            digest.0
        );
    }
    panic!("scenario big: done");
}

/// FNV-1a over 64-bit words (little-endian bytes): the big-ring scenario's digest.
pub struct Fnv1a(pub u64);

impl Fnv1a {
    pub const fn new() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    pub fn word(&mut self, word: u64) {
        for byte in word.to_le_bytes() {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}
