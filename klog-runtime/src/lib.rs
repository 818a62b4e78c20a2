//! The kernel side of the Tera kernel event log ("Logging Kernel Events", Tera Computer Company,
//! 1995): the writer kernels link, and the record format every reader shares.
//!
//! A kernel declares its subsystems and ring sizes once with [`klog_config!`], which emits the
//! statics the design names (`KLogs`, `KLogBuffer`, `DebugFlags`, `klogLevel`) plus `klogClockHz`,
//! and logs with [`KLOG!`] and its short forms. Records are 8 words ([`KLogRec`]); the header word
//! and the torn-record protocol are documented in [`record`], the contract C writers follow too.
//!
//! `no_std`, no allocation: every ring lives in the statically allocated `KLogBuffer`.

#![cfg_attr(not(test), no_std)]

pub mod config;
mod console;
pub mod descriptor;
mod macros;
pub mod printf;
pub mod record;
mod ring;
mod word;

pub use config::EventId;
pub use record::*;
pub use ring::{
    flags, AttachError, CacheAligned, Config, DbgIntensity, KLog, Platform, Registry, Subsys,
};
pub use word::{KlogStr, KlogWord};

/// Whether the design's run-time checks (`d_klog`, `klogLevel`, `d_klogprintf`) are compiled in:
/// the `klog-debug` feature, the design's `TOS_KLOG_DEBUG`.
pub const RUNTIME_CHECKS: bool = cfg!(feature = "klog-debug");

/// Whether writers count finished records in `KLogCommits` (the `commit-counts` feature; the
/// descriptor points at `KLogCommits` only then).
pub const COUNT_COMMITS: bool = cfg!(feature = "commit-counts");
