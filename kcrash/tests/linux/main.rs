//! kcrash on Linux: Debian's kernels under QEMU, their dumps and their running /proc/kcore, each
//! compared with what the kernel itself printed and with crash(8), drgn and gdb reading the same
//! dump. One test binary for all of them, so that one crash(8) session per dump answers every
//! test that compares with it (crash takes seconds of CPU to open Debian's vmlinux, and
//! milliseconds a command after that). Setup: `common/linux.rs`.

#[path = "../common/mod.rs"]
mod common;

mod arm64;
mod bt;
mod cold;
mod drgn;
mod kaslr;
mod live;
mod log;
mod module;
mod ps;
mod symbols;
mod sys;
mod trace;
