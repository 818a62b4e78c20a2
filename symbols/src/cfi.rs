//! Call-frame information: where the function at an address keeps its caller's registers, from
//! the image's `.eh_frame` (found through `.eh_frame_hdr`'s sorted table when it is the usual one) or,
//! when that has no entry, the debug file's `.debug_frame`. Nothing is parsed until an address
//! is asked for, and then only the entry that covers it.

use gimli::{
    BaseAddresses, DebugFrame, EhFrame, EhFrameOffset, Reader as _, SectionId, UnwindContext,
    UnwindSection,
};

use crate::bytes::{reader, Reader};
use crate::elf::{ElfFile, Placed};
use crate::error::{Error, Result};
use crate::relocate::Relocations;
use crate::sections::Sections;

/// How to find the caller's registers at one address: the frame's canonical frame address
/// (CFA, the stack pointer before the call) and a rule per saved register, numbered as DWARF
/// numbers them for the architecture (x86_64: 0 rax … 7 rsp, 8–15 r8–r15, 16 the return
/// address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameRule {
    pub cfa: CfaRule,
    /// Registers the rule says something of; any other keeps its value (callee-saved) or is
    /// lost (caller-saved), as the architecture's convention has it.
    pub registers: Vec<(u16, RegisterRule)>,
    /// The register column that holds the return address.
    pub return_address: u16,
    /// The function is a signal trampoline: its caller's address is where the signal struck,
    /// not a return address one past a call.
    pub signal_frame: bool,
}

/// The CFA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CfaRule {
    RegisterOffset {
        register: u16,
        offset: i64,
    },
    /// Read from memory at register + offset (a signal frame's saved stack pointer).
    AtRegister {
        register: u16,
        offset: i64,
    },
    /// A DWARF expression more complex than one register plus an offset (a PLT entry's).
    Unsupported,
}

/// Where a register of the caller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterRule {
    /// Not recoverable: the outermost frame marks its return address so.
    Undefined,
    SameValue,
    /// Saved in memory at CFA + offset.
    AtCfa(i64),
    /// The value CFA + offset itself.
    ValCfa(i64),
    /// In another register of this frame.
    Register(u16),
    /// Saved in memory at the register's value + offset (a signal frame's saved context).
    AtRegister {
        register: u16,
        offset: i64,
    },
    /// The value register + offset itself.
    ValRegister {
        register: u16,
        offset: i64,
    },
    Constant(u64),
    /// A rule this reader does not evaluate: a general DWARF expression, or an
    /// architecture-defined one.
    Unsupported,
}

/// The rule at link-time `address` from `image`'s `.eh_frame` (when `eh_frame`), else from the
/// `.debug_frame` of its debug file (`debug`, opened only then); `None` when neither has an entry
/// for it.
pub(crate) fn rule_at<'a>(
    image: &ElfFile,
    eh_frame: bool,
    debug: impl FnOnce() -> Result<Option<&'a Sections>>,
    address: u64,
) -> Result<Option<FrameRule>> {
    let (path, file, endian) = (&image.path, &image.unwind, image.endian());
    let bases = file.bases();
    let error = |section: &'static str| {
        move |source| Error::CallFrames {
            path: path.to_owned(),
            section,
            address,
            source,
        }
    };
    if let Some(eh) = file.eh_frame.as_ref().filter(|_| eh_frame) {
        let mut eh_frame = EhFrame::from(reader(eh.bytes.clone(), endian, Relocations::default()));
        eh_frame.set_vendor(file.vendor());
        let fde = match file
            .eh_frame_hdr
            .as_ref()
            .and_then(|hdr| table_lookup(hdr, eh, address))
        {
            Some(offset) => eh_frame
                .fde_from_offset(&bases, EhFrameOffset(offset), EhFrame::cie_from_offset)
                .and_then(|fde| {
                    if fde.contains(address) {
                        Ok(fde)
                    } else {
                        Err(gimli::Error::NoUnwindInfoForAddress)
                    }
                }),
            // No usable table: the section searched entry by entry.
            None => eh_frame.fde_for_address(&bases, address, EhFrame::cie_from_offset),
        };
        match fde {
            Ok(fde) => return rule(&eh_frame, &bases, &fde, address).map_err(error(".eh_frame")),
            Err(gimli::Error::NoUnwindInfoForAddress) => {}
            Err(e) => return Err(error(".eh_frame")(e)),
        }
    }
    let Some(debug) = debug()? else {
        return Ok(None);
    };
    let section = debug.section(SectionId::DebugFrame)?;
    if section.is_empty() {
        return Ok(None);
    }
    let mut debug_frame = DebugFrame::from(section);
    debug_frame.set_address_size(8);
    debug_frame.set_vendor(file.vendor());
    let bases = BaseAddresses::default();
    match debug_frame.fde_for_address(&bases, address, DebugFrame::cie_from_offset) {
        Ok(fde) => rule(&debug_frame, &bases, &fde, address).map_err(error(".debug_frame")),
        Err(gimli::Error::NoUnwindInfoForAddress) => Ok(None),
        Err(e) => Err(error(".debug_frame")(e)),
    }
}

/// `.eh_frame_hdr`'s encodings as every linker writes them: `.eh_frame`'s address pc-relative,
/// the count as a u32, the table as pairs of 32-bit offsets from the header.
const HDR_ENCODINGS: [u8; 4] = [1, 0x1b, 0x03, 0x3b];

/// The offset in `.eh_frame` of the FDE `.eh_frame_hdr`'s sorted table gives for `address` (the
/// last one starting at or before it); `None` when the header is not the usual one or its table
/// does not fit it, and the section must be searched instead. Read here rather than by gimli,
/// whose lookup computes with a hostile header's count unchecked.
fn table_lookup(hdr: &Placed, eh_frame: &Placed, address: u64) -> Option<usize> {
    let bytes: &[u8] = &hdr.bytes;
    if bytes.get(..4)? != HDR_ENCODINGS {
        return None;
    }
    let s32 = |at: usize| -> Option<i64> {
        Some(i64::from(i32::from_le_bytes(
            bytes.get(at..at + 4)?.try_into().ok()?,
        )))
    };
    let eh_frame_at = hdr.address.wrapping_add(4).wrapping_add_signed(s32(4)?);
    if eh_frame_at != eh_frame.address {
        return None;
    }
    let count = u32::from_le_bytes(bytes.get(8..12)?.try_into().ok()?) as usize;
    if count.checked_mul(8)?.checked_add(12)? > bytes.len() {
        return None;
    }
    let entry = |i: usize| -> Option<(u64, u64)> {
        let at = 12 + i * 8;
        Some((
            hdr.address.wrapping_add_signed(s32(at)?),
            hdr.address.wrapping_add_signed(s32(at + 4)?),
        ))
    };
    let (mut low, mut high) = (0, count);
    while low < high {
        let mid = low + (high - low) / 2;
        if entry(mid)?.0 <= address {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    let (_, fde) = entry(low.checked_sub(1)?)?;
    usize::try_from(fde.checked_sub(eh_frame.address)?).ok()
}

/// Runs `fde`'s instructions up to `address` and reads the row off.
fn rule<S: UnwindSection<Reader>>(
    section: &S,
    bases: &BaseAddresses,
    fde: &gimli::FrameDescriptionEntry<Reader>,
    address: u64,
) -> gimli::Result<Option<FrameRule>> {
    let mut context = Box::new(UnwindContext::new());
    let row = match fde.unwind_info_for_address(section, bases, &mut context, address) {
        Ok(row) => row,
        Err(gimli::Error::NoUnwindInfoForAddress) => return Ok(None),
        Err(e) => return Err(e),
    };
    let cfa = match row.cfa() {
        gimli::CfaRule::RegisterAndOffset { register, offset } => CfaRule::RegisterOffset {
            register: register.0,
            offset: *offset,
        },
        gimli::CfaRule::Expression(e) => match register_plus(&e.get(section)?) {
            Some((register, offset, false)) => CfaRule::RegisterOffset { register, offset },
            Some((register, offset, true)) => CfaRule::AtRegister { register, offset },
            None => CfaRule::Unsupported,
        },
    };
    let mut registers = Vec::new();
    for (register, r) in row.registers() {
        let r = match r {
            gimli::RegisterRule::Undefined => RegisterRule::Undefined,
            gimli::RegisterRule::SameValue => RegisterRule::SameValue,
            gimli::RegisterRule::Offset(o) => RegisterRule::AtCfa(*o),
            gimli::RegisterRule::ValOffset(o) => RegisterRule::ValCfa(*o),
            gimli::RegisterRule::Register(from) => RegisterRule::Register(from.0),
            gimli::RegisterRule::Expression(e) => match register_plus(&e.get(section)?) {
                Some((register, offset, false)) => RegisterRule::AtRegister { register, offset },
                _ => RegisterRule::Unsupported,
            },
            gimli::RegisterRule::ValExpression(e) => match register_plus(&e.get(section)?) {
                Some((register, offset, false)) => RegisterRule::ValRegister { register, offset },
                Some((register, offset, true)) => RegisterRule::AtRegister { register, offset },
                None => RegisterRule::Unsupported,
            },
            gimli::RegisterRule::Constant(c) => RegisterRule::Constant(*c),
            _ => RegisterRule::Unsupported,
        };
        registers.push((register.0, r));
    }
    let cie = fde.cie();
    Ok(Some(FrameRule {
        cfa,
        registers,
        return_address: cie.return_address_register().0,
        signal_frame: cie.is_signal_trampoline(),
    }))
}

const DW_OP_BREG0: u8 = 0x70;
const DW_OP_BREG31: u8 = 0x8f;
const DW_OP_BREGX: u8 = 0x92;
const DW_OP_DEREF: u8 = 0x06;

/// The DWARF expression shapes CFI uses outside PLTs: `DW_OP_breg<N> offset` (a signal frame's
/// saved registers), and the same followed by `DW_OP_deref` (its saved stack pointer, a
/// realigned stack's CFA): the register, the offset and whether the sum is read from memory.
fn register_plus(expression: &gimli::Expression<Reader>) -> Option<(u16, i64, bool)> {
    let mut input = expression.0.clone();
    let op = input.read_u8().ok()?;
    let register = match op {
        DW_OP_BREG0..=DW_OP_BREG31 => u16::from(op - DW_OP_BREG0),
        DW_OP_BREGX => u16::try_from(input.read_uleb128().ok()?).ok()?,
        _ => return None,
    };
    let offset = input.read_sleb128().ok()?;
    let deref = match input.read_u8() {
        Err(_) => false,
        Ok(DW_OP_DEREF) => true,
        Ok(_) => return None,
    };
    input.is_empty().then_some((register, offset, deref))
}
