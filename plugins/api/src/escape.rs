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

/// Whether `bytes` shows as it is: printable ASCII without a backslash. Every byte is looked
/// at, without stopping at the first that is not: the loop then runs 16 bytes at a time.
pub fn is_plain(bytes: &[u8]) -> bool {
    let odd = bytes.iter().fold(0u8, |odd, &b| {
        odd | u8::from(b < 0x20) | u8::from(b >= 0x7f) | u8::from(b == b'\\')
    });
    odd == 0
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
