//! The kernel a Linux process pretends to be: each thread is a processor running one task.

use std::cell::Cell;

/// What a processor is running; its address is the chore id its events carry.
pub struct Task {
    pub cpu: u32,
}

/// The clock's frequency: CLOCK_MONOTONIC counts nanoseconds.
pub const CLOCK_HZ: u64 = 1_000_000_000;
/// The domain every processor of this program belongs to.
pub const DOMAIN: u32 = 1;

thread_local! {
    static TASK: Cell<*const Task> = const { Cell::new(std::ptr::null()) };
    /// What the hooks returned for this thread's last event, for its oracle line.
    static LAST: Cell<Hooked> = const { Cell::new(Hooked { clock: 0, chore: 0, proc_dom: 0 }) };
}

/// The values the platform hooks last returned on this thread.
#[derive(Clone, Copy)]
pub struct Hooked {
    pub clock: u64,
    pub chore: u64,
    pub proc_dom: u64,
}

/// Makes `task` the one this thread runs. The task must outlive the thread's logging.
pub fn run_on_this_thread(task: &'static Task) {
    TASK.with(|t| t.set(task));
}

/// The values the hooks returned for this thread's last logged event.
pub fn last_hooked() -> Hooked {
    LAST.with(Cell::get)
}

/// The address of the task this thread runs (its chore id), 0 if none.
pub fn current_task_address() -> u64 {
    task().map_or(0, |t| t as *const Task as u64)
}

fn task() -> Option<&'static Task> {
    // SAFETY: only `run_on_this_thread` stores here, and it takes a 'static task.
    TASK.with(|t| unsafe { t.get().as_ref() })
}

fn remember(update: impl FnOnce(&mut Hooked)) {
    LAST.with(|last| {
        let mut hooked = last.get();
        update(&mut hooked);
        last.set(hooked);
    });
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * CLOCK_HZ + ts.tv_nsec as u64
}

pub struct HostPlatform;

impl klog_runtime::Platform for HostPlatform {
    fn clock() -> u64 {
        let clock = monotonic_ns();
        remember(|h| h.clock = clock);
        clock
    }

    fn chore_id() -> u64 {
        let chore = current_task_address();
        remember(|h| h.chore = chore);
        chore
    }

    fn proc_dom() -> u64 {
        let proc_dom = klog_runtime::proc_dom(task().map_or(0, |t| t.cpu), DOMAIN);
        remember(|h| h.proc_dom = proc_dom);
        proc_dom
    }
}
