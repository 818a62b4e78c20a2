//! Builds kcrash's hosted test programs (Rust and C), crashes them into Linux cores and gdb
//! gcores with an independent oracle, and keeps the corpus made of them. See README.md.

pub mod capture;
pub mod coredump;
pub mod corpus;
pub mod manifest;
pub mod oracle;
pub mod programs;
pub mod tools;
