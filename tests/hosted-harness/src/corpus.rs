//! The hosted corpus: which crashes it holds, how they are made, and how a corpus directory is
//! checked against its manifest.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::capture::{self, Capture, Run};
use crate::coredump::{self, Memory, Verified};
use crate::manifest::{Dump, Entry, Kernel, Manifest};
use crate::oracle::{self, Expected};
use crate::programs::{self, Program};

pub const REGENERATE: &str = "cargo run --release -p kcrash-hosted-harness -- corpus";

/// Scenarios also taken with gdb's gcore, so the corpus holds cores of both producers.
pub const GCORE_SCENARIOS: [&str; 2] = ["rings", "strings"];

/// Where `corpus` writes by default.
pub fn default_dir() -> PathBuf {
    programs::repo_root().join("corpus/hosted")
}

/// Options for [`generate`].
pub struct Generate<'a> {
    /// Corpus directory to write into.
    pub out: &'a Path,
    /// Where the programs are built.
    pub target_dir: &'a Path,
    pub programs: Vec<Program>,
}

/// Builds the programs, crashes every scenario, writes images, dumps, oracle logs, expected
/// results and manifest.toml. Each entry is checked against its core before it is kept.
pub fn generate(options: &Generate) -> Result<Manifest> {
    let mut manifest = Manifest {
        version: 1,
        regenerate: REGENERATE.to_string(),
        kernels: Vec::new(),
        entries: Vec::new(),
    };
    for &program in &options.programs {
        let built = program.build(options.target_dir)?;
        let image_rel = format!("{0}/{0}", program.name());
        let image = options.out.join(&image_rel);
        std::fs::create_dir_all(image.parent().expect("has a parent"))?;
        std::fs::copy(&built, &image)
            .with_context(|| format!("copying {} to {}", built.display(), image.display()))?;
        manifest.kernels.push(Kernel {
            name: program.name().to_string(),
            image: image_rel,
            built_by: program.build_command(),
            committed: program.committed(),
        });
        for &scenario in program.scenarios() {
            manifest
                .entries
                .push(crash_entry(options.out, program, &image, scenario, None)?);
            if program.committed() && GCORE_SCENARIOS.contains(&scenario) {
                let entry =
                    crash_entry(options.out, program, &image, scenario, Some(Capture::Gcore))?;
                manifest.entries.push(entry);
            }
        }
    }
    manifest.store(options.out)?;
    Ok(manifest)
}

/// One crash: runs `image` in `scenario`, takes its core (`capture`, or the kernel's with the
/// gcore fallback), derives and checks the expected result, and describes the files.
pub fn crash_entry(
    out: &Path,
    program: Program,
    image: &Path,
    scenario: &str,
    capture: Option<Capture>,
) -> Result<Entry> {
    let suffix = if capture == Some(Capture::Gcore) {
        "-gcore"
    } else {
        ""
    };
    let dir_rel = format!("{}/{scenario}{suffix}", program.name());
    let dir = out.join(&dir_rel);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    let run = Run {
        program: image,
        scenario,
        dir: &dir,
        timeout: Duration::from_secs(if program.committed() { 60 } else { 600 }),
    };
    let crashed = match capture {
        None => capture::crash(&run),
        Some(how) => capture::crash_with(&run, how),
    }
    .with_context(|| format!("crashing {dir_rel}"))?;
    let expected = derive_file(&crashed.console)?;
    std::fs::write(
        dir.join("expected.json"),
        serde_json::to_string_pretty(&expected)? + "\n",
    )?;
    let verified =
        verify_core(&crashed.core, &expected).with_context(|| format!("checking {dir_rel}"))?;
    let gzip = program.committed();
    let core = if gzip {
        gzip_file(&crashed.core)?
    } else {
        crashed.core.clone()
    };
    for scratch in ["stderr.log", "gdb.log"] {
        let _ = std::fs::remove_file(dir.join(scratch));
    }
    eprintln!(
        "{dir_rel}: {} records, {} torn, {} unreadable strings checked in the core",
        verified.records, verified.torn, verified.unreadable_strings
    );
    let file_name = core.file_name().expect("a file").to_string_lossy();
    Ok(Entry {
        kernel: program.name().to_string(),
        scenario: scenario.to_string(),
        cmdline: if crashed.capture == Capture::Gcore {
            format!("{scenario} --stop")
        } else {
            scenario.to_string()
        },
        console: format!("{dir_rel}/console.log"),
        expected: format!("{dir_rel}/expected.json"),
        committed: program.committed(),
        dumps: vec![Dump {
            format: crashed.capture.format().to_string(),
            producer: crashed.producer,
            path: format!("{dir_rel}/{file_name}"),
            gzip,
            magic: "elf-core".to_string(),
        }],
    })
}

/// The expected result the oracle in a console log implies.
pub fn derive_file(console: &Path) -> Result<Expected> {
    let text = std::fs::read_to_string(console)
        .with_context(|| format!("reading {}", console.display()))?;
    oracle::derive(&text)
        .with_context(|| format!("deriving the expected result from {}", console.display()))
}

/// Checks a core (plain or gzip) against the expected result.
pub fn verify_core(core: &Path, expected: &Expected) -> Result<Verified> {
    let bytes = coredump::load(core)?;
    let memory = Memory::parse(&bytes).with_context(|| format!("reading {}", core.display()))?;
    coredump::verify(&memory, expected).with_context(|| format!("checking {}", core.display()))
}

/// Replaces `path` by `path.gz`.
fn gzip_file(path: &Path) -> Result<PathBuf> {
    let mut gz_name = path.as_os_str().to_owned();
    gz_name.push(".gz");
    let gz_path = PathBuf::from(gz_name);
    let mut input = std::fs::File::open(path)?;
    let output = std::fs::File::create(&gz_path)?;
    let mut encoder = flate2::write::GzEncoder::new(output, flate2::Compression::best());
    std::io::copy(&mut input, &mut encoder)?;
    encoder.finish()?.flush()?;
    std::fs::remove_file(path)?;
    Ok(gz_path)
}

/// Checks a corpus directory against its manifest: every image of a present program is a PIE,
/// each expected.json is what the oracle derives from its console log, and each dump is an ELF
/// core holding the records the oracle says. Entries with `committed = false` are checked only
/// if their console log exists. Returns the number of entries checked.
pub fn check(dir: &Path) -> Result<usize> {
    let manifest = Manifest::load(dir)?;
    for kernel in &manifest.kernels {
        let image = dir.join(&kernel.image);
        if !kernel.committed && !image.exists() {
            continue;
        }
        let bytes =
            std::fs::read(&image).with_context(|| format!("reading {}", image.display()))?;
        if coredump::elf_type(&bytes) != Some(object::elf::ET_DYN) {
            bail!(
                "{}: not a position-independent ELF executable",
                image.display()
            );
        }
    }
    let mut checked = 0;
    for entry in &manifest.entries {
        if !entry.committed && !dir.join(&entry.console).exists() {
            continue;
        }
        check_entry(dir, &manifest, entry)
            .with_context(|| format!("entry {} ({})", entry.console, entry.cmdline))?;
        checked += 1;
    }
    Ok(checked)
}

fn check_entry(dir: &Path, manifest: &Manifest, entry: &Entry) -> Result<()> {
    if !manifest.kernels.iter().any(|k| k.name == entry.kernel) {
        bail!("kernel {} is not in the manifest", entry.kernel);
    }
    let derived = derive_file(&dir.join(&entry.console))?;
    let expected_path = dir.join(&entry.expected);
    let stored: Expected = serde_json::from_str(&std::fs::read_to_string(&expected_path)?)
        .with_context(|| format!("parsing {}", expected_path.display()))?;
    if stored != derived {
        bail!(
            "{} differs from what the oracle derives from {}",
            entry.expected,
            entry.console
        );
    }
    if entry.dumps.is_empty() {
        bail!("no dumps");
    }
    for dump in &entry.dumps {
        if dump.gzip != dump.path.ends_with(".gz") {
            bail!(
                "{}: gzip = {} disagrees with the file name",
                dump.path,
                dump.gzip
            );
        }
        if dump.magic != "elf-core" {
            bail!("{}: unknown magic {:?}", dump.path, dump.magic);
        }
        verify_core(&dir.join(&dump.path), &stored)?;
    }
    Ok(())
}
