//! Real Linux process cores: one written by `gdb -ex gcore` of a live process, one by the kernel
//! when the process aborts. The process fills buffers with a formula this test evaluates
//! independently and prints their addresses.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use dumpfmt::{AddressSpace, Dump, Format};
use kcrash_harness::tools;

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static unsigned char in_bss[3 * 4096 + 77];

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 131u + seed) ^ (i >> 8));
}

int main(int argc, char **argv) {
    size_t heap_len = 5 * 4096 + 123;
    unsigned char *heap = malloc(heap_len);
    fill(heap, heap_len, 7);
    fill(in_bss, sizeof in_bss, 11);
    printf("%p %zu %p %zu\n", (void *)heap, heap_len, (void *)in_bss, sizeof in_bss);
    fflush(stdout);
    if (argc > 1 && argv[1][0] == 'a')
        abort();
    char c;
    while (read(0, &c, 1) > 0) {}
    return 0;
}
"#;

fn expected(len: usize, seed: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 131 + seed) ^ (i >> 8)) as u8)
        .collect()
}

/// The two buffers: (address, length, seed).
fn buffers(line: &str) -> [(u64, usize, usize); 2] {
    let f: Vec<&str> = line.split_whitespace().collect();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    [
        (hex(f[0]), f[1].parse().unwrap(), 7),
        (hex(f[2]), f[3].parse().unwrap(), 11),
    ]
}

fn build(dir: &Path, test: &str) -> Option<PathBuf> {
    common::tool("gcc", "gcc", test)?;
    let src = dir.join("patterned.c");
    let exe = dir.join("patterned");
    std::fs::write(&src, PROGRAM).unwrap();
    let status = Command::new("gcc")
        .args(["-O0", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(status.success(), "gcc failed");
    Some(exe)
}

fn check_core(core: &Path, exe: &Path, line: &str, pid: u32) {
    let dump = Dump::open(core).unwrap();
    assert_eq!(dump.format(), Format::Elf);
    assert!(dump.is_process_core(), "{}", core.display());
    let space = AddressSpace::from_dump(&dump).unwrap();
    for (addr, len, seed) in buffers(line) {
        let mut buf = vec![0u8; len];
        space
            .read_virt(addr, &mut buf)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            buf,
            expected(len, seed),
            "buffer at {addr:#x} in {}",
            core.display()
        );
    }
    // Physical reads make no sense in a process core.
    assert!(dump.read_phys(0x1000, &mut [0u8; 8]).is_err());

    let mut saw = (false, false, false, false);
    for note in dump.notes() {
        let note = note.unwrap();
        if note.is("CORE", dumpfmt::notes::NT_PRSTATUS) {
            let st = note.prstatus(dumpfmt::Machine::X86_64).unwrap();
            assert_eq!(st.pid as u32, pid);
            assert_ne!(st.regs.pc(), 0);
            saw.0 = true;
        } else if note.is("CORE", dumpfmt::notes::NT_PRPSINFO) {
            let ps = note.prpsinfo().unwrap();
            assert_eq!(ps.pid as u32, pid);
            assert_eq!(ps.fname, "patterned");
            saw.1 = true;
        } else if note.is("CORE", dumpfmt::notes::NT_FILE) {
            let files = note.file_mappings().unwrap();
            let exe = exe.canonicalize().unwrap();
            assert!(
                files
                    .iter()
                    .any(|f| Path::new(&f.path) == exe && f.start < f.end),
                "{files:?}"
            );
            swapped_file_mapping_is_refused(core, files[0].start, files[0].end);
            saw.2 = true;
        } else if note.is("CORE", dumpfmt::notes::NT_AUXV) {
            // AT_PAGESZ (6) is the machine's page size.
            let page = machine_page_size();
            assert!(note.auxv().any(|(t, v)| t == 6 && v == page));
            saw.3 = true;
        }
    }
    assert_eq!(
        saw,
        (true, true, true, true),
        "PRSTATUS, PRPSINFO, FILE, AUXV notes"
    );
}

/// The core with its first NT_FILE entry's start and end swapped: the entry is refused with
/// the file, the offset and both addresses, not read as a range of 2^64 - n bytes.
fn swapped_file_mapping_is_refused(core: &Path, start: u64, end: u64) {
    let mut bytes = std::fs::read(core).unwrap();
    let entry = [start.to_le_bytes(), end.to_le_bytes()].concat();
    let at = bytes
        .windows(16)
        .position(|w| w == entry)
        .expect("the entry is in the note");
    bytes[at..at + 8].copy_from_slice(&end.to_le_bytes());
    bytes[at + 8..at + 16].copy_from_slice(&start.to_le_bytes());
    let edited = core.with_extension("swapped");
    std::fs::write(&edited, &bytes).unwrap();
    let dump = Dump::open(&edited).unwrap();
    let note = dump
        .notes()
        .map(Result::unwrap)
        .find(|n| n.is("CORE", dumpfmt::notes::NT_FILE))
        .unwrap();
    let e = note.file_mappings().unwrap_err().to_string();
    assert!(
        e.contains(&edited.display().to_string())
            && e.contains(&format!(
                "entry 0 ends at {start:#x}, before its start {end:#x}"
            )),
        "{e}"
    );
}

fn machine_page_size() -> u64 {
    let out = Command::new("getconf").arg("PAGESIZE").output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn gdb_gcore() {
    let test = "gdb_gcore";
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build(dir.path(), test) else {
        return;
    };
    if common::tool("gdb", "gdb", test).is_none() {
        return;
    }
    let mut child = Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let core = dir.path().join("gcore");
    let out = Command::new("gdb")
        .args(["-batch", "-nx", "-p", &child.id().to_string(), "-ex"])
        .arg(format!("gcore {}", core.display()))
        .output()
        .unwrap();
    drop(child.stdin.take());
    child.wait().unwrap();
    if !core.exists() {
        tools::not_run_here(
            test,
            &format!(
                "gdb could not attach and write a core: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        );
        return;
    }
    check_core(&core, &exe, &line, child.id());
}

#[test]
fn linux_kernel_core() {
    let test = "linux_kernel_core";
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    let pattern = pattern.trim();
    if pattern.starts_with('|') || pattern.contains('/') || pattern.contains('%') {
        tools::not_run_here(
            test,
            &format!("core_pattern is {pattern:?}, not a plain file name in the working directory"),
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build(dir.path(), test) else {
        return;
    };
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -c unlimited && exec {} abort",
            exe.display()
        ))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    let core = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == pattern || n.starts_with(&format!("{pattern}.")))
        });
    let Some(core) = core else {
        tools::not_run_here(
            test,
            "the kernel wrote no core file (core dumps disabled for this container?)",
        );
        return;
    };
    let pid = core
        .extension()
        .and_then(|e| e.to_str()?.parse().ok())
        .or_else(|| {
            Dump::open(&core)
                .ok()?
                .prstatus()
                .next()?
                .ok()
                .map(|s| s.pid as u32)
        })
        .unwrap();
    check_core(&core, &exe, &line, pid);
    let dump = Dump::open(&core).unwrap();
    let sig = dump
        .notes()
        .filter_map(Result::ok)
        .find(|n| n.is("CORE", dumpfmt::notes::NT_SIGINFO))
        .expect("kernel cores carry NT_SIGINFO")
        .siginfo()
        .unwrap();
    assert_eq!(sig.signo, 6, "SIGABRT");

    // The kernel stores only the first page of file-backed text (coredump_filter): the rest of
    // such a segment is not in the dump, and must not read as zeros.
    let partial = dump
        .segments()
        .iter()
        .find(|s| s.filesz < s.memsz)
        .expect("a file-backed segment the kernel stored only in part");
    // Its permissions are kept (p_flags): text is not writable; the buffers the program filled
    // are.
    assert!(!partial.writable(), "{partial:?}");
    for (addr, _, _) in buffers(&line) {
        let holder = dump
            .segments()
            .iter()
            .find(|s| s.vaddr <= addr && addr < s.vaddr + s.memsz)
            .expect("a segment holds the buffer");
        assert!(holder.writable(), "{holder:?}");
    }
    let space = AddressSpace::from_dump(&dump).unwrap();
    let missing = partial.vaddr + partial.filesz;
    match space.read_virt(missing - 4, &mut [0u8; 8]) {
        Err(dumpfmt::Error::Virt {
            addr,
            reason:
                dumpfmt::VirtReason::Mapping {
                    reason: dumpfmt::MissingReason::Excluded,
                },
            ..
        }) => assert_eq!(addr, missing),
        other => panic!("{other:?}"),
    }
}
