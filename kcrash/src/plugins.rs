//! The decoders kcrash is built with. A decoder crate under `plugins/` joins by one line of
//! [`DECODERS`]; its `command()` is then a session command (`commands::events` prints the log
//! of a decoder with no command of its own), and `plugins` lists it. A decoder that reads its
//! system's own schema files joins [`SYNTAXES`] by one line too.

use kcrash_plugin::Decoder;
use kcrash_schema::Syntax;

/// Every decoder, in the order `plugins` lists them.
pub static DECODERS: &[&dyn Decoder] = &[
    &kcrash_klog::decoder::DECODER,
    &crate::linux::printk_log::DECODER,
    &kcrash_dprobes::DECODER,
    &kcrash_qnx::DECODER,
    &kcrash_klogger::DECODER,
    &kcrash_ftrace::DECODER,
];

/// Every schema file syntax, kcrash's own first; a file is read in the first that claims it.
pub static SYNTAXES: &[&Syntax] = &[
    &kcrash_schema::file::SYNTAX,
    &kcrash_klogger::import::SYNTAX,
    &kcrash_qnx::import::SYNTAX,
    &kcrash_dprobes::import::SYNTAX,
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
