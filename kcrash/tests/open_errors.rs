//! Opening a dump: the two files in either order, and one clear line on stderr with exit status 2
//! for each way it can go wrong (1 for a command that cannot run).

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

mod common;

use kcrash_harness::corpus::file as corpus;
use kcrash_harness::tools;

/// `kcrash -c 'klog -n 1' FILES...`: a command that needs the dump, the image and its DWARF.
fn klog(files: &[&Path]) -> Output {
    common::kcrash()
        .command()
        .args(["-c", "klog -n 1"])
        .args(files)
        .output()
        .expect("kcrash runs")
}

/// The one stderr line of a failed open, after checking the exit status.
fn failure(out: &Output, status: i32) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(status), "stderr: {err}");
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout when opening fails"
    );
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| !l.ends_with("decompressing it once to a temporary file..."))
        .collect();
    assert_eq!(lines.len(), 1, "one line of error: {err}");
    lines[0].to_owned()
}

#[test]
fn dump_and_image_in_either_order() {
    let (dump, image) = (corpus("bare/rings/vmcore.kdump"), corpus("bare/vmlinux"));
    let a = klog(&[&dump, &image]);
    let b = klog(&[&image, &dump]);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(String::from_utf8_lossy(&a.stdout).lines().count(), 1);
}

#[test]
fn a_missing_file() {
    let line = failure(
        &klog(&[Path::new("/nonexistent/vmcore"), &corpus("bare/vmlinux")]),
        2,
    );
    assert_eq!(
        line,
        "kcrash: /nonexistent/vmcore: No such file or directory (os error 2)"
    );
}

#[test]
fn a_file_that_is_neither() {
    let readme = corpus("README.md");
    let line = failure(&klog(&[&corpus("bare/rings/vmcore.kdump"), &readme]), 2);
    assert!(
        line.ends_with(
            "README.md: neither a dump (ELF core, kdump, flattened, gzip) nor an ELF image"
        ),
        "{line}"
    );
}

/// A FIFO, a directory or a device where the dump or the image should be is refused at once
/// with exit status 2; opening one no longer waits for a writer that never comes.
#[test]
fn a_file_that_is_not_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("vmcore");
    let status = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
    let (dump, image) = (corpus("bare/rings/vmcore.kdump"), corpus("bare/vmlinux"));
    let not_regular = [fifo.as_path(), dir.path(), Path::new("/dev/null")];
    for odd in not_regular {
        for files in [[odd, image.as_path()], [dump.as_path(), odd]] {
            let mut cmd = common::kcrash().command();
            cmd.args(["-c", "klog -n 1"]).args(files);
            let out = match kcrash_harness::run::bounded(cmd, 1 << 30, Duration::from_secs(20)) {
                kcrash_harness::run::Ended::Exited(out) => out,
                _ => panic!("{files:?}: kcrash did not exit by itself"),
            };
            let line = failure(&out, 2);
            assert!(
                line.ends_with(&format!(
                    "{}: not a regular file (a FIFO, device, socket or directory)",
                    odd.display()
                )),
                "{line}"
            );
        }
    }
}

#[test]
fn two_dumps() {
    let d = corpus("bare/rings/vmcore.kdump");
    assert_eq!(
        failure(&klog(&[&d, &d]), 2),
        "kcrash: more than one dump given: kcrash [DUMP] [IMAGE] [MODULE.ko...]"
    );
}

/// No dump means the running kernel; on a machine without /proc/kcore (this host's kernel has
/// none) that is said, with what to do. Where /proc/kcore exists the guest test covers it.
#[test]
fn no_dump_and_no_kcore() {
    if Path::new("/proc/kcore").exists() {
        tools::not_run_here("no_dump_and_no_kcore", "this machine has /proc/kcore");
        return;
    }
    assert_eq!(
        failure(&klog(&[]), 2),
        "kcrash: /proc/kcore does not exist: this kernel was built without CONFIG_PROC_KCORE, \
         so its memory cannot be read live; take a dump (kdump, or QEMU dump-guest-memory) instead"
    );
    // A file under /proc is live memory, even given with an image.
    assert!(failure(
        &klog(&[Path::new("/proc/kcore"), &corpus("bare/vmlinux")]),
        2
    )
    .starts_with("kcrash: /proc/kcore does not exist"));
}

#[test]
fn a_kernel_image_that_is_not_the_crashed_kernel() {
    let line = failure(
        &klog(&[&corpus("bare/rings/vmcore.kdump"), &corpus("hosted/hosted")]),
        2,
    );
    assert!(
        line.contains("hosted does not belong to") && line.contains("the code at the entry point"),
        "{line}"
    );
}

#[test]
fn a_program_that_is_not_the_crashed_process() {
    let line = failure(
        &klog(&[&corpus("hosted/rings/core.gz"), &corpus("bare/vmlinux")]),
        2,
    );
    assert!(
        line.contains("vmlinux does not belong to") && line.contains("the process started at"),
        "{line}"
    );
}

#[test]
fn an_image_without_dwarf_or_descriptor_symbol_is_read_by_scanning() {
    if !tools::runs(
        "an_image_without_dwarf_or_descriptor_symbol_is_read_by_scanning",
        "objcopy",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let stripped = dir.path().join("vmlinux");
    let ok = Command::new("objcopy")
        .args(["--strip-debug", "--strip-symbol=klogDescriptor"])
        .arg(corpus("bare/vmlinux"))
        .arg(&stripped)
        .status()
        .unwrap();
    assert!(ok.success());
    let out = common::kcrash()
        .command()
        .args(["-s", "-c", "klog -s"])
        .arg(corpus("bare/rings/vmcore.kdump"))
        .arg(&stripped)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("layout: descriptor found by scanning memory, at physical 0x")
            && stdout.contains("has no DWARF debug information and no klogDescriptor symbol: the KLog descriptor was looked for in the dump's memory"),
        "{stdout}"
    );
}

/// A gzipped dump with 64 MiB of zeros behind it in the same stream reads as the dump itself:
/// inflating stops where its headers say it ends, and that is said once.
#[test]
fn a_gzipped_dump_with_more_behind_it_is_read_to_its_end_only() {
    use std::io::{Read, Write};
    let gz = corpus("bare/rings/vmcore.elf.gz");
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap())
        .read_to_end(&mut plain)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bomb = dir.path().join("vmcore.elf.gz");
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(&bomb).unwrap(),
        flate2::Compression::fast(),
    );
    e.write_all(&plain).unwrap();
    let mib = vec![0u8; 1 << 20];
    for _ in 0..64 {
        e.write_all(&mib).unwrap();
    }
    e.finish().unwrap();
    let image = corpus("bare/vmlinux");
    let (want, got) = (klog(&[&gz, &image]), klog(&[&bomb, &image]));
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    assert_eq!(got.stdout, want.stdout);
    let said = format!(
        "kcrash: {}: the gzip stream goes on past {:#x}, where the dump's headers say it ends: \
         the rest was not decompressed",
        bomb.display(),
        plain.len()
    );
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert_eq!(stderr.lines().filter(|l| *l == said).count(), 1, "{stderr}");
}

/// `FILE@ADDRESS`, a raw memory image: every way the word or the file can be wrong is one line
/// naming it, with exit status 2.
#[test]
fn raw_memory_words_that_cannot_be_opened() {
    let dir = tempfile::tempdir().unwrap();
    let mem = dir.path().join("mem");
    std::fs::write(&mem, vec![0u8; 0x2000]).unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let (m, e) = (mem.display(), empty.display());
    let missing = dir.path().join("missing");
    let bad =
        |word: &str, why: &str| format!("kcrash: {word}: no such file, and as FILE@ADDRESS {why}");
    let cases = [
        (
            format!("{}@0x10", missing.display()),
            format!(
                "kcrash: {}: cannot open: No such file or directory (os error 2)",
                missing.display()
            ),
        ),
        (
            format!("{m}@0xzz"),
            bad(
                &format!("{m}@0xzz"),
                "\"0xzz\" is not a physical address: not a hex number after 0x",
            ),
        ),
        (
            format!("{m}@"),
            bad(
                &format!("{m}@"),
                "\"\" is not a physical address: no digits (hex with 0x, or decimal, then k, m \
                 or g if you like)",
            ),
        ),
        (
            format!("{m}@-1"),
            bad(
                &format!("{m}@-1"),
                "\"-1\" is not a physical address: not a decimal number (hex needs 0x)",
            ),
        ),
        (
            format!("{m}@18446744073709551616"),
            bad(
                &format!("{m}@18446744073709551616"),
                "\"18446744073709551616\" is not a physical address: more than 64 bits",
            ),
        ),
        (
            format!("{m}@0x1000000000g"),
            bad(
                &format!("{m}@0x1000000000g"),
                "\"0x1000000000g\" is not a physical address: more than 64 bits",
            ),
        ),
        (
            format!("{m}@0xffffffffffffffff"),
            format!(
                "kcrash: {m}: at offset 0x0: a raw memory image of 0x2000 bytes at physical \
                 0xffffffffffffffff would end past 2^64"
            ),
        ),
        (
            format!("{e}@0"),
            format!(
                "kcrash: {e}: at offset 0x0: empty file: a raw memory image holds at least one \
                 byte"
            ),
        ),
    ];
    for (word, want) in cases {
        assert_eq!(failure(&klog(&[Path::new(&word)]), 2), want, "{word}");
    }
    let word = format!("{m}@0");
    assert_eq!(
        failure(
            &klog(&[Path::new(&word), &corpus("bare/rings/vmcore.kdump")]),
            2
        ),
        "kcrash: more than one dump given: kcrash [DUMP] [IMAGE] [MODULE.ko...]"
    );
    // Memory (here zeros where the kernel's entry point is) that does not hold the image's code
    // is not its kernel's.
    let word = format!("{m}@1m");
    let line = failure(&klog(&[Path::new(&word), &corpus("bare/vmlinux")]), 2);
    assert!(
        line.ends_with(&format!(
            "does not belong to {m}: the code at the entry point 0xffffffff80100000 differs"
        )),
        "{line}"
    );
}

/// A file whose name holds `@` is that file when it exists, whatever follows the `@`.
#[test]
fn a_file_named_with_an_at_is_that_file() {
    let dir = tempfile::tempdir().unwrap();
    let named = dir.path().join("vmcore@0x10");
    std::fs::copy(corpus("bare/rings/vmcore.kdump"), &named).unwrap();
    let out = klog(&[&named, &corpus("bare/vmlinux")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}
