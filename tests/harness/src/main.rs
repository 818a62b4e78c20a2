//! `kcrash-harness`: regenerate the corpus, crash one scenario, or check a corpus.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use kcrash_harness::corpus::{self, Generate, Kernel, Planned};
use kcrash_harness::dump::DumpFormat;
use kcrash_harness::linux;
use kcrash_harness::qemu::{self, Boot};
use kcrash_harness::tools;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(about = "Crash kcrash's test kernels (QEMU and hosted) and keep their dumps")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Regenerate the corpus: build the kernels, crash every committed scenario of every
    /// kernel, write images, dumps, console logs, expected results and manifest.toml.
    Corpus {
        /// Corpus directory (default: corpus/ of the repository).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also the big-ring benchmark dumps (not committed; ~650 MiB of RAM and disk).
        #[arg(long)]
        big: bool,
        /// Only these kernels: bare, bare-big, bare-percpu, dprobes, bare-qnx, bare-klogger,
        /// hosted, hosted-c, hosted-percpu, hosted-c-percpu, hosted-big, hosted-big-percpu,
        /// hosted-dprobes, hosted-qnx, hosted-klogger. Entries not run keep their files (their
        /// expected.json is derived again from their console log).
        #[arg(long = "kernel")]
        kernels: Vec<String>,
        /// Only these scenarios.
        #[arg(long = "scenario")]
        scenarios: Vec<String>,
        /// Keep every dump uncompressed.
        #[arg(long)]
        no_gzip: bool,
    },
    /// Rewrite a corpus's manifest.toml and every expected.json from the files already there,
    /// crashing nothing: after a change of the manifest's schema, its checks or the oracle.
    Manifest {
        /// Corpus directory (default: corpus/ of the repository).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Crash one scenario of one kernel into a directory, without touching any manifest.
    Run {
        kernel: String,
        scenario: String,
        #[arg(long)]
        out: PathBuf,
        /// QEMU kernels: formats to write: elf, elf-paging, kdump-zlib-flat, kdump-zlib, raw
        /// (default: the scenario's corpus formats).
        #[arg(long = "format")]
        formats: Vec<String>,
        /// Hosted programs: take the core with gdb's gcore instead of Linux's.
        #[arg(long)]
        gcore: bool,
    },
    /// Debian's kernel under QEMU with the klogtest module (tests/kernels/linux): build, boot
    /// twice (with and without VMCOREINFO), panic, and write every dump, the oracle and
    /// guest.toml into one directory (not the corpus: the dumps are ~1.5 GB).
    Linux {
        /// The Linux series, as Debian builds it: 6.1 (bookworm), 5.10 (bullseye) or 6.12
        /// (bookworm-backports); a suite apt lacks is added to its sources.
        #[arg(long, default_value = linux::debian::SERIES[0].0)]
        series: String,
        /// Output directory (default: CACHE/linux-guest/<release>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Cache of the kernel image and debug vmlinux (outside the repository).
        #[arg(long, default_value = linux::CACHE)]
        cache: PathBuf,
        /// Extra file for the initramfs, HOST:GUEST (repeatable).
        #[arg(long = "include", value_name = "HOST:GUEST")]
        includes: Vec<String>,
        /// Shell command the guest's /init runs after the module logged, before the crash.
        #[arg(long)]
        run: Option<String>,
    },
    /// The Linux guest with a static kcrash reading its own /proc/kcore: boot once,
    /// run kcrash's live checks, write the console into one directory.
    LinuxLive {
        /// The statically linked kcrash to put in the guest.
        #[arg(long)]
        kcrash: PathBuf,
        /// The Linux series, as for `linux`.
        #[arg(long, default_value = linux::debian::SERIES[0].0)]
        series: String,
        /// Output directory (default: CACHE/linux-live/<release>).
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long, default_value = linux::CACHE)]
        cache: PathBuf,
    },
    /// Debian's arm64 kernel under qemu-system-aarch64 (tests/kernels/linux): boot, panic, and
    /// write QEMU's ELF and kdump-zlib dumps, the console and guest.toml into one directory.
    LinuxArm64 {
        /// The Linux series, as for `linux`.
        #[arg(long, default_value = linux::debian::SERIES[0].0)]
        series: String,
        /// Output directory (default: CACHE/linux-guest-arm64/<release>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Cache of the arm64 kernel image and busybox (outside the repository).
        #[arg(long, default_value = linux::CACHE)]
        cache: PathBuf,
    },
    /// Check a corpus directory against its manifest, oracle and dumps.
    Check {
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Only these kernels (default: every entry the manifest lists).
        #[arg(long = "kernel")]
        kernels: Vec<String>,
        /// Only these scenarios.
        #[arg(long = "scenario")]
        scenarios: Vec<String>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Corpus {
            out,
            big,
            kernels,
            scenarios,
            no_gzip,
        } => {
            let crashes = corpus::choose(big, &kernels, &scenarios)?;
            require_tools(crashes.iter().map(|p| p.kernel))?;
            let out = out.unwrap_or_else(corpus::default_dir);
            let manifest = corpus::generate(&Generate {
                out: &out,
                crashes: &crashes,
                gzip: !no_gzip,
            })?;
            eprintln!(
                "{}: manifest of {} entries ({} run now)",
                out.display(),
                manifest.entries.len(),
                crashes.len()
            );
        }
        Command::Manifest { dir } => {
            let out = dir.unwrap_or_else(corpus::default_dir);
            let manifest = corpus::generate(&Generate {
                out: &out,
                crashes: &[],
                gzip: true,
            })?;
            eprintln!(
                "{}: manifest of {} entries",
                out.display(),
                manifest.entries.len()
            );
        }
        Command::Run {
            kernel,
            scenario,
            out,
            formats,
            gcore,
        } => {
            let planned = corpus::plan()
                .into_iter()
                .find(|p| p.kernel.name() == kernel && p.scenario == scenario)
                .with_context(|| format!("kernel {kernel:?} has no scenario {scenario:?}"))?;
            let planned = Planned { gcore, ..planned };
            require_tools([planned.kernel])?;
            run(&planned, &out, &formats)?;
        }
        Command::Linux {
            series,
            out,
            cache,
            includes,
            run,
        } => {
            let extras = includes
                .iter()
                .map(|spec| linux::guest::Extra::parse(spec))
                .collect::<Result<_>>()?;
            let (out, manifest) = linux::generate(&linux::Options {
                series,
                cache,
                out,
                extras,
                run,
            })?;
            for dump in &manifest.dumps {
                eprintln!(
                    "{}\t{} bytes\t{:.2}s\t{}",
                    dump.file, dump.bytes, dump.seconds, dump.producer
                );
            }
            println!("{}", out.display());
        }
        Command::LinuxLive {
            kcrash,
            series,
            out,
            cache,
        } => {
            let out = linux::live::generate(&cache, &series, out, &kcrash)?;
            println!("{}", out.display());
        }
        Command::LinuxArm64 { series, out, cache } => {
            let (out, manifest) = linux::arm64::generate(&cache, &series, out)?;
            eprintln!(
                "linux arm64: {} booted to its panic in {:.1}s, KASLR offset {}",
                manifest.release, manifest.boot_seconds, manifest.kaslr_offset
            );
            for dump in &manifest.dumps {
                eprintln!(
                    "{}\t{} bytes\t{:.2}s\t{}",
                    dump.file, dump.bytes, dump.seconds, dump.producer
                );
            }
            println!("{}", out.display());
        }
        Command::Check {
            dir,
            kernels,
            scenarios,
        } => {
            let dir = dir.unwrap_or_else(corpus::default_dir);
            let gdb = tools::find(tools::GDB).is_some();
            let checked = corpus::check(&dir, gdb, &kernels, &scenarios)?;
            eprintln!(
                "{} entries in {} match their manifest and oracle; {} hosted cores compared with the oracle; gdb compared {} QEMU dumps with the oracle; tracelog read {} QNX dumps and klogger {} Klogger dumps as their oracle says{}",
                checked.entries,
                dir.display(),
                checked.cores,
                checked.against_dump,
                checked.qnx_dumps,
                checked.klogger_dumps,
                if gdb { "" } else { " (gdb not found)" }
            );
        }
    }
    Ok(())
}

/// One crash into `out`, its dumps listed on stdout.
fn run(planned: &Planned, out: &std::path::Path, formats: &[String]) -> Result<()> {
    let image = planned.kernel.build()?;
    match planned.kernel {
        Kernel::Qemu(build) => {
            let formats = if formats.is_empty() {
                planned.formats().to_vec()
            } else {
                formats
                    .iter()
                    .map(|f| {
                        DumpFormat::from_name(f).with_context(|| format!("unknown format {f:?}"))
                    })
                    .collect::<Result<_>>()?
            };
            let cmdline = planned.cmdline();
            let boot = Boot {
                image: &image,
                cmdline: &cmdline,
                memory_mib: build.memory_mib(),
                cpus: build.cpus(),
                timeout: Duration::from_secs(600),
            };
            let crash = qemu::crash_and_dump(&boot, out, &formats)?;
            eprintln!(
                "boot to panic {:.2}s, dumps {:.2}s",
                crash.boot_time.as_secs_f64(),
                crash.dump_time.as_secs_f64()
            );
            for (format, path) in crash.dumps {
                // A raw image is named as kcrash takes it: FILE@ADDRESS.
                let at = format
                    .phys_start()
                    .map(|start| format!("@{start:#x}"))
                    .unwrap_or_default();
                println!("{}\t{}{at}", format.name(), path.display());
            }
        }
        Kernel::Hosted(_) => {
            if !formats.is_empty() {
                bail!("--format is for QEMU kernels");
            }
            let entry = corpus::crash_hosted(planned, &image, out, false)?;
            for dump in entry.dumps {
                let file = std::path::Path::new(&dump.path)
                    .file_name()
                    .unwrap_or_default();
                println!("{}\t{}", dump.format, out.join(file).display());
            }
        }
    }
    Ok(())
}

fn require_tools(kernels: impl IntoIterator<Item = Kernel>) -> Result<()> {
    let mut needed: Vec<&str> = kernels.into_iter().flat_map(Kernel::tools).collect();
    needed.sort_unstable();
    needed.dedup();
    let missing = tools::missing(&needed);
    if !missing.is_empty() {
        bail!(
            "missing tools: {} (apt-get install -y qemu-system-x86 makedumpfile gdb gcc)",
            missing.join(", ")
        );
    }
    Ok(())
}
