//! The VMCOREINFO text: `KEY=value` lines whose value encoding depends on the key's form.
//! Lookups scan the text lazily; typed accessors fail with the offset of a malformed value.

use crate::error::{Error, FileRef};

/// VMCOREINFO as stored in the dump (borrowed, not copied).
#[derive(Debug, Clone, Copy)]
pub struct VmcoreInfo<'a> {
    text: &'a [u8],
    /// File offset of the first byte of `text`.
    offset: u64,
    file: &'a FileRef,
}

impl<'a> VmcoreInfo<'a> {
    pub(crate) fn new(text: &'a [u8], offset: u64, file: &'a FileRef) -> Self {
        // The kernel pads the note descriptor with NULs; stop at the first one.
        let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
        VmcoreInfo {
            text: &text[..end],
            offset,
            file,
        }
    }

    /// All `(key, value, file offset of the line)` entries, in order. Lines without `=` or that
    /// are not UTF-8 are skipped.
    pub fn entries(&self) -> impl Iterator<Item = (&'a str, &'a str, u64)> + 'a {
        let base = self.offset;
        let text = self.text;
        let mut at = 0u64;
        text.split(|&b| b == b'\n').filter_map(move |line| {
            let line_at = base + at;
            at += line.len() as u64 + 1;
            let line = std::str::from_utf8(line).ok()?;
            let (k, v) = line.split_once('=')?;
            Some((k, v, line_at))
        })
    }

    /// The raw value of `key` (the last one, as the kernel appends updates).
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.find(key).map(|(v, _)| v)
    }

    fn find(&self, key: &str) -> Option<(&'a str, u64)> {
        self.entries()
            .filter(|&(k, _, _)| k == key)
            .last()
            .map(|(_, v, at)| (v, at))
    }

    fn parse<T>(
        &self,
        key: &str,
        what: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, Error> {
        let Some((value, at)) = self.find(key) else {
            return Ok(None);
        };
        parse(value.trim()).map(Some).ok_or_else(|| {
            self.file
                .malformed(at, format!("VMCOREINFO {key}={value:?} is not {what}"))
        })
    }

    /// An error naming `key`'s line: its value `is_what` ("is not a power of two").
    pub(crate) fn malformed(&self, key: &str, is_what: &str) -> Error {
        let (value, at) = self.find(key).unwrap_or(("", 0));
        self.file
            .malformed(at, format!("VMCOREINFO {key}={value:?} {is_what}"))
    }

    /// `SYMBOL(name)`: a runtime (KASLR-shifted) address, hex without 0x.
    pub fn symbol(&self, name: &str) -> Result<Option<u64>, Error> {
        self.parse(&format!("SYMBOL({name})"), "a hex address", parse_hex)
    }

    /// `NUMBER(name)`: signed decimal, or hex with 0x on recent kernels.
    pub fn number(&self, name: &str) -> Result<Option<i64>, Error> {
        self.parse(&format!("NUMBER({name})"), "a number", parse_signed)
    }

    /// `SIZE(name)`: decimal.
    pub fn size(&self, name: &str) -> Result<Option<u64>, Error> {
        self.parse(&format!("SIZE({name})"), "a decimal size", parse_decimal)
    }

    /// `OFFSET(struct.field)`: decimal.
    pub fn offset(&self, name: &str) -> Result<Option<u64>, Error> {
        self.parse(
            &format!("OFFSET({name})"),
            "a decimal offset",
            parse_decimal,
        )
    }

    /// `LENGTH(name)`: decimal.
    pub fn length(&self, name: &str) -> Result<Option<u64>, Error> {
        self.parse(
            &format!("LENGTH({name})"),
            "a decimal length",
            parse_decimal,
        )
    }

    /// `KERNELOFFSET`: the KASLR slide, hex without 0x.
    pub fn kernel_offset(&self) -> Result<Option<u64>, Error> {
        self.parse("KERNELOFFSET", "a hex offset", parse_hex)
    }

    /// `PAGESIZE`: decimal.
    pub fn page_size(&self) -> Result<Option<u64>, Error> {
        self.parse("PAGESIZE", "a decimal page size", parse_decimal)
    }

    pub fn osrelease(&self) -> Option<&'a str> {
        self.get("OSRELEASE")
    }

    /// `NUMBER(phys_base)`; `Some(0)` is a real value, distinct from absent.
    pub fn phys_base(&self) -> Result<Option<i64>, Error> {
        self.number("phys_base")
    }

    /// `NUMBER(pgtable_l5_enabled)`.
    pub fn pgtable_l5_enabled(&self) -> Result<Option<bool>, Error> {
        Ok(self.number("pgtable_l5_enabled")?.map(|n| n != 0))
    }

    /// `CRASHTIME`: seconds since the epoch, signed decimal.
    pub fn crash_time(&self) -> Result<Option<i64>, Error> {
        self.parse("CRASHTIME", "a decimal time", |s| s.parse().ok())
    }

    /// The text itself.
    pub fn text(&self) -> &'a [u8] {
        self.text
    }
}

fn parse_hex(s: &str) -> Option<u64> {
    let digits = s.strip_prefix("0x").unwrap_or(s);
    u64::from_str_radix(digits, 16).ok()
}

fn parse_decimal(s: &str) -> Option<u64> {
    s.parse().ok()
}

fn parse_signed(s: &str) -> Option<i64> {
    if let Some(hex) = s.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16).ok().map(|v| v as i64);
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::Arc;

    const TEXT: &[u8] =
        b"OSRELEASE=6.1.0-test\nPAGESIZE=4096\nSYMBOL(init_top_pgt)=ffffffff8e80a000\n\
NUMBER(phys_base)=-2147483648\nNUMBER(VMALLOC_START)=0xffffc90000000000\nKERNELOFFSET=c600000\n\
SIZE(printk_info)=88\nSYMBOL(bad)=xyz\n\0\0\0";

    fn with<T>(f: impl FnOnce(VmcoreInfo<'_>) -> T) -> T {
        let file = FileRef(Arc::from(Path::new("test-vmcore")));
        f(VmcoreInfo::new(TEXT, 0x1000, &file))
    }

    #[test]
    fn typed_values() {
        with(|v| {
            assert_eq!(v.osrelease(), Some("6.1.0-test"));
            assert_eq!(v.page_size().unwrap(), Some(4096));
            assert_eq!(
                v.symbol("init_top_pgt").unwrap(),
                Some(0xffff_ffff_8e80_a000)
            );
            assert_eq!(v.phys_base().unwrap(), Some(-2_147_483_648));
            assert_eq!(
                v.number("VMALLOC_START").unwrap(),
                Some(0xffff_c900_0000_0000u64 as i64)
            );
            assert_eq!(v.kernel_offset().unwrap(), Some(0xc600000));
            assert_eq!(v.size("printk_info").unwrap(), Some(88));
            assert_eq!(v.symbol("missing").unwrap(), None);
        });
    }

    #[test]
    fn malformed_value_names_the_line_offset() {
        with(|v| {
            let err = v.symbol("bad").unwrap_err().to_string();
            let line = TEXT.windows(11).position(|w| w == b"SYMBOL(bad)").unwrap();
            assert!(
                err.contains(&format!("offset {:#x}", 0x1000 + line)),
                "{err}"
            );
            assert!(err.contains("xyz"), "{err}");
        });
    }
}
