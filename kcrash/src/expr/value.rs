//! A value read out of the dump as a tree ([`Node`]), for [`super::text`] to write as gdb's
//! `print` does and [`super::json`] as JSON.
//!
//! Reading and writing are apart so that the text and `--json` say the same thing. Reading stops
//! where gdb's does: at most [`Options::limit`] elements of an array or characters of a string,
//! runs of more than [`Options::repeats`] equal elements folded into one. What cannot be read
//! becomes a node that says so; the rest of the value is still read.

use symbols::{Type, TypeKind};

use crate::error::{Error, Result};

use super::eval::{Evaluator, IntStyle, IntTy, Place, Shape, Ty, Value};

/// gdb's `print` settings that kcrash honours.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// A format letter (`x d u o t c a z`), as in `p/x`.
    pub format: Option<char>,
    /// Members one per line, as gdb's `set print pretty on`.
    pub pretty: bool,
    /// gdb's `print elements`: elements of an array or characters of a string shown.
    pub limit: u64,
    /// gdb's `print repeats`: runs longer than this are shown as `<repeats N times>`.
    pub repeats: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            format: None,
            pretty: false,
            limit: 200,
            repeats: 10,
        }
    }
}

/// The format letters `p/FMT` takes.
pub const FORMATS: &str = "xduotcaz";

/// One value as read, with where it is and its type.
#[derive(Debug, Clone)]
pub struct Node {
    pub addr: Option<u64>,
    pub ty: Ty,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Int {
        bits: u64,
        int: IntTy,
        style: IntStyle,
    },
    Float {
        bits: u64,
        size: u8,
    },
    /// An enum's value and how gdb names it (`DBG_FS`, `(A | B)`); `None` when no name fits.
    Enum {
        bits: u64,
        int: IntTy,
        name: Option<String>,
    },
    Pointer {
        addr: u64,
        /// `<symbol+offset>` of the address.
        symbol: Option<String>,
        /// For a pointer to characters: the string there.
        string: Option<CString>,
    },
    /// A function (what `*fp` is): its address.
    Function {
        addr: u64,
        symbol: Option<String>,
    },
    Fields(Vec<Field>),
    /// A Rust enum's value: the variant and its fields.
    Variant {
        name: String,
        fields: Vec<Field>,
    },
    /// An array: runs of equal elements, each with its length; `more` when cut at the limit.
    Elements {
        runs: Vec<(Node, u64)>,
        more: bool,
    },
    /// An array of characters, as read; `more` when the array goes on past what was read.
    Chars {
        bytes: Vec<u8>,
        more: bool,
    },
    /// A Rust `&str`: its bytes, all of them meant (no NUL ends it); `more` when cut at the limit.
    Str {
        bytes: Vec<u8>,
        more: bool,
    },
    /// Could not be read: the first address that failed.
    Unreadable(u64),
    /// Cannot be shown, and why (`<optimized out>`-like).
    Opaque(String),
}

#[derive(Debug, Clone)]
pub struct Field {
    /// `None` for an anonymous struct or union member.
    pub name: Option<String>,
    pub node: Node,
}

/// A string a character pointer points to.
#[derive(Debug, Clone)]
pub enum CString {
    Text { bytes: Vec<u8>, more: bool },
    Unreadable(u64),
}

/// The most of a character array read, as gdb's default `max-value-size`.
const MAX_CHAR_ARRAY: u64 = 65536;

/// Nesting deeper than this is a type cycle in broken DWARF, not a real value.
const MAX_NESTING: usize = 64;

/// Most parts one value is read into. Nesting alone does not bound a value: a type that holds
/// an array of itself (broken DWARF) doubles at each of its 64 levels.
const MAX_PARTS: u64 = 200_000;

/// Most equal elements one run of an array folds: counting a run reads every element, and an
/// array's length comes from the DWARF.
const MAX_RUN: u64 = 1 << 16;

/// Reads values into nodes.
pub struct Reader<'e, 'a> {
    ev: &'e Evaluator<'a>,
    opts: Options,
    /// Parts read so far, against [`MAX_PARTS`].
    parts: std::cell::Cell<u64>,
}

impl<'e, 'a> Reader<'e, 'a> {
    pub fn new(ev: &'e Evaluator<'a>, opts: Options) -> Self {
        Reader {
            ev,
            opts,
            parts: std::cell::Cell::new(0),
        }
    }

    /// Reads `v`. Fails only when nothing of it can be read; parts that cannot be read are
    /// [`Kind::Unreadable`] nodes.
    pub fn read(&self, v: &Value) -> Result<Node> {
        if let Place::Memory(addr) = v.place {
            match self.ev.shape(&v.ty)? {
                Shape::NoDebug => {
                    return Err(Error::Usage(
                        "the symbol has no debug info: cast it to its declared type".into(),
                    ))
                }
                Shape::Function => {}
                _ => {
                    let mut probe = [0u8; 1];
                    if let Err(u) = self.ev.mem.read(addr, &mut probe) {
                        return Err(Error::cannot_access(u));
                    }
                }
            }
        }
        Ok(self.node(&v.ty, v.place, 0))
    }

    /// The value of type `ty` at `place`; what cannot be made sense of (a malformed type) is said
    /// in its place, as unreadable memory is, and the rest of the value still reads.
    fn node(&self, ty: &Ty, place: Place, depth: usize) -> Node {
        self.node_or_error(ty, place, depth)
            .unwrap_or_else(|e| Node {
                addr: match place {
                    Place::Memory(a) => Some(a),
                    _ => None,
                },
                ty: ty.clone(),
                kind: Kind::Opaque(format!("<error: {e}>")),
            })
    }

    fn node_or_error(&self, ty: &Ty, place: Place, depth: usize) -> Result<Node> {
        let addr = match place {
            Place::Memory(a) => Some(a),
            _ => None,
        };
        let node = |kind| {
            Ok(Node {
                addr,
                ty: ty.clone(),
                kind,
            })
        };
        if depth > MAX_NESTING {
            return node(Kind::Opaque("<nested too deeply>".into()));
        }
        self.parts.set(self.parts.get() + 1);
        if self.parts.get() > MAX_PARTS {
            return node(Kind::Opaque(format!(
                "<elided: the value has more than {MAX_PARTS} parts>"
            )));
        }
        let value = Value {
            ty: ty.clone(),
            place,
        };
        let scalar = || match self.ev.scalar(&value) {
            Ok((bits, _)) => Ok(bits),
            Err(_) => Err(Kind::Unreadable(first_addr(place))),
        };
        match self.ev.shape(ty)? {
            Shape::Int(int, style) => node(match scalar() {
                Ok(bits) => Kind::Int { bits, int, style },
                Err(k) => k,
            }),
            Shape::Float(size) => node(match self.ev.bits(&value, u64::from(size)) {
                Ok(bits) => Kind::Float { bits, size },
                Err(_) => Kind::Unreadable(first_addr(place)),
            }),
            Shape::Enum(t, int) => node(match scalar() {
                Ok(bits) => Kind::Enum {
                    bits,
                    int,
                    name: enum_name(&t, bits, int),
                },
                Err(k) => k,
            }),
            Shape::Pointer(target) => node(match scalar() {
                Ok(addr) => self.pointer(&target, addr)?,
                Err(k) => k,
            }),
            Shape::Function => {
                let a = first_addr(place);
                node(Kind::Function {
                    addr: a,
                    symbol: self.symbol(a),
                })
            }
            Shape::Struct(t) if newtype(&t).is_some() => match (newtype(&t), place) {
                // A Rust newtype (`DbgIntensity(AtomicU32)`) is shown as what it holds.
                (Some(inner), Place::Memory(a)) => {
                    Ok(self.node(&inner, Place::Memory(a), depth + 1))
                }
                _ => node(Kind::Opaque("<not in memory>".into())),
            },
            Shape::Struct(t) if self.opts.format.is_none() && rust_string(&t).is_some() => {
                match (rust_string(&t), place) {
                    (Some(kind), Place::Memory(a)) => node(self.rust_str(kind, a)),
                    _ => node(Kind::Opaque("<not in memory>".into())),
                }
            }
            Shape::Struct(t) | Shape::Union(t) => match place {
                Place::Memory(a) => node(Kind::Fields(self.fields(&t, a, depth)?)),
                _ => node(Kind::Opaque("<not in memory>".into())),
            },
            Shape::Variants(t) => match place {
                Place::Memory(a) => node(self.variant(&t, a, depth)?),
                _ => node(Kind::Opaque("<not in memory>".into())),
            },
            Shape::Array(elem, dims) => match place {
                Place::Memory(a) => node(self.array(&elem, &dims, a, depth)?),
                _ => node(Kind::Opaque("<not in memory>".into())),
            },
            Shape::Void => node(Kind::Opaque("void".into())),
            Shape::NoDebug => node(Kind::Opaque("<data variable, no debug info>".into())),
            Shape::Other(name) => node(Kind::Opaque(format!("<{name}>"))),
        }
    }

    fn symbol(&self, addr: u64) -> Option<String> {
        symbol_at(self.ev, addr)
    }

    /// A Rust `&str` (its characters) or `&CStr` (its address and characters), read from its
    /// data pointer for its length, at most the limit.
    fn rust_str(&self, kind: RustString, addr: u64) -> Kind {
        let (ptr, len) = match (
            self.ev.mem.read_u64(addr),
            self.ev.mem.read_u64(addr.wrapping_add(8)),
        ) {
            (Ok(p), Ok(l)) => (p, l),
            (Err(u), _) | (_, Err(u)) => return Kind::Unreadable(u.addr),
        };
        let n = len.min(self.opts.limit);
        let mut bytes = vec![0u8; n as usize];
        let text = match self.ev.mem.read(ptr, &mut bytes) {
            Ok(()) => {
                if kind == RustString::CStr && n == len {
                    // The length counts the NUL.
                    bytes.pop();
                }
                CString::Text {
                    bytes,
                    more: len > n,
                }
            }
            Err(u) => CString::Unreadable(u.addr),
        };
        match (kind, text) {
            (RustString::Str, CString::Text { bytes, more }) => Kind::Str { bytes, more },
            (RustString::Str, CString::Unreadable(a)) => Kind::Unreadable(a),
            (RustString::CStr, text) => Kind::Pointer {
                addr: ptr,
                symbol: None,
                string: Some(text),
            },
        }
    }

    fn pointer(&self, target: &Ty, addr: u64) -> Result<Kind> {
        let chars = match self.ev.shape(target)? {
            Shape::Int(IntTy { size: 1, .. }, IntStyle::Char) => true,
            // Rust spells C's `char *` `*const i8` (`c_char`): shown as a string too. A `u8`
            // pointer is a byte buffer (a Vec's, often dangling), not a string.
            Shape::Int(
                IntTy {
                    size: 1,
                    signed: true,
                },
                IntStyle::Plain,
            ) => self.ev.is_rust(target),
            _ => false,
        };
        if self.opts.format.is_some_and(|f| f != 'a') {
            return Ok(Kind::Pointer {
                addr,
                symbol: None,
                string: None,
            });
        }
        if chars && addr != 0 && self.opts.format.is_none() {
            let mut bytes = Vec::new();
            let limit = usize::try_from(self.opts.limit).unwrap_or(usize::MAX);
            let string = match self.ev.mem.read_cstring(addr, limit, &mut bytes) {
                Ok(()) => {
                    // A string as long as the limit may go on: gdb reads one more to know.
                    let more = bytes.len() == limit
                        && self
                            .ev
                            .mem
                            .read_uint(addr.wrapping_add(limit as u64), 1)
                            .is_ok_and(|b| b != 0);
                    CString::Text { bytes, more }
                }
                Err(u) => CString::Unreadable(u.addr),
            };
            return Ok(Kind::Pointer {
                addr,
                symbol: self.symbol(addr),
                string: Some(string),
            });
        }
        Ok(Kind::Pointer {
            addr,
            symbol: self.symbol(addr),
            string: None,
        })
    }

    fn fields(&self, t: &Type, addr: u64, depth: usize) -> Result<Vec<Field>> {
        let (TypeKind::Struct(members) | TypeKind::Union(members)) = &t.kind else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(members.len());
        for m in members {
            let ty = m.ty.map_or(Ty::Void, Ty::Dwarf);
            let place = match m.bit_field {
                Some(bf) => Place::Bits {
                    addr,
                    bit_offset: bf.bit_offset,
                    bit_size: bf.bit_size,
                },
                None => Place::Memory(addr.wrapping_add(m.offset)),
            };
            out.push(Field {
                name: m.name.clone(),
                node: self.node(&ty, place, depth + 1),
            });
        }
        Ok(out)
    }

    /// A Rust enum: the variant its discriminant selects, with that variant's fields.
    fn variant(&self, t: &Type, addr: u64, depth: usize) -> Result<Kind> {
        let TypeKind::Variants(vs) = &t.kind else {
            return Ok(Kind::Opaque("<not an enum>".into()));
        };
        let discr = match &vs.discriminant {
            Some(d) => {
                let size = vs.discriminant_size.unwrap_or(8);
                let at = addr.wrapping_add(d.offset);
                match self.ev.mem.read_uint(at, size) {
                    Ok(v) => v,
                    Err(u) => return Ok(Kind::Unreadable(u.addr)),
                }
            }
            None => 0,
        };
        let Some(v) = vs.select(discr) else {
            return Ok(Kind::Opaque(format!("<invalid discriminant {discr:#x}>")));
        };
        let name = v.member.name.clone().unwrap_or_default();
        let fields = match v.member.ty {
            Some(id) => {
                let inner = self.ev.image.type_(self.ev.image.value_type(id)?)?;
                self.fields(&inner, addr.wrapping_add(v.member.offset), depth)?
            }
            None => Vec::new(),
        };
        Ok(Kind::Variant { name, fields })
    }

    fn array(&self, elem: &Ty, dims: &[Option<u64>], addr: u64, depth: usize) -> Result<Kind> {
        let Some(len) = dims.first().copied().flatten() else {
            // A flexible array member (`int data[]`) has no length to print by: gdb shows where
            // it starts, as a pointer to its first element (with the string, for characters).
            let first = match dims.get(1..) {
                Some(rest) if !rest.is_empty() => Ty::Array(Box::new(elem.clone()), rest.to_vec()),
                _ => elem.clone(),
            };
            return self.pointer(&first, addr);
        };
        let ty = match dims.get(1..) {
            Some(rest) if !rest.is_empty() => Ty::Array(Box::new(elem.clone()), rest.to_vec()),
            _ => elem.clone(),
        };
        let size = self.ev.size_of(&ty)?.unwrap_or(0);
        let is_chars = dims.len() == 1
            && self.opts.format.is_none()
            && matches!(
                self.ev.shape(&ty)?,
                Shape::Int(IntTy { size: 1, .. }, IntStyle::Char)
            );
        if is_chars {
            // Read whole (as gdb does, up to its max-value-size): the writer's limit counts runs.
            let n = len.min(MAX_CHAR_ARRAY);
            let mut bytes = vec![0u8; n as usize];
            if let Err(u) = self.ev.mem.read(addr, &mut bytes) {
                return Ok(Kind::Unreadable(u.addr));
            }
            return Ok(Kind::Chars {
                bytes,
                more: len > n,
            });
        }
        let mut runs = Vec::new();
        let mut printed = 0;
        let mut i = 0;
        // Element bytes, compared to fold runs as gdb does; big elements are never folded.
        let raw = |i: u64| -> Option<Vec<u8>> {
            if size == 0 || size > 4096 {
                return None;
            }
            let mut b = vec![0u8; size as usize];
            self.ev
                .mem
                .read(addr.wrapping_add(i.wrapping_mul(size)), &mut b)
                .ok()?;
            Some(b)
        };
        while i < len && printed < self.opts.limit {
            let at = addr.wrapping_add(i.wrapping_mul(size));
            let this = raw(i);
            let mut reps = 1;
            if this.is_some() {
                while i + reps < len && reps < MAX_RUN && raw(i + reps) == this {
                    reps += 1;
                }
            }
            let node = self.node(&ty, Place::Memory(at), depth + 1);
            if reps > self.opts.repeats {
                printed += self.opts.repeats;
                runs.push((node, reps));
                i += reps;
            } else {
                printed += 1;
                runs.push((node, 1));
                i += 1;
            }
        }
        Ok(Kind::Elements {
            runs,
            more: i < len,
        })
    }
}

/// `<symbol+offset>` for an address, the symbol demangled as gdb's C printer shows it, control
/// characters escaped (the symbol table is the image's, as untrusted as a dump).
pub fn symbol_at(ev: &Evaluator<'_>, addr: u64) -> Option<String> {
    let (sym, off) = ev.image.symbolize(addr)?;
    let name = crate::escape::escaped(sym.demangled().as_bytes());
    Some(if off == 0 {
        name
    } else {
        format!("{name}+{off}")
    })
}

/// Rust's string references, fat pointers of a data pointer and a length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RustString {
    Str,
    CStr,
}

fn rust_string(t: &Type) -> Option<RustString> {
    let TypeKind::Struct(members) = &t.kind else {
        return None;
    };
    let names: Vec<Option<&str>> = members.iter().map(|m| m.name.as_deref()).collect();
    if !t.rust || names != [Some("data_ptr"), Some("length")] {
        return None;
    }
    match t.name.as_deref()? {
        "&str" | "&mut str" => Some(RustString::Str),
        n if n.ends_with("::CStr") => Some(RustString::CStr),
        _ => None,
    }
}

/// For a Rust tuple struct of one field at offset 0: that field's type.
fn newtype(t: &Type) -> Option<Ty> {
    let TypeKind::Struct(members) = &t.kind else {
        return None;
    };
    match members.as_slice() {
        [m] if t.rust
            && m.name.as_deref() == Some("__0")
            && m.offset == 0
            && m.bit_field.is_none() =>
        {
            m.ty.map(Ty::Dwarf)
        }
        _ => None,
    }
}

fn first_addr(place: Place) -> u64 {
    match place {
        Place::Memory(a) | Place::Immediate(a) => a,
        Place::Bits {
            addr, bit_offset, ..
        } => addr.wrapping_add(bit_offset / 8),
    }
}

/// How gdb names an enum value: its enumerator, or for a flag enum (every enumerator a disjoint
/// set of bits) the flags it is made of, `(A | B | unknown: 0x8)`.
fn enum_name(t: &Type, bits: u64, int: IntTy) -> Option<String> {
    let TypeKind::Enum(e) = &t.kind else {
        return None;
    };
    let value = if int.signed {
        i128::from(bits as i64)
    } else {
        i128::from(bits)
    };
    if let Some(en) = e.enumerators.iter().find(|en| en.value == value) {
        return Some(en.name.clone());
    }
    let mut seen = 0u64;
    let flag_enum = e.enumerators.iter().all(|en| {
        let Ok(v) = u64::try_from(en.value) else {
            return false;
        };
        let disjoint = v & seen == 0;
        seen |= v;
        disjoint
    });
    if !flag_enum || value < 0 || e.enumerators.is_empty() {
        return None;
    }
    let mut rest = bits;
    let mut parts = Vec::new();
    for en in &e.enumerators {
        let v = en.value as u64;
        if v != 0 && rest & v == v {
            parts.push(en.name.clone());
            rest &= !v;
        }
    }
    if parts.is_empty() {
        return None;
    }
    if rest != 0 {
        parts.push(format!("unknown: {rest:#x}"));
    }
    Some(format!("({})", parts.join(" | ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use symbols::{Enum, Enumerator};

    fn enumeration(values: &[(&str, i128)]) -> Type {
        Type {
            name: Some("e".into()),
            path: None,
            byte_size: Some(4),
            kind: TypeKind::Enum(Enum {
                underlying: None,
                enumerators: values
                    .iter()
                    .map(|(n, v)| Enumerator {
                        name: (*n).into(),
                        value: *v,
                    })
                    .collect(),
            }),
            transparent: None,
            rust: false,
        }
    }

    const U32: IntTy = IntTy {
        size: 4,
        signed: false,
    };

    #[test]
    fn enum_values_are_named_as_gdb_names_them() {
        let plain = enumeration(&[("A", 0), ("B", 1), ("C", 2), ("D", 3)]);
        assert_eq!(enum_name(&plain, 2, U32).as_deref(), Some("C"));
        // Not a flag enum (1, 2, 3 share bits): an unknown value is a number.
        assert_eq!(enum_name(&plain, 7, U32), None);
        let flags = enumeration(&[("NONE", 0), ("R", 1), ("W", 2), ("X", 4)]);
        assert_eq!(enum_name(&flags, 0, U32).as_deref(), Some("NONE"));
        assert_eq!(enum_name(&flags, 3, U32).as_deref(), Some("(R | W)"));
        assert_eq!(
            enum_name(&flags, 0x15, U32).as_deref(),
            Some("(R | X | unknown: 0x10)")
        );
        assert_eq!(enum_name(&flags, 0x10, U32), None);
        let signed = enumeration(&[("NEG", -1), ("ZERO", 0)]);
        let i32_ = IntTy {
            size: 4,
            signed: true,
        };
        assert_eq!(enum_name(&signed, u64::MAX, i32_).as_deref(), Some("NEG"));
    }
}
