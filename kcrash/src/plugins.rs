//! The decoders kcrash is built with. A decoder crate under `plugins/` joins by one line of
//! [`DECODERS`]; its `command()` is then a session command (`commands::events` prints the log
//! of a decoder with no command of its own), and `plugins` lists it.

use kcrash_plugin::Decoder;

/// Every decoder, in the order `plugins` lists them.
pub static DECODERS: &[&dyn Decoder] = &[
    &kcrash_klog::decoder::DECODER,
    &crate::linux::printk_log::DECODER,
    &kcrash_dprobes::DECODER,
    &kcrash_qnx::DECODER,
    &kcrash_klogger::DECODER,
];

/// The decoder whose command is `name`.
pub fn by_command(name: &str) -> Option<&'static dyn Decoder> {
    DECODERS.iter().copied().find(|d| d.command() == name)
}

/// `decoder`'s place in [`DECODERS`] (the session keeps each one's log by it).
pub fn index_of(decoder: &dyn Decoder) -> usize {
    DECODERS
        .iter()
        .position(|d| d.command() == decoder.command())
        .unwrap_or(usize::MAX)
}
