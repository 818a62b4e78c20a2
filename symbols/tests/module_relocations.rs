//! A module's DWARF relocations damaged on purpose: each corruption is an error naming the
//! section and offset, and no mutation panics. Setup: tests/common/module.rs.

mod common;

use object::{Object, ObjectSection};
use symbols::{Error, Image, SectionAddresses};

use common::module::{kotest, layout};

/// The `.rela.debug_info` entries of `bytes`: file offset of each 24-byte entry.
fn rela_debug_info(bytes: &[u8]) -> (usize, usize) {
    let file = object::File::parse(bytes).unwrap();
    let section = file.section_by_name(".rela.debug_info").unwrap();
    let (offset, size) = section.file_range().unwrap();
    (offset as usize, size as usize)
}

/// One corrupted relocation entry: an error naming the relocation section, the entry's file
/// offset and what is wrong with it.
#[test]
fn corrupt_relocations_give_errors_with_section_and_offset() {
    let Some(module) = kotest() else { return };
    let original = std::fs::read(module).unwrap();
    let sections = layout(module);
    let (start, size) = rela_debug_info(&original);
    let entry = start + 24 * 3;
    let info = |bytes: &mut Vec<u8>, sym: u64, kind: u64| {
        bytes[entry + 8..entry + 16].copy_from_slice(&((sym << 32) | kind).to_le_bytes());
    };
    let current = u64::from_le_bytes(original[entry + 8..entry + 16].try_into().unwrap());
    type Corruption<'a> = Box<dyn Fn(&mut Vec<u8>) + 'a>;
    let cases: Vec<(&str, Corruption)> = vec![
        (
            "beyond the symbol table",
            Box::new(move |b| info(b, 0xff_ffff, current & 0xffff_ffff)),
        ),
        (
            "relocation type 9 is not supported",
            Box::new(move |b| info(b, current >> 32, 9)),
        ),
        (
            "past the end",
            Box::new(|b| b[entry..entry + 8].copy_from_slice(&u64::MAX.to_le_bytes())),
        ),
        (
            "patch the same bytes",
            Box::new(|b| {
                let next = b[entry + 24..entry + 32].to_vec();
                b[entry..entry + 8].copy_from_slice(&next);
            }),
        ),
    ];
    assert!(size >= 24 * 5);
    for (expected, corrupt) in cases {
        let mut bytes = original.clone();
        corrupt(&mut bytes);
        let image = Image::relocatable_from_bytes("corrupt.ko", bytes, &sections).unwrap();
        match image.variable("ko_records") {
            Err(Error::Relocation {
                section,
                offset,
                what,
                ..
            }) => {
                assert!(what.contains(expected), "{expected}: {what}");
                if expected == "patch the same bytes" {
                    assert_eq!(section, "relocations of .debug_info");
                } else {
                    assert_eq!(
                        (section.as_str(), offset),
                        (".rela.debug_info", entry as u64)
                    );
                    assert!(what.starts_with("entry 3:"), "{what}");
                }
            }
            other => panic!("{expected}: expected a relocation error, got {other:?}"),
        }
        // Symbols do not need the DWARF's relocations.
        assert!(image.symbol("ko_records").is_some());
    }
    // A 32-bit relocation of .debug_info given a kernel address cannot hold it.
    let mut far = SectionAddresses::new();
    far.insert(".debug_str", 0xffff_ffff_c0c0_0000);
    let image = Image::open_relocatable(module, &far).unwrap();
    match image.type_by_name("struct ko_record") {
        Err(Error::Relocation { what, .. }) => {
            assert!(what.contains("does not fit in 32 bits"), "{what}")
        }
        other => panic!("expected an overflow, got {other:?}"),
    }
}

/// Random corruption of every relocation section's entries: every question answers `Ok` or an
/// error naming the file, and the corruption is seen (errors come back).
#[test]
fn mutated_relocations_give_errors_not_panics() {
    let Some(module) = kotest() else { return };
    let original = std::fs::read(module).unwrap();
    let sections = layout(module);
    let file = object::File::parse(&*original).unwrap();
    let relas: Vec<(usize, usize)> = file
        .sections()
        .filter(|s| s.name().is_ok_and(|n| n.starts_with(".rela.debug")))
        .filter_map(|s| s.file_range())
        .map(|(offset, size)| (offset as usize, size as usize))
        .collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut random = |below: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % below.max(1) as u64) as usize
    };
    let mut errors = 0;
    for round in 0..300 {
        let mut bytes = original.clone();
        let (offset, size) = relas[random(relas.len())];
        for _ in 0..1 + random(4) {
            let at = offset + random(size);
            bytes[at] ^= 1 << random(8);
        }
        let outcome = std::panic::catch_unwind(|| {
            let image = Image::relocatable_from_bytes("mutant.ko", bytes, &sections).unwrap();
            let mut results = vec![
                image.variable("ko_records").map(drop),
                image.type_by_name("struct ko_record").map(drop),
            ];
            let text = sections.get(".text").unwrap();
            for address in (text..text + 0x90).step_by(7) {
                results.push(image.frames(address).map(drop));
            }
            results
                .into_iter()
                .filter_map(Result::err)
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
        });
        let failures = outcome.unwrap_or_else(|_| panic!("round {round} panicked"));
        for failure in &failures {
            assert!(failure.starts_with("mutant.ko"), "{failure}");
        }
        errors += failures.len();
    }
    assert!(
        errors > 0,
        "no mutant gave an error: the relocations were not read"
    );
}
