//! kcrash on a real Linux guest: Debian's distribution kernel under QEMU with KASLR on, dumped by
//! QEMU (ELF) and makedumpfile (kdump), opened with Debian's debug vmlinux.
//!
//! The guest directory comes from `KCRASH_LINUX_GUEST` (default
//! `/var/cache/kcrash-ci/linux-guest/6.1.0-56-amd64`, what `.ci/run`'s guest pipeline writes):
//! `vmcore.elf`, `vmcore.kdump`, `console.log` (the serial console: an oracle kcrash does not
//! read), `vmlinux`. Without it the tests say NOT RUN; under KCRASH_REQUIRE_TOOLS=1 they fail.
//! Where crash(8) is installed, kcrash is compared with it on the same dump.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use dumpfmt::translate::x86_64::X86_64;
use dumpfmt::translate::{AddressSpace, Source};
use dumpfmt::Dump;
use kcrash::linux::kaslr::{self, Found};
mod common;

use common::{check_records, have_tool, json_records, not_run, stdout};
use kcrash_harness::expected::Expected;
use symbols::Image;

/// The guest directory, if it holds `files`; else says NOT RUN (or fails under
/// KCRASH_REQUIRE_TOOLS=1).
fn guest(test: &str, files: &[&str]) -> Option<PathBuf> {
    let dir = std::env::var_os("KCRASH_LINUX_GUEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/kcrash-ci/linux-guest/6.1.0-56-amd64"));
    if let Some(missing) = files.iter().find(|f| !dir.join(f).exists()) {
        not_run(test, &format!("{} not there", dir.join(missing).display()));
        return None;
    }
    Some(dir)
}

/// The kcrash binary, with its name-index cache in the target directory rather than the home.
fn kcrash_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kcrash"));
    cmd.env(
        "KCRASH_INDEX_CACHE",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("index-cache"),
    );
    cmd
}

fn kcrash(dir: &Path, dump: &str, commands: &[&str]) -> Output {
    let mut cmd = kcrash_command();
    cmd.current_dir(dir).arg("-s");
    for c in commands {
        cmd.arg("-c").arg(c);
    }
    cmd.arg(dump).arg("vmlinux").output().expect("kcrash runs")
}

/// crash(8)'s output for `commands` on `dump`, the prompt echo left out.
fn crash(dir: &Path, dump: &str, commands: &str) -> String {
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
fn console_kaslr(dir: &Path) -> u64 {
    let console = std::fs::read_to_string(dir.join("console.log")).expect("console.log");
    let hex = console
        .split("Kernel Offset: 0x")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the panic printed the kernel offset");
    u64::from_str_radix(hex, 16).expect("hex offset")
}

#[test]
fn kaslr_offset_is_the_one_the_kernel_printed_by_every_way_of_finding_it() {
    let Some(dir) = guest(
        "kaslr_offset",
        &["vmcore.elf", "vmcore.kdump", "console.log", "vmlinux"],
    ) else {
        return;
    };
    let want = console_kaslr(&dir);
    for dump in ["vmcore.elf", "vmcore.kdump"] {
        let out = kcrash(&dir, dump, &["sys"]);
        let text = stdout(&out, dump);
        assert!(
            text.contains(&format!(
                "KASLR offset {want:#x}, from VMCOREINFO KERNELOFFSET"
            )),
            "{dump}: {text}"
        );
    }
    let dump = Dump::open(dir.join("vmcore.elf")).expect("dump");
    let image = Image::open(dir.join("vmlinux")).expect("vmlinux");
    // Through the CPU's CR3 only, as for a dump without VMCOREINFO.
    let mut space = AddressSpace::new(&dump);
    let cr3 = dump
        .qemu_cpu_states()
        .map(|c| c.expect("cpu note"))
        .find(|c| c.paging())
        .expect("a CPU with paging on")
        .cr3();
    space.push(Source::PageTables {
        walker: std::sync::Arc::new(X86_64::new(false)),
        root: X86_64::cr3_root(cr3),
    });
    let (offset, found) = kaslr::search(&dump, &mut space, &image).expect("found through CR3");
    assert_eq!(
        (offset, found),
        (want, Found::Banner("the CPUs' page tables (CR3)"))
    );
    // Through nothing: the banner in physical memory gives init_top_pgt.
    for name in ["vmcore.elf", "vmcore.kdump"] {
        let dump = Dump::open(dir.join(name)).expect("dump");
        let mut space = AddressSpace::new(&dump);
        let (offset, found) = kaslr::search(&dump, &mut space, &image).expect("found by scan");
        assert_eq!(offset, want, "{name}");
        assert!(matches!(found, Found::Banner(t) if t.starts_with("init_top_pgt")));
    }
}

#[test]
fn a_dump_without_vmcoreinfo_finds_its_kaslr_offset_through_the_cpus_page_tables() {
    let Some(dir) = guest(
        "no_vmcoreinfo",
        &[
            "vmcore-novmcoreinfo.elf",
            "console-novmcoreinfo.log",
            "vmlinux",
        ],
    ) else {
        return;
    };
    let console = std::fs::read_to_string(dir.join("console-novmcoreinfo.log")).expect("console");
    let want = console
        .split("Kernel Offset: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the panic printed the kernel offset");
    let out = kcrash(
        &dir,
        "vmcore-novmcoreinfo.elf",
        &["sys", "p init_task.comm"],
    );
    let text = stdout(&out, "no VMCOREINFO");
    // The release comes from the banner then; the console's banner names it too.
    let release = console
        .split("Linux version ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the console's banner");
    assert!(
        text.contains(&format!(
            "Linux {release}: KASLR offset {want}, from the image's linux_banner found in the dump through the \
             CPUs' page tables (CR3)"
        )),
        "{text}"
    );
    assert!(
        text.ends_with("\"swapper/0\\000\\000\\000\\000\\000\\000\"\n"),
        "{text}"
    );
}

#[test]
fn symbols_and_variables_sit_at_their_kaslr_addresses() {
    let Some(dir) = guest(
        "symbols_kaslr",
        &["vmcore.elf", "vmcore.kdump", "console.log", "vmlinux"],
    ) else {
        return;
    };
    let offset = console_kaslr(&dir);
    // The link-time address from the ELF symbol table (read by object, not by kcrash's symbols
    // crate), moved by the offset the kernel printed.
    let data = std::fs::read(dir.join("vmlinux")).expect("vmlinux");
    let elf = {
        use object::{Object, ObjectSymbol};
        let file = object::File::parse(&*data).expect("ELF");
        let link = |name: &str| {
            file.symbols()
                .find(|s| s.name() == Ok(name))
                .map(|s| s.address())
                .expect("symbol")
        };
        (link("init_task"), link("linux_banner"))
    };
    for dump in ["vmcore.elf", "vmcore.kdump"] {
        let text = stdout(
            &kcrash(
                &dir,
                dump,
                &[
                    "sym init_task",
                    "p init_task.comm",
                    "p/x &linux_banner",
                    "p jiffies > /dev/null",
                ],
            ),
            dump,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with(&format!("{:016x} (D) init_task", elf.0 + offset)),
            "{dump}: {text}"
        );
        assert_eq!(lines[1], r#""swapper/0\000\000\000\000\000\000""#, "{dump}");
        assert!(
            lines[2] == format!("{:#x}", elf.1 + offset),
            "{dump}: {text}"
        );
    }
}

#[test]
fn a_print_agrees_with_crash() {
    let Some(dir) = guest("print_vs_crash", &["vmcore.elf", "vmlinux"]) else {
        return;
    };
    if !have_tool("print_vs_crash", "crash") {
        return;
    }
    let theirs = crash(
        &dir,
        "vmcore.elf",
        "p jiffies\np init_task.pid\nsym init_task",
    );
    let ours = stdout(
        &kcrash(
            &dir,
            "vmcore.elf",
            &["p jiffies", "p init_task.pid", "sym init_task"],
        ),
        "kcrash",
    );
    let ours: Vec<&str> = ours.lines().collect();
    // crash: "jiffies = $1 = 4294893235", "$2 = 0", "ffff... (D) init_task".
    let values: Vec<&str> = theirs
        .lines()
        .filter_map(|l| l.split_once('$').map(|(_, v)| v))
        .filter_map(|v| v.split_once(" = ").map(|(_, v)| v))
        .collect();
    assert_eq!(values, [ours[0], ours[1]], "crash said:\n{theirs}");
    let address = |l: &str| l.split_whitespace().next().map(str::to_owned);
    let crash_sym = theirs
        .lines()
        .find(|l| l.ends_with(" init_task"))
        .expect("crash's sym");
    assert_eq!(
        address(crash_sym),
        address(ours[2]),
        "crash said:\n{theirs}"
    );
}

/// The kernel's lines in the serial console: from the `[ sssss.uuuuuu] ` stamp on (the stamp
/// may follow a firmware's escape sequences on the same line), carriage returns dropped.
fn console_kernel_lines(dir: &Path) -> Vec<String> {
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
fn dumps(dir: &Path) -> Vec<&'static str> {
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

#[test]
fn log_holds_every_line_the_console_printed() {
    let Some(dir) = guest(
        "log_vs_console",
        &["vmcore.elf", "vmcore.kdump", "console.log", "vmlinux"],
    ) else {
        return;
    };
    let console = console_kernel_lines(&dir);
    assert!(console.len() > 100, "the console printed the boot");
    for dump in dumps(&dir) {
        // With the vmlinux (offsets from VMCOREINFO, levels from DWARF) and without it.
        for with_image in [true, false] {
            let mut cmd = kcrash_command();
            cmd.current_dir(&dir).args(["-s", "-c", "log", dump]);
            if with_image {
                cmd.arg("vmlinux");
            }
            let log = stdout(&cmd.output().expect("kcrash runs"), dump);
            let log: Vec<&str> = log.lines().collect();
            // The ring may have wrapped: the console's lines from the ring's first record on are
            // all there, in order, and the last ones are the same.
            let first = *log.first().expect("a record");
            let from = console
                .iter()
                .position(|l| l == first)
                .expect("the console printed the ring's oldest record");
            let mut at = 0;
            for want in &console[from..] {
                match log[at..].iter().position(|l| l == want) {
                    Some(i) => at += i + 1,
                    None => {
                        panic!("{dump}: the console's {want:?} is not in kcrash's log in order")
                    }
                }
            }
            assert_eq!(
                log.last().copied(),
                console.last().map(String::as_str),
                "{dump}"
            );
        }
    }
}

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

#[test]
fn log_tail_agrees_with_crash() {
    let Some(dir) = guest("log_vs_crash", &["vmcore.elf", "vmlinux"]) else {
        return;
    };
    if !have_tool("log_vs_crash", "crash") {
        return;
    }
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
    let Some(dir) = guest(
        "sys",
        &["vmcore.elf", "vmcore.kdump", "console.log", "vmlinux"],
    ) else {
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
    }
    if !have_tool("sys_vs_crash", "crash") {
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

/// The `[[boots]]` entry of guest.toml named `vmcoreinfo` (the boot vmcore.elf comes from):
/// `key = "value"` lines, read without a TOML parser.
fn guest_boot(dir: &Path, key: &str) -> String {
    let toml = std::fs::read_to_string(dir.join("guest.toml")).expect("guest.toml");
    let boot = toml
        .split("[[boots]]")
        .find(|b| b.contains("name = \"vmcoreinfo\""))
        .expect("the vmcoreinfo boot");
    boot.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(" = ")?;
            (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| panic!("guest.toml has no {key}"))
}

fn hex(text: &str) -> u64 {
    u64::from_str_radix(text.trim_start_matches("0x"), 16).expect("hex")
}

#[test]
fn mod_lists_the_module_where_the_guest_loaded_it_and_as_crash_does() {
    let Some(dir) = guest(
        "mod",
        &["vmcore.elf", "vmcore.kdump", "vmlinux", "guest.toml"],
    ) else {
        return;
    };
    let base = hex(&guest_boot(&dir, "module_base"));
    let size: u64 = guest_boot(&dir, "module_size").parse().expect("size");
    for dump in dumps(&dir) {
        let text = stdout(&kcrash(&dir, dump, &["mod"]), dump);
        let row = text
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some("klogtest"))
            .unwrap_or_else(|| panic!("{dump}: no klogtest in\n{text}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(hex(cols[2]), base, "{dump}: {row}");
        assert_eq!(cols[3].parse::<u64>().ok(), Some(size), "{dump}: {row}");
        // Out of tree (O) and unsigned (E), as the kernel said when it loaded it.
        assert_eq!(cols[4], "OE", "{dump}: {row}");
    }
    if !have_tool("mod_vs_crash", "crash") {
        return;
    }
    // crash: "MODULE NAME BASE SIZE OBJECT FILE" rows.
    let theirs: Vec<(String, String, String)> = crash(&dir, "vmcore.elf", "mod")
        .lines()
        .filter_map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            (c.len() >= 4 && c[0].len() == 16 && hex(c[0]) != 0)
                .then(|| (c[0].to_owned(), c[1].to_owned(), c[2].to_owned()))
        })
        .collect();
    let ours: Vec<(String, String, String)> = stdout(&kcrash(&dir, "vmcore.elf", &["mod"]), "mod")
        .lines()
        .skip(1)
        .map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            (c[0].to_owned(), c[1].to_owned(), c[2].to_owned())
        })
        .collect();
    let sorted = |mut v: Vec<(String, String, String)>| {
        v.sort();
        v
    };
    assert_eq!(sorted(ours), sorted(theirs));
}

#[test]
fn the_modules_klog_reads_as_the_module_logged_it() {
    let Some(dir) = guest(
        "module_klog",
        &[
            "vmcore.elf",
            "vmcore.kdump",
            "vmlinux",
            "klogtest.ko",
            "expected.json",
            "guest.toml",
        ],
    ) else {
        return;
    };
    let expected: Expected = serde_json::from_str(
        &std::fs::read_to_string(dir.join("expected.json")).expect("expected.json"),
    )
    .expect("expected.json parses");
    let klogs = hex(&guest_boot(&dir, "klogs"));
    for dump in dumps(&dir) {
        // The .ko on the command line, and loaded by `mod -s`.
        for how in ["command line", "mod -s"] {
            // mod -s is the same code on every format: the contract's two dumps suffice.
            if how == "mod -s" && !["vmcore.elf", "vmcore.kdump"].contains(&dump) {
                continue;
            }
            let mut cmd = kcrash_command();
            cmd.current_dir(&dir).arg("-s");
            if how == "mod -s" {
                cmd.args(["-c", "mod -s klogtest klogtest.ko > /dev/null"]);
            }
            cmd.args([
                "-c",
                "sym KLogs",
                "-c",
                "klog 0 full --json",
                dump,
                "vmlinux",
            ]);
            if how == "command line" {
                cmd.arg("klogtest.ko");
            }
            let text = stdout(&cmd.output().expect("kcrash runs"), dump);
            let mut lines = text.lines();
            let sym = lines.next().expect("sym's line");
            assert!(
                sym.starts_with(&format!("{klogs:016x} (D) KLogs")),
                "{dump} ({how}): {sym}"
            );
            check_records(
                &json_records(lines, dump),
                &expected,
                &format!("{dump} ({how})"),
            );
        }
    }
}

#[test]
fn a_modules_variable_prints_as_crash_prints_it() {
    let Some(dir) = guest("module_print", &["vmcore.elf", "vmlinux", "klogtest.ko"]) else {
        return;
    };
    let ours = stdout(
        &kcrash_command()
            .current_dir(&dir)
            .args([
                "-s",
                "-c",
                "p KLogs[2].next_write",
                "-c",
                "p *KLogs[2].name",
            ])
            .args(["vmcore.elf", "vmlinux", "klogtest.ko"])
            .output()
            .expect("kcrash runs"),
        "p",
    );
    let ours: Vec<&str> = ours.lines().collect();
    assert_eq!(ours.len(), 2, "{ours:?}");
    if !have_tool("module_print_vs_crash", "crash") {
        return;
    }
    let theirs = crash(
        &dir,
        "vmcore.elf",
        "mod -s klogtest klogtest.ko\np KLogs[2].next_write\np *KLogs[2].name",
    );
    let values: Vec<&str> = theirs
        .lines()
        .filter_map(|l| l.split_once('$').and_then(|(_, v)| v.split_once(" = ")))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(values, ours, "crash said:\n{theirs}");
}

#[test]
fn log_symbols_and_the_modules_klog_agree_with_drgn() {
    let Some(dir) = guest("vs_drgn", &["vmcore.elf", "vmlinux", "klogtest.ko"]) else {
        return;
    };
    if !have_tool("vs_drgn", "drgn") {
        return;
    }
    let script = r#"
from drgn.helpers.linux.printk import get_dmesg
import sys
for line in get_dmesg(prog).decode(errors="replace").splitlines()[-50:]:
    print(line)
print("init_task %x" % prog.symbol("init_task").address)
print("KLogs %x" % prog["KLogs"].address_)
print("next_write %d" % prog["KLogs"][2].next_write)
print("name %s" % prog["KLogs"][2].name.string_().decode())
"#;
    let out = Command::new("drgn")
        .current_dir(&dir)
        .args([
            "-q",
            "-c",
            "vmcore.elf",
            "-s",
            "vmlinux",
            "-s",
            "klogtest.ko",
            "-e",
            script,
        ])
        .output()
        .expect("drgn runs");
    let theirs = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "drgn: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = stdout(
        &kcrash_command()
            .current_dir(&dir)
            .args([
                "-s",
                "-c",
                "log | tail -50",
                "-c",
                "sym init_task",
                "-c",
                "sym KLogs",
            ])
            .args(["-c", "p KLogs[2].next_write", "-c", "p *KLogs[2].name@2"])
            .args(["vmcore.elf", "vmlinux", "klogtest.ko"])
            .output()
            .expect("kcrash runs"),
        "kcrash",
    );
    let ours: Vec<&str> = ours.lines().collect();
    let theirs: Vec<&str> = theirs.lines().collect();
    assert!(
        ours.len() > 50 && theirs.len() > 50,
        "50 log lines and more"
    );
    // drgn 0.3.0 misreads a record whose text block wrapped around the data ring (it reads the
    // block's last bytes at the ring's end instead of from its start, as the kernel does), so
    // where the two differ kcrash's line must be the console's, byte for byte, and drgn's must
    // show the misread: bytes that are not text.
    let console = std::fs::read_to_string(dir.join("console.log")).expect("console.log");
    let console: HashSet<&str> = console.lines().map(|l| l.trim_end_matches('\r')).collect();
    for (o, t) in ours[..50].iter().zip(&theirs[..50]) {
        if o != t {
            assert!(
                console.contains(o) && t.chars().any(|c| c.is_control() || c == '\u{fffd}'),
                "the log's last 50 lines differ where drgn's line is text:\nkcrash: {o}\ndrgn:   {t}"
            );
        }
    }
    let address = |l: &str| l.split_whitespace().next().map(str::to_owned);
    assert_eq!(
        address(ours[50]),
        theirs[50]
            .split_whitespace()
            .nth(1)
            .map(|a| format!("{:0>16}", a))
    );
    assert_eq!(
        address(ours[51]),
        theirs[51]
            .split_whitespace()
            .nth(1)
            .map(|a| format!("{:0>16}", a))
    );
    assert_eq!(Some(ours[52]), theirs[52].strip_prefix("next_write "));
    let name = theirs[53].strip_prefix("name ").expect("name");
    assert_eq!(ours[53], format!("{:?}", name));
}
