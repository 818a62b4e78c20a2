//! Ctrl-C stops the running command, not kcrash: SIGINT sets a flag that long-running command
//! loops poll with [`requested`] (or [`check`]) and the shell clears before each command.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static REQUESTED: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

/// The error a command returns when it stopped for Ctrl-C.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Routes SIGINT to the flag instead of ending the process. Idempotent.
pub fn install() -> Result<(), String> {
    let mut result = Ok(());
    INSTALL.call_once(|| {
        result = ctrlc::set_handler(|| REQUESTED.store(true, Ordering::SeqCst))
            .map_err(|e| format!("cannot catch Ctrl-C: {e}"));
    });
    result
}

/// Whether Ctrl-C was pressed since the running command started.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// `Err(Interrupted)` once Ctrl-C was pressed: `interrupt::check()?` in a loop.
pub fn check() -> Result<(), Interrupted> {
    if requested() {
        Err(Interrupted)
    } else {
        Ok(())
    }
}

/// Forgets an earlier Ctrl-C: called before each command.
pub fn clear() {
    REQUESTED.store(false, Ordering::SeqCst);
}
