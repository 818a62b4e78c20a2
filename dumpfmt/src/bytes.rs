//! Bounds-checked little-endian field access on untrusted bytes. Each returns `None` when the
//! field does not fit, so callers turn that into an error naming the offset.

pub(crate) fn slice(data: &[u8], offset: u64, len: u64) -> Option<&[u8]> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    data.get(start..end)
}

pub(crate) fn array<const N: usize>(data: &[u8], offset: u64) -> Option<[u8; N]> {
    slice(data, offset, N as u64)?.try_into().ok()
}

pub(crate) fn u16_le(data: &[u8], offset: u64) -> Option<u16> {
    array(data, offset).map(u16::from_le_bytes)
}

pub(crate) fn u32_le(data: &[u8], offset: u64) -> Option<u32> {
    array(data, offset).map(u32::from_le_bytes)
}

pub(crate) fn i32_le(data: &[u8], offset: u64) -> Option<i32> {
    array(data, offset).map(i32::from_le_bytes)
}

pub(crate) fn u64_le(data: &[u8], offset: u64) -> Option<u64> {
    array(data, offset).map(u64::from_le_bytes)
}

pub(crate) fn i64_le(data: &[u8], offset: u64) -> Option<i64> {
    array(data, offset).map(i64::from_le_bytes)
}

pub(crate) fn i64_be(data: &[u8], offset: u64) -> Option<i64> {
    array(data, offset).map(i64::from_be_bytes)
}

/// A NUL-terminated (or NUL-padded) C string inside a fixed field, lossily decoded.
pub(crate) fn c_string(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}
