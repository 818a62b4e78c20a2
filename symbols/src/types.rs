//! The type model: a small, owned description of one DWARF type. Types refer to each other by
//! [`TypeId`] and are parsed one at a time when asked for, so a lookup reads only the DIEs it
//! shows.

/// A type, named by the offset of its DIE in `.debug_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeId(pub u64);

/// One type.
#[derive(Debug, Clone, PartialEq)]
pub struct Type {
    /// The name as the producer gave it (`_KLog`, `u64`, `*const i8`); `None` when anonymous.
    pub name: Option<String>,
    /// The name with the namespaces it is in, for a type in a namespace (Rust):
    /// `core::sync::atomic::AtomicU64`.
    pub path: Option<String>,
    /// `DW_AT_byte_size`, when given. Use [`crate::Image::size_of`] for the size of any type.
    pub byte_size: Option<u64>,
    pub kind: TypeKind,
    /// For a Rust wrapper that is only its one field (`AtomicU64`, `AtomicPtr<T>`,
    /// `UnsafeCell<T>`, `Cell<T>`): the field's type, which is what a value of it should be
    /// printed as.
    pub transparent: Option<TypeId>,
    /// From a Rust unit: its name is used as is, without C's `struct`/`union`/`enum`.
    pub rust: bool,
}

/// What kind of type, with what is particular to it.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeKind {
    /// An integer, float, boolean or character.
    Base(Encoding),
    /// `void`, or DWARF's `DW_TAG_unspecified_type`.
    Void,
    /// A pointer or reference; `None` points to `void`.
    Pointer(Option<TypeId>),
    Struct(Vec<Member>),
    Union(Vec<Member>),
    /// A Rust enum: one of several variants, chosen by a discriminant.
    Variants(Variants),
    Enum(Enum),
    Array(Array),
    /// A typedef of `target` (`None`: of `void`).
    Typedef(Option<TypeId>),
    /// `const`, `volatile`, `restrict` or `_Atomic` on `target` (`None`: on `void`).
    Qualified(Qualifier, Option<TypeId>),
    /// A function type (what a function pointer points to).
    Function,
    /// A DWARF type tag this model does not describe (pointer-to-member, ...); its name.
    Other(String),
}

/// How a base type's bits are read (`DW_AT_encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Signed,
    Unsigned,
    Bool,
    Float,
    SignedChar,
    UnsignedChar,
    /// A Unicode scalar value (Rust `char`, C `char32_t`).
    Utf,
    /// Another DWARF encoding (complex, decimal, fixed-point ...), by its code.
    Other(u8),
}

/// A type qualifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Qualifier {
    Const,
    Volatile,
    Restrict,
    Atomic,
}

/// A member of a struct or union.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub name: Option<String>,
    pub ty: Option<TypeId>,
    /// Byte offset from the start of the struct. For a bit-field, the byte holding its first bit.
    pub offset: u64,
    pub bit_field: Option<BitField>,
}

/// Where a bit-field's bits are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitField {
    /// Bit offset from the start of the struct, counted as DWARF's `DW_AT_data_bit_offset` is:
    /// on a little-endian target, from the least significant bit of the first byte.
    pub bit_offset: u64,
    pub bit_size: u64,
}

/// A Rust enum's variants (DWARF's `DW_TAG_variant_part`).
#[derive(Debug, Clone, PartialEq)]
pub struct Variants {
    /// The field whose value says which variant a value holds; `None` for an enum with a single
    /// variant.
    pub discriminant: Option<Member>,
    /// The discriminant's size in bytes.
    pub discriminant_size: Option<u64>,
    pub variants: Vec<Variant>,
}

/// One variant of a Rust enum.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// The discriminant value that selects this variant, as the discriminant's bits; `None` for
    /// the variant taken when no other matches (the one holding data in a niche-filled enum).
    pub discr_value: Option<u64>,
    /// The variant as a member: named as the variant, typed as a struct of its fields.
    pub member: Member,
}

impl Variants {
    /// The variant a value whose discriminant field holds `discriminant` (read as an unsigned
    /// integer of `discriminant_size` bytes) is.
    pub fn select(&self, discriminant: u64) -> Option<&Variant> {
        let mask = match self.discriminant_size {
            Some(size @ 1..=7) => (1u64 << (size * 8)) - 1,
            _ => u64::MAX,
        };
        let matches = |v: &&Variant| {
            v.discr_value
                .is_some_and(|d| (d ^ discriminant) & mask == 0)
        };
        self.variants
            .iter()
            .find(matches)
            .or_else(|| self.variants.iter().find(|v| v.discr_value.is_none()))
    }
}

/// An enumeration.
#[derive(Debug, Clone, PartialEq)]
pub struct Enum {
    /// The integer type the values are stored as, when the producer says.
    pub underlying: Option<TypeId>,
    pub enumerators: Vec<Enumerator>,
}

/// One named value of an enumeration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enumerator {
    pub name: String,
    pub value: i128,
}

/// An array, possibly of several dimensions.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub element: Option<TypeId>,
    /// Element count of each dimension, outermost first; `None` when unknown (a flexible array
    /// member `x[]`, or a bound computed at run time).
    pub dims: Vec<Option<u64>>,
}

impl Type {
    /// The types this one refers to directly: member, element, target and underlying types.
    pub fn references(&self) -> Vec<TypeId> {
        match &self.kind {
            TypeKind::Struct(members) | TypeKind::Union(members) => {
                members.iter().filter_map(|m| m.ty).collect()
            }
            TypeKind::Variants(variants) => variants
                .discriminant
                .iter()
                .chain(variants.variants.iter().map(|v| &v.member))
                .filter_map(|m| m.ty)
                .collect(),
            TypeKind::Pointer(target)
            | TypeKind::Typedef(target)
            | TypeKind::Qualified(_, target) => target.iter().copied().collect(),
            TypeKind::Array(array) => array.element.iter().copied().collect(),
            TypeKind::Enum(e) => e.underlying.iter().copied().collect(),
            TypeKind::Base(_) | TypeKind::Void | TypeKind::Function | TypeKind::Other(_) => {
                Vec::new()
            }
        }
    }

    /// For a struct or union: the member called `name`.
    pub fn member(&self, name: &str) -> Option<&Member> {
        match &self.kind {
            TypeKind::Struct(members) | TypeKind::Union(members) => {
                members.iter().find(|m| m.name.as_deref() == Some(name))
            }
            _ => None,
        }
    }
}
