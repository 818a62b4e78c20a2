//! A Rust program built by rustc: a `#[no_mangle]` static array of a `#[repr(C)]` struct with
//! atomic and raw-pointer fields, and a static in a module. Checked against the program's own
//! `offset_of!`/`size_of` output, its run-time addresses, and `nm`.

mod common;

use common::{nm, rustc, Facts};
use kcrash_harness::tools;
use object::{Object, ObjectSection};
use symbols::{Encoding, Image, TypeKind};

#[test]
fn rust_statics_types_and_atomics() {
    if !tools::runs("rust_statics_types_and_atomics", "rustc")
        || !tools::runs("rust_statics_types_and_atomics", "nm")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    check(&rustc(dir.path(), "klog_fixture"));
}

/// gdb-add-index's `.debug_names` holds Rust names as full paths, to their unit.
#[test]
fn rust_with_debug_names_from_gdb_add_index() {
    if !tools::runs("rust_with_debug_names_from_gdb_add_index", "rustc")
        || !tools::runs("rust_with_debug_names_from_gdb_add_index", "nm")
        || !tools::runs("rust_with_debug_names_from_gdb_add_index", "gdb-add-index")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = rustc(dir.path(), "klog_fixture");
    tools::output(
        std::process::Command::new("gdb-add-index")
            .arg("-dwarf-5")
            .arg(&program),
    );
    check(&program);
}

fn check(program: &std::path::Path) {
    let program = program.to_owned();
    let facts = Facts::of(&program);
    let nm = nm(&program);
    let image = Image::open(&program).unwrap();

    let klogs = image.variable("KLOGS").unwrap().unwrap();
    assert_eq!(klogs.address, Some(nm["KLOGS"]));
    let array = klogs.ty.unwrap();
    assert_eq!(
        image.type_name(array).unwrap(),
        "[klog_fixture::layout::KLog; 5]"
    );
    assert_eq!(
        image.size_of(array).unwrap(),
        Some(facts.get("sizeof KLOGS"))
    );

    // The struct by its path, with offsets from offset_of!.
    let klog = image
        .type_by_name("klog_fixture::layout::KLog")
        .unwrap()
        .unwrap();
    assert_eq!(image.size_of(klog).unwrap(), Some(facts.get("sizeof KLog")));
    let klog = image.type_(klog).unwrap();
    assert_eq!(
        (klog.name.as_deref(), klog.path.as_deref()),
        (Some("KLog"), Some("klog_fixture::layout::KLog"))
    );
    for member in ["subsystem", "name", "buffer", "next_write", "flags"] {
        assert_eq!(
            klog.member(member).unwrap().offset,
            facts.get(&format!("offsetof KLog {member}")),
            "{member}"
        );
    }

    // AtomicU64 prints as its u64, AtomicPtr<u64> as its pointer.
    let subsystem = klog.member("subsystem").unwrap().ty.unwrap();
    assert_eq!(
        image.type_name(subsystem).unwrap(),
        "core::sync::atomic::AtomicU64"
    );
    let value = image.type_(image.value_type(subsystem).unwrap()).unwrap();
    assert_eq!(value.kind, TypeKind::Base(Encoding::Unsigned));
    assert_eq!(
        (value.name.as_deref(), value.byte_size),
        (Some("u64"), Some(8))
    );
    let buffer = klog.member("buffer").unwrap().ty.unwrap();
    let pointer = image.type_(image.value_type(buffer).unwrap()).unwrap();
    let TypeKind::Pointer(Some(target)) = pointer.kind else {
        panic!("AtomicPtr<u64> holds {:?}", pointer.kind)
    };
    assert_eq!(image.type_name(target).unwrap(), "u64");
    let name = image
        .type_(klog.member("name").unwrap().ty.unwrap())
        .unwrap();
    let TypeKind::Pointer(Some(c_char)) = name.kind else {
        panic!("name is {:?}", name.kind)
    };
    assert_eq!(image.size_of(c_char).unwrap(), Some(1));

    // A static in a module: by path, by plain name and by linkage name, all the same one.
    let (linkage, address) = nm
        .iter()
        .find(|(name, _)| name.starts_with("_ZN12klog_fixture8registry11EVENTS_SEEN"))
        .expect("nm shows EVENTS_SEEN");
    for name in [
        "klog_fixture::registry::EVENTS_SEEN",
        "EVENTS_SEEN",
        linkage,
    ] {
        let events = image.variable(name).unwrap().expect(name);
        assert_eq!(events.address, Some(*address), "{name}");
        assert_eq!(events.linkage_name.as_deref(), Some(linkage.as_str()));
    }
}

#[test]
fn load_bias_of_a_running_pie() {
    if !tools::runs("load_bias_of_a_running_pie", "rustc")
        || !tools::runs("load_bias_of_a_running_pie", "nm")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = rustc(dir.path(), "klog_fixture");
    // The run-time addresses the program printed while it ran as a position-independent
    // executable; the bias is fixed by one symbol and must then place everything else.
    let facts = Facts::of(&program);
    let mut image = Image::open(&program).unwrap();
    let bias = facts
        .get("address KLOGS")
        .wrapping_sub(image.symbol("KLOGS").unwrap().address);
    image.set_load_bias(bias);

    let events = image
        .variable("klog_fixture::registry::EVENTS_SEEN")
        .unwrap()
        .unwrap();
    assert_eq!(events.address, Some(facts.get("address EVENTS_SEEN")));
    let main = facts.get("address main");
    let (symbol, offset) = image.symbolize(main).unwrap();
    assert_eq!(symbol.address + offset, main);
    assert!(
        symbol.demangled().starts_with("klog_fixture::main"),
        "{symbol:?}"
    );
    let frames = image.frames(main).unwrap();
    let outer = frames.last().expect("line information for main");
    assert_eq!(outer.function.as_deref(), Some("klog_fixture::main"));
    assert!(outer.file.as_deref().unwrap().ends_with("rust_fixture.rs"));
}

/// `size` bytes at link-time `address`, from the section that holds them in the file.
fn initial_bytes(file: &object::File<'_>, address: u64, size: u64) -> Vec<u8> {
    let section = file
        .sections()
        .find(|s| s.address() <= address && address + size <= s.address() + s.size())
        .expect("a section holds the static");
    let data = section.data().unwrap();
    let start = (address - section.address()) as usize;
    data[start..start + size as usize].to_vec()
}

fn le(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(word)
}

/// Rust enums: the variant their discriminant selects, read from the statics' initial bytes
/// with the model, is the one the program's own `Debug` names; and the fields are right.
#[test]
fn rust_enums_select_the_variant_the_program_holds() {
    if !tools::runs("rust_enums_select_the_variant_the_program_holds", "rustc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = rustc(dir.path(), "klog_fixture");
    let facts = Facts::of(&program);
    let elf = std::fs::read(&program).unwrap();
    let file = object::File::parse(&*elf).unwrap();
    let image = Image::open(&program).unwrap();
    for name in ["MODE", "STOPPED", "MAYBE", "NICHE"] {
        let var = image
            .variable(&format!("klog_fixture::state::{name}"))
            .unwrap()
            .unwrap();
        let ty = var.ty.unwrap();
        let size = image.size_of(ty).unwrap().unwrap();
        let bytes = initial_bytes(&file, var.address.unwrap(), size);
        let TypeKind::Variants(variants) = &image.type_(ty).unwrap().kind else {
            panic!("{name} is not a Rust enum")
        };
        let discriminant = variants.discriminant.as_ref().expect("a discriminant");
        let at = discriminant.offset as usize;
        let width = variants.discriminant_size.unwrap() as usize;
        let variant = variants.select(le(&bytes[at..at + width])).unwrap();
        let expected = facts.text(&format!("variant {name}"));
        assert_eq!(variant.member.name.as_deref(), Some(expected), "{name}");

        // The held fields: Busy(5) and Stopped { code: -3 }.
        let fields = image.type_(variant.member.ty.unwrap()).unwrap();
        let field = |field: &str, width: usize| {
            let member = fields.member(field).unwrap();
            let at = (variant.member.offset + member.offset) as usize;
            le(&bytes[at..at + width])
        };
        match name {
            "MODE" => assert_eq!(field("__0", 8), 5),
            "STOPPED" => assert_eq!(field("code", 4) as u32 as i32, -3),
            "MAYBE" => assert_eq!(field("__0", 4), 7),
            _ => {}
        }
    }
}
