//! Turning a type's DIEs into a [`Type`]: its kind, members, enumerators, bounds and variants,
//! each type parsed once and kept; and the size of any type.

use std::sync::Arc;

use gimli::constants as dw;
use gimli::AttributeValue;

use super::{DwarfFile, MAX_CHAIN};
use crate::bytes::Reader;
use crate::error::Result;
use crate::types::{
    Array, BitField, Encoding, Enum, Enumerator, Member, Qualifier, Type, TypeId, TypeKind,
    Variant, Variants,
};
use crate::units::ParsedUnit;

impl DwarfFile {
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
