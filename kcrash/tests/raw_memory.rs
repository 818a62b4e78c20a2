//! Raw physical memory images (`FILE@ADDRESS`) through the real binary, on QEMU's own producer:
//! the bare kernel's `rings` crash saved with QMP `pmemsave` reads exactly as QEMU's ELF dump
//! (`dump-guest-memory` paging=false) of the same stopped guest — `klog 0 full`, the ring table,
//! physical memory — and `sys` names the format. The pair comes from the corpus (`KCRASH_CORPUS`,
//! else the committed one) when its manifest lists the raw image; otherwise the harness crashes
//! the kernel into a temporary directory (QEMU needed: NOT RUN without it, a failure with
//! KCRASH_REQUIRE_TOOLS=1).

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

mod common;

use common::{kcrash, text};
use kcrash::regress::manifest::Manifest;
use kcrash_harness::corpus::{self, Kernel};
use kcrash_harness::dump::DumpFormat;
use kcrash_harness::kernel::KernelBuild;
use kcrash_harness::qemu::{self, Boot};
use kcrash_harness::run::stdout;
use kcrash_harness::tools;

/// One crash as raw memory and as QEMU's ELF dump, with the kernel that ran.
struct Pair {
    /// `FILE@ADDRESS`, as kcrash takes it.
    raw: PathBuf,
    elf: PathBuf,
    image: PathBuf,
    /// The guest's RAM, all of which the raw image holds from physical 0.
    ram: u64,
    /// A fresh crash's directory, kept while the tests run.
    _scratch: Option<tempfile::TempDir>,
}

/// The corpus's raw image of `bare/rings`, if its manifest lists one.
fn from_corpus() -> Option<Pair> {
    let dir = std::env::var_os("KCRASH_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(corpus::default_dir);
    let manifest = Manifest::load(&dir).ok()?;
    let entry = manifest.entries.iter().find(|e| e.name == "bare/rings")?;
    let of = |format: DumpFormat| entry.dumps.iter().find(|d| d.format == format.name());
    let (raw, elf) = (of(DumpFormat::Raw)?, of(DumpFormat::Elf)?);
    eprintln!("raw memory from {}", dir.join(&raw.path).display());
    Some(Pair {
        raw: raw.argument(&dir),
        elf: dir.join(&elf.path),
        image: dir.join(&manifest.kernel("bare")?.image),
        ram: u64::from(KernelBuild::Bare.memory_mib()) << 20,
        _scratch: None,
    })
}

/// The bare kernel built and crashed in `rings` now, dumped as ELF and saved with `pmemsave`.
fn fresh() -> Pair {
    let scratch = tempfile::tempdir().unwrap();
    let image = Kernel::Qemu(KernelBuild::Bare)
        .build()
        .expect("the bare kernel builds");
    let cmdline = "klog.scenario=rings";
    let boot = Boot {
        image: &image,
        cmdline,
        memory_mib: KernelBuild::Bare.memory_mib(),
        cpus: KernelBuild::Bare.cpus(),
        timeout: Duration::from_secs(120),
    };
    let crash = qemu::crash_and_dump(&boot, scratch.path(), &[DumpFormat::Elf, DumpFormat::Raw])
        .expect("the rings crash and its dumps");
    let path = |format: DumpFormat| {
        crash
            .dumps
            .iter()
            .find(|(f, _)| *f == format)
            .map(|(_, p)| p.clone())
            .unwrap()
    };
    let mut raw = path(DumpFormat::Raw).into_os_string();
    raw.push(format!("@{:#x}", DumpFormat::RAW_PHYS_START));
    Pair {
        raw: raw.into(),
        elf: path(DumpFormat::Elf),
        ram: u64::from(boot.memory_mib) << 20,
        image,
        _scratch: Some(scratch),
    }
}

/// The pair, made once for the file's tests; None (said on stderr) without QEMU.
fn pair(test: &str) -> Option<&'static Pair> {
    static PAIR: OnceLock<Option<Pair>> = OnceLock::new();
    let pair = PAIR.get_or_init(|| {
        if let Some(pair) = from_corpus() {
            return Some(pair);
        }
        // Said by each test below that then checks nothing.
        tools::missing(&[tools::QEMU]).is_empty().then(fresh)
    });
    if pair.is_none() {
        tools::available_for(test, &[tools::QEMU]);
    }
    pair.as_ref()
}

/// kcrash's standard output of `commands` on `files`, which must succeed.
fn run(files: &[&PathBuf], commands: &[&str], what: &str) -> String {
    let mut args: Vec<String> = vec!["-s".into()];
    for c in commands {
        args.extend(["-c".into(), (*c).into()]);
    }
    args.extend(files.iter().map(|f| f.display().to_string()));
    stdout(&kcrash().run(&args), what)
}

#[test]
fn klog_reads_as_in_qemus_elf_dump() {
    let Some(p) = pair("klog_reads_as_in_qemus_elf_dump") else {
        return;
    };
    for command in ["klog 0 full", "klog -s --json", "klog 0 --json -n 16"] {
        let raw = run(&[&p.raw, &p.image], &[command], "raw");
        let elf = run(&[&p.elf, &p.image], &[command], "elf");
        assert!(raw.lines().count() >= 16, "{command}: {raw}");
        // Byte for byte: neither has virtual mappings of its own, so even the reasons given
        // for unreadable %s addresses are the same.
        assert_eq!(raw, elf, "{command}");
    }
}

#[test]
fn physical_memory_is_the_elf_dumps() {
    let Some(p) = pair("physical_memory_is_the_elf_dumps") else {
        return;
    };
    let end = p.ram - 0x20;
    let reads = [
        "rd -p 0x0 16".to_string(),
        "rd -p 0x100000 64".into(),
        "rd -p 0x1ff000 64".into(),
        format!("rd -p {end:#x} 4"),
    ];
    let reads: Vec<&str> = reads.iter().map(String::as_str).collect();
    let raw = run(&[&p.raw], &reads, "raw rd -p");
    assert_eq!(raw, run(&[&p.elf], &reads, "elf rd -p"));
    // Past the guest's RAM, both say nothing is there.
    let past = format!("rd -p {:#x} 1", p.ram);
    let out = kcrash().run(["-s", "-c", &past, p.raw.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        text(&out.stdout).contains("unmapped (no memory at this address in the dump)"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn sys_names_the_format_and_the_range() {
    let Some(p) = pair("sys_names_the_format_and_the_range") else {
        return;
    };
    let sys = run(&[&p.raw, &p.image], &["sys"], "sys");
    let file = p.raw.to_str().unwrap().rsplit_once('@').unwrap().0;
    for line in [
        format!("    DUMPFILE: {file}"),
        "      FORMAT: raw memory".into(),
        format!(
            "    PHYSICAL: [0x0, {:#x}): the file, from its first byte",
            p.ram
        ),
        "        CPUS: unknown (a raw memory image holds no CPU state)".into(),
        "  VMCOREINFO: none in the dump".into(),
    ] {
        assert!(sys.lines().any(|l| l == line), "no {line:?} in\n{sys}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&run(&[&p.raw], &["sys --json"], "sys --json")).unwrap();
    assert_eq!(json["format"], "raw memory");
    assert_eq!(json["image"], "none");
    assert_eq!(json["stops"], serde_json::json!([]));
}

/// Without the image there is only physical memory and no CPU state: kcrash finds the KLog
/// descriptor by scanning it, translates virtual addresses through the page tables the
/// descriptor records, and prints every record as the ELF dump read with the image does.
#[test]
fn without_an_image_klog_reads_through_the_descriptor() {
    let Some(p) = pair("without_an_image_klog_reads_through_the_descriptor") else {
        return;
    };
    let summary: serde_json::Value =
        serde_json::from_str(&run(&[&p.raw], &["klog -s --json"], "raw klog -s")).unwrap();
    assert_eq!(summary["layout"]["source"], "scan", "{summary}");
    let notes = summary["layout"]["notes"].to_string();
    assert!(notes.contains("page tables at physical"), "{notes}");
    // --raw: without the image no pointer a schema types has a symbol to name it by.
    for command in ["klog 0 full --raw", "klog 0 --json -n 16 --raw"] {
        let raw = run(&[&p.raw], &[command], "raw, no image");
        let elf = run(&[&p.elf, &p.image], &[command], "elf");
        assert_eq!(raw, elf, "{command}");
    }
}

/// A kernel that cannot say where its page tables are: the descriptor's `self` address and the
/// physical address it was found at imply the kernel's one linear map, which kcrash then uses
/// for every address (and says so).
#[test]
fn without_page_tables_the_descriptor_implies_a_linear_map() {
    let Some(p) = pair("without_page_tables_the_descriptor_implies_a_linear_map") else {
        return;
    };
    use klog_runtime::descriptor;
    let (file, at) = p.raw.to_str().unwrap().rsplit_once('@').unwrap();
    let dump = dumpfmt::Dump::open_raw(file, 0).expect("raw image");
    let mut bytes = vec![0u8; p.ram as usize];
    dump.read_phys(0, &mut bytes).unwrap();
    let magic = descriptor::stored_magic();
    let d = bytes.windows(16).position(|w| w == magic).unwrap();
    bytes[d + 0x60..d + 0x68].fill(0);
    assert!(descriptor::reseal(&mut bytes[d..]));
    let dir = tempfile::tempdir().unwrap();
    let edited = dir.path().join("memory.raw");
    std::fs::write(&edited, &bytes).unwrap();
    let edited = PathBuf::from(format!("{}@{at}", edited.display()));
    let summary: serde_json::Value =
        serde_json::from_str(&run(&[&edited], &["klog -s --json"], "klog -s")).unwrap();
    let notes = summary["layout"]["notes"].to_string();
    assert!(notes.contains("linear map"), "{notes}");
    let raw = run(&[&edited], &["klog 0 full --raw"], "raw, no page tables");
    let elf = run(&[&p.elf, &p.image], &["klog 0 full --raw"], "elf");
    assert_eq!(raw, elf);
}
