//! Well-formed small dumps of each kind mutated thousands of ways. Each must give an error naming
//! the file, the offset and what is wrong — never a panic, never a huge allocation. The builders
//! are in tests/common/broken.rs.

#[path = "common/broken.rs"]
mod broken;

use broken::*;

#[path = "common/exercise.rs"]
mod exercise;

/// Well-formed small dumps of each kind, then thousands of byte flips, overwrites with extreme
/// values and truncations of them: opening and reading must never panic.
#[test]
fn mutated_dumps_never_panic() {
    let text: Vec<u8> = (0..BS).map(|i| (i % 7) as u8 + b'a').collect();
    let plain = kdump(&[
        (1, 0, vec![0x11; BS]),
        (2, 1, zlib(&text)),
        (3, 1, zlib(&text)),
        (4, 2, lzo_page(&text[..BS - 64])),
        (5, 4, snappy(&text)),
        (6, 0x20, zstd(&text)),
    ]);
    let data = payload_at(3);
    let notes = [
        note("CORE", 1, &[0; 336]),
        note("QEMU", 0, &[0; 432]),
        note("VMCOREINFO", 0, b"SYMBOL(x)=10\nNUMBER(phys_base)=0\n"),
    ]
    .concat();
    let elf_dump = elf(
        &[
            Ph {
                p_type: 4,
                offset: data,
                vaddr: 0,
                paddr: 0,
                filesz: notes.len() as u64,
                memsz: 0,
            },
            load(data + notes.len() as u64, 0x1000, 0x100, 0x2000),
            Ph {
                p_type: 1,
                offset: data,
                vaddr: 0xffff_8880_0000_0000,
                paddr: 0x8000,
                filesz: 0x40,
                memsz: 0x40,
            },
        ],
        &[notes.clone(), vec![0x33; 0x100]].concat(),
    );
    let flat = flatten(&[(0, &plain[..5000]), (5000, &plain[5000..])], true);

    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for original in [&plain, &elf_dump, &flat] {
        for _ in 0..1500 {
            let mut m = original.clone();
            match next() % 4 {
                0 => {
                    let at = (next() % m.len() as u64) as usize;
                    m[at] ^= 1 << (next() % 8);
                }
                1 => {
                    // Extreme values over a header-ish field.
                    let at = (next() % (m.len().min(8192) as u64 - 8)) as usize;
                    let v = [u64::MAX, 0, i64::MAX as u64, 0x8000_0000, u64::MAX - 3]
                        [(next() % 5) as usize];
                    m[at..at + 8].copy_from_slice(&v.to_le_bytes());
                }
                2 => m.truncate((next() % m.len() as u64) as usize),
                _ => {
                    let at = (next() % m.len() as u64) as usize;
                    let end = (at + 64).min(m.len());
                    for b in &mut m[at..end] {
                        *b = next() as u8;
                    }
                }
            }
            if let Ok(dump) = open(&m) {
                exercise::exercise(&dump, &m[m.len().saturating_sub(128)..]);
            }
        }
    }
}
