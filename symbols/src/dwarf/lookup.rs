//! Which name index answers a lookup: `.debug_names` when the file has it, else the index
//! kept between sessions (read from the cache, or scanned and written there), else one scanned
//! for this session alone; and a cache file that fails a check mid-session is dropped.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::DwarfFile;
use crate::debug_names::{DebugNames, Target};
use crate::error::Result;
use crate::index::{Candidate, NameIndex};
use crate::index_cache::{self, CacheFile, Key, Rejected};
use crate::name_key::Kind;
use crate::units::Units;

/// Both name indexes as the cache gave them.
#[derive(Debug)]
pub(crate) struct Persistent {
    pub(crate) variables: NameIndex,
    pub(crate) types: NameIndex,
    /// The file they were read from; `None` when this session scanned them.
    pub(crate) file: Option<Arc<CacheFile>>,
    /// Where that file is (or was to be written).
    path: PathBuf,
}

impl Persistent {
    /// The indexes of a valid cache file at `path`.
    fn from(file: CacheFile, path: PathBuf) -> Persistent {
        let file = Arc::new(file);
        Persistent {
            variables: NameIndex::cached(Arc::clone(&file), Kind::Variables),
            types: NameIndex::cached(Arc::clone(&file), Kind::Types),
            file: Some(file),
            path,
        }
    }
}

impl DwarfFile {
    /// The units: where a cache file says they start when the indexes came from one (their
    /// headers are then read as DIEs in them are), else found by walking every header.
    pub(crate) fn units(&self) -> &Units {
        self.units.get_or_init(|| match self.persistent.get() {
            Some(Some(Persistent {
                file: Some(file), ..
            })) => Units::at(self.path.clone(), file.unit_offsets()),
            _ => {
                // The section loaded when the DWARF view was made; it cannot fail now.
                let section = self.sections.bytes_of(gimli::SectionId::DebugInfo);
                let section = section.unwrap_or_else(|_| crate::bytes::Bytes::empty());
                Units::read(self.path.clone(), &section, self.sections.endian())
            }
        })
    }

    pub(super) fn index(&self, kind: Kind) -> &NameIndex {
        if !self.cache_failed.load(Ordering::Relaxed) {
            if let Some(indexes) = self.persistent.get_or_init(|| self.persistent()) {
                return match kind {
                    Kind::Variables => &indexes.variables,
                    Kind::Types => &indexes.types,
                };
            }
        }
        let slot = match kind {
            Kind::Variables => &self.variables,
            Kind::Types => &self.types_index,
        };
        slot.get_or_init(|| {
            self.sections.prefault_debug_info();
            NameIndex::build(kind, &self.path, &self.dwarf, self.units())
        })
    }

    /// The index's candidates for `name`. A cache file that fails its checks here is removed
    /// (the next session writes a new one) and this session scans instead.
    pub(super) fn lookup(&self, kind: Kind, name: &str) -> Vec<Candidate> {
        match self.index(kind).lookup(name) {
            Ok(found) => found,
            Err(why) => {
                if !self.cache_failed.swap(true, Ordering::Relaxed) {
                    if let Some(Some(persistent)) = self.persistent.get() {
                        index_cache::note_rejected(&persistent.path, &why, "removing it");
                        let _ = std::fs::remove_file(&persistent.path);
                    }
                }
                // Scanned now, which cannot fail.
                self.index(kind).lookup(name).unwrap_or_default()
            }
        }
    }

    /// The cache directory and this image's key there, when the cache keeps this image: a
    /// large `.debug_info` in a file with a build-id, and a directory that may be trusted.
    fn cache_key(&self) -> Option<(&Path, Key)> {
        let debug_info_len = self.debug_info_len();
        if debug_info_len < index_cache::MIN_DEBUG_INFO {
            return None;
        }
        let dir = self.index_cache.as_deref()?;
        if let Some(why) = index_cache::distrust(dir) {
            index_cache::note_distrusted(dir, &why);
            return None;
        }
        let file = self.sections.file();
        let key = Key::of(&file.path, file.build_id.as_deref()?, debug_info_len)?;
        Some((dir, key))
    }

    /// Both name indexes through the cache, when it keeps this image.
    pub(super) fn persistent(&self) -> Option<Persistent> {
        let (dir, key) = self.cache_key()?;
        Some(self.cached_in(dir, &key))
    }

    /// Whether the cache holds this image's indexes, opened now if so. Scans nothing: a
    /// missing or invalid file is left for the first lookup that needs the full index, which
    /// builds and writes it.
    pub(super) fn cached_index(&self) -> bool {
        if let Some(persistent) = self.persistent.get() {
            return persistent.is_some();
        }
        if self.cache_failed.load(Ordering::Relaxed) {
            return false;
        }
        let Some((dir, key)) = self.cache_key() else {
            let _ = self.persistent.set(None);
            return false;
        };
        match CacheFile::open(dir, &key) {
            Ok(file) => {
                let _ = self
                    .persistent
                    .set(Some(Persistent::from(file, key.path_in(dir))));
                true
            }
            Err(_) => false,
        }
    }

    /// Both name indexes from the cache file for `key` in `dir`; when there is none, or it is
    /// not valid, scanned and written there.
    pub(crate) fn cached_in(&self, dir: &Path, key: &Key) -> Persistent {
        let path = key.path_in(dir);
        match CacheFile::open(dir, key) {
            Ok(file) => return Persistent::from(file, path),
            Err(Rejected::Missing) => {}
            Err(Rejected::Invalid(why)) => index_cache::note_rejected(&path, &why, "rebuilding it"),
        }
        self.sections.prefault_debug_info();
        let units = self.units();
        let (variables, types) = rayon::join(
            || NameIndex::build(Kind::Variables, &self.path, &self.dwarf, units),
            || NameIndex::build(Kind::Types, &self.path, &self.dwarf, units),
        );
        // An index with unreadable units is not kept: each session reports them again.
        let scanned = (variables.scanned(), types.scanned());
        if let (true, Some(v), Some(t)) = (
            variables.errors.is_empty() && types.errors.is_empty(),
            scanned.0,
            scanned.1,
        ) {
            let offsets: Vec<u64> = units.offsets().collect();
            if let Err(error) = index_cache::store(dir, key, &offsets, v, t) {
                index_cache::note_store_failed(dir, &error);
            }
        }
        Persistent {
            variables,
            types,
            file: None,
            path,
        }
    }

    /// The DIEs that may carry `name`: from `.debug_names` when it has the name, else from the
    /// index built by scanning.
    pub(super) fn candidates(&self, kind: Kind, name: &str) -> Result<Vec<Candidate>> {
        if let Some(names) = self.debug_names() {
            let mut found = Vec::new();
            for target in names.lookup(kind, name) {
                match target {
                    Target::Die(die) => found.push(Candidate { die, defined: true }),
                    Target::Unit(offset) => {
                        found.extend(self.unit_names(kind, offset)?.lookup(name));
                    }
                }
            }
            if !found.is_empty() {
                found.sort_by_key(|c| !c.defined);
                return Ok(found);
            }
        }
        Ok(self.lookup(kind, name))
    }

    /// `.debug_names`, read on first use. One that cannot be read is not used: every lookup
    /// then scans, which gives the same answers, only slower.
    pub(super) fn debug_names(&self) -> Option<&DebugNames> {
        self.debug_names
            .get_or_init(|| {
                use gimli::Section;
                let section = self.sections.debug_names()?.ok()?;
                DebugNames::read(&self.path, section, self.dwarf.debug_str.reader()).ok()
            })
            .as_ref()
    }

    /// `Ok(None)` for a name not found, unless some unit could not be read: then the name may
    /// have been there, and that unit's error is returned.
    pub(super) fn not_found<T>(&self, kind: Kind) -> Result<Option<T>> {
        match self.index(kind).errors.first() {
            Some(error) => Err(error.clone()),
            None => Ok(None),
        }
    }
}
