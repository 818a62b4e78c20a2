//! The Linux guest's output (Debian's distribution kernel under QEMU with KASLR on, dumped by
//! QEMU (ELF) and makedumpfile (kdump), with Debian's debug vmlinux) for kcrash's tests of it:
//! `vmcore.elf`, `vmcore.kdump`, `console.log` (the serial console: an oracle kcrash does not
//! read), `vmlinux`, from `KCRASH_LINUX_GUEST` or where CI leaves them. Without it the tests say
//! NOT RUN; under KCRASH_REQUIRE_TOOLS=1 they fail. Where crash(8) is installed, kcrash is
//! compared with it on the same dump.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kcrash_harness::{linux, tools};

/// The Linux guest's output directory, if it holds `files`; else says NOT RUN (or fails under
/// KCRASH_REQUIRE_TOOLS=1).
pub fn guest(test: &str, files: &[&str]) -> Option<PathBuf> {
    let dir = linux::guest_output();
    if let Some(missing) = files.iter().find(|f| !dir.join(f).exists()) {
        tools::not_run(test, &format!("{} not there", dir.join(missing).display()));
        return None;
    }
    Some(dir)
}

/// `kcrash -s -c COMMAND... DUMP vmlinux` in the guest's directory.
pub fn kcrash(dir: &Path, dump: &str, commands: &[&str]) -> Output {
    kcrash_on(dir, &[dump, "vmlinux"], commands)
}

/// `kcrash -s -c COMMAND... FILES...` in the guest's directory.
pub fn kcrash_on(dir: &Path, files: &[&str], commands: &[&str]) -> Output {
    super::kcrash()
        .session(commands)
        .current_dir(dir)
        .args(files)
        .output()
        .expect("kcrash runs")
}

/// crash(8)'s output for `commands` on `dump`, the prompt echo left out.
pub fn crash(dir: &Path, dump: &str, commands: &str) -> String {
    let out = Command::new("crash")
        .current_dir(dir)
        .args(["-s", "--no_scroll", "vmlinux", dump])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("stdin");
            writeln!(stdin, "{commands}\nq")?;
            drop(stdin);
            child.wait_with_output()
        })
        .expect("crash runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The KASLR offset the kernel printed when it panicked ("Kernel Offset: 0x... from ...").
pub fn console_kaslr(dir: &Path) -> u64 {
    let console = std::fs::read_to_string(dir.join("console.log")).expect("console.log");
    let hex = console
        .split("Kernel Offset: 0x")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the panic printed the kernel offset");
    u64::from_str_radix(hex, 16).expect("hex offset")
}

/// The kernel's lines in the serial console: from the `[ sssss.uuuuuu] ` stamp on (the stamp
/// may follow a firmware's escape sequences on the same line), carriage returns dropped.
pub fn console_kernel_lines(dir: &Path) -> Vec<String> {
    let bytes = std::fs::read(dir.join("console.log")).expect("console.log");
    let text = String::from_utf8_lossy(&bytes);
    let stamp = |s: &str| {
        let b = s.as_bytes();
        b.len() >= 15
            && b[0] == b'['
            && b[6] == b'.'
            && b[13] == b']'
            && b[1..13]
                .iter()
                .enumerate()
                .all(|(i, c)| i == 5 || c.is_ascii_digit() || (*c == b' ' && i < 4))
    };
    text.lines()
        .filter_map(|line| {
            let line = line.trim_end_matches('\r');
            let at = line.char_indices().find(|&(i, _)| stamp(&line[i..]))?.0;
            Some(line[at..].to_owned())
        })
        .collect()
}

/// The contract's two dumps, then the other formats the guest pipeline writes when they are
/// there: QEMU's flattened kdump, makedumpfile's zlib and lzo kdumps at -d 31 and -d 0 (whose
/// excluded pages read as not in the dump) and its -E ELF.
pub fn dumps(dir: &Path) -> Vec<&'static str> {
    const MORE: [&str; 6] = [
        "vmcore.kdump-flat",
        "vmcore-c-d31.kdump",
        "vmcore-c-d0.kdump",
        "vmcore-l-d31.kdump",
        "vmcore-l-d0.kdump",
        "vmcore-E-d31.elf",
    ];
    let mut all = vec!["vmcore.elf", "vmcore.kdump"];
    all.extend(MORE.into_iter().filter(|f| dir.join(f).exists()));
    all
}
