//! `kcrash-hosted-harness`: regenerate the hosted corpus, crash one scenario, or check a corpus.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use kcrash_hosted_harness::capture::Capture;
use kcrash_hosted_harness::corpus::{self, Generate};
use kcrash_hosted_harness::programs::{self, Program};
use kcrash_hosted_harness::tools;
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "Crash kcrash's hosted test programs into Linux and gdb cores and keep them")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Regenerate the hosted corpus: build the programs, crash every scenario, write images,
    /// dumps, oracle logs, expected results and manifest.toml.
    Corpus {
        /// Corpus directory (default corpus/hosted).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also make the big-ring benchmark dump (not committed; 260 MiB).
        #[arg(long)]
        big: bool,
    },
    /// Crash one scenario of one program into a directory, without touching any manifest.
    Run {
        /// hosted, hosted-c or hosted-big.
        program: String,
        scenario: String,
        #[arg(long)]
        out: PathBuf,
        /// Take the core with gdb's gcore instead of Linux's.
        #[arg(long)]
        gcore: bool,
    },
    /// Check a corpus directory against its manifest, oracle logs and cores.
    Check {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

fn main() -> Result<()> {
    let target_dir = programs::repo_root().join("target/hosted-programs");
    match Cli::parse().command {
        Command::Corpus { out, big } => {
            let chosen: Vec<Program> = Program::ALL
                .into_iter()
                .filter(|p| p.committed() || big)
                .collect();
            require(&chosen)?;
            let out = out.unwrap_or_else(corpus::default_dir);
            let manifest = corpus::generate(&Generate {
                out: &out,
                target_dir: &target_dir,
                programs: chosen,
            })?;
            eprintln!(
                "wrote {} entries to {}",
                manifest.entries.len(),
                out.display()
            );
        }
        Command::Run {
            program,
            scenario,
            out,
            gcore,
        } => {
            let program = Program::from_name(&program).with_context(|| {
                format!("unknown program {program:?} (hosted, hosted-c, hosted-big)")
            })?;
            if !program.scenarios().contains(&scenario.as_str()) {
                bail!(
                    "{} has no scenario {scenario:?} (known: {})",
                    program.name(),
                    program.scenarios().join(", ")
                );
            }
            require(&[program])?;
            let image = program.build(&target_dir)?;
            let capture = gcore.then_some(Capture::Gcore);
            let entry = corpus::crash_entry(&out, program, &image, &scenario, capture)?;
            for dump in entry.dumps {
                println!("{}\t{}", dump.format, out.join(dump.path).display());
            }
        }
        Command::Check { dir } => {
            let dir = dir.unwrap_or_else(corpus::default_dir);
            let n = corpus::check(&dir)?;
            eprintln!(
                "{n} entries in {} match their manifest, oracle and cores",
                dir.display()
            );
        }
    }
    Ok(())
}

/// Fails unless gdb (for gcore) and each program's build tools are on PATH.
fn require(programs: &[Program]) -> Result<()> {
    let mut needed = vec![tools::GDB];
    needed.extend(programs.iter().flat_map(|p| p.tools()));
    let missing = tools::missing(&needed);
    if !missing.is_empty() {
        bail!(
            "missing tools: {} (apt-get install -y gdb gcc)",
            missing.join(", ")
        );
    }
    Ok(())
}
