//! Debian's side: the kernel image and debug vmlinux in the cache, the packages the pipeline
//! installs, and klogtest.ko built against the release's headers.

use super::run;
use crate::repo_root;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The static busybox the guest runs (package busybox-static).
pub const BUSYBOX: &str = "/bin/busybox";

/// Debian's kernel image unpacked under `<cache>/linux-image`.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub release: String,
    pub root: PathBuf,
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

    /// Debian's headers for the release (linux-headers-<release>).
    pub fn headers(&self) -> PathBuf {
        PathBuf::from(format!("/usr/src/linux-headers-{}", self.release))
    }
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

/// `apt-get download PACKAGE` into `dir`; returns the .deb.
fn apt_download(package: &str, dir: &Path) -> Result<PathBuf> {
    eprintln!("linux: apt-get download {package}");
    let download = || {
        Command::new("apt-get")
            .args(["download", "-qq", package])
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
            bail!("apt-get download {package} failed");
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
                "apt-get download {package} left no .deb in {}",
                dir.display()
            )
        })
}

/// The kernel image in `<cache>/linux-image`, unpacked from the package linux-image-amd64
/// depends on when it is not there yet (the same cache .ci/run fills).
pub fn kernel_image(cache: &Path) -> Result<Kernel> {
    let root = cache.join("linux-image");
    if let Some(kernel) = unpacked_kernel(&root)? {
        return Ok(kernel);
    }
    let depends = |update: bool| -> Result<Option<String>> {
        if update {
            run(
                Command::new("apt-get").args(["update", "-qq"]),
                "apt-get update",
            )?;
        }
        let out = run(
            Command::new("apt-cache").args(["depends", "linux-image-amd64"]),
            "apt-cache depends linux-image-amd64",
        )?;
        Ok(String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
            l.trim()
                .strip_prefix("Depends: ")
                .filter(|p| p.starts_with("linux-image-"))
                .map(str::to_string)
        }))
    };
    let package = match depends(false)? {
        Some(p) => p,
        None => depends(true)?.context("linux-image-amd64 depends on no linux-image package")?,
    };
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let deb = apt_download(&package, &root)?;
    run(
        Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root),
        "dpkg-deb -x",
    )?;
    std::fs::remove_file(&deb)?;
    unpacked_kernel(&root)?.with_context(|| format!("{package} has no boot/vmlinuz-*"))
}

fn unpacked_kernel(root: &Path) -> Result<Option<Kernel>> {
    let Ok(entries) = std::fs::read_dir(root.join("boot")) else {
        return Ok(None);
    };
    let mut releases: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_prefix("vmlinuz-").map(str::to_string))
        .collect();
    releases.sort();
    Ok(releases.pop().map(|release| Kernel {
        release,
        root: root.to_path_buf(),
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

/// Debug modules extracted beside the vmlinux: symbols' module tests read real Debian modules'
/// DWARF (a small one and a large one).
const DEBUG_MODULES: [&str; 3] = [
    "kernel/drivers/misc/pvpanic/pvpanic.ko",
    "kernel/drivers/misc/pvpanic/pvpanic-pci.ko",
    "kernel/fs/ext4/ext4.ko",
];

/// The debug vmlinux of `release` (linux-image-<release>-dbg), fetched with `apt-get download`
/// when the cache does not have it; only the vmlinux and [`DEBUG_MODULES`] are extracted.
pub fn debug_vmlinux(cache: &Path, release: &str) -> Result<PathBuf> {
    let path = debug_vmlinux_path(cache, release);
    let root = cache.join("linux-dbg");
    let modules: Vec<String> = DEBUG_MODULES
        .iter()
        .map(|m| format!("./usr/lib/debug/lib/modules/{release}/{m}"))
        .collect();
    if path.is_file() && modules.iter().all(|m| root.join(m).is_file()) {
        return Ok(path);
    }
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let scratch = tempfile::tempdir_in(&root)?;
    let deb = apt_download(&format!("linux-image-{release}-dbg"), scratch.path())?;
    let mut dpkg = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(&deb)
        .stdout(Stdio::piped())
        .spawn()
        .context("running dpkg-deb --fsys-tarfile")?;
    let tar = Command::new("tar")
        .arg("-x")
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
pub fn build_module(kernel: &Kernel) -> Result<PathBuf> {
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
    run(
        Command::new("make")
            .arg("-C")
            .arg(kernel.headers())
            .arg(format!("M={}", build.display()))
            .arg(format!("KLOG_INCLUDE={}", include.display()))
            .arg(format!("ORACLE_INCLUDE={}", oracle_include.display()))
            .arg("modules"),
        "make (klogtest.ko)",
    )?;
    Ok(build.join("klogtest.ko"))
}
