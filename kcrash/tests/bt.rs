//! `bt` on process cores against gdb's own walk of the same core (through its Python API, which
//! says which frames are inlined, signal trampolines or gdb's tail-call guesses): every thread,
//! frame by frame — the pc, the function, inlined or not, and the file and line where both know
//! them. On every process core of the corpus, and on cores of a program built here with inlined
//! functions, a signal handler and a second thread, taken by Linux and by gcore.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod common;

use common::nm_all;

use kcrash_harness::capture::{self, Capture, NoKernelCore, Run};
use kcrash_harness::{corpus, tools};
use serde_json::Value;

/// gdb's frames of every thread, one line each: `lwp kind pc name file line`, tab-separated.
const GDB_WALK: &str = r#"
import gdb
kinds = {gdb.NORMAL_FRAME: "normal", gdb.INLINE_FRAME: "inline",
         gdb.TAILCALL_FRAME: "tailcall", gdb.SIGTRAMP_FRAME: "sigtramp"}
for thread in gdb.selected_inferior().threads():
    thread.switch()
    frame = gdb.newest_frame()
    n = 0
    while frame is not None and n < 1000:
        sal = frame.find_sal()
        print("@@frame\t%d\t%s\t%#x\t%s\t%s\t%d" % (
            thread.ptid[1], kinds.get(frame.type(), str(frame.type())), frame.pc(),
            frame.name() or "??", sal.symtab.filename if sal.symtab else "", sal.line))
        frame = frame.older()
        n += 1
"#;

#[derive(Debug, Clone, PartialEq)]
struct Frame {
    pc: u64,
    function: String,
    inlined: bool,
    /// File name (no directory) and line, when known.
    line: Option<(String, u64)>,
    /// A signal trampoline (gdb) — kcrash names it by its symbol.
    trampoline: bool,
    /// kcrash: the code is in a file the process mapped that kcrash does not have.
    unmapped: bool,
}

/// gdb's frames by thread id, its tail-call guesses left out (kcrash does not make them); `gdb` is
/// the program (gdb-multiarch for another machine's core).
fn gdb_frames(gdb: &str, core: &Path, image: &Path) -> BTreeMap<i64, Vec<Frame>> {
    let script = tempfile::Builder::new()
        .suffix(".py")
        .tempfile()
        .expect("temp file");
    std::fs::write(script.path(), GDB_WALK).expect("write the script");
    let out = tools::output(
        Command::new(gdb)
            .args(["-batch", "-nx", "-ex", "set backtrace past-main on", "-x"])
            .arg(script.path())
            .arg(image)
            .arg(core),
    );
    let mut threads: BTreeMap<i64, Vec<Frame>> = BTreeMap::new();
    for line in out.lines().filter_map(|l| l.strip_prefix("@@frame\t")) {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 6, "gdb's line {line:?}");
        if f[1] == "tailcall" {
            continue;
        }
        let line_no: u64 = f[5].parse().expect("a line number");
        threads
            .entry(f[0].parse().expect("a thread id"))
            .or_default()
            .push(Frame {
                pc: u64::from_str_radix(f[2].trim_start_matches("0x"), 16).expect("a pc"),
                function: short_name(f[3]),
                inlined: f[1] == "inline",
                line: (line_no > 0 && !f[4].is_empty()).then(|| (base(f[4]), line_no)),
                trampoline: f[1] == "sigtramp",
                unmapped: false,
            });
    }
    threads
}

/// kcrash's `bt -a --json` frames by thread id (a kernel dump's CPU by its index + 1, as gdb
/// numbers them), and its stop reasons.
fn kcrash_frames(core: &Path, image: &Path) -> (BTreeMap<i64, Vec<Frame>>, Vec<String>) {
    let out = common::kcrash().commands(core, image, &["bt -a --json"]);
    let text = common::text(&out.stdout);
    assert!(out.status.success(), "{text}{}", common::text(&out.stderr));
    let doc: Value = serde_json::from_str(&text).expect("bt --json is JSON");
    let mut threads = BTreeMap::new();
    let mut stops = Vec::new();
    for c in doc["contexts"].as_array().expect("contexts") {
        let frames = c["frames"]
            .as_array()
            .expect("frames")
            .iter()
            .map(|f| Frame {
                pc: common::hex(&f["pc"]),
                function: short_name(f["function"].as_str().unwrap_or("??")),
                inlined: f["inlined"].as_bool().expect("inlined"),
                line: match (f["file"].as_str(), f["line"].as_u64()) {
                    (Some(file), Some(line)) if line > 0 => Some((base(file), line)),
                    _ => None,
                },
                trampoline: false,
                unmapped: !f["mapped"].is_null(),
            })
            .collect();
        let id = match c["cpu"].as_i64() {
            Some(cpu) => cpu + 1,
            None => c["pid"].as_i64().expect("a thread id"),
        };
        threads.insert(id, frames);
        stops.push(c["stop"].as_str().expect("a stop").to_owned());
    }
    (threads, stops)
}

fn base(file: &str) -> String {
    file.rsplit('/').next().unwrap_or(file).to_owned()
}

/// A function's own name: its last path segment without generic arguments, closures named
/// alike. gdb names Rust functions by their DWARF scopes, kcrash by their demangled symbols;
/// the two spell paths, impls and generics differently but agree on this.
fn short_name(name: &str) -> String {
    let mut plain = String::new();
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let last = plain
        .trim_end_matches("::")
        .rsplit("::")
        .next()
        .unwrap_or("")
        .to_owned();
    let last = last.trim_end_matches("{{vtable.shim}}").to_owned();
    if last.starts_with("{closure") || last.starts_with("{{closure") {
        "{closure}".into()
    } else {
        last
    }
}

/// Compares kcrash's walk of every thread with `gdb`'s; returns how many frames agreed.
fn compare(gdb: &str, core: &Path, image: &Path) -> usize {
    let want = gdb_frames(gdb, core, image);
    let (got, stops) = kcrash_frames(core, image);
    // Names of one address (glibc's `gsignal` for `raise`): kcrash and gdb may choose either.
    let symbols = nm_all(image);
    let aliases = |a: &str, b: &str| {
        let at = |name: &str| symbols.iter().find(|(n, ..)| n == name).map(|s| s.1);
        at(a).is_some() && at(a) == at(b)
    };
    let what = core.display();
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{what}: the threads"
    );
    let mut agreed = 0;
    for (lwp, frames) in &got {
        let gdb = &want[lwp];
        let context = format!("{what}, thread {lwp}:\nkcrash {frames:#?}\ngdb {gdb:#?}\n{stops:?}");
        // A library kcrash does not have (it is not the one the process ran) ends the walk
        // there; before it, and at its pc, both agree.
        let complete = !frames.last().is_some_and(|f| f.unmapped);
        if complete {
            assert_eq!(frames.len(), gdb.len(), "{context}");
        } else {
            assert!(frames.len() <= gdb.len(), "{context}");
        }
        for (k, g) in frames.iter().zip(gdb) {
            assert_eq!(k.pc, g.pc, "{context}");
            if k.unmapped {
                break;
            }
            if g.trampoline {
                assert_eq!(k.function, "__restore_rt", "{context}");
            } else if !aliases(&k.function, &g.function) {
                assert_eq!(k.function, g.function, "{context}");
            }
            assert_eq!(k.inlined, g.inlined, "{context}");
            if let (Some(kl), Some(gl)) = (&k.line, &g.line) {
                assert_eq!(kl, gl, "{context}");
            }
            agreed += 1;
        }
    }
    agreed
}

/// The bare test kernel's dumps: gdb opens QEMU's ELF dump with the kernel image and walks by
/// the same call-frame information; where kcrash stops (the kernel's hand-written exception
/// entry has none) gdb guesses on, so kcrash's frames are the start of gdb's. gdb names a Rust
/// function by its DWARF scope and kcrash by its symbol, which differ for the panic handler
/// (`rust_begin_unwind`): the pcs, inlining, files and lines are compared.
#[test]
fn bare_kernel_dumps_walk_as_gdb_starts_them() {
    let test = "bare_kernel_dumps_walk_as_gdb_starts_them";
    if !tools::available_for(test, &[tools::GDB]) {
        return;
    }
    let dir = corpus::file("bare");
    let mut walked = 0;
    for entry in std::fs::read_dir(&dir).expect("the corpus") {
        let gz = entry.expect("an entry").path().join("vmcore-paging.elf.gz");
        if !gz.exists() {
            continue;
        }
        let d = common::gdb::unpack(&gz, dir.join("vmlinux"));
        let want = gdb_frames(tools::GDB, &d.core, &d.image);
        let (got, stops) = kcrash_frames(&d.core, &d.image);
        for (cpu, frames) in &got {
            let gdb = &want[cpu];
            let context = format!(
                "{}, CPU {}:\nkcrash {frames:#?}\ngdb {gdb:#?}\n{stops:?}",
                gz.display(),
                cpu - 1
            );
            assert!(frames.len() <= gdb.len() && !frames.is_empty(), "{context}");
            for (k, g) in frames.iter().zip(gdb) {
                assert_eq!((k.pc, k.inlined), (g.pc, g.inlined), "{context}");
                if let (Some(kl), Some(gl)) = (&k.line, &g.line) {
                    assert_eq!(kl, gl, "{context}");
                }
                walked += 1;
            }
        }
    }
    assert!(
        walked >= 20,
        "only {walked} frames walked over the bare kernel's dumps"
    );
}

#[test]
fn corpus_process_cores_walk_as_gdb_walks_them() {
    let test = "corpus_process_cores_walk_as_gdb_walks_them";
    const GDB_MULTIARCH: &str = "gdb-multiarch";
    if !tools::available_for(test, &[tools::GDB, GDB_MULTIARCH]) {
        return;
    }
    let mut cores = 0;
    // The arm64 programs' cores (written by qemu-aarch64) by gdb-multiarch.
    for (program, gdb) in [
        ("hosted", tools::GDB),
        ("hosted-c", tools::GDB),
        ("hosted-arm64", GDB_MULTIARCH),
        ("hosted-c-arm64", GDB_MULTIARCH),
    ] {
        let dir = corpus::file(program);
        for entry in std::fs::read_dir(&dir).expect("the corpus") {
            let gz = entry.expect("an entry").path().join("core.gz");
            if !gz.exists() {
                continue;
            }
            let d = common::gdb::unpack(&gz, dir.join(program));
            assert!(compare(gdb, &d.core, &d.image) > 0, "{}", gz.display());
            cores += 1;
        }
    }
    assert!(cores >= 30, "only {cores} process cores in the corpus");
}

/// Inlined functions at -O2, a signal handler's frame (the signal trampoline's call-frame
/// information reads the interrupted registers from the signal frame), and a second thread
/// waiting in a system call.
const PROGRAM: &str = r#"
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static int stop_instead;
static pthread_barrier_t ready;

__attribute__((noinline)) static void on_signal(int sig) {
    (void)sig;
    if (stop_instead)
        raise(SIGSTOP);
    abort();
}

static inline __attribute__((always_inline)) void maybe_signal(int depth) {
    if (depth == 0)
        raise(SIGUSR1);
}

__attribute__((noinline)) void recurse(int depth) {
    maybe_signal(depth);
    if (depth > 0)
        recurse(depth - 1);
    __asm__ volatile("" ::: "memory");
}

static void *worker(void *arg) {
    (void)arg;
    pthread_barrier_wait(&ready);
    for (;;)
        pause();
    return NULL;
}

int main(int argc, char **argv) {
    struct rlimit lim;
    if (getrlimit(RLIMIT_CORE, &lim) == 0) {
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_CORE, &lim);
    }
    stop_instead = argc > 2 && strcmp(argv[2], "--stop") == 0;
    signal(SIGUSR1, on_signal);
    pthread_t thread;
    pthread_barrier_init(&ready, NULL, 2);
    pthread_create(&thread, NULL, worker, NULL);
    pthread_barrier_wait(&ready);
    recurse(3);
    return 0;
}
"#;

fn build(dir: &Path) -> PathBuf {
    let src = dir.join("program.c");
    std::fs::write(&src, PROGRAM).expect("write the source");
    let exe = dir.join("stacks");
    let out = Command::new(tools::GCC)
        .args(["-g", "-O2", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run gcc");
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    exe
}

#[test]
fn fresh_cores_walk_as_gdb_walks_them_through_inlines_signals_and_threads() {
    let test = "fresh_cores_walk_as_gdb_walks_them_through_inlines_signals_and_threads";
    if !tools::available_for(test, &[tools::GCC, tools::GDB]) {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let exe = build(dir.path());
    for how in [Capture::Kernel, Capture::Gcore] {
        let run_dir = dir.path().join(how.format());
        let run = Run {
            program: &exe,
            scenario: "stacks",
            dir: &run_dir,
            timeout: Duration::from_secs(60),
            emulator: None,
        };
        let core = match capture::crash_with(&run, how) {
            Ok(c) => c.core,
            Err(e) if e.downcast_ref::<NoKernelCore>().is_some() => {
                tools::not_run_here(test, &format!("Linux leaves no core here: {e}"));
                continue;
            }
            Err(e) => panic!("{test}: {e:#}"),
        };
        let (frames, _) = kcrash_frames(&core, &exe);
        assert_eq!(frames.len(), 2, "{how:?}: two threads: {frames:#?}");
        let main = frames
            .values()
            .find(|f| f.iter().any(|f| f.function == "recurse"));
        let main = main.unwrap_or_else(|| panic!("{how:?}: no thread in recurse: {frames:#?}"));
        let names: Vec<&str> = main.iter().map(|f| f.function.as_str()).collect();
        for want in [
            "on_signal",
            "__restore_rt",
            "maybe_signal",
            "recurse",
            "main",
        ] {
            assert!(names.contains(&want), "{how:?}: no {want} in {names:?}");
        }
        assert!(
            main.iter()
                .any(|f| f.function == "maybe_signal" && f.inlined),
            "{how:?}: {names:?}"
        );
        assert_eq!(
            names.iter().filter(|&&n| n == "recurse").count(),
            4,
            "{names:?}"
        );
        assert!(compare(tools::GDB, &core, &exe) >= names.len(), "{how:?}");
    }
}
