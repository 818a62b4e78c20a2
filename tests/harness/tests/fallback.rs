//! When Linux writes no core, the harness takes one with gdb's gcore. This test forbids cores in
//! its own process (RLIMIT_CORE hard limit 0, inherited by the program), which is why it lives in
//! a test binary of its own. Needs gdb (see hosted.rs for what happens without it).

use kcrash_harness::capture::{self, Capture, Run};
use kcrash_harness::corpus::{self, Kernel};
use kcrash_harness::programs::Program;
use kcrash_harness::tools;
use std::time::Duration;

#[test]
fn no_kernel_core_falls_back_to_gcore() {
    if !tools::available_for("no_kernel_core_falls_back_to_gcore", &[tools::GDB]) {
        return;
    }
    let image = Kernel::Hosted(Program::Hosted).build().unwrap();
    let none = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit with a valid rlimit; lowering a limit needs no privilege.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_CORE, &none) }, 0);
    let dir = tempfile::tempdir().unwrap();
    let crashed = capture::crash(&Run {
        program: &image,
        scenario: "unfilled",
        dir: dir.path(),
        timeout: Duration::from_secs(60),
        emulator: None,
    })
    .unwrap();
    assert_eq!(crashed.capture, Capture::Gcore);
    assert!(
        crashed.producer.starts_with("gdb gcore"),
        "{}",
        crashed.producer
    );
    let expected = corpus::derive_file(&crashed.console).unwrap();
    let verified = corpus::verify_core(&crashed.core, &expected).unwrap();
    assert_eq!(verified.records, 8);
}
