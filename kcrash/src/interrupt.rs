//! Ctrl-C stops the running command, not kcrash: SIGINT sets a flag that long-running command
//! loops poll with [`requested`] (or [`check`]) and the shell clears before each command.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Set by the SIGINT handler (signal-hook's flag handler is async-signal-safe: one store).
fn flag() -> &'static Arc<AtomicBool> {
    static REQUESTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    REQUESTED.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// The error a command returns when it stopped for Ctrl-C.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Routes SIGINT to the flag instead of ending the process. Call once.
pub fn install() -> Result<(), String> {
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(flag()))
        .map(drop)
        .map_err(|e| format!("cannot catch Ctrl-C: {e}"))
}

/// Whether Ctrl-C was pressed since the running command started.
pub fn requested() -> bool {
    flag().load(Ordering::Relaxed)
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
    flag().store(false, Ordering::SeqCst);
}
