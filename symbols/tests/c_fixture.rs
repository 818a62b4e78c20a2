//! The Tera KLog structures compiled by gcc (DWARF 5, DWARF 4, compressed sections, separate
//! debug files): everything the crate reads is checked against the compiler's own answers (the
//! fixture program prints sizeof/offsetof/bit positions/enum values), `nm` and binutils
//! `addr2line`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{gcc, nm, Facts};
use kcrash_harness::tools;
use symbols::{Encoding, Error, Image, Options, SymbolKind, TypeKind};

/// Checks every variable, type and line the fixture has against the oracles.
fn check_image(image: &Image, program: &Path) {
    let facts = Facts::of(program);
    let nm = nm(program);
    let bias = image.load_bias();

    // Globals: address from nm, size from sizeof.
    for (name, type_name) in [
        ("KLogs", "KLog [5]"),
        ("KLogBuffer", "int64_t [4096]"),
        ("DebugFlags", "Dbg_Intensity [5]"),
    ] {
        let var = image.variable(name).unwrap().expect(name);
        assert_eq!(var.address, Some(nm[name] + bias), "{name} address");
        let ty = var.ty.expect("typed");
        assert_eq!(image.type_name(ty).unwrap(), type_name);
        assert_eq!(
            image.size_of(ty).unwrap(),
            Some(facts.get(&format!("sizeof {name}")))
        );
    }
    let level = image.variable("klogLevel").unwrap().unwrap();
    assert_eq!(level.address, Some(nm["klogLevel"] + bias));
    let int = image.type_(level.ty.unwrap()).unwrap();
    assert_eq!(int.kind, TypeKind::Base(Encoding::Signed));
    assert_eq!((int.name.as_deref(), int.byte_size), (Some("int"), Some(4)));

    // Structs: every member offset from offsetof, by the tag name and through the typedef.
    for (tag, typedef, members) in [
        (
            "struct _KLog",
            "KLog",
            &[
                "subsystem",
                "name",
                "num_recs",
                "rec_size",
                "header",
                "buffer",
                "buffer_size_1",
                "next_write",
            ][..],
        ),
        (
            "struct _KLogRec",
            "KLogRec",
            &[
                "header", "id", "proc_dom", "clock", "desc", "data1", "data2", "data3",
            ][..],
        ),
    ] {
        let id = image.type_by_name(tag).unwrap().expect(tag);
        let through_typedef = image.type_by_name(typedef).unwrap().expect(typedef);
        assert_eq!(image.value_type(through_typedef).unwrap(), id);
        assert_eq!(image.type_name(id).unwrap(), tag);
        assert_eq!(
            image.size_of(through_typedef).unwrap(),
            Some(facts.get(&format!("sizeof {typedef}")))
        );
        let ty = image.type_(id).unwrap();
        let TypeKind::Struct(found) = &ty.kind else {
            panic!("{tag} is {:?}", ty.kind)
        };
        assert_eq!(found.len(), members.len());
        for member in members {
            let offset = ty.member(member).expect(member).offset;
            assert_eq!(offset, facts.get(&format!("offsetof {typedef} {member}")));
        }
    }
    let klog = image.value_type(image.type_by_name("KLog").unwrap().unwrap());
    let klog = image.type_(klog.unwrap()).unwrap();
    let name = image
        .type_(klog.member("name").unwrap().ty.unwrap())
        .unwrap();
    let TypeKind::Pointer(Some(char_type)) = name.kind else {
        panic!("KLog.name is {:?}", name.kind)
    };
    assert_eq!(image.type_name(char_type).unwrap(), "char");
    assert!(matches!(
        image.type_(char_type).unwrap().kind,
        TypeKind::Base(Encoding::SignedChar | Encoding::UnsignedChar)
    ));

    // Bit-fields: the bit the compiler sets for each.
    let flags = image.type_by_name("Dbg_Intensity").unwrap().unwrap();
    let flags = image.type_(image.value_type(flags).unwrap()).unwrap();
    assert_eq!(flags.byte_size, Some(facts.get("sizeof Dbg_Intensity")));
    for member in ["d_prolog", "d_terse", "d_verbose", "d_klog", "d_klogprintf"] {
        let bits = flags
            .member(member)
            .unwrap()
            .bit_field
            .expect("a bit-field");
        assert_eq!(bits.bit_size, 1);
        assert_eq!(
            bits.bit_offset,
            facts.get(&format!("bit Dbg_Intensity {member}")),
            "{member}"
        );
    }

    // The enum, through a variable of its type and by name.
    let last = image.variable("klog_last_id").unwrap().unwrap();
    assert_eq!(image.type_name(last.ty.unwrap()).unwrap(), "Dbg_Id");
    let ids = image
        .type_(image.value_type(last.ty.unwrap()).unwrap())
        .unwrap();
    let TypeKind::Enum(ids) = &ids.kind else {
        panic!("Dbg_Id is {:?}", ids.kind)
    };
    let names: Vec<&str> = ids.enumerators.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "DBG_NONE",
            "DBG_PARCHORE",
            "DBG_FS",
            "DBG_SCHED",
            "DBG_VM",
            "DBG_MAX"
        ]
    );
    for e in &ids.enumerators {
        assert_eq!(e.value, i128::from(facts.get(&format!("enum {}", e.name))));
    }

    // Arrays: two dimensions, a flexible array member, and the struct's size around them.
    let chunk = image.type_by_name("struct klog_chunk").unwrap().unwrap();
    assert_eq!(
        image.size_of(chunk).unwrap(),
        Some(facts.get("sizeof klog_chunk"))
    );
    let chunk = image.type_(chunk).unwrap();
    for member in ["count", "grid", "recs"] {
        assert_eq!(
            chunk.member(member).unwrap().offset,
            facts.get(&format!("offsetof struct klog_chunk {member}"))
        );
    }
    let grid = chunk.member("grid").unwrap().ty.unwrap();
    let grid_array = image.type_(image.value_type(grid).unwrap()).unwrap();
    let TypeKind::Array(grid_array) = &grid_array.kind else {
        panic!("grid is {:?}", grid_array.kind)
    };
    assert_eq!(grid_array.dims, [Some(3), Some(4)]);
    assert_eq!(image.size_of(grid).unwrap(), Some(96));
    let recs = image
        .type_(chunk.member("recs").unwrap().ty.unwrap())
        .unwrap();
    let TypeKind::Array(recs) = &recs.kind else {
        panic!("recs is {:?}", recs.kind)
    };
    assert_eq!(recs.dims, [None]);
    let pointer = image.variable("klog_chunks").unwrap().unwrap().ty.unwrap();
    assert_eq!(image.type_name(pointer).unwrap(), "struct klog_chunk *");

    // ELF symbols.
    let symbol = image.symbol("KLogs").unwrap();
    assert_eq!(symbol.address, nm["KLogs"] + bias);
    assert_eq!(symbol.size, facts.get("sizeof KLogs"));
    assert_eq!(symbol.section.as_deref(), Some(".bss"));
    assert_eq!(symbol.kind, SymbolKind::Data);
    let (inside, offset) = image.symbolize(nm["KLogs"] + bias + 0x48).unwrap();
    assert_eq!((inside.name.as_str(), offset), ("KLogs", 0x48));
    // Past its 320 bytes an address is no longer in KLogs.
    let past = image.symbolize(nm["KLogs"] + bias + 320);
    assert_ne!(past.map(|(s, _)| s.name).as_deref(), Some("KLogs"));

    // Lines: binutils addr2line says where main starts.
    let main = nm["main"];
    let expected = tools::output(
        Command::new("addr2line")
            .arg("-e")
            .arg(program)
            .arg(format!("{main:#x}")),
    );
    let (file, line) = expected.trim().rsplit_once(':').unwrap();
    let frames = image.frames(main + bias).unwrap();
    let outer = frames.last().expect("a frame at main");
    assert_eq!(outer.function.as_deref(), Some("main"));
    assert_eq!(outer.file.as_deref(), Some(file));
    assert_eq!(outer.line, Some(line.parse().unwrap()));
    // The last address of the address space (a garbage pointer from a dump) is in no unit.
    assert_eq!(image.frames(bias.wrapping_sub(1)).unwrap(), []);
    let (function, at) = image.symbolize(main + bias + 1).unwrap();
    assert_eq!(
        (function.name.as_str(), function.kind, at),
        ("main", SymbolKind::Function, 1)
    );
}

fn temp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn dwarf5() {
    if !tools::runs("dwarf5", "gcc") {
        return;
    }
    let dir = temp();
    let program = gcc(dir.path(), "klog", &["-g", "-gdwarf-5"]);
    check_image(&Image::open(&program).unwrap(), &program);
}

/// The lookups a large image makes first (one unit, found through the symbol's object and
/// `.debug_aranges`), made on the fixture by asking for them from any size: the same answers.
#[test]
fn quick_lookups_answer_as_the_full_index() {
    if !tools::runs("quick_lookups_answer_as_the_full_index", "gcc") {
        return;
    }
    let dir = temp();
    let program = gcc(dir.path(), "klog", &["-g", "-gdwarf-5"]);
    let options = Options {
        quick_lookups_from: 0,
        ..Options::default()
    };
    check_image(&Image::open_with(&program, &options).unwrap(), &program);
}

#[test]
fn dwarf4_with_old_bit_offsets() {
    if !tools::runs("dwarf4_with_old_bit_offsets", "gcc") {
        return;
    }
    let dir = temp();
    let program = gcc(dir.path(), "klog", &["-g", "-gdwarf-4"]);
    check_image(&Image::open(&program).unwrap(), &program);
}

#[test]
fn compressed_sections() {
    if !tools::runs("compressed_sections", "gcc") || !tools::runs("compressed_sections", "readelf")
    {
        return;
    }
    let dir = temp();
    let program = gcc(dir.path(), "klog", &["-g", "-gz=zlib"]);
    let sections = tools::output(Command::new("readelf").arg("-SW").arg(&program));
    let info = sections
        .lines()
        .find(|l| l.contains(" .debug_info "))
        .unwrap();
    assert!(
        info.split_whitespace().any(|flags| flags == "C"),
        "gcc -gz did not compress: {info}"
    );
    check_image(&Image::open(&program).unwrap(), &program);
}

/// The old GNU form: sections renamed `.zdebug_*`, each starting with "ZLIB" and its size.
#[test]
fn gnu_zdebug_sections() {
    if !tools::runs("gnu_zdebug_sections", "gcc") || !tools::runs("gnu_zdebug_sections", "readelf")
    {
        return;
    }
    let dir = temp();
    let program = gcc(dir.path(), "klog", &["-g", "-gz=zlib-gnu"]);
    let sections = tools::output(Command::new("readelf").arg("-SW").arg(&program));
    assert!(
        sections.contains(".zdebug_info"),
        "gcc wrote no .zdebug_info"
    );
    check_image(&Image::open(&program).unwrap(), &program);
}

/// zstd-compressed sections (ELFCOMPRESS_ZSTD), as `objcopy --compress-debug-sections=zstd`
/// writes them (and as distribution kernels ship).
#[test]
fn zstd_compressed_sections() {
    if !tools::runs("zstd_compressed_sections", "gcc")
        || !tools::runs("zstd_compressed_sections", "objcopy")
        || !tools::runs("zstd_compressed_sections", "readelf")
    {
        return;
    }
    let dir = temp();
    let program = gcc(dir.path(), "klog", &["-g"]);
    let compressed = dir.path().join("klog.zstd");
    tools::output(
        Command::new("objcopy")
            .arg("--compress-debug-sections=zstd")
            .arg(&program)
            .arg(&compressed),
    );
    let details = tools::output(Command::new("readelf").arg("-t").arg(&compressed));
    assert!(
        details.contains("ZSTD"),
        "objcopy did not compress with zstd"
    );
    check_image(&Image::open(&compressed).unwrap(), &program);
}

#[test]
fn load_bias_moves_every_address() {
    if !tools::runs("load_bias_moves_every_address", "gcc") {
        return;
    }
    let dir = temp();
    let program = gcc(dir.path(), "klog", &["-g"]);
    let mut image = Image::open(&program).unwrap();
    image.set_load_bias(0x7f3a_5c00_0000);
    check_image(&image, &program);
}

/// `objcopy --only-keep-debug` into a separate file, and the program stripped of its DWARF.
fn split(dir: &Path, program: &Path) -> (PathBuf, PathBuf) {
    let debug = dir.join("klog.debug");
    let stripped = dir.join("klog.stripped");
    tools::output(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(program)
            .arg(&debug),
    );
    tools::output(
        Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(&stripped)
            .arg(program),
    );
    (debug, stripped)
}

#[test]
fn separate_debug_file_by_build_id() {
    if !tools::runs("separate_debug_file_by_build_id", "gcc")
        || !tools::runs("separate_debug_file_by_build_id", "objcopy")
        || !tools::runs("separate_debug_file_by_build_id", "strip")
    {
        return;
    }
    let dir = temp();
    let program = gcc(dir.path(), "klog", &["-g", "-Wl,--build-id"]);
    let (debug, stripped) = split(dir.path(), &program);
    let image = Image::open_with(
        &stripped,
        &Options {
            debug_dirs: vec![],
            ..Options::default()
        },
    )
    .unwrap();
    assert!(
        image.variable("KLogs").is_err(),
        "no debug file is known yet"
    );

    let id = image.build_id().expect("linked with --build-id");
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let store = dir.path().join("debug-root");
    let at = store.join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&at).unwrap();
    std::fs::rename(&debug, at.join(format!("{}.debug", &hex[2..]))).unwrap();
    let image = Image::open_with(
        &stripped,
        &Options {
            debug_dirs: vec![store],
            ..Options::default()
        },
    )
    .unwrap();
    assert!(image
        .debug_path()
        .unwrap()
        .starts_with(dir.path().join("debug-root")));
    check_image(&image, &program);
}

#[test]
fn separate_debug_file_by_debuglink() {
    if !tools::runs("separate_debug_file_by_debuglink", "gcc")
        || !tools::runs("separate_debug_file_by_debuglink", "objcopy")
        || !tools::runs("separate_debug_file_by_debuglink", "strip")
    {
        return;
    }
    let dir = temp();
    let program = gcc(dir.path(), "klog", &["-g"]);
    let (debug, stripped) = split(dir.path(), &program);
    let linked = dir.path().join("klog.linked");
    tools::output(
        Command::new("objcopy")
            .arg(format!("--add-gnu-debuglink={}", debug.display()))
            .arg(&stripped)
            .arg(&linked),
    );
    let image = Image::open_with(
        &linked,
        &Options {
            debug_dirs: vec![],
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(image.debug_path(), Some(debug.as_path()));
    check_image(&image, &program);

    // A file of that name from another build fails the CRC check and is not used.
    let other = gcc(dir.path(), "other", &["-g", "-gdwarf-4"]);
    tools::output(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&other)
            .arg(&debug),
    );
    let image = Image::open_with(
        &linked,
        &Options {
            debug_dirs: vec![],
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(image.debug_path(), None);
}

#[test]
fn stripped_image_still_has_elf_symbols() {
    if !tools::runs("stripped_image_still_has_elf_symbols", "gcc")
        || !tools::runs("stripped_image_still_has_elf_symbols", "objcopy")
        || !tools::runs("stripped_image_still_has_elf_symbols", "strip")
    {
        return;
    }
    let dir = temp();
    let program = gcc(dir.path(), "klog", &["-g"]);
    let (_, stripped) = split(dir.path(), &program);
    let nm = nm(&program);
    let image = Image::open_with(
        &stripped,
        &Options {
            debug_dirs: vec![],
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(image.symbol("KLogs").unwrap().address, nm["KLogs"]);
    assert_eq!(image.symbolize(nm["main"]).unwrap().0.name, "main");
    match image.variable("KLogs") {
        Err(Error::NoDebugInfo { path }) => assert_eq!(path, stripped),
        other => panic!("expected NoDebugInfo, got {other:?}"),
    }
    match image.frames(nm["main"]) {
        Err(Error::NoDebugInfo { .. }) => {}
        other => panic!("expected NoDebugInfo, got {other:?}"),
    }
}

/// Every address of an optimised `main` (with `klog_reserve` inlined into it): the same frames,
/// innermost first, with the same function, file and line as binutils `addr2line -i`.
#[test]
fn inlined_frames_match_binutils() {
    if !tools::runs("inlined_frames_match_binutils", "gcc")
        || !tools::runs("inlined_frames_match_binutils", "addr2line")
        || !tools::runs("inlined_frames_match_binutils", "nm")
    {
        return;
    }
    let dir = temp();
    let program = gcc(dir.path(), "klog", &["-g", "-O2"]);
    let image = Image::open(&program).unwrap();
    let main = image.symbol("main").unwrap();
    let addresses: Vec<String> = (main.address..main.address + main.size)
        .map(|a| format!("{a:#x}"))
        .collect();
    let expected = tools::output(
        Command::new("addr2line")
            .args(["-a", "-f", "-i", "-e"])
            .arg(&program)
            .args(&addresses),
    );
    let mut lines = expected.lines().peekable();
    let mut inlined = 0;
    while let Some(address) = lines.next() {
        let address = u64::from_str_radix(address.trim_start_matches("0x"), 16).unwrap();
        let mut want = Vec::new();
        while let Some(function) = lines.next_if(|l| !l.starts_with("0x")) {
            let place = lines.next().unwrap();
            let place = place.split(" (discriminator").next().unwrap();
            let (file, line) = place.rsplit_once(':').unwrap();
            want.push((
                function.to_owned(),
                file.to_owned(),
                line.parse::<u32>().ok(),
            ));
        }
        let got: Vec<_> = image
            .frames(address)
            .unwrap()
            .into_iter()
            .map(|f| {
                (
                    f.function.unwrap_or_default(),
                    f.file.unwrap_or_default(),
                    f.line,
                )
            })
            .collect();
        assert_eq!(got, want, "at {address:#x}");
        inlined += usize::from(got.len() > 1);
    }
    assert!(inlined > 0, "gcc -O2 inlined nothing into main");
}

/// With a `.debug_names` index (gdb-add-index writes one that names each name's unit), every
/// answer is the same.
#[test]
fn with_debug_names_from_gdb_add_index() {
    if !tools::runs("with_debug_names_from_gdb_add_index", "gcc")
        || !tools::runs("with_debug_names_from_gdb_add_index", "gdb-add-index")
        || !tools::runs("with_debug_names_from_gdb_add_index", "readelf")
    {
        return;
    }
    let dir = temp();
    let program = gcc(dir.path(), "klog", &["-g"]);
    tools::output(Command::new("gdb-add-index").arg("-dwarf-5").arg(&program));
    let sections = tools::output(Command::new("readelf").arg("-SW").arg(&program));
    assert!(
        sections.contains(".debug_names"),
        "gdb-add-index wrote no .debug_names"
    );
    check_image(&Image::open(&program).unwrap(), &program);
}

/// A relocatable object's DWARF is wrong until relocated: refused, while its symbols work.
#[test]
fn relocatable_object_is_refused() {
    if !tools::runs("relocatable_object_is_refused", "gcc") {
        return;
    }
    let dir = temp();
    let object = gcc(dir.path(), "klog.o", &["-g", "-c"]);
    let image = Image::open(&object).unwrap();
    assert_eq!(image.symbol("KLogs").unwrap().size, 320);
    match image.variable("KLogs") {
        Err(Error::Elf { what, .. }) => assert!(what.contains("relocat"), "{what}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Entry point, ELF type and PT_LOAD headers against `readelf`, and file bytes at a segment's
/// offset against the file itself.
#[test]
fn program_headers_match_readelf() {
    if !tools::runs("program_headers_match_readelf", "gcc")
        || !tools::runs("program_headers_match_readelf", "readelf")
    {
        return;
    }
    let dir = temp();
    let program = common::gcc(dir.path(), "klog", &["-g"]);
    let image = Image::open(&program).unwrap();
    let header = tools::output(Command::new("readelf").arg("-hW").arg(&program));
    let entry = header
        .lines()
        .find_map(|l| l.trim().strip_prefix("Entry point address:"))
        .unwrap();
    assert_eq!(
        image.entry(),
        u64::from_str_radix(entry.trim().trim_start_matches("0x"), 16).unwrap()
    );
    assert_eq!(image.is_position_independent(), header.contains("DYN ("));
    // readelf -lW: "LOAD 0xOFFSET 0xVADDR 0xPADDR 0xFILESZ 0xMEMSZ FLAGS ALIGN"
    let phdrs = tools::output(Command::new("readelf").arg("-lW").arg(&program));
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let want: Vec<(u64, u64, u64, u64, u64)> = phdrs
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (hex(f[2]), hex(f[3]), hex(f[1]), hex(f[4]), hex(f[5]))
        })
        .collect();
    let got: Vec<_> = image
        .load_segments()
        .iter()
        .map(|s| (s.vaddr, s.paddr, s.file_offset, s.file_size, s.mem_size))
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    let bytes = std::fs::read(&program).unwrap();
    let seg = image.load_segments()[0];
    let off = seg.file_offset as usize;
    assert_eq!(
        image.file_bytes(seg.file_offset, 16).unwrap(),
        &bytes[off..off + 16]
    );
    assert!(image.file_bytes(bytes.len() as u64 - 1, 2).is_none());
    assert!(image.file_bytes(u64::MAX, 2).is_none());
}

/// The symbol listing holds what `nm` lists, at nm's addresses, in address order.
#[test]
fn symbol_listing_matches_nm() {
    if !tools::runs("symbol_listing_matches_nm", "gcc")
        || !tools::runs("symbol_listing_matches_nm", "nm")
        || !tools::runs("symbol_listing_matches_nm", "readelf")
    {
        return;
    }
    let dir = temp();
    let program = gcc(dir.path(), "klog", &["-g"]);
    let nm = nm(&program);
    let image = Image::open_with(
        &program,
        &Options {
            debug_dirs: vec![],
            ..Options::default()
        },
    )
    .unwrap();
    let names: std::collections::HashSet<&str> = image.symbol_names().collect();
    // Every function and data object readelf lists as defined in a section.
    let listing = tools::output(Command::new("readelf").arg("-sW").arg(&program));
    let defined: Vec<&str> = listing
        .lines()
        .filter_map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                [_, _, _, "FUNC" | "OBJECT", _, _, ndx, name]
                    if ndx != "UND" && ndx != "ABS" && !name.contains('@') =>
                {
                    Some(name)
                }
                _ => None,
            },
        )
        .collect();
    assert!(defined.len() > 10);
    for name in defined {
        assert!(names.contains(name), "{name} missing from symbol_names");
    }
    let listed: Vec<_> = image.symbols().collect();
    assert!(listed.windows(2).all(|w| w[0].address <= w[1].address));
    for name in ["main", "KLogs", "KLogBuffer", "klogLevel"] {
        let sym = listed.iter().find(|s| s.name == name).expect(name);
        assert_eq!(sym.address, nm[name], "{name}");
    }
    assert_eq!(
        listed
            .iter()
            .map(|s| s.name.as_str())
            .collect::<std::collections::HashSet<_>>(),
        names
    );
}
