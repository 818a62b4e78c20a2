//! Where the KLog statics and their fields sit in memory, as the image's DWARF or the writer's
//! descriptor describes them. Nothing here is hard-coded: a rustc kernel and a gcc kernel lay `KLog` out as their compilers
//! chose, and kcrash reads each field at its DWARF member offset with its DWARF size.

/// One member of a struct: byte offset and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub offset: u64,
    pub size: u64,
}

/// The members of `KLog` that kcrash reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KLogFields {
    pub subsystem: Field,
    pub name: Field,
    pub num_recs: Field,
    pub rec_size: Field,
    pub header: Field,
    pub buffer: Field,
    pub buffer_size_1: Field,
    pub next_write: Field,
}

/// The members of `KLog`, in the design's order.
const FIELD_NAMES: [&str; 8] = [
    "subsystem",
    "name",
    "num_recs",
    "rec_size",
    "header",
    "buffer",
    "buffer_size_1",
    "next_write",
];

impl KLogFields {
    /// The fields in the design's order: subsystem, name, num_recs, rec_size, header, buffer,
    /// buffer_size_1, next_write.
    pub fn in_order(
        [subsystem, name, num_recs, rec_size, header, buffer, buffer_size_1, next_write]: [Field;
            8],
    ) -> KLogFields {
        KLogFields {
            subsystem,
            name,
            num_recs,
            rec_size,
            header,
            buffer,
            buffer_size_1,
            next_write,
        }
    }

    /// Builds the field table from a lookup of member name → field.
    pub fn from_lookup(
        mut member: impl FnMut(&str) -> Option<Field>,
    ) -> Result<KLogFields, LayoutError> {
        let mut fields = [Field { offset: 0, size: 0 }; 8];
        for (field, name) in fields.iter_mut().zip(FIELD_NAMES) {
            *field = member(name).ok_or(LayoutError::MissingMember(name))?;
        }
        Ok(KLogFields::in_order(fields))
    }
}

/// An array in memory: its address, element count and element size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayAt {
    pub addr: u64,
    pub len: u64,
    pub stride: u64,
}

impl ArrayAt {
    /// Address of element `i`; one past the top of memory wraps (and then cannot be read) rather
    /// than overflows, since a descriptor from the dump says where arrays are.
    pub fn element(&self, i: u64) -> u64 {
        self.addr.wrapping_add(i.wrapping_mul(self.stride))
    }
}

/// A scalar variable in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScalarAt {
    pub addr: u64,
    pub size: u64,
}

/// An array of scalars that may sit in wider slots (`KLogCommits`: a u64 per 64-byte line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScalarArray {
    pub array: ArrayAt,
    /// Bytes of the value at the start of each slot.
    pub size: u64,
}

/// How many sets of rings `KLogs` holds (one per processor, or 1 when processors share rings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Processors {
    /// Said by the descriptor, or 1 for a kernel without `klogProcessors`.
    Known(u64),
    /// In `klogProcessors`, read from the dump.
    At(ScalarAt),
}

/// Everything kcrash needs to find the rings of one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KLogLayout {
    /// `KLogs`: a KLog per subsystem per processor set, processor p's set at `p × DBG_MAX`.
    pub klogs: ArrayAt,
    pub processors: Processors,
    pub fields: KLogFields,
    /// `KLogBuffer`: its address and size in bytes (len × 8-byte words).
    pub buffer: ArrayAt,
    /// `DebugFlags[DBG_MAX]`, when the kernel has it.
    pub debug_flags: Option<ArrayAt>,
    /// `klogLevel`, when the kernel has it.
    pub klog_level: Option<ScalarAt>,
    /// `klogClockHz`, when the kernel has it.
    pub clock_hz: Option<ScalarAt>,
    /// `KLogCommits`, when the writer keeps it: records finished per ring.
    pub commits: Option<ScalarArray>,
    /// `klogFlags`, when the kernel has it.
    pub flags: Option<ScalarAt>,
    /// `KLogDescriptions`: the format addresses minor event IDs index, when the kernel has it.
    pub descriptions: Option<ArrayAt>,
    /// Subsystem names the descriptor holds inline (empty from DWARF): shown when a KLog's
    /// `name` pointer cannot be followed.
    pub names: Vec<String>,
}

impl KLogLayout {
    /// Bytes of KLogBuffer.
    pub fn buffer_bytes(&self) -> u64 {
        self.buffer.len.saturating_mul(self.buffer.stride)
    }
}

/// Why the image does not describe a usable KLog.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("the image has no variable `{0}` in its DWARF")]
    MissingVariable(&'static str),
    #[error("`{0}` is not an array with a known length")]
    NotAnArray(&'static str),
    #[error("the KLog type has no member `{0}`")]
    MissingMember(&'static str),
    #[error(transparent)]
    Symbols(#[from] symbols::Error),
}
