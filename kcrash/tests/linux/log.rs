//! `log` on the Linux guest's dumps: every kernel line the serial console printed is in it, and
//! its tail is crash(8)'s. Setup: tests/common/linux.rs.

use crate::common;

use common::linux::{
    assert_console_in_log, console_kernel_lines, crash, dumps, first_console_line, guest,
    guest_crash_reads, kcrash, split_level, DUMPS_AND_CONSOLE,
};
use kcrash_harness::run::stdout;

/// crash's log lines with its indented later lines of a record given the record's prefix (its
/// stamp and, with -m, level), as kcrash and the console print them.
fn with_prefixes(text: &str) -> Vec<String> {
    let mut prefix = String::new();
    text.lines()
        .filter_map(|l| {
            if l.starts_with('[') {
                let mut end = l.find("] ")? + 2;
                if l[end..].starts_with('<') {
                    end += l[end..].find('>')? + 1;
                }
                prefix = l[..end].to_owned();
                Some(l.to_owned())
            } else if !prefix.is_empty() && l.starts_with(&" ".repeat(prefix.len())) {
                Some(format!("{prefix}{}", &l[prefix.len()..]))
            } else {
                None
            }
        })
        .collect()
}

/// `log -T` lines agree with crash's: the same messages, wall-clock times within a second.
/// kcrash adds each record's timestamp to the kernel's own boot time (the timekeeper's
/// offs_real - offs_boot, in nanoseconds); crash derives the boot time in whole seconds, so its
/// times may be a second later or earlier depending on where the crash fell within a second.
fn assert_human_times_agree(ours: &str, theirs: &str) {
    // "[Sun Nov 22 06:15:44 UTC 2026] message" -> (seconds of the day, message).
    let split = |line: &str| -> (i64, String) {
        let (stamp, message) = line
            .strip_prefix('[')
            .and_then(|l| l.split_once("] "))
            .unwrap_or_else(|| panic!("a log -T line: {line:?}"));
        let clock = stamp.split(' ').nth(3).expect("HH:MM:SS in the stamp");
        let secs = clock
            .split(':')
            .map(|f| f.parse::<i64>().expect("a clock field"))
            .fold(0, |acc, f| acc * 60 + f);
        (secs, message.to_owned())
    };
    let (ours, theirs): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), theirs.lines().collect());
    assert_eq!(ours.len(), theirs.len(), "log -T: line counts");
    for (o, t) in ours.iter().zip(&theirs) {
        let ((os, om), (ts, tm)) = (split(o), split(t));
        assert_eq!(om, tm, "log -T: messages");
        let apart = (os - ts)
            .rem_euclid(86_400)
            .min((ts - os).rem_euclid(86_400));
        assert!(
            apart <= 1,
            "log -T: times more than a second apart:\n{o}\n{t}"
        );
    }
}

#[test]
fn log_holds_every_line_the_console_printed() {
    let Some(dir) = guest("log_vs_console", &DUMPS_AND_CONSOLE) else {
        return;
    };
    let console = console_kernel_lines(&dir);
    assert!(console.len() > 100, "the console printed the boot");
    for dump in dumps(&dir) {
        let log = |args: &[&str]| {
            let mut cmd = common::kcrash().command();
            cmd.current_dir(&dir).args(["-s", "-c"]).args(args);
            stdout(&cmd.output().expect("kcrash runs"), dump)
        };
        // With the vmlinux (offsets from VMCOREINFO, levels from DWARF) and without it: the same
        // lines.
        let (levels, lines): (Vec<u8>, Vec<String>) = log(&["log -m", dump, "vmlinux"])
            .lines()
            .map(split_level)
            .unzip();
        let plain = log(&["log", dump]);
        assert_eq!(
            plain.lines().collect::<Vec<_>>(),
            lines,
            "{dump}: log without vmlinux"
        );
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let shown = first_console_line(dump, &lines, &console);
        assert!(
            levels[..shown].iter().all(|&l| l == 7),
            "{dump}: the console did not print log's oldest lines, and not all are debug messages: {:?}",
            &lines[..shown]
        );
        assert_console_in_log(dump, &lines[shown..], &console);
    }
}

#[test]
fn log_tail_agrees_with_crash() {
    let Some(dir) = guest_crash_reads("log_vs_crash", &["vmcore.elf", "vmlinux"]) else {
        return;
    };
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let file = |n: &str| scratch.path().join(n).display().to_string();
    let modes = [("log", "plain"), ("log -T", "human"), ("log -m", "levels")];
    let script: Vec<String> = modes
        .iter()
        .map(|(cmd, name)| format!("{cmd} > {}", file(name)))
        .collect();
    crash(&dir, "vmcore.elf", &script.join("\n"));
    for (cmd, name) in modes {
        let theirs = with_prefixes(&std::fs::read_to_string(file(name)).expect("crash's log"));
        assert!(theirs.len() >= 50, "{cmd}: crash printed {theirs:?}");
        let ours = stdout(&kcrash(&dir, "vmcore.elf", &[cmd]), cmd);
        let ours: Vec<&str> = ours.lines().collect();
        let theirs: Vec<&str> = theirs.iter().map(String::as_str).collect();
        let tail = |v: &[&str]| v[v.len().saturating_sub(50)..].join("\n");
        if cmd == "log -T" {
            assert_human_times_agree(&tail(&ours), &tail(&theirs));
        } else {
            assert_eq!(tail(&ours), tail(&theirs), "{cmd}");
        }
    }
}
