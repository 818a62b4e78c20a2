//! Evaluating a parsed expression: names through the image's DWARF (or its ELF symbols), member
//! and element addresses through the type model, and memory through the dump.
//!
//! A value is kept where it lives ([`Place::Memory`]) and read only when an operator needs its
//! bits, so `&KLogs[3]` reads nothing and printing a struct reads it member by member.

use std::sync::Arc;

use symbols::{Encoding, Image, Member, Search, SymbolKind, Type, TypeId, TypeKind};

use super::parse::{BinOp, Expr, TypeName, UnOp};
use crate::error::{Error, Result};
use crate::memory::Memory;

/// Pointers are 8 bytes: every target kcrash reads is 64-bit.
pub const POINTER_SIZE: u64 = 8;

/// A type: one of the image's, or one the expression made (a pointer from `&`, an integer from
/// arithmetic, a sub-array of a multi-dimensional array).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ty {
    Dwarf(TypeId),
    Void,
    Pointer(Box<Ty>),
    /// Elements of type `.0`, with these dimensions, outermost first.
    Array(Box<Ty>, Vec<Option<u64>>),
    Int(IntTy),
    /// An ELF data symbol without DWARF: its address is known, its type is not.
    NoDebug,
    /// A function, known by its ELF symbol (the type model has no function signatures).
    Code,
}

/// An integer type of the expression language (literals, arithmetic, `sizeof`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntTy {
    pub size: u8,
    pub signed: bool,
}

impl IntTy {
    pub const INT: IntTy = IntTy {
        size: 4,
        signed: true,
    };
    pub const LONG: IntTy = IntTy {
        size: 8,
        signed: true,
    };
    pub const ULONG: IntTy = IntTy {
        size: 8,
        signed: false,
    };

    fn name(self) -> &'static str {
        match (self.size, self.signed) {
            (4, true) => "int",
            (4, false) => "unsigned int",
            (8, true) => "long",
            _ => "unsigned long",
        }
    }
}

/// Where a value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// In the dump at this address.
    Memory(u64),
    /// A bit-field: `bit_size` bits from `bit_offset` bits after `addr` (least significant
    /// first, little-endian).
    Bits {
        addr: u64,
        bit_offset: u64,
        bit_size: u64,
    },
    /// Computed, not in memory: the value's bits.
    Immediate(u64),
}

/// A typed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    pub ty: Ty,
    pub place: Place,
}

/// An expression that cannot be evaluated, in gdb's words where gdb has them.
fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::Usage(msg.into()))
}

/// What a type is, after typedefs, qualifiers and Rust's transparent wrappers.
#[derive(Debug, Clone)]
pub enum Shape {
    Int(IntTy, IntStyle),
    Float(u8),
    Pointer(Ty),
    Enum(Arc<Type>, IntTy),
    Struct(Arc<Type>),
    Union(Arc<Type>),
    Variants(Arc<Type>),
    Array(Ty, Vec<Option<u64>>),
    Function,
    Void,
    NoDebug,
    /// A type the model does not describe, by name.
    Other(String),
}

/// How an integer is shown besides its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntStyle {
    Plain,
    /// A C character: `83 'S'`.
    Char,
    Bool,
    /// A Unicode scalar (Rust `char`).
    Utf,
}

/// Resolves names and types in an image and reads values from memory.
pub struct Evaluator<'a> {
    pub image: &'a Image,
    pub mem: &'a dyn Memory,
    /// How far names are looked for: [`Search::Quick`] makes a name the image cannot find
    /// cheaply unknown (`NoSymbol`), so that another image can be tried before this one's
    /// full index is built.
    pub search: Search,
}

/// "Cannot access memory at address 0x…", gdb's words for a failed read.
pub fn cannot_access(addr: u64) -> String {
    Error::CannotAccess { addr, reason: None }.to_string()
}

impl<'a> Evaluator<'a> {
    pub fn new(image: &'a Image, mem: &'a dyn Memory) -> Evaluator<'a> {
        Evaluator {
            image,
            mem,
            search: Search::Full,
        }
    }

    /// The type `name` of the image, as far as `search` looks. A quick search that does not
    /// find it says so (`NoSymbol`) rather than fall back to a built-in type the full index
    /// might have overridden.
    fn named_type(&self, name: &str) -> Result<Option<symbols::TypeId>> {
        match (self.image.find_type(name, self.search)?, self.search) {
            (None, Search::Quick) => Err(Error::NoSymbol { name: name.into() }),
            (found, _) => Ok(found),
        }
    }

    /// The type `ty` is, seen through typedefs and wrappers.
    pub fn shape(&self, ty: &Ty) -> Result<Shape> {
        let id = match ty {
            Ty::Dwarf(id) => self.image.value_type(*id)?,
            Ty::Void => return Ok(Shape::Void),
            Ty::Pointer(target) => return Ok(Shape::Pointer((**target).clone())),
            Ty::Array(elem, dims) => return Ok(Shape::Array((**elem).clone(), dims.clone())),
            Ty::Int(int) => return Ok(Shape::Int(*int, IntStyle::Plain)),
            Ty::NoDebug => return Ok(Shape::NoDebug),
            Ty::Code => return Ok(Shape::Function),
        };
        let t = self.image.type_(id)?;
        let size = t.byte_size.unwrap_or(0);
        let int = |signed| IntTy {
            size: size.clamp(1, 8) as u8,
            signed,
        };
        Ok(match &t.kind {
            TypeKind::Base(enc) => match enc {
                Encoding::Signed => Shape::Int(int(true), IntStyle::Plain),
                Encoding::Unsigned => Shape::Int(int(false), IntStyle::Plain),
                Encoding::SignedChar if size == 1 => Shape::Int(int(true), IntStyle::Char),
                Encoding::UnsignedChar if size == 1 => Shape::Int(int(false), IntStyle::Char),
                Encoding::SignedChar => Shape::Int(int(true), IntStyle::Plain),
                Encoding::UnsignedChar => Shape::Int(int(false), IntStyle::Plain),
                Encoding::Bool => Shape::Int(int(false), IntStyle::Bool),
                Encoding::Utf => Shape::Int(int(false), IntStyle::Utf),
                Encoding::Float if size == 4 || size == 8 => Shape::Float(size as u8),
                _ => Shape::Other(self.image.type_name(id)?),
            },
            TypeKind::Void => Shape::Void,
            TypeKind::Pointer(target) => Shape::Pointer(target.map_or(Ty::Void, Ty::Dwarf)),
            TypeKind::Struct(_) => Shape::Struct(t),
            TypeKind::Union(_) => Shape::Union(t),
            TypeKind::Variants(_) => Shape::Variants(t),
            TypeKind::Enum(e) => {
                let signed = e.enumerators.iter().any(|v| v.value < 0);
                Shape::Enum(t.clone(), int(signed))
            }
            TypeKind::Array(a) => {
                Shape::Array(a.element.map_or(Ty::Void, Ty::Dwarf), a.dims.clone())
            }
            TypeKind::Function => Shape::Function,
            TypeKind::Typedef(_) | TypeKind::Qualified(..) | TypeKind::Other(_) => {
                Shape::Other(self.image.type_name(id)?)
            }
        })
    }

    /// `ty` without the Rust wrappers that only hold a value (`AtomicU64`, `UnsafeCell<T>`),
    /// keeping its typedef names: what a value of it is named as.
    pub fn unwrapped(&self, ty: &Ty) -> Result<Ty> {
        let mut ty = ty.clone();
        for _ in 0..16 {
            let Ty::Dwarf(id) = ty else { break };
            match self.image.type_(id)?.transparent {
                Some(inner) => ty = Ty::Dwarf(inner),
                None => break,
            }
        }
        Ok(ty)
    }

    /// `sizeof`; `None` when the type has no size (void, functions, unknown bounds).
    pub fn size_of(&self, ty: &Ty) -> Result<Option<u64>> {
        Ok(match ty {
            Ty::Dwarf(id) => self.image.size_of(*id)?,
            Ty::Void => Some(1),
            Ty::Pointer(_) => Some(POINTER_SIZE),
            Ty::Int(int) => Some(u64::from(int.size)),
            Ty::Array(elem, dims) => {
                let mut n = self.size_of(elem)?;
                for d in dims {
                    n = match (n, d) {
                        (Some(n), Some(d)) => n.checked_mul(*d),
                        _ => None,
                    };
                }
                n
            }
            Ty::NoDebug | Ty::Code => None,
        })
    }

    /// Whether `ty` comes from a Rust unit, so is named in Rust's syntax.
    pub fn is_rust(&self, ty: &Ty) -> bool {
        match ty {
            Ty::Dwarf(id) => self.image.type_(*id).is_ok_and(|t| t.rust),
            Ty::Pointer(t) | Ty::Array(t, _) => self.is_rust(t),
            _ => false,
        }
    }

    /// The type's name as C (or Rust) writes it.
    pub fn type_name(&self, ty: &Ty) -> Result<String> {
        Ok(match ty {
            Ty::Dwarf(id) if self.is_rust(ty) => self.image.type_name(*id)?,
            Ty::Dwarf(id) => c_spelling(&self.image.type_name(*id)?),
            Ty::Void => "void".into(),
            Ty::Int(int) => int.name().into(),
            Ty::NoDebug => "<data variable, no debug info>".into(),
            Ty::Code => "function".into(),
            Ty::Array(elem, dims) => {
                let elem = self.type_name(elem)?;
                if self.is_rust(ty) {
                    dims.iter().rev().fold(elem, |inner, d| match d {
                        Some(n) => format!("[{inner}; {n}]"),
                        None => format!("[{inner}]"),
                    })
                } else {
                    let mut out = elem + " ";
                    for d in dims {
                        match d {
                            Some(n) => out.push_str(&format!("[{n}]")),
                            None => out.push_str("[]"),
                        }
                    }
                    out
                }
            }
            Ty::Pointer(target) => {
                let inner = self.type_name(target)?;
                if self.is_rust(target) {
                    format!("*mut {inner}")
                } else if let Some(at) = inner.find(" [") {
                    // A pointer to an array: `uint64_t (*)[12288]`.
                    format!("{} (*){}", &inner[..at], &inner[at + 1..])
                } else if inner.ends_with('*') {
                    format!("{inner}*")
                } else {
                    format!("{inner} *")
                }
            }
        })
    }

    /// The type named by `t`: one of the image's, with pointers put on it.
    pub fn resolve_type(&self, t: &TypeName) -> Result<Ty> {
        let base = match self.named_type(&t.base)? {
            Some(id) => Ty::Dwarf(id),
            None => match builtin(&t.base) {
                Some(b) => b,
                None => {
                    return Err(Error::NoSymbol {
                        name: t.base.clone(),
                    })
                }
            },
        };
        Ok((0..t.pointers).fold(base, |ty, _| Ty::Pointer(Box::new(ty))))
    }

    pub fn eval(&self, e: &Expr) -> Result<Value> {
        match e {
            Expr::Name(name) => self.variable(name),
            Expr::Int(n) => Ok(immediate(literal_type(*n), *n)),
            // A character is the image's `char` (C's, or Rust's), as gdb types it.
            Expr::Char(c) => Ok(match self.named_type("char")? {
                Some(id) => immediate_ty(Ty::Dwarf(id), *c),
                None => immediate(IntTy::INT, *c),
            }),
            Expr::Member(base, name) => self.member(self.eval(base)?, name),
            Expr::Arrow(base, name) => {
                let base = self.eval(base)?;
                let base = match self.shape(&base.ty)? {
                    Shape::Pointer(_) => self.deref(base)?,
                    _ => base,
                };
                self.member(base, name)
            }
            Expr::Index(base, index) => {
                let base = self.eval(base)?;
                let index = self.eval(index)?;
                self.index(base, index)
            }
            Expr::Unary(op, operand) => self.unary(*op, self.eval(operand)?),
            Expr::Binary(op, l, r) => self.binary(*op, self.eval(l)?, self.eval(r)?),
            Expr::Repeat(first, count) => self.repeat(self.eval(first)?, self.eval(count)?),
            Expr::Cast(t, operand) => self.cast(self.resolve_type(t)?, self.eval(operand)?),
            // `sizeof(x)` parses as a type; a variable `x` is meant when no type has that name.
            // A variable found cheaply is taken first: no C scope has a type and a variable of
            // one plain name, and the type's name might cost a large image its full index.
            Expr::SizeofType(t) if t.pointers == 0 && !t.base.contains(' ') => {
                match self.image.find_variable(&t.base, Search::Quick) {
                    Ok(Some(_)) => self.sizeof(&self.variable(&t.base)?.ty),
                    _ => self.sizeof_type(t),
                }
            }
            Expr::SizeofType(t) => self.sizeof_type(t),
            Expr::SizeofExpr(operand) => self.sizeof(&self.eval(operand)?.ty),
        }
    }

    /// `sizeof(T)` for a type name, or for a variable `T` when no type has that name.
    fn sizeof_type(&self, t: &TypeName) -> Result<Value> {
        match self.resolve_type(t) {
            Ok(ty) => self.sizeof(&ty),
            Err(e) if t.pointers > 0 || t.base.contains(' ') => Err(e),
            Err(e) => match self.variable(&t.base) {
                Ok(v) => self.sizeof(&v.ty),
                Err(_) => Err(e),
            },
        }
    }

    fn sizeof(&self, ty: &Ty) -> Result<Value> {
        match self.size_of(ty)? {
            // gdb types sizeof as int.
            Some(n) => Ok(immediate(literal_type(n), n)),
            None => err(format!("{} has no size", self.type_name(ty)?)),
        }
    }

    fn variable(&self, name: &str) -> Result<Value> {
        if let Some(var) = self.image.find_variable(name, self.search)? {
            // A declaration the linker defined (Linux's `jiffies`, an alias of `jiffies_64` in
            // the linker script) has its address in the ELF symbol table only, as gdb finds it.
            let Some(addr) = var
                .address
                .or_else(|| self.image.symbol(name).map(|s| s.address))
            else {
                return err(format!(
                    "\"{name}\" has no address in the dump (a declaration, a thread-local, or \
                     optimized out)"
                ));
            };
            let ty = var.ty.map_or(Ty::NoDebug, Ty::Dwarf);
            return Ok(Value {
                ty,
                place: Place::Memory(addr),
            });
        }
        match self.image.symbol(name) {
            Some(sym) => Ok(Value {
                ty: match sym.kind {
                    SymbolKind::Function => Ty::Code,
                    _ => Ty::NoDebug,
                },
                place: Place::Memory(sym.address),
            }),
            None => Err(Error::NoSymbol {
                name: name.to_owned(),
            }),
        }
    }

    /// The value's bits, zero-extended: a scalar read from where it is.
    pub fn bits(&self, v: &Value, size: u64) -> Result<u64> {
        match v.place {
            Place::Immediate(b) => Ok(b),
            Place::Memory(addr) => self.mem.read_uint(addr, size).map_err(Error::cannot_access),
            Place::Bits {
                addr,
                bit_offset,
                bit_size,
            } => {
                let first = addr.wrapping_add(bit_offset / 8);
                let shift = bit_offset % 8;
                let len = (shift + bit_size).div_ceil(8).min(16) as usize;
                let mut b = [0u8; 16];
                self.mem
                    .read(first, &mut b[..len])
                    .map_err(Error::cannot_access)?;
                let all = u128::from_le_bytes(b) >> shift;
                let mask = if bit_size >= 64 {
                    u64::MAX
                } else {
                    (1u64 << bit_size) - 1
                };
                Ok(all as u64 & mask)
            }
        }
    }

    /// An integer, pointer or enum as (bits, its integer type), sign-extended when signed; an
    /// array as the address of its first element.
    pub fn scalar(&self, v: &Value) -> Result<(u64, IntTy)> {
        let int = match self.shape(&v.ty)? {
            Shape::Int(int, _) | Shape::Enum(_, int) => int,
            Shape::Pointer(_) => IntTy::ULONG,
            Shape::Array(..) | Shape::Function => match v.place {
                Place::Memory(addr) => return Ok((addr, IntTy::ULONG)),
                _ => return err("Attempt to take address of value not located in memory."),
            },
            Shape::Float(_) => {
                return err("floating-point arithmetic is not supported: print the value alone")
            }
            _ => return err("Argument to arithmetic operation not a number or boolean."),
        };
        let size = u64::from(int.size);
        let bits = self.bits(v, size)?;
        let bit_size = match v.place {
            Place::Bits { bit_size, .. } => bit_size.min(64),
            _ => size * 8,
        };
        Ok((extend(bits, bit_size, int.signed), int))
    }

    fn deref(&self, v: Value) -> Result<Value> {
        match self.shape(&v.ty)? {
            Shape::Pointer(target) => {
                if matches!(self.shape(&target)?, Shape::Void) {
                    return err("Attempt to take contents of a non-pointer value.");
                }
                let (addr, _) = self.scalar(&v)?;
                Ok(Value {
                    ty: target,
                    place: Place::Memory(addr),
                })
            }
            Shape::Array(elem, dims) => self.element(v.place, elem, &dims, 0),
            // As in C, `*f` of a function is the function.
            Shape::Function => Ok(v),
            _ => err("Attempt to take contents of a non-pointer value."),
        }
    }

    /// Element `i` of an array at `place`.
    fn element(&self, place: Place, elem: Ty, dims: &[Option<u64>], i: u64) -> Result<Value> {
        let Place::Memory(addr) = place else {
            return err("the array is not in memory");
        };
        let ty = match dims.get(1..) {
            Some(rest) if !rest.is_empty() => Ty::Array(Box::new(elem), rest.to_vec()),
            _ => elem,
        };
        let size = self.size_of(&ty)?.unwrap_or(0);
        Ok(Value {
            place: Place::Memory(addr.wrapping_add(i.wrapping_mul(size))),
            ty,
        })
    }

    fn index(&self, base: Value, index: Value) -> Result<Value> {
        let (i, _) = self.scalar(&index)?;
        match self.shape(&base.ty)? {
            Shape::Array(elem, dims) => self.element(base.place, elem, &dims, i),
            Shape::Pointer(_) => {
                let p = self.binary(BinOp::Add, base, immediate(IntTy::LONG, i))?;
                self.deref(p)
            }
            _ => err("cannot subscript something of type `".to_owned()
                + &self.type_name(&base.ty)?
                + "'"),
        }
    }

    /// The member at `path` (`a`, `a.b.c`) of the struct or union `base`.
    pub fn member_path(&self, base: Value, path: &str) -> Result<Value> {
        path.split('.')
            .try_fold(base, |v, name| self.member(v, name))
    }

    fn member(&self, base: Value, name: &str) -> Result<Value> {
        let ty = match self.shape(&base.ty)? {
            Shape::Struct(t) | Shape::Union(t) => t,
            Shape::Pointer(_) => return self.member(self.deref(base)?, name),
            _ => {
                return err(format!(
                    "Attempt to extract a component of a value that is not a structure: {}",
                    self.type_name(&base.ty)?
                ))
            }
        };
        let Place::Memory(addr) = base.place else {
            return err("the structure is not in memory");
        };
        let Some((offset, m)) = self.find_member(&ty, name, 0)? else {
            return err(format!("There is no member named {name}."));
        };
        let ty = m.ty.map_or(Ty::Void, Ty::Dwarf);
        let place = match m.bit_field {
            Some(bf) => Place::Bits {
                addr: addr.wrapping_add(offset),
                bit_offset: bf.bit_offset,
                bit_size: bf.bit_size,
            },
            None => Place::Memory(addr.wrapping_add(offset).wrapping_add(m.offset)),
        };
        Ok(Value { ty, place })
    }

    /// The member `name` of a struct or union, looking inside its anonymous members as C11
    /// does: the offset of the anonymous member holding it, and the member.
    fn find_member(&self, ty: &Type, name: &str, depth: usize) -> Result<Option<(u64, Member)>> {
        if let Some(m) = ty.member(name) {
            return Ok(Some((0, m.clone())));
        }
        let (TypeKind::Struct(members) | TypeKind::Union(members)) = &ty.kind else {
            return Ok(None);
        };
        if depth > 8 {
            return Ok(None);
        }
        for m in members.iter().filter(|m| m.name.is_none()) {
            let Some(id) = m.ty else { continue };
            let inner = self.image.type_(self.image.value_type(id)?)?;
            if let Some((off, found)) = self.find_member(&inner, name, depth + 1)? {
                return Ok(Some((m.offset.wrapping_add(off), found)));
            }
        }
        Ok(None)
    }

    fn unary(&self, op: UnOp, v: Value) -> Result<Value> {
        match op {
            UnOp::Deref => self.deref(v),
            UnOp::AddrOf => match v.place {
                Place::Memory(addr) => Ok(Value {
                    ty: Ty::Pointer(Box::new(v.ty)),
                    place: Place::Immediate(addr),
                }),
                _ => err("Attempt to take address of value not located in memory."),
            },
            UnOp::Neg | UnOp::BitNot | UnOp::Not => {
                let (x, int) = self.scalar(&v)?;
                let int = promote(int);
                let r = match op {
                    UnOp::Neg => x.wrapping_neg(),
                    UnOp::BitNot => !x,
                    _ => return Ok(immediate(IntTy::INT, u64::from(x == 0))),
                };
                Ok(immediate(int, truncate(r, int)))
            }
        }
    }

    /// The pointee size a pointer or array steps by, or `None` for an integer.
    fn stride(&self, v: &Value) -> Result<Option<(Ty, u64)>> {
        let target = match self.shape(&v.ty)? {
            Shape::Pointer(t) => t,
            Shape::Array(elem, dims) => match dims.get(1..) {
                Some(rest) if !rest.is_empty() => Ty::Array(Box::new(elem), rest.to_vec()),
                _ => elem,
            },
            _ => return Ok(None),
        };
        // gdb steps a `void *` by one byte.
        let size = match self.shape(&target)? {
            Shape::Void => 1,
            _ => self.size_of(&target)?.unwrap_or(1).max(1),
        };
        Ok(Some((target, size)))
    }

    fn binary(&self, op: BinOp, l: Value, r: Value) -> Result<Value> {
        let (a, ai) = self.scalar(&l)?;
        let (b, bi) = self.scalar(&r)?;
        let (ls, rs) = (self.stride(&l)?, self.stride(&r)?);
        match (op, ls, rs) {
            (BinOp::Add, Some((t, size)), None) | (BinOp::Sub, Some((t, size)), None) => {
                let step = b.wrapping_mul(size);
                let addr = if op == BinOp::Add {
                    a.wrapping_add(step)
                } else {
                    a.wrapping_sub(step)
                };
                return Ok(immediate_ty(Ty::Pointer(Box::new(t)), addr));
            }
            (BinOp::Add, None, Some((t, size))) => {
                return Ok(immediate_ty(
                    Ty::Pointer(Box::new(t)),
                    b.wrapping_add(a.wrapping_mul(size)),
                ));
            }
            (BinOp::Sub, Some((_, ls)), Some((_, rs))) => {
                if ls != rs {
                    return err("First argument of `-' is a pointer and second argument is neither\nan integer nor a pointer of the same type.");
                }
                let diff = (a.wrapping_sub(b) as i64).wrapping_div(ls as i64);
                return Ok(immediate(IntTy::LONG, diff as u64));
            }
            _ => {}
        }
        let int = common(promote(ai), promote(bi));
        let signed = int.signed;
        let (sa, sb) = (a as i64, b as i64);
        let cmp = |x: bool| Ok(immediate(IntTy::INT, u64::from(x)));
        let r = match op {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::Div | BinOp::Rem if truncate(b, int) == 0 => return err("Division by zero"),
            BinOp::Div if signed => sa.wrapping_div(sb) as u64,
            BinOp::Div => truncate(a, int) / truncate(b, int),
            BinOp::Rem if signed => sa.wrapping_rem(sb) as u64,
            BinOp::Rem => truncate(a, int) % truncate(b, int),
            BinOp::Shl => a.wrapping_shl(b as u32),
            BinOp::Shr if signed => sa.wrapping_shr(b as u32) as u64,
            BinOp::Shr => truncate(a, int).wrapping_shr(b as u32),
            BinOp::BitAnd => a & b,
            BinOp::BitXor => a ^ b,
            BinOp::BitOr => a | b,
            BinOp::Eq => return cmp(a == b),
            BinOp::Ne => return cmp(a != b),
            BinOp::Lt if signed => return cmp(sa < sb),
            BinOp::Gt if signed => return cmp(sa > sb),
            BinOp::Le if signed => return cmp(sa <= sb),
            BinOp::Ge if signed => return cmp(sa >= sb),
            BinOp::Lt => return cmp(a < b),
            BinOp::Gt => return cmp(a > b),
            BinOp::Le => return cmp(a <= b),
            BinOp::Ge => return cmp(a >= b),
        };
        Ok(immediate(int, truncate(r, int)))
    }

    /// gdb's `first@count`: `count` objects like `first` from where it is, as an array.
    fn repeat(&self, first: Value, count: Value) -> Result<Value> {
        let (n, int) = self.scalar(&count)?;
        if n == 0 || (int.signed && (n as i64) < 0) {
            return err(format!("Invalid number {} of repetitions.", n as i64));
        }
        let Place::Memory(addr) = first.place else {
            return err("Only values in memory can be extended with '@'.");
        };
        Ok(Value {
            ty: Ty::Array(Box::new(first.ty), vec![Some(n)]),
            place: Place::Memory(addr),
        })
    }

    fn cast(&self, to: Ty, v: Value) -> Result<Value> {
        let target = self.shape(&to)?;
        let from = self.shape(&v.ty)?;
        let scalar_target = match &target {
            Shape::Int(int, _) | Shape::Enum(_, int) => Some(*int),
            Shape::Pointer(_) => Some(IntTy::ULONG),
            _ => None,
        };
        match (scalar_target, from, v.place) {
            // An ELF symbol without a type is read as the type it is cast to, as gdb does.
            (_, Shape::NoDebug, place) => Ok(Value { ty: to, place }),
            (Some(int), _, _) => {
                let (bits, _) = self.scalar(&v)?;
                Ok(immediate_ty(to, truncate(bits, int)))
            }
            (None, _, Place::Memory(addr)) => Ok(Value {
                ty: to,
                place: Place::Memory(addr),
            }),
            _ => err("Invalid cast."),
        }
    }
}

/// gcc names base types `long unsigned int`; gdb (and C programmers) write `unsigned long`.
pub fn c_spelling(name: &str) -> String {
    const SPELLINGS: &[(&str, &str)] = &[
        ("long long unsigned int", "unsigned long long"),
        ("long long int", "long long"),
        ("long unsigned int", "unsigned long"),
        ("long int", "long"),
        ("short unsigned int", "unsigned short"),
        ("short int", "short"),
    ];
    let mut out = name.to_owned();
    for (gcc, c) in SPELLINGS {
        if out.contains(gcc) {
            out = out.replace(gcc, c);
        }
    }
    out
}

/// C's base type names, for casts in an image that does not use them.
fn builtin(name: &str) -> Option<Ty> {
    let int = |size, signed| Some(Ty::Int(IntTy { size, signed }));
    match name {
        "void" => Some(Ty::Void),
        "int" | "signed int" | "signed" => int(4, true),
        "unsigned int" | "unsigned" => int(4, false),
        "long" | "long int" | "signed long" | "long long" | "long long int" => int(8, true),
        "unsigned long" | "unsigned long int" | "unsigned long long" | "unsigned long long int" => {
            int(8, false)
        }
        "short" | "short int" => int(2, true),
        "unsigned short" | "unsigned short int" => int(2, false),
        "u8" | "uint8_t" => int(1, false),
        "u16" | "uint16_t" => int(2, false),
        "u32" | "uint32_t" => int(4, false),
        "u64" | "uint64_t" | "usize" => int(8, false),
        "i8" | "int8_t" => int(1, true),
        "i16" | "int16_t" => int(2, true),
        "i32" | "int32_t" => int(4, true),
        "i64" | "int64_t" | "isize" => int(8, true),
        _ => None,
    }
}

/// C's type for an integer literal: `int` if it fits, else `long`, else `unsigned long`.
fn literal_type(n: u64) -> IntTy {
    if n <= i32::MAX as u64 {
        IntTy::INT
    } else if n <= i64::MAX as u64 {
        IntTy::LONG
    } else {
        IntTy::ULONG
    }
}

fn immediate(int: IntTy, bits: u64) -> Value {
    immediate_ty(Ty::Int(int), bits)
}

fn immediate_ty(ty: Ty, bits: u64) -> Value {
    Value {
        ty,
        place: Place::Immediate(bits),
    }
}

/// C's integer promotion: anything narrower than `int` becomes `int`.
fn promote(int: IntTy) -> IntTy {
    if int.size < 4 {
        IntTy::INT
    } else {
        int
    }
}

/// The usual arithmetic conversions of two promoted types.
fn common(a: IntTy, b: IntTy) -> IntTy {
    match a.size.cmp(&b.size) {
        std::cmp::Ordering::Greater => a,
        std::cmp::Ordering::Less => b,
        std::cmp::Ordering::Equal => IntTy {
            size: a.size,
            signed: a.signed && b.signed,
        },
    }
}

/// The low `int.size` bytes of `bits`, sign-extended to 64 bits when `int` is signed.
pub fn truncate(bits: u64, int: IntTy) -> u64 {
    extend(bits, u64::from(int.size) * 8, int.signed)
}

/// The low `width` bits of `bits`, sign-extended when `signed`.
pub fn extend(bits: u64, width: u64, signed: bool) -> u64 {
    if width == 0 || width >= 64 {
        return bits;
    }
    let low = bits & ((1u64 << width) - 1);
    if signed && low >> (width - 1) & 1 == 1 {
        low | !((1u64 << width) - 1)
    } else {
        low
    }
}
