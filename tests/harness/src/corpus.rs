//! The corpus: which kernels and crashes it holds, how each crash is made (QEMU for the bare
//! kernel, Linux or gdb cores for the hosted programs), and how a corpus directory is checked
//! against its manifest.

use crate::capture::{self, Capture, Run};
use crate::coredump::{self, Memory, Verified};
use crate::dump::{DumpFormat, Magic};
use crate::expected::Expected;
use crate::gdbcheck;
use crate::kernel::{self, KernelBuild};
use crate::klogger;
use crate::oracle;
use crate::programs::{Program, SCENARIOS};
use crate::qemu::{self, Boot};
use crate::qnx;
use crate::{repo_root, tools};
use anyhow::{anyhow, bail, Context, Result};
use kcrash::regress::manifest::{self, Check, Compare, Dump, Entry, Manifest, Replace};
use regex::Regex;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const REGENERATE: &str = "cargo run --release -p kcrash-harness -- corpus";

/// Rust path of the bare kernel's module that invokes `klog_config!`, where gdb finds
/// `KLogs` and `klogClockHz`.
const BARE_SYMBOL_PREFIX: &str = "bare::platform::";

/// The bare kernel's own scenario: a CPU exception (a page fault) as the crash.
pub const BARE_ONLY_SCENARIO: &str = "fault";

/// Hosted scenarios also taken with gdb's gcore, so the corpus holds cores of both producers.
pub const GCORE_SCENARIOS: [&str; 4] = ["rings", "strings", "percpu", "klogger-plain"];

/// Bare scenarios also saved as raw memory (QMP `pmemsave`). One is enough: a raw image is read
/// the same way whatever the scenario logged, and each costs the corpus about 0.3 MB gzipped.
pub const RAW_SCENARIOS: [&str; 1] = ["rings"];

/// Where `corpus` writes by default.
pub fn default_dir() -> PathBuf {
    repo_root().join("corpus")
}

/// A file of the committed corpus, `rel` to its directory.
pub fn file(rel: &str) -> PathBuf {
    default_dir().join(rel)
}

/// A kernel of the corpus: the bare QEMU kernel or a hosted program, in one of its builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    Qemu(KernelBuild),
    Hosted(Program),
}

impl Kernel {
    pub const ALL: [Kernel; 17] = [
        Kernel::Qemu(KernelBuild::Bare),
        Kernel::Qemu(KernelBuild::BareBig),
        Kernel::Qemu(KernelBuild::BarePercpu),
        Kernel::Qemu(KernelBuild::BareDprobes),
        Kernel::Hosted(Program::Hosted),
        Kernel::Hosted(Program::HostedC),
        Kernel::Hosted(Program::HostedPercpu),
        Kernel::Hosted(Program::HostedCPercpu),
        Kernel::Hosted(Program::HostedBig),
        Kernel::Hosted(Program::HostedBigPercpu),
        Kernel::Hosted(Program::HostedDprobes),
        Kernel::Qemu(KernelBuild::BareQnx),
        Kernel::Hosted(Program::HostedQnx),
        Kernel::Qemu(KernelBuild::BareKlogger),
        Kernel::Hosted(Program::HostedKlogger),
        Kernel::Hosted(Program::HostedCArm64),
        Kernel::Hosted(Program::HostedArm64),
    ];

    /// Whether its entries are the QNX trace ring's, read and checked by [`qnx`].
    pub fn is_qnx(self) -> bool {
        matches!(
            self,
            Kernel::Qemu(KernelBuild::BareQnx) | Kernel::Hosted(Program::HostedQnx)
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Qemu(build) => build.name(),
            Kernel::Hosted(program) => program.name(),
        }
    }

    pub fn from_name(name: &str) -> Option<Kernel> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether its image and entries are committed (the big-ring builds are generated only).
    pub fn committed(self) -> bool {
        match self {
            Kernel::Qemu(build) => build != KernelBuild::BareBig,
            Kernel::Hosted(program) => program.committed(),
        }
    }

    /// Tools its crashes need: QEMU and makedumpfile, or gdb (gcore) and the build's compiler.
    pub fn tools(self) -> Vec<&'static str> {
        match self {
            Kernel::Qemu(_) => vec![tools::QEMU, tools::MAKEDUMPFILE],
            // An emulated program's core is the emulator's: no gcore.
            Kernel::Hosted(program) if program.emulator().is_some() => program.tools().to_vec(),
            Kernel::Hosted(program) => {
                let mut needed = vec![tools::GDB];
                needed.extend(program.tools());
                needed
            }
        }
    }

    /// Builds it (in its own target directory under target/) and returns the image.
    pub fn build(self) -> Result<PathBuf> {
        let target = repo_root().join("target");
        match self {
            Kernel::Qemu(build) => kernel::build(build, &target.join("kernels")),
            Kernel::Hosted(program) => program.build(&target.join("hosted-programs")),
        }
    }

    fn image_path(self) -> String {
        match self {
            Kernel::Qemu(build) => format!("{}/vmlinux", build.name()),
            Kernel::Hosted(program) => format!("{0}/{0}", program.name()),
        }
    }

    fn magic(self) -> Magic {
        match self {
            Kernel::Qemu(_) => Magic::ElfExec,
            // Static, so that the emulator needs no libraries of its architecture.
            Kernel::Hosted(program) if program.emulator().is_some() => Magic::ElfExec,
            Kernel::Hosted(_) => Magic::ElfDyn,
        }
    }

    /// Its manifest table.
    pub fn describe(self) -> manifest::Kernel {
        manifest::Kernel {
            name: self.name().to_string(),
            image: self.image_path(),
            magic: self.magic().name().to_string(),
            built_by: match self {
                Kernel::Qemu(build) => kernel::build_command(build),
                Kernel::Hosted(program) => program.build_command(),
            },
            committed: self.committed(),
        }
    }
}

/// One crash the corpus keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    pub kernel: Kernel,
    pub scenario: &'static str,
    /// For hosted programs: the core taken with gdb's gcore on purpose (otherwise Linux's,
    /// falling back to gcore when Linux leaves none).
    pub gcore: bool,
}

impl Planned {
    /// The entry's name and directory.
    pub fn name(&self) -> String {
        let suffix = if self.gcore { "-gcore" } else { "" };
        format!("{}/{}{suffix}", self.kernel.name(), self.scenario)
    }

    pub fn committed(&self) -> bool {
        self.kernel.committed()
    }

    pub fn cmdline(&self) -> String {
        match self.kernel {
            Kernel::Qemu(_) => format!("klog.scenario={}", self.scenario),
            Kernel::Hosted(_) if self.gcore => format!("{} --stop", self.scenario),
            Kernel::Hosted(_) => self.scenario.to_string(),
        }
    }

    /// The QEMU dump formats of a bare crash: committed entries keep every format with a
    /// header, and [`RAW_SCENARIOS`] raw memory too; the big one the kdump file and the ELF dump
    /// gdb checks its digests in.
    pub fn formats(&self) -> &'static [DumpFormat] {
        match self.kernel {
            // A QNX ring reads the same from every format: one dump is enough.
            Kernel::Qemu(KernelBuild::BareQnx) => &[DumpFormat::ElfPaging],
            Kernel::Qemu(_) if self.committed() && RAW_SCENARIOS.contains(&self.scenario) => {
                &DumpFormat::ALL
            }
            // Klogger's buffers read the same from every format: two of them keep the corpus small.
            Kernel::Qemu(KernelBuild::BareKlogger) => {
                &[DumpFormat::ElfPaging, DumpFormat::KdumpZlib]
            }
            Kernel::Qemu(_) if self.committed() => &DumpFormat::WITH_HEADERS,
            Kernel::Qemu(_) => &[DumpFormat::ElfPaging, DumpFormat::KdumpZlib],
            Kernel::Hosted(_) => &[],
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(if self.committed() { 60 } else { 600 })
    }
}

/// Every crash the corpus knows, committed or generated only, in manifest order.
pub fn plan() -> Vec<Planned> {
    let mut plan = Vec::new();
    let mut add = |kernel, scenario, gcore| {
        plan.push(Planned {
            kernel,
            scenario,
            gcore,
        })
    };
    for scenario in SCENARIOS.into_iter().chain([BARE_ONLY_SCENARIO]) {
        add(Kernel::Qemu(KernelBuild::Bare), scenario, false);
    }
    for scenario in crate::dprobes::SCENARIOS {
        add(Kernel::Qemu(KernelBuild::BareDprobes), scenario, false);
    }
    add(Kernel::Qemu(KernelBuild::BareBig), "big", false);
    add(Kernel::Qemu(KernelBuild::BarePercpu), "percpu", false);
    for scenario in klogger::SCENARIOS {
        add(Kernel::Qemu(KernelBuild::BareKlogger), scenario, false);
    }
    for program in [
        Program::Hosted,
        Program::HostedC,
        Program::HostedPercpu,
        Program::HostedCPercpu,
        Program::HostedBig,
        Program::HostedBigPercpu,
        Program::HostedDprobes,
        Program::HostedKlogger,
        Program::HostedCArm64,
        Program::HostedArm64,
    ] {
        for &scenario in program.scenarios() {
            add(Kernel::Hosted(program), scenario, false);
            let gcore = program.committed() && program.emulator().is_none();
            if gcore && GCORE_SCENARIOS.contains(&scenario) {
                add(Kernel::Hosted(program), scenario, true);
            }
        }
    }
    for kernel in [
        Kernel::Qemu(KernelBuild::BareQnx),
        Kernel::Hosted(Program::HostedQnx),
    ] {
        for scenario in qnx_writer::scenarios::NAMES {
            add(kernel, scenario, false);
            if matches!(kernel, Kernel::Hosted(_)) && scenario == qnx::GCORE_SCENARIO {
                add(kernel, scenario, true);
            }
        }
    }
    plan
}

/// Which planned crashes a command acts on: by default the committed ones (`big` adds the
/// generated-only ones); `kernels` and `scenarios`, when given, narrow the choice to those.
pub fn choose(big: bool, kernels: &[String], scenarios: &[String]) -> Result<Vec<Planned>> {
    for name in kernels {
        if Kernel::from_name(name).is_none() {
            let known: Vec<&str> = Kernel::ALL.iter().map(|k| k.name()).collect();
            bail!("unknown kernel {name:?} (known: {})", known.join(", "));
        }
    }
    let plan = plan();
    for name in scenarios {
        if !plan.iter().any(|p| p.scenario == name) {
            bail!("unknown scenario {name:?}");
        }
    }
    let narrowed = !kernels.is_empty() || !scenarios.is_empty();
    let chosen: Vec<Planned> = plan
        .into_iter()
        .filter(|p| kernels.is_empty() || kernels.iter().any(|k| k == p.kernel.name()))
        .filter(|p| scenarios.is_empty() || scenarios.iter().any(|s| s == p.scenario))
        .filter(|p| p.committed() || big || narrowed)
        .collect();
    if chosen.is_empty() {
        bail!("no planned crash matches those kernels and scenarios");
    }
    Ok(chosen)
}

/// Options for [`generate`].
pub struct Generate<'a> {
    /// Corpus directory to write into.
    pub out: &'a Path,
    pub crashes: &'a [Planned],
    /// gzip what the committed corpus keeps gzipped (committed entries only).
    pub gzip: bool,
}

/// Builds the kernels, crashes the chosen scenarios, writes their images, dumps, console logs
/// and expected results, and the manifest. Entries not run keep their files: a bare entry is
/// described as the harness would write it and its expected.json is derived again from its
/// console log, so a change of the expected format needs no new dumps; a hosted entry keeps its
/// table from the manifest already in `out`. Progress and timings go to stderr.
pub fn generate(options: &Generate) -> Result<Manifest> {
    let previous = previous_manifest(options.out);
    let mut made: Vec<(String, Entry)> = Vec::new();
    for kernel in Kernel::ALL {
        let crashes: Vec<&Planned> = options
            .crashes
            .iter()
            .filter(|p| p.kernel == kernel)
            .collect();
        if crashes.is_empty() {
            continue;
        }
        let built = kernel.build()?;
        let image = options.out.join(kernel.image_path());
        std::fs::create_dir_all(image.parent().expect("has a parent"))?;
        std::fs::copy(&built, &image)
            .with_context(|| format!("copying {} to {}", built.display(), image.display()))?;
        for planned in crashes {
            let entry = crash(planned, &image, options)
                .with_context(|| format!("crashing {}", planned.name()))?;
            made.push((planned.name(), entry));
        }
    }
    let mut entries = Vec::new();
    for planned in plan() {
        let name = planned.name();
        if let Some((_, entry)) = made.iter().find(|(n, _)| *n == name) {
            entries.push(entry.clone());
            continue;
        }
        let kept = match planned.kernel {
            Kernel::Qemu(_) => Some(bare_entry(&planned, options.gzip)),
            Kernel::Hosted(_) => previous
                .as_ref()
                .and_then(|m| m.entries.iter().find(|e| e.name == name).cloned()),
        };
        let Some(mut entry) = kept else { continue };
        // A kept hosted table may come from a version 2 manifest, without checks.
        entry.checks = checks(&entry.name, entry.committed);
        let console = options.out.join(&entry.console);
        if !console.exists() {
            continue;
        }
        if planned.kernel.is_qnx() {
            qnx::write_expected(&console, &options.out.join(&entry.expected))?;
        } else {
            write_expected(
                &options.out.join(&entry.expected),
                &derive_entry(&entry.scenario, &console)?,
            )?;
        }
        entries.push(entry);
    }
    let kernels = Kernel::ALL
        .into_iter()
        .filter(|k| entries.iter().any(|e| e.kernel == k.name()))
        .map(Kernel::describe)
        .collect();
    let manifest = Manifest {
        version: manifest::VERSION,
        regenerate: REGENERATE.to_string(),
        kernels,
        entries,
    };
    manifest.store(options.out).map_err(anyhow::Error::msg)?;
    Ok(manifest)
}

/// The manifest already in `dir`, if it is one this harness reads.
fn previous_manifest(dir: &Path) -> Option<Manifest> {
    if !dir.join(manifest::FILE_NAME).exists() {
        return None;
    }
    match Manifest::load(dir) {
        Ok(manifest) => Some(manifest),
        Err(e) => {
            eprintln!("note: {e:#}; entries not run now are described afresh or dropped");
            None
        }
    }
}

/// One crash of any kernel, into its entry directory under `options.out`.
fn crash(planned: &Planned, image: &Path, options: &Generate) -> Result<Entry> {
    let dir = options.out.join(planned.name());
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    match planned.kernel {
        Kernel::Qemu(_) => crash_qemu(planned, image, &dir, options.gzip),
        Kernel::Hosted(_) => crash_hosted(planned, image, &dir, options.gzip),
    }
}

fn crash_qemu(planned: &Planned, image: &Path, dir: &Path, gzip: bool) -> Result<Entry> {
    let Kernel::Qemu(build) = planned.kernel else {
        bail!("{} is not a QEMU kernel", planned.kernel.name());
    };
    let cmdline = planned.cmdline();
    let boot = Boot {
        image,
        cmdline: &cmdline,
        memory_mib: build.memory_mib(),
        cpus: build.cpus(),
        timeout: planned.timeout(),
    };
    let crashed = qemu::crash_and_dump(&boot, dir, planned.formats())?;
    if planned.kernel.is_qnx() {
        qnx::write_expected(&crashed.console, &dir.join("expected.json"))?;
    } else {
        let expected = derive_entry(planned.scenario, &crashed.console)?;
        write_expected(&dir.join("expected.json"), &expected)?;
        if let Derived::Klogger(expected) = &expected {
            for (format, path) in &crashed.dumps {
                klogger::check_dump(path, format.phys_start(), image, expected)
                    .with_context(|| format!("checking {}", path.display()))?;
            }
        }
    }
    for (format, path) in &crashed.dumps {
        if gzip && planned.committed() && format.gzipped_in_corpus() {
            gzip_file(path)?;
        }
    }
    eprintln!(
        "{}: boot to panic {:.2}s, {} dumps {:.2}s",
        planned.name(),
        crashed.boot_time.as_secs_f64(),
        crashed.dumps.len(),
        crashed.dump_time.as_secs_f64()
    );
    Ok(bare_entry(planned, gzip))
}

/// A bare entry's table: it depends only on the crash planned and on gzip.
pub fn bare_entry(planned: &Planned, gzip: bool) -> Entry {
    let name = planned.name();
    let dumps = planned
        .formats()
        .iter()
        .map(|format| {
            let gzip = gzip && planned.committed() && format.gzipped_in_corpus();
            let suffix = if gzip { ".gz" } else { "" };
            Dump {
                format: format.name().to_string(),
                producer: format.producer().to_string(),
                path: format!("{name}/{}{suffix}", format.file_name()),
                gzip,
                magic: format.magic().name().to_string(),
                phys_start: format.phys_start(),
            }
        })
        .collect();
    entry_table(planned, dumps)
}

fn entry_table(planned: &Planned, dumps: Vec<Dump>) -> Entry {
    let name = planned.name();
    Entry {
        kernel: planned.kernel.name().to_string(),
        scenario: planned.scenario.to_string(),
        cmdline: planned.cmdline(),
        console: format!("{name}/console.log"),
        expected: format!("{name}/expected.json"),
        committed: planned.committed(),
        dumps,
        checks: checks(&name, planned.committed()),
        name,
    }
}

/// The commands `kcrash regress` runs on every dump of an entry, with the file (under the
/// entry's `regress/` directory) holding each one's expected output. Their output depends only
/// on the crash, never on the dump's format or path, so every dump of the entry must print the
/// same — except the reason given for an unreadable `%s` address, which tells how each format's
/// translation failed and is not pinned (as in corpus/README.md, "How a consumer compares").
/// Big rings get the tables and only their newest records: 4 Mi lines of text would be the
/// whole run.
pub fn checks(entry: &str, committed: bool) -> Vec<Check> {
    if let Some(dprobes) = crate::dprobes::checks(entry) {
        return dprobes;
    }
    if entry.starts_with("bare-qnx/") || entry.starts_with("hosted-qnx/") {
        return qnx::checks(entry);
    }
    let scenario = entry
        .split_once('/')
        .map_or("", |(_, s)| s.trim_end_matches("-gcore"));
    if klogger::owns(scenario) {
        return klogger::CHECKS
            .iter()
            .map(|&(command, file)| Check {
                command: command.to_string(),
                expect: format!("{entry}/regress/{file}"),
                compare: if file.ends_with(".json") {
                    Compare::Json
                } else {
                    Compare::Text
                },
                replace: Vec::new(),
            })
            .collect();
    }
    let all: &[(&str, &str, Compare)] = if committed {
        &[
            ("klog -s", "klog-s.txt", Compare::Text),
            ("klog -s --json", "klog-s.json", Compare::Json),
            ("klog 0 full", "klog-full.txt", Compare::Text),
            ("klog 0 --json -n 16", "klog-newest16.json", Compare::Json),
        ]
    } else {
        &[
            ("klog -s", "klog-s.txt", Compare::Text),
            ("klog -s --json", "klog-s.json", Compare::Json),
            (
                "klog 0 full -n 100",
                "klog-full-newest100.txt",
                Compare::Text,
            ),
        ]
    };
    all.iter()
        .map(|&(command, file, compare)| Check {
            command: command.to_string(),
            expect: format!("{entry}/regress/{file}"),
            compare,
            // Why a string is unreadable depends on the dump's format (how translation
            // failed): the message's marker and a schema's field keep only the address.
            replace: if command.starts_with("klog 0") {
                vec![
                    Replace {
                        regex: Regex::new("(<unreadable (?:at )?0x[0-9a-f]+): [^>]*>")
                            .expect("a valid regex"),
                        with: "$1>".to_string(),
                    },
                    Replace {
                        regex: Regex::new(r#"("reason":)"(?:[^"\\]|\\.)*""#)
                            .expect("a valid regex"),
                        with: r#"$1"""#.to_string(),
                    },
                ]
            } else {
                Vec::new()
            },
        })
        .collect()
}

/// One hosted crash: runs the program, takes its core (gcore if planned so, else Linux's with
/// the gcore fallback), and checks the core against the oracle before keeping it.
pub fn crash_hosted(planned: &Planned, image: &Path, dir: &Path, gzip: bool) -> Result<Entry> {
    let run = Run {
        program: image,
        scenario: planned.scenario,
        dir,
        timeout: planned.timeout(),
        emulator: match planned.kernel {
            Kernel::Hosted(program) => program.emulator(),
            Kernel::Qemu(_) => None,
        },
    };
    let crashed = if planned.gcore {
        capture::crash_with(&run, Capture::Gcore)
    } else {
        capture::crash(&run)
    }?;
    // The QNX ring's dumps are checked by reading them (`corpus check`); KLog's here, by the
    // harness's own reader of cores.
    let verified = if planned.kernel.is_qnx() {
        qnx::write_expected(&crashed.console, &dir.join("expected.json"))?;
        None
    } else {
        let expected = derive_entry(planned.scenario, &crashed.console)?;
        write_expected(&dir.join("expected.json"), &expected)?;
        Some(match &expected {
            Derived::Klog(expected) => verify_core(&crashed.core, expected)?,
            Derived::Klogger(expected) => Verified {
                records: klogger::check_dump(&crashed.core, None, image, expected)
                    .with_context(|| format!("checking {}", crashed.core.display()))?,
                ..Verified::default()
            },
        })
    };
    let gzip = gzip && planned.committed();
    let core = if gzip {
        gzip_file(&crashed.core)?
    } else {
        crashed.core.clone()
    };
    for scratch in ["stderr.log", "gdb.log"] {
        let _ = std::fs::remove_file(dir.join(scratch));
    }
    if let Some(verified) = verified {
        eprintln!(
            "{}: {} records, {} torn, {} unreadable strings checked in the core",
            planned.name(),
            verified.records,
            verified.torn,
            verified.unreadable_strings
        );
    }
    let file_name = core.file_name().expect("a file").to_string_lossy();
    let mut entry = entry_table(
        planned,
        vec![Dump {
            format: crashed.capture.format().to_string(),
            producer: crashed.producer,
            path: format!("{}/{file_name}", planned.name()),
            gzip,
            magic: Magic::ElfCore.name().to_string(),
            phys_start: None,
        }],
    );
    // A fallback to gcore stops the program instead of letting it abort.
    if crashed.capture == Capture::Gcore && !planned.gcore {
        entry.cmdline = format!("{} --stop", planned.scenario);
    }
    Ok(entry)
}

/// An entry's expected result: KLog's rings, or Klogger's buffers for its scenarios.
#[derive(Debug, PartialEq, Eq, serde::Serialize)]
#[serde(untagged)]
pub enum Derived {
    Klog(Expected),
    Klogger(klogger::Expected),
}

/// The expected result of `scenario`'s console log.
pub fn derive_entry(scenario: &str, console: &Path) -> Result<Derived> {
    if !klogger::owns(scenario) {
        return derive_file(console).map(Derived::Klog);
    }
    let text = std::fs::read_to_string(console)
        .with_context(|| format!("reading {}", console.display()))?;
    klogger::derive(&text)
        .map(Derived::Klogger)
        .with_context(|| format!("deriving the expected result from {}", console.display()))
}

/// The expected result the oracle in a console log implies.
pub fn derive_file(console: &Path) -> Result<Expected> {
    let text = std::fs::read_to_string(console)
        .with_context(|| format!("reading {}", console.display()))?;
    oracle::derive(&text)
        .with_context(|| format!("deriving the expected result from {}", console.display()))
}

fn write_expected(path: &Path, expected: &impl serde::Serialize) -> Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(expected)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

/// Checks a core (plain or gzip) against the expected result.
pub fn verify_core(core: &Path, expected: &Expected) -> Result<Verified> {
    let bytes = coredump::load(core)?;
    let memory = Memory::parse(&bytes).with_context(|| format!("reading {}", core.display()))?;
    coredump::verify(&memory, expected).with_context(|| format!("checking {}", core.display()))
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
    /// QEMU entries whose `elf-paging` dump gdb compared with the oracle.
    pub against_dump: usize,
    /// Hosted cores whose records were compared with the oracle.
    pub cores: usize,
    /// QNX entries' dumps read with `tracelog` and compared with the oracle.
    pub qnx_dumps: usize,
    /// Dumps of Klogger entries whose `klogger` output was compared with the oracle.
    pub klogger_dumps: usize,
}

/// Checks a corpus directory against its manifest: each listed image has its magic; for each
/// entry, every file exists with the magic the manifest says (raw memory: none, a physical
/// start, and the guest's RAM size), expected.json is what the oracle
/// derives from the console log, every hosted core holds the records the oracle says, and, with
/// `gdb`, every ring of each `elf-paging` dump equals the oracle ([`gdbcheck`]). Entries with
/// `committed = false` are checked only if their console log exists; `kernels` and `scenarios`,
/// when not empty, restrict the check to those.
pub fn check(dir: &Path, gdb: bool, kernels: &[String], scenarios: &[String]) -> Result<Checked> {
    let manifest = Manifest::load(dir).map_err(anyhow::Error::msg)?;
    let mut checked = Checked::default();
    for entry in &manifest.entries {
        let wanted = (kernels.is_empty() || kernels.contains(&entry.kernel))
            && (scenarios.is_empty() || scenarios.contains(&entry.scenario));
        if !wanted || (!entry.committed && !dir.join(&entry.console).exists()) {
            continue;
        }
        check_entry(dir, &manifest, entry, gdb, &mut checked)
            .with_context(|| format!("entry {}", entry.name))?;
        checked.entries += 1;
    }
    Ok(checked)
}

fn check_entry(
    dir: &Path,
    manifest: &Manifest,
    entry: &Entry,
    gdb: bool,
    checked: &mut Checked,
) -> Result<()> {
    let kernel = manifest
        .kernel(&entry.kernel)
        .ok_or_else(|| anyhow!("kernel {} is not in the manifest", entry.kernel))?;
    let image = dir.join(&kernel.image);
    expect_magic(&image, &kernel.magic)?;
    if Kernel::from_name(&entry.kernel).is_some_and(Kernel::is_qnx) {
        qnx::check_entry(dir, &image, entry)?;
        checked.qnx_dumps += entry.dumps.len();
        return Ok(());
    }
    let derived = derive_entry(&entry.scenario, &dir.join(&entry.console))?;
    if crate::dprobes::SCENARIOS.contains(&entry.scenario.as_str()) {
        crate::dprobes::derive_file(&dir.join(&entry.console))?;
    }
    let expected_path = dir.join(&entry.expected);
    let text = std::fs::read_to_string(&expected_path)
        .with_context(|| format!("reading {}", expected_path.display()))?;
    let stored: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("parsing {}", expected_path.display()))?;
    if stored != serde_json::to_value(&derived)? {
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
        let path = dir.join(&dump.path);
        if dump.gzip != dump.path.ends_with(".gz") {
            bail!(
                "{}: gzip = {} disagrees with the file name",
                dump.path,
                dump.gzip
            );
        }
        expect_magic(&path, &dump.magic)?;
        if (dump.format == DumpFormat::Raw.name()) != dump.phys_start.is_some() {
            bail!(
                "{}: a raw dump, and only one, has a phys_start (format {}, phys_start {:?})",
                dump.path,
                dump.format,
                dump.phys_start
            );
        }
        if dump.format == DumpFormat::Raw.name() {
            check_raw_size(&path, dump.gzip, &entry.kernel)?;
        }
        match &derived {
            Derived::Klogger(expected) => {
                klogger::check_dump(&path, dump.phys_start, &image, expected)
                    .with_context(|| format!("checking {}", dump.path))?;
                checked.klogger_dumps += 1;
            }
            Derived::Klog(expected) => {
                let hosted = matches!(Kernel::from_name(&kernel.name), Some(Kernel::Hosted(_)));
                if dump.magic == Magic::ElfCore.name() && hosted {
                    verify_core(&path, expected)?;
                    checked.cores += 1;
                }
                if gdb && dump.format == DumpFormat::ElfPaging.name() {
                    check_against_dump(&image, &path, dump.gzip, expected)?;
                    checked.against_dump += 1;
                }
            }
        }
    }
    Ok(())
}

/// Runs [`gdbcheck`] on a QEMU `elf-paging` dump.
fn check_against_dump(image: &Path, dump: &Path, gzip: bool, expected: &Expected) -> Result<()> {
    let scratch = tempfile::tempdir()?;
    let mut path = dump.to_path_buf();
    if gzip {
        let plain = scratch.path().join("dump.elf");
        let mut input = flate2::read::GzDecoder::new(std::fs::File::open(&path)?);
        std::io::copy(&mut input, &mut std::fs::File::create(&plain)?)
            .with_context(|| format!("gunzipping {}", path.display()))?;
        path = plain;
    }
    let symbols = gdbcheck::Symbols {
        prefix: BARE_SYMBOL_PREFIX,
    };
    gdbcheck::check(image, &path, expected, &symbols, scratch.path())
}

/// A raw image holds all of its guest's RAM: as many bytes (once inflated) as the kernel's
/// machine had.
fn check_raw_size(path: &Path, gzip: bool, kernel: &str) -> Result<()> {
    let Some(Kernel::Qemu(build)) = Kernel::from_name(kernel) else {
        bail!(
            "{}: raw memory of kernel {kernel}, which QEMU does not run",
            path.display()
        );
    };
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let len = if gzip {
        std::io::copy(
            &mut flate2::read::MultiGzDecoder::new(file),
            &mut std::io::sink(),
        )
        .with_context(|| format!("gunzipping {}", path.display()))?
    } else {
        file.metadata()?.len()
    };
    let want = u64::from(build.memory_mib()) << 20;
    if len != want {
        bail!(
            "{}: {len} bytes of raw memory, but the guest had {want}",
            path.display()
        );
    }
    Ok(())
}

/// The file has the magic `want` names; `raw` (memory, which has none) wants none found.
fn expect_magic(path: &Path, want: &str) -> Result<()> {
    let found = Magic::of_file(path)?;
    match found {
        None if want == Magic::Raw.name() => Ok(()),
        Some(magic) if magic.name() == want && magic != Magic::Raw => Ok(()),
        other => bail!(
            "{}: expected {want}, found {:?}",
            path.display(),
            other.map(Magic::name)
        ),
    }
}
