//! kcrash: crash-dump inspection for kernel engineers, in the style of crash(8).
//!
//! The library holds everything but argument parsing: the session over a dump and its image,
//! KLog decoding, and the commands. The binary is a thin shell around it.

pub mod commands;
pub mod expr;
pub mod interrupt;
pub mod klog;
pub mod linux;
pub mod memory;
pub mod paint;
pub mod regress;
pub mod session;
pub mod shell;
