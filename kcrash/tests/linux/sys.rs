//! `sys` on the Linux guest's dumps: the release, version, machine and panic the console shows,
//! and the facts crash(8) gives. Setup: tests/common/linux.rs.

use crate::common;

use common::linux::{
    console_kernel_lines, crash, crash_reads, guest, kcrash, panicking_cpu, DUMPS_AND_CONSOLE,
};
use kcrash_harness::run::stdout;

/// `sys`'s `KEY: value` lines.
fn sys_facts(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

fn fact<'a>(facts: &'a [(String, String)], key: &str) -> &'a str {
    facts
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {key} in {facts:?}"))
}

#[test]
fn sys_says_what_the_console_and_crash_say() {
    let Some(dir) = guest("sys", &DUMPS_AND_CONSOLE) else {
        return;
    };
    // The console's banner: "Linux version RELEASE (builder) (compilers) VERSION".
    let console = console_kernel_lines(&dir);
    let banner = console
        .iter()
        .find_map(|l| l.split_once("] Linux version ").map(|(_, b)| b.to_owned()))
        .expect("the console's banner");
    let release = banner.split_whitespace().next().expect("release");
    let panic = console
        .iter()
        .find_map(|l| {
            l.split_once("] Kernel panic - not syncing: ")
                .map(|(_, m)| m.to_owned())
        })
        .expect("the console's panic line");
    for dump in ["vmcore.elf", "vmcore.kdump"] {
        let facts = sys_facts(&stdout(&kcrash(&dir, dump, &["sys"]), dump));
        assert_eq!(fact(&facts, "RELEASE"), release, "{dump}");
        assert!(
            banner.ends_with(fact(&facts, "VERSION")),
            "{dump}: {banner}"
        );
        assert_eq!(fact(&facts, "MACHINE"), "x86_64", "{dump}");
        assert!(
            fact(&facts, "PANIC").starts_with(&format!("\"Kernel panic - not syncing: {panic}\"")),
            "{dump}"
        );
        // The CPU that panicked, not merely the first.
        let cpu = panicking_cpu(&console);
        assert!(
            fact(&facts, "PANIC").contains(&format!("; CPU {cpu} stopped at ")),
            "{dump}: CPU {cpu}"
        );
    }
    if !crash_reads("sys_vs_crash", &dir) {
        return;
    }
    let theirs = sys_facts(&crash(&dir, "vmcore.elf", "sys"));
    let ours = sys_facts(&stdout(&kcrash(&dir, "vmcore.elf", &["sys"]), "sys"));
    for key in ["RELEASE", "VERSION", "MEMORY", "UPTIME", "NODENAME"] {
        assert_eq!(fact(&ours, key), fact(&theirs, key), "{key}");
    }
    assert_eq!(fact(&ours, "CRASH TIME"), fact(&theirs, "DATE"));
    assert!(fact(&ours, "PANIC").starts_with(fact(&theirs, "PANIC")));
    assert!(fact(&theirs, "MACHINE").starts_with(fact(&ours, "MACHINE")));
}
