//! Corrupt debug information must give errors, never panics. Real compiler output (the gcc and
//! rustc fixtures) is mutated many times — bits flipped inside DWARF sections, sections cut
//! short through their header's size, compressed sections given absurd sizes — and every
//! lookup on every mutant must return `Ok` or an error that names the file.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use kcrash_harness::tools;
use object::{Object, ObjectSection};
use symbols::{Error, Image, TypeId};

/// A small deterministic generator, so a failure can be replayed from its iteration number.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A section: where its bytes are, and where its header's `sh_size` field is.
struct Section {
    name: String,
    offset: usize,
    size: usize,
    size_field: usize,
}

fn sections(bytes: &[u8]) -> Vec<Section> {
    let file = object::File::parse(bytes).unwrap();
    assert!(
        file.is_64() && file.is_little_endian(),
        "fixtures are ELF64 LE"
    );
    let shoff = u64::from_le_bytes(bytes[0x28..0x30].try_into().unwrap()) as usize;
    let shentsize = u16::from_le_bytes(bytes[0x3a..0x3c].try_into().unwrap()) as usize;
    file.sections()
        .filter_map(|s| {
            let name = s.name().ok()?;
            let wanted = name.starts_with(".debug_") || matches!(name, ".symtab" | ".strtab");
            let (offset, size) = s.file_range()?;
            wanted.then(|| Section {
                name: name.to_owned(),
                offset: offset as usize,
                size: size as usize,
                size_field: shoff + s.index().0 * shentsize + 0x20,
            })
        })
        .collect()
}

/// Every question the crate answers, asked of `image`; returns how many errors came back.
fn exercise(image: &Image, variables: &[&str], types: &[&str], addresses: &[u64]) -> usize {
    let mut errors = 0;
    let mut check = |result: Result<(), Error>| {
        if let Err(error) = result {
            assert!(error.to_string().starts_with("mutant"), "{error}");
            errors += 1;
        }
    };
    for name in variables {
        image.symbol(name);
        check(image.variable(name).and_then(|v| {
            v.and_then(|v| v.ty)
                .map_or(Ok(()), |ty| walk(image, ty, &mut 0))
        }));
    }
    for name in types {
        check(
            image
                .type_by_name(name)
                .and_then(|ty| ty.map_or(Ok(()), |ty| walk(image, ty, &mut 0))),
        );
    }
    for &address in addresses {
        image.symbolize(address);
        check(image.frames(address).map(drop));
    }
    errors
}

/// Reads `id` and everything it refers to, as a printer would.
fn walk(image: &Image, id: TypeId, seen: &mut usize) -> Result<(), Error> {
    *seen += 1;
    if *seen > 200 {
        return Ok(());
    }
    image.type_name(id)?;
    image.size_of(id)?;
    image.value_type(id)?;
    let refs = image.type_(id)?.references();
    for target in refs {
        walk(image, target, seen)?;
    }
    Ok(())
}

/// Mutates `program` `rounds` times and exercises each mutant. Returns the errors seen.
fn mutate(program: &Path, rounds: u64, variables: &[&str], types: &[&str]) -> usize {
    let original = std::fs::read(program).unwrap();
    let sections = sections(&original);
    let nm = common::nm(program);
    let addresses: Vec<u64> = ["main", "KLogs", "KLOGS"]
        .iter()
        .filter_map(|name| nm.get(*name).copied())
        .collect();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut errors = 0;
    for round in 0..rounds {
        let mut bytes = original.clone();
        let section = &sections[rng.below(sections.len() as u64) as usize];
        let what = if rng.below(4) == 0 {
            let size = rng.below(section.size as u64);
            bytes[section.size_field..section.size_field + 8].copy_from_slice(&size.to_le_bytes());
            format!("{} cut to {size} bytes", section.name)
        } else {
            let flips = 1 + rng.below(8);
            for _ in 0..flips {
                let at = section.offset + rng.below(section.size as u64) as usize;
                bytes[at] ^= 1 << rng.below(8);
            }
            format!("{} with {flips} bits flipped", section.name)
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            match Image::from_bytes("mutant", bytes) {
                Ok(image) => exercise(&image, variables, types, &addresses),
                Err(_) => 1,
            }
        }));
        match outcome {
            Ok(n) => errors += n,
            Err(_) => panic!("round {round} of {}: {what}: panicked", program.display()),
        }
    }
    errors
}

const C_VARIABLES: &[&str] = &[
    "KLogs",
    "KLogBuffer",
    "DebugFlags",
    "klogLevel",
    "klog_chunks",
    "klog_last_id",
];
const C_TYPES: &[&str] = &[
    "struct _KLog",
    "KLogRec",
    "Dbg_Intensity",
    "struct klog_chunk",
];

#[test]
fn mutated_gcc_dwarf_gives_errors_not_panics() {
    if !tools::runs("mutated_gcc_dwarf_gives_errors_not_panics", "gcc")
        || !tools::runs("mutated_gcc_dwarf_gives_errors_not_panics", "nm")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, flags) in [
        ("dwarf5", &["-g", "-gdwarf-5"][..]),
        ("dwarf4", &["-g", "-gdwarf-4"][..]),
        ("zlib", &["-g", "-gz=zlib"][..]),
    ] {
        let program = common::gcc(dir.path(), name, flags);
        let errors = mutate(&program, 1500, C_VARIABLES, C_TYPES);
        // The same recompressed with zstd, and with a .debug_names index to corrupt too.
        if name == "dwarf5" && tools::runs("mutated_gcc_dwarf_gives_errors_not_panics", "objcopy") {
            let zstd = dir.path().join("zstd");
            tools::output(
                std::process::Command::new("objcopy")
                    .arg("--compress-debug-sections=zstd")
                    .arg(&program)
                    .arg(&zstd),
            );
            let errors = mutate(&zstd, 1500, C_VARIABLES, C_TYPES);
            assert!(errors > 100, "zstd: only {errors} errors");
        }
        if name == "dwarf5"
            && tools::runs("mutated_gcc_dwarf_gives_errors_not_panics", "gdb-add-index")
        {
            tools::output(
                std::process::Command::new("gdb-add-index")
                    .arg("-dwarf-5")
                    .arg(&program),
            );
            let errors = mutate(&program, 1500, C_VARIABLES, C_TYPES);
            assert!(errors > 100, "with .debug_names: only {errors} errors");
        }
        // The mutations must actually reach the parser, or this test proves nothing.
        assert!(
            errors > 100,
            "{name}: only {errors} errors from 1500 mutants"
        );
    }
}

#[test]
fn mutated_rustc_dwarf_gives_errors_not_panics() {
    if !tools::runs("mutated_rustc_dwarf_gives_errors_not_panics", "rustc")
        || !tools::runs("mutated_rustc_dwarf_gives_errors_not_panics", "nm")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = common::rustc(dir.path(), "klog_fixture");
    let errors = mutate(
        &program,
        60,
        &["KLOGS", "klog_fixture::registry::EVENTS_SEEN"],
        &["klog_fixture::layout::KLog"],
    );
    assert!(errors > 5, "only {errors} errors from 60 mutants");
}

#[test]
fn absurd_uncompressed_size_is_refused_before_allocating() {
    if !tools::runs(
        "absurd_uncompressed_size_is_refused_before_allocating",
        "gcc",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = common::gcc(dir.path(), "zlib", &["-g", "-gz=zlib"]);
    let mut bytes = std::fs::read(&program).unwrap();
    let info = sections(&bytes)
        .into_iter()
        .find(|s| s.name == ".debug_info")
        .unwrap();
    // Elf64_Chdr: ch_type (4), ch_reserved (4), ch_size (8), ch_addralign (8).
    bytes[info.offset + 8..info.offset + 16].copy_from_slice(&(1u64 << 50).to_le_bytes());
    let image = Image::from_bytes("mutant", bytes).unwrap();
    match image.variable("KLogs") {
        Err(Error::Compressed { section, what, .. }) => {
            assert_eq!(section, ".debug_info");
            assert!(what.contains("uncompressed"), "{what}");
        }
        other => panic!("expected a compression error, got {other:?}"),
    }
}

#[test]
fn corrupt_unit_error_names_section_and_offset() {
    if !tools::runs("corrupt_unit_error_names_section_and_offset", "gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = common::gcc(dir.path(), "klog", &["-g"]);
    let mut bytes = std::fs::read(&program).unwrap();
    let info = sections(&bytes)
        .into_iter()
        .find(|s| s.name == ".debug_info")
        .unwrap();
    // Unit version (after the 4-byte length) set to 99.
    bytes[info.offset + 4..info.offset + 6].copy_from_slice(&99u16.to_le_bytes());
    let image = Image::from_bytes("mutant", bytes).unwrap();
    let error = image.variable("KLogs").unwrap_err();
    assert!(
        matches!(
            error,
            Error::Dwarf {
                section: ".debug_info",
                offset: 0,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        image.symbol("KLogs").map(|s| s.name).as_deref(),
        Some("KLogs")
    );
}
