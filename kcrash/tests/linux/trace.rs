//! `trace` on the Linux guest's dumps (Setup: tests/common/linux.rs). The guest traced the
//! scheduler and interrupts into its top rings and the scheduler on CPU 0 into an instance
//! whose one-page ring wrapped, stopped tracing once klogtest (whose workers trace_printk) had
//! loaded, and printed both trace files on its console: the oracle. kcrash must show exactly
//! those events, by the kernel's own formats; trace-cmd must read kcrash's trace.dat and print
//! what kcrash prints; every dump format must show them or mark what it could not read (and a
//! page made unreadable is marked, never filled in); the options select what they say; and
//! on the timeline each trace_printk sits between the KLog events its worker logged around it.

use std::path::Path;
use std::process::Command;

use crate::common;

use common::edit::replace_all;
use common::linux::{guest, kcrash_on, module_unplaceable};
use kcrash_harness::run::stdout;
use kcrash_harness::tools;

const FILES: [&str; 3] = ["vmcore.elf", "vmlinux", "klogtest.ko"];

/// One event as both the kernel's trace file and kcrash's `trace -l` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    comm: String,
    pid: String,
    cpu: u32,
    flags: String,
    micros: String,
    /// `name: message`, or for trace_printk's records the message alone, as the kernel prints
    /// them.
    text: String,
}

/// `trace-cmd report -N FLAGS -i DAT`'s event lines (its `cpus=` header left out).
fn trace_cmd_report(dat: &Path, flags: &[&str]) -> String {
    let report = Command::new("trace-cmd")
        .args(["report", "-N"])
        .args(flags)
        .arg("-i")
        .arg(dat)
        .output()
        .expect("trace-cmd runs");
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    String::from_utf8_lossy(&report.stdout)
        .lines()
        .skip_while(|l| l.starts_with("cpus="))
        .flat_map(|l| [l, "\n"])
        .collect()
}

/// The trace file the guest printed with `prefix` on its console: every event line.
fn oracle(dir: &Path, prefix: &str) -> Vec<Line> {
    let console = std::fs::read_to_string(dir.join("console.log")).expect("console.log");
    console
        .lines()
        .filter_map(|l| l.trim_end_matches('\r').strip_prefix(prefix))
        // Comments, blank lines, and the `CPU:N [LOST M EVENTS]` notes of a ring read while it
        // wrapped.
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("CPU:"))
        .map(|l| {
            // `          <idle>-0       [000] .Ns1.     7.230613: softirq_exit: vec=9 ...`
            let (head, text) = l.split_once(": ").expect("an event line");
            let (task, rest) = head.split_once(" [").expect("[cpu]");
            let (comm, pid) = task.trim().rsplit_once('-').expect("comm-pid");
            let words: Vec<&str> = rest.split_whitespace().collect();
            Line {
                comm: comm.into(),
                pid: pid.into(),
                cpu: words[0].trim_end_matches(']').parse().unwrap(),
                // Before the migrate-disable column (Linux 5.10 prints four), trace-cmd's
                // layout still has it: `.`, no count.
                flags: format!("{:.<5}", words[1]),
                micros: words[2].into(),
                text: text.into(),
            }
        })
        .collect()
}

/// kcrash's `trace` of `instance` on `dump`, in the same terms: the text of `trace` (names and
/// messages) joined with the flags of `trace -l`.
fn ours(dir: &Path, dump: &str, instance: Option<&str>) -> Vec<Line> {
    let files = [dump, FILES[1], FILES[2]];
    let with = |extra: &str| {
        let cmd = match instance {
            Some(i) => format!("trace --instance {i} {extra}"),
            None => format!("trace {extra}"),
        };
        stdout(&kcrash_on(dir, &files, &[&cmd]), &cmd)
    };
    let plain = with("");
    let latency = with("-l");
    plain
        .lines()
        .zip(latency.lines())
        .map(|(p, l)| {
            // `      klogtest/1-96    [001]     7.607903: bprint:               worker: ...`
            let (task, rest) = p.split_once(" [").unwrap();
            let (comm, pid) = task.trim().rsplit_once('-').unwrap();
            let (cpu, rest) = rest.split_once("] ").unwrap();
            let (micros, rest) = rest.trim_start().split_once(": ").unwrap();
            let (name, message) = rest.split_once(':').unwrap();
            let message = message.trim_start();
            let text = match name {
                "bprint" | "bputs" => message.to_owned(),
                _ => format!("{name}: {message}"),
            };
            let flags = l.split_whitespace().nth(1).unwrap();
            Line {
                comm: comm.into(),
                pid: pid.into(),
                cpu: cpu.parse().unwrap(),
                flags: flags[flags.len() - 5..].into(),
                micros: micros.into(),
                text,
            }
        })
        .collect()
}

#[test]
fn trace_shows_every_event_the_kernel_traced() {
    let Some(dir) = guest("trace", &FILES) else {
        return;
    };
    let want = oracle(&dir, "KCRASH-TRACE ");
    assert!(
        want.len() > 300,
        "{} events in the guest's trace file",
        want.len()
    );
    let printk = want
        .iter()
        .filter(|l| l.text.contains("klogtest cpu"))
        .count();
    assert!(printk >= 10, "{printk} trace_printk records");
    assert_eq!(ours(&dir, "vmcore.elf", None), want, "the top trace array");

    // The instance: CPU 0's one-page ring, wrapped, and CPU 1's, empty.
    let want = oracle(&dir, "KCRASH-TRACE-kcrash ");
    assert!(!want.is_empty());
    assert_eq!(
        ours(&dir, "vmcore.elf", Some("kcrash")),
        want,
        "the instance"
    );
    let summary = stdout(&kcrash_on(&dir, &FILES, &["trace -s --json"]), "trace -s");
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    let ring = |name: &str| {
        summary["rings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no ring {name}: {summary}"))
            .clone()
    };
    assert_eq!(ring("kcrash/cpu1")["written"]["known"], "0", "{summary}");
    let overwritten: u64 = ring("kcrash/cpu0")["overwritten"]["known"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(overwritten > 0, "the instance's ring wrapped: {summary}");
}

/// trace-cmd (Debian's) reads kcrash's trace.dat of each trace array and prints, with print
/// formats and no plugins, exactly what kcrash prints: by default, and to the nanosecond with
/// the latency flags.
#[test]
fn trace_cmd_reads_the_trace_dat_as_kcrash_prints_it() {
    let Some(dir) = guest("trace_dat", &FILES) else {
        return;
    };
    if !tools::available_for(
        "trace_cmd_reads_the_trace_dat_as_kcrash_prints_it",
        &["trace-cmd"],
    ) {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    for instance in ["", "kcrash"] {
        let dat = scratch.path().join(format!("t{instance}.dat"));
        let select = if instance.is_empty() {
            String::new()
        } else {
            format!(" --instance {instance}")
        };
        let cmd = format!("trace{select} --dat {}", dat.display());
        let said = stdout(&kcrash_on(&dir, &FILES, &[&cmd]), &cmd);
        assert!(said.contains("trace.dat (version 6)"), "{said}");
        for flags in [&[][..], &["-l", "-t"]] {
            let theirs = trace_cmd_report(&dat, flags);
            let theirs: Vec<&str> = theirs.lines().collect();
            let cmd = format!("trace{select} {}", flags.join(" "));
            let mine = stdout(&kcrash_on(&dir, &FILES, &[&cmd]), &cmd);
            let mine: Vec<String> = if flags.is_empty() {
                mine.lines().map(str::to_owned).collect()
            } else {
                mine.lines().map(as_libtraceevent_letters).collect()
            };
            assert!(!mine.is_empty());
            assert_eq!(
                mine, theirs,
                "{cmd}: kcrash, then trace-cmd report -N {flags:?}"
            );
        }
    }
}

/// `line` of `trace -l` with its flags in libtraceevent's letters, which fold the kernel's:
/// need-resched is `N` whether or not the preempt count's bit is set too (the kernel's `n`,
/// `N`), the preempt bit alone and bottom halves off are not shown (`p`, `b`), and an NMI is
/// not told from a hard interrupt (`Z`).
fn as_libtraceevent_letters(line: &str) -> String {
    // `  <idle>-0       1.ns..     3.680511404: softirq_entry: ...`: the flags end the word
    // before the time.
    let head = &line[..line.find(": ").expect("a -l line has its time")];
    let before = head[..head.rfind(' ').expect("a -l line has its flags")].trim_end();
    let at = before
        .char_indices()
        .rev()
        .nth(4)
        .map(|(i, _)| i)
        .expect("a -l line's flags are five letters");
    let mut flags: Vec<char> = before[at..].chars().collect();
    flags[0] = match flags[0] {
        'D' => 'd',
        'b' => '.',
        c => c,
    };
    flags[1] = match flags[1] {
        'n' | 'N' | 'B' | 'b' => 'N',
        'p' | 'l' | 'L' => '.',
        c => c,
    };
    flags[2] = match flags[2] {
        'Z' => 'h',
        'z' => '.',
        c => c,
    };
    let flags: String = flags.into_iter().collect();
    format!("{}{flags}{}", &line[..at], &line[before.len()..])
}

/// Every dump the guest left shows the same events (and flags, with `-l`) as the ELF dump, or
/// fewer with each page it lacks marked where its events would be, and exit status 1: a page
/// a dump does not hold is never filled in.
#[test]
fn every_dump_format_shows_the_events_or_marks_what_is_missing() {
    let Some(dir) = guest("trace_formats", &FILES) else {
        return;
    };
    let text = |dump: &str| {
        let out = kcrash_on(&dir, &[dump, FILES[1], FILES[2]], &["trace -l"]);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (status, elf) = text("vmcore.elf");
    assert_eq!(status, Some(0));
    let elf: Vec<&str> = elf.lines().collect();
    for dump in common::linux::dumps(&dir) {
        if dump == "vmcore.elf" || dump.contains("novmcoreinfo") || module_unplaceable(&dir, dump) {
            continue;
        }
        let (status, got) = text(dump);
        let (marks, got): (Vec<&str>, Vec<&str>) = got
            .lines()
            .partition(|l| l.trim_start().starts_with("<unreadable page>"));
        if got == elf {
            assert_eq!((status, marks.len()), (Some(0), 0), "{dump}");
            continue;
        }
        // Fewer, in order, and marked.
        let mut want = elf.iter();
        for line in &got {
            assert!(
                want.any(|w| w == line),
                "{dump}: {line:?} is not one of the ELF dump's"
            );
        }
        assert!(
            !marks.is_empty() && status == Some(1),
            "{dump}: fewer events, nothing said"
        );
    }
}

/// On the timeline, ftrace's times are on printk's and KLog's clock (local_clock): each
/// trace_printk of a klogtest worker (`klogtest cpu C event I`) comes after the KLog event its
/// worker logged just before it and before the next one the same worker logged.
#[test]
fn trace_printk_sits_between_its_workers_klog_events_on_the_timeline() {
    let Some(dir) = guest("trace_timeline", &FILES) else {
        return;
    };
    let json = stdout(
        &kcrash_on(&dir, &FILES, &["timeline --reverse --json"]),
        "timeline",
    );
    let events: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let time = |e: &serde_json::Value| -> u64 { e["placed_at"].as_str().unwrap().parse().unwrap() };
    let mut checked = 0;
    for (i, e) in events.iter().enumerate() {
        let message = e["message"].as_str().unwrap_or_default();
        let Some(rest) = message.strip_prefix("worker: klogtest cpu ") else {
            continue;
        };
        let cpu: u64 = rest.split_whitespace().next().unwrap().parse().unwrap();
        // The KLog events of the same processor: the last before, the first after.
        let klog_of_cpu = |e: &&serde_json::Value| e["log"] == "KLog" && e["processor"] == cpu;
        let before = events[..i].iter().rev().find(klog_of_cpu);
        let after = events[i + 1..].iter().find(klog_of_cpu);
        if let (Some(b), Some(a)) = (before, after) {
            assert!(time(b) <= time(e) && time(e) <= time(a), "{b}\n{e}\n{a}");
            checked += 1;
        }
    }
    assert!(checked >= 10, "{checked} trace_printk records placed");
}

/// A trace line's time as printed: `        <idle>-0     [001]   123.456789: …` gives `123.456789`.
fn seconds_text(line: &str) -> &str {
    let (_, rest) = line.split_once("] ").unwrap();
    rest.trim_start().split_once(':').unwrap().0
}

/// `--cpu`, `-g`, `--since`/`--until`, `-r` and `-n` choose from the whole trace (which the first
/// test holds to the kernel's) exactly the lines they say, in text and in JSON alike.
#[test]
fn trace_options_select_what_they_say() {
    let Some(dir) = guest("trace_select", &FILES) else {
        return;
    };
    let run = |cmd: &str| stdout(&kcrash_on(&dir, &FILES, &[cmd]), cmd);
    let all = run("trace -t");
    let lines: Vec<&str> = all.lines().collect();
    let seconds = |l: &str| -> f64 { seconds_text(l).parse().unwrap() };
    // A window in the middle of the trace: the times of the lines a third and two thirds in.
    let (since, until) = (
        seconds(lines[lines.len() / 3]),
        seconds(lines[2 * lines.len() / 3]),
    );
    let want: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains(" [001] ") && l.contains("sched_"))
        .filter(|l| (since..=until).contains(&seconds(l)))
        .collect();
    assert!(want.len() > 5, "{} lines in the window", want.len());
    let select = format!("--cpu 1 -g sched_ --since {since:.9} --until {until:.9}");
    let got = run(&format!("trace -t {select}"));
    assert_eq!(got.lines().collect::<Vec<_>>(), want, "trace -t {select}");

    let newest: Vec<&str> = want.iter().rev().take(3).copied().collect();
    let got = run(&format!("trace -t -r -n 3 {select}"));
    assert_eq!(
        got.lines().collect::<Vec<_>>(),
        newest,
        "trace -t -r -n 3 {select}"
    );

    // Text without -t prints each time rounded to the microsecond: a time given as printed there
    // holds every event printed with it. The window's edges are events whose printed time is
    // past theirs (the first) and short of it (the last), which the exact times would drop.
    let nanos = |l: &str| -> u64 {
        let (secs, frac) = seconds_text(l).split_once('.').unwrap();
        secs.parse::<u64>().unwrap() * 1_000_000_000 + frac.parse::<u64>().unwrap()
    };
    let printed_us = |l: &str| (nanos(l) + 500) / 1000;
    let chosen = |l: &&str| l.contains(" [001] ") && l.contains("sched_");
    let edge = |from: usize, rounds_up: bool| {
        lines[from..]
            .iter()
            .copied()
            .filter(chosen)
            .find(|l| match nanos(l) % 1000 {
                0 => false,
                ns => (ns >= 500) == rounds_up,
            })
            .unwrap()
    };
    let (first, last) = (
        printed_us(edge(lines.len() / 3, true)),
        printed_us(edge(2 * lines.len() / 3, false)),
    );
    let in_us = run("trace");
    let lines_us: Vec<&str> = in_us.lines().collect();
    assert_eq!(lines_us.len(), lines.len(), "trace and trace -t");
    let want: Vec<&str> = lines
        .iter()
        .zip(&lines_us)
        .filter(|(l, _)| chosen(l) && (first..=last).contains(&printed_us(l)))
        .map(|(_, l)| *l)
        .collect();
    assert!(want.len() > 5, "{} lines in the window", want.len());
    let select = format!(
        "--cpu 1 -g sched_ --since {}.{:06} --until {}.{:06}",
        first / 1_000_000,
        first % 1_000_000,
        last / 1_000_000,
        last % 1_000_000
    );
    let got = run(&format!("trace {select}"));
    assert_eq!(got.lines().collect::<Vec<_>>(), want, "trace {select}");

    // JSON's times are the common timeline's: the trace clock's, but for `local` (sched_clock),
    // moved by __sched_clock_offset onto local_clock (as `trace -s` says). Its window is on them.
    let summary = run("trace -s");
    let offset: i64 = summary
        .lines()
        .find_map(|l| l.split_once("moved by __sched_clock_offset, "))
        .map_or(0, |(_, n)| {
            n.split_whitespace().next().unwrap().parse().unwrap()
        });
    // The same window moved onto the common timeline, so it holds the same events as the text's
    // (a fixed window in JSON's times would hold however few the offset leaves in it).
    let (since_ns, until_ns) = (
        (since * 1e9).round() as i64 + offset,
        (until * 1e9).round() as i64 + offset,
    );
    let window = since_ns..=until_ns;
    let want_times: Vec<String> = lines
        .iter()
        .filter(|l| l.contains(" [001] ") && l.contains("sched_"))
        .map(|l| nanos(l) as i64 + offset)
        .filter(|t| window.contains(t))
        .map(|t| t.to_string())
        .collect();
    assert!(
        want_times.len() > 5,
        "{} events in the window",
        want_times.len()
    );
    let select = format!(
        "--cpu 1 -g sched_ --since {}.{:09} --until {}.{:09}",
        since_ns / 1_000_000_000,
        since_ns % 1_000_000_000,
        until_ns / 1_000_000_000,
        until_ns % 1_000_000_000
    );
    let json = run(&format!("trace --json {select}"));
    let times: Vec<String> = json
        .lines()
        .map(|l| {
            let e: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(e["processor"], 1, "{l}");
            e["ticks"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(times, want_times, "trace --json {select}");
}

/// A page whose memory the dump lacks (here a `buffer_page` whose data pointer was made
/// non-canonical in the makedumpfile ELF dump): `trace` prints every other event, marks the
/// page where its events would be, and fails with exit status 1; `--json` marks it as an
/// unreadable event; `--dat` leaves it out, says so, and trace-cmd reads the rest.
#[test]
fn an_unreadable_page_is_marked_and_the_rest_still_prints() {
    let dump = "vmcore-E-d31.elf";
    let files = [dump, FILES[1], FILES[2]];
    let Some(dir) = guest("trace_unreadable", &files) else {
        return;
    };
    let run = |cmd: &str| stdout(&kcrash_on(&dir, &files, &[cmd]), cmd);
    let json = |cmd: &str| -> serde_json::Value { serde_json::from_str(&run(cmd)).unwrap() };
    let hex = |v: &serde_json::Value| {
        u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
    };
    let summary = json("trace -s --json");
    let cpu0 = summary["rings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "cpu0")
        .expect("ring cpu0");
    // The page before CPU 0's commit page: full of events, with newer ones after it.
    let bpage = hex(&json(&format!(
        "p --json ((struct ring_buffer_per_cpu *){})->commit_page->list.prev",
        cpu0["addr"].as_str().unwrap()
    ))["value"]);
    let page_at: usize = json("eval --json &((struct buffer_page *)0)->page")["decimal"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let words: Vec<u64> = run(&format!("rd --json -64 {bpage:#x} {}", page_at / 8 + 1))
        .lines()
        .map(|l| hex(&serde_json::from_str::<serde_json::Value>(l).unwrap()["value"]))
        .collect();
    let whole: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut poisoned = whole.clone();
    poisoned[page_at..page_at + 8].copy_from_slice(&0xdead_0000_0000_0000u64.to_le_bytes());
    let mut bytes = std::fs::read(dir.join(dump)).expect("the dump");
    assert_eq!(
        replace_all(&mut bytes, &whole, &poisoned),
        1,
        "buffer_page {bpage:#x}"
    );
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join(dump), &bytes).unwrap();
    drop(bytes);
    let vmlinux = dir.join(FILES[1]);
    let module = dir.join(FILES[2]);
    let scratch_files = [dump, vmlinux.to_str().unwrap(), module.to_str().unwrap()];

    let full = run("trace");
    let full: Vec<&str> = full.lines().collect();
    let out = kcrash_on(scratch.path(), &scratch_files, &["trace"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "kcrash: trace: 1 page(s) of the rings could not be read: their events are not shown"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let (marks, shown): (Vec<&str>, Vec<&str>) = text
        .lines()
        .partition(|l| l.trim_start().starts_with("<unreadable page>"));
    assert_eq!(marks.len(), 1, "{text}");
    assert!(
        marks[0].contains("[000] ~") && marks[0].contains("0xdead000000000000"),
        "{}",
        marks[0]
    );
    // What is shown is the whole trace less a run of CPU 0's events, in order.
    let mut rest = full.iter();
    let mut missing = Vec::new();
    for line in &shown {
        for skipped in rest.by_ref() {
            if skipped == line {
                break;
            }
            missing.push(*skipped);
        }
    }
    missing.extend(rest);
    assert!(!missing.is_empty(), "no event is missing");
    assert!(
        missing.iter().all(|l| l.contains(" [000] ")),
        "{missing:#?}"
    );
    let cpu0: Vec<&str> = full
        .iter()
        .copied()
        .filter(|l| l.contains(" [000] "))
        .collect();
    let first = cpu0.iter().position(|l| *l == missing[0]).unwrap();
    assert_eq!(
        &cpu0[first..first + missing.len()],
        &missing[..],
        "one run of CPU 0's events"
    );
    assert!(
        first + missing.len() < cpu0.len(),
        "newer events follow the page"
    );
    // The mark is placed at the time of CPU 0's event before the page.
    let time = |l: &str| {
        l.split("] ")
            .nth(1)
            .unwrap()
            .trim_start_matches('~')
            .trim()
            .split(':')
            .next()
            .unwrap()
            .to_string()
    };
    if first > 0 {
        assert_eq!(time(marks[0]), time(cpu0[first - 1]), "{}", marks[0]);
    }

    let out = kcrash_on(scratch.path(), &scratch_files, &["trace --json"]);
    assert_eq!(out.status.code(), Some(1));
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let marked: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["name"] == "<unreadable page>")
        .collect();
    assert_eq!(marked.len(), 1);
    assert_eq!(
        marked[0]["damage"][0]["kind"], "unreadable",
        "{}",
        marked[0]
    );
    assert_eq!(events.len(), shown.len() + 1);

    let dat = scratch.path().join("t.dat");
    let out = kcrash_on(
        scratch.path(),
        &scratch_files,
        &[&format!("trace --dat {}", dat.display())],
    );
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("trace: left out: cpu0 buffer page ")
            && err.contains(": 0xdead000000000000: not mapped"),
        "{err}"
    );
    if tools::available_for(
        "an_unreadable_page_is_marked_and_the_rest_still_prints",
        &["trace-cmd"],
    ) {
        let theirs = trace_cmd_report(&dat, &[]);
        assert_eq!(theirs.lines().collect::<Vec<_>>(), shown);
    }
}

/// Where libtraceevent (trace-cmd 3.1's reader) renders an event of Debian's 6.1 otherwise than
/// the kernel means it, and why. kcrash's line for these is held to the kernel's own trace file.
const LIBTRACEEVENT_DIFFERS: [(&str, &str); 8] = [
    ("ma_read", "`%s` of a `const char *` field: trace-cmd fails to parse the format"),
    ("ma_write", "as ma_read"),
    ("mm_page_alloc", "`(struct page *)vmemmap_base + pfn`: trace-cmd adds the pfn to the symbol's address"),
    ("mm_page_free", "as mm_page_alloc"),
    ("mm_page_free_batched", "as mm_page_alloc"),
    ("mm_page_pcpu_drain", "as mm_page_alloc"),
    ("mm_page_alloc_zone_locked", "as mm_page_alloc"),
    ("timer_start", "`flags & (A | B | C | D)` in __print_flags: trace-cmd takes it as `(flags & A) | B | C | D`"),
];

/// Whether kcrash's message says what the kernel's trace file says: the same text, but where the
/// kernel printed a pointer hashed (or `(____ptrval____)` before the hash key is ready) kcrash
/// prints the address, and `%pS`'s `/size` is kcrash's to drop.
fn same_values(kernel: &str, ours: &str) -> bool {
    let hashed = regex::Regex::new(r"\(____ptrval____\)|\b[0-9a-f]{16}\b").unwrap();
    let sizes = regex::Regex::new(r"(\+0x[0-9a-f]+)/0x[0-9a-f]+").unwrap();
    let kernel = sizes.replace_all(kernel, "$1");
    let pattern: Vec<String> = hashed.split(&kernel).map(regex::escape).collect();
    regex::Regex::new(&format!("^{}$", pattern.join(r"(?:0x[0-9a-f]+|\(nil\))")))
        .unwrap()
        .is_match(ours)
}

/// Every kind of event that fired while the modules loaded (the instance `all` traces every
/// event the kernel has): kcrash's line equals `trace-cmd report -N`'s of kcrash's trace.dat,
/// but for the events libtraceevent renders otherwise (the table above), where it equals the
/// kernel's own trace file, value for value.
#[test]
fn every_kind_of_event_renders_as_trace_cmd_or_the_kernel_renders_it() {
    let Some(dir) = guest("trace_all", &FILES) else {
        return;
    };
    if !tools::available_for(
        "every_kind_of_event_renders_as_trace_cmd_or_the_kernel_renders_it",
        &["trace-cmd"],
    ) {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let dat = scratch.path().join("all.dat");
    let cmd = format!("trace --instance all --dat {}", dat.display());
    stdout(&kcrash_on(&dir, &FILES, &[&cmd]), &cmd);
    let theirs = trace_cmd_report(&dat, &[]);
    let theirs: Vec<&str> = theirs.lines().collect();
    let mine = stdout(&kcrash_on(&dir, &FILES, &["trace --instance all"]), "trace");
    let mine: Vec<&str> = mine.lines().collect();
    assert_eq!(mine.len(), theirs.len(), "events: kcrash, then trace-cmd");
    let kernel = oracle(&dir, "KCRASH-TRACE-all ");
    let name = |l: &str| l.split(": ").nth(1).unwrap_or_default().trim().to_string();
    let mut kinds = std::collections::BTreeSet::new();
    let mut held_to_kernel = 0;
    for (m, t) in mine.iter().zip(&theirs) {
        let event = name(m);
        kinds.insert(event.clone());
        // kcrash doubles a backslash from the dump so that its own escapes stay unambiguous;
        // trace-cmd prints it as it is.
        if m == t || m.replace("\\\\", "\\") == **t {
            continue;
        }
        assert!(
            LIBTRACEEVENT_DIFFERS.iter().any(|(e, _)| *e == event),
            "kcrash and trace-cmd differ on an event libtraceevent reads right:\n{m}\n{t}"
        );
        // The kernel's line of the same CPU and time, which its own format rendered.
        let (_, rest) = m.split_once(" [").unwrap();
        let cpu: u32 = rest[..3].parse().unwrap();
        let micros = rest[4..].trim_start().split(':').next().unwrap();
        let text = m.splitn(3, ": ").nth(2).unwrap().trim_start();
        let theirs_kernel: Vec<&Line> = kernel
            .iter()
            .filter(|k| {
                k.cpu == cpu && k.micros == micros && k.text.starts_with(&format!("{event}:"))
            })
            .collect();
        assert!(
            theirs_kernel.iter().any(|k| {
                let kernel = k.text.split_once(": ").unwrap().1.trim_start();
                same_values(kernel, text)
            }),
            "{m}\nthe kernel's: {theirs_kernel:#?}"
        );
        held_to_kernel += 1;
    }
    assert!(
        kinds.len() >= 40,
        "{} kinds of event: {kinds:?}",
        kinds.len()
    );
    eprintln!(
        "{} events of {} kinds; {held_to_kernel} held to the kernel's trace file",
        mine.len(),
        kinds.len()
    );
}
