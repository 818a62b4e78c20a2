//! A fast walk over a unit's DIEs for the name-index scan. It decodes each DIE's abbreviation
//! code and steps over its attributes with a plan made once per abbreviation (the sum of the
//! fixed-size attributes between the variable-size ones), so the DIEs the scan does not look
//! into (most of them: functions' parameters, variables, blocks, members) cost a table lookup
//! and a few additions. The DIEs it does look into are read with gimli.

use std::ffi::CStr;

use gimli::constants as dw;
use gimli::{Abbreviation, Abbreviations, DwForm, Encoding, Format, UnitOffset};

/// How to step over one abbreviation's attributes.
struct Plan {
    /// Each variable-size attribute, after this many bytes of fixed-size ones.
    steps: Box<[(usize, DwForm)]>,
    /// Fixed-size bytes after the last variable-size attribute.
    tail: usize,
}

/// A DIE the walk stopped at.
pub(crate) struct Die<'a> {
    pub(crate) offset: UnitOffset<usize>,
    pub(crate) depth: isize,
    pub(crate) abbreviation: &'a Abbreviation,
}

/// A cursor over the DIEs of one unit.
pub(crate) struct Skim<'a> {
    /// The unit's entries, after its header.
    bytes: &'a [u8],
    /// Offset of `bytes[0]` from the start of the unit.
    base: usize,
    pos: usize,
    depth: isize,
    abbreviations: &'a Abbreviations,
    encoding: Encoding,
    big_endian: bool,
    /// By abbreviation code (codes are small and dense in practice).
    plans: Vec<Option<Plan>>,
}

/// Plans are kept for codes below this; rarer, larger codes are planned each time.
const PLANNED_CODES: u64 = 1 << 16;

impl<'a> Skim<'a> {
    pub(crate) fn new(
        bytes: &'a [u8],
        base: usize,
        abbreviations: &'a Abbreviations,
        encoding: Encoding,
        big_endian: bool,
    ) -> Skim<'a> {
        Skim {
            bytes,
            base,
            pos: 0,
            depth: 0,
            abbreviations,
            encoding,
            big_endian,
            plans: Vec::new(),
        }
    }

    /// Where the cursor is, from the start of the unit.
    pub(crate) fn offset(&self) -> UnitOffset<usize> {
        UnitOffset(self.base + self.pos)
    }

    /// The next DIE, stepped over; `None` at the end of the unit.
    pub(crate) fn next(&mut self) -> gimli::Result<Option<Die<'a>>> {
        loop {
            if self.pos >= self.bytes.len() {
                return Ok(None);
            }
            let offset = UnitOffset(self.base + self.pos);
            let code = self.uleb()?;
            if code == 0 {
                self.depth -= 1;
                continue;
            }
            let abbreviation = self
                .abbreviations
                .get(code)
                .ok_or(gimli::Error::UnknownAbbreviation(code))?;
            let depth = self.depth;
            self.step_over(code, abbreviation)?;
            if abbreviation.has_children() {
                self.depth += 1;
            }
            return Ok(Some(Die {
                offset,
                depth,
                abbreviation,
            }));
        }
    }

    fn step_over(&mut self, code: u64, abbreviation: &Abbreviation) -> gimli::Result<()> {
        let index = code as usize;
        if code < PLANNED_CODES && self.plans.get(index).is_none_or(Option::is_none) {
            if self.plans.len() <= index {
                self.plans.resize_with(index + 1, || None);
            }
            self.plans[index] = Some(self.plan(abbreviation));
        }
        let fresh;
        let plan = match self.plans.get(index).and_then(Option::as_ref) {
            Some(plan) => plan,
            None => {
                fresh = self.plan(abbreviation);
                &fresh
            }
        };
        let (mut pos, bytes, encoding, big_endian) =
            (self.pos, self.bytes, self.encoding, self.big_endian);
        for &(before, form) in plan.steps.iter() {
            pos = advance(bytes, pos, before)?;
            pos = skip_form(bytes, pos, form, encoding, big_endian)?;
        }
        self.pos = advance(bytes, pos, plan.tail)?;
        Ok(())
    }

    fn plan(&self, abbreviation: &Abbreviation) -> Plan {
        let mut steps = Vec::new();
        let mut fixed = 0;
        for spec in abbreviation.attributes() {
            match fixed_size(spec.form(), self.encoding) {
                Some(size) => fixed += size,
                None => {
                    steps.push((fixed, spec.form()));
                    fixed = 0;
                }
            }
        }
        Plan {
            steps: steps.into_boxed_slice(),
            tail: fixed,
        }
    }

    fn uleb(&mut self) -> gimli::Result<u64> {
        let (value, pos) = uleb(self.bytes, self.pos)?;
        self.pos = pos;
        Ok(value)
    }
}

fn eof(pos: usize) -> gimli::Error {
    gimli::Error::UnexpectedEof(gimli::ReaderOffsetId(pos as u64))
}

fn advance(bytes: &[u8], pos: usize, by: usize) -> gimli::Result<usize> {
    pos.checked_add(by)
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| eof(pos))
}

fn uleb(bytes: &[u8], mut pos: usize) -> gimli::Result<(u64, usize)> {
    let mut value = 0u64;
    let mut shift = 0u32;
    loop {
        let byte = *bytes.get(pos).ok_or_else(|| eof(pos))?;
        pos += 1;
        if shift < 64 {
            value |= u64::from(byte & 0x7f) << shift;
        }
        shift = shift.saturating_add(7);
        if byte & 0x80 == 0 {
            return Ok((value, pos));
        }
    }
}

/// The size of an attribute of `form`, when it does not depend on its value.
fn fixed_size(form: DwForm, encoding: Encoding) -> Option<usize> {
    let offset = match encoding.format {
        Format::Dwarf32 => 4,
        Format::Dwarf64 => 8,
    };
    Some(match form {
        dw::DW_FORM_addr => usize::from(encoding.address_size),
        dw::DW_FORM_flag_present | dw::DW_FORM_implicit_const => 0,
        dw::DW_FORM_data1
        | dw::DW_FORM_ref1
        | dw::DW_FORM_flag
        | dw::DW_FORM_strx1
        | dw::DW_FORM_addrx1 => 1,
        dw::DW_FORM_data2 | dw::DW_FORM_ref2 | dw::DW_FORM_strx2 | dw::DW_FORM_addrx2 => 2,
        dw::DW_FORM_strx3 | dw::DW_FORM_addrx3 => 3,
        dw::DW_FORM_data4
        | dw::DW_FORM_ref4
        | dw::DW_FORM_strx4
        | dw::DW_FORM_addrx4
        | dw::DW_FORM_ref_sup4 => 4,
        dw::DW_FORM_data8 | dw::DW_FORM_ref8 | dw::DW_FORM_ref_sig8 | dw::DW_FORM_ref_sup8 => 8,
        dw::DW_FORM_data16 => 16,
        dw::DW_FORM_strp
        | dw::DW_FORM_line_strp
        | dw::DW_FORM_sec_offset
        | dw::DW_FORM_strp_sup
        | dw::DW_FORM_GNU_ref_alt
        | dw::DW_FORM_GNU_strp_alt => offset,
        dw::DW_FORM_ref_addr if encoding.version == 2 => usize::from(encoding.address_size),
        dw::DW_FORM_ref_addr => offset,
        _ => return None,
    })
}

/// Steps over one variable-size attribute.
fn skip_form(
    bytes: &[u8],
    pos: usize,
    form: DwForm,
    encoding: Encoding,
    big_endian: bool,
) -> gimli::Result<usize> {
    let length = |width: usize| -> gimli::Result<(usize, usize)> {
        let field = bytes.get(pos..pos + width).ok_or_else(|| eof(pos))?;
        let mut word = [0u8; 8];
        if big_endian {
            word[8 - width..].copy_from_slice(field);
            Ok((u64::from_be_bytes(word) as usize, pos + width))
        } else {
            word[..width].copy_from_slice(field);
            Ok((u64::from_le_bytes(word) as usize, pos + width))
        }
    };
    let (skip, after) = match form {
        dw::DW_FORM_udata
        | dw::DW_FORM_sdata
        | dw::DW_FORM_ref_udata
        | dw::DW_FORM_strx
        | dw::DW_FORM_addrx
        | dw::DW_FORM_loclistx
        | dw::DW_FORM_rnglistx
        | dw::DW_FORM_GNU_addr_index
        | dw::DW_FORM_GNU_str_index => (0, uleb(bytes, pos)?.1),
        dw::DW_FORM_string => {
            let tail = bytes.get(pos..).ok_or_else(|| eof(pos))?;
            let string = CStr::from_bytes_until_nul(tail).map_err(|_| eof(pos))?;
            (0, pos + string.count_bytes() + 1)
        }
        dw::DW_FORM_block1 => length(1)?,
        dw::DW_FORM_block2 => length(2)?,
        dw::DW_FORM_block4 => length(4)?,
        dw::DW_FORM_block | dw::DW_FORM_exprloc => {
            let (len, after) = uleb(bytes, pos)?;
            (usize::try_from(len).map_err(|_| eof(pos))?, after)
        }
        dw::DW_FORM_indirect => {
            let (form, after) = uleb(bytes, pos)?;
            let form =
                DwForm(u16::try_from(form).map_err(|_| gimli::Error::UnknownForm(DwForm(0)))?);
            if form == dw::DW_FORM_indirect {
                // An indirect form naming itself would never end.
                return Err(gimli::Error::UnknownForm(form));
            }
            return match fixed_size(form, encoding) {
                Some(size) => advance(bytes, after, size),
                None => skip_form(bytes, after, form, encoding, big_endian),
            };
        }
        other => return Err(gimli::Error::UnknownForm(other)),
    };
    advance(bytes, after, skip)
}
