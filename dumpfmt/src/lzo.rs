//! LZO1X decompression (what makedumpfile `-l` writes through liblzo2's `lzo1x_1_compress`),
//! in safe Rust with every length and distance checked: the output goes into a caller-sized
//! buffer (one page), never further, and the input is never read past its end.
//!
//! No crate fits: `lzo1x` and `rust-lzo` are GPL-2.0 (this workspace is MIT OR Apache-2.0),
//! `minilzo-rs` binds the C library, and `lzokay-native` grows its output without bound and
//! panics on a back-reference before the start of the output.
//!
//! The stream is a sequence of instructions whose meaning depends on how many literals the
//! previous one copied (`state`: 0, 1–3, or 4 meaning "four or more"):
//!
//! | First byte | Instruction |
//! |---|---|
//! | 0–15, state 0 | literal run of 3 + L bytes (L = 0: 18 + extended length) |
//! | 0–15, state 1–3 | 2-byte match, distance (H << 2) + D + 1 |
//! | 0–15, state 4 | 3-byte match, distance (H << 2) + D + 2049 |
//! | 16–31 (M4) | match of 2 + L bytes, distance 16384 + (H << 14) + D; distance 16384 ends the stream |
//! | 32–63 (M3) | match of 2 + L bytes, distance D + 1 |
//! | 64–255 (M2) | match of 3–8 bytes, distance (H << 3) + D + 1 |
//!
//! Each match is followed by 0–3 literals (its low two bits, or those of its 16-bit distance),
//! which become the next state. A first byte above 17 is a literal run of (byte − 17).

use std::fmt;

/// Why a stream did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LzoError {
    /// The input ends inside an instruction, at input offset `at`.
    InputOverrun { at: usize },
    /// The output would grow past its `limit` at input offset `at`.
    OutputOverrun { at: usize, limit: usize },
    /// A match at input offset `at` reaches `distance` bytes back with only `written` written.
    LookBehind {
        at: usize,
        distance: usize,
        written: usize,
    },
    /// The end-of-stream marker came at input offset `at`, before the last `left` input bytes.
    TrailingInput { at: usize, left: usize },
}

impl fmt::Display for LzoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LzoError::InputOverrun { at } => {
                write!(f, "lzo input ends inside the instruction at byte {at}")
            }
            LzoError::OutputOverrun { at, limit } => {
                write!(
                    f,
                    "lzo output would exceed {limit} bytes (instruction at byte {at})"
                )
            }
            LzoError::LookBehind {
                at,
                distance,
                written,
            } => write!(
                f,
                "lzo match at byte {at} reaches {distance} bytes back, but only {written} were written"
            ),
            LzoError::TrailingInput { at, left } => write!(
                f,
                "lzo end marker at byte {at} is followed by {left} more bytes"
            ),
        }
    }
}

struct Input<'a> {
    src: &'a [u8],
    pos: usize,
    /// Where the current instruction started, for errors.
    start: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> Result<u8, LzoError> {
        let b = *self
            .src
            .get(self.pos)
            .ok_or(LzoError::InputOverrun { at: self.start })?;
        self.pos += 1;
        Ok(b)
    }

    fn le16(&mut self) -> Result<usize, LzoError> {
        let lo = self.byte()?;
        let hi = self.byte()?;
        Ok(usize::from(u16::from_le_bytes([lo, hi])))
    }

    /// An extended length: zero bytes add 255 each, then a non-zero byte ends it. Capped at
    /// `cap` so that a long run of zeros cannot overflow; any length above a page fails anyway.
    fn extended(&mut self, base: usize, cap: usize) -> Result<usize, LzoError> {
        let mut len = base;
        loop {
            match self.byte()? {
                0 => len = (len + 255).min(cap.saturating_add(1)),
                b => return Ok((len + usize::from(b)).min(cap.saturating_add(1))),
            }
        }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], LzoError> {
        let bytes = self
            .pos
            .checked_add(n)
            .and_then(|end| self.src.get(self.pos..end))
            .ok_or(LzoError::InputOverrun { at: self.start })?;
        self.pos += n;
        Ok(bytes)
    }
}

struct Output<'a> {
    dst: &'a mut [u8],
    len: usize,
}

impl Output<'_> {
    fn room(&self, n: usize, at: usize) -> Result<(), LzoError> {
        if n > self.dst.len() - self.len {
            return Err(LzoError::OutputOverrun {
                at,
                limit: self.dst.len(),
            });
        }
        Ok(())
    }

    fn literals(&mut self, bytes: &[u8], at: usize) -> Result<(), LzoError> {
        self.room(bytes.len(), at)?;
        self.dst[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
        Ok(())
    }

    /// Copy `n` bytes from `distance` back; the ranges may overlap (a distance shorter than the
    /// length repeats the pattern), so overlapping copies go byte by byte.
    fn back_reference(&mut self, distance: usize, n: usize, at: usize) -> Result<(), LzoError> {
        if distance == 0 || distance > self.len {
            return Err(LzoError::LookBehind {
                at,
                distance,
                written: self.len,
            });
        }
        self.room(n, at)?;
        let from = self.len - distance;
        if distance >= n {
            self.dst.copy_within(from..from + n, self.len);
        } else {
            for i in 0..n {
                self.dst[self.len + i] = self.dst[from + i];
            }
        }
        self.len += n;
        Ok(())
    }
}

/// Decompress one LZO1X stream into `dst`; the number of bytes written. The stream must end
/// with its end marker exactly at the end of `src`, as liblzo's `lzo1x_decompress_safe` demands.
pub fn decompress(src: &[u8], dst: &mut [u8]) -> Result<usize, LzoError> {
    let mut input = Input {
        src,
        pos: 0,
        start: 0,
    };
    let mut out = Output { dst, len: 0 };
    let limit = out.dst.len();
    let mut state = 0usize;

    if let Some(&first) = src.first().filter(|&&b| b > 17) {
        input.pos = 1;
        let n = usize::from(first - 17);
        let bytes = input.take(n)?;
        out.literals(bytes, 0)?;
        state = n.min(4);
    }
    loop {
        input.start = input.pos;
        let at = input.start;
        let op = input.byte()?;
        let (distance, len, trailing) = if op >= 64 {
            let h = usize::from(input.byte()?);
            let distance = (h << 3) + usize::from((op >> 2) & 7) + 1;
            (distance, usize::from(op >> 5) + 1, usize::from(op & 3))
        } else if op >= 32 {
            let len = match op & 31 {
                0 => input.extended(31, limit)?,
                l => usize::from(l),
            } + 2;
            let d = input.le16()?;
            ((d >> 2) + 1, len, d & 3)
        } else if op >= 16 {
            let len = match op & 7 {
                0 => input.extended(7, limit)?,
                l => usize::from(l),
            } + 2;
            let d = input.le16()?;
            let distance = (usize::from(op & 8) << 11) + (d >> 2);
            if distance == 0 {
                let left = src.len() - input.pos;
                if left != 0 {
                    return Err(LzoError::TrailingInput { at, left });
                }
                return Ok(out.len);
            }
            (distance + 16384, len, d & 3)
        } else if state == 0 {
            let len = match op {
                0 => input.extended(15, limit)?,
                l => usize::from(l),
            } + 3;
            let bytes = input.take(len)?;
            out.literals(bytes, at)?;
            state = 4;
            continue;
        } else {
            let h = usize::from(input.byte()?);
            let near = (h << 2) + usize::from(op >> 2) + 1;
            if state == 4 {
                (near + 2048, 3, usize::from(op & 3))
            } else {
                (near, 2, usize::from(op & 3))
            }
        };
        out.back_reference(distance, len, at)?;
        let bytes = input.take(trailing)?;
        out.literals(bytes, at)?;
        state = trailing;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end-of-stream marker: M4 with distance 16384.
    const EOS: [u8; 3] = [0x11, 0, 0];

    fn run(src: &[u8], cap: usize) -> Result<Vec<u8>, LzoError> {
        let mut out = vec![0u8; cap];
        let n = decompress(src, &mut out)?;
        out.truncate(n);
        Ok(out)
    }

    #[test]
    fn literal_only_stream() {
        // First byte 17 + 5: five literals, then the end marker.
        let mut s = vec![22, b'h', b'e', b'l', b'l', b'o'];
        s.extend(EOS);
        assert_eq!(run(&s, 16).unwrap(), b"hello");
        // The empty stream.
        assert_eq!(run(&EOS, 16).unwrap(), b"");
    }

    #[test]
    fn overlapping_m2_match_repeats_a_pattern() {
        // "ab", then M2: length 8 (op>>5 = 7), distance 2 (D = 1, H = 0), no trailing literals.
        let op = (7 << 5) | (1 << 2);
        let mut s = vec![19, b'a', b'b', op, 0];
        s.extend(EOS);
        assert_eq!(run(&s, 16).unwrap(), b"ababababab");
    }

    #[test]
    fn long_literal_run_and_m3_with_extended_length() {
        // State 0: op 0 means 18 + extended; zero byte (+255) then 2: 18 + 255 + 2 = 275 literals.
        let lit: Vec<u8> = (0..275u32).map(|i| (i * 7 + 1) as u8).collect();
        let mut s = vec![0, 0, 2];
        s.extend(&lit);
        // M3 with L = 0: 33 + extended(1) = 34 bytes... 2 + 31 + 1; distance 275 → d = 274 << 2.
        s.extend([32, 1]);
        s.extend(((274u16) << 2).to_le_bytes());
        s.extend(EOS);
        let out = run(&s, 4096).unwrap();
        assert_eq!(&out[..275], &lit[..]);
        assert_eq!(&out[275..], &lit[..34]);
    }

    #[test]
    fn bad_streams_fail_without_panicking() {
        let mut s = vec![22, b'h', b'e', b'l', b'l', b'o'];
        s.extend(EOS);
        // Output limited below what the stream produces.
        assert!(matches!(
            run(&s, 4),
            Err(LzoError::OutputOverrun { limit: 4, .. })
        ));
        // Cut before the end marker.
        assert!(matches!(
            run(&s[..7], 16),
            Err(LzoError::InputOverrun { .. })
        ));
        // Bytes after the end marker.
        let mut trailing = s.clone();
        trailing.push(0);
        assert_eq!(
            run(&trailing, 16),
            Err(LzoError::TrailingInput { at: 6, left: 1 })
        );
        // A match before the start of the output.
        assert_eq!(
            run(&[18, b'x', 0x40 | (3 << 2), 9], 16),
            Err(LzoError::LookBehind {
                at: 2,
                distance: 76,
                written: 1
            })
        );
        // Zero-byte length extensions that would overflow stop at the output limit.
        let mut zeros = vec![0u8; 1 << 16];
        zeros.push(1);
        assert!(matches!(
            run(&zeros, 4096),
            Err(LzoError::InputOverrun { .. } | LzoError::OutputOverrun { .. })
        ));
        for cut in 0..s.len() {
            let _ = run(&s[..cut], 16);
        }
    }

    /// Random streams and random damage to a valid one: errors, never a panic or a write past
    /// the buffer (the fuzz target `lzo` does the same at scale).
    #[test]
    fn random_and_damaged_streams_never_panic() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut valid = vec![0u8, 0, 2];
        valid.extend((0..275u32).map(|i| (i * 7 + 1) as u8));
        valid.extend([32, 1, 0x48, 0x04, 0x11, 0, 0]);
        let mut out = [0u8; 512];
        for _ in 0..20_000 {
            let mut s = if next() % 2 == 0 {
                valid.clone()
            } else {
                (0..next() % 64).map(|_| next() as u8).collect()
            };
            if !s.is_empty() {
                let at = (next() % s.len() as u64) as usize;
                s[at] = next() as u8;
            }
            if let Ok(n) = decompress(&s, &mut out) {
                assert!(n <= out.len());
            }
        }
    }
}
