//! What the targets share: memory made of fuzz-chosen windows, the KLog layout the klog target
//! reads at fixed addresses, images built once from the repository's C fixtures, and a dump that
//! holds nothing but a VMCOREINFO note.

use std::path::{Path, PathBuf};
use std::process::Command;

use kcrash::klog::layout::{ArrayAt, Field, KLogFields, KLogLayout, Processors, ScalarAt};
use kcrash::memory::{Memory, Unreadable};
use symbols::Image;

/// Memory that holds only some windows; everything else is unreadable.
#[derive(Debug, Default)]
pub struct Windows<'a> {
    windows: Vec<(u64, &'a [u8])>,
}

impl<'a> Windows<'a> {
    /// One window of `bytes` at `addr`.
    pub fn at(addr: u64, bytes: &'a [u8]) -> Windows<'a> {
        Windows {
            windows: vec![(addr, bytes)],
        }
    }

    /// Windows as [`encode`] writes them: address (u64 LE), length (u16 LE), bytes; a last
    /// window shorter than its length takes what is left.
    pub fn parse(mut data: &'a [u8]) -> Windows<'a> {
        let mut windows = Vec::new();
        while data.len() >= 10 {
            let addr = u64::from_le_bytes(data[..8].try_into().unwrap_or_default());
            let len = u16::from_le_bytes([data[8], data[9]]) as usize;
            let bytes = &data[10..(10 + len).min(data.len())];
            data = &data[10 + bytes.len()..];
            windows.push((addr, bytes));
        }
        Windows { windows }
    }

    /// The byte at `addr`, from the first window holding it.
    fn byte(&self, addr: u64) -> Option<u8> {
        self.windows.iter().find_map(|&(start, bytes)| {
            let i = usize::try_from(addr.checked_sub(start)?).ok()?;
            bytes.get(i).copied()
        })
    }
}

impl Memory for Windows<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unreadable> {
        for (i, b) in buf.iter_mut().enumerate() {
            let at = addr.wrapping_add(i as u64);
            *b = self.byte(at).ok_or_else(|| Unreadable {
                addr: at,
                reason: "not in the fuzz input".into(),
            })?;
        }
        Ok(())
    }
}

/// The input format of [`Windows::parse`], for seeds; windows longer than 64 KiB are cut.
pub fn encode(windows: &[(u64, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for &(addr, bytes) in windows {
        let bytes = &bytes[..bytes.len().min(u16::MAX as usize)];
        out.extend_from_slice(&addr.to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        out.extend_from_slice(bytes);
    }
    out
}

/// Where the klog target's memory is: its input is the bytes from [`fixed::BASE`] on.
pub mod fixed {
    use super::*;

    pub const BASE: u64 = 0xffff_8000_0010_0000;
    /// `KLogs[RINGS]`, each of eight u64 members in declaration order (as both kernels have it).
    pub const RINGS: u64 = 4;
    pub const KLOG_SIZE: u64 = 64;
    pub const DEBUG_FLAGS: u64 = BASE + 0x100;
    pub const KLOG_LEVEL: u64 = BASE + 0x120;
    pub const CLOCK_HZ: u64 = BASE + 0x128;
    /// klogProcessors, klogFlags and KLogDescriptions (4 format addresses).
    pub const PROCESSORS: u64 = BASE + 0x130;
    pub const FLAGS: u64 = BASE + 0x138;
    pub const DESCRIPTIONS: u64 = BASE + 0x140;
    /// KLogBuffer: RECORDS records of 8 words, each ring a quarter.
    pub const BUFFER: u64 = BASE + 0x200;
    pub const RECORDS: u64 = 64;
    pub const RING_RECORDS: u64 = RECORDS / RINGS;
    /// Format strings, names and `%s` arguments go from here on.
    pub const STRINGS: u64 = BUFFER + RECORDS * 64;

    pub fn layout() -> KLogLayout {
        let field = |i: u64| Field {
            offset: i * 8,
            size: 8,
        };
        KLogLayout {
            klogs: ArrayAt {
                addr: BASE,
                len: RINGS,
                stride: KLOG_SIZE,
            },
            processors: Processors::At(ScalarAt {
                addr: PROCESSORS,
                size: 4,
            }),
            fields: KLogFields::in_order(std::array::from_fn(|i| field(i as u64))),
            buffer: ArrayAt {
                addr: BUFFER,
                len: RECORDS * 8,
                stride: 8,
            },
            debug_flags: Some(ArrayAt {
                addr: DEBUG_FLAGS,
                len: RINGS,
                stride: 4,
            }),
            klog_level: Some(ScalarAt {
                addr: KLOG_LEVEL,
                size: 4,
            }),
            clock_hz: Some(ScalarAt {
                addr: CLOCK_HZ,
                size: 8,
            }),
            commits: None,
            flags: Some(ScalarAt {
                addr: FLAGS,
                size: 4,
            }),
            descriptions: Some(ArrayAt {
                addr: DESCRIPTIONS,
                len: 4,
                stride: 8,
            }),
            names: Vec::new(),
        }
    }
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `source` (relative to the repository) built by gcc with `flags` into this process's temporary
/// directory, once per name. Panics when gcc cannot: the target cannot run without it.
pub fn gcc(source: &str, flags: &[&str], name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kcrash-fuzz-{}", std::process::id()));
    let out = dir.join(name);
    if !out.exists() {
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let ok = Command::new("gcc")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(repo().join(source))
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "gcc {flags:?} {source} failed");
    }
    out
}

/// The writable load segment holding `symbol`: its address and the bytes the file gives it.
pub fn data_segment<'i>(image: &'i Image, symbol: &str) -> Option<(u64, &'i [u8])> {
    let at = image.symbol(symbol)?.address;
    let seg = image
        .load_segments()
        .iter()
        .find(|s| (s.vaddr..s.vaddr.saturating_add(s.mem_size)).contains(&at))?;
    let bytes = image.file_bytes(seg.file_offset, seg.file_size)?;
    Some((seg.vaddr, bytes))
}

/// An ELF core holding one note, VMCOREINFO with `text`, and no memory: how the linux target
/// gets a `dumpfmt::VmcoreInfo` from its bytes.
pub fn core_with_vmcoreinfo(text: &[u8]) -> Vec<u8> {
    let name = b"VMCOREINFO\0\0";
    let mut note = Vec::new();
    note.extend_from_slice(&11u32.to_le_bytes());
    note.extend_from_slice(&(text.len() as u32).to_le_bytes());
    note.extend_from_slice(&0u32.to_le_bytes());
    note.extend_from_slice(name);
    note.extend_from_slice(text);
    note.resize(note.len().next_multiple_of(4), 0);
    core_with_one_segment(4, 0, 0, 4, &note) // PT_NOTE
}

/// A kernel ELF core with one PT_LOAD: `memory` at physical (and, as QEMU's paging=false dumps
/// write it, virtual) address `paddr`, and no notes.
pub fn core_with_memory(paddr: u64, memory: &[u8]) -> Vec<u8> {
    core_with_one_segment(1, 6, paddr, 4096, memory) // PT_LOAD, RW
}

/// An x86-64 ELF core whose one program header (`p_type`, `p_flags`, at `addr` virtual and
/// physical, aligned to `align`) holds `payload`, which follows the headers.
fn core_with_one_segment(
    p_type: u32,
    p_flags: u32,
    addr: u64,
    align: u64,
    payload: &[u8],
) -> Vec<u8> {
    let mut elf = Vec::with_capacity(120 + payload.len());
    elf.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    elf.extend_from_slice(&4u16.to_le_bytes()); // ET_CORE
    elf.extend_from_slice(&62u16.to_le_bytes()); // x86-64
    elf.extend_from_slice(&1u32.to_le_bytes());
    elf.extend_from_slice(&0u64.to_le_bytes()); // entry
    elf.extend_from_slice(&64u64.to_le_bytes()); // phoff
    elf.extend_from_slice(&0u64.to_le_bytes()); // shoff
    elf.extend_from_slice(&0u32.to_le_bytes());
    for half in [64u16, 56, 1, 64, 0, 0] {
        elf.extend_from_slice(&half.to_le_bytes());
    }
    elf.extend_from_slice(&p_type.to_le_bytes());
    elf.extend_from_slice(&p_flags.to_le_bytes());
    elf.extend_from_slice(&120u64.to_le_bytes());
    elf.extend_from_slice(&addr.to_le_bytes());
    elf.extend_from_slice(&addr.to_le_bytes());
    elf.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    elf.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    elf.extend_from_slice(&align.to_le_bytes());
    elf.extend_from_slice(payload);
    elf
}

/// Stores a fresh CRC in every KLog descriptor in `memory` (at each 64-byte-aligned magic whose
/// claimed size fits), so that a mutation past the checksum reaches the checks behind it, as a
/// hostile writer that computes checksums would.
pub fn reseal_descriptors(memory: &mut [u8]) {
    let magic = klog_runtime::descriptor::stored_magic();
    for at in (0..memory.len()).step_by(64) {
        if memory[at..].starts_with(&magic) {
            klog_runtime::descriptor::reseal(&mut memory[at..]);
        }
    }
}

/// An output that takes its first `limit` bytes and then fails every write, as a closed pipe
/// does: a command asked for a legitimately huge output (`rd ADDR 22222222`) stops there
/// instead of filling memory and time.
pub struct Capped {
    pub bytes: Vec<u8>,
    pub limit: usize,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > self.limit {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Splits an input at its first newline: a command or expression line (lossy UTF-8), and the rest.
pub fn line_and_rest(data: &[u8]) -> (String, &[u8]) {
    let end = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    let rest = data.get(end + 1..).unwrap_or(&[]);
    (String::from_utf8_lossy(&data[..end]).into_owned(), rest)
}

/// `p`, `p/x`, `p -p` (pretty), `p --json`, `ptype`, `struct -o` and `whatis` of `text`, as the
/// commands do them, over `image` and `mem`: what the expression targets share.
pub fn print_and_ptype(image: &Image, mem: &dyn Memory, text: &str) {
    use kcrash::expr::decl::{expanded, layout_json, Offsets};
    use kcrash::expr::json::to_json;
    use kcrash::expr::text::Writer;
    use kcrash::expr::value::{Options, Reader};
    use kcrash::expr::{parse_expr, parse_type, Evaluator};

    let ev = Evaluator::new(image, mem);
    let mut types = Vec::new();
    if let Some(ty) = parse_type(text).and_then(|t| ev.resolve_type(&t).ok()) {
        types.push(ty);
    }
    if let Ok(expr) = parse_expr(text) {
        if let Ok(value) = ev.eval(&expr) {
            types.push(value.ty.clone());
            for opts in [
                Options::default(),
                Options {
                    format: Some('x'),
                    pretty: true,
                    ..Options::default()
                },
                Options {
                    format: Some('c'),
                    limit: 3,
                    repeats: 1,
                    ..Options::default()
                },
            ] {
                if let Ok(node) = Reader::new(&ev, opts).read(&value) {
                    let _ = Writer { ev: &ev, opts }.top(&node);
                    to_json(&ev, &node);
                }
            }
        }
    }
    for ty in types {
        let _ = ev.type_name(&ty);
        let _ = ev.size_of(&ty);
        let _ = expanded(&ev, &ty, Offsets::None);
        let _ = expanded(&ev, &ty, Offsets::Hex);
        let _ = layout_json(&ev, &ty);
    }
}

/// The `unwind_cfi` target's input: the first frame's registers (17 little-endian words by DWARF
/// number, all-ones for unknown), the image's length (u32 LE), the image (an ELF file), then the
/// stack as [`Windows`].
pub mod unwind_input {
    use kcrash::unwind::Registers;

    use super::Windows;

    const UNKNOWN: u64 = u64::MAX;

    pub fn encode(registers: &Registers, image: &[u8], windows: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in 0..17 {
            out.extend_from_slice(&registers.get(r).unwrap_or(UNKNOWN).to_le_bytes());
        }
        out.extend_from_slice(&(image.len() as u32).to_le_bytes());
        out.extend_from_slice(image);
        out.extend_from_slice(windows);
        out
    }

    pub fn parse(data: &[u8]) -> Option<(Registers, &[u8], Windows<'_>)> {
        let mut registers = Registers::default();
        for r in 0..17u16 {
            let at = usize::from(r) * 8;
            let word = u64::from_le_bytes(data.get(at..at + 8)?.try_into().ok()?);
            registers.set(r, (word != UNKNOWN).then_some(word));
        }
        let len = u32::from_le_bytes(data.get(136..140)?.try_into().ok()?) as usize;
        let image = data.get(140..140usize.checked_add(len)?)?;
        Some((registers, image, Windows::parse(&data[140 + len..])))
    }
}
