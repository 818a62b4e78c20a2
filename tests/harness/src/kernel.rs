//! Building the test kernels. The bare kernel is outside the workspace (it needs kernel
//! codegen flags from its own .cargo/config.toml), so cargo is run from its directory.

use crate::{cargo_build, repo_root};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// A kernel build: which crate, which features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelBuild {
    /// The bare kernel with the corpus's ring sizes.
    Bare,
    /// The bare kernel with rings totalling 4 Mi records, for benchmarks.
    BareBig,
    /// The bare kernel with a ring set per processor, run on two processors.
    BarePercpu,
    /// The bare kernel with the DProbes scenarios (feature dprobes).
    BareDprobes,
    /// The bare kernel as built for the corpus, for the QNX trace ring's scenarios: their
    /// entries keep an image of their own.
    BareQnx,
    /// The bare kernel with the Klogger scenarios, run on two processors.
    BareKlogger,
}

impl KernelBuild {
    /// Name used in the corpus layout and manifest.
    pub fn name(self) -> &'static str {
        match self {
            KernelBuild::Bare => "bare",
            KernelBuild::BareBig => "bare-big",
            KernelBuild::BarePercpu => "bare-percpu",
            KernelBuild::BareDprobes => "dprobes",
            KernelBuild::BareQnx => "bare-qnx",
            KernelBuild::BareKlogger => "bare-klogger",
        }
    }

    /// Processors QEMU gives the guest: one set of rings each for the per-processor build.
    pub fn cpus(self) -> u32 {
        match self {
            KernelBuild::BarePercpu | KernelBuild::BareKlogger => 2,
            KernelBuild::Bare
            | KernelBuild::BareBig
            | KernelBuild::BareDprobes
            | KernelBuild::BareQnx => 1,
        }
    }

    /// Cargo's feature arguments for this build.
    fn features(self) -> &'static [&'static str] {
        match self {
            KernelBuild::Bare | KernelBuild::BareQnx => &[],
            KernelBuild::BareBig => &["--features", "big-rings"],
            KernelBuild::BarePercpu => &["--features", "per-processor"],
            KernelBuild::BareDprobes => &["--features", "dprobes"],
            KernelBuild::BareKlogger => &["--features", "klogger"],
        }
    }

    /// Guest RAM for this kernel, in MiB: the big rings alone take 256 MiB.
    pub fn memory_mib(self) -> u32 {
        match self {
            KernelBuild::Bare
            | KernelBuild::BarePercpu
            | KernelBuild::BareDprobes
            | KernelBuild::BareQnx
            | KernelBuild::BareKlogger => 32,
            KernelBuild::BareBig => 384,
        }
    }
}

/// The command [`build`] runs, for the manifest.
pub fn build_command(build: KernelBuild) -> String {
    let features: String = build.features().iter().map(|a| format!(" {a}")).collect();
    format!("cd tests/kernels/bare && cargo build --release --locked{features}")
}

/// Builds `build` in release mode into `target_dir` and returns the kernel ELF path.
pub fn build(build: KernelBuild, target_dir: &Path) -> Result<PathBuf> {
    let crate_dir = repo_root().join("tests/kernels/bare");
    let target_dir = target_dir.join(build.name());
    let mut cmd = cargo_build(&target_dir);
    cmd.current_dir(&crate_dir);
    cmd.args(build.features());
    let status = cmd
        .status()
        .with_context(|| format!("running cargo build in {}", crate_dir.display()))?;
    if !status.success() {
        bail!("building the {} kernel failed ({status})", build.name());
    }
    let image = target_dir.join("x86_64-unknown-linux-gnu/release/bare");
    if !image.is_file() {
        bail!("cargo succeeded but {} is missing", image.display());
    }
    Ok(image)
}
