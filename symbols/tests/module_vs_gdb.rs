//! Kernel modules opened at the addresses their sections were loaded at, checked against gdb's
//! `add-symbol-file FILE -s SECTION ADDRESS ...` given the same addresses: symbol and variable
//! addresses, struct layouts, enum values, array types, and the source line at every address of
//! the code. The modules are real: `tests/data/kotest.c` built with Kbuild against the installed
//! Debian kernel headers, Debian's own (DWARF-stripped) modules, and, when they were extracted
//! from the kernel's -dbg package, Debian's modules with their DWARF. Setup:
//! tests/common/module.rs.

mod common;

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSection};
use symbols::{Image, SymbolKind, TypeKind};

use common::module::{
    address_of, addresses, debian_file, gdb, kotest, layout, minimal_symbols, objdump_symbols,
    oracles, unloaded,
};
use kcrash_harness::tools;

const DEBIAN_MODULES: &str = "/var/cache/kcrash-ci/linux-image/lib/modules/{release}/kernel";

const DEBIAN_DEBUG_MODULES: &str =
    "/var/cache/kcrash-ci/linux-dbg/usr/lib/debug/lib/modules/{release}/kernel";

/// A module of the Debian kernel cache, if the CI extracted it: the first of `paths` (under the
/// kernel's module tree; a module moves between releases) that is there, as it is or compressed
/// as Debian ships 6.12's (`.ko.xz`, unpacked here with xz).
fn cached(dir: &str, paths: &[&str]) -> Option<PathBuf> {
    let tree = debian_file(dir);
    for module in paths {
        let path = tree.join(module);
        if path.exists() {
            return Some(path);
        }
        let compressed = tree.join(format!("{module}.xz"));
        if compressed.exists() && tools::runs("cached", "xz") {
            let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join("debian-modules")
                .join(tree.strip_prefix("/").unwrap_or(&tree))
                .join(module);
            std::fs::create_dir_all(out.parent().unwrap()).unwrap();
            let unpacked = Command::new("xz")
                .arg("-dc")
                .arg(&compressed)
                .output()
                .unwrap();
            assert!(unpacked.status.success(), "xz -dc {}", compressed.display());
            std::fs::write(&out, unpacked.stdout).unwrap();
            return Some(out);
        }
    }
    tools::not_run(
        "cached",
        &format!("none of {paths:?} is under {}", tree.display()),
    );
    None
}

/// pvpanic: one file until 5.10, a directory of three since 5.11.
const PVPANIC: &[&str] = &["drivers/misc/pvpanic/pvpanic.ko", "drivers/misc/pvpanic.ko"];

const EXT4: &[&str] = &["fs/ext4/ext4.ko"];

/// Every function and data symbol of `module` at the address gdb's minimal symbols give it, every symbol of an
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
    let from_gdb = minimal_symbols(module, &sections);
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
    // Where the object file itself gives a section an address (6.12's module linker script
    // leaves `.data` at 0x40 or 0x80, its symbols counting from there), gdb's DWARF reading
    // places the module's variables wrongly, in `.text` (it looks up the unplaced address in
    // every section); its minimal symbols place them as the kernel does, so those are the
    // oracle there.
    let addressed = file.sections().any(|s| s.address() != 0);
    let placed = if addressed {
        minimal_symbols(module, &sections)
    } else {
        HashMap::new()
    };
    for name in variables {
        let variable = image
            .variable(name)
            .unwrap()
            .unwrap_or_else(|| panic!("{name}"));
        let want = if addressed {
            Some(
                *placed
                    .get(*name)
                    .unwrap_or_else(|| panic!("{name}: no minimal symbol")),
            )
        } else {
            // gdb cannot take the address of a variable the compiler gave no location.
            from_gdb.get(*name).copied()
        };
        assert_eq!(variable.address, want, "{name}");
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
            // arm64's ALTERNATIVE puts the replacement instructions in the section's subsection
            // 1, after every function: no unit's ranges and no symbol cover them, and binutils
            // finds them in the line table alone, where kcrash does not look.
            let outside_every_function = image.symbolize(address).is_none();
            if ours.is_empty() && outside_every_function && oracles(module).gdb != "gdb" {
                continue;
            }
            // Where the DWARF names no function (padding after one, macro-made tracepoint
            // stubs), binutils names the ELF symbol there, or the one before: ours, or one at
            // the same address (6.12's `__pfx_init_module` and `__pfx_pvpanic_init` share one).
            if let ([(ours, _, _)], [(function, _, _)]) = (ours.as_slice(), frames.as_mut_slice()) {
                let symbol = image.symbolize(address).map(|(s, _)| s);
                let alias = |s: &symbols::Symbol| {
                    s.name == *function
                        || image
                            .symbol(function)
                            .is_some_and(|f| f.address == s.address)
                };
                if ours == "??" && symbol.is_none_or(|s| alias(&s)) {
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
                disputed.push((address, *offset, ours[0].1.clone(), ours[0].2));
                continue;
            }
            assert_eq!(ours, frames, "{section}+{offset:#x} ({address:#x})");
        }
    }
    let commands: Vec<String> = disputed
        .iter()
        .flat_map(|(address, _, _, _)| {
            [
                format!("echo @{address:#x}\\n"),
                format!("info line *{address:#x}"),
            ]
        })
        .collect();
    let output = gdb(module, &sections, &commands);
    let rows = OnceCell::new();
    for (address, offset, file, line) in &disputed {
        let marker = format!("@{address:#x}\n");
        let answer = output.split(&marker).nth(1).unwrap_or_default();
        // "Line 40 of \"…/percpu.h\" starts at address …"
        let said = answer.strip_prefix("Line ").and_then(|rest| {
            let (number, rest) = rest.split_once(" of \"")?;
            Some((
                base_name(rest.split('"').next()?),
                number.parse::<u32>().ok()?,
            ))
        });
        if said.as_ref() == Some(&(file.clone(), *line)) {
            continue;
        }
        // GCC's location views put several rows at one address; gdb takes the last statement
        // row, kcrash (gimli's addr2line) the last row. Ours must be one of them.
        let here = rows
            .get_or_init(|| line_rows(module))
            .range(..=offset)
            .next_back()
            .map(|(_, rows)| rows);
        assert!(
            here.is_some_and(|rows| rows.contains(&(file.clone(), *line))),
            "{address:#x}: gdb: {answer:.200}; ours: {file}:{line}; the line table's rows there: \
             {here:?}"
        );
    }
    let total: usize = code.iter().map(|(_, _, offsets)| offsets.len()).sum();
    assert!(
        with_lines * 2 > total,
        "most code has lines: {with_lines} of {total}"
    );
}

/// `readelf --debug-dump=decodedline`: for each offset where rows start, every row (file name,
/// line) the line table has there, in any of the module's code sections.
fn line_rows(module: &Path) -> BTreeMap<u64, Vec<(String, u32)>> {
    let mut command = Command::new(oracles(module).readelf);
    command.arg("--debug-dump=decodedline").arg(module);
    let mut rows: BTreeMap<u64, Vec<(String, u32)>> = BTreeMap::new();
    // "percpu.h                                      40                   0       2       x"
    for line in tools::output(&mut command).lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [file, number, address, ..] = words[..] else {
            continue;
        };
        let address = address.strip_prefix("0x").unwrap_or(address);
        if let (Ok(number), Ok(address)) = (number.parse(), u64::from_str_radix(address, 16)) {
            rows.entry(address)
                .or_default()
                .push((base_name(file), number));
        }
    }
    rows
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
    let mut command = Command::new(oracles(module).addr2line);
    command
        .args(["-a", "-f", "-i", "-j", section, "-e"])
        .arg(module);
    command.args(offsets.iter().map(|o| format!("{o:#x}")));
    let output = tools::output(&mut command);
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
    if !tools::runs("built_module_symbols_match_gdb", "gdb")
        || !tools::runs("built_module_symbols_match_gdb", "objdump")
    {
        return;
    }
    assert!(check_symbols(module) >= 6);
}

#[test]
fn built_module_dwarf_matches_gdb() {
    let Some(module) = kotest() else { return };
    if !tools::runs("built_module_dwarf_matches_gdb", "gdb") {
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

/// The arm64 guest's klogtest.ko (cross-compiled, AArch64 relocations in its DWARF sections)
/// against gdb-multiarch and binutils-aarch64-linux-gnu.
#[test]
fn arm64_module_symbols_and_dwarf_match_gdb() {
    let test = "arm64_module_symbols_and_dwarf_match_gdb";
    let Some((dir, _)) = kcrash_harness::linux::arm64::finished(test) else {
        return;
    };
    let module = dir.join("klogtest.ko");
    let tools_of = oracles(&module);
    for tool in [tools_of.gdb, tools_of.objdump, tools_of.addr2line] {
        if !tools::runs(test, tool) {
            return;
        }
    }
    assert!(check_symbols(&module) >= 6);
    check_dwarf(
        &module,
        &["KLogs", "KLogBuffer", "DebugFlags", "klogDescriptor"],
        &["struct _KLog", "struct _KLogRec", "struct _KLogDescriptor"],
        1,
    );
}

#[test]
fn debian_modules_symbols_match_gdb() {
    if !tools::runs("debian_modules_symbols_match_gdb", "gdb")
        || !tools::runs("debian_modules_symbols_match_gdb", "objdump")
    {
        return;
    }
    for module in [PVPANIC, EXT4] {
        let Some(path) = cached(DEBIAN_MODULES, module) else {
            continue;
        };
        let compared = check_symbols(&path);
        assert!(
            compared > 5,
            "{}: only {compared} symbols compared",
            path.display()
        );
    }
}

#[test]
fn debian_debug_modules_dwarf_matches_gdb() {
    if !tools::runs("debian_debug_modules_dwarf_matches_gdb", "gdb") {
        return;
    }
    if let Some(path) = cached(DEBIAN_DEBUG_MODULES, PVPANIC) {
        // 5.11 split the driver and gave it a list of instances; 5.10's keeps its port in `base`.
        let split = objdump_symbols(&path).contains_key("pvpanic_list");
        let (variables, structs): (&[&str], &[&str]) = if split {
            (
                &["pvpanic_list", "pvpanic_panic_nb", "__this_module"],
                &["struct pvpanic_instance", "struct module"],
            )
        } else {
            (
                &["base", "pvpanic_panic_nb", "__this_module"],
                &["struct notifier_block", "struct module"],
            )
        };
        check_dwarf(&path, variables, structs, 1);
    }
    if let Some(path) = cached(DEBIAN_DEBUG_MODULES, EXT4) {
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
