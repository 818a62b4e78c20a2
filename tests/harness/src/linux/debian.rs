//! Debian's side: the kernel image and debug vmlinux in the cache, the packages the pipeline
//! installs, and klogtest.ko built against the release's headers.

use super::run;
use crate::arch::Arch;
use crate::{repo_root, tools};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The static busybox the guest runs (package busybox-static).
pub const BUSYBOX: &str = "/bin/busybox";

/// Debian's kernel image unpacked under [`image_cache`].
#[derive(Debug, Clone)]
pub struct Kernel {
    pub release: String,
    pub root: PathBuf,
    pub arch: Arch,
}

impl Kernel {
    pub fn vmlinuz(&self) -> PathBuf {
        self.root.join(format!("boot/vmlinuz-{}", self.release))
    }

    /// A module of the image, by its path under lib/modules/<release>/kernel.
    pub(super) fn module(&self, path: &str) -> PathBuf {
        self.root
            .join(format!("lib/modules/{}/kernel", self.release))
            .join(path)
    }

    /// Debian's headers for the release (linux-headers-<release>), installed for the host's
    /// kernels; another architecture's are unpacked into the cache ([`cross_headers`]).
    pub fn headers(&self) -> PathBuf {
        PathBuf::from(format!("/usr/src/linux-headers-{}", self.release))
    }
}

/// The kernel build's tools Debian's headers point at (`scripts` and `tools` are links to
/// `../../lib/linux-kbuild-<series>/…`): the host's own, whatever the headers' architecture.
const KBUILD_LINK: &str = "scripts";

/// `kernel`'s headers for a foreign architecture, unpacked into `cache` (installing
/// linux-headers-<release>:arm64 would replace the host's gcc with arm64's): the release's
/// package and the common one it includes, their links to the kernel build's tools pointed at the
/// host's linux-kbuild, and the include of the common part at its place in the cache.
pub fn cross_headers(cache: &Path, kernel: &Kernel) -> Result<PathBuf> {
    let root = cache.join(format!("linux-headers-{}", kernel.arch.debian()));
    let headers = root.join(format!("usr/src/linux-headers-{}", kernel.release));
    let ready = root.join(format!("{}.ready", kernel.release));
    if ready.exists() {
        return Ok(headers);
    }
    let suffix = format!("-{}", kernel.arch.debian());
    let common = kernel
        .release
        .strip_suffix(&suffix)
        .with_context(|| format!("release {} does not end in {suffix}", kernel.release))?;
    unpack(
        &format!("linux-headers-{}", kernel.release),
        kernel.arch,
        &root,
    )?;
    unpack(
        &format!("linux-headers-{common}-common"),
        Arch::X86_64,
        &root,
    )?;
    // ../../lib/linux-kbuild-6.1/scripts: the host's linux-kbuild-6.1 has the same tools.
    let link = std::fs::read_link(headers.join(KBUILD_LINK))
        .with_context(|| format!("reading the link {}", headers.join(KBUILD_LINK).display()))?;
    let kbuild = link
        .parent()
        .and_then(Path::file_name)
        .with_context(|| format!("{} links to {}", KBUILD_LINK, link.display()))?
        .to_owned();
    let host_kbuild = Path::new("/usr/lib").join(&kbuild);
    if !host_kbuild.exists() {
        apt_install(&[&kbuild.to_string_lossy()])?;
    }
    let lib = root.join("usr/lib");
    std::fs::create_dir_all(&lib)?;
    let _ = std::fs::remove_file(lib.join(&kbuild));
    std::os::unix::fs::symlink(&host_kbuild, lib.join(&kbuild))
        .with_context(|| format!("linking {}", lib.join(&kbuild).display()))?;
    // The release's Makefile is one line: `include /usr/src/linux-headers-<common>/Makefile`.
    let makefile = headers.join("Makefile");
    let text = std::fs::read_to_string(&makefile)
        .with_context(|| format!("reading {}", makefile.display()))?;
    let moved = text.replace(
        "include /usr/src/",
        &format!("include {}/usr/src/", root.display()),
    );
    if moved == text {
        bail!("{} includes no /usr/src/ Makefile", makefile.display());
    }
    std::fs::write(&makefile, moved)?;
    std::fs::write(&ready, "")?;
    Ok(headers)
}

/// The debug vmlinux of `release` inside the cache, where `dpkg-deb` puts it.
pub fn debug_vmlinux_path(cache: &Path, release: &str) -> PathBuf {
    cache
        .join("linux-dbg/usr/lib/debug/boot")
        .join(format!("vmlinux-{release}"))
}

/// `apt-get install -y PACKAGES`, after `apt-get update` if the first try fails (stale lists).
pub(super) fn apt_install(packages: &[&str]) -> Result<()> {
    eprintln!("linux: apt-get install -y {}", packages.join(" "));
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-qq"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            // The harness's standard output is its answer (the guest's directory, which CI
            // reads): what apt says goes to standard error.
            .stdout(std::io::stderr())
            .status()
    };
    if install().context("running apt-get")?.success() {
        return Ok(());
    }
    run(
        Command::new("apt-get").args(["update", "-qq"]),
        "apt-get update",
    )?;
    if !install().context("running apt-get")?.success() {
        bail!("apt-get install -y {} failed", packages.join(" "));
    }
    Ok(())
}

/// `apt-get download PACKAGE:ARCH` into `dir`; returns the .deb. A foreign architecture's
/// package must be known to apt first ([`add_architecture`]).
fn apt_download(package: &str, arch: Arch, dir: &Path) -> Result<PathBuf> {
    let qualified = format!("{package}:{}", arch.debian());
    eprintln!("linux: apt-get download {qualified}");
    let download = || {
        Command::new("apt-get")
            .args(["download", "-qq", &qualified])
            .current_dir(dir)
            .stdout(std::io::stderr())
            .status()
    };
    if !download().context("running apt-get download")?.success() {
        run(
            Command::new("apt-get").args(["update", "-qq"]),
            "apt-get update",
        )?;
        if !download().context("running apt-get download")?.success() {
            bail!("apt-get download {qualified} failed");
        }
    }
    std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{package}_")) && n.ends_with(".deb"))
        })
        .with_context(|| {
            format!(
                "apt-get download {qualified} left no .deb in {}",
                dir.display()
            )
        })
}

/// The Linux series the guest pipelines boot, each as Debian builds it: the suite whose
/// `linux-image-amd64` (and `linux-image-arm64`) is that series. The first is the default, the kernel CI has always booted.
pub const SERIES: [(&str, &str); 3] = [
    ("6.1", "bookworm"),
    ("5.10", "bullseye"),
    ("6.12", "bookworm-backports"),
];

/// apt's sources for the suites of [`SERIES`] the machine's own sources lack (a bookworm
/// machine has bookworm): written once, then `apt-get update`.
const SOURCES: &str = "/etc/apt/sources.list.d/kcrash-kernels.sources";

/// Where the kernel images of `arch` are unpacked: amd64's in `<cache>/linux-image` (the cache
/// .ci/run fills for dumpfmt's tests), another architecture's in `<cache>/linux-image-<arch>`.
pub fn image_cache(cache: &Path, arch: Arch) -> PathBuf {
    match arch {
        Arch::X86_64 => cache.join("linux-image"),
        _ => cache.join(format!("linux-image-{}", arch.debian())),
    }
}

/// The kernel image of `series` for `arch` in [`image_cache`], unpacked from the package that
/// `series`' `linux-image-<arch>` depends on when it is not there yet. Several series share the
/// directory: each release has its own files.
pub fn kernel_image(cache: &Path, series: &str, arch: Arch) -> Result<Kernel> {
    let Some(&(_, suite)) = SERIES.iter().find(|(s, _)| *s == series) else {
        bail!(
            "no Linux series {series:?}: the guest runs {}",
            SERIES.map(|(s, _)| s).join(", ")
        );
    };
    let root = image_cache(cache, arch);
    if let Some(kernel) = unpacked_kernel(&root, series, arch)? {
        return Ok(kernel);
    }
    add_architecture(arch)?;
    let meta = meta_package(arch);
    let package = match image_package(series, arch)? {
        Some(p) => p,
        None => {
            add_suite(suite)?;
            image_package(series, arch)?
                .with_context(|| format!("no {meta} of Linux {series} in Debian {suite}"))?
        }
    };
    unpack(&package, arch, &root)?;
    unpacked_kernel(&root, series, arch)?
        .with_context(|| format!("{package} has no boot/vmlinuz-*"))
}

/// `apt-get download PACKAGE:ARCH` and `dpkg-deb -x` it into `root`, the .deb deleted after.
fn unpack(package: &str, arch: Arch, root: &Path) -> Result<()> {
    std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
    let deb = apt_download(package, arch, root)?;
    run(
        Command::new("dpkg-deb").arg("-x").arg(&deb).arg(root),
        &format!("dpkg-deb -x {}", deb.display()),
    )?;
    std::fs::remove_file(&deb)?;
    Ok(())
}

/// The package that depends on the newest kernel image of `arch`: `linux-image-amd64`.
fn meta_package(arch: Arch) -> String {
    format!("linux-image-{}", arch.debian())
}

/// The image package (`linux-image-<release>`) of the newest [`meta_package`] of `series`
/// apt knows, if it knows one.
fn image_package(series: &str, arch: Arch) -> Result<Option<String>> {
    let meta = format!("{}:{}", meta_package(arch), arch.debian());
    let madison = run(
        Command::new("apt-cache").args(["madison", &meta]),
        &format!("apt-cache madison {meta}"),
    )?;
    let Some(version) = newest_of_series(&String::from_utf8_lossy(&madison.stdout), series) else {
        return Ok(None);
    };
    let depends = run(
        Command::new("apt-cache").args(["depends", &format!("{meta}={version}")]),
        &format!("apt-cache depends {meta}={version}"),
    )?;
    Ok(image_dependency(&String::from_utf8_lossy(&depends.stdout)))
}

/// The newest version of `series` in `apt-cache madison`'s answer, whose lines are
/// `linux-image-amd64 | 6.12.95-1~bpo12+1 | http://... bookworm-backports/main amd64 Packages`.
fn newest_of_series(madison: &str, series: &str) -> Option<String> {
    madison
        .lines()
        .filter_map(|l| l.split('|').nth(1).map(|v| v.trim().to_string()))
        .filter(|v| v.starts_with(&format!("{series}.")))
        .max_by(|a, b| version_order(a, b))
}

/// The kernel image package in `apt-cache depends`' answer, without the `:arm64` apt adds to a
/// foreign architecture's.
fn image_dependency(depends: &str) -> Option<String> {
    depends.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Depends: ")
            .filter(|p| p.starts_with("linux-image-"))
            .map(|p| p.split(':').next().unwrap_or(p).to_string())
    })
}

/// Makes `arch`'s packages known to apt when it is neither dpkg's own architecture nor one of
/// its foreign ones: `dpkg --add-architecture`, then `apt-get update`.
fn add_architecture(arch: Arch) -> Result<()> {
    let list = |args: &[&str]| -> Result<String> {
        let out = run(
            Command::new("dpkg").args(args),
            &format!("dpkg {}", args[0]),
        )?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let native = list(&["--print-architecture"])?;
    let foreign = list(&["--print-foreign-architectures"])?;
    if native
        .split_whitespace()
        .chain(foreign.split_whitespace())
        .any(|a| a == arch.debian())
    {
        return Ok(());
    }
    eprintln!("linux: dpkg --add-architecture {}", arch.debian());
    run(
        Command::new("dpkg").args(["--add-architecture", arch.debian()]),
        &format!("dpkg --add-architecture {}", arch.debian()),
    )?;
    run(
        Command::new("apt-get").args(["update", "-qq"]),
        "apt-get update",
    )?;
    Ok(())
}

/// Debian versions by their numbers in turn (enough for one package's versions: 6.1.176-1,
/// 6.1.192-2).
fn version_order(a: &str, b: &str) -> std::cmp::Ordering {
    let numbers = |v: &str| -> Vec<u64> {
        v.split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect()
    };
    numbers(a).cmp(&numbers(b))
}

/// Adds `suite` to apt's sources (in [`SOURCES`], beside the machine's own) and updates.
fn add_suite(suite: &str) -> Result<()> {
    let existing = std::fs::read_to_string(SOURCES).unwrap_or_default();
    let mut suites: Vec<&str> = existing
        .lines()
        .find_map(|l| l.strip_prefix("Suites: "))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    if !suites.contains(&suite) {
        suites.push(suite);
        eprintln!("linux: adding Debian {suite} to apt's sources ({SOURCES})");
        std::fs::write(
            SOURCES,
            format!(
                "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: {}\nComponents: main\n\
                 Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n",
                suites.join(" ")
            ),
        )
        .with_context(|| format!("writing {SOURCES}"))?;
    }
    run(
        Command::new("apt-get").args(["update", "-qq"]),
        "apt-get update",
    )?;
    Ok(())
}

fn unpacked_kernel(root: &Path, series: &str, arch: Arch) -> Result<Option<Kernel>> {
    let Ok(entries) = std::fs::read_dir(root.join("boot")) else {
        return Ok(None);
    };
    let mut releases: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_prefix("vmlinuz-").map(str::to_string))
        .filter(|r| r.starts_with(&format!("{series}.")))
        .filter(|r| r.ends_with(&format!("-{}", arch.debian())))
        .collect();
    releases.sort_by(|a, b| version_order(a, b));
    Ok(releases.pop().map(|release| Kernel {
        release,
        root: root.to_path_buf(),
        arch,
    }))
}

/// Whether `path` is a statically linked ELF (no PT_INTERP): it must run alone in the guest.
fn is_static_elf(path: &Path) -> bool {
    use object::read::elf::{ElfFile64, ProgramHeader};
    let Ok(data) = std::fs::read(path) else {
        return false;
    };
    let Ok(elf) = ElfFile64::<object::Endianness>::parse(&*data) else {
        return false;
    };
    let endian = elf.endian();
    !elf.elf_program_headers()
        .iter()
        .any(|ph| ph.p_type(endian) == object::elf::PT_INTERP)
}

/// Installs the Debian packages the pipeline needs and does not find: the headers of
/// `kernel`'s release and a static busybox.
pub fn ensure_packages(kernel: &Kernel) -> Result<()> {
    let mut missing = Vec::new();
    let headers = format!("linux-headers-{}", kernel.release);
    if !kernel.headers().join("Makefile").is_file() {
        missing.push(headers.as_str());
    }
    if !is_static_elf(Path::new(BUSYBOX)) {
        missing.push("busybox-static");
    }
    if !missing.is_empty() {
        apt_install(&missing)?;
    }
    Ok(())
}

/// A static busybox of `arch`, unpacked from Debian's `busybox-static:<arch>` into
/// `<cache>/busybox-<arch>` when not there yet: for a guest of another architecture than the
/// host's, whose /bin/busybox it must not replace.
pub fn unpacked_busybox(cache: &Path, arch: Arch) -> Result<PathBuf> {
    let root = cache.join(format!("busybox-{}", arch.debian()));
    let busybox = root.join("bin/busybox");
    if is_static_elf(&busybox) {
        return Ok(busybox);
    }
    add_architecture(arch)?;
    unpack("busybox-static", arch, &root)?;
    if !is_static_elf(&busybox) {
        bail!(
            "busybox-static:{} left no static {}",
            arch.debian(),
            busybox.display()
        );
    }
    Ok(busybox)
}

/// Debug modules extracted beside the vmlinux: symbols' module tests read real Debian modules'
/// DWARF (a small one and a large one). Patterns, for tar's `--wildcards`: pvpanic is one file
/// before Linux 5.12 and a directory of three after.
const DEBUG_MODULES: [&str; 2] = ["kernel/drivers/misc/pvpanic*", "kernel/fs/ext4/ext4.ko"];

/// The debug vmlinux of `release` (linux-image-<release>-dbg), fetched with `apt-get download`
/// when the cache does not have it; only the vmlinux and [`DEBUG_MODULES`] are extracted.
pub fn debug_vmlinux(cache: &Path, release: &str, arch: Arch) -> Result<PathBuf> {
    let path = debug_vmlinux_path(cache, release);
    let root = cache.join("linux-dbg");
    // The debug modules are the x86_64 tests' only.
    let modules: Vec<String> = match arch {
        Arch::X86_64 => DEBUG_MODULES
            .iter()
            .map(|m| format!("./usr/lib/debug/lib/modules/{release}/{m}"))
            .collect(),
        Arch::Aarch64 => Vec::new(),
    };
    let ext4 = root.join(format!(
        "usr/lib/debug/lib/modules/{release}/kernel/fs/ext4/ext4.ko"
    ));
    if path.is_file() && (modules.is_empty() || ext4.is_file()) {
        return Ok(path);
    }
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let scratch = tempfile::tempdir_in(&root)?;
    let deb = apt_download(&format!("linux-image-{release}-dbg"), arch, scratch.path())?;
    let mut dpkg = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(&deb)
        .stdout(Stdio::piped())
        .spawn()
        .context("running dpkg-deb --fsys-tarfile")?;
    let tar = Command::new("tar")
        .arg("-x")
        .arg("--wildcards")
        .arg("-C")
        .arg(&root)
        .arg(format!("./usr/lib/debug/boot/vmlinux-{release}"))
        .args(&modules)
        .stdin(dpkg.stdout.take().context("dpkg-deb's stdout")?)
        .status()
        .context("running tar")?;
    let dpkg = dpkg.wait()?;
    if !tar.success() || !dpkg.success() {
        bail!(
            "extracting the vmlinux from {}: dpkg-deb {dpkg}, tar {tar}",
            deb.display()
        );
    }
    if !path.is_file() {
        bail!("{} has no {}", deb.display(), path.display());
    }
    Ok(path)
}

/// Builds klogtest.ko against the release's headers in `target/kernels/linux/<release>` (Kbuild
/// writes its objects beside the sources, so the sources are copied there first).
pub fn build_module(kernel: &Kernel, headers: &Path) -> Result<PathBuf> {
    let source = repo_root().join("tests/kernels/linux");
    let build = repo_root()
        .join("target/kernels/linux")
        .join(&kernel.release);
    std::fs::create_dir_all(&build).with_context(|| format!("creating {}", build.display()))?;
    for file in ["klogtest.c", "Kbuild"] {
        let text = std::fs::read(source.join(file))
            .with_context(|| format!("reading {}", source.join(file).display()))?;
        // Rewritten only when changed, so make sees an unchanged module as up to date.
        if std::fs::read(build.join(file)).ok().as_deref() != Some(&text[..]) {
            std::fs::write(build.join(file), &text)?;
        }
    }
    let include = repo_root().join("klog-runtime/include");
    let oracle_include = repo_root().join("tests/kernels/include");
    let mut make = Command::new("make");
    make.arg("-C")
        .arg(headers)
        .arg(format!("M={}", build.display()))
        .arg(format!("KLOG_INCLUDE={}", include.display()))
        .arg(format!("ORACLE_INCLUDE={}", oracle_include.display()));
    if let Some((kernel_arch, prefix)) = kernel.arch.cross_compile() {
        if let Some(gcc) = headers_compiler(headers)? {
            let compiler = format!("{prefix}{gcc}");
            if !tools::missing(&[&compiler]).is_empty() {
                // Debian's cross compilers: gcc-10-aarch64-linux-gnu.
                apt_install(&[&format!("{gcc}-{}", prefix.trim_end_matches('-'))])?;
            }
        }
        make.arg(format!("ARCH={kernel_arch}"))
            .arg(format!("CROSS_COMPILE={prefix}"));
    }
    run(make.arg("modules"), "make (klogtest.ko)")?;
    Ok(build.join("klogtest.ko"))
}

/// The compiler Debian built the kernel with, which its headers' Kbuild calls by name
/// (`.kernelvariables`: `CC = … $(CROSS_COMPILE)gcc-10`): a host build has it as the headers
/// package's dependency, a cross build must install that version's cross compiler. None when
/// the headers name no versioned compiler.
fn headers_compiler(headers: &Path) -> Result<Option<String>> {
    let path = headers.join(".kernelvariables");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(compiler_of_kernelvariables(&text))
}

fn compiler_of_kernelvariables(text: &str) -> Option<String> {
    text.lines()
        .filter(|l| l.starts_with("CC = ") || l.starts_with("CC := "))
        .find_map(|l| l.rsplit_once("$(CROSS_COMPILE)"))
        .map(|(_, gcc)| gcc.trim().to_owned())
        .filter(|gcc| gcc.starts_with("gcc-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_compiler_is_read_from_its_headers() {
        // Debian 11's arm64 headers, and one naming no version.
        let bullseye = "override ARCH = arm64
override KERNELRELEASE = 5.10.0-32-arm64
CCACHE = ccache
CC = $(if $(DEBIAN_KERNEL_USE_CCACHE),$(CCACHE)) $(CROSS_COMPILE)gcc-10
";
        assert_eq!(
            compiler_of_kernelvariables(bullseye).as_deref(),
            Some("gcc-10")
        );
        assert_eq!(
            compiler_of_kernelvariables("CC = $(CROSS_COMPILE)gcc\n"),
            None
        );
    }

    #[test]
    fn the_newest_version_of_the_series_is_chosen() {
        let madison = "linux-image-arm64:arm64 | 6.12.95-1~bpo12+1 | http://deb.debian.org/debian bookworm-backports/main arm64 Packages
linux-image-arm64:arm64 |  6.1.192-2 | http://deb.debian.org/debian-security bookworm-security/main arm64 Packages
linux-image-arm64:arm64 |  6.1.176-1 | http://deb.debian.org/debian bookworm/main arm64 Packages
linux-image-arm64:arm64 | 5.10.223-1 | http://deb.debian.org/debian bullseye/main arm64 Packages
";
        assert_eq!(
            newest_of_series(madison, "6.1").as_deref(),
            Some("6.1.192-2")
        );
        assert_eq!(
            newest_of_series(madison, "6.12").as_deref(),
            Some("6.12.95-1~bpo12+1")
        );
        assert_eq!(
            newest_of_series(madison, "5.10").as_deref(),
            Some("5.10.223-1")
        );
        // 6.1 is not a prefix of 6.12's versions.
        assert_eq!(newest_of_series(madison, "6.2"), None);
        // By number, not by text: 6.1.99 is older than 6.1.176.
        assert_eq!(
            newest_of_series("x | 6.1.99-1 | a\nx | 6.1.176-1 | b\n", "6.1").as_deref(),
            Some("6.1.176-1")
        );
    }

    #[test]
    fn the_image_package_is_the_dependency_without_its_architecture() {
        let arm64 = "linux-image-arm64:arm64\n  Depends: linux-image-6.1.0-56-arm64:arm64\n";
        assert_eq!(
            image_dependency(arm64).as_deref(),
            Some("linux-image-6.1.0-56-arm64")
        );
        let amd64 = "linux-image-amd64\n  Depends: linux-image-6.1.0-56-amd64\n";
        assert_eq!(
            image_dependency(amd64).as_deref(),
            Some("linux-image-6.1.0-56-amd64")
        );
        assert_eq!(image_dependency("linux-image-amd64\n"), None);
        assert_eq!(meta_package(Arch::Aarch64), "linux-image-arm64");
        assert_eq!(meta_package(Arch::X86_64), "linux-image-amd64");
    }

    #[test]
    fn an_architectures_cache_holds_only_its_own_releases() {
        let cache = tempfile::tempdir().unwrap();
        let root = image_cache(cache.path(), Arch::Aarch64);
        std::fs::create_dir_all(root.join("boot")).unwrap();
        for release in [
            "6.1.0-40-arm64",
            "6.1.0-56-arm64",
            "6.1.0-60-amd64",
            "6.12.9-arm64",
        ] {
            std::fs::write(root.join(format!("boot/vmlinuz-{release}")), "").unwrap();
        }
        let kernel = unpacked_kernel(&root, "6.1", Arch::Aarch64)
            .unwrap()
            .unwrap();
        assert_eq!(kernel.release, "6.1.0-56-arm64");
        assert_eq!(kernel.arch, Arch::Aarch64);
        assert!(unpacked_kernel(&root, "5.10", Arch::Aarch64)
            .unwrap()
            .is_none());
    }
}
