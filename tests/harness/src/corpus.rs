//! The corpus: which crashes it holds, how they are made, and how a corpus directory is
//! checked against its manifest.

use crate::dump::{DumpFormat, Magic};
use crate::gdbcheck;
use crate::kernel::{self, KernelBuild};
use crate::manifest::{Dump, Entry, Kernel, Manifest};
use crate::oracle;
use crate::qemu::{self, Boot};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const REGENERATE: &str = "cargo run --release -p kcrash-harness -- corpus";

/// Rust path of the bare kernel's module that invokes `klog_config!`, where gdb finds
/// `KLogs` and `klogClockHz`.
const BARE_SYMBOL_PREFIX: &str = "bare::platform::";

/// One crash the corpus keeps.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    pub name: &'static str,
    pub kernel: KernelBuild,
    /// Whether its files are committed (the big-ring dump is only generated).
    pub committed: bool,
}

/// Every bare-kernel scenario; names match the kernel's `klog.scenario=` values.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "rings",
        kernel: KernelBuild::Bare,
        committed: true,
    },
    Scenario {
        name: "wrap",
        kernel: KernelBuild::Bare,
        committed: true,
    },
    Scenario {
        name: "unfilled",
        kernel: KernelBuild::Bare,
        committed: true,
    },
    Scenario {
        name: "preinit",
        kernel: KernelBuild::Bare,
        committed: true,
    },
    Scenario {
        name: "strings",
        kernel: KernelBuild::Bare,
        committed: true,
    },
    Scenario {
        name: "torn",
        kernel: KernelBuild::Bare,
        committed: true,
    },
    Scenario {
        name: "scribbled",
        kernel: KernelBuild::Bare,
        committed: true,
    },
    Scenario {
        name: "off",
        kernel: KernelBuild::Bare,
        committed: true,
    },
    Scenario {
        name: "fault",
        kernel: KernelBuild::Bare,
        committed: true,
    },
    Scenario {
        name: "big",
        kernel: KernelBuild::BareBig,
        committed: false,
    },
];

pub fn scenario(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

impl Scenario {
    pub fn cmdline(&self) -> String {
        format!("klog.scenario={}", self.name)
    }

    /// Committed entries keep every format; the big one the kdump file and the ELF dump gdb
    /// checks its digests in.
    pub fn formats(&self) -> &'static [DumpFormat] {
        if self.committed {
            &DumpFormat::ALL
        } else {
            &[DumpFormat::ElfPaging, DumpFormat::KdumpZlib]
        }
    }
}

/// Options for [`generate`].
pub struct Generate<'a> {
    /// Corpus directory to write into.
    pub out: &'a Path,
    /// Where the kernels are built.
    pub target_dir: &'a Path,
    pub scenarios: Vec<&'static Scenario>,
    /// gzip the formats the committed corpus keeps gzipped
    /// ([`DumpFormat::gzipped_in_corpus`]).
    pub gzip: bool,
}

/// The manifest describing every scenario (run or not): paths depend only on the scenario,
/// its kernel and whether dumps are gzipped.
pub fn manifest(gzip: bool) -> Manifest {
    let mut kernels: Vec<KernelBuild> = SCENARIOS.iter().map(|s| s.kernel).collect();
    kernels.dedup();
    Manifest {
        version: 1,
        regenerate: REGENERATE.to_string(),
        kernels: kernels
            .into_iter()
            .map(|build| Kernel {
                name: build.name().to_string(),
                image: image_path(build),
                built_by: kernel::build_command(build),
                committed: SCENARIOS.iter().any(|s| s.kernel == build && s.committed),
            })
            .collect(),
        entries: SCENARIOS.iter().map(|s| entry(s, gzip)).collect(),
    }
}

fn image_path(build: KernelBuild) -> String {
    format!("{}/vmlinux", build.name())
}

fn entry_dir(scenario: &Scenario) -> String {
    format!("{}/{}", scenario.kernel.name(), scenario.name)
}

fn entry(scenario: &Scenario, gzip: bool) -> Entry {
    let dir = entry_dir(scenario);
    let dumps = scenario
        .formats()
        .iter()
        .map(|format| {
            let gzip = gzip && scenario.committed && format.gzipped_in_corpus();
            let suffix = if gzip { ".gz" } else { "" };
            Dump {
                format: format.name().to_string(),
                producer: format.producer().to_string(),
                path: format!("{dir}/{}{suffix}", format.file_name()),
                gzip,
                magic: format.magic().name().to_string(),
            }
        })
        .collect();
    Entry {
        kernel: scenario.kernel.name().to_string(),
        scenario: scenario.name.to_string(),
        cmdline: scenario.cmdline(),
        console: format!("{dir}/console.log"),
        expected: format!("{dir}/expected.json"),
        committed: scenario.committed,
        dumps,
    }
}

/// Builds the kernels, crashes the chosen scenarios, writes their dumps, console logs and
/// expected results, and the manifest of every scenario. Progress and timings go to stderr.
pub fn generate(options: &Generate) -> Result<Manifest> {
    let manifest = manifest(options.gzip);
    let mut builds: Vec<KernelBuild> = options.scenarios.iter().map(|s| s.kernel).collect();
    builds.sort_by_key(|b| b.name());
    builds.dedup();
    for build in builds {
        let built = kernel::build(build, options.target_dir)?;
        let image = options.out.join(image_path(build));
        std::fs::create_dir_all(image.parent().expect("has a parent"))?;
        std::fs::copy(&built, &image)
            .with_context(|| format!("copying kernel to {}", image.display()))?;
        for scenario in options.scenarios.iter().filter(|s| s.kernel == build) {
            crash(scenario, &image, options).with_context(|| {
                format!("scenario {} of kernel {}", scenario.name, build.name())
            })?;
        }
    }
    manifest.store(options.out)?;
    Ok(manifest)
}

fn crash(scenario: &Scenario, image: &Path, options: &Generate) -> Result<()> {
    let dir = options.out.join(entry_dir(scenario));
    let cmdline = scenario.cmdline();
    let boot = Boot {
        image,
        cmdline: &cmdline,
        memory_mib: scenario.kernel.memory_mib(),
        timeout: Duration::from_secs(if scenario.committed { 60 } else { 600 }),
    };
    let crash = qemu::crash_and_dump(&boot, &dir, scenario.formats())?;
    let console = std::fs::read_to_string(&crash.console)?;
    let expected =
        oracle::derive(&console).context("deriving the expected result from the console")?;
    std::fs::write(
        dir.join("expected.json"),
        serde_json::to_string_pretty(&expected)? + "\n",
    )?;
    for (format, path) in &crash.dumps {
        if options.gzip && scenario.committed && format.gzipped_in_corpus() {
            gzip_file(path)?;
        }
    }
    eprintln!(
        "{}: boot to panic {:.2}s, {} dumps {:.2}s",
        entry_dir(scenario),
        crash.boot_time.as_secs_f64(),
        crash.dumps.len(),
        crash.dump_time.as_secs_f64()
    );
    Ok(())
}

/// Replaces `path` by `path.gz` (best compression: committed files should be small).
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

/// What [`check`] covered.
#[derive(Debug, Default)]
pub struct Checked {
    pub entries: usize,
    /// Entries whose dump gdb compared with the oracle.
    pub against_dump: usize,
}

/// Checks a corpus directory against its manifest: every listed file of a present entry
/// exists and has the magic the manifest says, and each expected.json is what the oracle
/// derives from its console log. With `gdb`, also compares every ring in each entry's
/// `elf-paging` dump with the oracle ([`gdbcheck`]). Entries with `committed = false` are
/// checked only if their console log exists. A non-empty `only` restricts the check to those
/// scenarios.
pub fn check(dir: &Path, gdb: bool, only: &[String]) -> Result<Checked> {
    let manifest = Manifest::load(dir)?;
    let mut checked = Checked::default();
    for entry in &manifest.entries {
        let skipped = !only.is_empty() && !only.contains(&entry.scenario);
        if skipped || (!entry.committed && !dir.join(&entry.console).exists()) {
            continue;
        }
        let context = || format!("entry {}/{}", entry.kernel, entry.scenario);
        let expected = check_entry(dir, &manifest, entry).with_context(context)?;
        checked.entries += 1;
        if gdb && check_against_dump(dir, &manifest, entry, &expected).with_context(context)? {
            checked.against_dump += 1;
        }
    }
    Ok(checked)
}

fn check_entry(dir: &Path, manifest: &Manifest, entry: &Entry) -> Result<oracle::Expected> {
    let Some(kernel) = manifest.kernels.iter().find(|k| k.name == entry.kernel) else {
        bail!("kernel {} is not in the manifest", entry.kernel);
    };
    expect_magic(&dir.join(&kernel.image), Magic::ElfExec.name())?;
    let console = std::fs::read_to_string(dir.join(&entry.console))
        .with_context(|| format!("reading {}", entry.console))?;
    let derived = oracle::derive(&console)?;
    let expected_path = dir.join(&entry.expected);
    let stored: oracle::Expected = serde_json::from_str(&std::fs::read_to_string(&expected_path)?)
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
        expect_magic(&dir.join(&dump.path), &dump.magic)?;
    }
    Ok(derived)
}

/// Runs [`gdbcheck`] on the entry's `elf-paging` dump, if it has one.
fn check_against_dump(
    dir: &Path,
    manifest: &Manifest,
    entry: &Entry,
    expected: &oracle::Expected,
) -> Result<bool> {
    let Some(dump) = entry
        .dumps
        .iter()
        .find(|d| d.format == DumpFormat::ElfPaging.name())
    else {
        return Ok(false);
    };
    let kernel = manifest
        .kernels
        .iter()
        .find(|k| k.name == entry.kernel)
        .expect("checked by check_entry");
    let scratch = tempfile::tempdir()?;
    let mut path = dir.join(&dump.path);
    if dump.gzip {
        let plain = scratch.path().join("dump.elf");
        let mut input = flate2::read::GzDecoder::new(std::fs::File::open(&path)?);
        std::io::copy(&mut input, &mut std::fs::File::create(&plain)?)
            .with_context(|| format!("gunzipping {}", path.display()))?;
        path = plain;
    }
    let symbols = gdbcheck::Symbols {
        prefix: BARE_SYMBOL_PREFIX,
    };
    gdbcheck::check(
        &dir.join(&kernel.image),
        &path,
        expected,
        &symbols,
        scratch.path(),
    )?;
    Ok(true)
}

fn expect_magic(path: &Path, want: &str) -> Result<()> {
    let found = Magic::of_file(path)?;
    match found {
        Some(magic) if magic.name() == want => Ok(()),
        other => bail!(
            "{}: expected {want}, found {:?}",
            path.display(),
            other.map(Magic::name)
        ),
    }
}

/// Where `cargo run -p kcrash-harness -- corpus` writes by default.
pub fn default_dir() -> PathBuf {
    kernel::repo_root().join("corpus")
}
