//! A process core read with the files it was mapped from, on real cores of small C programs
//! built here: a truncated core never passes the executable's initial data off as the crash's
//! (only read-only memory the core left out comes from the file), and an executable that is
//! not the one the process ran is refused as a wrong kernel image is. Oracles: nm for
//! addresses, the core's program headers read with the object crate, readelf for build-ids.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

mod common;

use kcrash_harness::capture::{self, Capture, Crashed, NoKernelCore, Run};
use kcrash_harness::tools;
use object::read::elf::{ElfFile64, ProgramHeader};
use object::{elf, Endianness};

/// `counter` is 7 in the executable and 42 (43 for `other`) when the program aborts; `greeting`
/// is read-only. `noheaders` keeps the ELF headers' pages out of the kernel's core
/// (coredump_filter without bit 4). `--stop` is how the harness takes a gcore instead.
const PROGRAM: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

const char greeting[] = "read-only greeting";
int counter = 7;
#ifdef OTHER
int other_only = 1;
#endif

int main(int argc, char **argv) {
    struct rlimit lim;
    if (getrlimit(RLIMIT_CORE, &lim) == 0) {
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_CORE, &lim);
    }
    const char *scenario = argc > 1 ? argv[1] : "";
    if (strcmp(scenario, "noheaders") == 0) {
        FILE *f = fopen("/proc/self/coredump_filter", "w");
        if (!f || fputs("0x23", f) < 0 || fclose(f))
            return 3;
    }
    counter = 42;
    if (argc > 2 && strcmp(argv[2], "--stop") == 0)
        raise(SIGSTOP);
    abort();
}
"#;

/// The program built with gcc in `dir` as `name` (PIE unless `flags` say otherwise).
fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join("program.c");
    std::fs::write(&src, PROGRAM).expect("write the source");
    let exe = dir.join(name);
    let out = Command::new(tools::GCC)
        .args(["-g", "-O0"])
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The core of `exe` run with `scenario`, taken the `how` way; `None` (said on stderr) when
/// this machine's Linux leaves no core file.
fn core_of(exe: &Path, scenario: &str, how: Option<Capture>, test: &str) -> Option<PathBuf> {
    let dir = exe.with_file_name(format!("{scenario}-run"));
    let run = Run {
        program: exe,
        scenario,
        dir: &dir,
        timeout: Duration::from_secs(60),
        emulator: None,
    };
    let crashed: anyhow::Result<Crashed> = match how {
        Some(how) => capture::crash_with(&run, how),
        None => capture::crash(&run),
    };
    match crashed {
        Ok(c) => Some(c.core),
        Err(e) if e.downcast_ref::<NoKernelCore>().is_some() => {
            tools::not_run_here(test, &format!("Linux leaves no core here: {e}"));
            None
        }
        Err(e) => panic!("{test}: {e:#}"),
    }
}

/// nm's address of `symbol` in `exe`.
fn nm(exe: &Path, symbol: &str) -> u64 {
    common::nm_all(exe)
        .into_iter()
        .find(|(name, _, _)| name == symbol)
        .map(|(_, addr, _)| addr)
        .unwrap_or_else(|| panic!("no {symbol} in {}", exe.display()))
}

/// The file offset of the core's bytes for `addr`, by its PT_LOAD headers.
fn core_offset(core: &Path, addr: u64) -> u64 {
    let data = std::fs::read(core).expect("read the core");
    let file = ElfFile64::<Endianness>::parse(data.as_slice()).expect("an ELF core");
    let e = file.endian();
    file.elf_program_headers()
        .iter()
        .filter(|ph| ph.p_type(e) == elf::PT_LOAD)
        .find(|ph| ph.p_vaddr(e) <= addr && addr < ph.p_vaddr(e) + ph.p_filesz(e))
        .map(|ph| ph.p_offset(e) + (addr - ph.p_vaddr(e)))
        .expect("the core holds the address")
}

/// readelf's build-id of `exe`.
fn build_id(exe: &Path) -> String {
    tools::output(Command::new("readelf").arg("-n").arg(exe))
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_owned))
        .expect("a build-id")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `kcrash -s --keep-going -c COMMAND... core exe`.
fn kcrash(core: &Path, exe: &Path, commands: &[&str]) -> Output {
    common::kcrash()
        .session(commands)
        .arg("--keep-going")
        .arg(core)
        .arg(exe)
        .output()
        .expect("kcrash runs")
}

#[test]
fn a_truncated_core_does_not_serve_crash_time_data_from_the_executable() {
    let test = "a_truncated_core_does_not_serve_crash_time_data_from_the_executable";
    if !tools::available_for(test, &[tools::GCC]) {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    // Not PIE: nm's addresses are the process's.
    let exe = build(dir.path(), "fixed", &["-no-pie"]);
    // gdb's gcore puts its notes at the end, so cutting one loses them: the kernel's core.
    let Some(core) = core_of(&exe, "truncated", Some(Capture::Kernel), test) else {
        return;
    };
    let counter = nm(&exe, "counter");
    let whole = kcrash(&core, &exe, &["p counter", "p greeting"]);
    assert_eq!(
        text(&whole.stdout),
        "42\n\"read-only greeting\"\n",
        "{}",
        text(&whole.stderr)
    );

    // Cut the core at the start of counter's page.
    let at = core_offset(&core, counter);
    let cut = dir.path().join("cut.core");
    std::fs::copy(&core, &cut).expect("copy the core");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut)
        .and_then(|f| f.set_len(at & !0xfff))
        .expect("truncate the copy");

    let out = kcrash(&cut, &exe, &["p counter", "rd counter", "p greeting"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let why = format!("data at file offset {at:#x} is beyond the end of the file (truncated dump)");
    assert_eq!(
        stderr,
        format!(
            "kcrash: print: Cannot access memory at address {counter:#x}: in the dump's own mapping, but {why}\n\
             kcrash: rd: 0x8 of the 0x8 bytes from {counter:#x} are unreadable (marked above)\n"
        )
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].starts_with(&format!("{counter:016x}:  <unreadable 0x8 bytes: "))
            && lines[0].contains(&why),
        "{stdout}"
    );
    // Read-only memory the core left out still comes from the executable.
    assert_eq!(lines[1], "\"read-only greeting\"");
}

#[test]
fn another_program_is_refused_for_a_process_core() {
    let test = "another_program_is_refused_for_a_process_core";
    if !tools::available_for(test, &[tools::GCC]) {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let ran = build(dir.path(), "ran", &[]);
    let other = build(dir.path(), "other", &["-DOTHER"]);
    // Kernel core or, where Linux leaves none, gdb's gcore: both hold the program's first page.
    let Some(core) = core_of(&ran, "plain", None, test) else {
        return;
    };
    let right = kcrash(&core, &ran, &["p counter"]);
    assert_eq!(text(&right.stdout), "42\n", "{}", text(&right.stderr));

    let wrong = kcrash(&core, &other, &["p counter"]);
    assert_eq!(wrong.status.code(), Some(2), "{}", text(&wrong.stderr));
    assert!(wrong.stdout.is_empty());
    assert_eq!(
        text(&wrong.stderr),
        format!(
            "kcrash: {} does not belong to {}: its build-id is {}, the process's copy's (in the \
             core) is {}\n",
            other.display(),
            core.display(),
            build_id(&other),
            build_id(&ran)
        )
    );
}

/// A core without the program's first page leaves nothing to check the executable against:
/// that is said once, and the program is used.
#[test]
fn an_executable_the_core_cannot_check_is_said_once() {
    let test = "an_executable_the_core_cannot_check_is_said_once";
    if !tools::available_for(test, &[tools::GCC]) {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let ran = build(dir.path(), "ran", &[]);
    let Some(core) = core_of(&ran, "noheaders", Some(Capture::Kernel), test) else {
        return;
    };
    let out = common::kcrash()
        .command()
        .args(["-c", "p counter"])
        .arg(&core)
        .arg(&ran)
        .output()
        .expect("kcrash runs");
    let stderr = text(&out.stderr);
    assert_eq!(text(&out.stdout), "42\n", "{stderr}");
    let said = format!(
        "kcrash: {} could not be checked against the core: the core holds none of its first page",
        ran.display()
    );
    assert_eq!(stderr.lines().filter(|l| *l == said).count(), 1, "{stderr}");
    // The C library, left out as well, is named in one line for every library used unchecked.
    let libraries: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("kcrash: not checked against the core"))
        .collect();
    assert_eq!(libraries.len(), 1, "{stderr}");
    assert!(libraries[0].contains("libc.so"), "{stderr}");
}
