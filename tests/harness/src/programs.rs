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
    /// tests/kernels/hosted-c built for arm64 (aarch64-linux-gnu-gcc -static) and run under
    /// QEMU's user-mode emulator, whose own core dump is the dump.
    HostedCArm64,
    /// tests/kernels/hosted built for arm64 (static, with the cross compiler as linker) and run
    /// the same way.
    HostedArm64,
}

impl Program {
    pub const ALL: [Program; 11] = [
        Program::Hosted,
        Program::HostedBig,
        Program::HostedC,
        Program::HostedPercpu,
        Program::HostedCPercpu,
        Program::HostedBigPercpu,
        Program::HostedDprobes,
        Program::HostedQnx,
        Program::HostedKlogger,
        Program::HostedCArm64,
        Program::HostedArm64,
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
            Program::HostedCArm64 => "hosted-c-arm64",
            Program::HostedArm64 => "hosted-arm64",
        }
    }

    pub fn from_name(name: &str) -> Option<Program> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    pub fn scenarios(self) -> &'static [&'static str] {
        match self {
            Program::Hosted | Program::HostedC | Program::HostedCArm64 | Program::HostedArm64 => {
                &SCENARIOS
            }
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
            // The Rust build links with the cross compiler.
            Program::HostedCArm64 | Program::HostedArm64 => {
                &[tools::AARCH64_GCC, tools::QEMU_USER_AARCH64]
            }
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
            Program::Hosted | Program::HostedQnx | Program::HostedArm64 => Some(""),
            Program::HostedBig => Some("big-rings"),
            Program::HostedPercpu => Some("per-processor"),
            Program::HostedBigPercpu => Some("big-rings,per-processor"),
            Program::HostedDprobes => Some("dprobes"),
            Program::HostedKlogger => Some("klogger"),
            Program::HostedC | Program::HostedCPercpu | Program::HostedCArm64 => None,
        }
    }

    /// The emulator that runs it on this machine, for a program built for another.
    pub fn emulator(self) -> Option<&'static str> {
        matches!(self, Program::HostedCArm64 | Program::HostedArm64)
            .then_some(tools::QEMU_USER_AARCH64)
    }

    /// A Rust build for another machine: the target, and the environment that links it
    /// statically with the cross compiler (so the emulator needs no libraries of that machine).
    fn rust_target(self) -> Option<(&'static str, [(&'static str, &'static str); 2])> {
        (self == Program::HostedArm64).then_some((
            AARCH64_TARGET,
            [
                (
                    "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER",
                    tools::AARCH64_GCC,
                ),
                (
                    "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
                    "-C target-feature=+crt-static",
                ),
            ],
        ))
    }

    /// The C compiler of a C build.
    fn compiler(self) -> &'static str {
        match self {
            Program::HostedCArm64 => tools::AARCH64_GCC,
            _ => tools::GCC,
        }
    }

    /// The command [`Program::build`] runs, for the manifest.
    pub fn build_command(self) -> String {
        if let Some((target, env)) = self.rust_target() {
            let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}='{v}'")).collect();
            return format!(
                "CARGO_PROFILE_RELEASE_DEBUG=2 {} {}",
                env.join(" "),
                cargo_line(&format!(" --target {target}"))
            );
        }
        match self.cargo_features() {
            Some("") => format!("CARGO_PROFILE_RELEASE_DEBUG=2 {}", cargo_line("")),
            Some(features) => format!(
                "CARGO_PROFILE_RELEASE_DEBUG=2 {}",
                cargo_line(&format!(" --features {features}"))
            ),
            None => format!(
                "{} {} -o {}",
                self.compiler(),
                self.gcc_args().join(" "),
                self.name()
            ),
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
                match self.rust_target() {
                    Some((target, env)) => {
                        cmd.args(["--target", target]).envs(env);
                        (cmd, out.join(target).join("release/hosted"))
                    }
                    None => (cmd, out.join("release/hosted")),
                }
            }
            None => {
                let exe = out.join(self.name());
                let mut cmd = Command::new(self.compiler());
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
        if self.cargo_features().is_none() {
            std::fs::rename(&gcc_output, &exe).with_context(|| {
                format!("renaming {} to {}", gcc_output.display(), exe.display())
            })?;
        }
        if !exe.is_file() {
            bail!("the build succeeded but {} is missing", exe.display());
        }
        Ok(exe)
    }

    /// gcc's arguments for a C build: [`GCC_ARGS`], after the per-processor build's define; the
    /// arm64 build is static, so the emulator needs no arm64 libraries.
    fn gcc_args(self) -> Vec<&'static str> {
        let defines: &[&str] = match self {
            Program::HostedCPercpu => &["-DHOSTED_PER_PROCESSOR"],
            Program::HostedCArm64 => &["-static"],
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

/// Rust's name for the arm64 Linux machine the arm64 programs are built for.
const AARCH64_TARGET: &str = "aarch64-unknown-linux-gnu";

fn cargo_line(features: &str) -> String {
    format!("cargo build --release --locked -p kcrash-hosted-kernel{features}")
}
