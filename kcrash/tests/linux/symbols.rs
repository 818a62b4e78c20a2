//! Symbols and variables of the Linux guest's kernel at their KASLR addresses, and a `p` of a
//! kernel variable as crash(8) prints it. Setup: tests/common/linux.rs.

use crate::common;

use common::edit::{drop_page, physical_offset, replace_all};
use common::linux::{
    console_kaslr, crash, edited_dump, guest, guest_crash_reads, kcrash, DUMPS_AND_CONSOLE,
};
use kcrash_harness::run::stdout;

#[test]
fn symbols_and_variables_sit_at_their_kaslr_addresses() {
    let Some(dir) = guest("symbols_kaslr", &DUMPS_AND_CONSOLE) else {
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
    let Some(dir) = guest_crash_reads("print_vs_crash", &["vmcore.elf", "vmlinux"]) else {
        return;
    };
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

/// A per-CPU variable as crash prints it: `p NAME` its type and each CPU's address, `p NAME:a`
/// each CPU's copy, and its symbol at the offset KASLR leaves as linked.
#[test]
fn per_cpu_variables_print_as_crash_prints_them() {
    let Some(dir) = guest_crash_reads("per_cpu_vs_crash", &["vmcore.elf", "vmlinux"]) else {
        return;
    };
    let theirs = crash(
        &dir,
        "vmcore.elf",
        "p irq_stat\np irq_stat:a\nsym runqueues",
    );
    let ours = stdout(
        &kcrash(
            &dir,
            "vmcore.elf",
            &[
                "p irq_stat",
                "p --pretty irq_stat:a",
                "sym runqueues+8",
                "sym runqueues",
            ],
        ),
        "kcrash",
    );
    // crash numbers each value (`per_cpu(irq_stat, 0) = $1 = {`); kcrash, like gdb's scripts,
    // does not. Its warnings about the dump are not output.
    let theirs: Vec<String> = theirs
        .lines()
        .filter(|l| !l.starts_with("WARNING") && !l.trim().is_empty())
        .map(|l| match l.split_once(" = $") {
            Some((head, rest)) => {
                format!("{head} = {}", rest.split_once(" = ").map_or("", |r| r.1))
            }
            None => l.to_owned(),
        })
        .collect();
    let ours: Vec<&str> = ours.lines().collect();
    assert!(ours.len() > 8, "{ours:?}");
    let (sym, values) = ours.split_last().expect("lines");
    let (inside, values) = values.split_last().expect("lines");
    assert_eq!(
        theirs[..theirs.len() - 1],
        *values,
        "crash said:\n{}",
        theirs.join("\n")
    );
    // crash: `31c40 (D) runqueues`, kcrash the same address zero-padded.
    let address = |l: &str| {
        l.split_whitespace()
            .next()
            .map(|a| u64::from_str_radix(a, 16))
    };
    assert_eq!(
        address(sym).and_then(Result::ok),
        theirs.last().and_then(|l| address(l)).and_then(Result::ok),
        "crash said:\n{}",
        theirs.join("\n")
    );
    // A name and an offset: in the variable, though no run-time address is.
    let at = address(sym).and_then(Result::ok).unwrap_or_default() + 8;
    assert!(
        inside.starts_with(&format!("{at:016x} (D) runqueues+0x8 ")),
        "{inside}"
    );
    // An address in a CPU's copy is named by the variable and the CPU, at each address crash
    // gives for a copy (`[1]: ffff89029f331400`).
    let copies: Vec<u64> = theirs
        .iter()
        .filter_map(|l| l.trim().strip_prefix('[')?.split_once("]: "))
        .map(|(_, a)| u64::from_str_radix(a, 16).expect("crash's address"))
        .collect();
    assert!(copies.len() > 1, "crash said:\n{}", theirs.join("\n"));
    let mut asked: Vec<String> = copies.iter().map(|a| format!("sym {:#x}", a + 4)).collect();
    asked.push(format!("sym --json {:#x}", copies[1] + 4));
    let asked: Vec<&str> = asked.iter().map(String::as_str).collect();
    let named = stdout(&kcrash(&dir, "vmcore.elf", &asked), "sym of copies");
    let named: Vec<&str> = named.lines().collect();
    assert_eq!(named.len(), copies.len() + 1, "{named:?}");
    for (cpu, copy) in copies.iter().enumerate() {
        let line = named[cpu];
        assert!(
            line.starts_with(&format!("{:016x} (D) irq_stat+0x4 ", copy + 4))
                && line.ends_with(&format!("  CPU {cpu}'s copy")),
            "{line}"
        );
    }
    let json: serde_json::Value = serde_json::from_str(named[copies.len()]).expect("JSON");
    assert_eq!(json["cpus"], serde_json::json!([1]));
    assert_eq!(json["address"], format!("{:#x}", copies[1] + 4));
    assert_eq!(json["offset"], 4);
}

/// `struct TYPE NAME:CPUS` shows each CPU's copy as crash does: the whole object, or members
/// alone, each after its `[CPU]: ADDRESS`.
#[test]
fn per_cpu_structs_print_as_crash_prints_them() {
    let Some(dir) = guest_crash_reads("per_cpu_struct_vs_crash", &["vmcore.elf", "vmlinux"]) else {
        return;
    };
    for command in [
        "struct irq_cpustat_t irq_stat:a",
        "struct irq_cpustat_t.__softirq_pending,apic_timer_irqs irq_stat:a",
        "struct rq.cpu,nr_running runqueues:1",
    ] {
        let theirs: Vec<String> = crash(&dir, "vmcore.elf", command)
            .lines()
            .filter(|l| !l.starts_with("WARNING") && !l.trim().is_empty())
            .map(str::to_owned)
            .collect();
        let ours = stdout(&kcrash(&dir, "vmcore.elf", &[command]), command);
        assert!(theirs.len() > 2, "{command}: crash said {theirs:?}");
        assert_eq!(ours.lines().collect::<Vec<_>>(), theirs, "{command}");
    }
}

/// CPU 1's copy of a per-CPU variable cut out of makedumpfile's ELF dump: `p NAME:a` and
/// `struct TYPE NAME:a` print CPU 0's copy as the whole dump does and mark CPU 1's with the
/// reason, in text and JSON, and end with one line that says a copy could not be read.
#[test]
fn a_cpus_copy_the_dump_lacks_is_marked_and_the_others_print() {
    let dump = "vmcore-E-d31.elf";
    let Some(dir) = guest("per_cpu_unreadable_copy", &[dump, "vmlinux"]) else {
        return;
    };
    let hex = |text: &str| u64::from_str_radix(text.trim().trim_start_matches("0x"), 16);
    let whole = |command: &str| stdout(&kcrash(&dir, dump, &[command]), command);
    let copies: Vec<u64> = whole("p irq_stat")
        .lines()
        .filter_map(|l| l.trim().strip_prefix('[')?.split_once("]: "))
        .map(|(_, a)| hex(a).expect("an address"))
        .collect();
    assert_eq!(copies.len(), 2, "the guest has two CPUs");
    let direct_map = hex(&whole("p/x page_offset_base")).expect("page_offset_base");
    let mut bytes = std::fs::read(dir.join(dump)).expect("the dump");
    let at = physical_offset(&bytes, copies[1] - direct_map);
    drop_page(&mut bytes, at);
    let cut = edited_dump(&dir, dump, &bytes);
    let failed = "1 of 2 CPUs' copies of irq_stat could not be read (marked above)";
    for (command, name, cpu1) in [
        ("p irq_stat:a", "print", "per_cpu(irq_stat, 1) = <"),
        ("struct irq_cpustat_t irq_stat:a", "struct", "  <"),
    ] {
        let full = whole(command);
        let out = kcrash(cut.path(), dump, &[command]);
        let (text, err) = (common::text(&out.stdout), common::text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{command}: {err}");
        assert_eq!(err.trim(), format!("kcrash: {name}: {failed}"), "{command}");
        // CPU 0's copy as the whole dump prints it, then CPU 1's marked.
        let split = |t: &str| {
            let at = t
                .find(&format!("[1]: {:x}", copies[1]))
                .or_else(|| t.find("per_cpu(irq_stat, 1)"))
                .expect("CPU 1's copy");
            (t[..at].to_owned(), t[at..].to_owned())
        };
        let (theirs0, _) = split(&full);
        let (ours0, ours1) = split(&text);
        assert_eq!(ours0, theirs0, "{command}: CPU 0");
        let marked = ours1
            .lines()
            .find(|l| l.starts_with(cpu1))
            .expect("CPU 1 marked");
        // The reason names the copy and the physical page the dump lacks.
        let physical = format!("physical address {:#x}", copies[1] - direct_map);
        assert!(
            marked.contains(&format!("{:#x}", copies[1])) && marked.contains(&physical),
            "{command}: {marked}"
        );
        let json = kcrash(cut.path(), dump, &[&command.replacen(' ', " --json ", 1)]);
        let lines = common::json_lines(&common::text(&json.stdout));
        assert_eq!(json.status.code(), Some(1), "{command} --json");
        assert_eq!(
            (lines[0]["cpu"].clone(), lines[1]["cpu"].clone()),
            (0.into(), 1.into())
        );
        assert!(lines[0].get("error").is_none(), "{command}: {}", lines[0]);
        assert_eq!(
            lines[1]["address"],
            format!("{:#x}", copies[1]),
            "{command}"
        );
        assert!(lines[1]["error"].is_string(), "{command}: {}", lines[1]);
    }
}

/// `sym` names every CPU whose area puts a per-CPU variable at the address: with CPU 1's entry
/// of `__per_cpu_offset` made CPU 0's (as before the areas are set up), an address in CPU 0's
/// copy is both CPUs'. A bare offset names no variable: it is no address.
#[test]
fn sym_names_every_cpu_whose_area_holds_the_address() {
    let dump = "vmcore-E-d31.elf";
    let Some(dir) = guest("per_cpu_areas_coincide", &[dump, "vmlinux"]) else {
        return;
    };
    let whole = |command: &str| stdout(&kcrash(&dir, dump, &[command]), command);
    let table = whole("p/x __per_cpu_offset");
    let offsets: Vec<u64> = table
        .trim_matches(|c: char| c == '{' || c == '}' || c.is_whitespace())
        .split(", ")
        .take(2)
        .map(|o| u64::from_str_radix(o.trim_start_matches("0x"), 16).expect("an offset"))
        .collect();
    let irq_stat = stdout(&kcrash(&dir, dump, &["sym irq_stat"]), "sym irq_stat");
    let at = u64::from_str_radix(irq_stat.split(' ').next().unwrap(), 16).unwrap() + 4;
    let raw = |words: &[u64]| -> Vec<u8> { words.iter().flat_map(|w| w.to_le_bytes()).collect() };
    let mut bytes = std::fs::read(dir.join(dump)).expect("the dump");
    let (two, one) = (raw(&offsets), raw(&[offsets[0], offsets[0]]));
    assert_eq!(
        replace_all(&mut bytes, &two, &one),
        1,
        "__per_cpu_offset[0..2]"
    );
    let edited = edited_dump(&dir, dump, &bytes);
    let ask = format!("sym {:#x}", offsets[0] + at);
    let text = stdout(&kcrash(edited.path(), dump, &[&ask]), &ask);
    let text = text.trim_end();
    assert!(
        text.starts_with(&format!("{:016x} (D) irq_stat+0x4 ", offsets[0] + at))
            && text.ends_with("  the copy of CPUs 0,1, whose areas coincide"),
        "{text}"
    );
    let json = stdout(
        &kcrash(edited.path(), dump, &[&ask.replacen(' ', " --json ", 1)]),
        &ask,
    );
    let json: serde_json::Value = serde_json::from_str(&json).expect("sym --json");
    assert_eq!(json["cpus"], serde_json::json!([0, 1]), "{json}");
    // The offset alone: no address, so no variable's.
    let bare = kcrash(&dir, dump, &[&format!("sym {at:#x}")]);
    assert_eq!(bare.status.code(), Some(1));
    assert!(
        common::text(&bare.stderr).contains("in no symbol, nor in a per-CPU variable"),
        "{}",
        common::text(&bare.stderr)
    );
}
