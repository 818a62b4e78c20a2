//! `sym` through the real binary on corpus dumps: the symbol list is `nm`'s and `readelf`'s, an
//! address and a name translate both ways as `nm` and binutils `addr2line` say, and a process
//! core's symbols carry the load bias the program printed.

use std::collections::HashMap;
use std::process::Command;

mod common;

use common::{hex, json_lines, kcrash, nm, nm_all, vmlinux, word_after};
use kcrash_harness::run::stdout;
use kcrash_harness::{corpus, tools};
use serde_json::Value;

#[test]
fn sym_list_is_nms_symbol_table() {
    if !tools::runs("sym_list_is_nms_symbol_table", "nm")
        || !tools::runs("sym_list_is_nms_symbol_table", "readelf")
    {
        return;
    }
    let nm = nm_all(&vmlinux());
    let out = stdout(
        &kcrash().commands(
            &corpus::file("bare/fault/vmcore.kdump"),
            &vmlinux(),
            &["sym -l --json"],
        ),
        "kcrash",
    );
    let listed = json_lines(&out);
    assert!(listed.len() > 100);
    let ours: HashMap<(String, u64), char> = listed
        .iter()
        .map(|s| {
            let name = s["symbol"].as_str().unwrap().to_owned();
            let letter = s["type"].as_str().unwrap().chars().next().unwrap();
            ((name, hex(&s["address"])), letter)
        })
        .collect();
    // Every function and object nm knows is listed at nm's address, global or local as nm says,
    // text as text (labels without a type may be left out).
    let typed: std::collections::HashSet<String> =
        tools::output(Command::new("readelf").arg("-sW").arg(vmlinux()))
            .lines()
            .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
                [_, _, _, "FUNC" | "OBJECT", _, _, _, name] => Some(name.to_owned()),
                _ => None,
            })
            .collect();
    let mut checked = 0;
    for (name, addr, kind) in nm
        .iter()
        .filter(|(n, _, k)| "TtDdBb".contains(*k) && typed.contains(n))
    {
        let letter = ours
            .get(&(name.clone(), *addr))
            .unwrap_or_else(|| panic!("{name} at {addr:#x} not listed"));
        assert_eq!(
            letter.is_ascii_uppercase(),
            kind.is_ascii_uppercase(),
            "{name}: {kind} vs {letter}"
        );
        if kind.eq_ignore_ascii_case(&'t') {
            assert_eq!(letter, kind, "{name}");
        }
        checked += 1;
    }
    assert!(checked > 100);
    // Address order.
    let addrs: Vec<u64> = listed.iter().map(|s| hex(&s["address"])).collect();
    assert!(addrs.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn sym_translates_both_ways_like_nm_and_addr2line() {
    if !tools::runs("sym_translates_both_ways_like_nm_and_addr2line", "nm")
        || !tools::runs(
            "sym_translates_both_ways_like_nm_and_addr2line",
            "addr2line",
        )
    {
        return;
    }
    let nm = nm(&vmlinux());
    let klogs = nm["KLogs"].0;
    let buffer = nm["KLogBuffer"].0;
    // The faulting instruction of the fault scenario, from the kernel's own panic line.
    let console = std::fs::read_to_string(corpus::file("bare/fault/console.log")).unwrap();
    let panic = console
        .lines()
        .find(|l| l.starts_with("KCRASH-PANIC"))
        .unwrap();
    let rip = word_after(panic, "rip");
    let out = stdout(
        &kcrash().commands(
            &corpus::file("bare/fault/vmcore.kdump"),
            &vmlinux(),
            &[
                "sym KLogs",
                &format!("sym {klogs:x}"),
                &format!("sym 0x{:x}", buffer + 0x18),
                "sym KLogBuffer+0x18",
                &format!("sym {rip:#x} --json"),
            ],
        ),
        "kcrash",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(
        lines[0].starts_with(&format!("{klogs:016x} (D) KLogs  size ")),
        "{}",
        lines[0]
    );
    assert_eq!(lines[0], lines[1]);
    assert!(
        lines[2].starts_with(&format!("{:016x} (B) KLogBuffer+0x18 ", buffer + 0x18)),
        "{}",
        lines[2]
    );
    assert_eq!(lines[2], lines[3]);

    let rip_json: Value = serde_json::from_str(lines[4]).unwrap();
    // The symbol containing rip: the nm symbol with the highest address not above it.
    let (containing, _) = nm
        .iter()
        .filter(|(_, (a, k))| *a <= rip && "Tt".contains(*k))
        .max_by_key(|(_, (a, _))| *a)
        .unwrap();
    assert_eq!(rip_json["symbol"].as_str(), Some(containing.as_str()));
    assert_eq!(rip_json["offset"].as_u64(), Some(rip - nm[containing].0));
    // file:line, innermost frame first, as binutils addr2line -i says.
    let a2l = tools::output(
        Command::new("addr2line")
            .arg("-i")
            .arg("-e")
            .arg(vmlinux())
            .arg(format!("{rip:#x}")),
    );
    let first = a2l.lines().next().unwrap();
    let (file, line) = first.rsplit_once(':').unwrap();
    let frame = &rip_json["frames"][0];
    assert!(
        file.ends_with(frame["file"].as_str().unwrap().rsplit('/').next().unwrap()),
        "{first} vs {frame}"
    );
    assert_eq!(
        frame["line"].as_u64(),
        line.split(' ').next().unwrap().parse().ok()
    );
}

/// A PIE program's symbols move by its load bias: the ring buffer address the program printed
/// (console.log's KLOG-RING line for ring 0) is `KLogBuffer` in `nm`, and `KLogs` moves by as much.
#[test]
fn sym_on_a_process_core_applies_the_load_bias() {
    if !tools::runs("sym_on_a_process_core_applies_the_load_bias", "nm") {
        return;
    }
    let image = corpus::file("hosted/hosted");
    let nm = nm(&image);
    let console = std::fs::read_to_string(corpus::file("hosted/rings/console.log")).unwrap();
    let ring0 = console
        .lines()
        .find(|l| l.starts_with("KLOG-RING ring=0 "))
        .unwrap();
    let buffer = ring0
        .split_whitespace()
        .find_map(|w| w.strip_prefix("buffer=0x"))
        .map(|h| u64::from_str_radix(h, 16).unwrap())
        .unwrap();
    let bias = buffer - nm["KLogBuffer"].0;
    let out = stdout(
        &kcrash().commands(
            &corpus::file("hosted/rings/core.gz"),
            &image,
            &[&format!("sym {buffer:#x} --json"), "sym KLogs --json"],
        ),
        "kcrash",
    );
    let docs = json_lines(&out);
    assert_eq!(docs[0]["symbol"].as_str(), Some("KLogBuffer"));
    assert_eq!(docs[0]["offset"].as_u64(), Some(0));
    assert_eq!(hex(&docs[1]["address"]), nm["KLogs"].0 + bias);
}
