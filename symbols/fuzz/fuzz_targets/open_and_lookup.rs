//! Any bytes as an ELF image: opening and every kind of question must return, never panic.
//! Seed the corpus with real images (the test fixtures built by gcc and rustc) so mutations
//! start from valid DWARF.

#![no_main]

use libfuzzer_sys::fuzz_target;
use symbols::{Image, TypeId};

fuzz_target!(|data: &[u8]| {
    let Ok(image) = Image::from_bytes("fuzz-input", data.to_vec()) else {
        return;
    };
    let mut types: Vec<TypeId> = Vec::new();
    for name in ["KLogs", "DebugFlags", "klogLevel", "KLOGS", "main"] {
        image.symbol(name);
        if let Ok(Some(variable)) = image.variable(name) {
            types.extend(variable.ty);
        }
    }
    for name in ["struct _KLog", "Dbg_Intensity", "klog_fixture::layout::KLog"] {
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
    for address in [0, 0x1000, 0x401000, u64::MAX] {
        image.symbolize(address);
        let _ = image.frames(address);
    }
});
