//! The hosted test programs: which exist, which scenarios each offers, and how each is built.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cargo_build, repo_root, tools};

/// The scenarios every kernel offers (tests/kernels/README.md): the bare kernel's
/// `klog.scenario=` values, the hosted programs' first argument.
pub const SCENARIOS: [&str; 8] = [
    "rings",
    "wrap",
    "unfilled",
    "preinit",
    "strings",
    "torn",
    "scribbled",
    "off",
];

/// A hosted test program build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Program {
    /// tests/kernels/hosted: Rust, klog-runtime.
    Hosted,
    /// The same with rings of 4 Mi records (feature big-rings), for benchmarks.
    HostedBig,
    /// tests/kernels/hosted-c: C, klog-runtime/include/klog.h, gcc -g.
    HostedC,
    /// tests/kernels/hosted with a ring set per processor, grouped subsystems and event IDs
    /// (feature per-processor).
    HostedPercpu,
    /// tests/kernels/hosted-c with the same (gcc -DHOSTED_PER_PROCESSOR).
    HostedCPercpu,
    /// The big rings split among four processors' sets (features big-rings and per-processor),
    /// for the reader's benchmarks.
    HostedBigPercpu,
    /// tests/kernels/hosted with the DProbes scenarios (feature dprobes).
    HostedDprobes,
    /// tests/kernels/hosted as built for the corpus, for the QNX trace ring's scenarios: their
    /// entries keep an image of their own.
    HostedQnx,
    /// tests/kernels/hosted with the Klogger scenarios (feature klogger).
    HostedKlogger,
}

impl Program {
    pub const ALL: [Program; 9] = [
        Program::Hosted,
        Program::HostedBig,
        Program::HostedC,
        Program::HostedPercpu,
        Program::HostedCPercpu,
        Program::HostedBigPercpu,
        Program::HostedDprobes,
        Program::HostedQnx,
        Program::HostedKlogger,
    ];

    /// Name in the corpus layout and manifest.
    pub fn name(self) -> &'static str {
        match self {
            Program::Hosted => "hosted",
            Program::HostedBig => "hosted-big",
            Program::HostedC => "hosted-c",
            Program::HostedPercpu => "hosted-percpu",
            Program::HostedCPercpu => "hosted-c-percpu",
            Program::HostedBigPercpu => "hosted-big-percpu",
            Program::HostedDprobes => "hosted-dprobes",
            Program::HostedQnx => "hosted-qnx",
            Program::HostedKlogger => "hosted-klogger",
        }
    }

    pub fn from_name(name: &str) -> Option<Program> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    pub fn scenarios(self) -> &'static [&'static str] {
        match self {
            Program::Hosted | Program::HostedC => &SCENARIOS,
            Program::HostedBig | Program::HostedBigPercpu => &["big"],
            // Shared-ring scenarios that run unchanged on per-processor rings, and its own.
            Program::HostedPercpu | Program::HostedCPercpu => &["rings", "wrap", "percpu"],
            Program::HostedDprobes => &crate::dprobes::SCENARIOS,
            Program::HostedQnx => &qnx_writer::scenarios::NAMES,
            Program::HostedKlogger => &crate::klogger::SCENARIOS,
        }
    }

    /// Whether its corpus entries are committed (the big ones' dumps are 260 MiB: generated
    /// only).
    pub fn committed(self) -> bool {
        !matches!(self, Program::HostedBig | Program::HostedBigPercpu)
    }

    /// Tools its build needs beyond cargo.
    pub fn tools(self) -> &'static [&'static str] {
        match self {
            Program::HostedC | Program::HostedCPercpu => &[tools::GCC],
            Program::Hosted
            | Program::HostedBig
            | Program::HostedPercpu
            | Program::HostedBigPercpu
            | Program::HostedDprobes
            | Program::HostedQnx
            | Program::HostedKlogger => &[],
        }
    }

    /// Cargo features of a Rust build; `None` for the C ones.
    fn cargo_features(self) -> Option<&'static str> {
        match self {
            Program::Hosted | Program::HostedQnx => Some(""),
            Program::HostedBig => Some("big-rings"),
            Program::HostedPercpu => Some("per-processor"),
            Program::HostedBigPercpu => Some("big-rings,per-processor"),
            Program::HostedDprobes => Some("dprobes"),
            Program::HostedKlogger => Some("klogger"),
            Program::HostedC | Program::HostedCPercpu => None,
        }
    }

    /// The command [`Program::build`] runs, for the manifest.
    pub fn build_command(self) -> String {
        match self.cargo_features() {
            Some("") => format!("CARGO_PROFILE_RELEASE_DEBUG=2 {}", cargo_line("")),
            Some(features) => format!(
                "CARGO_PROFILE_RELEASE_DEBUG=2 {}",
                cargo_line(&format!(" --features {features}"))
            ),
            None => format!("gcc {} -o {}", self.gcc_args().join(" "), self.name()),
        }
    }

    /// Builds the program under `target_dir` and returns its executable.
    pub fn build(self, target_dir: &Path) -> Result<PathBuf> {
        let out = target_dir.join(self.name());
        std::fs::create_dir_all(&out)?;
        let root = repo_root();
        // gcc writes beside the executable and the result is renamed over it: tests running in
        // parallel build the C program too, and one must not exec a half-written file.
        static BUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let build = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let gcc_output = out.join(format!(
            "{}.{}-{build}.tmp",
            self.name(),
            std::process::id()
        ));
        let (mut cmd, exe) = match self.cargo_features() {
            Some(features) => {
                let mut cmd = cargo_build(&out);
                cmd.args(["-p", "kcrash-hosted-kernel"])
                    // Full DWARF, so readers find the KLog types in the image.
                    .env("CARGO_PROFILE_RELEASE_DEBUG", "2");
                if !features.is_empty() {
                    cmd.args(["--features", features]);
                }
                (cmd, out.join("release/hosted"))
            }
            None => {
                let exe = out.join(self.name());
                let mut cmd = Command::new(tools::GCC);
                cmd.args(self.gcc_args()).arg("-o").arg(&gcc_output);
                (cmd, exe)
            }
        };
        let status = cmd
            .current_dir(&root)
            .status()
            .with_context(|| format!("building {}", self.name()))?;
        if !status.success() {
            bail!("building {} failed ({status})", self.name());
        }
        if matches!(self, Program::HostedC | Program::HostedCPercpu) {
            std::fs::rename(&gcc_output, &exe).with_context(|| {
                format!("renaming {} to {}", gcc_output.display(), exe.display())
            })?;
        }
        if !exe.is_file() {
            bail!("the build succeeded but {} is missing", exe.display());
        }
        Ok(exe)
    }

    /// gcc's arguments for a C build: [`GCC_ARGS`], after the per-processor build's define.
    fn gcc_args(self) -> Vec<&'static str> {
        let defines: &[&str] = match self {
            Program::HostedCPercpu => &["-DHOSTED_PER_PROCESSOR"],
            _ => &[],
        };
        [defines, &GCC_ARGS].concat()
    }
}

/// gcc's arguments, relative to the repository root. -O2 so the KLOG fast path is as a kernel
/// would compile it; -g for the DWARF readers need.
const GCC_ARGS: [&str; 9] = [
    "-g",
    "-O2",
    "-std=gnu11",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pthread",
    "-Iklog-runtime/include",
    "tests/kernels/hosted-c/hosted.c",
];

fn cargo_line(features: &str) -> String {
    format!("cargo build --release --locked -p kcrash-hosted-kernel{features}")
}
