//! arm64 kernels' dumps (Debian's arm64 kernel under qemu-system-aarch64, dumped by QEMU as ELF
//! and kdump-zlib; $KCRASH_LINUX_ARM64): with no vmlinux, from VMCOREINFO and the kernel's page
//! tables alone, `log` holds every line the serial console printed, `sys` tells the machine, the
//! release and where each CPU stopped, and `klog` finds the KLog module's rings by their
//! descriptor and reads every record as the module logged it; what kcrash cannot do on arm64 it
//! says so.

mod common;

use common::linux::{assert_console_in_log, console_kernel_lines, first_console_line, split_level};
use common::{check_records_in, json_records, Strings};
use kcrash_harness::expected::Expected;
use kcrash_harness::linux::arm64::guest_dumps;
use kcrash_harness::run::stdout;
use serde_json::Value;

#[test]
fn log_and_sys_read_arm64_dumps_without_an_image() {
    let Some((dir, dumps)) = guest_dumps("log_and_sys_read_arm64_dumps_without_an_image") else {
        return;
    };
    let console = console_kernel_lines(&dir);
    assert!(console.len() > 100, "the console printed the boot");
    // "[    0.000000] Linux version 6.1.0-50-arm64 (debian-kernel@...) ..."
    let release = console
        .iter()
        .find_map(|l| l.split_once("] Linux version ")?.1.split(' ').next())
        .expect("the console's Linux version line");
    for dump in &dumps {
        let name = dump.display().to_string();
        let log = stdout(
            &common::kcrash()
                .session(&["log"])
                .arg(dump)
                .output()
                .unwrap(),
            &name,
        );
        let log: Vec<&str> = log.lines().collect();
        let shown = first_console_line(&name, &log, &console);
        if shown > 0 {
            // Lines the console did not print must be debug messages: their levels are in the
            // vmlinux's DWARF.
            let marked = stdout(
                &common::kcrash()
                    .session(&["log -m"])
                    .arg(dump)
                    .arg(dir.join("vmlinux"))
                    .output()
                    .unwrap(),
                &name,
            );
            let marked: Vec<(u8, String)> = marked.lines().take(shown).map(split_level).collect();
            for (i, (level, line)) in marked.iter().enumerate() {
                assert_eq!(
                    (*level, line.as_str()),
                    (7, log[i]),
                    "{name}: a line the console did not print"
                );
            }
        }
        assert_console_in_log(&name, &log[shown..], &console);

        let sys = stdout(
            &common::kcrash()
                .session(&["sys --json"])
                .arg(dump)
                .output()
                .unwrap(),
            &name,
        );
        let sys: Value = serde_json::from_str(&sys).expect("sys --json is JSON");
        assert_eq!(sys["machine"], "aarch64", "{name}");
        assert_eq!(sys["release"], release, "{name}");
        let panic = sys["panic"].as_str().expect("a panic fact");
        assert!(panic.contains("sysrq triggered crash"), "{name}: {panic}");
        let stops = sys["stops"].as_array().expect("stops");
        assert_eq!(stops.len() as u64, sys["cpus"].as_u64().unwrap(), "{name}");
        for stop in stops {
            // Kernel addresses: the top bits set (the CPUs were in the kernel at the panic).
            let pc = u64::from_str_radix(stop["pc"].as_str().unwrap().trim_start_matches("0x"), 16);
            assert!(pc.unwrap() >> 48 == 0xffff, "{name}: {stop}");
            assert!(
                stop.get("rip").is_none() && stop.get("cr2").is_none(),
                "{stop}"
            );
        }

        // x86_64's unwinder and disassembler refuse instead of reading arm64 as x86_64.
        for (command, says) in [
            ("bt", "unwinding aarch64"),
            ("dis 0xffff000000000000", "aarch64"),
        ] {
            let out = common::kcrash()
                .session(&[command])
                .arg(dump)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(1), "{command}");
            let err = common::text(&out.stderr);
            assert!(
                err.contains(says) && err.contains("not supported"),
                "{command}: {err}"
            );
        }
    }
}

#[test]
fn the_modules_klog_reads_as_it_logged_it_without_an_image() {
    let test = "the_modules_klog_reads_as_it_logged_it_without_an_image";
    let Some((dir, dumps)) = guest_dumps(test) else {
        return;
    };
    let expected: Expected = serde_json::from_str(
        &std::fs::read_to_string(dir.join("expected.json")).expect("expected.json"),
    )
    .expect("expected.json parses");
    assert!(
        expected
            .rings
            .iter()
            .map(|r| r.records.len())
            .sum::<usize>()
            > 300,
        "the module logged its events"
    );
    for dump in &dumps {
        let what = dump.display().to_string();
        let run = |command: &str| {
            stdout(
                &common::kcrash()
                    .session(&[command])
                    .arg(dump)
                    .output()
                    .unwrap(),
                &what,
            )
        };
        let summary: Value = serde_json::from_str(&run("klog -s --json")).expect("JSON");
        assert_eq!(summary["layout"]["source"], "scan", "{what}: {summary}");
        let text = run("klog 0 full --json");
        // QEMU's dumps hold all of memory: every string as the module logged it.
        check_records_in(
            &json_records(text.lines(), &what),
            &expected,
            &what,
            Strings::AsLogged,
        );
    }
}
