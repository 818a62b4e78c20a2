//! arm64 kernels' dumps (Debian's arm64 kernel under qemu-system-aarch64, dumped by QEMU as ELF
//! and kdump-zlib; $KCRASH_LINUX_ARM64): with no vmlinux, from VMCOREINFO and the kernel's page
//! tables alone, `log` holds every line the serial console printed, `sys` tells the machine, the
//! release and where each CPU stopped, and `klog` finds the KLog module's rings by their
//! descriptor and reads every record as the module logged it; with the debug vmlinux, `mod` lists
//! the modules as the guest's /proc/modules did; what kcrash cannot do on arm64 it says so.

use crate::common;

use common::linux::{
    assert_console_in_log, console_kernel_lines, first_console_line, mod_rows, panicking_cpu,
    proc_modules, split_level,
};
use std::path::Path;
use std::process::Command;

use common::drgn_stack::{contexts, drgn_pt_regs, drgn_walks, frames_of, ours, taking_exception};
use common::objdump::{arm64_words, instruction_line};
use common::{check_records_in, hex, json_lines, json_records, text as stdout_text, Strings};
use kcrash_harness::expected::Expected;
use kcrash_harness::linux::arm64::guest_dumps;
use kcrash_harness::run::stdout;
use kcrash_harness::tools;
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
        // One command's output on this dump, without the vmlinux or with it.
        let run = |command: &str, files: &[&Path]| {
            let out = common::kcrash()
                .session(&[command])
                .arg(dump)
                .args(files)
                .output()
                .unwrap();
            stdout(&out, &name)
        };
        let vmlinux = dir.join("vmlinux");
        let image: &[&Path] = &[&vmlinux];
        let log = run("log", &[]);
        let log: Vec<&str> = log.lines().collect();
        let shown = first_console_line(&name, &log, &console);
        if shown > 0 {
            // Lines the console did not print must be debug messages: their levels are in the
            // vmlinux's DWARF.
            let marked = run("log -m", image);
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

        let sys_json = |files: &[&Path]| -> Value {
            serde_json::from_str(&run("sys --json", files)).expect("sys --json is JSON")
        };
        let sys = sys_json(&[]);
        assert_eq!(sys["machine"], "aarch64", "{name}");
        assert_eq!(sys["release"], release, "{name}");
        let panic = sys["panic"].as_str().expect("a panic fact");
        assert!(panic.contains("sysrq triggered crash"), "{name}: {panic}");
        // Only the vmlinux says which CPU panicked (`panic_cpu`): without it, none is named.
        assert!(!panic.contains("; CPU "), "{name}: {panic}");
        let with_image = sys_json(image);
        let cpu = panicking_cpu(&console);
        assert!(
            with_image["panic"]
                .as_str()
                .is_some_and(|p| p.contains(&format!("; CPU {cpu} stopped at "))),
            "{name}: CPU {cpu}: {}",
            with_image["panic"]
        );
        let stops = sys["stops"].as_array().expect("stops");
        assert_eq!(stops.len() as u64, sys["cpus"].as_u64().unwrap(), "{name}");
        // Numbered as the kernel and bt number CPUs, from 0: not by the notes' pid (QEMU's
        // CPU number plus one, or the task that ran there).
        let ids: Vec<_> = stops.iter().map(|s| s["id"].as_u64()).collect();
        let want: Vec<_> = (0..stops.len() as u64).map(Some).collect();
        assert_eq!(ids, want, "{name}");
        for stop in stops {
            // Kernel addresses: the top bits set (the CPUs were in the kernel at the panic).
            let pc = u64::from_str_radix(stop["pc"].as_str().unwrap().trim_start_matches("0x"), 16);
            assert!(pc.unwrap() >> 48 == 0xffff, "{name}: {stop}");
            assert!(
                stop.get("rip").is_none() && stop.get("cr2").is_none(),
                "{stop}"
            );
        }

        // Without the vmlinux, `bt` says what it needs instead of guessing at frame records.
        let out = common::kcrash()
            .session(&["bt"])
            .arg(dump)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "bt");
        let err = common::text(&out.stderr);
        assert!(
            err.contains("unwinding an aarch64 kernel needs its vmlinux"),
            "bt: {err}"
        );
    }
}

/// `bt` walks arm64 Linux by its call-frame information and frame records: every CPU's stack and
/// every task's (`bt TASK`, from `thread.cpu_context`) are drgn's — pc, function, inlined or not
/// — frame for frame, but where drgn could go no further (from an IRQ stack back to the
/// interrupted task's), where kcrash's frames begin with drgn's. The stack pointers are not
/// compared: where kcrash finds a frame by its record, its stack pointer is the record's. A CPU
/// the dump caught in the exception vectors (QEMU stops a CPU as it takes an interrupt: the stop
/// IPI, or a timer's in the panic's last loop) says so, and from the kernel goes on across the
/// gap by x29's records, where drgn stops.
#[test]
fn every_cpus_and_tasks_stack_is_drgns() {
    let test = "every_cpus_and_tasks_stack_is_drgns";
    let Some((dir, _)) = guest_dumps(test) else {
        return;
    };
    if !tools::runs(test, "drgn") {
        return;
    }
    let dump = "vmcore.elf";
    let drgn = drgn_walks(&dir, dump);
    let cpus = ours(&dir, dump);
    assert_eq!(cpus.len(), 2, "the guest's two CPUs");
    for (cpu, frames, json) in &cpus {
        drgn.assert_same(&format!("cpu {cpu}"), frames);
        assert!(
            frames.len() >= 10 || taking_exception(json),
            "CPU {cpu}: {json:#}"
        );
    }
    // The panic: init (PID 1), from write(2) on /proc/sysrq-trigger, down to the task's last
    // frame record.
    let (_, frames, panicking) = cpus
        .iter()
        .find(|(_, _, c)| c["pid"] == 1)
        .expect("init running on a CPU");
    assert!(
        frames.iter().any(|f| f.function == "sysrq_handle_crash"),
        "{panicking:#}"
    );
    assert_eq!(
        panicking["stop"], "an exception from user space: the kernel's outermost frame",
        "{panicking:#}"
    );
    let tasks = drgn.tasks();
    assert!(tasks.len() > 40, "drgn walked {} tasks", tasks.len());
    let commands: Vec<String> = tasks.iter().map(|t| format!("bt --json {t}")).collect();
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let walked = contexts(&dir, dump, &commands);
    assert_eq!(walked.len(), tasks.len(), "one stack per task");
    for (task, context) in tasks.iter().zip(&walked) {
        drgn.assert_same(&format!("task {task}"), &frames_of(context));
    }
}

/// Exception frames: the panicking CPU entered the kernel from user space (write(2)), the other
/// was stopped by an interrupt (unless the dump caught it still taking it). Each
/// `struct pt_regs` an entry saved is printed with every register as drgn reads the structure
/// by the vmlinux's DWARF; from an interrupt's, the walk
/// goes on into the interrupted code with its exact registers, frame for frame as drgn walks
/// from the same `struct pt_regs` (a prefix where drgn stops); from user space's, the walk
/// ends there.
#[test]
fn exception_frames_are_the_pt_regs_drgn_reads() {
    let test = "exception_frames_are_the_pt_regs_drgn_reads";
    let Some((dir, _)) = guest_dumps(test) else {
        return;
    };
    if !tools::runs(test, "drgn") {
        return;
    }
    let dump = "vmcore.elf";
    // (pt_regs, its frame's index, the context's frames, the context).
    let mut exceptions = Vec::new();
    let mut caught = false;
    for (_, frames, context) in ours(&dir, dump) {
        caught |= taking_exception(&context);
        for (i, frame) in context["frames"]
            .as_array()
            .expect("frames")
            .iter()
            .enumerate()
        {
            if !frame["exception"].is_null() {
                let at = hex(&frame["exception"]["address"]);
                exceptions.push((at, i, frames.clone(), context.clone()));
            }
        }
    }
    let addresses: Vec<u64> = exceptions.iter().map(|e| e.0).collect();
    let (drgn_regs, drgn) = drgn_pt_regs(&dir, dump, &addresses);
    let (mut from_user, mut from_kernel) = (0, 0);
    for (at, i, frames, context) in &exceptions {
        let printed = &context["frames"][*i]["exception"];
        let (_, theirs) = drgn_regs
            .iter()
            .find(|(a, _)| a == at)
            .expect("drgn read every pt_regs");
        for (name, value) in theirs {
            assert_eq!(
                hex(&printed["registers"][name]),
                *value,
                "{at:#x} {name}: kcrash and drgn\n{printed:#}"
            );
        }
        let pstate = hex(&printed["registers"]["PSTATE"]);
        if pstate & 0xf == 0 {
            from_user += 1;
            assert_eq!(i + 1, frames.len(), "user space's entry is the last frame");
            assert_eq!(
                context["stop"],
                "an exception from user space: the kernel's outermost frame"
            );
            continue;
        }
        from_kernel += 1;
        let pc = hex(&printed["registers"]["PC"]);
        assert_eq!(
            frames.get(i + 1).map(|f| f.pc),
            Some(pc),
            "the interrupted pc, exact"
        );
        drgn.assert_same(&format!("{at:#x}"), &frames[i + 1..]);
    }
    assert!(from_user >= 1, "the panicking task's entry from user space");
    // Unless the dump caught the other CPU still taking it.
    assert!(from_kernel >= 1 || caught, "the stopped CPU's interrupt");
}

/// `dis` of the function that panicked the guest, read from the dump where KASLR placed it: the
/// vmlinux's instructions (objdump's reading), but where the kernel patched its own code at boot
/// (ftrace's entry `nop` made `mov x9, x30`), each decoded as binutils' aarch64 objdump decodes
/// the same word.
#[test]
fn dis_reads_arm64_kernel_code_as_objdump_reads_the_image() {
    let test = "dis_reads_arm64_kernel_code_as_objdump_reads_the_image";
    let objdump = "aarch64-linux-gnu-objdump";
    let Some((dir, dumps)) = guest_dumps(test) else {
        return;
    };
    if !tools::available_for(test, &[objdump]) {
        return;
    }
    let function = "sysrq_handle_crash";
    let vmlinux = dir.join("vmlinux");
    let file = objdump_words(Command::new(objdump).args([
        "-d",
        "-w",
        &format!("--disassemble={function}"),
        &vmlinux.display().to_string(),
    ]));
    assert!(file.len() > 4, "{file:?}");
    let scratch = tempfile::tempdir().unwrap();
    for dump in &dumps {
        let name = dump.display().to_string();
        let out = common::kcrash()
            .commands(dump, &vmlinux, &[&format!("dis --json {function}")])
            .stdout;
        let got = json_lines(&stdout_text(&out));
        assert_eq!(got.len(), file.len(), "{name}: {got:?}");
        let start = hex(&got[0]["address"]);
        // KASLR moved the whole image by one offset.
        let offset = start.wrapping_sub(file[0].0);
        let mut memory = Vec::new();
        for (v, (at, word, _)) in got.iter().zip(&file) {
            assert_eq!(hex(&v["address"]).wrapping_sub(offset), *at, "{name}: {v}");
            let bytes: Vec<u8> = (0..8)
                .step_by(2)
                .map(|i| u8::from_str_radix(&v["bytes"].as_str().unwrap()[i..i + 2], 16).unwrap())
                .collect();
            let ours = u32::from_le_bytes(bytes[..].try_into().unwrap());
            let patched = (*word, ours) == (NOP, MOV_X9_X30);
            assert!(
                ours == *word || patched,
                "{name}: {v}: the file has {word:#010x}"
            );
            memory.extend_from_slice(&bytes);
        }
        // The words read from the dump, decoded by objdump where they were.
        let raw = scratch.path().join("code");
        std::fs::write(&raw, &memory).unwrap();
        let decoded = objdump_words(
            Command::new(objdump)
                .args(["-D", "-w", "-b", "binary", "-m", "aarch64"])
                .arg(format!("--adjust-vma={start:#x}"))
                .arg(&raw),
        );
        assert_eq!(decoded.len(), got.len(), "{name}");
        for (v, (_, _, text)) in got.iter().zip(&decoded) {
            let ours = v["text"].as_str().unwrap();
            assert_eq!(arm64_words(ours), arm64_words(text), "{name}: {v} / {text}");
        }
    }
}

/// `hint #0` and the instruction ftrace writes over it at a traced function's entry.
const NOP: u32 = 0xd503201f;
const MOV_X9_X30: u32 = 0xaa1e03e9;

/// objdump's instructions: `ffff800008a1c2b0:\td503233f \tpaciasp` as its address, word and text.
fn objdump_words(command: &mut Command) -> Vec<(u64, u32, String)> {
    tools::output(command)
        .lines()
        .filter_map(|l| {
            let (addr, word, text) = instruction_line(l)?;
            Some((
                addr,
                u32::from_str_radix(word.trim(), 16).ok()?,
                text.to_owned(),
            ))
        })
        .collect()
}

#[test]
fn mod_lists_every_module_as_the_guests_proc_modules_did() {
    let Some((dir, dumps)) = guest_dumps("mod_lists_every_module_as_the_guests_proc_modules_did")
    else {
        return;
    };
    let listed = proc_modules(&dir);
    assert!(
        listed.iter().any(|m| m.0 == "klogtest"),
        "the console lists /proc/modules"
    );
    for dump in &dumps {
        let name = dump.display().to_string();
        assert_eq!(
            mod_rows(&dir, &name),
            listed,
            "{name}: mod and /proc/modules"
        );
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
