//! `trace_printk` with arguments: the kernel stores the format's address and the arguments
//! packed as `vbin_printf` packs them; this reads them back by the same rules (each integer at
//! its own alignment, 8-byte ones at 4, strings inline with their NUL, `%p` with an extension
//! other than `sSxKe` already rendered as a string) and renders the message.

use crate::print_fmt::{printf, RenderError, Resolve, Val, Want};

/// The packed arguments of one record.
struct Packed<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Packed<'_> {
    fn aligned(&mut self, size: usize) -> Result<&[u8], RenderError> {
        let align = size.min(4);
        self.at = self.at.div_ceil(align) * align;
        let bytes = self
            .buf
            .get(self.at..self.at + size)
            .ok_or_else(|| RenderError("the arguments end before the format does".into()))?;
        self.at += size;
        Ok(bytes)
    }

    fn int(&mut self, size: usize, signed: bool) -> Result<i128, RenderError> {
        let bytes = self.aligned(size)?;
        let mut word = [0u8; 8];
        word[..size].copy_from_slice(bytes);
        let raw = u64::from_le_bytes(word);
        let bits = size * 8;
        Ok(if signed && bits < 64 && raw >> (bits - 1) & 1 == 1 {
            i128::from(raw) - (1i128 << bits)
        } else if signed && bits == 64 {
            i128::from(raw as i64)
        } else {
            i128::from(raw)
        })
    }

    fn string(&mut self) -> Result<Vec<u8>, RenderError> {
        let rest = self.buf.get(self.at..).unwrap_or_default();
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| RenderError("a string argument runs past the record".into()))?;
        self.at += end + 1;
        Ok(rest[..end].to_vec())
    }
}

/// `fmt` with the arguments packed in `buf`, as the kernel renders a bprint record.
pub fn render(fmt: &[u8], buf: &[u8], syms: &dyn Resolve) -> Result<Vec<u8>, RenderError> {
    let mut packed = Packed { buf, at: 0 };
    printf(
        fmt,
        |want| {
            Ok(match want {
                Want::Width => Val::Int(packed.int(4, true)?),
                Want::Value { conv: b's', .. } => Val::owned(packed.string()?),
                Want::Value {
                    conv: b'p',
                    pointer,
                    ..
                } => match pointer {
                    Some(ext) if !b"sSxKe".contains(&ext) => Val::owned(packed.string()?),
                    _ => Val::Int(packed.int(8, false)?),
                },
                Want::Value { conv: b'c', .. } => Val::Int(packed.int(1, false)?),
                Want::Value { conv, size, .. } => {
                    Val::Int(packed.int(size as usize, matches!(conv, b'd' | b'i'))?)
                }
            })
        },
        syms,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::print_fmt::NoKernel;

    /// What `vbin_printf` packs for `"%s cpu %u seq %lld c=%c h=%hx\n"`: the string and its NUL,
    /// then the int at a 4-byte boundary, the 8-byte long long at a 4-byte one, the char at any,
    /// the short at 2.
    #[test]
    fn packed_arguments_read_back_as_the_kernel_wrote_them() {
        let mut buf = b"klog\0".to_vec();
        buf.extend([0; 3]); // to 8
        buf.extend(7u32.to_le_bytes()); // 8..12
        buf.extend((-5i64).to_le_bytes()); // 12..20, aligned to 4 only
        buf.push(b'x'); // 20
        buf.push(0); // to 22
        buf.extend(0xbeefu16.to_le_bytes());
        let line = render(b"%s cpu %u seq %lld c=%c h=%hx\n", &buf, &NoKernel).unwrap();
        assert_eq!(line, b"klog cpu 7 seq -5 c=x h=beef");
        // A format asking for more than was packed says so.
        assert!(render(b"%d %d %d %d %d %d %d", &buf[..8], &NoKernel).is_err());
    }
}
