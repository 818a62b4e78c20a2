//! kcrash and drgn on the Linux guest's ELF dump: the log, symbols and the module's KLog agree. Setup: tests/common/linux.rs.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

use crate::common;

use common::linux::{guest, kcrash_on};
use kcrash_harness::run::stdout;
use kcrash_harness::tools;

#[test]
fn log_symbols_and_the_modules_klog_agree_with_drgn() {
    let Some(dir) = guest("vs_drgn", &["vmcore.elf", "vmlinux", "klogtest.ko"]) else {
        return;
    };
    if tools::runs("vs_drgn", "drgn") {
        agree_with_drgn(&dir);
    }
}

/// The same on the arm64 guest's dump, which drgn reads on this x86_64 host too.
#[test]
fn arm64_log_symbols_tasks_and_the_modules_klog_agree_with_drgn() {
    let test = "arm64_vs_drgn";
    let Some((dir, _)) = kcrash_harness::linux::arm64::finished(test) else {
        return;
    };
    if tools::runs(test, "drgn") {
        agree_with_drgn(&dir);
    }
}

/// kcrash and drgn on `dir`'s vmcore.elf, vmlinux and klogtest.ko: the log's last 50 lines, two
/// symbols, a KLog field and its name, the task list (drgn's `for_each_task`, which leaves
/// out the idle tasks `ps` lists, one per CPU), and every CPU's copy of a per-CPU variable.
fn agree_with_drgn(dir: &Path) {
    let script = r#"
from drgn.helpers.linux.printk import get_dmesg
import sys
for line in get_dmesg(prog).decode(errors="replace").splitlines()[-50:]:
    print(line)
print("init_task %x" % prog.symbol("init_task").address)
print("KLogs %x" % prog["KLogs"].address_)
print("next_write %d" % prog["KLogs"][2].next_write)
print("name %s" % prog["KLogs"][2].name.string_().decode())
from drgn.helpers.linux.pid import for_each_task
for t in for_each_task(prog):
    print("task %d %s" % (t.pid, t.comm.string_().decode()))
from drgn.helpers.linux.cpumask import for_each_possible_cpu
from drgn.helpers.linux.percpu import per_cpu
for cpu in for_each_possible_cpu(prog):
    rq = per_cpu(prog["runqueues"], cpu)
    print("per_cpu %d %x %d" % (cpu, rq.address_, rq.cpu.value_()))
"#;
    let out = Command::new("drgn")
        .current_dir(dir)
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
        &kcrash_on(
            dir,
            &["vmcore.elf", "vmlinux", "klogtest.ko"],
            &[
                "log | tail -50",
                "sym init_task",
                "sym KLogs",
                "p KLogs[2].next_write",
                "p *KLogs[2].name@2",
            ],
        ),
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
    let mut drgn_tasks: Vec<(u64, String)> = theirs[54..]
        .iter()
        .filter_map(|l| {
            let (pid, comm) = l.strip_prefix("task ")?.split_once(' ')?;
            Some((pid.parse().ok()?, comm.to_owned()))
        })
        .collect();
    let ps = stdout(
        &kcrash_on(
            dir,
            &["vmcore.elf", "vmlinux", "klogtest.ko"],
            &["ps --json"],
        ),
        "kcrash ps",
    );
    let ps: serde_json::Value = serde_json::from_str(&ps).expect("ps --json");
    let mut kcrash_tasks: Vec<(u64, String)> = ps["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter(|t| {
            !t["comm"]
                .as_str()
                .is_some_and(|c| c.starts_with("swapper/"))
        })
        .map(|t| {
            (
                t["pid"].as_u64().unwrap(),
                t["comm"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    drgn_tasks.sort();
    kcrash_tasks.sort();
    assert!(drgn_tasks.len() > 20, "drgn listed {drgn_tasks:?}");
    assert_eq!(kcrash_tasks, drgn_tasks, "the task list");
    per_cpu_agrees(dir, &theirs);
}

/// Each CPU's copy of `runqueues` where drgn's `per_cpu` finds it, holding the CPU's own number
/// in its `cpu`, from `p --json runqueues` and `p --json runqueues:a`; and `sym` of an address
/// in each copy names the variable and that CPU.
fn per_cpu_agrees(dir: &Path, drgn: &[&str]) {
    let drgn: Vec<(u64, String, u64)> = drgn
        .iter()
        .filter_map(|l| {
            let mut words = l.strip_prefix("per_cpu ")?.split(' ');
            let cpu = words.next()?.parse().ok()?;
            let address = format!("0x{}", words.next()?);
            Some((cpu, address, words.next()?.parse().ok()?))
        })
        .collect();
    assert!(drgn.len() >= 2, "drgn's per-CPU lines: {drgn:?}");
    let ours = stdout(
        &kcrash_on(
            dir,
            &["vmcore.elf", "vmlinux", "klogtest.ko"],
            &["p --json runqueues", "p --json runqueues:a"],
        ),
        "kcrash p",
    );
    let ours: Vec<serde_json::Value> = ours
        .lines()
        .map(|l| serde_json::from_str(l).expect("p --json"))
        .collect();
    let addresses = ours[0]["per_cpu"].as_array().expect("per_cpu");
    assert_eq!(addresses.len(), drgn.len(), "{}", ours[0]);
    assert_eq!(ours.len(), 1 + drgn.len(), "one value a CPU");
    for ((cpu, address, number), (ours_at, copy)) in
        drgn.iter().zip(addresses.iter().zip(&ours[1..]))
    {
        assert_eq!(ours_at["cpu"], *cpu, "{ours_at}");
        assert_eq!(ours_at["address"], *address, "runqueues of CPU {cpu}");
        assert_eq!(
            (&copy["cpu"], &copy["address"]),
            (&ours_at["cpu"], &ours_at["address"])
        );
        let field = copy["fields"]
            .as_array()
            .and_then(|f| f.iter().find(|f| f["name"] == "cpu"))
            .expect("struct rq's cpu");
        assert_eq!((&field["value"], number), (&serde_json::json!(cpu), cpu));
    }
    let asked: Vec<String> = drgn
        .iter()
        .map(|(_, address, _)| {
            let at = u64::from_str_radix(address.trim_start_matches("0x"), 16).expect("hex");
            format!("sym --json {:#x}", at + 8)
        })
        .collect();
    let asked: Vec<&str> = asked.iter().map(String::as_str).collect();
    let named = stdout(
        &kcrash_on(dir, &["vmcore.elf", "vmlinux", "klogtest.ko"], &asked),
        "kcrash sym",
    );
    assert_eq!(
        named.lines().count(),
        drgn.len(),
        "one sym line a copy: {named}"
    );
    for ((cpu, _, _), line) in drgn.iter().zip(named.lines()) {
        let sym: serde_json::Value = serde_json::from_str(line).expect("sym --json");
        assert_eq!(
            (&sym["name"], &sym["offset"], &sym["cpus"]),
            (&"runqueues".into(), &8.into(), &serde_json::json!([cpu])),
            "{line}"
        );
    }
}
