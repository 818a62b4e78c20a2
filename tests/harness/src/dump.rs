//! The dump formats the pipeline produces and how to tell them apart by their bytes.

use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::io::Read;
use std::path::Path;

/// One dump of a crashed guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DumpFormat {
    /// QEMU `dump-guest-memory` format=elf paging=false: PT_LOADs by guest-physical address.
    Elf,
    /// QEMU `dump-guest-memory` format=elf paging=true: PT_LOADs per guest-virtual mapping.
    ElfPaging,
    /// QEMU `dump-guest-memory` format=kdump-zlib: makedumpfile's flattened stream.
    KdumpZlibFlat,
    /// `makedumpfile -R` of [`DumpFormat::KdumpZlibFlat`]: a plain kdump-compressed file.
    KdumpZlib,
    /// QMP `pmemsave` of all guest RAM from physical address 0: raw memory, no header.
    Raw,
}

impl DumpFormat {
    pub const ALL: [DumpFormat; 5] = [
        DumpFormat::Elf,
        DumpFormat::ElfPaging,
        DumpFormat::KdumpZlibFlat,
        DumpFormat::KdumpZlib,
        DumpFormat::Raw,
    ];

    /// The formats with a header: every one but raw memory.
    pub const WITH_HEADERS: [DumpFormat; 4] = [
        DumpFormat::Elf,
        DumpFormat::ElfPaging,
        DumpFormat::KdumpZlibFlat,
        DumpFormat::KdumpZlib,
    ];

    /// Where a [`DumpFormat::Raw`] image's first byte is: `pmemsave` is asked for RAM from 0.
    pub const RAW_PHYS_START: u64 = 0;

    /// Name in the manifest (`format = "..."`).
    pub fn name(self) -> &'static str {
        match self {
            DumpFormat::Elf => "elf",
            DumpFormat::ElfPaging => "elf-paging",
            DumpFormat::KdumpZlibFlat => "kdump-zlib-flat",
            DumpFormat::KdumpZlib => "kdump-zlib",
            DumpFormat::Raw => "raw",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// File name of the uncompressed dump.
    pub fn file_name(self) -> &'static str {
        match self {
            DumpFormat::Elf => "vmcore.elf",
            DumpFormat::ElfPaging => "vmcore-paging.elf",
            DumpFormat::KdumpZlibFlat => "vmcore.kdump-flat",
            DumpFormat::KdumpZlib => "vmcore.kdump",
            DumpFormat::Raw => "vmcore.raw",
        }
    }

    /// How the dump was made, for the manifest.
    pub fn producer(self) -> &'static str {
        match self {
            DumpFormat::Elf => "qemu dump-guest-memory format=elf paging=false",
            DumpFormat::ElfPaging => "qemu dump-guest-memory format=elf paging=true",
            DumpFormat::KdumpZlibFlat => "qemu dump-guest-memory format=kdump-zlib",
            DumpFormat::KdumpZlib => "makedumpfile -R < vmcore.kdump-flat",
            DumpFormat::Raw => "qemu pmemsave val=0 size=<guest RAM>",
        }
    }

    /// Whether the committed corpus keeps it gzipped: the ELF dumps and raw memory are mostly
    /// zeros, and the flattened stream is an intermediate kcrash tests read after the plain
    /// kdump file.
    pub fn gzipped_in_corpus(self) -> bool {
        self != DumpFormat::KdumpZlib
    }

    /// The magic the file must start with.
    pub fn magic(self) -> Magic {
        match self {
            DumpFormat::Elf | DumpFormat::ElfPaging => Magic::ElfCore,
            DumpFormat::KdumpZlibFlat => Magic::Flattened,
            DumpFormat::KdumpZlib => Magic::Kdump,
            DumpFormat::Raw => Magic::Raw,
        }
    }

    /// The physical address of the dump's first byte, for raw memory (which cannot say).
    pub fn phys_start(self) -> Option<u64> {
        (self == DumpFormat::Raw).then_some(Self::RAW_PHYS_START)
    }

    /// The QMP command and its arguments writing this dump of a guest with `ram_bytes` of RAM
    /// to `path`, or None for formats made by another program from a QEMU dump.
    pub fn qmp_command(self, path: &Path, ram_bytes: u64) -> Option<(&'static str, Value)> {
        let protocol = format!("file:{}", path.display());
        let dump = |arguments| Some(("dump-guest-memory", arguments));
        match self {
            DumpFormat::Elf => dump(json!({ "paging": false, "protocol": protocol })),
            DumpFormat::ElfPaging => dump(json!({ "paging": true, "protocol": protocol })),
            DumpFormat::KdumpZlibFlat => {
                dump(json!({ "paging": false, "protocol": protocol, "format": "kdump-zlib" }))
            }
            DumpFormat::KdumpZlib => None,
            // QEMU's own raw producer: guest-physical memory, byte for byte, from address 0.
            DumpFormat::Raw => Some((
                "pmemsave",
                json!({
                    "val": Self::RAW_PHYS_START,
                    "size": ram_bytes,
                    "filename": path.display().to_string(),
                }),
            )),
        }
    }
}

/// What a file's first bytes say it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Magic {
    /// ELF64 little-endian x86_64 or aarch64 ET_CORE.
    ElfCore,
    /// ELF64 x86_64 or aarch64 ET_EXEC (a kernel image linked at fixed addresses).
    ElfExec,
    /// ELF64 x86_64 or aarch64 ET_DYN (a position-independent executable: a hosted program).
    ElfDyn,
    /// makedumpfile flattened stream ("makedumpfile" signature, type 1, version 1).
    Flattened,
    /// kdump-compressed ("KDUMP   " signature).
    Kdump,
    /// gzip member.
    Gzip,
    /// No signature at all: raw memory. [`Magic::identify`] never says so; a raw dump is one
    /// it finds nothing in.
    Raw,
}

impl Magic {
    /// Name in the manifest (`magic = "..."`).
    pub fn name(self) -> &'static str {
        match self {
            Magic::ElfCore => "elf-core",
            Magic::ElfExec => "elf-exec",
            Magic::ElfDyn => "elf-dyn",
            Magic::Flattened => "makedumpfile-flattened",
            Magic::Kdump => "kdump",
            Magic::Gzip => "gzip",
            Magic::Raw => "raw",
        }
    }

    /// Identifies `head` (at least the first 64 bytes of a file).
    pub fn identify(head: &[u8]) -> Option<Magic> {
        if head.starts_with(&[0x1f, 0x8b]) {
            return Some(Magic::Gzip);
        }
        if head.starts_with(b"KDUMP   ") {
            return Some(Magic::Kdump);
        }
        if head.len() >= 32
            && head.starts_with(b"makedumpfile\0\0\0\0")
            && head[16..24] == 1u64.to_be_bytes()
            && head[24..32] == 1u64.to_be_bytes()
        {
            return Some(Magic::Flattened);
        }
        // e_ident: ELFCLASS64, ELFDATA2LSB; e_type @16, e_machine @18: the machines
        // the kernels, programs and guests run on.
        let machines = [object::elf::EM_X86_64, object::elf::EM_AARCH64];
        if head.len() >= 20
            && head.starts_with(b"\x7fELF\x02\x01")
            && machines.contains(&u16::from_le_bytes([head[18], head[19]]))
        {
            return match u16::from_le_bytes([head[16], head[17]]) {
                4 => Some(Magic::ElfCore),
                2 => Some(Magic::ElfExec),
                3 => Some(Magic::ElfDyn),
                _ => None,
            };
        }
        None
    }

    /// Identifies a file, looking through one layer of gzip.
    pub fn of_file(path: &Path) -> Result<Option<Magic>> {
        let mut head = [0u8; 64];
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let n =
            read_head(file, &mut head).with_context(|| format!("reading {}", path.display()))?;
        match Magic::identify(&head[..n]) {
            Some(Magic::Gzip) => {
                let file = std::fs::File::open(path)?;
                let n = read_head(flate2::read::GzDecoder::new(file), &mut head)
                    .with_context(|| format!("gunzipping {}", path.display()))?;
                Ok(Magic::identify(&head[..n]))
            }
            other => Ok(other),
        }
    }
}

/// An ELF file's `e_machine` (EM_X86_64, EM_AARCH64, ...), or None for a file too short to hold
/// one or that is not ELF.
pub fn elf_machine(path: &Path) -> Result<Option<u16>> {
    let mut head = [0u8; 20];
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let n = read_head(file, &mut head).with_context(|| format!("reading {}", path.display()))?;
    Ok((n == head.len() && head.starts_with(b"\x7fELF"))
        .then(|| u16::from_le_bytes([head[18], head[19]])))
}

fn read_head(mut reader: impl Read, head: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < head.len() {
        match reader.read(&mut head[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Gives back the disk blocks of `path` that hold only zeros (`fallocate --dig-holes`); the
/// bytes read are the same. QEMU writes every page of guest memory, most of them zero: a Linux
/// guest's 512 MiB ELF dump keeps about 100 MB on disk after this, and CI's disk holds a dozen
/// of them. A file system that cannot punch holes leaves the file as it was, with a warning.
pub fn release_zero_blocks(path: &Path) -> Result<()> {
    let output = std::process::Command::new("fallocate")
        .arg("--dig-holes")
        .arg(path)
        .output()
        .context("running fallocate (util-linux)")?;
    if !output.status.success() {
        eprintln!(
            "{}: zero blocks kept: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}
