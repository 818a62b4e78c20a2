//! A dump opened with its image: the memory kcrash's commands read, the symbols they resolve
//! against, and the KLog state, found once and kept.

mod files;
mod process;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use dumpfmt::translate::x86_64::X86_64;
use dumpfmt::translate::{AddressSpace, LinearMap, Source};
use dumpfmt::{Dump, MissingReason, VirtReason};
use symbols::{Image, ImageSet};

use crate::error::{Context, Error, Result};
use crate::klog::descriptor::{self, Described, LayoutSource};
use crate::klog::layout::{KLogLayout, LayoutError};
use crate::klog::Klog;
use crate::linux::{self, Linux};
use crate::memory::{Memory, Unreadable};
use crate::plugins::DECODERS;
use kcrash_plugin::{Log, Missing};

pub use files::{is_gzip, open_dump, parse_phys_address, sort_files, split_raw, Files};
pub use process::{FileBacked, FileRange, Verdict};

/// An open dump with its image.
pub struct Session<'d> {
    pub dump: &'d Dump,
    /// The kernel image or the program, when given or found: the first image searched.
    pub image: Option<Arc<Image>>,
    space: AddressSpace<'d>,
    /// Process cores: memory the core does not hold, read from the files it was mapped from.
    pub file_backed: FileBacked,
    /// What opening found out and did, for `sys` and for `-s`-less start-up messages.
    pub notes: Vec<String>,
    /// Set when the dump is a Linux kernel's and its vmlinux was given.
    pub linux: Option<Linux>,
    /// Every image searched as one: the image, then the kernel modules whose `.ko` is loaded at
    /// their sections' addresses (`mod -s`, `mod -S`, a `.ko` on the command line). Loading a
    /// module swaps in a new set while commands may hold the old one, hence the lock and Arc.
    images: RwLock<Arc<Images>>,
    klog: OnceLock<Klog>,
    /// The log each of [`crate::plugins::DECODERS`] found, once found.
    logs: Vec<OnceLock<Box<dyn Log>>>,
    /// The translations a KLog descriptor found by scanning implies, added to the dump's own.
    klog_space: OnceLock<AddressSpace<'d>>,
}

/// The session's images searched as one (the kernel's names first, as crash and drgn do), with
/// the name of each loaded module.
#[derive(Debug, Default)]
pub struct Images {
    pub set: ImageSet,
    /// For each image of `set`: the module's name, or `None` for the kernel or program.
    names: Vec<Option<String>>,
}

impl Images {
    /// The loaded modules in load order: each one's name and image.
    pub fn modules(&self) -> impl Iterator<Item = (&str, &Arc<Image>)> {
        self.names
            .iter()
            .zip(self.set.images())
            .filter_map(|(name, image)| Some((name.as_deref()?, image)))
    }

    fn push(&mut self, name: Option<String>, image: Arc<Image>) {
        self.set.push(image);
        self.names.push(name);
    }
}

const AT_ENTRY: u64 = 9;

impl<'d> Session<'d> {
    /// Opens a session on `dump` with `image` (or, for a process core, the executable the core
    /// names, when it is present).
    pub fn open(dump: &'d Dump, image: Option<PathBuf>) -> Result<Session<'d>> {
        let space = AddressSpace::from_dump(dump)?;
        let mut s = Session {
            dump,
            image: None,
            space,
            file_backed: FileBacked::default(),
            notes: Vec::new(),
            linux: None,
            images: RwLock::default(),
            klog: OnceLock::new(),
            logs: DECODERS.iter().map(|_| OnceLock::new()).collect(),
            klog_space: OnceLock::new(),
        };
        if let Some(end) = dump.gzip_stopped_at() {
            s.notes.push(format!(
                "{}: the gzip stream goes on past {end:#x}, where the dump's headers say it \
                 ends: the rest was not decompressed",
                dump.path().display()
            ));
        }
        if dump.is_process_core() {
            s.open_process(image)?;
        } else if let Some(path) = image {
            s.open_kernel(path)?;
        }
        let mut images = Images::default();
        if let Some(image) = &s.image {
            images.push(None, Arc::clone(image));
        }
        s.images = RwLock::new(Arc::new(images));
        Ok(s)
    }

    fn open_image(path: &Path) -> Result<Image> {
        let options = symbols::Options {
            index_cache: symbols::default_index_cache(),
            ..symbols::Options::default()
        };
        Ok(Image::open_with(path, &options)?)
    }

    /// A process core: the executable (given, or named by NT_FILE), which must be the one the
    /// process ran, its load bias from AT_ENTRY, and the files whose read-only pages the core
    /// left out.
    fn open_process(&mut self, given: Option<PathBuf>) -> Result<()> {
        let dump = self.dump;
        let mut mappings = Vec::new();
        let mut entry = None;
        for note in dump.notes() {
            let note = note?;
            if note.is("CORE", 0x4649_4c45) {
                // The core's own memory is still there to read without the files.
                mappings = note.file_mappings().unwrap_or_else(|e| {
                    self.notes
                        .push(format!("{e}: the files the process mapped are not used"));
                    Vec::new()
                });
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
                return Err(Error::NotBelonging {
                    image: path,
                    dump: dump.path().to_owned(),
                    why: format!(
                        "the process started at {entry:#x}, the image's entry is {:#x}",
                        image.entry()
                    ),
                });
            }
        }
        let exe = exe_path.as_deref().map(|name| (name, path.clone()));
        let (file_backed, verdict) = FileBacked::new(
            &mappings,
            exe,
            &self.space,
            dump.segments(),
            &mut self.notes,
        );
        match verdict {
            Verdict::Same => {}
            Verdict::Differs(why) => {
                return Err(Error::NotBelonging {
                    image: path,
                    dump: dump.path().to_owned(),
                    why,
                })
            }
            Verdict::Unchecked(why) => self.notes.push(format!(
                "{} could not be checked against the core: {why}",
                path.display()
            )),
        }
        self.file_backed = file_backed;
        self.image = Some(Arc::new(image));
        Ok(())
    }

    /// A kernel dump. Linux: see [`linux::open`]. Another kernel (the test kernels): the image's
    /// program headers give a linear map (virtual = physical + offset) after the dump's own
    /// mappings and page tables; the image must match the dump.
    fn open_kernel(&mut self, path: PathBuf) -> Result<()> {
        let image = Self::open_image(&path)?;
        let info = self.dump.vmcoreinfo()?;
        if linux::is_linux(info.as_ref(), &image) {
            let (image, linux) =
                linux::open(self.dump, &mut self.space, image, info.as_ref(), &path)?;
            self.notes.push(linux.note());
            self.linux = Some(linux);
            self.image = Some(Arc::new(image));
            return Ok(());
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
        self.image = Some(Arc::new(image));
        self.check_kernel_image(&path)
    }

    /// The image's code at its entry point must be what the dump holds there.
    fn check_kernel_image(&mut self, path: &Path) -> Result<()> {
        let Some(image) = &self.image else {
            return Ok(());
        };
        let entry = image.entry();
        let Some(seg) = image
            .load_segments()
            .iter()
            .find(|s| s.vaddr <= entry && entry < s.vaddr.saturating_add(s.file_size))
        else {
            return Ok(());
        };
        let len = (seg.vaddr.saturating_add(seg.file_size) - entry).min(256);
        let Some(want) = image.file_bytes(seg.file_offset + (entry - seg.vaddr), len) else {
            return Ok(());
        };
        let mut got = vec![0u8; len as usize];
        match self
            .space
            .read_virt(entry.wrapping_add(image.load_bias()), &mut got)
        {
            Ok(()) if got == want => Ok(()),
            Ok(()) => Err(Error::NotBelonging {
                image: path.to_owned(),
                dump: self.dump.path().to_owned(),
                why: format!("the code at the entry point {entry:#x} differs"),
            }),
            Err(e) => {
                self.notes
                    .push(format!("could not check the image against the dump: {e}"));
                Ok(())
            }
        }
    }

    /// The kernel as Linux's readers see it.
    pub fn kernel(&self) -> linux::Kernel<'_> {
        linux::Kernel {
            image: self.image.as_deref(),
            mem: self,
        }
    }

    /// The images as they are now: the image, then the loaded modules.
    pub fn images(&self) -> Arc<Images> {
        Arc::clone(&self.images.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Loads module `name`'s `.ko` from `file` at the addresses its sections have in the dump
    /// (replacing one loaded before). On a live kernel the addresses come from
    /// /sys/module/NAME/sections, which needs no vmlinux.
    pub fn load_module(&self, name: &str, file: &Path) -> Result<()> {
        let sections = if self.dump.is_live() {
            linux::live::module_sections(name)?
        } else {
            let modules = crate::linux::modules::modules(self.kernel())?;
            let module = modules.iter().find(|m| m.name == name).ok_or_else(|| {
                Error::Missing(format!(
                    "{name}: no such module in the dump (mod lists them)"
                ))
            })?;
            module.sections(self.kernel())?
        };
        let image =
            Image::open_relocatable(file, &sections).with_context(|| file.display().to_string())?;
        let mut images = self.images.write().unwrap_or_else(|p| p.into_inner());
        let mut next = Images::default();
        for (old, image) in images.names.iter().zip(images.set.images()) {
            if old.as_deref() != Some(name) {
                next.push(old.clone(), Arc::clone(image));
            }
        }
        next.push(Some(name.to_owned()), Arc::new(image));
        *images = Arc::new(next);
        Ok(())
    }

    /// The KLog state, found on first use: by the image's DWARF (in the image, or in the first
    /// loaded module that has `KLogs`); else by the descriptor at its `klogDescriptor` symbol;
    /// else by scanning the dump's memory for the descriptor. A failure is not kept: loading a
    /// module may cure it.
    pub fn klog(&self) -> Result<&Klog> {
        if let Some(klog) = self.klog.get() {
            return Ok(klog);
        }
        let found = self.find_klog()?;
        if let Some(space) = found.space {
            // Set once, before any reader of the rings exists.
            let _ = self.klog_space.set(space);
        }
        Ok(self.klog.get_or_init(|| {
            let mut klog = Klog::read(self, found.layout);
            klog.source = found.source;
            klog.notes = found.notes;
            klog
        }))
    }

    /// The log decoder `index` of [`DECODERS`] finds, found on first use. A log that is not
    /// found is looked for again next time: loading a module may bring its symbols.
    pub fn log(&self, index: usize) -> std::result::Result<&dyn Log, Missing> {
        let Some(cell) = self.logs.get(index) else {
            return Err(Missing::Absent(format!("no decoder {index}")));
        };
        if let Some(log) = cell.get() {
            return Ok(&**log);
        }
        let found = DECODERS[index].find(self)?;
        if let Some((space, _)) = found.translations {
            // Set once, before any reader of the log exists; the log's notes say what it is.
            let _ = self.klog_space.set(space);
        }
        Ok(&**cell.get_or_init(|| found.log))
    }

    /// The dump's own translations, without those a log's finding added.
    pub fn base_space(&self) -> &AddressSpace<'d> {
        &self.space
    }

    fn find_klog(&self) -> Result<FoundLayout<'d>> {
        let images = self.images();
        let all = images.set.images();
        let image = all
            .iter()
            .find(|i| i.symbol("KLogs").is_some() || i.symbol(DESCRIPTOR).is_some());
        let Some(image) = image else {
            let mut notes = Vec::new();
            if let Some(first) = all.first() {
                notes.push(format!(
                    "{} has neither KLogs nor {DESCRIPTOR}: the KLog descriptor was looked for \
                     in the dump's memory",
                    first.path().display()
                ));
            }
            return self.scan_for_klog(notes);
        };
        let mut notes = Vec::new();
        let described = image.symbol(DESCRIPTOR).map(|sym| {
            let read = |at, buf: &mut [u8]| self.read(at, buf).map_err(|e| e.to_string());
            (sym.address, descriptor::read(sym.address, &read))
        });
        if image.debug_path().is_some() && image.symbol("KLogs").is_some() {
            // symbols' errors name the file themselves.
            let layout = KLogLayout::from_image(image).map_err(|e| match e {
                LayoutError::Symbols(e) => Error::from(e),
                other => Error::from(other).context(image.path().display().to_string()),
            })?;
            match described {
                Some((_, Ok(d))) => {
                    let differ = descriptor::disagreement(&layout, &descriptor::layout(&d));
                    notes.push(if differ.is_empty() {
                        "the KLog descriptor agrees with DWARF".into()
                    } else {
                        format!(
                            "the KLog descriptor disagrees with DWARF, which is used: {}",
                            differ.join("; ")
                        )
                    });
                }
                Some((_, Err(refused))) => notes.push(format!("{refused}; DWARF is used")),
                None => {}
            }
            return Ok(FoundLayout {
                layout,
                source: LayoutSource::Dwarf,
                notes,
                space: None,
            });
        }
        match described {
            Some((addr, Ok(d))) => Ok(FoundLayout {
                layout: descriptor::layout(&d),
                source: LayoutSource::Symbol { addr },
                notes,
                space: None,
            }),
            Some((_, Err(refused))) => Err(Error::Missing(format!(
                "{} has no DWARF for KLogs, and its {refused}",
                image.path().display()
            ))),
            None => {
                notes.push(format!(
                    "{} has no DWARF debug information and no {DESCRIPTOR} symbol: the KLog \
                     descriptor was looked for in the dump's memory",
                    image.path().display()
                ));
                self.scan_for_klog(notes)
            }
        }
    }

    /// Scans the dump's memory for the descriptor. A kernel dump's candidates are physical: the
    /// one chosen must be where the dump's own translations put its `self` address, or, when
    /// they cannot translate it, it gives them — its page-table root, else the linear map that
    /// puts its `self` address where it was found.
    fn scan_for_klog(&self, mut notes: Vec<String>) -> Result<FoundLayout<'d>> {
        let dump = self.dump;
        if dump.is_live() {
            return Err(Error::Missing(
                "no KLogs: give the .ko of the module that holds it (kcrash klogtest.ko), or the \
                 kernel's vmlinux with DWARF (a running kernel's memory is not scanned)"
                    .into(),
            ));
        }
        // Process cores, and kernel dumps that give only virtual addresses, are searched by
        // virtual address: a candidate is then where it says it is, or it is a copy.
        let process = dump.searched_by_virtual_address();
        let read = |at, buf: &mut [u8]| {
            if process {
                self.read(at, buf).map_err(|e| e.to_string())
            } else {
                dump.read_phys(at, buf).map_err(|e| e.to_string())
            }
        };
        let (found, searched) = descriptor::scan(dump, |at| descriptor::read(at, &read));
        let mut valid = Vec::new();
        for (at, result) in found {
            match result {
                Ok(d) => match self.place(at, &d, process) {
                    Ok(space) => valid.push((at, d, space)),
                    Err(why) => notes.push(format!("KLog descriptor at {at:#x}: {why}")),
                },
                Err(refused) => notes.push(refused.to_string()),
            }
        }
        let what = if process { "" } else { "physical " };
        if valid.len() > 1 {
            let at: Vec<String> = valid
                .iter()
                .map(|(a, ..)| format!("{what}{a:#x}"))
                .collect();
            return Err(Error::Missing(format!(
                "{} KLog descriptors in the dump's memory, at {}: kcrash trusts none of them; \
                 give the image with DWARF",
                valid.len(),
                at.join(", ")
            )));
        }
        let Some((at, d, space)) = valid.pop() else {
            let refused = if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join("; "))
            };
            return Err(Error::Missing(format!(
                "no usable KLog descriptor in the dump's memory ({} MiB searched{}){refused}; \
                 give the kernel image with DWARF or its {DESCRIPTOR} symbol",
                searched.bytes >> 20,
                if searched.unreadable > 0 {
                    format!(", {} MiB unreadable", searched.unreadable >> 20)
                } else {
                    String::new()
                }
            )));
        };
        if let Some((_, why)) = &space {
            notes.push(why.clone());
        }
        Ok(FoundLayout {
            layout: descriptor::layout(&d),
            source: LayoutSource::Scan {
                found: at,
                virtual_addresses: process,
            },
            notes,
            space: space.map(|(s, _)| s),
        })
    }

    /// Checks that a descriptor found at `at` is the one its `self` address names, and says what
    /// translations reading through its addresses needs beyond the dump's own (with a note).
    fn place(
        &self,
        at: u64,
        d: &Described,
        process: bool,
    ) -> std::result::Result<Option<(AddressSpace<'d>, String)>, String> {
        let this = d.parsed.this;
        if process {
            return if this == at {
                Ok(None)
            } else {
                Err(format!("it says it is at {this:#x}: a copy"))
            };
        }
        match self.space.translate(this) {
            Ok(pa) if pa == at => return Ok(None),
            Ok(pa) => {
                return Err(format!(
                    "it says it is at {this:#x}, which the dump's translations put at physical \
                     {pa:#x}: a copy"
                ))
            }
            Err(_) => {}
        }
        let mut space = AddressSpace::new(self.dump);
        for source in self.space.sources() {
            space.push(source.clone());
        }
        if let Some(root) = d.parsed.page_table_root {
            space.push(Source::PageTables {
                walker: Arc::new(X86_64::new(false)),
                root,
            });
            if space.translate(this).is_ok_and(|pa| pa == at) {
                return Ok(Some((
                    space,
                    format!(
                        "virtual addresses translated through the page tables at physical \
                         {root:#x} the KLog descriptor records"
                    ),
                )));
            }
            return Err(format!(
                "its page tables at {root:#x} do not map {this:#x} to where it was found"
            ));
        }
        let map = LinearMap {
            virt_start: this.wrapping_sub(at),
            len: phys_end(self.dump),
            phys_start: 0,
        };
        space.push(Source::Linear(map));
        Ok(Some((
            space,
            format!(
                "virtual addresses translated by the one linear map the KLog descriptor implies \
                 (virtual {this:#x} is physical {at:#x}); memory mapped otherwise (vmalloc, \
                 modules) is not readable"
            ),
        )))
    }
}

/// The symbol of the KLog descriptor.
const DESCRIPTOR: &str = "klogDescriptor";

/// What [`Session::klog`] found.
struct FoundLayout<'d> {
    layout: KLogLayout,
    source: LayoutSource,
    notes: Vec<String>,
    /// The dump's translations and the ones the descriptor implies, when it needed any.
    space: Option<AddressSpace<'d>>,
}

/// One past the highest physical address the dump holds.
fn phys_end(dump: &Dump) -> u64 {
    if let Some(range) = dump.raw_range() {
        return range.end;
    }
    match dump.kdump_header() {
        Some(h) => h.max_mapnr.saturating_mul(h.block_size),
        None => dump
            .segments()
            .iter()
            .map(|s| s.paddr.saturating_add(s.memsz))
            .max()
            .unwrap_or(0),
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
        let space = self.klog_space.get().unwrap_or(&self.space);
        let err = match space.read_virt(addr, buf) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if self.file_backed.is_empty() {
            return Err(unreadable(addr, err));
        }
        // Page by page: each from the core if it has it, else, when the core left it out on
        // purpose (past p_filesz, or no segment at all) and did not lose it to truncation, from
        // the mapped file.
        let mut done = 0;
        while done < buf.len() {
            let at = addr.wrapping_add(done as u64);
            let n = ((0x1000 - (at & 0xfff)) as usize).min(buf.len() - done);
            let chunk = &mut buf[done..done + n];
            if let Err(e) = self.space.read_virt(at, chunk) {
                let left_out = match &e {
                    dumpfmt::Error::Virt {
                        reason: VirtReason::NotMapped { .. },
                        ..
                    } => true,
                    e => matches!(e.missing_reason(), Some(MissingReason::Excluded)),
                };
                match left_out.then(|| self.file_backed.read(at, chunk)).flatten() {
                    Some(Ok(())) => {}
                    Some(Err(reason)) => return Err(Unreadable { addr: at, reason }),
                    None => return Err(unreadable(at, e)),
                }
            }
            done += n;
        }
        Ok(())
    }
}
