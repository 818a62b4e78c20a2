//! `bt` on the Linux guest's dumps (Debian's kernel, ORC tables): every CPU's stack, and every
//! task's (`bt TASK`, from the registers the scheduler saved for a task switched out), against
//! drgn's stack trace of the same task, frame by frame (pc, stack pointer, function, inlined or
//! not), up to the kernel's entry from user space; and against crash(8)'s `bt -a` for the
//! panicking task, whose frames must hold kcrash's in order (crash also lists stale return
//! addresses it finds on the stack) and whose user-space exception frame must be kcrash's,
//! register for register.
//! The klogtest module is loaded in both, so its frames are named. Setup: tests/common/linux.rs.

use crate::common;

use common::drgn_stack::{contexts, drgn_walks, frames_of, ours, Frame};
use common::linux::{crash, guest, guest_crash_reads, kcrash, module_unplaceable};
use kcrash_harness::run::stdout;
use kcrash_harness::tools;

#[test]
fn every_cpus_stack_is_drgns() {
    let test = "every_cpus_stack_is_drgns";
    let dumps = ["vmcore.elf", "vmcore-E-d31.elf"];
    let Some(dir) = guest(
        test,
        &["vmcore.elf", "vmcore-E-d31.elf", "vmlinux", "klogtest.ko"],
    ) else {
        return;
    };
    if !tools::runs(test, "drgn") {
        return;
    }
    for dump in dumps {
        if module_unplaceable(&dir, dump) {
            continue;
        }
        let drgn = drgn_walks(&dir, dump);
        assert!(
            drgn.stopped.is_empty(),
            "{dump}: drgn stopped: {:?}",
            drgn.stopped
        );
        let walk = |key: &str| drgn.walk(key);
        let ours = ours(&dir, dump);
        assert_eq!(ours.len(), 2, "{dump}: the guest's two CPUs");
        for (cpu, frames, json) in &ours {
            let got: Vec<&Frame> = frames.iter().collect();
            let want = walk(&format!("cpu {cpu}"));
            assert_eq!(
                got, want,
                "{dump}, CPU {cpu}: kcrash (left) and drgn (right)\n{json:#}"
            );
            assert!(got.len() >= 10, "{dump}, CPU {cpu}: {got:#?}");
        }
        // Every task by its address: the running ones from their CPU's registers, the others
        // from what the scheduler saved.
        let tasks = drgn.tasks();
        assert!(
            tasks.len() > 40,
            "{dump}: drgn walked {} tasks",
            tasks.len()
        );
        let commands: Vec<String> = tasks.iter().map(|t| format!("bt --json {t}")).collect();
        let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
        let walked = contexts(&dir, dump, &commands);
        assert_eq!(walked.len(), tasks.len(), "{dump}: one stack per task");
        for (task, context) in tasks.iter().zip(&walked) {
            let got = frames_of(context);
            assert_eq!(
                got.iter().collect::<Vec<_>>(),
                walk(&format!("task {task}")),
                "{dump}, task {task}: kcrash (left) and drgn (right)\n{context:#}"
            );
        }
        // The panic: init (PID 1), on whichever CPU, entered from user space by write(2) on
        // /proc/sysrq-trigger.
        let (_, _, panicking) = ours
            .iter()
            .find(|(_, _, c)| c["pid"] == 1)
            .expect("init running on a CPU");
        assert_eq!(
            panicking["stop"], "entered from user space (the exception frame above)",
            "{panicking:#}"
        );
    }
}

/// One CPU of crash's `bt -a`: its frames (`#N [sp] function at pc`) and its lines of registers.
struct CrashCpu {
    cpu: u64,
    frames: Vec<(String, u64)>,
    regs: Vec<String>,
}

fn crash_bt(text: &str) -> Vec<CrashCpu> {
    let mut cpus: Vec<CrashCpu> = Vec::new();
    for line in text.lines() {
        if let Some(at) = line.find("CPU: ") {
            if line.starts_with("PID: ") {
                let cpu = line[at + 5..].split_whitespace().next().expect("a CPU");
                cpus.push(CrashCpu {
                    cpu: cpu.parse().expect("a CPU number"),
                    frames: Vec::new(),
                    regs: Vec::new(),
                });
                continue;
            }
        }
        let Some(CrashCpu { frames, regs, .. }) = cpus.last_mut() else {
            continue;
        };
        let t = line.trim_start();
        if t.starts_with('#') {
            // #13 [ffffd25800013f50] entry_SYSCALL_64_after_hwframe at ffffffff99400126
            let words: Vec<&str> = t.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "at").expect("at");
            let pc = u64::from_str_radix(words[at + 1], 16).expect("a pc");
            frames.push((words[at - 1].to_owned(), pc));
        } else if t.starts_with("RIP:") || t.starts_with("RAX:") || t.starts_with("ORIG_RAX") {
            regs.push(t.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    cpus
}

#[test]
fn the_panicking_stack_is_among_crashs_frames_and_its_user_registers_are_crashs() {
    let test = "the_panicking_stack_is_among_crashs_frames_and_its_user_registers_are_crashs";
    let dump = "vmcore.kdump";
    let Some(dir) = guest_crash_reads(test, &[dump, "vmlinux"]) else {
        return;
    };
    let theirs = crash_bt(&crash(&dir, dump, "bt -a"));
    let text = stdout(&kcrash(&dir, dump, &["bt -a"]), dump);
    // The panicking task's CPU: init's (PID 1). On the others crash reads return addresses it
    // finds on the stack and exception frames it guesses ("possibly bogus exception frame"),
    // which hold no order to compare with.
    let (cpu, frames, _) = ours(&dir, dump)
        .into_iter()
        .find(|(_, _, c)| c["pid"] == 1)
        .expect("init running on a CPU");
    {
        let CrashCpu {
            frames: crash_frames,
            regs: crash_regs,
            ..
        } = theirs
            .iter()
            .find(|c| c.cpu == cpu)
            .unwrap_or_else(|| panic!("crash shows no CPU {cpu}"));
        // Physical frames (crash shows no inlined ones) past the first, whose pc crash takes
        // from the exception frame it finds instead; an interrupt's entry stub (`asm_…`) crash
        // shows as the exception frame it pushed.
        let mut rest = crash_frames.iter();
        let physical = frames.iter().filter(|f| !f.inlined).skip(1);
        for f in physical.filter(|f| !f.function.starts_with("asm_")) {
            assert!(
                rest.any(|(_, pc)| *pc == f.pc),
                "CPU {cpu}: {f:?} is not among crash's frames, in order: {crash_frames:#?}"
            );
        }
        {
            // The user-space registers of the write(2) that panicked: crash's last block.
            let ours: Vec<String> = text
                .lines()
                .map(str::trim_start)
                .filter(|t| {
                    t.starts_with("RIP:") || t.starts_with("RAX:") || t.starts_with("ORIG_RAX")
                })
                .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
                .filter(|t| crash_regs.contains(t))
                .collect();
            assert_eq!(
                ours.len(),
                3,
                "CPU {cpu}'s user registers:\n{text}\ncrash: {crash_regs:#?}"
            );
        }
    }
}

/// `set PID` and `task TASK` choose what a bare `bt` shows; `set radix 16` makes `p` print hex.
#[test]
fn set_and_task_choose_the_stack_bt_shows() {
    let test = "set_and_task_choose_the_stack_bt_shows";
    let dump = "vmcore.elf";
    let Some(dir) = guest(test, &[dump, "vmlinux"]) else {
        return;
    };
    let run = |commands: &[&str]| stdout(&kcrash(&dir, dump, commands), dump);
    let kthreadd = run(&["bt 2"]);
    let header = kthreadd.lines().next().expect("a header").to_owned();
    assert!(header.starts_with("PID: 2  TASK: "), "{kthreadd}");
    assert_eq!(run(&["set 2", "bt"]), format!("{header}\n{kthreadd}"));
    let task = header.split_whitespace().nth(3).expect("the task address");
    let shown = run(&[&format!("task {task}"), "bt"]);
    assert!(shown.starts_with(&format!("{header}\n{{\n")), "{shown}");
    assert!(shown.ends_with(&kthreadd), "{shown}");
    // The crashed CPU's stack without a context.
    assert!(run(&["bt"]).starts_with("PID: 1  TASK: "));

    let values = run(&[
        "p jiffies_64",
        "set radix 16",
        "p jiffies_64",
        "p/d jiffies_64",
    ]);
    let values: Vec<&str> = values.lines().collect();
    let decimal: u64 = values[0].parse().expect("jiffies in decimal");
    assert_eq!(values[1], format!("{decimal:#x}"));
    assert_eq!(values[2], values[0]);
}
