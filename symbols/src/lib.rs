//! Global variables, types, ELF symbols and source lines of an ELF image.
//!
//! ```no_run
//! let image = symbols::Image::open("vmlinux")?;
//! let klogs = image.variable("KLogs")?.expect("no KLogs in the image");
//! let ty = klogs.ty.expect("KLogs has a type");
//! println!("{} at {:#x?}, {} bytes", image.type_name(ty)?, klogs.address, image.size_of(ty)?.unwrap_or(0));
//! # Ok::<(), symbols::Error>(())
//! ```
//!
//! The image is memory-mapped; nothing of its DWARF is parsed until a question needs it, and
//! then only the DIEs that answer it (through a name index built on first use).

mod aranges;
mod bytes;
mod cfi;
mod debug_file;
mod debug_names;
mod dwarf;
mod elf;
mod error;
mod image;
mod index;
mod index_cache;
mod lines;
mod name_key;
mod names;
mod namespaces;
mod placement;
mod plt;
mod relocate;
mod sections;
mod set;
mod skim;
mod strings;
mod symtab;
mod types;
mod units;

pub use cfi::{CfaRule, FrameRule, RegisterRule};
pub use elf::{build_id_in_head, LoadSegment};
pub use error::{Error, Result};
pub use image::{default_index_cache, Image, Options, Search, Variable};
pub use index_cache::{check_index_cache, reseal_index_cache};
pub use lines::Frame;
pub use placement::SectionAddresses;
pub use set::ImageSet;
pub use symtab::{Symbol, SymbolKind, UnloadedSymbol};
pub use types::{
    Array, BitField, Encoding, Enum, Enumerator, Member, Qualifier, Type, TypeId, TypeKind,
    Variant, Variants,
};
