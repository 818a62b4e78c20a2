//! Any bytes as an ELF image, and as a kernel module placed at fixed section addresses (its
//! DWARF relocated): opening and every kind of question must return, never panic. Seed the
//! corpus with real images (the test fixtures built by gcc and rustc, and a module built with
//! Kbuild) so mutations start from valid DWARF and relocations.

#![no_main]

use libfuzzer_sys::fuzz_target;
use symbols::{Image, Options, SectionAddresses, TypeId};

/// Where the module's sections are said to be.
const TEXT: u64 = 0xffff_ffff_c0a0_0000;

fuzz_target!(|data: &[u8]| {
    if let Ok(image) = Image::from_bytes("fuzz-input", data.to_vec()) {
        ask(&image);
    }
    // The lookups of a large image (one unit through `.debug_aranges` and the symbol table's
    // object files, units named by their first bytes), asked of this small one.
    let quick = Options {
        quick_lookups_from: 0,
        ..Options::default()
    };
    if let Ok(image) = Image::from_bytes_with("fuzz-input", data.to_vec(), &quick) {
        image.consult("main");
        ask(&image);
    }
    let sections: SectionAddresses = [
        (".text", TEXT),
        (".rodata", TEXT + 0x1_0000),
        (".data", TEXT + 0x2_0000),
        (".bss", TEXT + 0x3_0000),
    ]
    .into_iter()
    .collect();
    if let Ok(image) = Image::relocatable_from_bytes("fuzz-input", data.to_vec(), &sections) {
        ask(&image);
        image.unloaded_symbol("kotest_init");
    }
});

/// Every kind of question.
fn ask(image: &Image) {
    let mut types: Vec<TypeId> = Vec::new();
    for name in [
        "KLogs",
        "DebugFlags",
        "klogLevel",
        "KLOGS",
        "main",
        "ko_records",
    ] {
        image.symbol(name);
        if let Ok(Some(variable)) = image.variable(name) {
            types.extend(variable.ty);
        }
    }
    for name in [
        "struct _KLog",
        "Dbg_Intensity",
        "klog_fixture::layout::KLog",
        "struct ko_record",
    ] {
        if let Ok(Some(ty)) = image.type_by_name(name) {
            types.push(ty);
        }
    }
    // Everything reachable from those types, as a printer would walk it, up to a bound.
    let mut seen = 0;
    while let Some(id) = types.pop() {
        seen += 1;
        if seen > 256 {
            break;
        }
        let _ = image.type_name(id);
        let _ = image.size_of(id);
        let _ = image.value_type(id);
        if let Ok(ty) = image.type_(id) {
            types.extend(ty.references());
        }
    }
    for address in [0, 0x1000, 0x401000, TEXT + 0x10, u64::MAX] {
        image.symbolize(address);
        let _ = image.frames(address);
    }
}
