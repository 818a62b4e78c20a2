//! String attributes of DIEs.

use crate::bytes::{raw, Reader};

/// A string attribute's bytes. The common `DW_FORM_strp` is found with `memchr` (through
/// `CStr`) rather than gimli's byte-at-a-time search: the scan reads a great many names.
pub(crate) fn raw_string(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    value: gimli::AttributeValue<Reader>,
) -> Option<Reader> {
    use gimli::{Reader as _, Section};
    if let gimli::AttributeValue::DebugStrRef(offset) = value {
        let mut string = dwarf.debug_str.reader().clone();
        let tail = raw(&string).get(offset.0..)?;
        let len = std::ffi::CStr::from_bytes_until_nul(tail)
            .ok()?
            .count_bytes();
        string.skip(offset.0).ok()?;
        string.truncate(len).ok()?;
        return Some(string);
    }
    dwarf.attr_string(unit, value).ok()
}

/// A string attribute's value; `None` when it is not a string or points outside its section.
pub(crate) fn string(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    value: gimli::AttributeValue<Reader>,
) -> Option<Box<str>> {
    use gimli::Reader as _;
    let raw = dwarf.attr_string(unit, value).ok()?;
    Some(raw.to_string_lossy().ok()?.into())
}
