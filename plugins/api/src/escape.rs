//! Text from a dump, made safe to print: whatever bytes a damaged or hostile dump holds, a
//! terminal shows them as they are and no escape sequence or line break reaches it.

/// Appends `bytes` so that a terminal shows exactly what they are: printable UTF-8 as is, `\n`,
/// `\t`, `\\` and every other control or invalid byte as an escape.
#[inline]
pub fn escape_into(bytes: &[u8], out: &mut Vec<u8>) {
    // Most text from a dump is printable ASCII: one copy.
    if is_plain(bytes) {
        out.extend_from_slice(bytes);
        return;
    }
    escape_slow(bytes, out);
}

/// Whether `bytes` shows as it is: printable ASCII without a backslash.
#[inline]
pub fn is_plain(bytes: &[u8]) -> bool {
    plain_without(bytes, b'\\', b'\\')
}

/// Whether `bytes` is printable ASCII with neither `a` nor `b` in it, looked at eight bytes at a
/// time: most text from a dump is a short message, where a byte-wise loop (even one the
/// compiler widens) spends more on its tail than on its body.
pub fn plain_without(bytes: &[u8], a: u8, b: u8) -> bool {
    let word = |at: usize| {
        let mut w = [0; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let n = bytes.len();
    if n < 8 {
        return bytes
            .iter()
            .all(|&c| (0x20..0x7f).contains(&c) && c != a && c != b);
    }
    // Whole words, then the last eight bytes (which may overlap the last word looked at).
    let mut odd = odd_bytes(word(n - 8), a, b);
    let mut at = 0;
    while at + 8 <= n {
        odd |= odd_bytes(word(at), a, b);
        at += 8;
    }
    odd == 0
}

/// Not zero when a byte of `w` is below 0x20, above 0x7e, `a` or `b` (the bit tricks of "Bit
/// Twiddling Hacks": each term is exact about whether any byte qualifies, not about which).
fn odd_bytes(w: u64, a: u8, b: u8) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let below = |x: u64, n: u64| x.wrapping_sub(n * ONES) & !x & HIGHS;
    let zero = |x: u64| below(x, 1);
    let above_7e = (w.wrapping_add(ONES) | w) & HIGHS;
    below(w, 0x20) | above_7e | zero(w ^ (u64::from(a) * ONES)) | zero(w ^ (u64::from(b) * ONES))
}

/// As [`escape_into`], but a tab is kept as a tab: for a message whose own layout uses tabs
/// (as some of the kernel's trace formats do), printed where a tab is only whitespace.
pub fn escape_keeping_tabs_into(bytes: &[u8], out: &mut Vec<u8>) {
    for (i, piece) in bytes.split(|&b| b == b'\t').enumerate() {
        if i > 0 {
            out.push(b'\t');
        }
        escape_into(piece, out);
    }
}

fn escape_slow(bytes: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < bytes.len() {
        // Printable ASCII, the common case, is copied in runs.
        let start = i;
        while i < bytes.len() && (0x20..0x7f).contains(&bytes[i]) && bytes[i] != b'\\' {
            i += 1;
        }
        out.extend_from_slice(&bytes[start..i]);
        let Some(&b) = bytes.get(i) else { break };
        match b {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0..=0x7f => push_byte_escape(out, b),
            _ => {
                let valid = bytes[i..].utf8_chunks().next().map_or("", |c| c.valid());
                match valid.chars().next() {
                    Some(c) if !c.is_control() => {
                        out.extend_from_slice(&bytes[i..i + c.len_utf8()]);
                        i += c.len_utf8();
                        continue;
                    }
                    Some(c) => {
                        for &b in &bytes[i..i + c.len_utf8()] {
                            push_byte_escape(out, b);
                        }
                        i += c.len_utf8();
                        continue;
                    }
                    None => push_byte_escape(out, b),
                }
            }
        }
        i += 1;
    }
}

fn push_byte_escape(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(&[b'\\', b'x', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
}

/// `bytes` escaped, as a string ([`escape_into`]).
pub fn escaped(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len());
    escape_into(bytes, &mut out);
    // Escaping leaves valid UTF-8 only.
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_is_printable_ascii_without_backslash() {
        assert!(is_plain(b""));
        assert!(is_plain(b"tick 42 of cpu 3 ~!@#$%^&*()_+{}|:<>?"));
        for odd in [0u8, 0x1f, b'\\', 0x7f, 0x80, 0xff] {
            let mut text = b"a long enough line to run in sixteen-byte pieces".to_vec();
            text.insert(37, odd);
            assert!(!is_plain(&text), "{odd:#x}");
        }
    }

    /// Eight bytes at a time agree with one at a time, wherever in a word the odd byte sits
    /// and whatever surrounds it (bytes just above or below a bound, high bytes).
    #[test]
    fn plain_without_agrees_with_a_byte_by_byte_look() {
        let slow = |t: &[u8], a: u8, b: u8| {
            t.iter()
                .all(|&c| (0x20..0x7f).contains(&c) && c != a && c != b)
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edges = [
            0u8, 1, 0x1f, 0x20, 0x21, b'"', b'\\', b'a', 0x7e, 0x7f, 0x80, 0xa0, 0xff,
        ];
        for _ in 0..200_000 {
            let r = next();
            let len = (r % 27) as usize;
            let mut text: Vec<u8> = (0..len).map(|i| b'A' + (r >> i) as u8 % 26).collect();
            for _ in 0..(r >> 40) % 3 {
                if len > 0 {
                    let at = (next() % len as u64) as usize;
                    text[at] = edges[(next() % edges.len() as u64) as usize];
                }
            }
            for (a, b) in [(b'\\', b'\\'), (b'\\', b'"'), (b'a', b'b')] {
                assert_eq!(
                    plain_without(&text, a, b),
                    slow(&text, a, b),
                    "{text:?} {a} {b}"
                );
            }
        }
    }

    #[test]
    fn control_bytes_and_bad_utf8_are_escaped() {
        assert_eq!(escaped(b"FS"), "FS");
        assert_eq!(
            escaped(b"A\x1b[2J\nfake line\x7f\\ \xff caf\xc3\xa9"),
            "A\\x1b[2J\\nfake line\\x7f\\\\ \\xff caf\u{e9}"
        );
    }

    #[test]
    fn a_line_keeps_its_tabs_and_nothing_else() {
        let mut out = Vec::new();
        escape_keeping_tabs_into(b"mt_find\tNode\n\x1b", &mut out);
        assert_eq!(out, b"mt_find\tNode\\n\\x1b");
    }
}
