//! Cooperative chores: a round-robin of task control blocks, each run until it yields. The
//! running chore's CCB address is what KLog records as `id` (the design's `thisChore()`), and its
//! processor and domain make `proc_dom`.

use core::ffi::CStr;
use core::sync::atomic::{AtomicPtr, Ordering};

/// A chore control block.
pub struct Ccb {
    /// NUL-terminated, so events can log it with `%s`.
    pub name: &'static CStr,
    pub processor: u32,
    pub domain: u32,
}

/// The chores of the test kernel: different processors and protection domains, as Tera chores
/// running for different teams would have.
pub static CHORES: [Ccb; 4] = [
    Ccb {
        name: c"idle",
        processor: 0,
        domain: 0,
    },
    Ccb {
        name: c"pager",
        processor: 1,
        domain: 0,
    },
    Ccb {
        name: c"fsd",
        processor: 2,
        domain: 0x5000_0010,
    },
    Ccb {
        name: c"shell",
        processor: 3,
        domain: 0x3000_01bf,
    },
];

/// The boot chore, current until the scheduler first runs: logging before klog_init and
/// before any chore exists still has an id, as on a real kernel's boot processor.
pub static BOOT: Ccb = Ccb {
    name: c"boot",
    processor: 0,
    domain: 0,
};

static CURRENT: AtomicPtr<Ccb> = AtomicPtr::new(&BOOT as *const Ccb as *mut Ccb);

pub fn current() -> &'static Ccb {
    // SAFETY: CURRENT only ever holds addresses of the statics above.
    unsafe { &*CURRENT.load(Ordering::Relaxed) }
}

/// `thisChore()`: the CCB address.
pub fn current_id() -> u64 {
    current() as *const Ccb as u64
}

/// The id of chore `chore` of [`CHORES`].
pub fn ccb_addr(chore: usize) -> u64 {
    &CHORES[chore] as *const Ccb as u64
}

fn switch_to(ccb: &'static Ccb) {
    CURRENT.store(ccb as *const Ccb as *mut Ccb, Ordering::Relaxed);
}

/// What a chore's step asks of the scheduler.
#[derive(PartialEq, Eq)]
pub enum Step {
    Yield,
    Done,
}

/// Runs `body(chore index, its step number)` for the chores in `which`, round-robin, each until
/// it returns [`Step::Done`]; then the boot chore is current again.
pub fn run(which: &[usize], mut body: impl FnMut(usize, u64) -> Step) {
    let mut steps = [0u64; 4];
    let mut done = [false; 4];
    while which.iter().any(|&c| !done[c]) {
        for &c in which {
            if done[c] {
                continue;
            }
            switch_to(&CHORES[c]);
            done[c] = body(c, steps[c]) == Step::Done;
            steps[c] += 1;
        }
    }
    switch_to(&BOOT);
}
