//! kcrash: crash-dump inspection for kernel engineers, in the style of crash(8).
//!
//! The library holds everything but the binary's command line: the session over a dump and its
//! image, the decoders' logs (the KLog's first, from `plugins/`), the commands and the shell. The binary is a thin front end over it.

pub mod batch;
pub mod commands;
pub mod disasm;
pub mod error;
pub mod event_view;
pub use kcrash_plugin::escape;
pub mod export;
pub mod expr;
pub mod interrupt;
pub mod lanes;
pub use kcrash_klog as klog;
pub mod linux;
pub use kcrash_plugin::memory;
pub mod paint;
pub mod plugins;
pub mod redirect;
pub mod regress;
pub mod report;
pub mod schemata;
pub mod session;
pub mod shell;
pub mod symbolize;
pub mod timeline;
pub mod unwind;
