//! klog-runtime's printf interpreter with a hostile format, hostile data words and `%s`
//! arguments that read fuzz-chosen bytes or fail. Input: a byte k, k % 4 data words (u64 LE),
//! the format up to the first NUL, then the bytes `%s` arguments point into. A panic, output
//! beyond what the format's fields allow, or a format of literal text and bare numbers whose
//! steps print or count otherwise than its pieces, is a bug.

#![no_main]

use std::fmt;

use klog_runtime::printf::{format, format_steps, pieces, Piece, Sink, Step, Strings, MAX_FIELD};
use libfuzzer_sys::fuzz_target;

/// `%s` strings: an address with the top bit set fails; others read the pool from the address
/// (modulo its length) up to a NUL.
struct Pool<'a>(&'a [u8]);

impl Strings for Pool<'_> {
    type Error = &'static str;
    fn c_string(&mut self, addr: u64, max: usize) -> Result<&[u8], &'static str> {
        if addr >> 63 == 1 || self.0.is_empty() {
            return Err("unreadable");
        }
        let from = &self.0[(addr % self.0.len() as u64) as usize..];
        let end = from.iter().position(|&b| b == 0).unwrap_or(from.len());
        Ok(&from[..end.min(max)])
    }
}

/// Collects output; fails once `fail_after` bytes were put, as a full console would.
struct Out {
    bytes: Vec<u8>,
    fail_after: Option<usize>,
}

impl Sink for Out {
    fn put(&mut self, bytes: &[u8]) -> fmt::Result {
        if self
            .fail_after
            .is_some_and(|n| self.bytes.len() + bytes.len() > n)
        {
            return Err(fmt::Error);
        }
        self.bytes.extend_from_slice(bytes);
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let words = (k % 4) as usize;
    if rest.len() < words * 8 {
        return;
    }
    let (args, rest) = rest.split_at(words * 8);
    let args: Vec<u64> = args
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
        .collect();
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    let (fmt, pool) = (&rest[..end], rest.get(end + 1..).unwrap_or(&[]));
    let fail_after = (k & 0x80 != 0).then_some((k & 0x3f) as usize);
    let mut out = Out {
        bytes: Vec::new(),
        fail_after,
    };
    if let Ok(outcome) = format(&mut out, fmt, &args, &mut Pool(pool)) {
        assert!(outcome.args_used <= args.len() + outcome.missing_args);
        // Each conversion writes at most its capped field plus a short mark; literal text as is.
        let conversions = fmt.iter().filter(|&&b| b == b'%').count();
        assert!(out.bytes.len() <= fmt.len() + conversions * (2 * MAX_FIELD + 64 + pool.len()));
        let steps: Option<Vec<Step>> = pieces(fmt).map(Piece::step).collect();
        if let Some(steps) = steps {
            let mut by_steps = Out {
                bytes: Vec::new(),
                fail_after: None,
            };
            let stepped = format_steps(&mut by_steps, fmt, &steps, &args);
            assert_eq!(stepped, Ok(outcome));
            assert_eq!(by_steps.bytes, out.bytes);
        }
    }
});
