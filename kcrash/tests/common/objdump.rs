//! Reading binutils' objdump beside kcrash's `dis`.

/// One instruction line of `objdump -d -w`: its address, its bytes column and its text, as in
/// `  401000:\t55 48 89 e5 \tpush   %rbp` or `  400340:\ta9b37bfd \tstp\tx29, x30, [sp, #-208]!`.
pub fn instruction_line(line: &str) -> Option<(u64, &str, &str)> {
    let (addr, rest) = line.trim_start().split_once(":\t")?;
    let addr = u64::from_str_radix(addr, 16).ok()?;
    let (bytes, text) = rest.split_once('\t').unwrap_or((rest, ""));
    Some((addr, bytes, text.trim()))
}

/// An arm64 instruction's words and numbers, the same whether objdump or kcrash wrote it:
/// numbers by value (`#-208` and `#-0xd0`, an address `49f000 <sym>` or `49f000` and
/// `0x49f000`), objdump's `<symbol>` left out.
pub fn arm64_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    for c in text.chars().chain([' ']) {
        if matches!(c, ' ' | '\t' | ',' | '[' | ']' | '{' | '}' | '!') {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            if !matches!(c, ' ' | '\t' | ',') {
                words.push(c.to_string());
            }
        } else {
            word.push(c);
        }
    }
    let number = |w: &str| -> Option<String> {
        let (sign, digits) = match w.strip_prefix('-') {
            Some(d) => (-1, d),
            None => (1, w),
        };
        let value = match digits.strip_prefix("0x") {
            Some(hex) => i128::from_str_radix(hex, 16).ok()?,
            None => digits.parse::<i128>().ok()?,
        };
        Some((sign * value).to_string())
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if w.starts_with('<') {
            // objdump's symbol after an address, which may hold spaces: to its `>`.
            while !words[i].ends_with('>') && i + 1 < words.len() {
                i += 1;
            }
            i += 1;
            continue;
        }
        // An address objdump writes bare: named, or long (a register's name is short).
        let named = words.get(i + 1).is_some_and(|n| n.starts_with('<'))
            || (w.len() >= 5 && w.bytes().all(|b| b.is_ascii_hexdigit()));
        out.push(if let Some(imm) = w.strip_prefix('#') {
            match number(imm) {
                Some(n) => format!("#{n}"),
                // A float: objdump's `#1.000000000000000000e+00`, kcrash's `#1.0`.
                None => imm
                    .parse::<f64>()
                    .map_or_else(|_| w.clone(), |f| format!("#{f}")),
            }
        } else if named {
            u64::from_str_radix(w.trim_start_matches("0x"), 16)
                .map_or_else(|_| w.clone(), |a| a.to_string())
        } else if w.starts_with("0x") {
            number(w).unwrap_or_else(|| w.clone())
        } else {
            w.clone()
        });
        i += 1;
    }
    out
}
