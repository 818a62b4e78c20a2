//! The QNX Neutrino instrumented kernel's trace ring, written the way the microkernel
//! instrumentation design lays it out: a circular list of `tracebuf`s, each a header and
//! [`ELEMENTS`] 16-byte `traceevent`s, found through [`_syspage_trace`] (the design's "field
//! within the syspage"). Simple events take one traceevent; combine events are split into
//! begin, continuation and end parts that share one time stamp. Every event written is also
//! described to a [`Sink`] as one oracle line (see README.md for the format), so a test can
//! compare a reader's output with what the kernel wrote.
//!
//! No allocation, no dependencies: the bare QEMU kernel and the hosted Linux program both use
//! it, from any number of processors (one lock serialises the writers, as the kernel's spin
//! lock does).
#![no_std]

pub mod codes;
mod ring;
pub mod scenarios;

pub use codes::{Simple, Wide};
pub use ring::{
    _syspage_trace, Combine, Sink, SyspageTrace, TraceBuf, TraceEvent, TraceHeader, Tracer,
    BUFFERS, ELEMENTS, FLAG_FULL, FLAG_HIWATER, HIWATER,
};
