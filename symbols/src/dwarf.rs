//! Variables and types read from `.debug_info`: finds DIEs through the name index, parses just
//! those DIEs (and, for a type, its members, enumerators or bounds) and caches each parsed type.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use gimli::constants as dw;
use gimli::{AttributeValue, SectionId};

use crate::bytes::{raw, Reader};
use crate::debug_names::{DebugNames, Target};
use crate::error::{Error, Result};
use crate::index::{in_unit, Candidate, NameIndex};
use crate::index_cache::{self, CacheFile, Key, Rejected};
use crate::name_key::{last_segment, Kind};
use crate::sections::Sections;
use crate::strings::string;
use crate::types::{
    Array, BitField, Encoding, Enum, Enumerator, Member, Qualifier, Type, TypeId, TypeKind,
    Variant, Variants,
};
use crate::units::{ParsedUnit, Units};

/// How many references a chain of typedefs, qualifiers or wrappers may follow before we call it
/// a cycle (real ones are a handful long).
pub(crate) const MAX_CHAIN: usize = 64;

/// A global variable as DWARF describes it. Addresses are link-time here; `Image` adds the bias.
#[derive(Debug)]
pub(crate) struct RawVariable {
    pub(crate) name: Option<String>,
    pub(crate) linkage_name: Option<String>,
    pub(crate) address: Option<u64>,
    pub(crate) ty: Option<TypeId>,
}

/// The DWARF of one file, read on demand.
#[derive(Debug)]
pub(crate) struct DebugInfo {
    path: PathBuf,
    pub(crate) sections: Sections,
    dwarf: gimli::Dwarf<Reader>,
    units: OnceLock<Units>,
    variables: OnceLock<NameIndex>,
    types_index: OnceLock<NameIndex>,
    /// Both indexes through the cache kept between sessions, for an image the cache keeps;
    /// `None` for others, which scan each kind on its first lookup.
    persistent: OnceLock<Option<Persistent>>,
    /// The directory of the index cache, if the image's user wants one.
    index_cache: Option<PathBuf>,
    /// Set when the cache file failed a check in a lookup: the session scans from then on.
    cache_failed: AtomicBool,
    /// `.debug_names`, if present and readable.
    debug_names: OnceLock<Option<DebugNames>>,
    types: RwLock<HashMap<TypeId, Arc<Type>>>,
}

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

impl DebugInfo {
    pub(crate) fn new(sections: Sections, index_cache: Option<PathBuf>) -> Result<DebugInfo> {
        let path = sections.file().path.clone();
        let dwarf = sections.types_dwarf()?;
        Ok(DebugInfo {
            path,
            sections,
            dwarf,
            units: OnceLock::new(),
            variables: OnceLock::new(),
            types_index: OnceLock::new(),
            persistent: OnceLock::new(),
            index_cache,
            cache_failed: AtomicBool::new(false),
            debug_names: OnceLock::new(),
            types: RwLock::default(),
        })
    }

    /// The units: where a cache file says they start when the indexes came from one (their
    /// headers are then read as DIEs in them are), else found by walking every header.
    pub(crate) fn units(&self) -> &Units {
        self.units.get_or_init(|| match self.persistent.get() {
            Some(Some(Persistent {
                file: Some(file), ..
            })) => Units::at(self.path.clone(), file.unit_offsets()),
            _ => Units::read(self.path.clone(), &self.dwarf),
        })
    }

    fn index(&self, kind: Kind) -> &NameIndex {
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
    fn lookup(&self, kind: Kind, name: &str) -> Vec<Candidate> {
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

    /// The length of `.debug_info`, which every DIE offset is below.
    pub(crate) fn debug_info_len(&self) -> u64 {
        use gimli::Section;
        raw(self.dwarf.debug_info.reader()).len() as u64
    }

    /// Both name indexes through the cache, when there is one and it keeps this image: a large
    /// `.debug_info` in a file with a build-id.
    fn persistent(&self) -> Option<Persistent> {
        let debug_info_len = self.debug_info_len();
        if debug_info_len < index_cache::MIN_DEBUG_INFO {
            return None;
        }
        let dir = self.index_cache.as_ref()?;
        let file = self.sections.file();
        let key = Key::of(&file.path, file.build_id.as_deref()?, debug_info_len)?;
        Some(self.cached_in(dir, &key))
    }

    /// Both name indexes from the cache file for `key` in `dir`; when there is none, or it is
    /// not valid, scanned and written there.
    pub(crate) fn cached_in(&self, dir: &Path, key: &Key) -> Persistent {
        let path = key.path_in(dir);
        match CacheFile::open(dir, key) {
            Ok(file) => {
                let file = Arc::new(file);
                return Persistent {
                    variables: NameIndex::cached(Arc::clone(&file), Kind::Variables),
                    types: NameIndex::cached(Arc::clone(&file), Kind::Types),
                    file: Some(file),
                    path,
                };
            }
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
    fn candidates(&self, kind: Kind, name: &str) -> Result<Vec<Candidate>> {
        if let Some(names) = self.debug_names() {
            let mut found = Vec::new();
            for target in names.lookup(kind, name) {
                match target {
                    Target::Die(die) => found.push(Candidate { die, defined: true }),
                    Target::Unit(offset) => {
                        let index = self.units().starting_at(offset)?;
                        let unit = self.units().parsed(&self.dwarf, index)?;
                        let start = self.units().offset(index);
                        found.extend(in_unit(kind, &self.path, &self.dwarf, &unit, start, name)?);
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
    fn debug_names(&self) -> Option<&DebugNames> {
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
    fn not_found<T>(&self, kind: Kind) -> Result<Option<T>> {
        match self.index(kind).errors.first() {
            Some(error) => Err(error.clone()),
            None => Ok(None),
        }
    }

    pub(crate) fn variable(&self, name: &str) -> Result<Option<RawVariable>> {
        let segment = last_segment(name);
        for candidate in self.candidates(Kind::Variables, name)? {
            let variable = self.read_variable(candidate.die)?;
            let named = variable.name.as_deref() == Some(segment)
                || variable.linkage_name.as_deref() == Some(name);
            if named {
                return Ok(Some(variable));
            }
        }
        self.not_found(Kind::Variables)
    }

    pub(crate) fn type_by_name(&self, name: &str) -> Result<Option<TypeId>> {
        let name = name.trim();
        let segment = last_segment(name);
        for candidate in self.candidates(Kind::Types, name)? {
            let id = TypeId(candidate.die);
            if self.type_(id)?.name.as_deref() == Some(segment) {
                return Ok(Some(id));
            }
        }
        self.not_found(Kind::Types)
    }

    pub(crate) fn malformed(&self, offset: u64, what: impl Into<String>) -> Error {
        Error::Malformed {
            path: self.path.clone(),
            section: ".debug_info",
            offset,
            what: what.into(),
        }
    }

    fn gimli_error(&self, offset: u64) -> impl Fn(gimli::Error) -> Error + '_ {
        move |source| Error::Dwarf {
            path: self.path.clone(),
            section: ".debug_info",
            offset,
            source,
        }
    }

    /// The unit of the DIE at `offset`, and the DIE's offset in it.
    fn unit_of(&self, offset: u64) -> Result<(Arc<ParsedUnit>, gimli::UnitOffset<usize>)> {
        let (index, in_unit) = self.units().locate(&self.dwarf, offset)?;
        Ok((self.units().parsed(&self.dwarf, index)?, in_unit))
    }

    /// A reference attribute as an offset in `.debug_info`.
    fn reference(
        &self,
        unit: &ParsedUnit,
        die: u64,
        value: AttributeValue<Reader>,
    ) -> Result<Option<TypeId>> {
        match value {
            AttributeValue::UnitRef(offset) => offset
                .to_debug_info_offset(&unit.unit.header)
                .map(|o| Some(TypeId(o.0 as u64)))
                .ok_or_else(|| self.malformed(die, "unit reference outside .debug_info")),
            AttributeValue::DebugInfoRef(offset) => Ok(Some(TypeId(offset.0 as u64))),
            AttributeValue::DebugTypesRef(_) => Err(self.malformed(
                die,
                "reference into a type unit (DW_FORM_ref_sig8), which is not supported",
            )),
            other => Err(self.malformed(die, format!("expected a reference, found {other:?}"))),
        }
    }

    fn read_variable(&self, die: u64) -> Result<RawVariable> {
        let mut variable = RawVariable {
            name: None,
            linkage_name: None,
            address: None,
            ty: None,
        };
        // A definition may carry only its location and point to its declaration for the rest.
        let mut next = Some(die);
        for _ in 0..MAX_CHAIN {
            let Some(offset) = next.take() else {
                return Ok(variable);
            };
            let (unit, in_unit) = self.unit_of(offset)?;
            let entry = unit.unit.entry(in_unit).map_err(self.gimli_error(offset))?;
            let mut attrs = entry.attrs();
            while let Some(attr) = attrs.next().map_err(self.gimli_error(offset))? {
                match attr.name() {
                    dw::DW_AT_name if variable.name.is_none() => {
                        variable.name = self.string(&unit, attr.value())
                    }
                    dw::DW_AT_linkage_name | dw::DW_AT_MIPS_linkage_name
                        if variable.linkage_name.is_none() =>
                    {
                        variable.linkage_name = self.string(&unit, attr.value())
                    }
                    dw::DW_AT_type if variable.ty.is_none() => {
                        variable.ty = self.reference(&unit, offset, attr.value())?
                    }
                    dw::DW_AT_location if variable.address.is_none() => {
                        if let Some(expression) = attr.exprloc_value() {
                            variable.address = self.static_address(&unit, offset, expression)?;
                        }
                    }
                    dw::DW_AT_specification | dw::DW_AT_abstract_origin => {
                        next = self.reference(&unit, offset, attr.value())?.map(|t| t.0)
                    }
                    _ => {}
                }
            }
        }
        Err(self.malformed(die, "DW_AT_specification chain does not end"))
    }

    /// The address a location expression gives when it is just an address (`DW_OP_addr`,
    /// `DW_OP_addrx`); `None` for thread-local and computed locations, and for an address in a
    /// section that is not loaded (a module's `__initdata` after initialisation).
    fn static_address(
        &self,
        unit: &ParsedUnit,
        die: u64,
        expression: gimli::Expression<Reader>,
    ) -> Result<Option<u64>> {
        use gimli::{Reader as _, Section as _};
        let start = expression.0.offset_from(self.dwarf.debug_info.reader());
        let mut ops = expression.operations(unit.unit.encoding());
        let first = ops.next().map_err(self.gimli_error(die))?;
        // Where the address was read, to ask whether it refers to a section not loaded.
        let (address, section, at) = match first {
            // The address follows the one-byte opcode.
            Some(gimli::Operation::Address { address }) => {
                (address, SectionId::DebugInfo, start.wrapping_add(1))
            }
            Some(gimli::Operation::AddressIndex { index }) => {
                let address = self
                    .dwarf
                    .address(&unit.unit, index)
                    .map_err(self.gimli_error(die))?;
                let size = usize::from(unit.unit.encoding().address_size);
                let at = unit
                    .unit
                    .addr_base
                    .0
                    .wrapping_add(index.0.wrapping_mul(size));
                (address, SectionId::DebugAddr, at)
            }
            _ => return Ok(None),
        };
        // Anything after the address (a TLS operator, arithmetic) makes it not a plain address.
        if ops.next().map_err(self.gimli_error(die))?.is_some() {
            return Ok(None);
        }
        if self.sections.relocations(section)?.unloaded_at(at) {
            return Ok(None);
        }
        Ok(Some(address))
    }

    fn string(&self, unit: &ParsedUnit, value: AttributeValue<Reader>) -> Option<String> {
        string(&self.dwarf, &unit.unit, value).map(String::from)
    }

    /// The type `id`, parsed on first use.
    pub(crate) fn type_(&self, id: TypeId) -> Result<Arc<Type>> {
        if let Some(ty) = self.types.read().ok().and_then(|t| t.get(&id).cloned()) {
            return Ok(ty);
        }
        let ty = Arc::new(self.parse_type(id)?);
        if let Ok(mut types) = self.types.write() {
            types.insert(id, Arc::clone(&ty));
        }
        Ok(ty)
    }

    fn parse_type(&self, id: TypeId) -> Result<Type> {
        let offset = id.0;
        let (unit, in_unit) = self.unit_of(offset)?;
        let error = self.gimli_error(offset);
        let mut tree = unit.unit.entries_tree(Some(in_unit)).map_err(&error)?;
        let root = tree.root().map_err(&error)?;
        let entry = root.entry();
        let tag = entry.tag();
        let name = match entry.attr_value(dw::DW_AT_name).map_err(&error)? {
            Some(value) => self.string(&unit, value),
            None => None,
        };
        let byte_size = entry
            .attr_value(dw::DW_AT_byte_size)
            .map_err(&error)?
            .and_then(|v| v.udata_value());
        let target = match entry.attr_value(dw::DW_AT_type).map_err(&error)? {
            Some(value) => self.reference(&unit, offset, value)?,
            None => None,
        };
        let kind = match tag {
            dw::DW_TAG_base_type => {
                let encoding = match entry.attr_value(dw::DW_AT_encoding).map_err(&error)? {
                    Some(AttributeValue::Encoding(e)) => e,
                    _ => return Err(self.malformed(offset, "base type without DW_AT_encoding")),
                };
                TypeKind::Base(match encoding {
                    dw::DW_ATE_signed => Encoding::Signed,
                    dw::DW_ATE_unsigned => Encoding::Unsigned,
                    dw::DW_ATE_boolean => Encoding::Bool,
                    dw::DW_ATE_float => Encoding::Float,
                    dw::DW_ATE_signed_char => Encoding::SignedChar,
                    dw::DW_ATE_unsigned_char => Encoding::UnsignedChar,
                    dw::DW_ATE_UTF => Encoding::Utf,
                    other => Encoding::Other(other.0),
                })
            }
            dw::DW_TAG_unspecified_type => TypeKind::Void,
            dw::DW_TAG_pointer_type
            | dw::DW_TAG_reference_type
            | dw::DW_TAG_rvalue_reference_type => TypeKind::Pointer(target),
            dw::DW_TAG_typedef => TypeKind::Typedef(target),
            dw::DW_TAG_const_type => TypeKind::Qualified(Qualifier::Const, target),
            dw::DW_TAG_volatile_type => TypeKind::Qualified(Qualifier::Volatile, target),
            dw::DW_TAG_restrict_type => TypeKind::Qualified(Qualifier::Restrict, target),
            dw::DW_TAG_atomic_type => TypeKind::Qualified(Qualifier::Atomic, target),
            dw::DW_TAG_subroutine_type => TypeKind::Function,
            dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_union_type => {
                let mut members = Vec::new();
                let mut variants = None;
                let mut children = root.children();
                while let Some(child) = children.next().map_err(&error)? {
                    match child.entry().tag() {
                        dw::DW_TAG_member => members.push(self.member(&unit, child.entry())?),
                        dw::DW_TAG_variant_part => variants = Some(self.variants(&unit, child)?),
                        _ => {}
                    }
                }
                match variants {
                    Some(variants) => TypeKind::Variants(variants),
                    None if tag == dw::DW_TAG_union_type => TypeKind::Union(members),
                    None => TypeKind::Struct(members),
                }
            }
            dw::DW_TAG_enumeration_type => {
                let mut enumerators = Vec::new();
                let mut children = root.children();
                while let Some(child) = children.next().map_err(&error)? {
                    let entry = child.entry();
                    if entry.tag() != dw::DW_TAG_enumerator {
                        continue;
                    }
                    let at = unit_die(&unit, entry.offset());
                    let name = match entry.attr_value(dw::DW_AT_name).map_err(&error)? {
                        Some(value) => self.string(&unit, value),
                        None => None,
                    };
                    let value = match entry.attr_value(dw::DW_AT_const_value).map_err(&error)? {
                        Some(AttributeValue::Sdata(v)) => i128::from(v),
                        Some(v) => match v.udata_value() {
                            Some(v) => i128::from(v),
                            None => {
                                return Err(self.malformed(at, "enumerator value not a constant"))
                            }
                        },
                        None => return Err(self.malformed(at, "enumerator without a value")),
                    };
                    enumerators.push(Enumerator {
                        name: name.unwrap_or_default(),
                        value,
                    });
                }
                TypeKind::Enum(Enum {
                    underlying: target,
                    enumerators,
                })
            }
            dw::DW_TAG_array_type => {
                let mut dims = Vec::new();
                let mut children = root.children();
                while let Some(child) = children.next().map_err(&error)? {
                    let entry = child.entry();
                    if matches!(
                        entry.tag(),
                        dw::DW_TAG_subrange_type | dw::DW_TAG_enumeration_type
                    ) {
                        dims.push(self.bound(entry).map_err(&error)?);
                    }
                }
                TypeKind::Array(Array {
                    element: target,
                    dims,
                })
            }
            other => TypeKind::Other(other.static_string().unwrap_or("unknown tag").to_owned()),
        };
        let transparent = match &kind {
            TypeKind::Struct(members) if unit.is_rust() => rust_wrapper(name.as_deref(), members),
            _ => None,
        };
        let path = match (
            &name,
            unit.namespace_of(&self.dwarf, in_unit).map_err(&error)?,
        ) {
            (Some(name), Some(namespace)) => Some(format!("{namespace}::{name}")),
            _ => None,
        };
        Ok(Type {
            path,
            name,
            byte_size,
            kind,
            transparent,
            rust: unit.is_rust(),
        })
    }

    fn member(
        &self,
        unit: &ParsedUnit,
        entry: &gimli::DebuggingInformationEntry<'_, '_, Reader>,
    ) -> Result<Member> {
        let at = unit_die(unit, entry.offset());
        let error = self.gimli_error(at);
        let mut member = Member {
            name: None,
            ty: None,
            offset: 0,
            bit_field: None,
        };
        let (mut bit_size, mut data_bit_offset, mut old_bit_offset, mut storage_size) =
            (None, None, None, None);
        let mut attrs = entry.attrs();
        while let Some(attr) = attrs.next().map_err(&error)? {
            match attr.name() {
                dw::DW_AT_name => member.name = self.string(unit, attr.value()),
                dw::DW_AT_type => member.ty = self.reference(unit, at, attr.value())?,
                dw::DW_AT_data_member_location => {
                    member.offset = self.member_location(unit, at, &attr)?;
                }
                dw::DW_AT_bit_size => bit_size = attr.udata_value(),
                dw::DW_AT_data_bit_offset => data_bit_offset = attr.udata_value(),
                dw::DW_AT_bit_offset => old_bit_offset = attr.udata_value(),
                dw::DW_AT_byte_size => storage_size = attr.udata_value(),
                _ => {}
            }
        }
        let Some(bit_size) = bit_size else {
            return Ok(member);
        };
        let bit_offset = if let Some(bits) = data_bit_offset {
            bits
        } else {
            let base = member
                .offset
                .checked_mul(8)
                .ok_or_else(|| self.malformed(at, "member offset overflows"))?;
            match old_bit_offset {
                // DWARF 2/3 count from the most significant bit of the storage unit; on a
                // little-endian target that is the far end of it.
                Some(from_msb) if self.sections.file().little_endian => {
                    let storage = match storage_size {
                        Some(size) => size,
                        None => member
                            .ty
                            .map(|ty| self.size_of(ty))
                            .transpose()?
                            .flatten()
                            .ok_or_else(|| self.malformed(at, "bit-field of unknown size"))?,
                    };
                    storage
                        .checked_mul(8)
                        .and_then(|bits| bits.checked_sub(from_msb))
                        .and_then(|bits| bits.checked_sub(bit_size))
                        .and_then(|bits| bits.checked_add(base))
                        .ok_or_else(|| self.malformed(at, "bit-field outside its storage unit"))?
                }
                Some(from_msb) => base.saturating_add(from_msb),
                None => base,
            }
        };
        member.offset = bit_offset / 8;
        member.bit_field = Some(BitField {
            bit_offset,
            bit_size,
        });
        Ok(member)
    }

    /// A Rust enum's `DW_TAG_variant_part`: its discriminant member and its variants.
    fn variants(
        &self,
        unit: &ParsedUnit,
        part: gimli::EntriesTreeNode<'_, '_, '_, Reader>,
    ) -> Result<Variants> {
        let at = unit_die(unit, part.entry().offset());
        let error = self.gimli_error(at);
        let discr = match part.entry().attr_value(dw::DW_AT_discr).map_err(&error)? {
            Some(gimli::AttributeValue::UnitRef(offset)) => Some(offset),
            _ => None,
        };
        let mut variants = Variants {
            discriminant: None,
            discriminant_size: None,
            variants: Vec::new(),
        };
        let mut children = part.children();
        while let Some(child) = children.next().map_err(&error)? {
            let entry = child.entry();
            match entry.tag() {
                dw::DW_TAG_member if Some(entry.offset()) == discr => {
                    let member = self.member(unit, entry)?;
                    variants.discriminant_size =
                        member.ty.map(|ty| self.size_of(ty)).transpose()?.flatten();
                    variants.discriminant = Some(member);
                }
                dw::DW_TAG_variant => {
                    let discr_value =
                        match entry.attr_value(dw::DW_AT_discr_value).map_err(&error)? {
                            Some(AttributeValue::Sdata(v)) => Some(v as u64),
                            Some(v) => v.udata_value(),
                            None => None,
                        };
                    let mut fields = child.children();
                    while let Some(field) = fields.next().map_err(&error)? {
                        if field.entry().tag() == dw::DW_TAG_member {
                            let member = self.member(unit, field.entry())?;
                            variants.variants.push(Variant {
                                discr_value,
                                member,
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(variants)
    }

    /// `DW_AT_data_member_location`: a constant, or (DWARF 2) `DW_OP_plus_uconst N`.
    fn member_location(
        &self,
        unit: &ParsedUnit,
        at: u64,
        attr: &gimli::Attribute<Reader>,
    ) -> Result<u64> {
        if let Some(offset) = attr.udata_value() {
            return Ok(offset);
        }
        if let Some(expression) = attr.exprloc_value() {
            let mut ops = expression.operations(unit.unit.encoding());
            if let (Ok(Some(gimli::Operation::PlusConstant { value })), Ok(None)) =
                (ops.next(), ops.next())
            {
                return Ok(value);
            }
        }
        Err(self.malformed(at, "member location is not a constant offset"))
    }

    /// Element count of one array dimension; `None` when not a constant.
    fn bound(
        &self,
        entry: &gimli::DebuggingInformationEntry<'_, '_, Reader>,
    ) -> gimli::Result<Option<u64>> {
        if let Some(count) = entry.attr_value(dw::DW_AT_count)? {
            return Ok(count.udata_value());
        }
        let lower = match entry.attr_value(dw::DW_AT_lower_bound)? {
            Some(value) => match signed(&value) {
                Some(lower) => lower,
                None => return Ok(None),
            },
            None => 0,
        };
        let upper = match entry.attr_value(dw::DW_AT_upper_bound)? {
            Some(value) => signed(&value),
            None => None,
        };
        Ok(upper.map(|upper| u64::try_from(upper - lower + 1).unwrap_or(0)))
    }

    /// The size in bytes of `id`: its `DW_AT_byte_size`, or what its target or elements add up
    /// to. `None` for `void`, functions, and arrays of unknown length.
    pub(crate) fn size_of(&self, id: TypeId) -> Result<Option<u64>> {
        let mut id = id;
        let mut scale = 1u64;
        for _ in 0..MAX_CHAIN {
            let ty = self.type_(id)?;
            if let Some(size) = ty.byte_size {
                return Ok(size.checked_mul(scale));
            }
            let next = match &ty.kind {
                TypeKind::Typedef(target) | TypeKind::Qualified(_, target) => *target,
                TypeKind::Enum(e) => e.underlying,
                TypeKind::Array(array) => {
                    for dim in &array.dims {
                        match dim.and_then(|n| scale.checked_mul(n)) {
                            Some(n) => scale = n,
                            None => return Ok(None),
                        }
                    }
                    array.element
                }
                TypeKind::Pointer(_) => return Ok(Some(u64::from(self.units_address_size(id)?))),
                _ => None,
            };
            match next {
                Some(next) => id = next,
                None => return Ok(None),
            }
        }
        Err(self.malformed(id.0, "type reference chain does not end"))
    }

    fn units_address_size(&self, id: TypeId) -> Result<u8> {
        let (unit, _) = self.unit_of(id.0)?;
        Ok(unit.unit.header.address_size())
    }
}

/// A DIE's offset in `.debug_info`, for error messages.
fn unit_die(unit: &ParsedUnit, offset: gimli::UnitOffset<usize>) -> u64 {
    offset
        .to_debug_info_offset(&unit.unit.header)
        .map_or(0, |o| o.0 as u64)
}

/// An array bound attribute's value as a signed number.
fn signed(value: &AttributeValue<Reader>) -> Option<i128> {
    match *value {
        AttributeValue::Sdata(v) => Some(i128::from(v)),
        // Fixed-size data is unsigned, except that an all-ones value is the -1 older producers
        // write for "no elements".
        AttributeValue::Data1(u8::MAX)
        | AttributeValue::Data2(u16::MAX)
        | AttributeValue::Data4(u32::MAX)
        | AttributeValue::Data8(u64::MAX) => Some(-1),
        AttributeValue::Data1(v) => Some(i128::from(v)),
        AttributeValue::Data2(v) => Some(i128::from(v)),
        AttributeValue::Data4(v) => Some(i128::from(v)),
        AttributeValue::Data8(v) => Some(i128::from(v)),
        AttributeValue::Udata(v) => Some(i128::from(v)),
        _ => None,
    }
}

/// Rust's interior-mutability wrappers, which hold exactly their one field: a value of one of
/// these is printed as that field.
fn rust_wrapper(name: Option<&str>, members: &[Member]) -> Option<TypeId> {
    let name = name?;
    let wrapper = name.starts_with("Atomic")
        || ["UnsafeCell<", "SyncUnsafeCell<", "Cell<"]
            .iter()
            .any(|prefix| name.starts_with(prefix));
    match members {
        [only] if wrapper && only.offset == 0 && only.bit_field.is_none() => only.ty,
        _ => None,
    }
}
