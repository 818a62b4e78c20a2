//! The DProbes scenarios' oracle (`DPROBES-` lines, printed by tests/kernels/dprobes-writer for
//! every record it commits) and its comparison with kcrash's `dplog --json` output.

/// The DProbes scenarios, run by the bare kernel and the hosted program alike.
pub const SCENARIOS: [&str; 4] = [
    "dprobes-plain",
    "dprobes-wrap",
    "dprobes-faults",
    "dprobes-damaged",
];
