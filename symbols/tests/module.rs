//! Kernel modules opened at the addresses their sections were loaded at, checked against gdb's
//! `add-symbol-file FILE -s SECTION ADDRESS ...` given the same addresses: symbol and variable
//! addresses, struct layouts, enum values, array types, and the source line at every address of
//! the code. The modules are real: `tests/data/kotest.c` built with Kbuild against the installed
//! Debian kernel headers, Debian's own (DWARF-stripped) modules, and, when they were extracted
//! from the kernel's -dbg package, Debian's modules with their DWARF.
//!
//! Each allocated section gets a page of its own at an arbitrary kernel-like address, except the
//! sections the kernel frees or never loads (`.init.*`, `.modinfo`, `__versions`), which get
//! none: their symbols must come back as not loaded, never at some made-up address.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use object::{Object, ObjectSection};
use symbols::{Error, Image, ImageSet, SectionAddresses, SymbolKind, TypeKind};

const HEADERS: &str = "/usr/src/linux-headers-6.1.0-56-amd64";
const DEBIAN_MODULES: &str = "/var/cache/kcrash-ci/linux-image/lib/modules/6.1.0-56-amd64/kernel";
const DEBIAN_DEBUG_MODULES: &str =
    "/var/cache/kcrash-ci/linux-dbg/usr/lib/debug/lib/modules/6.1.0-56-amd64/kernel";
const VMLINUX: &str = "/var/cache/kcrash-ci/linux-dbg/usr/lib/debug/boot/vmlinux-6.1.0-56-amd64";

/// Says why a test checks nothing here; fails instead when `KCRASH_REQUIRE_TOOLS=1`.
fn not_run(why: &str) {
    assert!(
        std::env::var("KCRASH_REQUIRE_TOOLS").as_deref() != Ok("1"),
        "required (KCRASH_REQUIRE_TOOLS=1) but missing: {why}"
    );
    eprintln!("NOT RUN: {why}; this test checks nothing here");
}

/// `tests/data/kotest.c` built once per test run with Kbuild; `None` (having said why) when
/// the headers, make or gcc are missing.
fn kotest() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        if !Path::new(HEADERS).join("Makefile").exists() {
            return None;
        }
        if !common::have("make") || !common::have("gcc") {
            return None;
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kotest");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(common::data("kotest.c"), dir.join("kotest.c")).unwrap();
        std::fs::write(dir.join("Kbuild"), "obj-m += kotest.o\n").unwrap();
        common::run(
            Command::new("make")
                .arg("-C")
                .arg(HEADERS)
                .arg(format!("M={}", dir.display()))
                .arg("modules"),
        );
        Some(dir.join("kotest.ko"))
    });
    if built.is_none() {
        not_run(&format!(
            "{HEADERS}, make or gcc missing: kotest.ko not built"
        ));
    }
    built.as_deref()
}

/// A file from the Debian kernel cache, if the CI extracted it.
fn cached(dir: &str, module: &str) -> Option<PathBuf> {
    let path = Path::new(dir).join(module);
    if path.exists() {
        Some(path)
    } else {
        not_run(&format!("{} is not there", path.display()));
        None
    }
}

/// Sections the module loader frees after initialisation or does not load at all.
fn unloaded(name: &str) -> bool {
    name.starts_with(".init") || matches!(name, ".modinfo" | "__versions")
}

/// Every allocated section of `module` but the unloaded ones, a page apart.
fn layout(module: &Path) -> SectionAddresses {
    let data = std::fs::read(module).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut next = 0xffff_ffff_c0a0_0000u64;
    let mut sections = SectionAddresses::new();
    for section in file.sections() {
        let allocated = matches!(section.flags(),
            object::SectionFlags::Elf { sh_flags } if sh_flags & u64::from(object::elf::SHF_ALLOC) != 0);
        let name = section.name().unwrap();
        if allocated && section.size() > 0 && !unloaded(name) {
            sections.insert(name, next);
            next += section.size().div_ceil(0x1000).max(1) * 0x1000;
        }
    }
    sections
}

/// gdb's output for `commands` with `module` added at `sections` (stdout only: a question gdb
/// cannot answer prints its error on stderr, so leaves no line).
fn gdb(module: &Path, sections: &SectionAddresses, commands: &[String]) -> String {
    let mut add = format!("add-symbol-file {}", module.display());
    for (name, address) in sections.iter() {
        add += &format!(" -s {name} {address:#x}");
    }
    let mut command = Command::new("gdb");
    command.args(["-batch", "-nx", "-iex", "set auto-load no", "-ex", &add]);
    for c in commands {
        command.arg("-ex").arg(c);
    }
    let output = command.output().expect("gdb runs");
    String::from_utf8(output.stdout).unwrap()
}

/// `NAME=0xADDRESS` lines, as [`address_of`]'s commands make gdb print them.
fn addresses(output: &str) -> HashMap<String, u64> {
    output
        .lines()
        .filter_map(|line| {
            let (name, hex) = line.split_once("=0x")?;
            Some((name.to_owned(), u64::from_str_radix(hex.trim(), 16).ok()?))
        })
        .collect()
}

/// gdb commands printing `NAME=0xADDRESS` (gdb's `printf` needs a running program, and
/// without one `unsigned long` is 32 bits wide).
fn address_of(name: &str) -> [String; 3] {
    [
        format!("echo {name}="),
        format!("output/x (unsigned long long)&'{name}'"),
        "echo \\n".into(),
    ]
}

/// `objdump -t`: each symbol's section and value, for symbols whose name is in the table once.
fn objdump_symbols(module: &Path) -> HashMap<String, (String, u64)> {
    let mut seen = HashMap::new();
    let mut twice = HashSet::new();
    for line in common::run(Command::new("objdump").arg("-t").arg(module)).lines() {
        // "0000000000000000 l     F .init.text\t000000000000002c kotest_init"
        let (Some(value), Some(flags), Some(rest)) =
            (line.get(..16), line.get(17..24), line.get(25..))
        else {
            continue;
        };
        // Section ('d') and file ('f') symbols name no object.
        if flags.contains(['d', 'f']) {
            continue;
        }
        let Ok(value) = u64::from_str_radix(value, 16) else {
            continue;
        };
        let Some((section, size_name)) = rest.split_once('\t') else {
            continue;
        };
        let Some((_, name)) = size_name.split_once(' ') else {
            continue;
        };
        if seen
            .insert(name.to_owned(), (section.to_owned(), value))
            .is_some()
        {
            twice.insert(name.to_owned());
        }
    }
    seen.retain(|name, _| !twice.contains(name));
    seen
}

/// Every function and data symbol of `module` at the address gdb gives it, every symbol of an
/// unloaded section reported as not loaded with objdump's section and offset. Returns how many
/// placed symbols were compared.
fn check_symbols(module: &Path) -> usize {
    let sections = layout(module);
    let image = Image::open_relocatable(module, &sections).unwrap();
    let objdump = objdump_symbols(module);
    let mut placed = Vec::new();
    for (name, (section, value)) in &objdump {
        if !unloaded(section) {
            continue;
        }
        assert!(image.symbol(name).is_none(), "{name} in unloaded {section}");
        let symbol = image
            .unloaded_symbol(name)
            .unwrap_or_else(|| panic!("{name} in {section} not reported as unloaded"));
        assert_eq!(symbol.section.as_deref(), Some(section.as_str()), "{name}");
        assert_eq!(symbol.offset, *value, "{name}");
    }
    for symbol in image.symbols() {
        let sized = matches!(symbol.kind, SymbolKind::Function | SymbolKind::Data);
        if sized && objdump.contains_key(&symbol.name) {
            placed.push(symbol);
        }
    }
    let commands: Vec<String> = placed.iter().flat_map(|s| address_of(&s.name)).collect();
    let from_gdb = addresses(&gdb(module, &sections, &commands));
    for symbol in &placed {
        let expected = from_gdb
            .get(&symbol.name)
            .unwrap_or_else(|| panic!("gdb has no address for {}", symbol.name));
        assert_eq!(symbol.address, *expected, "{}", symbol.name);
        let section = &objdump[&symbol.name].0;
        assert_eq!(symbol.section.as_deref(), Some(section.as_str()));
        let at = symbol.address + symbol.size / 2;
        // An alias (init_module for the init function) may be preferred: same address.
        let found = image.symbolize(at).map(|(s, _)| s.address);
        assert_eq!(found, Some(symbol.address), "{} at {at:#x}", symbol.name);
    }
    placed.len()
}

/// A struct's top-level members as `ptype /o` shows them: name → bit offset from the start.
fn gdb_layout(output: &str) -> (HashMap<String, u64>, Option<u64>) {
    let mut members = HashMap::new();
    let mut depth = 0usize;
    let mut opened_at = None;
    let mut total = None;
    for line in output.lines() {
        if let Some(size) = line.split("total size (bytes):").nth(1) {
            if depth == 1 {
                total = size.trim().trim_end_matches("*/").trim().parse().ok();
            }
            continue;
        }
        // "/*      8: 0   |       4 */    u32 id : 12;"
        let (offset, code) = match line
            .trim()
            .strip_prefix("/*")
            .and_then(|l| l.split_once("*/"))
        {
            Some((numbers, code)) => {
                let position = numbers.split('|').next().unwrap().trim();
                let (byte, bit) = position.split_once(':').unwrap_or((position, "0"));
                (
                    byte.trim()
                        .parse::<u64>()
                        .ok()
                        .map(|b| b * 8 + bit.trim().parse::<u64>().unwrap_or(0)),
                    code.trim(),
                )
            }
            None => (None, line.trim()),
        };
        let opens = code.ends_with('{');
        if code.starts_with('}') {
            depth -= 1;
            if depth == 1 {
                let name = code.trim_start_matches('}').trim().trim_end_matches(';');
                members.insert(name.to_owned(), opened_at.take().unwrap());
            }
        } else if depth == 1 && code.ends_with(';') {
            let declarator = code.trim_end_matches(';');
            let declarator = declarator.split(" : ").next().unwrap();
            // A function pointer: "void (*exit)(void)".
            let declarator = match declarator.split_once("(*") {
                Some((_, rest)) => rest.split(')').next().unwrap(),
                None => declarator,
            };
            let name = declarator.split('[').next().unwrap();
            let name = name.rsplit([' ', '*']).next().unwrap();
            members.insert(name.to_owned(), offset.unwrap());
        }
        if opens {
            if depth == 1 {
                opened_at = offset;
            }
            depth += 1;
        }
    }
    (members, total)
}

/// What symbols says of `image`'s DWARF against gdb given the same addresses: each variable's
/// address, each struct's member offsets and size; and the frames (function, file, line,
/// inlined ones too) at every `line_step`th byte of the loaded code against binutils
/// `addr2line`. (gdb's `info line` is not the oracle for lines: where the line table has
/// several rows at one address it takes the `is_stmt` one, addr2line the last.)
fn check_dwarf(module: &Path, variables: &[&str], structs: &[&str], line_step: u64) {
    let sections = layout(module);
    let image = Image::open_relocatable(module, &sections).unwrap();
    let mut commands: Vec<String> = variables.iter().flat_map(|v| address_of(v)).collect();
    for name in structs {
        commands.push(format!("echo @{name}\\n"));
        commands.push(format!("ptype /o {name}"));
    }
    // The code that is loaded: every executable section with an address.
    let data = std::fs::read(module).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut code: Vec<(String, u64, Vec<u64>)> = Vec::new();
    for section in file.sections() {
        let name = section.name().unwrap();
        let executable = matches!(section.flags(),
            object::SectionFlags::Elf { sh_flags } if sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0);
        if let (true, Some(start)) = (executable, sections.get(name)) {
            let offsets = (0..section.size()).step_by(line_step as usize).collect();
            code.push((name.to_owned(), start, offsets));
        }
    }
    let output = gdb(module, &sections, &commands);
    let from_gdb = addresses(&output);
    for name in variables {
        let variable = image
            .variable(name)
            .unwrap()
            .unwrap_or_else(|| panic!("{name}"));
        // gdb cannot take the address of a variable the compiler gave no location.
        assert_eq!(variable.address, from_gdb.get(*name).copied(), "{name}");
    }
    // The output in pieces, each after the `@what` marker echoed before its command.
    let mut answers: HashMap<&str, String> = HashMap::new();
    let mut current = None;
    for line in output.lines() {
        if let Some(what) = line.strip_prefix('@') {
            current = Some(what);
        } else if let Some(what) = current {
            let answer = answers.entry(what).or_default();
            answer.push_str(line);
            answer.push('\n');
        }
    }
    for name in structs {
        let (expected, total) = gdb_layout(&answers[name]);
        assert!(!expected.is_empty(), "gdb gave no layout for {name}");
        let id = image.type_by_name(name).unwrap().unwrap();
        let ty = image.type_(id).unwrap();
        let TypeKind::Struct(members) = &ty.kind else {
            panic!("{name} is not a struct: {ty:?}");
        };
        let mut ours = HashMap::new();
        for member in members {
            let bits = match member.bit_field {
                Some(field) => field.bit_offset,
                None => member.offset * 8,
            };
            ours.insert(member.name.clone().unwrap_or_default(), bits);
        }
        // gdb leaves anonymous members unnamed, and so does DWARF.
        ours.remove("");
        expected.iter().for_each(|(member, bits)| {
            if !member.is_empty() && !member.starts_with('}') {
                assert_eq!(ours.get(member), Some(bits), "{name}.{member}");
            }
        });
        assert_eq!(image.size_of(id).unwrap(), total, "sizeof({name})");
    }
    let mut with_lines = 0;
    let mut disputed = Vec::new();
    for (section, start, offsets) in &code {
        let expected = addr2line(module, section, offsets);
        for (offset, mut frames) in offsets.iter().zip(expected) {
            let address = start + offset;
            let ours: Vec<(String, String, u32)> = image
                .frames(address)
                .unwrap()
                .into_iter()
                .map(|f| {
                    let file = f.file.as_deref().map_or("??".into(), base_name);
                    (f.function.unwrap_or("??".into()), file, f.line.unwrap_or(0))
                })
                .collect();
            with_lines += usize::from(!ours.is_empty());
            // Where the DWARF names no function (padding after one, macro-made tracepoint
            // stubs), binutils names the ELF symbol there, or the one before.
            if let ([(ours, _, _)], [(function, _, _)]) = (ours.as_slice(), frames.as_mut_slice()) {
                let symbol = image.symbolize(address).map(|(s, _)| s.name);
                if ours == "??" && symbol.is_none_or(|s| s == *function) {
                    *function = "??".into();
                }
            }
            // binutils 2.40 sometimes names the unit's file for the innermost frame of inlined
            // code where the line table names the header (gdb and readelf agree with the
            // table): such a difference is settled by gdb below.
            let same_but_first_file = ours.len() == frames.len()
                && ours
                    .iter()
                    .zip(&frames)
                    .enumerate()
                    .all(|(i, (a, b))| (&a.0, a.2) == (&b.0, b.2) && (i == 0 || a.1 == b.1));
            if ours != frames && same_but_first_file {
                disputed.push((address, ours[0].1.clone(), ours[0].2));
                continue;
            }
            assert_eq!(ours, frames, "{section}+{offset:#x} ({address:#x})");
        }
    }
    let commands: Vec<String> = disputed
        .iter()
        .flat_map(|(address, _, _)| {
            [
                format!("echo @{address:#x}\\n"),
                format!("info line *{address:#x}"),
            ]
        })
        .collect();
    let output = gdb(module, &sections, &commands);
    for (address, file, line) in &disputed {
        let marker = format!("@{address:#x}\n");
        let answer = output.split(&marker).nth(1).unwrap_or_default();
        let expected = format!("Line {line} of \"");
        let (_, rest) = answer
            .split_once(&expected)
            .unwrap_or_else(|| panic!("{address:#x}: gdb: {answer:.200}; ours: {file}:{line}"));
        let gdb_file = rest.split('"').next().unwrap();
        assert_eq!(base_name(gdb_file), *file, "{address:#x}");
    }
    let total: usize = code.iter().map(|(_, _, offsets)| offsets.len()).sum();
    assert!(
        with_lines * 2 > total,
        "most code has lines: {with_lines} of {total}"
    );
}

fn base_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or(path.into(), |n| n.to_string_lossy().into_owned())
}

/// binutils `addr2line -a -f -i -j SECTION`: the frames (function, file name, line) at each
/// offset in `section`, innermost first; empty where there is no line information. binutils
/// relocates the module's DWARF itself, section-relative.
fn addr2line(module: &Path, section: &str, offsets: &[u64]) -> Vec<Vec<(String, String, u32)>> {
    let mut command = Command::new("addr2line");
    command
        .args(["-a", "-f", "-i", "-j", section, "-e"])
        .arg(module);
    command.args(offsets.iter().map(|o| format!("{o:#x}")));
    let output = common::run(&mut command);
    let mut all: Vec<Vec<(String, String, u32)>> = Vec::new();
    let mut lines = output.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("0x") {
            all.push(Vec::new());
            continue;
        }
        let location = lines.next().unwrap();
        let (file, number) = location.rsplit_once(':').unwrap();
        let number = number.split(' ').next().unwrap().parse().unwrap_or(0);
        if file != "??" {
            all.last_mut()
                .unwrap()
                .push((line.to_owned(), base_name(file), number));
        }
    }
    // "ext4_link" (from the symbol table) at "namei.c:?": a unit covers the address, but no
    // line does.
    for frames in &mut all {
        if let [(_, _, 0)] = frames.as_slice() {
            frames.clear();
        }
    }
    all
}

#[test]
fn built_module_symbols_match_gdb() {
    let Some(module) = kotest() else { return };
    if !common::have("gdb") || !common::have("objdump") {
        return;
    }
    assert!(check_symbols(module) >= 6);
}

#[test]
fn built_module_dwarf_matches_gdb() {
    let Some(module) = kotest() else { return };
    if !common::have("gdb") {
        return;
    }
    check_dwarf(
        module,
        &[
            "ko_records",
            "ko_grid",
            "ko_counter",
            "ko_banner",
            "ko_head",
        ],
        &["struct ko_record", "struct module"],
        1,
    );
    let sections = layout(module);
    let image = Image::open_relocatable(module, &sections).unwrap();
    // __initdata is freed: no address, and its symbol says where it was.
    let initdata = image.variable("ko_initdata").unwrap().unwrap();
    assert_eq!(initdata.address, None);
    let symbol = image.unloaded_symbol("ko_initdata").unwrap();
    assert_eq!(symbol.section.as_deref(), Some(".init.data"));
    assert!(image.symbol("kotest_init").is_none());
    assert!(image.frames(symbol.offset).unwrap().is_empty());
    // Enumerators and a two-dimensional array, against gdb.
    let output = gdb(
        module,
        &sections,
        &[
            "echo enum=".into(),
            "output KO_QUIET + 0".into(),
            "echo ,".into(),
            "output KO_LOUD + 0".into(),
            "echo ,".into(),
            "output KO_SHOUT + 0".into(),
            "echo \\n".into(),
            "whatis ko_grid".into(),
            "echo sizeof=".into(),
            "output sizeof(ko_grid)".into(),
            "echo \\n".into(),
        ],
    );
    let answer = |prefix: &str| {
        output
            .lines()
            .find_map(|line| line.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("gdb printed no {prefix}: {output}"))
    };
    let values: Vec<i128> = answer("enum=")
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    let level = image.type_by_name("enum ko_level").unwrap().unwrap();
    let TypeKind::Enum(level) = &image.type_(level).unwrap().kind else {
        panic!("enum ko_level is not an enum");
    };
    for (name, value) in ["KO_QUIET", "KO_LOUD", "KO_SHOUT"].iter().zip(&values) {
        let ours = level.enumerators.iter().find(|e| e.name == *name).unwrap();
        assert_eq!(ours.value, *value, "{name}");
    }
    let grid = image.variable("ko_grid").unwrap().unwrap().ty.unwrap();
    assert_eq!(image.type_name(grid).unwrap(), answer("type = "));
    assert_eq!(image.size_of(grid).unwrap(), answer("sizeof=").parse().ok());
}

#[test]
fn debian_modules_symbols_match_gdb() {
    if !common::have("gdb") || !common::have("objdump") {
        return;
    }
    for module in ["drivers/misc/pvpanic/pvpanic.ko", "fs/ext4/ext4.ko"] {
        let Some(path) = cached(DEBIAN_MODULES, module) else {
            continue;
        };
        let compared = check_symbols(&path);
        assert!(compared > 5, "{module}: only {compared} symbols compared");
    }
}

#[test]
fn debian_debug_modules_dwarf_matches_gdb() {
    if !common::have("gdb") {
        return;
    }
    if let Some(path) = cached(DEBIAN_DEBUG_MODULES, "drivers/misc/pvpanic/pvpanic.ko") {
        check_dwarf(
            &path,
            &["pvpanic_list", "pvpanic_panic_nb", "__this_module"],
            &["struct pvpanic_instance", "struct module"],
            1,
        );
    }
    if let Some(path) = cached(DEBIAN_DEBUG_MODULES, "fs/ext4/ext4.ko") {
        check_dwarf(
            &path,
            &["ext4_fs_type", "ext4_sops", "ext4_li_info", "__this_module"],
            &[
                "struct ext4_sb_info",
                "struct ext4_inode_info",
                "struct super_block",
            ],
            97,
        );
    }
}

/// The kernel and a module searched as one: each name from the image that has it, each
/// address from the image whose sections hold it.
#[test]
fn kernel_and_module_as_one_set() {
    let Some(module) = kotest() else { return };
    let Some(vmlinux) = Path::new(VMLINUX).exists().then_some(VMLINUX) else {
        return not_run(&format!("{VMLINUX} is not there"));
    };
    let sections = layout(module);
    let mut kernel = Image::open(vmlinux).unwrap();
    let kaslr = 0x1c00_0000;
    kernel.set_load_bias(kaslr);
    let printk = kernel.symbol("_printk").unwrap();
    let mut set = ImageSet::new();
    set.push(kernel);
    set.push(Image::open_relocatable(module, &sections).unwrap());
    let (image, symbol) = set.symbol("ko_exported").unwrap();
    assert_eq!(image.path(), module);
    let in_text = objdump_symbols(module)["ko_exported"].1;
    assert_eq!(
        Some(symbol.address),
        sections.get(".text").map(|t| t + in_text)
    );
    let (image, symbol, offset) = set.symbolize(symbol.address + 3).unwrap();
    assert_eq!(
        (image.path(), symbol.name.as_str(), offset),
        (module, "ko_exported", 3)
    );
    let (image, symbol, offset) = set.symbolize(printk.address + 1).unwrap();
    assert_eq!(
        (image.path(), symbol.name.as_str(), offset),
        (Path::new(vmlinux), "_printk", 1)
    );
    assert!(set.image_at(0x1000).is_none());
    assert!(set.symbolize(0xffff_ffff_c0a0_0000 - 1).is_none());
    let (image, variable) = set.variable("ko_records").unwrap().unwrap();
    assert_eq!(image.path(), module);
    assert_eq!(
        variable.address,
        image.symbol("ko_records").map(|s| s.address)
    );
    let frames = set
        .frames(image.symbol("ko_bump").unwrap().address + 5)
        .unwrap();
    assert_eq!(
        frames.first().and_then(|f| f.function.as_deref()),
        Some("ko_bump")
    );
}

/// Sections named in the addresses that the file does not have: not the loaded file.
#[test]
fn addresses_for_sections_the_file_lacks_are_refused() {
    let Some(module) = kotest() else { return };
    let mut sections = layout(module);
    sections.insert(".text.unlikely", 0xffff_ffff_c0b0_0000);
    match Image::open_relocatable(module, &sections) {
        Err(Error::Placement { what, .. }) => assert!(what.contains(".text.unlikely"), "{what}"),
        other => panic!("expected a placement error, got {other:?}"),
    }
    // An executable has no sections to place.
    let vmlinux_like = std::env::current_exe().unwrap();
    assert!(matches!(
        Image::open_relocatable(&vmlinux_like, &SectionAddresses::new()),
        Err(Error::Placement { .. })
    ));
}

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
