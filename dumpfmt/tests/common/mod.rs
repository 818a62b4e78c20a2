//! Helpers for tests that make real dumps with real producers (QEMU, makedumpfile, gdb, the
//! Linux kernel). A missing tool skips the test (kcrash_harness::tools: NOT RUN on stderr, a
//! failure under KCRASH_REQUIRE_TOOLS=1).

#![allow(dead_code)] // each test binary uses a different subset

pub mod panicked_kernel;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kcrash_harness::qmp::Qmp;
use kcrash_harness::tools;

/// The path of `name` on PATH, or None after saying what will not run and which package has it.
pub fn tool(name: &str, package: &str, test: &str) -> Option<PathBuf> {
    let found = tools::find(name);
    if found.is_none() {
        tools::not_run(
            test,
            &format!("`{name}` is not installed (apt-get install -y {package})"),
        );
    }
    found
}

/// A Linux x86_64 kernel image to boot: $KCRASH_TEST_VMLINUZ, else the newest /boot/vmlinuz-*.
/// A kernel is test data, not a tool: without one the test is skipped even under
/// KCRASH_REQUIRE_TOOLS=1 (the test-kernels corpus will provide them).
pub fn kernel_image(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("KCRASH_TEST_VMLINUZ")
        .map(PathBuf::from)
        .or_else(|| {
            let mut images: Vec<PathBuf> = std::fs::read_dir("/boot")
                .ok()?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("vmlinuz-"))
                })
                .collect();
            images.sort();
            images.pop()
        });
    if found.is_none() {
        tools::not_run_here(
            test,
            "no kernel image: set KCRASH_TEST_VMLINUZ or install linux-image-amd64 \
             (`apt-get download linux-image-6.1.0-*-amd64` and `dpkg-deb -x` it is enough)",
        );
    }
    found
}

/// Expensive fixtures (booted guests, dumps) made once per test binary and shared by its tests.
/// `make` returns None after saying why it could not; each test then reports its own skip.
pub fn shared_fixture<T: Send + Sync>(
    cell: &'static std::sync::OnceLock<Option<T>>,
    test: &str,
    make: impl FnOnce() -> Option<T>,
) -> Option<&'static T> {
    let made = cell.get_or_init(make).as_ref();
    if made.is_none() {
        tools::not_run_here(test, "its fixture could not be made (see above)");
    }
    made
}

/// Deterministic pseudo-random bytes (xorshift64*), the test's own oracle.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

/// Compressible but never-zero text, so kdump writers store it zlib-compressed.
pub fn text_bytes(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut line = 0u64;
    while out.len() < len {
        out.extend_from_slice(format!("line {line:08}: the quick brown fox\n").as_bytes());
        line += 1;
    }
    out.truncate(len);
    out
}

/// How long a QMP command may take; dump-guest-memory is synchronous and writes the whole RAM.
const QMP_TIMEOUT: Duration = Duration::from_secs(120);

/// A stopped QEMU x86_64 guest (never started: -S) with files loaded into its RAM, driven
/// over QMP.
pub struct QemuGuest {
    child: Child,
    /// Taken by `drop` to quit QEMU.
    qmp: Option<Qmp>,
}

impl QemuGuest {
    /// A guest that never runs (-S), with `loads` (file, guest-physical address) in its RAM.
    pub fn start(dir: &Path, mem_mib: u32, loads: &[(&Path, u64)]) -> QemuGuest {
        let mut args = vec!["-S".to_string()];
        for (file, addr) in loads {
            args.push("-device".into());
            args.push(format!(
                "loader,file={},addr={addr:#x},force-raw=on",
                file.display()
            ));
        }
        Self::spawn(dir, mem_mib, &args)
    }

    /// A guest booting `kernel` with `append` and QEMU arguments `extra` (e.g. `-initrd`,
    /// `-device vmcoreinfo`); its serial console goes to `dir/console.log`.
    pub fn boot(
        dir: &Path,
        mem_mib: u32,
        kernel: &Path,
        append: &str,
        extra: &[String],
    ) -> QemuGuest {
        let mut args = vec![
            "-kernel".to_string(),
            kernel.display().to_string(),
            "-append".into(),
            append.into(),
            "-serial".into(),
            format!("file:{}", dir.join("console.log").display()),
            "-no-reboot".into(),
        ];
        args.extend_from_slice(extra);
        Self::spawn(dir, mem_mib, &args)
    }

    fn spawn(dir: &Path, mem_mib: u32, extra: &[String]) -> QemuGuest {
        let socket = dir.join("qmp.sock");
        let child = Command::new(tools::QEMU)
            .args(["-machine", "q35", "-m", &format!("{mem_mib}M")])
            .args(["-display", "none", "-vga", "none", "-nodefaults"])
            .arg("-qmp")
            .arg(format!("unix:{},server,nowait", socket.display()))
            .args(extra)
            .stdin(Stdio::null())
            .spawn()
            .expect("qemu-system-x86_64 did not start");
        let qmp = Qmp::connect(&socket, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("QMP on {}: {e:#}", socket.display()));
        QemuGuest {
            child,
            qmp: Some(qmp),
        }
    }

    /// Wait until `dir/console.log` contains `text`; the console so far, or None on timeout.
    pub fn wait_for_console(dir: &Path, text: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let console = std::fs::read(dir.join("console.log")).unwrap_or_default();
            let console = String::from_utf8_lossy(&console);
            if console.contains(text) {
                return Some(console.into_owned());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    /// Runs a QMP command and returns its "return" value.
    pub fn execute(&mut self, command: &str, arguments: serde_json::Value) -> serde_json::Value {
        let qmp = self.qmp.as_mut().expect("QMP is open until drop");
        qmp.execute(command, arguments, QMP_TIMEOUT)
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// `dump-guest-memory` (synchronous) in `format` ("elf", "kdump-zlib", ...).
    pub fn dump(&mut self, out: &Path, format: &str, paging: bool) {
        self.execute(
            "dump-guest-memory",
            serde_json::json!({
                "paging": paging,
                "protocol": format!("file:{}", out.display()),
                "format": format,
            }),
        );
    }
}

impl Drop for QemuGuest {
    fn drop(&mut self) {
        if let Some(qmp) = self.qmp.take() {
            let _ = qmp.quit(Duration::from_secs(5));
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
