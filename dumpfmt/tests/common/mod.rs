//! Helpers for tests that make real dumps with real producers (QEMU, makedumpfile, gdb, the
//! Linux kernel). A missing tool skips the test with a plain message on stderr, unless
//! KCRASH_REQUIRE_TOOLS=1, which turns it into a failure.

#![allow(dead_code)] // each test binary uses a different subset

pub mod panicked_kernel;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The path of `name` on PATH, or None after saying on stderr what will not run.
pub fn tool(name: &str, package: &str, test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        skip(
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
        say_skipped(
            test,
            "no kernel image: set KCRASH_TEST_VMLINUZ or install linux-image-amd64 \
             (`apt-get download linux-image-6.1.0-*-amd64` and `dpkg-deb -x` it is enough)",
        );
    }
    found
}

/// Report a test that cannot run here; fail instead when KCRASH_REQUIRE_TOOLS=1.
pub fn skip(test: &str, why: &str) {
    if std::env::var("KCRASH_REQUIRE_TOOLS").as_deref() == Ok("1") {
        panic!("{test}: {why}, and KCRASH_REQUIRE_TOOLS=1");
    }
    say_skipped(test, why);
}

/// "SKIPPED test: why" straight to stderr: the test harness captures `eprintln!` of passing
/// tests, and a skip must be seen.
pub fn say_skipped(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
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
        say_skipped(test, "its fixture could not be made (see above)");
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

/// A stopped QEMU x86_64 guest (never started: -S) with files loaded into its RAM, driven
/// over QMP.
pub struct QemuGuest {
    child: Child,
    qmp: BufReader<UnixStream>,
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
        let child = Command::new("qemu-system-x86_64")
            .args(["-machine", "q35", "-m", &format!("{mem_mib}M")])
            .args(["-display", "none", "-vga", "none", "-nodefaults"])
            .arg("-qmp")
            .arg(format!("unix:{},server,nowait", socket.display()))
            .args(extra)
            .stdin(Stdio::null())
            .spawn()
            .expect("qemu-system-x86_64 did not start");
        let deadline = Instant::now() + Duration::from_secs(30);
        let stream = loop {
            match UnixStream::connect(&socket) {
                Ok(s) => break s,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => panic!("QMP socket {} never came up: {e}", socket.display()),
            }
        };
        let mut guest = QemuGuest {
            child,
            qmp: BufReader::new(stream),
        };
        guest.read_message(); // greeting
        guest.execute(serde_json::json!({"execute": "qmp_capabilities"}));
        guest
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

    fn read_message(&mut self) -> serde_json::Value {
        let mut line = String::new();
        self.qmp.read_line(&mut line).expect("QMP read failed");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad QMP message {line:?}: {e}"))
    }

    /// Run a command and return its "return" value; events in between are skipped.
    pub fn execute(&mut self, command: serde_json::Value) -> serde_json::Value {
        let mut text = command.to_string();
        text.push('\n');
        self.qmp
            .get_mut()
            .write_all(text.as_bytes())
            .expect("QMP write failed");
        loop {
            let msg = self.read_message();
            if let Some(r) = msg.get("return") {
                return r.clone();
            }
            if let Some(e) = msg.get("error") {
                panic!("QMP {command} failed: {e}");
            }
        }
    }

    /// `dump-guest-memory` (synchronous) in `format` ("elf", "kdump-zlib", ...).
    pub fn dump(&mut self, out: &Path, format: &str, paging: bool) {
        self.execute(serde_json::json!({
            "execute": "dump-guest-memory",
            "arguments": {
                "paging": paging,
                "protocol": format!("file:{}", out.display()),
                "format": format,
            }
        }));
    }
}

impl Drop for QemuGuest {
    fn drop(&mut self) {
        let _ = self.qmp.get_mut().write_all(b"{\"execute\": \"quit\"}\n");
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

/// `makedumpfile -R out < flat`: the reference reassembly of a flattened dump.
pub fn makedumpfile_reassemble(flat: &Path, out: &Path) {
    let input = std::fs::File::open(flat).expect("open flattened dump");
    let status = Command::new("makedumpfile")
        .arg("-R")
        .arg(out)
        .stdin(input)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run makedumpfile");
    assert!(status.success(), "makedumpfile -R failed: {status}");
}

/// `makedumpfile ARGS input output` (e.g. `-l -d 31`); panics with its messages if it fails.
pub fn makedumpfile(args: &[&str], input: &Path, output: &Path) {
    let run = Command::new("makedumpfile")
        .args(args)
        .arg(input)
        .arg(output)
        .stdin(Stdio::null())
        .output()
        .expect("run makedumpfile");
    assert!(
        run.status.success(),
        "makedumpfile {args:?} {} failed: {}\n{}",
        input.display(),
        run.status,
        String::from_utf8_lossy(&run.stdout).replace('\r', "\n")
            + &String::from_utf8_lossy(&run.stderr)
    );
}
