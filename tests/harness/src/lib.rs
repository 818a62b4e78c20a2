//! Turns kcrash's test kernels into crash dumps with an independent oracle, and keeps the
//! corpus made of them. See README.md.

pub mod corpus;
pub mod dump;
pub mod gdbcheck;
pub mod kernel;
pub mod manifest;
pub mod oracle;
pub mod qemu;
pub mod qmp;
pub mod tools;
