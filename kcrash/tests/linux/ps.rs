//! `ps` on the Linux guest's dumps: every row (PID, PPID, CPU, task, state, command and the
//! running mark) as crash(8)'s `ps` prints it, and the whole list as drgn reads it; and a task
//! list broken in the dump ends where it breaks, with the reason. Setup: tests/common/linux.rs.

use std::process::Command;

use crate::common;

use common::edit::replace_all;
use common::linux::{crash, crash_reads, dumps, guest, kcrash, kcrash_on, slab_may_be_excluded};
use kcrash_harness::run::stdout;
use kcrash_harness::{corpus, tools};
use serde_json::Value;

/// The dumps whose rows are compared with crash's: the ELF and two kdumps.
const COMPARED: [&str; 3] = ["vmcore.elf", "vmcore.kdump", "vmcore-l-d31.kdump"];

/// One row of a `ps` table: the running mark, PID, PPID, CPU, task, state, command.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    running: bool,
    pid: String,
    ppid: String,
    cpu: String,
    task: String,
    state: String,
    comm: String,
}

/// The rows of a `ps` table whose columns before the command are `before` words: kcrash's
/// five, crash's eight (its %MEM, VSZ and RSS, which kcrash leaves out).
fn rows(text: &str, before: usize) -> Vec<Row> {
    text.lines()
        .filter_map(|line| {
            let (running, rest) = match line.strip_prefix('>') {
                Some(rest) => (true, rest),
                None => (false, line),
            };
            let words: Vec<&str> = rest.split_whitespace().collect();
            // A task row: a PID then a 16-digit task address; not the header, not a note.
            let is_row =
                words.len() > before && words[0].parse::<i64>().is_ok() && words[3].len() == 16;
            is_row.then(|| {
                let mut rest = rest.trim_start();
                for _ in 0..before {
                    rest = rest.split_once(char::is_whitespace).map_or("", |(_, r)| r);
                    rest = rest.trim_start();
                }
                Row {
                    running,
                    pid: words[0].into(),
                    ppid: words[1].into(),
                    cpu: words[2].into(),
                    task: words[3].into(),
                    state: words[4].into(),
                    comm: rest.into(),
                }
            })
        })
        .collect()
}

fn ours(dir: &std::path::Path, dump: &str) -> Vec<Row> {
    let out = kcrash(dir, dump, &["ps"]);
    let text = stdout(&out, dump);
    rows(&text, 5)
}

#[test]
fn ps_lists_every_task_as_crash_and_drgn_do() {
    let Some(dir) = guest("ps", &["vmcore.elf", "vmcore.kdump", "vmlinux"]) else {
        return;
    };
    let elf = ours(&dir, "vmcore.elf");
    // The guest: init (PID 1) running the panic it triggered, each other CPU idle or running a
    // kernel thread, and the kernel threads kthreadd started.
    assert!(elf.len() > 40, "{elf:#?}");
    let idle = elf.iter().filter(|r| r.pid == "0").count();
    let running: Vec<&Row> = elf.iter().filter(|r| r.running).collect();
    assert_eq!(running.len(), idle, "one running task a CPU: {running:#?}");
    assert!(running.iter().any(|r| r.pid == "1" && r.comm == "init"));
    // Every dump of the guest is of the same moment. One that left slab pages out may cut the
    // list: then it says so, fails, and lists none but the ELF dump's tasks.
    for dump in dumps(&dir) {
        let out = kcrash(&dir, dump, &["ps"]);
        let got = rows(&String::from_utf8_lossy(&out.stdout), 5);
        if out.status.success() {
            assert_eq!(got, elf, "{dump}");
            continue;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(slab_may_be_excluded(&dir, dump), "{dump}: {err}");
        assert_eq!(out.status.code(), Some(1), "{dump}");
        assert!(
            err.contains("the task list may be incomplete"),
            "{dump}: {err}"
        );
        assert!(got.iter().all(|r| elf.contains(r)), "{dump}: {got:#?}");
    }
    if crash_reads("ps_vs_crash", &dir) {
        for dump in COMPARED.into_iter().filter(|d| dir.join(d).exists()) {
            compare_with_crash(&dir, dump, &ours(&dir, dump));
        }
    }
    if tools::runs("ps_vs_drgn", "drgn") {
        assert_eq!(elf, drgn_rows(&dir), "ours, then drgn's");
    }
}

/// crash's rows are ours. crash 8.0.2 reads the PID table of this kernel wrong (its
/// `struct pid` ends in the flexible array `numbers[]`, a 6.5 change Debian's 6.1 has, which
/// crash 8.0.2 reads one `struct upid` short: "active task ... not found in PID hash") and then
/// lists only the CPUs' idle and running tasks: those rows are compared, and every row when a
/// crash reads the whole table.
fn compare_with_crash(dir: &std::path::Path, dump: &str, ours: &[Row]) {
    let text = crash(dir, dump, "ps");
    let theirs = rows(&text, 8);
    assert!(!theirs.is_empty(), "{dump}: crash printed no task:\n{text}");
    if !text.contains("not found in PID hash") {
        assert_eq!(ours, theirs, "{dump}: ours, then crash's");
        return;
    }
    let short: Vec<&Row> = ours.iter().filter(|r| r.running || r.pid == "0").collect();
    let theirs: Vec<&Row> = theirs.iter().collect();
    assert_eq!(short, theirs, "{dump}: ours, then crash's");
}

/// drgn's reading of the same tasks: each CPU's idle task and every task of `for_each_task`,
/// the running ones those of the CPUs' runqueues, its state letters turned into crash's.
fn drgn_rows(dir: &std::path::Path) -> Vec<Row> {
    let script = r#"
from drgn.helpers.linux.pid import for_each_task
from drgn.helpers.linux.sched import task_state_to_char, task_cpu, cpu_curr, idle_task
from drgn.helpers.linux.cpumask import for_each_possible_cpu
cpus = list(for_each_possible_cpu(prog))
running = {cpu_curr(prog, c).value_() for c in cpus}
for t in [idle_task(prog, c) for c in cpus] + list(for_each_task(prog)):
    print(int(t.value_() in running), int(t.pid), int(t.parent.pid), task_cpu(t),
          "%016x" % t.value_(), task_state_to_char(t), int(t.flags & 0x200000 != 0),
          t.comm.string_().decode())
"#;
    let out = Command::new("drgn")
        .current_dir(dir)
        .args(["-q", "-c", "vmcore.elf", "-s", "vmlinux", "-e", script])
        .output()
        .expect("drgn runs");
    assert!(
        out.status.success(),
        "drgn: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let crash_state = |letter: &str| match letter {
        "R" => "RU",
        "S" => "IN",
        "D" => "UN",
        "I" => "ID",
        "T" => "ST",
        "t" => "TR",
        "X" => "DE",
        "Z" => "ZO",
        "P" => "PA",
        other => panic!("drgn's state {other}"),
    };
    let mut rows: Vec<Row> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let w: Vec<&str> = line.splitn(8, ' ').collect();
            Row {
                running: w[0] == "1",
                pid: w[1].into(),
                ppid: w[2].into(),
                cpu: w[3].into(),
                task: w[4].into(),
                state: crash_state(w[5]).into(),
                comm: if w[6] == "1" {
                    format!("[{}]", w[7])
                } else {
                    w[7].into()
                },
            }
        })
        .collect();
    // crash's order: by PID, the idle tasks by CPU.
    rows.sort_by_key(|r| (r.pid.parse::<i64>().unwrap(), r.cpu.parse::<i64>().unwrap()));
    rows
}

/// The ELF dump with its tasks list cut: kthreadd's `next` poisoned as the kernel poisons a
/// deleted entry's, then pointing back at init's, a loop that never comes back to its head.
/// Either way `ps` prints the tasks before the break, the CPUs' idle and running tasks, and the
/// reason, and fails.
#[test]
fn a_broken_task_list_ends_with_its_reason() {
    let dump = "vmcore-E-d31.elf";
    let Some(dir) = guest("ps_broken", &[dump, "vmlinux"]) else {
        return;
    };
    let json = stdout(&kcrash(&dir, dump, &["ps --json"]), dump);
    let json: Value = serde_json::from_str(&json).expect("JSON");
    let task = |pid: i64| {
        let t = json["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["pid"] == pid)
            .unwrap_or_else(|| panic!("no PID {pid}"));
        u64::from_str_radix(t["task"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
    };
    let offset = stdout(
        &kcrash(
            &dir,
            dump,
            &["eval --json &((struct task_struct *)0)->tasks"],
        ),
        "offset",
    );
    let offset: Value = serde_json::from_str(&offset).expect("JSON");
    let link: u64 = offset["decimal"].as_str().unwrap().parse().unwrap();
    // What stays listed: the idle and running tasks, and the list up to kthreadd.
    let kept: Vec<String> = json["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["pid"] == 0 || t["pid"] == 1 || t["pid"] == 2 || t["running"] == true)
        .map(|t| t["pid"].to_string())
        .collect();
    // kthreadd's list node {next, prev}: the task after it, and init.
    let node = |next: u64| [next, task(1) + link].map(u64::to_le_bytes).concat();
    let whole = node(task(3) + link);
    let original = std::fs::read(dir.join(dump)).expect("the dump");
    let scratch = tempfile::tempdir().unwrap();
    for (next, why) in [
        (
            0xdead_0000_0000_0100,
            "whose next pointer 0xdead000000000100 is unreadable",
        ),
        (
            task(1) + link,
            &*format!("loops back to task {:#x} without coming back", task(1)),
        ),
    ] {
        let mut bytes = original.clone();
        assert_eq!(replace_all(&mut bytes, &whole, &node(next)), 1, "{why}");
        std::fs::write(scratch.path().join(dump), &bytes).unwrap();
        let vmlinux = dir.join("vmlinux");
        let files = [dump, vmlinux.to_str().unwrap()];
        let out = kcrash_on(scratch.path(), &files, &["ps"]);
        assert_eq!(out.status.code(), Some(1), "{why}");
        let text = String::from_utf8_lossy(&out.stdout);
        let listed: Vec<String> = rows(&text, 5).into_iter().map(|r| r.pid).collect();
        assert_eq!(listed, kept, "{why}:\n{text}");
        let last = text.lines().last().unwrap();
        assert!(
            last.starts_with("incomplete: init_task.tasks: ") && last.contains(why),
            "{last}"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.trim_end(),
            "kcrash: ps: the task list may be incomplete (marked above)"
        );
    }
}

/// A test kernel's dump, a process core, and a Linux dump without its vmlinux: one line saying
/// what ps needs, and exit status 1.
#[test]
fn ps_without_a_linux_kernel_says_what_it_needs() {
    let guest = kcrash_harness::linux::guest_output().join("vmcore.kdump");
    let mut cases = vec![
        vec![common::kdump(), common::vmlinux()],
        vec![
            corpus::file("hosted/rings/core.gz"),
            corpus::file("hosted/hosted"),
        ],
    ];
    if guest.exists() {
        cases.push(vec![guest]);
    }
    for files in cases {
        let out = common::kcrash()
            .session(&["ps"])
            .args(&files)
            .output()
            .expect("kcrash runs");
        assert_eq!(out.status.code(), Some(1), "{files:?}");
        assert!(out.stdout.is_empty(), "{files:?}");
        let err = common::text(&out.stderr);
        assert_eq!(
            err.lines().last(),
            Some("kcrash: ps: needs a Linux kernel dump (or /proc/kcore) and its vmlinux"),
            "{files:?}: {err}"
        );
    }
}

/// A task's clocks as `ps -t` gives them: start, user and system nanoseconds, run seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Clocks {
    start: u64,
    user: u64,
    system: u64,
}

/// `ps -t`'s blocks, kcrash's or crash's: each task's address, its clocks and RUN TIME in
/// seconds.
fn time_blocks(text: &str) -> Vec<(String, Clocks, u64)> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(task) = line
            .split_once("TASK: ")
            .and_then(|(_, rest)| rest.split_whitespace().next())
        else {
            continue;
        };
        let mut field = |name: &str| -> String {
            let l = lines.next().unwrap_or_default();
            let (key, value) = l.split_once(": ").unwrap_or_else(|| panic!("{l:?}"));
            assert_eq!(key.trim(), name, "{text}");
            value.trim().to_owned()
        };
        let run = field("RUN TIME");
        let seconds = run
            .split(':')
            .fold(0, |s, part| s * 60 + part.parse::<u64>().unwrap());
        let number = |v: String| v.parse::<u64>().unwrap();
        let clocks = Clocks {
            start: number(field("START TIME")),
            user: number(field("UTIME")),
            system: number(field("STIME")),
        };
        blocks.push((task.to_owned(), clocks, seconds));
    }
    blocks
}

/// `ps -t`: every task's start, user and system times are drgn's reading of the same fields,
/// oldest first; where crash lists a task too, its four lines are crash's (RUN TIME within the
/// second crash's rounding of the start to whole seconds can move it).
#[test]
fn ps_t_times_are_crashs_and_drgns() {
    let Some(dir) = guest("ps_times", &["vmcore.elf", "vmlinux"]) else {
        return;
    };
    let text = stdout(&kcrash(&dir, "vmcore.elf", &["ps -t"]), "ps -t");
    let ours = time_blocks(&text);
    assert!(ours.len() > 40, "{text}");
    assert!(
        ours.windows(2).all(|w| w[0].1.start <= w[1].1.start),
        "oldest first:\n{text}"
    );
    // Tasks run no longer than the machine has been up, and init ran before the panic.
    let json = stdout(&kcrash(&dir, "vmcore.elf", &["ps -t --json"]), "json");
    let json: Value = serde_json::from_str(&json).expect("JSON");
    let uptime: u64 = json["uptime"]["nanoseconds"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    for t in json["tasks"].as_array().unwrap() {
        let run: u64 = t["times"]["run"].as_str().unwrap().parse().unwrap();
        let start: u64 = t["times"]["start"].as_str().unwrap().parse().unwrap();
        assert_eq!(run + start, uptime, "{t}");
    }
    if tools::runs("ps_t_vs_drgn", "drgn") {
        let script = r#"
from drgn.helpers.linux.pid import for_each_task
from drgn.helpers.linux.sched import idle_task
from drgn.helpers.linux.cpumask import for_each_possible_cpu
for t in [idle_task(prog, c) for c in for_each_possible_cpu(prog)] + list(for_each_task(prog)):
    print("%x" % t.value_(), int(t.start_time), int(t.utime), int(t.stime))
"#;
        let out = Command::new("drgn")
            .current_dir(&dir)
            .args(["-q", "-c", "vmcore.elf", "-s", "vmlinux", "-e", script])
            .output()
            .expect("drgn runs");
        let drgn = String::from_utf8_lossy(&out.stdout);
        let mut theirs: Vec<(String, Clocks)> = drgn
            .lines()
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                let n = |i: usize| w[i].parse::<u64>().unwrap();
                let clocks = Clocks {
                    start: n(1),
                    user: n(2),
                    system: n(3),
                };
                (w[0].to_owned(), clocks)
            })
            .collect();
        let mut mine: Vec<(String, Clocks)> = ours
            .iter()
            .map(|(t, c, _)| (t.clone(), c.clone()))
            .collect();
        theirs.sort_by(|a, b| a.0.cmp(&b.0));
        mine.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(mine, theirs, "ours, then drgn's");
    }
    if crash_reads("ps_t_vs_crash", &dir) {
        let theirs = time_blocks(&crash(&dir, "vmcore.elf", "ps -t"));
        assert!(!theirs.is_empty(), "crash printed no times");
        for (task, clocks, run) in &theirs {
            let (_, mine, my_run) = ours
                .iter()
                .find(|(t, ..)| t == task)
                .unwrap_or_else(|| panic!("crash lists {task}, kcrash does not"));
            assert_eq!(mine, clocks, "{task}: ours, then crash's");
            assert!(
                my_run.abs_diff(*run) <= 1,
                "{task}: run {my_run} s, crash's {run} s"
            );
        }
    }
}
