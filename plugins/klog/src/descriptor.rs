//! A [`KLogLayout`] from the writer's own descriptor (`klogDescriptor`, see
//! `klog_runtime::descriptor`): what kcrash reads the rings by when the image has no DWARF, or
//! when there is no image at all and the descriptor is found by scanning the dump's memory.

use std::fmt;
use std::ops::ControlFlow;

use klog_runtime::descriptor::{self, Parsed, HEAD_SIZE_V1};

use super::layout::{ArrayAt, Field, KLogFields, KLogLayout, Processors, ScalarArray, ScalarAt};
use kcrash_plugin::escape::escaped;

/// Where kcrash found the KLog's layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutSource {
    /// The image's DWARF.
    Dwarf,
    /// The descriptor at the image's `klogDescriptor` symbol.
    Symbol { addr: u64 },
    /// The descriptor found by scanning the dump's memory at `found` (physical, or virtual for a
    /// process core).
    Scan { found: u64, virtual_addresses: bool },
}

impl fmt::Display for LayoutSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutSource::Dwarf => write!(f, "DWARF"),
            LayoutSource::Symbol { addr } => {
                write!(f, "descriptor at symbol klogDescriptor ({addr:#x})")
            }
            LayoutSource::Scan {
                found,
                virtual_addresses: false,
            } => write!(
                f,
                "descriptor found by scanning memory, at physical {found:#x}"
            ),
            LayoutSource::Scan { found, .. } => {
                write!(f, "descriptor found by scanning memory, at {found:#x}")
            }
        }
    }
}

/// A checked descriptor and the subsystem names it holds.
#[derive(Clone, Debug)]
pub struct Described {
    pub parsed: Parsed,
    /// Subsystem names from the descriptor's name slots, escaped.
    pub names: Vec<String>,
}

/// Why a descriptor was not used: where it is and what is wrong with it.
#[derive(Clone, Debug)]
pub struct Refused {
    pub at: u64,
    pub why: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KLog descriptor at {:#x}: {}", self.at, self.why)
    }
}

/// The largest KLogBuffer a descriptor may claim: rings are read whole by a live snapshot, and
/// salvage walks all of it.
const MAX_BUFFER: u64 = 1 << 36;

/// Fills a buffer from an address, or says why it cannot.
pub type ReadFn<'a> = dyn Fn(u64, &mut [u8]) -> Result<(), String> + 'a;

/// What a scan found: each candidate's address and verdict.
pub type Candidates = Vec<(u64, Result<Described, Refused>)>;

/// Reads and checks the descriptor whose first byte `read` gives at `at`. `read` fills a buffer
/// or says why it cannot; the size read is the descriptor's own claim, bounded by
/// [`descriptor::SIZE_MAX`].
pub fn read(at: u64, read: &ReadFn<'_>) -> Result<Described, Refused> {
    let refuse = |why: String| Refused { at, why };
    let mut bytes = vec![0u8; HEAD_SIZE_V1];
    read(at, &mut bytes).map_err(|e| refuse(format!("unreadable: {e}")))?;
    let size = descriptor::claimed_size(&bytes).map_err(|e| refuse(e.to_string()))?;
    bytes.resize(size, 0);
    read(
        at.wrapping_add(HEAD_SIZE_V1 as u64),
        &mut bytes[HEAD_SIZE_V1..],
    )
    .map_err(|e| refuse(format!("its names are unreadable: {e}")))?;
    let parsed = descriptor::parse(&bytes).map_err(|e| refuse(e.to_string()))?;
    if parsed.klog_entries() > super::MAX_KLOGS {
        return Err(refuse(format!(
            "its {} processors x {} subsystems are more KLogs than kcrash reads ({})",
            parsed.processors,
            parsed.subsystems,
            super::MAX_KLOGS
        )));
    }
    if parsed.buffer_bytes > MAX_BUFFER {
        return Err(refuse(format!(
            "its KLogBuffer of {:#x} bytes is larger than kcrash reads ({MAX_BUFFER:#x})",
            parsed.buffer_bytes
        )));
    }
    let tera = descriptor::rec_fields();
    if parsed.rec_fields != tera || parsed.rec_stride != 64 {
        return Err(refuse(
            "its records are not the Tera design's eight words, the only layout kcrash reads"
                .into(),
        ));
    }
    let names = (0..parsed.subsystems as usize)
        .map(|i| descriptor::name(&bytes, i).map_or_else(String::new, escaped))
        .collect();
    Ok(Described { parsed, names })
}

/// The layout the descriptor gives.
pub fn layout(d: &Described) -> KLogLayout {
    let p = &d.parsed;
    let fields = p.klog_fields.map(|f| Field {
        offset: f.offset.into(),
        size: f.size.into(),
    });
    KLogLayout {
        klogs: ArrayAt {
            addr: p.klogs,
            len: p.klog_entries(),
            stride: p.klog_stride.into(),
        },
        processors: Processors::Known(p.processors.into()),
        fields: KLogFields::in_order(fields),
        buffer: ArrayAt {
            addr: p.buffer,
            len: p.buffer_bytes / 8,
            stride: 8,
        },
        debug_flags: p.debug_flags.map(|(addr, stride, _)| ArrayAt {
            addr,
            len: p.subsystems.into(),
            stride: stride.into(),
        }),
        klog_level: p.klog_level.map(|(addr, size)| ScalarAt {
            addr,
            size: size.into(),
        }),
        clock_hz: p.clock_hz.map(|(addr, size)| ScalarAt {
            addr,
            size: size.into(),
        }),
        commits: p.commits.map(|(addr, stride, size)| ScalarArray {
            array: ArrayAt {
                addr,
                len: p.klog_entries(),
                stride: stride.into(),
            },
            size: size.into(),
        }),
        flags: p.flags.map(|(addr, size)| ScalarAt {
            addr,
            size: size.into(),
        }),
        descriptions: p.descriptions.map(|(addr, len, stride)| ArrayAt {
            addr,
            len: len.into(),
            stride: stride.into(),
        }),
        names: d.names.clone(),
    }
}

/// How DWARF's layout and the descriptor's differ, when they do: one line per difference.
pub fn disagreement(dwarf: &KLogLayout, described: &KLogLayout) -> Vec<String> {
    let mut v = Vec::new();
    let mut differ = |what: &str, a: String, b: String| {
        if a != b {
            v.push(format!("{what}: DWARF {a}, descriptor {b}"));
        }
    };
    differ(
        "KLogs",
        format!("{:x?}", dwarf.klogs),
        format!("{:x?}", described.klogs),
    );
    differ(
        "KLog fields",
        format!("{:?}", dwarf.fields),
        format!("{:?}", described.fields),
    );
    differ(
        "KLogBuffer",
        format!("{:x?}", dwarf.buffer),
        format!("{:x?}", described.buffer),
    );
    for (name, a, b) in [
        ("klogLevel", dwarf.klog_level, described.klog_level),
        ("klogClockHz", dwarf.clock_hz, described.clock_hz),
    ] {
        differ(
            name,
            format!("{:x?}", a.map(|s| s.addr)),
            format!("{:x?}", b.map(|s| s.addr)),
        );
    }
    differ(
        "DebugFlags",
        format!("{:x?}", dwarf.debug_flags.map(|a| a.addr)),
        format!("{:x?}", described.debug_flags.map(|a| a.addr)),
    );
    differ(
        "KLogDescriptions",
        format!("{:x?}", dwarf.descriptions),
        format!("{:x?}", described.descriptions),
    );
    v
}

/// The candidates a scan found, in address order, each read and checked by `check`; at most
/// `MAX_CANDIDATES` are looked at, so a dump full of magic copies cannot make the scan slow.
pub fn scan(
    dump: &dumpfmt::Dump,
    mut check: impl FnMut(u64) -> Result<Described, Refused>,
) -> (Candidates, dumpfmt::Searched) {
    const MAX_CANDIDATES: usize = 16;
    let mut found = Vec::new();
    let searched = dump.search(&descriptor::stored_magic(), 64, &mut |at| {
        found.push((at, check(at)));
        if found.len() >= MAX_CANDIDATES {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    (found, searched)
}
