//! dumpfmt opens crash dumps read-only and answers: what physical and virtual memory they hold,
//! what their notes say, and the bytes at an address.
//!
//! Formats, detected by content: ELF64 cores (QEMU `dump-guest-memory`, /proc/vmcore copies,
//! Linux and gdb process cores, makedumpfile `-E`), kdump-compressed files (plain and
//! makedumpfile-flattened; raw, zlib, lzo, snappy and zstd pages), and either of those compressed
//! whole with gzip. Raw physical memory images (QEMU's `pmemsave`), which have no header to detect,
//! are opened by [`Dump::open_raw`] with the physical address of their first byte. [`detect`] names a file's kind from its first [`DETECT_LEN`] bytes, by the
//! same signatures [`Dump::open`] goes by, so a caller can tell a dump from a kernel image or a
//! module before opening it. [`Dump::linux_info`] and [`AddressSpace::from_dump`] give a Linux x86_64
//! or arm64 kernel's view from VMCOREINFO ([`Dump::machine`] says which).
//!
//! [`Dump::open`] maps a file; [`Dump::from_bytes`] reads bytes already in memory the same way.
//!
//! ```no_run
//! use dumpfmt::{AddressSpace, Dump};
//!
//! let dump = Dump::open("vmcore")?;
//! let mut page = [0u8; 4096];
//! dump.read_phys(0x100000, &mut page)?;
//! if let Some(info) = dump.vmcoreinfo()? {
//!     println!("kernel {:?}", info.osrelease());
//! }
//! let space = AddressSpace::from_dump(&dump)?;
//! let word = space.read_u64(0xffff_ffff_8100_0000);
//! # Ok::<(), dumpfmt::Error>(())
//! ```

mod bytes;
mod cache;
mod claim;
mod codec;
mod detect;
mod elf;
mod error;
mod flat;
mod inflate;
mod kdump;
mod linux;
pub mod lzo;
mod machine;
pub mod notes;
mod range_map;
mod raw;
mod search;
mod storage;
pub mod translate;
mod vmcoreinfo;

use std::path::Path;
use std::sync::Arc;

pub use detect::{detect, open_regular, read_head, FileKind, DETECT_LEN};
pub use elf::Segment;
pub use error::{Error, MissingReason, VirtReason};
pub use linux::{Arm64Info, LinuxInfo};
pub use machine::Machine;
pub use notes::{Note, Notes, PrStatus, QemuCpuState, Regs};
pub use search::Searched;
pub use translate::{AddressSpace, LinearMap, PhysMemory, Source};
pub use vmcoreinfo::VmcoreInfo;

use elf::ElfCore;
use error::FileRef;
use flat::FlatMap;
use kdump::{Image, Kdump};
use raw::RawMemory;
use storage::Storage;

/// The container format of a dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// ELF64 core file.
    Elf,
    /// kdump-compressed (diskdump) file.
    Kdump,
    /// kdump-compressed in makedumpfile's flattened stream form.
    KdumpFlattened,
    /// Raw physical memory with no header ([`Dump::open_raw`]).
    Raw,
}

/// Facts from a kdump file's headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KdumpHeader {
    pub header_version: i32,
    pub status: u32,
    pub block_size: u64,
    pub max_mapnr: u64,
    pub nr_cpus: i32,
    /// As written by the dumper. QEMU parses the kernel's decimal value as hex: prefer
    /// VMCOREINFO's `NUMBER(phys_base)`.
    pub phys_base: u64,
    pub dump_level: i32,
    pub release: String,
    pub machine: String,
}

enum Inner {
    Elf(ElfCore),
    Kdump(Box<Kdump>),
    Raw(RawMemory),
}

/// An open dump.
pub struct Dump {
    file: FileRef,
    storage: Storage,
    format: Format,
    inner: Inner,
    machine: Machine,
}

/// Where a kdump header's `utsname.machine` is (in the reassembled file of a flattened one).
const KDUMP_MACHINE_OFFSET: u64 = 12 + 4 * 65;

impl std::fmt::Debug for Dump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dump")
            .field("path", &self.file.0)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl Dump {
    /// Open and identify a dump. Only headers are parsed here.
    pub fn open(path: impl AsRef<Path>) -> Result<Dump, Error> {
        let file = FileRef(Arc::from(path.as_ref()));
        let storage = inflate::storage(&file, Storage::map(&file)?, true)?;
        Self::identify(file, storage)
    }

    /// A dump already in memory: `bytes` are read as [`Dump::open`] reads a file's (a gzipped
    /// dump is inflated to a temporary file likewise). `name` stands for the file in errors and
    /// [`Dump::path`].
    pub fn from_bytes(
        name: impl AsRef<Path>,
        bytes: impl AsRef<[u8]> + Send + Sync + 'static,
    ) -> Result<Dump, Error> {
        let file = FileRef(Arc::from(name.as_ref()));
        let storage = inflate::storage(&file, bytes, false)?;
        Self::identify(file, storage)
    }

    /// Open a raw physical memory image — a file with no header, such as QEMU's `pmemsave`
    /// writes — whose byte 0 is physical address `phys_start` (crash's `FILE@ADDRESS`). The file
    /// is one physical range, `[phys_start, phys_start + length)`, and nothing else: no notes,
    /// no VMCOREINFO, no CPU state. Nothing in it is detected: whatever its first bytes, it is
    /// read as memory, except that a file starting with gzip's signature is inflated first —
    /// the whole stream, since no header bounds it (at most 4 TiB; more is refused). An empty
    /// file, or a range that would end past 2^64, is refused.
    pub fn open_raw(path: impl AsRef<Path>, phys_start: u64) -> Result<Dump, Error> {
        let file = FileRef(Arc::from(path.as_ref()));
        let storage = inflate::raw_storage(&file, Storage::map(&file)?, true)?;
        Self::raw(file, storage, phys_start)
    }

    /// Raw physical memory already in memory: `bytes` are read as [`Dump::open_raw`] reads a
    /// file's. `name` stands for the file in errors and [`Dump::path`].
    pub fn raw_from_bytes(
        name: impl AsRef<Path>,
        bytes: impl AsRef<[u8]> + Send + Sync + 'static,
        phys_start: u64,
    ) -> Result<Dump, Error> {
        let file = FileRef(Arc::from(name.as_ref()));
        let storage = inflate::raw_storage(&file, bytes, false)?;
        Self::raw(file, storage, phys_start)
    }

    fn raw(file: FileRef, storage: Storage, phys_start: u64) -> Result<Dump, Error> {
        let raw = RawMemory::new(phys_start, storage.bytes().len() as u64, &file)?;
        Ok(Dump {
            file,
            storage,
            format: Format::Raw,
            inner: Inner::Raw(raw),
            // A raw image says nothing of itself; kcrash's raw images are x86_64 machines'.
            machine: Machine::X86_64,
        })
    }

    /// Open a running kernel's memory: /proc/kcore, an ELF core that cannot be mapped and whose
    /// contents change as it is read. Nothing is cached: every read is a `pread` of the file, so
    /// each read sees memory as it is then. Needs root (CAP_SYS_RAWIO), and a kernel not in
    /// lockdown; the error is [`Error::Io`] with the operating system's reason otherwise.
    pub fn open_live(path: impl AsRef<Path>) -> Result<Dump, Error> {
        let file = FileRef(Arc::from(path.as_ref()));
        let storage = Storage::open_live(&file)?;
        if !detect(storage.bytes()).is_some_and(FileKind::is_elf) {
            return Err(file.malformed(0, "a live kernel's memory is an ELF core; this is not ELF"));
        }
        Self::identify(file, storage)
    }

    fn identify(file: FileRef, storage: Storage) -> Result<Dump, Error> {
        let data = storage.bytes();
        let (format, inner) = match detect(data) {
            // Any ELF: the core reader says what is wrong with one that is not a core.
            Some(kind) if kind.is_elf() => {
                let core = ElfCore::parse(data, &file, storage.is_live())?;
                (Format::Elf, Inner::Elf(core))
            }
            Some(FileKind::Kdump) => {
                let k = Kdump::parse(data, Image::Plain, &file)?;
                (Format::Kdump, Inner::Kdump(Box::new(k)))
            }
            Some(FileKind::KdumpFlattened) => {
                let map = FlatMap::scan(data, &file)?;
                let k = Kdump::parse(data, Image::Flat(map), &file)?;
                (Format::KdumpFlattened, Inner::Kdump(Box::new(k)))
            }
            Some(FileKind::Diskdump) => {
                return Err(
                    file.malformed(0, "old diskdump format (\"DISKDUMP\") is not supported")
                );
            }
            // Storage inflated the outer layer (a live file never gets here: it must be ELF).
            Some(FileKind::Gzip) => {
                return Err(file.malformed(0, "gzip inside gzip: decompress the outer layer first"));
            }
            _ => {
                let head = &data[..data.len().min(8)];
                return Err(file.malformed(
                    0,
                    format!("not a recognised dump: first bytes {head:02x?} are no ELF, kdump, flattened or gzip signature"),
                ));
            }
        };
        let named = match &inner {
            Inner::Elf(e) => Machine::from_elf(e.machine),
            Inner::Kdump(k) => match k.header.machine.as_str() {
                // QEMU writes "Unknown" for the guests it has no name for (aarch64 among them).
                "" | "Unknown" => None,
                name => Some(Machine::from_uname(name).ok_or_else(|| {
                    file.malformed(
                        KDUMP_MACHINE_OFFSET,
                        format!("kdump utsname.machine {name:?} is neither x86_64 nor aarch64"),
                    )
                })?),
            },
            Inner::Raw(_) => None,
        };
        let mut dump = Dump {
            file,
            storage,
            format,
            inner,
            machine: named.unwrap_or(Machine::X86_64),
        };
        if named.is_none() {
            dump.machine = dump.machine_from_contents();
        }
        Ok(dump)
    }

    /// For a kdump file whose header names no machine: VMCOREINFO's architecture-only keys, else
    /// the size of its NT_PRSTATUS notes; x86_64, the format's first home, when nothing says.
    fn machine_from_contents(&self) -> Machine {
        if let Ok(Some(info)) = self.vmcoreinfo() {
            if info.get("NUMBER(kimage_voffset)").is_some() {
                return Machine::Aarch64;
            }
            if info.get("SYMBOL(init_top_pgt)").is_some() {
                return Machine::X86_64;
            }
        }
        let prstatus = self
            .notes()
            .filter_map(Result::ok)
            .find(|n| n.is("CORE", notes::NT_PRSTATUS));
        match prstatus {
            Some(n) if n.desc.len() == notes::AARCH64_PRSTATUS_SIZE => Machine::Aarch64,
            _ => Machine::X86_64,
        }
    }

    /// The processor the dump's memory and registers belong to.
    pub fn machine(&self) -> Machine {
        self.machine
    }

    pub fn path(&self) -> &Path {
        &self.file.0
    }

    pub(crate) fn file_ref(&self) -> &FileRef {
        &self.file
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// A running kernel's memory (opened with [`Dump::open_live`]): reading twice may give two
    /// answers.
    pub fn is_live(&self) -> bool {
        self.storage.is_live()
    }

    /// The file was gzip-compressed and has been decompressed to a temporary file.
    pub fn was_gzipped(&self) -> bool {
        self.storage.gunzipped()
    }

    /// For a gzipped dump whose stream went on past the end its headers claim: that end. The
    /// rest was not inflated (it cannot be the dump's; a bomb appended to a real dump stops
    /// there).
    pub fn gzip_stopped_at(&self) -> Option<u64> {
        self.storage.inflate_stopped()
    }

    /// The dumper marked the dump incomplete (kdump status 0x8, ELF e_flags 0x1), or a
    /// flattened stream ends before its end marker.
    pub fn is_incomplete(&self) -> bool {
        match &self.inner {
            Inner::Elf(e) => e.incomplete,
            Inner::Kdump(k) => k.incomplete() || matches!(&k.image, Image::Flat(f) if f.truncated),
            Inner::Raw(_) => false,
        }
    }

    /// A user-space process core (no physical addresses; read it through its virtual mappings).
    pub fn is_process_core(&self) -> bool {
        matches!(&self.inner, Inner::Elf(e) if e.process_core)
    }

    /// ELF e_machine: 62 (x86_64), 183 (AArch64), or 3 when QEMU dumped an x86 vCPU not in long
    /// mode (its NT_PRSTATUS then has the i386 layout). None for kdump files and raw images.
    pub fn elf_machine(&self) -> Option<u16> {
        match &self.inner {
            Inner::Elf(e) => Some(e.machine),
            Inner::Kdump(_) | Inner::Raw(_) => None,
        }
    }

    /// ELF PT_LOAD segments (empty for kdump files and raw images).
    pub fn segments(&self) -> &[Segment] {
        match &self.inner {
            Inner::Elf(e) => e.segments(),
            Inner::Kdump(_) | Inner::Raw(_) => &[],
        }
    }

    /// A raw memory image's physical range: `[phys_start, phys_start + file length)`. None for
    /// the other formats.
    pub fn raw_range(&self) -> Option<std::ops::Range<u64>> {
        match &self.inner {
            Inner::Raw(r) => Some(r.range()),
            _ => None,
        }
    }

    /// kdump header facts (None for ELF).
    pub fn kdump_header(&self) -> Option<KdumpHeader> {
        let Inner::Kdump(k) = &self.inner else {
            return None;
        };
        Some(k.header.clone())
    }

    /// Whether the dump carries virtual mappings of its own (ELF p_vaddr that is not just a
    /// copy of p_paddr).
    pub fn has_virtual_mappings(&self) -> bool {
        matches!(&self.inner, Inner::Elf(e) if e.has_virtual_mappings())
    }

    /// Read physical memory. On failure the error names the first address that could not be
    /// read and why.
    pub fn read_phys(&self, paddr: u64, buf: &mut [u8]) -> Result<(), Error> {
        let data = self.storage.bytes();
        let result = match &self.inner {
            Inner::Elf(e) => e.read_phys(&self.storage, &self.file, paddr, buf),
            Inner::Kdump(k) => self.read_kdump(k, data, paddr, buf),
            Inner::Raw(r) => r.read_phys(&self.storage, &self.file, paddr, buf),
        };
        result.map_err(|e| self.mark_incomplete(e))
    }

    fn read_kdump(&self, k: &Kdump, data: &[u8], paddr: u64, buf: &mut [u8]) -> Result<(), Error> {
        let mut done = 0;
        while done < buf.len() {
            let addr = paddr.wrapping_add(done as u64);
            let pfn = addr / k.header.block_size;
            let within = (addr % k.header.block_size) as usize;
            let n = (k.header.block_size as usize - within).min(buf.len() - done);
            k.read_page(data, pfn, within, &mut buf[done..done + n])
                .map_err(|reason| self.file.phys(addr, reason))?;
            done += n;
        }
        Ok(())
    }

    fn mark_incomplete(&self, mut e: Error) -> Error {
        if let Error::Phys {
            reason: MissingReason::Truncated {
                incomplete_flag, ..
            },
            ..
        } = &mut e
        {
            *incomplete_flag = self.is_incomplete();
        }
        e
    }

    /// Read through the dump's own virtual mappings only. Returns how many bytes from the start
    /// of `buf` were covered (0 when `vaddr` is not in one).
    pub fn read_dump_mapping(&self, vaddr: u64, buf: &mut [u8]) -> Result<usize, Error> {
        let Inner::Elf(e) = &self.inner else {
            return Ok(0);
        };
        e.read_virt_prefix(&self.storage, vaddr, buf)
            .map_err(|(addr, mut reason)| {
                if let MissingReason::Truncated {
                    incomplete_flag, ..
                } = &mut reason
                {
                    *incomplete_flag = self.is_incomplete();
                }
                self.file.virt(addr, VirtReason::Mapping { reason })
            })
    }

    /// All notes: ELF PT_NOTE segments, or the kdump note area (a raw image has none).
    pub fn notes(&self) -> Notes<'_> {
        let data = self.storage.bytes();
        let areas = match &self.inner {
            Inner::Elf(e) => e
                .note_areas()
                .iter()
                .filter_map(|&(offset, size)| Some((bytes::slice(data, offset, size)?, offset)))
                .collect(),
            Inner::Kdump(k) => k.notes.iter().map(|r| (r.bytes(data), r.offset)).collect(),
            Inner::Raw(_) => Vec::new(),
        };
        Notes::new(&self.file, areas)
    }

    /// NT_PRSTATUS notes, one per CPU (kernel dumps) or thread (process cores).
    pub fn prstatus(&self) -> impl Iterator<Item = Result<PrStatus, Error>> + '_ {
        let machine = self.machine;
        self.notes_of("CORE", notes::NT_PRSTATUS, move |n| n.prstatus(machine))
    }

    /// QEMU CPU-state notes, one per vCPU.
    pub fn qemu_cpu_states(&self) -> impl Iterator<Item = Result<QemuCpuState, Error>> + '_ {
        self.notes_of("QEMU", 0, |n| n.qemu_cpu_state())
    }

    fn notes_of<T: 'static>(
        &self,
        name: &'static str,
        n_type: u32,
        parse: impl Fn(&Note<'_>) -> Result<T, Error> + 'static,
    ) -> impl Iterator<Item = Result<T, Error>> + '_ {
        self.notes().filter_map(move |n| match n {
            Ok(n) if n.is(name, n_type) => Some(parse(&n)),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
    }

    /// VMCOREINFO: kdump's own copy if present, else the VMCOREINFO note.
    pub fn vmcoreinfo(&self) -> Result<Option<VmcoreInfo<'_>>, Error> {
        if let Inner::Kdump(k) = &self.inner {
            if let Some(r) = &k.vmcoreinfo {
                let text = r.bytes(self.storage.bytes());
                return Ok(Some(VmcoreInfo::new(text, r.offset, &self.file)));
            }
        }
        for note in self.notes() {
            let note = note?;
            if note.is("VMCOREINFO", 0) {
                return Ok(Some(VmcoreInfo::new(
                    note.desc,
                    note.desc_offset,
                    &self.file,
                )));
            }
        }
        Ok(None)
    }

    /// Linux facts from VMCOREINFO (release, build ID, KASLR offset, phys_base, the kernel page
    /// table, paging mode, crash time); None when the dump has no VMCOREINFO.
    pub fn linux_info(&self) -> Result<Option<LinuxInfo>, Error> {
        self.vmcoreinfo()?
            .map(|info| LinuxInfo::from_vmcoreinfo(&info, self.machine))
            .transpose()
    }
}

impl PhysMemory for Dump {
    fn read_phys(&self, paddr: u64, buf: &mut [u8]) -> Result<(), Error> {
        Dump::read_phys(self, paddr, buf)
    }
}

#[cfg(test)]
mod tests {
    /// kcrash may read one dump from several threads.
    #[test]
    fn dump_and_address_space_are_shareable_across_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<super::Dump>();
        shareable::<super::AddressSpace<'static>>();
    }
}
