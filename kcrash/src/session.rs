//! A dump opened with its image: the memory kcrash's commands read, the symbols they resolve
//! against, and the KLog state, found once and kept.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use dumpfmt::translate::{AddressSpace, LinearMap, Source};
use dumpfmt::Dump;
use symbols::Image;

use crate::klog::layout::{KLogLayout, LayoutError};
use crate::klog::Klog;
use crate::linux::{self, kaslr, Linux};
use crate::memory::{Memory, Unreadable};

/// What a file given on the command line is, told by its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Dump,
    Image,
    /// A relocatable object: a kernel module's `.ko`.
    Module,
}

/// Why a session could not be opened: one line for the user.
#[derive(Debug)]
pub struct OpenError(pub String);

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OpenError {}

fn open_err(msg: impl Into<String>) -> OpenError {
    OpenError(msg.into())
}

/// Whether `path` is gzip-compressed (dumpfmt then decompresses it whole before reading it).
pub fn is_gzip(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == *b"\x1f\x8b")
}

/// Reads the first bytes of `path` and says whether it is a dump or an image.
pub fn file_kind(path: &Path) -> Result<FileKind, OpenError> {
    let mut head = [0u8; 20];
    let n = File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| open_err(format!("{}: {e}", path.display())))?;
    let head = &head[..n];
    if head.starts_with(b"\x7fELF") {
        // e_type: 4 is ET_CORE; executables, shared objects and relocatables are images.
        return match head.get(16..18).map(|b| u16::from_le_bytes([b[0], b[1]])) {
            Some(4) => Ok(FileKind::Dump),
            Some(1) => Ok(FileKind::Module),
            Some(2..=3) => Ok(FileKind::Image),
            _ => Err(open_err(format!(
                "{}: an ELF file that is neither a core dump nor an image",
                path.display()
            ))),
        };
    }
    if head.starts_with(b"KDUMP   ")
        || head.starts_with(b"DISKDUMP")
        || head.starts_with(b"makedumpfile")
        || head.starts_with(b"\x1f\x8b")
    {
        return Ok(FileKind::Dump);
    }
    Err(open_err(format!(
        "{}: neither a dump (ELF core, kdump, flattened, gzip) nor an ELF image",
        path.display()
    )))
}

/// The command line's files sorted by kind, given in any order.
#[derive(Debug)]
pub struct Files {
    pub dump: PathBuf,
    pub image: Option<PathBuf>,
    /// Kernel modules (`.ko`) to load at their addresses in the dump.
    pub modules: Vec<PathBuf>,
}

/// Sorts the command line's files into dump, image and modules, in any order. Without a dump,
/// the dump is the running kernel's memory (/proc/kcore); a file under /proc is taken as live
/// memory without being read here (opening it says why it cannot be read, if it cannot).
pub fn sort_files(files: &[PathBuf]) -> Result<Files, OpenError> {
    let kinds = files
        .iter()
        .map(|f| {
            let kind = if linux::live::is_live_path(f) {
                Ok(FileKind::Dump)
            } else {
                file_kind(f)
            };
            kind.map(|k| (k, f.clone()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let of = |kind: FileKind| -> Vec<PathBuf> {
        kinds
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, p)| p.clone())
            .collect()
    };
    let (dumps, images) = (of(FileKind::Dump), of(FileKind::Image));
    let usage = "kcrash [DUMP] [IMAGE] [MODULE.ko...]";
    let live = || PathBuf::from(linux::live::KCORE);
    let (dump, image) = match (dumps.as_slice(), images.as_slice()) {
        ([d], []) => (d.clone(), None),
        ([d], [i]) => (d.clone(), Some(i.clone())),
        ([], []) => (live(), None),
        ([], [i]) => (live(), Some(i.clone())),
        (_, [_, _, ..]) => return Err(open_err(format!("more than one image given: {usage}"))),
        _ => return Err(open_err(format!("more than one dump given: {usage}"))),
    };
    Ok(Files {
        dump,
        image,
        modules: of(FileKind::Module),
    })
}

/// A range of the crashed process's memory that its core left out and a file supplies.
#[derive(Debug)]
pub struct FileBacked {
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    pub path: PathBuf,
    source: Backing,
}

#[derive(Debug)]
enum Backing {
    /// The session's image (the executable).
    Image,
    /// A shared library named by the core, mapped read-only.
    Library(memmap2::Mmap),
}

/// An open dump with its image.
pub struct Session<'d> {
    pub dump: &'d Dump,
    pub image: Option<Image>,
    space: AddressSpace<'d>,
    /// Process cores: memory the core does not hold, read from the files it was mapped from.
    pub file_backed: Vec<FileBacked>,
    /// What opening found out and did, for `sys` and for `-s`-less start-up messages.
    pub notes: Vec<String>,
    /// Set when the dump is a Linux kernel's and its vmlinux was given.
    pub linux: Option<Linux>,
    /// Kernel modules whose `.ko` is loaded at their sections' addresses (`mod -s`, `mod -S`,
    /// or a `.ko` on the command line). Added to while commands run, hence the lock.
    modules: RwLock<Vec<Arc<LoadedModule>>>,
    klog: OnceLock<Klog>,
}

/// A module's `.ko`, placed where the dump's kernel loaded it.
#[derive(Debug)]
pub struct LoadedModule {
    pub name: String,
    pub image: Image,
}

const AT_ENTRY: u64 = 9;

impl<'d> Session<'d> {
    /// Opens a session on `dump` with `image` (or, for a process core, the executable the core
    /// names, when it is present).
    pub fn open(dump: &'d Dump, image: Option<PathBuf>) -> Result<Session<'d>, OpenError> {
        let space = AddressSpace::from_dump(dump).map_err(|e| open_err(e.to_string()))?;
        let mut s = Session {
            dump,
            image: None,
            space,
            file_backed: Vec::new(),
            notes: Vec::new(),
            linux: None,
            modules: RwLock::new(Vec::new()),
            klog: OnceLock::new(),
        };
        if dump.is_process_core() {
            s.open_process(image)?;
        } else if let Some(path) = image {
            s.open_kernel(path)?;
        }
        Ok(s)
    }

    fn open_image(path: &Path) -> Result<Image, OpenError> {
        let options = symbols::Options {
            index_cache: symbols::default_index_cache(),
            ..symbols::Options::default()
        };
        Image::open_with(path, &options).map_err(|e| open_err(e.to_string()))
    }

    /// A process core: the executable (given, or named by NT_FILE), its load bias from AT_ENTRY,
    /// and the files whose read-only pages the core left out.
    fn open_process(&mut self, given: Option<PathBuf>) -> Result<(), OpenError> {
        let dump = self.dump;
        let mut mappings = Vec::new();
        let mut entry = None;
        for note in dump.notes() {
            let note = note.map_err(|e| open_err(e.to_string()))?;
            if note.is("CORE", 0x4649_4c45) {
                mappings = note.file_mappings().map_err(|e| open_err(e.to_string()))?;
            }
            if note.is("CORE", 6) {
                entry = note.auxv().find(|&(t, _)| t == AT_ENTRY).map(|(_, v)| v);
            }
        }
        let exe_path = entry
            .and_then(|e| mappings.iter().find(|m| m.start <= e && e < m.end))
            .map(|m| m.path.clone());
        let path = match (given, &exe_path) {
            (Some(p), _) => p,
            (None, Some(p)) if Path::new(p).exists() => {
                self.notes
                    .push(format!("image {p}: the executable the core names"));
                PathBuf::from(p)
            }
            (None, Some(p)) => {
                self.notes.push(format!("the core's executable {p} is not here; give it on the command line for symbols"));
                return Ok(());
            }
            (None, None) => return Ok(()),
        };
        let mut image = Self::open_image(&path)?;
        if let Some(entry) = entry {
            if image.is_position_independent() {
                image.set_load_bias(entry.wrapping_sub(image.entry()));
                self.notes.push(format!(
                    "load bias {:#x} (AT_ENTRY {entry:#x})",
                    image.load_bias()
                ));
            } else if entry != image.entry() {
                return Err(open_err(format!(
                    "{} does not belong to {}: the process started at {entry:#x}, the image's entry is {:#x}",
                    path.display(),
                    dump.path().display(),
                    image.entry()
                )));
            }
        }
        for m in &mappings {
            let is_exe = exe_path.as_deref() == Some(m.path.as_str());
            let source = if is_exe {
                Backing::Image
            } else {
                match File::open(&m.path).and_then(|f| unsafe { memmap2::Mmap::map(&f) }) {
                    // SAFETY (map): read-only; as for the dump, nobody should truncate it meanwhile.
                    Ok(map) => Backing::Library(map),
                    Err(_) => continue,
                }
            };
            self.file_backed.push(FileBacked {
                start: m.start,
                end: m.end,
                file_offset: m.file_offset,
                path: if is_exe {
                    path.clone()
                } else {
                    PathBuf::from(&m.path)
                },
                source,
            });
        }
        self.image = Some(image);
        self.drop_mismatched_files();
        Ok(())
    }

    /// A kernel dump. Linux: see `open_linux`. Another kernel (the test kernels): the image's
    /// program headers give a linear map (virtual = physical + offset) after the dump's own
    /// mappings and page tables; the image must match the dump.
    fn open_kernel(&mut self, path: PathBuf) -> Result<(), OpenError> {
        let image = Self::open_image(&path)?;
        let info = self
            .dump
            .vmcoreinfo()
            .map_err(|e| open_err(e.to_string()))?;
        if linux::is_linux(info.as_ref(), &image) {
            return self.open_linux(image, info.as_ref(), &path);
        }
        for seg in image.load_segments() {
            if seg.mem_size > 0 && seg.vaddr != seg.paddr {
                self.space.push(Source::Linear(LinearMap {
                    virt_start: seg.vaddr.wrapping_add(image.load_bias()),
                    len: seg.mem_size,
                    phys_start: seg.paddr,
                }));
            }
        }
        self.image = Some(image);
        self.check_kernel_image(&path)
    }

    /// A Linux kernel: its build-id must be VMCOREINFO's, and its KASLR offset becomes the
    /// image's load bias. The image's program headers are not used: under KASLR the kernel is
    /// not where they say, physically or virtually; page tables (VMCOREINFO's init_top_pgt, the
    /// CPUs' CR3) translate instead.
    fn open_linux(
        &mut self,
        mut image: Image,
        info: Option<&dumpfmt::VmcoreInfo<'_>>,
        path: &Path,
    ) -> Result<(), OpenError> {
        let belongs = |why: String| {
            open_err(format!(
                "{} does not belong to {}: {why}",
                path.display(),
                self.dump.path().display()
            ))
        };
        let dump_id = info.and_then(|i| i.get("BUILD-ID"));
        if let (Some(dump_id), Some(own)) = (dump_id, image.build_id()) {
            let own = linux::hex(own);
            if !dump_id.trim().eq_ignore_ascii_case(&own) {
                return Err(belongs(format!(
                    "its build-id is {own}, the dump's kernel's (VMCOREINFO BUILD-ID) is {}",
                    dump_id.trim()
                )));
            }
        }
        let from_info = match info {
            Some(info) => {
                kaslr::from_vmcoreinfo(info, &image).map_err(|e| open_err(e.to_string()))?
            }
            None => None,
        };
        let (offset, found) = match from_info {
            Some(v) => v,
            None => kaslr::search(self.dump, &mut self.space, &image).map_err(open_err)?,
        };
        if kaslr::banner_at(&self.space, &image, offset) == Some(false) {
            return Err(belongs(format!(
                "its linux_banner is not in the dump at KASLR offset {offset:#x} ({found})"
            )));
        }
        image.set_load_bias(offset);
        // Without VMCOREINFO, the banner the dump was just checked to hold names it.
        let release = info
            .and_then(|i| i.osrelease())
            .map(str::to_owned)
            .or_else(|| kaslr::banner_release(&image));
        self.notes.push(format!(
            "Linux {}: KASLR offset {offset:#x}, from {found}",
            release.as_deref().unwrap_or("(release unknown)")
        ));
        self.linux = Some(Linux {
            release,
            kaslr_offset: offset,
            found,
        });
        self.image = Some(image);
        Ok(())
    }

    /// The image's code at its entry point must be what the dump holds there.
    fn check_kernel_image(&mut self, path: &Path) -> Result<(), OpenError> {
        let Some(image) = &self.image else {
            return Ok(());
        };
        let entry = image.entry();
        let Some(seg) = image
            .load_segments()
            .iter()
            .find(|s| s.vaddr <= entry && entry < s.vaddr + s.file_size)
        else {
            return Ok(());
        };
        let len = (seg.vaddr + seg.file_size - entry).min(256);
        let Some(want) = image.file_bytes(seg.file_offset + (entry - seg.vaddr), len) else {
            return Ok(());
        };
        let mut got = vec![0u8; len as usize];
        match self
            .space
            .read_virt(entry.wrapping_add(image.load_bias()), &mut got)
        {
            Ok(()) if got == want => Ok(()),
            Ok(()) => Err(open_err(format!(
                "{} does not belong to {}: the code at the entry point {entry:#x} differs",
                path.display(),
                self.dump.path().display()
            ))),
            Err(e) => {
                self.notes
                    .push(format!("could not check the image against the dump: {e}"));
                Ok(())
            }
        }
    }

    /// A file whose first page differs from what the core holds for it is a different build than
    /// the one the process ran: none of its mappings are used. Only the mapping at file offset 0 is
    /// compared (the ELF header, which the core keeps and nothing writes); writable mappings hold
    /// relocated data and differ by design.
    fn drop_mismatched_files(&mut self) {
        let mut stale: Vec<PathBuf> = Vec::new();
        for f in self.file_backed.iter().filter(|f| f.file_offset == 0) {
            let len = (f.end - f.start).min(64) as usize;
            let mut in_core = vec![0u8; len];
            if self.space.read_virt(f.start, &mut in_core).is_err() {
                continue; // nothing in the core to compare with
            }
            if self.file_bytes(f, 0, len as u64) != Some(in_core.as_slice()) {
                stale.push(f.path.clone());
            }
        }
        for path in &stale {
            self.notes.push(format!(
                "{} is not the file the process ran: not used",
                path.display()
            ));
        }
        self.file_backed.retain(|f| !stale.contains(&f.path));
    }

    fn file_bytes<'a>(&'a self, f: &'a FileBacked, within: u64, len: u64) -> Option<&'a [u8]> {
        let offset = f.file_offset.checked_add(within)?;
        match &f.source {
            Backing::Image => self.image.as_ref()?.file_bytes(offset, len),
            Backing::Library(map) => map.get(
                usize::try_from(offset).ok()?..usize::try_from(offset.checked_add(len)?).ok()?,
            ),
        }
    }

    /// Reads `buf` at `addr` from a file the core's mapping came from.
    fn read_file_backed(&self, addr: u64, buf: &mut [u8]) -> bool {
        let end = addr.saturating_add(buf.len() as u64);
        let Some(f) = self
            .file_backed
            .iter()
            .find(|f| f.start <= addr && end <= f.end)
        else {
            return false;
        };
        match self.file_bytes(f, addr - f.start, buf.len() as u64) {
            Some(b) => {
                buf.copy_from_slice(b);
                true
            }
            None => false,
        }
    }

    /// The modules whose `.ko` is loaded, in load order.
    pub fn loaded_modules(&self) -> Vec<Arc<LoadedModule>> {
        self.modules
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Every image, the kernel (or program) first, then the loaded modules: where names are
    /// looked up, in order.
    pub fn images(&self) -> Vec<ImageRef<'_>> {
        let mut all: Vec<ImageRef<'_>> = self.image.iter().map(ImageRef::Main).collect();
        all.extend(self.loaded_modules().into_iter().map(ImageRef::Module));
        all
    }

    /// Loads module `name`'s `.ko` from `file` at the addresses its sections have in the dump
    /// (replacing one loaded before). On a live kernel the addresses come from
    /// /sys/module/NAME/sections, which needs no vmlinux.
    pub fn load_module(&self, name: &str, file: &Path) -> Result<Arc<LoadedModule>, String> {
        let sections = if self.dump.is_live() {
            linux::live::module_sections(name)?
        } else {
            let modules = crate::linux::modules::modules(self)?;
            let module = modules
                .iter()
                .find(|m| m.name == name)
                .ok_or_else(|| format!("{name}: no such module in the dump (mod lists them)"))?;
            module.sections(self)?
        };
        let image = Image::open_relocatable(file, &sections)
            .map_err(|e| format!("{}: {e}", file.display()))?;
        let loaded = Arc::new(LoadedModule {
            name: name.to_owned(),
            image,
        });
        let mut all = self.modules.write().unwrap_or_else(|p| p.into_inner());
        all.retain(|m| m.name != name);
        all.push(Arc::clone(&loaded));
        Ok(loaded)
    }

    /// The KLog state, found through DWARF on first use: in the image, or in the first loaded
    /// module that has `KLogs`. A failure is not kept: loading a module may cure it.
    pub fn klog(&self) -> Result<&Klog, String> {
        if let Some(klog) = self.klog.get() {
            return Ok(klog);
        }
        let images = self.images();
        let image = images
            .iter()
            .find(|i| i.image().symbol("KLogs").is_some())
            .or(images.first())
            .ok_or(if self.dump.is_live() {
                "no KLogs: give the .ko of the module that holds it (kcrash klogtest.ko), or the \
                 kernel's vmlinux with DWARF"
            } else {
                "no image: give the kernel image (vmlinux) with DWARF to read the KLog"
            })?
            .image();
        if image.debug_path().is_none() {
            return Err(format!(
                "{} has no DWARF debug information, which klog needs to lay out KLogs; \
                 sym and rd still work from its ELF symbols",
                image.path().display()
            ));
        }
        let layout = KLogLayout::from_image(image).map_err(|e| match e {
            LayoutError::Symbols(e) => e,
            other => format!("{}: {other}", image.path().display()),
        })?;
        Ok(self.klog.get_or_init(|| Klog::read(self, layout)))
    }
}

/// An image of the session: the kernel or program, or a loaded module.
#[derive(Clone)]
pub enum ImageRef<'s> {
    Main(&'s Image),
    Module(Arc<LoadedModule>),
}

impl ImageRef<'_> {
    pub fn image(&self) -> &Image {
        match self {
            ImageRef::Main(image) => image,
            ImageRef::Module(m) => &m.image,
        }
    }
}

fn unreadable(addr: u64, e: dumpfmt::Error) -> Unreadable {
    match e {
        dumpfmt::Error::Virt { addr, reason, .. } => Unreadable {
            addr,
            reason: reason.to_string(),
        },
        dumpfmt::Error::Phys { addr, reason, .. } => Unreadable {
            addr,
            reason: reason.to_string(),
        },
        other => Unreadable {
            addr,
            reason: other.to_string(),
        },
    }
}

impl Memory for Session<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unreadable> {
        let err = match self.space.read_virt(addr, buf) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if self.file_backed.is_empty() {
            return Err(unreadable(addr, err));
        }
        // Page by page: each from the core if it has it, else from the mapped file.
        let mut done = 0;
        while done < buf.len() {
            let at = addr.wrapping_add(done as u64);
            let n = ((0x1000 - (at & 0xfff)) as usize).min(buf.len() - done);
            let chunk = &mut buf[done..done + n];
            if let Err(e) = self.space.read_virt(at, chunk) {
                if !self.read_file_backed(at, chunk) {
                    return Err(unreadable(at, e));
                }
            }
            done += n;
        }
        Ok(())
    }
}
