//! The design's TOS_KLOG_DEBUG run-time checks: d_klog, klogLevel and d_klogprintf.
//! Run with `cargo test -p klog-runtime --features klog-debug`.
#![cfg(feature = "klog-debug")]

use std::sync::Mutex;

use klog_runtime::intensity::{D_KLOG, D_KLOGPRINTF, D_TERSE, D_VERBOSE};
use klog_runtime::{KLOG_TERSE, KLOG_VERBOSE};

static CONSOLE: Mutex<Vec<String>> = Mutex::new(Vec::new());

pub struct Console;
impl klog_runtime::Platform for Console {
    fn clock() -> u64 {
        0
    }
    fn chore_id() -> u64 {
        0
    }
    fn proc_dom() -> u64 {
        0
    }
    fn console(text: &str) {
        CONSOLE.lock().unwrap().push(text.to_owned());
    }
}

klog_runtime::klog_config! {
    platform = Console;
    // The static level does not apply with run-time checks: klogLevel starts here and rules.
    static_level = klog_runtime::KLOG_TERSE;
    subsystems { DBG_NONE = 8, DBG_SCHED = 8, DBG_VM = 8 }
}

#[test]
fn run_time_checks_decide_what_is_logged_and_echoed() {
    klog_init();
    let sched = &DebugFlags[DBG_SCHED.id as usize];

    // klogLevel TERSE: a verbose event is not logged, a terse one is.
    assert_eq!(klog_runtime::KLOGV0!(DBG_SCHED, "verbose"), None);
    assert_eq!(klog_runtime::KLOGT0!(DBG_SCHED, "terse"), Some(0));
    KLOG_REGISTRY.set_level(KLOG_VERBOSE);
    assert_eq!(klog_runtime::KLOGV0!(DBG_SCHED, "verbose"), Some(1));

    // d_klog off: nothing from that subsystem, others unaffected.
    sched.clear(D_KLOG);
    assert_eq!(klog_runtime::KLOGT0!(DBG_SCHED, "off"), None);
    assert_eq!(klog_runtime::KLOGT0!(DBG_VM, "vm"), Some(0));
    sched.set(D_KLOG);
    assert_eq!(KLogs[DBG_SCHED.id as usize].records_written(), 2);

    // d_klogprintf echoes only events whose intensity bit is also set.
    sched.set(D_KLOGPRINTF | D_TERSE);
    klog_runtime::KLOG2!(
        DBG_SCHED,
        KLOG_TERSE,
        "postProcess: task:%016lx curPD:%d",
        0x1fu64,
        3
    );
    klog_runtime::KLOGV1!(DBG_SCHED, "not echoed %d", 1);
    sched.set(D_VERBOSE);
    klog_runtime::KLOGV1!(DBG_SCHED, "name %s", klog_runtime::KLOG_STR!(c"alarm"));
    assert_eq!(
        *CONSOLE.lock().unwrap(),
        [
            "[SCHED] postProcess: task:000000000000001f curPD:3",
            "[SCHED] name alarm"
        ]
    );
}
