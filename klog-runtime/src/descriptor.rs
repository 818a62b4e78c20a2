//! The KLog descriptor: one static block beside `KLogs` that says where every KLog static is and
//! how `KLog` and `KLogRec` are laid out, so that a reader with no debug information — a stripped
//! image, no image at all, raw physical memory — can find and decode the rings. The layout of
//! `KLog`, `KLogRec` and the record header is not changed by it.
//!
//! Byte by byte (ABI 2.0; every multi-byte field in the writer's byte order, which `endian`
//! gives; addresses are virtual unless said otherwise):
//!
//! ```text
//! off  size  field
//! 0x00  16   magic: "Tera KLog layout" with every byte XOR 0xff (never in a reader's constants)
//! 0x10   2   abi_major (2; a reader also reads 1, whose head ends at 0xe0, and refuses others)
//! 0x12   2   abi_minor (0: a reader accepts any, reading only the fields it knows)
//! 0x14   4   endian: 0x01020304 as the writer stores a u32
//! 0x18   1   word_size: bytes of an address and of a ring word (8)
//! 0x19   1   build_id_len: bytes of build_id that are meaningful (0..=32; 0: none known)
//! 0x1a   2   subsystems: entries of KLogs (and of names)
//! 0x1c   4   size: bytes of the whole descriptor, names included (0x100 + 32 × subsystems)
//! 0x20   8   self: this descriptor's own address
//! 0x28   8   KLogs (processors × subsystems entries, processor p's set at p × subsystems)
//! 0x30   8   KLogBuffer
//! 0x38   8   KLogBuffer's size in bytes
//! 0x40   8   DebugFlags (0: none)
//! 0x48   8   klogLevel (0: none)
//! 0x50   8   klogClockHz (0: none)
//! 0x58   8   KLogCommits (0: none): per KLogs entry, the records whose header the writer stored
//! 0x60   8   page_table_root: physical address of the top page table that maps these
//!            addresses, as the kernel said at klog_init (0: not known)
//! 0x68   2   stride of KLogs (bytes from KLogs[i] to KLogs[i+1])
//! 0x6a   2   stride of a record (bytes; 8 words)
//! 0x6c   2   stride of DebugFlags
//! 0x6e   2   stride of KLogCommits
//! 0x70   1   size of klogLevel
//! 0x71   1   size of klogClockHz
//! 0x72   1   size of a DebugFlags entry's value
//! 0x73   1   size of a KLogCommits entry's counter
//! 0x74   4   (zero)
//! 0x78  32   KLog fields, 8 × (u16 offset, u16 size): subsystem, name, num_recs, rec_size,
//!            header, buffer, buffer_size_1, next_write
//! 0x98  32   KLogRec fields, 8 × (u16 offset, u16 size): header, id, proc_dom, clock, desc,
//!            data1, data2, data3
//! 0xb8  32   build_id (the image's GNU build-id, its first build_id_len bytes)
//! 0xd8   4   checksum: CRC-32 (IEEE 802.3, as zlib's crc32) of all `size` bytes with this
//!            field read as 0; 0 until klog_init seals the descriptor
//! 0xdc   4   name_size: bytes of each name slot (32)
//! 0xe0   2   processors: sets of rings in KLogs (1: every processor shares each ring)
//! 0xe2   2   stride of KLogDescriptions (bytes from one format address to the next)
//! 0xe4   4   entries of KLogDescriptions
//! 0xe8   8   KLogDescriptions (0: none): the format addresses minor event IDs index
//! 0xf0   8   klogFlags (0: none): bit 0, some ring's buffer lies outside KLogBuffer
//! 0xf8   1   size of klogFlags
//! 0xf9   7   (zero)
//! 0x100 32×n names: subsystem i's name without DBG_, NUL-padded, at 0x100 + 32 × i
//! ```
//!
//! Everything but the checksum, build_id, build_id_len and page_table_root is known when the
//! image is linked; klog_init fills those three and seals the descriptor with the checksum last.
//! A reader trusts a descriptor only when it is sealed and the checksum matches.

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// The magic as text; the descriptor stores every byte inverted.
pub const MAGIC_TEXT: [u8; 16] = *b"Tera KLog layout";
/// The ABI this crate writes and reads.
pub const ABI_MAJOR: u16 = 2;
pub const ABI_MINOR: u16 = 0;
/// The endianness marker as a u32.
pub const ENDIAN: u32 = 0x0102_0304;
/// Bytes before the names.
pub const HEAD_SIZE: usize = 0x100;
/// Bytes before the names in an ABI 1 descriptor (no processors, descriptions or flags).
pub const HEAD_SIZE_V1: usize = 0xe0;
/// Bytes of each name slot.
pub const NAME_SIZE: usize = 32;
/// Bytes of build-id the descriptor holds.
pub const BUILD_ID_MAX: usize = 32;
/// Offset of the checksum.
pub const CHECKSUM_AT: usize = 0xd8;
/// The largest descriptor a reader accepts: one name for every possible subsystem id.
pub const SIZE_MAX: usize = HEAD_SIZE + NAME_SIZE * crate::MAX_SUBSYSTEMS;

/// The magic as a writer stores it.
pub const fn stored_magic() -> [u8; 16] {
    let mut m = MAGIC_TEXT;
    let mut i = 0;
    while i < 16 {
        m[i] ^= 0xff;
        i += 1;
    }
    m
}

/// CRC-32 (IEEE, reflected, as zlib's `crc32`) of `bytes`, continuing from `crc`; start at 0.
pub fn crc32(crc: u32, bytes: impl IntoIterator<Item = u8>) -> u32 {
    let mut c = !crc;
    for b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// The checksum a whole descriptor (`descriptor`, its `size` bytes) must hold: the CRC-32 of its
/// bytes with the checksum field read as 0.
pub fn checksum(descriptor: &[u8]) -> u32 {
    let field = CHECKSUM_AT..CHECKSUM_AT + 4;
    crc32(
        0,
        descriptor
            .iter()
            .enumerate()
            .map(|(i, &b)| if field.contains(&i) { 0 } else { b }),
    )
}

/// Stores the right checksum in the descriptor at the start of `bytes`, over the size its head
/// claims, in the byte order its marker gives: for tests and fuzz targets that damage a field on
/// purpose and must reach the checks after the checksum. False when the head is cut or its size
/// runs past `bytes`.
pub fn reseal(bytes: &mut [u8]) -> bool {
    let Some(head) = bytes.get(..HEAD_SIZE_V1) else {
        return false;
    };
    let big = head[0x14..0x18] == ENDIAN.to_be_bytes();
    let size = [head[0x1c], head[0x1d], head[0x1e], head[0x1f]];
    let size = if big {
        u32::from_be_bytes(size)
    } else {
        u32::from_le_bytes(size)
    } as usize;
    let Some(descriptor) = bytes.get_mut(..size.max(HEAD_SIZE_V1)) else {
        return false;
    };
    let sum = checksum(descriptor);
    let sum = if big {
        sum.to_be_bytes()
    } else {
        sum.to_le_bytes()
    };
    descriptor[CHECKSUM_AT..CHECKSUM_AT + 4].copy_from_slice(&sum);
    true
}

/// A `(offset, size)` pair of the field tables.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FieldAt {
    pub offset: u16,
    pub size: u16,
}

/// An address the linker fills in (a raw pointer, so it can be written in a static initialiser).
#[repr(transparent)]
pub struct Addr(pub *const u8);

// SAFETY: only the address is ever used; nothing is read or written through it here.
unsafe impl Sync for Addr {}

/// The fixed part of the descriptor (offsets 0x00..0x100), as the table above lays it out.
#[repr(C)]
pub struct Head {
    pub magic: [u8; 16],
    pub abi_major: u16,
    pub abi_minor: u16,
    pub endian: u32,
    pub word_size: u8,
    pub build_id_len: AtomicU8,
    pub subsystems: u16,
    pub size: u32,
    pub this: Addr,
    pub klogs: Addr,
    pub buffer: Addr,
    pub buffer_bytes: u64,
    pub debug_flags: Addr,
    pub klog_level: Addr,
    pub clock_hz: Addr,
    pub commits: Addr,
    pub page_table_root: AtomicU64,
    pub klog_stride: u16,
    pub rec_stride: u16,
    pub debug_flags_stride: u16,
    pub commits_stride: u16,
    pub klog_level_size: u8,
    pub clock_hz_size: u8,
    pub debug_flags_size: u8,
    pub commits_size: u8,
    pub zero: u32,
    pub klog_fields: [FieldAt; 8],
    pub rec_fields: [FieldAt; 8],
    pub build_id: [AtomicU8; BUILD_ID_MAX],
    pub checksum: AtomicU32,
    pub name_size: u32,
    pub processors: u16,
    pub description_stride: u16,
    pub description_count: u32,
    pub descriptions: Addr,
    pub flags: Addr,
    pub flags_size: u8,
    pub reserved: [u8; 7],
}

/// The whole descriptor of a kernel with `N` subsystems. `klog_config!` emits one as
/// `klogDescriptor`.
#[repr(C, align(64))]
pub struct Descriptor<const N: usize> {
    pub head: Head,
    pub names: [[u8; NAME_SIZE]; N],
}

const _: () = {
    assert!(core::mem::size_of::<Head>() == HEAD_SIZE);
    assert!(core::mem::offset_of!(Head, this) == 0x20);
    assert!(core::mem::offset_of!(Head, page_table_root) == 0x60);
    assert!(core::mem::offset_of!(Head, klog_fields) == 0x78);
    assert!(core::mem::offset_of!(Head, build_id) == 0xb8);
    assert!(core::mem::offset_of!(Head, checksum) == CHECKSUM_AT);
    assert!(core::mem::offset_of!(Head, processors) == 0xe0);
    assert!(core::mem::offset_of!(Head, flags) == 0xf0);
};

/// The KLog field table of this crate's `KLog`.
pub const fn klog_fields() -> [FieldAt; 8] {
    use crate::KLog;
    use core::mem::offset_of;
    const fn f(offset: usize) -> FieldAt {
        FieldAt {
            offset: offset as u16,
            size: 8,
        }
    }
    [
        f(offset_of!(KLog, subsystem)),
        f(offset_of!(KLog, name)),
        f(offset_of!(KLog, num_recs)),
        f(offset_of!(KLog, rec_size)),
        f(offset_of!(KLog, header)),
        f(offset_of!(KLog, buffer)),
        f(offset_of!(KLog, buffer_size_1)),
        f(offset_of!(KLog, next_write)),
    ]
}

/// The KLogRec field table: eight words in the design's order.
pub const fn rec_fields() -> [FieldAt; 8] {
    let mut t = [FieldAt { offset: 0, size: 8 }; 8];
    let mut i = 0;
    while i < 8 {
        t[i].offset = (i * 8) as u16;
        i += 1;
    }
    t
}

/// Subsystem names laid out as the descriptor's name slots (`names[i]` without `DBG_`).
pub const fn name_slots<const N: usize>(names: [&str; N]) -> [[u8; NAME_SIZE]; N] {
    let mut slots = [[0u8; NAME_SIZE]; N];
    let mut i = 0;
    while i < N {
        let b = names[i].as_bytes();
        assert!(
            b.len() < NAME_SIZE,
            "klog_config!: a subsystem name is longer than 31 bytes"
        );
        let mut j = 0;
        while j < b.len() {
            slots[i][j] = b[j];
            j += 1;
        }
        i += 1;
    }
    slots
}

/// What `klog_init` writes into a descriptor: the fields only the running kernel knows, then
/// the checksum that seals it.
pub trait Seal: Sync {
    fn seal(&self, build_id: &[u8], page_table_root: u64);
}

impl<const N: usize> Seal for Descriptor<N> {
    fn seal(&self, build_id: &[u8], page_table_root: u64) {
        let h = &self.head;
        let n = build_id.len().min(BUILD_ID_MAX);
        for (slot, b) in h.build_id.iter().zip(&build_id[..n]) {
            slot.store(*b, Ordering::Relaxed);
        }
        h.build_id_len.store(n as u8, Ordering::Relaxed);
        h.page_table_root.store(page_table_root, Ordering::Relaxed);
        h.checksum.store(0, Ordering::Relaxed);
        let base = (self as *const Self).cast::<u8>();
        let size = core::mem::size_of::<Self>().min(h.size as usize);
        // SAFETY: `size` bytes from `base` are this descriptor; klog_init runs before any other
        // processor logs, so nothing writes them while they are read.
        let bytes = (0..size).map(|i| unsafe { core::ptr::read_volatile(base.add(i)) });
        h.checksum.store(crc32(0, bytes), Ordering::Release);
    }
}

/// Why bytes are not a descriptor a reader may trust.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DescriptorError {
    /// Fewer bytes than the field says.
    Short {
        need: usize,
        have: usize,
    },
    BadMagic,
    /// Another ABI major version.
    Abi {
        major: u16,
        minor: u16,
    },
    /// The endianness marker is neither byte order.
    Endian(u32),
    WordSize(u8),
    /// `size` disagrees with `subsystems` and `name_size`, or is beyond [`SIZE_MAX`].
    Size {
        size: u32,
        subsystems: u16,
    },
    BuildIdLen(u8),
    /// Checksum 0: klog_init never sealed it.
    Unsealed,
    Checksum {
        stored: u32,
        computed: u32,
    },
    /// A field of a table lies outside its struct's stride, or has a size a reader cannot read.
    Field {
        table: &'static str,
        index: usize,
    },
    /// A global's size is not 1, 2, 4 or 8.
    Scalar(&'static str),
    /// An array's or KLogBuffer's extent wraps past the top of the address space.
    Extent(&'static str),
    /// `processors` is 0.
    Processors,
}

impl core::fmt::Display for DescriptorError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DescriptorError::Short { need, have } => {
                write!(f, "needs {need} bytes, only {have} are there")
            }
            DescriptorError::BadMagic => write!(f, "not a KLog descriptor (no magic)"),
            DescriptorError::Abi { major, minor } => write!(
                f,
                "ABI {major}.{minor}, this reader reads ABI 1.x and {ABI_MAJOR}.x"
            ),
            DescriptorError::Endian(e) => write!(f, "endianness marker {e:#010x} is not valid"),
            DescriptorError::WordSize(w) => write!(f, "word size {w}, not 8"),
            DescriptorError::Size { size, subsystems } => write!(
                f,
                "size {size} does not fit {subsystems} subsystems of {NAME_SIZE}-byte names"
            ),
            DescriptorError::BuildIdLen(n) => write!(f, "build-id length {n} is over 32"),
            DescriptorError::Unsealed => {
                write!(f, "not sealed (checksum 0): klog_init never ran on it (a copy from an image file, or a kernel that stopped before klog_init)")
            }
            DescriptorError::Checksum { stored, computed } => write!(
                f,
                "checksum {stored:#010x} does not match its bytes ({computed:#010x})"
            ),
            DescriptorError::Field { table, index } => {
                write!(
                    f,
                    "{table} field {index} lies outside its struct or has an unreadable size"
                )
            }
            DescriptorError::Scalar(name) => write!(f, "{name}'s size is not 1, 2, 4 or 8"),
            DescriptorError::Extent(name) => write!(f, "{name} runs past the top of memory"),
            DescriptorError::Processors => write!(f, "processors is 0"),
        }
    }
}

/// A descriptor a reader parsed and checked: every field in native form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub abi_major: u16,
    pub abi_minor: u16,
    pub big_endian: bool,
    pub size: u32,
    pub this: u64,
    pub klogs: u64,
    pub subsystems: u16,
    pub klog_stride: u16,
    pub buffer: u64,
    pub buffer_bytes: u64,
    /// `(address, stride, size)` of DebugFlags, when present.
    pub debug_flags: Option<(u64, u16, u8)>,
    /// `(address, size)` of klogLevel and klogClockHz, when present.
    pub klog_level: Option<(u64, u8)>,
    pub clock_hz: Option<(u64, u8)>,
    /// `(address, stride, size)` of KLogCommits, when present.
    pub commits: Option<(u64, u16, u8)>,
    pub page_table_root: Option<u64>,
    pub rec_stride: u16,
    pub klog_fields: [FieldAt; 8],
    pub rec_fields: [FieldAt; 8],
    pub build_id: ([u8; BUILD_ID_MAX], u8),
    /// Sets of rings in KLogs (1 for ABI 1).
    pub processors: u16,
    /// `(address, entries, stride)` of KLogDescriptions, when present.
    pub descriptions: Option<(u64, u32, u16)>,
    /// `(address, size)` of klogFlags, when present.
    pub flags: Option<(u64, u8)>,
}

impl Parsed {
    /// Entries of KLogs: a KLog per subsystem per processor set.
    pub fn klog_entries(&self) -> u64 {
        u64::from(self.subsystems) * u64::from(self.processors)
    }
}

impl Parsed {
    /// The image's build-id as the kernel recorded it, when it did.
    pub fn build_id(&self) -> Option<&[u8]> {
        let (bytes, len) = &self.build_id;
        (*len > 0).then(|| &bytes[..*len as usize])
    }
}

/// The bytes of subsystem `i`'s name slot, up to its first NUL, from a whole descriptor.
pub fn name(descriptor: &[u8], i: usize) -> Option<&[u8]> {
    let head = Reader::new(descriptor).ok()?.head_size();
    let slot = descriptor.get(head + i * NAME_SIZE..head + (i + 1) * NAME_SIZE)?;
    Some(slot.split(|&b| b == 0).next().unwrap_or(slot))
}

/// Reads the fixed head at the start of `bytes` and says how many bytes the whole descriptor
/// claims (checked against [`SIZE_MAX`]), so that a reader can fetch them before [`parse`].
/// `bytes` needs [`HEAD_SIZE_V1`] bytes, whatever the ABI.
pub fn claimed_size(bytes: &[u8]) -> Result<usize, DescriptorError> {
    let r = Reader::new(bytes)?;
    let subsystems = r.u16(0x1a);
    let size = r.u32(0x1c);
    let want = r.head_size() + NAME_SIZE * subsystems as usize;
    if size as usize != want || r.u32(0xdc) as usize != NAME_SIZE || want > SIZE_MAX {
        return Err(DescriptorError::Size { size, subsystems });
    }
    Ok(want)
}

struct Reader<'a> {
    b: &'a [u8],
    big: bool,
    major: u16,
}

impl<'a> Reader<'a> {
    /// Checks magic, ABI, endianness and word size of a head.
    fn new(b: &'a [u8]) -> Result<Reader<'a>, DescriptorError> {
        if b.len() < HEAD_SIZE_V1 {
            return Err(DescriptorError::Short {
                need: HEAD_SIZE_V1,
                have: b.len(),
            });
        }
        if b[..16] != stored_magic() {
            return Err(DescriptorError::BadMagic);
        }
        let marker = [b[0x14], b[0x15], b[0x16], b[0x17]];
        let big = match u32::from_le_bytes(marker) {
            ENDIAN => false,
            _ if u32::from_be_bytes(marker) == ENDIAN => true,
            other => return Err(DescriptorError::Endian(other)),
        };
        let mut r = Reader { b, big, major: 1 };
        let (major, minor) = (r.u16(0x10), r.u16(0x12));
        if major != 1 && major != ABI_MAJOR {
            return Err(DescriptorError::Abi { major, minor });
        }
        r.major = major;
        if b[0x18] != 8 {
            return Err(DescriptorError::WordSize(b[0x18]));
        }
        Ok(r)
    }

    fn head_size(&self) -> usize {
        if self.major == 1 {
            HEAD_SIZE_V1
        } else {
            HEAD_SIZE
        }
    }

    fn bytes<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&self.b[at..at + N]);
        if self.big {
            a.reverse();
        }
        a
    }
    fn u16(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.bytes(at))
    }
    fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.bytes(at))
    }
    fn u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes(at))
    }
    fn table(&self, at: usize) -> [FieldAt; 8] {
        core::array::from_fn(|i| FieldAt {
            offset: self.u16(at + 4 * i),
            size: self.u16(at + 4 * i + 2),
        })
    }
}

fn scalar_size(n: u8) -> bool {
    matches!(n, 1 | 2 | 4 | 8)
}

/// Parses and checks a whole descriptor (`bytes` from its magic on; at least `size` bytes).
/// Never trusts a field it has not checked: a damaged descriptor is an error, not a layout.
pub fn parse(bytes: &[u8]) -> Result<Parsed, DescriptorError> {
    let size = claimed_size(bytes)?;
    if bytes.len() < size {
        return Err(DescriptorError::Short {
            need: size,
            have: bytes.len(),
        });
    }
    let r = Reader::new(&bytes[..size])?;
    let stored = r.u32(CHECKSUM_AT);
    if stored == 0 {
        return Err(DescriptorError::Unsealed);
    }
    let computed = checksum(&bytes[..size]);
    if stored != computed {
        return Err(DescriptorError::Checksum { stored, computed });
    }
    let id_len = bytes[0x19];
    if id_len as usize > BUILD_ID_MAX {
        return Err(DescriptorError::BuildIdLen(id_len));
    }
    let klog_stride = r.u16(0x68);
    let rec_stride = r.u16(0x6a);
    let klog_fields = r.table(0x78);
    let rec_fields = r.table(0x98);
    for (table, fields, stride) in [
        ("KLog", &klog_fields, klog_stride),
        ("KLogRec", &rec_fields, rec_stride),
    ] {
        for (index, f) in fields.iter().enumerate() {
            if !scalar_size(f.size.min(255) as u8)
                || f.size > 8
                || u32::from(f.offset) + u32::from(f.size) > u32::from(stride)
            {
                return Err(DescriptorError::Field { table, index });
            }
        }
    }
    let optional = |at: usize| Some(r.u64(at)).filter(|&a| a != 0);
    let sized = |name, at: usize, size_at: usize| -> Result<_, DescriptorError> {
        match optional(at) {
            None => Ok(None),
            Some(a) if scalar_size(bytes[size_at]) => Ok(Some((a, bytes[size_at]))),
            Some(_) => Err(DescriptorError::Scalar(name)),
        }
    };
    let array = |name, at: usize, stride_at: usize, size_at: usize| {
        sized(name, at, size_at).and_then(|v| match v {
            Some((a, s)) if u16::from(s) <= r.u16(stride_at) => Ok(Some((a, r.u16(stride_at), s))),
            Some(_) => Err(DescriptorError::Scalar(name)),
            None => Ok(None),
        })
    };
    let subsystems = r.u16(0x1a);
    let v2 = r.major >= 2;
    let processors = if v2 { r.u16(0xe0) } else { 1 };
    if processors == 0 {
        return Err(DescriptorError::Processors);
    }
    let entries = u64::from(subsystems) * u64::from(processors);
    let klogs = r.u64(0x28);
    let buffer = r.u64(0x30);
    let buffer_bytes = r.u64(0x38);
    if klogs
        .checked_add(entries * u64::from(klog_stride))
        .is_none()
    {
        return Err(DescriptorError::Extent("KLogs"));
    }
    if buffer.checked_add(buffer_bytes).is_none() {
        return Err(DescriptorError::Extent("KLogBuffer"));
    }
    let debug_flags = array("DebugFlags", 0x40, 0x6c, 0x72)?;
    let commits = array("KLogCommits", 0x58, 0x6e, 0x73)?;
    for (name, array, len) in [
        ("DebugFlags", debug_flags, u64::from(subsystems)),
        ("KLogCommits", commits, entries),
    ] {
        if let Some((addr, stride, _)) = array {
            if addr.checked_add(len * u64::from(stride)).is_none() {
                return Err(DescriptorError::Extent(name));
            }
        }
    }
    // A version 1 head ends before the descriptions' fields: read them only in a version 2.
    let descriptions = match v2.then(|| optional(0xe8)).flatten() {
        Some(addr) => {
            let (count, stride) = (r.u32(0xe4), r.u16(0xe2));
            if stride < 8 {
                return Err(DescriptorError::Scalar("KLogDescriptions"));
            }
            if addr
                .checked_add(u64::from(count) * u64::from(stride))
                .is_none()
            {
                return Err(DescriptorError::Extent("KLogDescriptions"));
            }
            Some((addr, count, stride))
        }
        None => None,
    };
    let flags = if v2 {
        sized("klogFlags", 0xf0, 0xf8)?
    } else {
        None
    };
    let mut id = [0u8; BUILD_ID_MAX];
    id.copy_from_slice(&bytes[0xb8..0xb8 + BUILD_ID_MAX]);
    Ok(Parsed {
        abi_major: r.major,
        abi_minor: r.u16(0x12),
        big_endian: r.big,
        size: size as u32,
        this: r.u64(0x20),
        klogs,
        subsystems,
        klog_stride,
        buffer,
        buffer_bytes,
        debug_flags,
        klog_level: sized("klogLevel", 0x48, 0x70)?,
        clock_hz: sized("klogClockHz", 0x50, 0x71)?,
        commits,
        page_table_root: optional(0x60),
        rec_stride,
        klog_fields,
        rec_fields,
        build_id: (id, id_len),
        processors,
        descriptions,
        flags,
    })
}
