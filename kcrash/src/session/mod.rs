//! A dump opened with its image: the memory kcrash's commands read, the symbols they resolve
//! against, and the KLog state, found once and kept.

mod context;
mod files;
mod process;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use dumpfmt::translate::{AddressSpace, LinearMap, Source};
use dumpfmt::{Dump, MissingReason, VirtReason};
use symbols::{Image, ImageSet};

use crate::error::{Context, Error, Result};
use crate::klog::Klog;
use crate::linux::{self, Linux};
use crate::memory::{Memory, Unreadable};
use crate::plugins::DECODERS;
use crate::schemata::{Catalog, Reader};
use kcrash_plugin::{Log, Missing};
use kcrash_schema::Resolve;

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
    /// The event schemata: the shipped ones from the start; the front end adds the user's.
    pub schemata: Catalog,
    /// Every image searched as one: the image, then the kernel modules whose `.ko` is loaded at
    /// their sections' addresses (`mod -s`, `mod -S`, a `.ko` on the command line). Loading a
    /// module swaps in a new set while commands may hold the old one, hence the lock and Arc.
    images: RwLock<Arc<Images>>,
    /// The log each of [`crate::plugins::DECODERS`] found, once found.
    logs: Vec<OnceLock<Box<dyn Log>>>,
    /// Why each decoder found no log, until a module is loaded (its symbols may bring it): a
    /// failed search, a scan of the whole dump among them, is not run again for every command.
    missing: Mutex<Vec<Option<Missing>>>,
    /// The translations a log's finding implied (a KLog descriptor found by scanning), added
    /// to the dump's own.
    log_space: OnceLock<AddressSpace<'d>>,
}

/// The session's images searched as one (the kernel's names first, as crash and drgn do), with
/// the name of each loaded module.
#[derive(Debug, Default)]
pub struct Images {
    pub set: ImageSet,
    /// For each image of `set`: the module's name, or `None` for the kernel, the program or a
    /// shared library.
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
            schemata: Catalog::shipped(),
            images: RwLock::default(),
            logs: DECODERS.iter().map(|_| OnceLock::new()).collect(),
            missing: Mutex::new(vec![None; DECODERS.len()]),
            log_space: OnceLock::new(),
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
        for library in s.libraries() {
            images.push(None, Arc::new(library));
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
        // QEMU's user-mode emulator writes no NT_FILE, and leaves out the read-only mappings
        // that start with an ELF header: the image placed by AT_ENTRY is then the only file
        // known to have been mapped.
        let own_name = path.display().to_string();
        let exe = if mappings.is_empty() && entry.is_some() {
            mappings = process::image_mappings(&image, &own_name);
            self.notes.push(format!(
                "the core names no mapped files (no NT_FILE): {own_name}'s segments, placed by \
                 AT_ENTRY, stand in where the core left out read-only memory"
            ));
            Some((own_name.as_str(), path.clone()))
        } else {
            exe_path.as_deref().map(|name| (name, path.clone()))
        };
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

    /// A process core's shared libraries, each placed where the process mapped its start. A
    /// mapped file that is not ELF (a locale archive, a font) is no library and is passed over.
    fn libraries(&self) -> Vec<Image> {
        let mut found = Vec::new();
        for (path, start) in &self.file_backed.libraries {
            let Ok(mut image) = Self::open_image(path) else {
                continue;
            };
            let Some(first) = image.load_segments().iter().min_by_key(|s| s.file_offset) else {
                continue;
            };
            let linked_at = first.vaddr.wrapping_sub(first.file_offset);
            image.set_load_bias(start.wrapping_sub(linked_at));
            found.push(image);
        }
        found
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
        self.missing_mut().fill(None);
        Ok(())
    }

    /// The KLog state, found on first use as every decoder's log is ([`Session::log`]): by the
    /// image's DWARF, else by the descriptor at its `klogDescriptor` symbol, else by scanning
    /// the dump's memory for the descriptor.
    pub fn klog(&self) -> Result<&Klog> {
        let log = self.log(crate::plugins::index_of(&kcrash_klog::decoder::DECODER))?;
        log.as_any()
            .downcast_ref::<Klog>()
            .ok_or_else(|| Error::Missing("the KLog decoder gave another log".into()))
    }

    /// The log decoder `index` of [`DECODERS`] finds, found on first use. Why a log was not
    /// found is kept until a module is loaded, whose symbols may bring it.
    pub fn log(&self, index: usize) -> std::result::Result<&dyn Log, Missing> {
        let Some(cell) = self.logs.get(index) else {
            return Err(Missing::Absent(format!("no decoder {index}")));
        };
        if let Some(log) = cell.get() {
            return Ok(&**log);
        }
        if let Some(Some(why)) = self.missing_mut().get(index) {
            return Err(why.clone());
        }
        let found = DECODERS[index].find(self).inspect_err(|why| {
            if let Some(slot) = self.missing_mut().get_mut(index) {
                *slot = Some(why.clone());
            }
        })?;
        if let Some(space) = found.translations {
            // Set once, before any reader of the log exists; the log's notes say what it is.
            let _ = self.log_space.set(space);
        }
        Ok(&**cell.get_or_init(|| found.log))
    }

    fn missing_mut(&self) -> std::sync::MutexGuard<'_, Vec<Option<Missing>>> {
        self.missing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session's schemata for a command that prints events, unless it was asked for raw
    /// events or none is loaded.
    pub fn schema_reader(&self, raw: bool) -> Option<Reader<'_>> {
        let set = &self.schemata.set;
        (!raw && !set.is_empty()).then_some(Reader { set, resolve: self })
    }

    /// The dump's own translations, without those a log's finding added.
    pub fn base_space(&self) -> &AddressSpace<'d> {
        &self.space
    }
}

/// What a schema reads besides the event: the images' symbols and the dump's memory.
impl Resolve for Session<'_> {
    fn symbol_at(&self, addr: u64) -> Option<(String, u64)> {
        let images = self.images();
        let (_, sym, off) = images.set.symbolize(addr)?;
        Some((crate::symbolize::display_name(&sym.name), off))
    }

    fn memory(&self) -> &dyn Memory {
        self
    }
}

impl Memory for Session<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unreadable> {
        let space = self.log_space.get().unwrap_or(&self.space);
        let err = match space.read_virt(addr, buf) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if self.file_backed.is_empty() {
            return Err(Unreadable::from_dump(addr, err));
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
                    None => return Err(Unreadable::from_dump(at, e)),
                }
            }
            done += n;
        }
        Ok(())
    }
}
