//! Kernel modules for the module tests: the Debian kernel files CI extracts, `tests/data/kotest.c`
//! built with Kbuild, each allocated section placed at a kernel-like address of its own (none for
//! the sections the kernel frees or never loads), and gdb, objdump and addr2line run on them.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kcrash_harness::tools;
use object::{Object, ObjectSection};
use symbols::SectionAddresses;

/// The Linux series these tests read: `$KCRASH_LINUX_SERIES` (`5.10`, CI runs them for each
/// series the guest pipeline boots), else the pipeline's default, 6.1. The cache and /usr/src
/// hold every series the pipeline fetched.
fn series_prefix() -> String {
    let series = std::env::var("KCRASH_LINUX_SERIES")
        .unwrap_or_else(|_| kcrash_harness::linux::debian::SERIES[0].0.to_owned());
    format!("{series}.")
}

/// The release of the Debian kernel CI extracted to /var/cache/kcrash-ci (`6.1.0-48-amd64`):
/// whichever Debian ships when the cache is filled, so never written into a test.
pub fn debian_release() -> Option<String> {
    let mut found: Vec<String> = std::fs::read_dir("/var/cache/kcrash-ci/linux-image/lib/modules")
        .ok()?
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with(&series_prefix()))
        .collect();
    found.sort();
    found.pop()
}

/// A file of the Debian kernel cache: `path` with `{release}` replaced by the cached release.
pub fn debian_file(path: &str) -> PathBuf {
    let release = debian_release().unwrap_or_else(|| "NONE".into());
    PathBuf::from(path.replace("{release}", &release))
}

/// Debian's kernel headers for Kbuild, whichever release of the series the Linux guest steps
/// installed (`/usr/src/linux-headers-6.1.*-amd64`): the release moves as Debian updates it.
fn headers() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/src")
        .ok()?
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| {
                n.starts_with(&format!("linux-headers-{}", series_prefix()))
                    && n.ends_with("-amd64")
            })
        })
        .filter(|p| p.join("Makefile").exists())
        .collect();
    found.sort();
    found.pop()
}

/// `tests/data/kotest.c` built once per test run with Kbuild; `None` (having said why) when
/// the headers, make or gcc are missing.
pub fn kotest() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let headers = headers()?;
        if !tools::runs("kotest", "make") || !tools::runs("kotest", "gcc") {
            return None;
        }
        // A directory per kernel: CI runs the tests of several series at once.
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("kotest")
            .join(headers.file_name().unwrap_or_default());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(super::data("kotest.c"), dir.join("kotest.c")).unwrap();
        std::fs::write(dir.join("Kbuild"), "obj-m += kotest.o\n").unwrap();
        tools::output(
            Command::new("make")
                .arg("-C")
                .arg(&headers)
                .arg(format!("M={}", dir.display()))
                .arg("modules"),
        );
        Some(dir.join("kotest.ko"))
    });
    if built.is_none() {
        tools::not_run(
            "kotest",
            "/usr/src/linux-headers-6.1.*-amd64, make or gcc missing: kotest.ko not built",
        );
    }
    built.as_deref()
}

/// Sections the module loader frees after initialisation or does not load at all.
pub fn unloaded(name: &str) -> bool {
    name.starts_with(".init") || matches!(name, ".modinfo" | "__versions")
}

/// Every allocated section of `module` but the unloaded ones, a page apart.
pub fn layout(module: &Path) -> SectionAddresses {
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

/// The oracles that read a module of its machine: the host's gdb and binutils for x86-64,
/// gdb-multiarch and binutils-aarch64-linux-gnu's for AArch64.
pub struct Oracles {
    pub gdb: &'static str,
    pub objdump: &'static str,
    pub addr2line: &'static str,
    pub readelf: &'static str,
}

pub fn oracles(module: &Path) -> Oracles {
    if kcrash_harness::dump::elf_machine(module).unwrap() == Some(object::elf::EM_AARCH64) {
        Oracles {
            gdb: "gdb-multiarch",
            objdump: "aarch64-linux-gnu-objdump",
            addr2line: "aarch64-linux-gnu-addr2line",
            readelf: "aarch64-linux-gnu-readelf",
        }
    } else {
        Oracles {
            gdb: "gdb",
            objdump: "objdump",
            addr2line: "addr2line",
            readelf: "readelf",
        }
    }
}

/// gdb's output for `commands` with `module` added at `sections` (stdout only: a question gdb
/// cannot answer prints its error on stderr, so leaves no line).
pub fn gdb(module: &Path, sections: &SectionAddresses, commands: &[String]) -> String {
    let mut add = format!("add-symbol-file {}", module.display());
    for (name, address) in sections.iter() {
        add += &format!(" -s {name} {address:#x}");
    }
    let mut command = Command::new(oracles(module).gdb);
    command.args(["-batch", "-nx", "-iex", "set auto-load no", "-ex", &add]);
    for c in commands {
        command.arg("-ex").arg(c);
    }
    let output = command.output().expect("gdb runs");
    String::from_utf8(output.stdout).unwrap()
}

/// gdb's minimal symbols (the ELF symbol table, placed at `sections`): name → address, for
/// names it lists once. gdb's `&function` is the DWARF entry instead, which on arm64 lies past
/// the symbol by the patchable NOPs ftrace asks for.
pub fn minimal_symbols(module: &Path, sections: &SectionAddresses) -> HashMap<String, u64> {
    let output = gdb(module, sections, &["maint print msymbols".into()]);
    let mut seen = HashMap::new();
    let mut twice = HashSet::new();
    // "[27] t 0xffffffffc0a00050 oracle_line section .text  klogtest.c" ("[ 4]" below 10).
    for line in output.lines() {
        let mut words = line.split_whitespace().skip_while(|w| !w.starts_with("0x"));
        let (Some(address), Some(name)) = (words.next(), words.next()) else {
            continue;
        };
        let Some(Ok(address)) = address
            .strip_prefix("0x")
            .map(|hex| u64::from_str_radix(hex, 16))
        else {
            continue;
        };
        if seen.insert(name.to_owned(), address).is_some() {
            twice.insert(name.to_owned());
        }
    }
    seen.retain(|name, _| !twice.contains(name));
    seen
}

/// `NAME=0xADDRESS` lines, as [`address_of`]'s commands make gdb print them.
pub fn addresses(output: &str) -> HashMap<String, u64> {
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
pub fn address_of(name: &str) -> [String; 3] {
    [
        format!("echo {name}="),
        format!("output/x (unsigned long long)&'{name}'"),
        "echo \\n".into(),
    ]
}

/// `objdump -t`: each symbol's section and value, for symbols whose name is in the table once.
pub fn objdump_symbols(module: &Path) -> HashMap<String, (String, u64)> {
    let mut seen = HashMap::new();
    let mut twice = HashSet::new();
    for line in tools::output(Command::new(oracles(module).objdump).arg("-t").arg(module)).lines() {
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
