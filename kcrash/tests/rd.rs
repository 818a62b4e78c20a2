//! `rd` through the real binary on corpus dumps: the records the kernel logged (the corpus's
//! expected.json) in every dump format and in a process core, physical reads against the image
//! file's bytes and `xxd`, the text layout and unreadable memory.

use std::path::Path;
use std::process::Command;

mod common;

use common::{hex, json_lines, kcrash, kdump, nm, vmlinux, DUMPS};
use kcrash_harness::run::stdout;
use kcrash_harness::{corpus, tools};
use serde_json::Value;

/// Every record the kernel logged and the dump still holds, read with `rd` on every dump format:
/// the 8 words are the ones the kernel printed, and `rd -a desc` is its format string.
fn check_records(dump: &Path, image: &Path, expected: &Path) {
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(expected).unwrap()).unwrap();
    let mut commands = Vec::new();
    let mut want = Vec::new();
    for ring in expected["rings"].as_array().unwrap() {
        // A ring the kernel scribbled on is not where its records say; kcrash does not read it.
        if !ring["untrusted"].as_array().is_none_or(|u| u.is_empty()) {
            continue;
        }
        let buffer = ring["buffer"].as_u64().unwrap();
        for rec in ring["records"].as_array().unwrap() {
            // Torn slots carry no words to compare.
            if !rec["damage"].as_array().unwrap().is_empty() {
                continue;
            }
            let u = |k: &str| rec[k].as_u64().unwrap();
            let words: Vec<u64> = rec["words"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            let at = buffer + u("slot") * 64;
            commands.push(format!("rd -64 {at:#x} 8 --json"));
            commands.push(format!("rd -a {:#x} --json", u("desc")));
            want.push((at, words, rec["format"].as_str().unwrap().to_owned()));
        }
    }
    assert!(!want.is_empty());
    let refs: Vec<&str> = commands.iter().map(String::as_str).collect();
    let got = json_lines(&stdout(&kcrash().commands(dump, image, &refs), "kcrash"));
    assert_eq!(got.len(), want.len() * 9);
    for (i, (at, words, format)) in want.iter().enumerate() {
        let chunk = &got[i * 9..i * 9 + 9];
        for (j, w) in words.iter().enumerate() {
            assert_eq!(hex(&chunk[j]["address"]), at + 8 * j as u64);
            assert_eq!(
                hex(&chunk[j]["value"]),
                *w,
                "{} word {j} at {at:#x}",
                dump.display()
            );
        }
        assert_eq!(chunk[8]["string"].as_str(), Some(format.as_str()));
        assert_eq!(chunk[8]["terminated"], Value::Bool(true));
    }
}

#[test]
fn rd_reads_the_records_the_kernel_logged_in_every_format() {
    for scenario in ["rings", "strings"] {
        for dump in DUMPS {
            check_records(
                &corpus::file(&format!("bare/{scenario}/{dump}")),
                &vmlinux(),
                &corpus::file(&format!("bare/{scenario}/expected.json")),
            );
        }
    }
}

#[test]
fn rd_reads_a_process_core_and_the_files_it_left_out() {
    // desc strings sit in .rodata, which the core leaves out: they come from the executable.
    check_records(
        &corpus::file("hosted/rings/core.gz"),
        &corpus::file("hosted/hosted"),
        &corpus::file("hosted/rings/expected.json"),
    );
}

/// `rd -p` of the kernel's code equals the image file's bytes at that physical address, as
/// readelf's program headers place them.
#[test]
fn rd_physical_matches_the_image_file() {
    if !tools::runs("rd_physical_matches_the_image_file", "readelf")
        || !tools::runs("rd_physical_matches_the_image_file", "nm")
    {
        return;
    }
    let nm = nm(&vmlinux());
    let headers = tools::output(Command::new("readelf").arg("-lW").arg(vmlinux()));
    let bytes = std::fs::read(vmlinux()).unwrap();
    // The fault scenario's code: the image file holds it as it ran.
    let code = nm
        .iter()
        .find(|(n, _)| n.contains("4bare9scenarios5fault"))
        .map(|(_, v)| v.0)
        .expect("bare::scenarios::fault in nm");
    let (offset, paddr) = headers
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
            let (off, vaddr, paddr, filesz) = (hex(f[1]), hex(f[2]), hex(f[3]), hex(f[4]));
            (vaddr <= code && code + 32 <= vaddr + filesz)
                .then(|| (off + code - vaddr, paddr + code - vaddr))
        })
        .expect("code in a PT_LOAD");
    let want = &bytes[offset as usize..offset as usize + 32];
    for dump in DUMPS {
        let out = stdout(
            &kcrash().commands(
                &corpus::file(&format!("bare/fault/{dump}")),
                &vmlinux(),
                &[
                    &format!("rd -p -8 {paddr:#x} 32 --json"),
                    &format!("rd -8 {code:#x} 32 --json"),
                ],
            ),
            "kcrash",
        );
        let units = json_lines(&out);
        let bytes =
            |units: &[Value]| -> Vec<u8> { units.iter().map(|v| hex(&v["value"]) as u8).collect() };
        assert_eq!(bytes(&units[..32]), want, "{dump} physical");
        assert_eq!(bytes(&units[32..]), want, "{dump} virtual");
    }
}

#[test]
fn rd_text_layout_and_unreadable_memory() {
    let nm = nm(&vmlinux());
    let klogs = nm["KLogs"].0;
    let out = stdout(
        &kcrash().commands(
            &corpus::file("bare/rings/vmcore.kdump"),
            &vmlinux(),
            &[
                "rd KLogs 3",
                "rd -32 KLogs 5",
                "rd -s KLogs 8",
                "rd -a KLogs",
            ],
        ),
        "kcrash",
    );
    let lines: Vec<&str> = out.lines().collect();
    // Two 64-bit units per line, the ASCII column after them; the last line padded to align.
    assert!(lines[0].starts_with(&format!("{klogs:016x}:  ")));
    assert_eq!(lines[0].len(), lines[1].len() + 8, "{out}");
    assert!(lines[1].starts_with(&format!("{:016x}:  ", klogs + 16)));
    assert_eq!(lines[2].len(), lines[3].len() + 12, "{out}");
    // -s: KLogs[0].buffer (the third word) points at KLogBuffer.
    assert!(
        lines[4..8].iter().any(|l| l.contains("KLogBuffer")),
        "{out}"
    );
    // -a on KLogs' first byte, a NUL: an empty string, said so.
    assert_eq!(
        lines[8..],
        [format!("{klogs:016x}:  <empty string>")],
        "{out}"
    );
    // One line for the whole unreadable run; the status and one line on stderr tell a script
    // that not everything asked for could be read.
    let unreadable = |cmd: &str| {
        let o = kcrash().commands(&kdump(), &vmlinux(), &[cmd]);
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        let err = common::text(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.ends_with("are unreadable (marked above)\n"), "{err}");
        (common::text(&o.stdout), err)
    };
    let (out, err) = unreadable("rd 0xffffffffc0000000 1000");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.starts_with("ffffffffc0000000:  <unreadable 0x1f40 bytes: "),
        "{out}"
    );
    assert!(err.starts_with("kcrash: rd: 0x1f40 of the 0x1f40 bytes from 0xffffffffc0000000"));

    // The guest had 32 MiB of RAM (corpus/README.md): a line across its end shows the unit it
    // has and marks the one it has not; the rest is one unreadable run.
    for (cmd, at) in [
        ("rd -p 0x1fffff8 3", 0x1fffff8u64),
        ("rd 0xffffffff81fffff8 3", 0xffffffff81fffff8),
    ] {
        let (out, err) = unreadable(cmd);
        assert!(err.contains(": rd: 0x10 of the 0x18 bytes from "), "{err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert!(
            lines[0].starts_with(&format!("{at:016x}:  "))
                && lines[0].contains(" ???????????????? "),
            "{out}"
        );
        assert!(lines[0].contains("<unreadable: "), "{out}");
        assert!(
            lines[1].starts_with(&format!("{:016x}:  <unreadable 0x8 bytes: ", at + 16)),
            "{out}"
        );
    }
}

/// `rd -p` over a megabyte of the guest's RAM prints what `xxd -e -g8` prints of the same bytes of
/// QEMU's ELF dump (units and ASCII column; the addresses differ by the segment's file offset).
#[test]
fn rd_physical_agrees_with_xxd() {
    if !tools::runs("rd_physical_agrees_with_xxd", "xxd")
        || !tools::runs("rd_physical_agrees_with_xxd", "gzip")
        || !tools::runs("rd_physical_agrees_with_xxd", "readelf")
    {
        eprintln!("xxd, gzip or readelf not found: rd is not compared with xxd");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let elf = dir.path().join("vmcore.elf");
    let raw = Command::new("gzip")
        .arg("-dc")
        .arg(corpus::file("bare/rings/vmcore.elf.gz"))
        .output()
        .unwrap();
    std::fs::write(&elf, raw.stdout).unwrap();
    // The first PT_LOAD holds guest physical 0 onwards.
    let headers = tools::output(Command::new("readelf").arg("-lW").arg(&elf));
    let load = headers
        .lines()
        .find(|l| l.trim_start().starts_with("LOAD"))
        .unwrap();
    let f: Vec<&str> = load.split_whitespace().collect();
    let offset = u64::from_str_radix(f[1].trim_start_matches("0x"), 16).unwrap();
    assert_eq!(f[3], "0x0000000000000000", "{load}");
    let (start, len) = (0x100000u64, 0x100000u64);
    let xxd = tools::output(
        Command::new("xxd")
            .args([
                "-e",
                "-g8",
                "-s",
                &(offset + start).to_string(),
                "-l",
                &len.to_string(),
            ])
            .arg(&elf),
    );
    let out = stdout(
        &kcrash().commands(
            &elf,
            &vmlinux(),
            &[&format!("rd -p {start:#x} {}", len / 8)],
        ),
        "kcrash",
    );
    let body = |line: &str| -> String {
        let (_, rest) = line.split_once(':').unwrap();
        rest.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let ours: Vec<String> = out.lines().map(body).collect();
    let theirs: Vec<String> = xxd.lines().map(body).collect();
    assert_eq!(ours.len(), (len / 16) as usize);
    assert_eq!(ours, theirs);
}
