//! `kcrash-harness`: regenerate the corpus, crash one scenario, or check a corpus.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use kcrash_harness::corpus::{self, Generate, Scenario};
use kcrash_harness::dump::DumpFormat;
use kcrash_harness::kernel;
use kcrash_harness::qemu::{self, Boot};
use kcrash_harness::tools;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(about = "Crash kcrash's test kernels under QEMU and keep the dumps")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Regenerate the corpus: build the kernels, crash every committed scenario, write
    /// dumps, expected results and manifest.toml.
    Corpus {
        /// Corpus directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also make the big-ring benchmark dump (not committed; needs ~400 MiB of RAM).
        #[arg(long)]
        big: bool,
        /// Only these scenarios (default: all committed ones).
        #[arg(long = "scenario")]
        scenarios: Vec<String>,
        /// Keep every dump uncompressed.
        #[arg(long)]
        no_gzip: bool,
    },
    /// Boot one scenario and dump it into a directory, without touching any manifest.
    Run {
        scenario: String,
        #[arg(long)]
        out: PathBuf,
        /// Formats to write (default: all).
        #[arg(long = "format")]
        formats: Vec<String>,
    },
    /// Check a corpus directory against its manifest and oracle.
    Check {
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Only these scenarios (default: every entry the manifest lists).
        #[arg(long = "scenario")]
        scenarios: Vec<String>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Corpus {
            out,
            big,
            scenarios,
            no_gzip,
        } => {
            require_tools()?;
            let out = out.unwrap_or_else(corpus::default_dir);
            let chosen: Vec<&'static Scenario> = if scenarios.is_empty() {
                corpus::SCENARIOS
                    .iter()
                    .filter(|s| s.committed || big)
                    .collect()
            } else {
                scenarios
                    .iter()
                    .map(|name| find_scenario(name))
                    .collect::<Result<_>>()?
            };
            let chosen_count = chosen.len();
            let target_dir = kernel::repo_root().join("target/kernels");
            let manifest = corpus::generate(&Generate {
                out: &out,
                target_dir: &target_dir,
                scenarios: chosen,
                gzip: !no_gzip,
            })?;
            eprintln!(
                "{}: manifest of {} entries ({} run now)",
                out.display(),
                manifest.entries.len(),
                chosen_count
            );
        }
        Command::Run {
            scenario,
            out,
            formats,
        } => {
            require_tools()?;
            let scenario = find_scenario(&scenario)?;
            let formats = if formats.is_empty() {
                scenario.formats().to_vec()
            } else {
                formats
                    .iter()
                    .map(|f| {
                        DumpFormat::from_name(f).with_context(|| format!("unknown format {f:?}"))
                    })
                    .collect::<Result<_>>()?
            };
            let image =
                kernel::build(scenario.kernel, &kernel::repo_root().join("target/kernels"))?;
            let cmdline = scenario.cmdline();
            let boot = Boot {
                image: &image,
                cmdline: &cmdline,
                memory_mib: scenario.kernel.memory_mib(),
                timeout: Duration::from_secs(600),
            };
            let crash = qemu::crash_and_dump(&boot, &out, &formats)?;
            eprintln!(
                "boot to panic {:.2}s, dumps {:.2}s",
                crash.boot_time.as_secs_f64(),
                crash.dump_time.as_secs_f64()
            );
            for (format, path) in crash.dumps {
                println!("{}\t{}", format.name(), path.display());
            }
        }
        Command::Check { dir, scenarios } => {
            let dir = dir.unwrap_or_else(corpus::default_dir);
            let gdb = tools::find(tools::GDB).is_some();
            let checked = corpus::check(&dir, gdb, &scenarios)?;
            eprintln!(
                "{} entries in {} match their manifest and oracle; gdb compared {} dumps with the oracle{}",
                checked.entries,
                dir.display(),
                checked.against_dump,
                if gdb { "" } else { " (gdb not found)" }
            );
        }
    }
    Ok(())
}

fn find_scenario(name: &str) -> Result<&'static Scenario> {
    corpus::scenario(name).with_context(|| {
        let names: Vec<&str> = corpus::SCENARIOS.iter().map(|s| s.name).collect();
        format!("unknown scenario {name:?} (known: {})", names.join(", "))
    })
}

fn require_tools() -> Result<()> {
    let missing = tools::missing(&[tools::QEMU, tools::MAKEDUMPFILE]);
    if !missing.is_empty() {
        bail!(
            "missing tools: {} (apt-get install -y qemu-system-x86 makedumpfile)",
            missing.join(", ")
        );
    }
    Ok(())
}
