//! `dis` against objdump (binutils), which shares nothing with kcrash's decoder: every function
//! of the bare kernel's image, read from its QEMU kdump, and the C writer's functions read from
//! its process core (a PIE placed at a load bias, its text read from the executable the core
//! maps) decode to the same instructions — the same addresses and lengths, the same mnemonics,
//! the same branch targets — and name branch targets as objdump does. The arm64 C writer's
//! functions, read from its core (written by qemu-aarch64), agree with binutils' aarch64 objdump
//! to the operands, their numbers compared by value (objdump writes some in decimal).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

mod common;

use common::objdump::{arm64_words, instruction_line};
use common::{json_lines, kcrash, nm_all};
use kcrash_harness::corpus;
use kcrash_harness::run::stdout;
use kcrash_harness::tools;

/// One instruction as objdump prints it: its bytes, mnemonic and branch target.
#[derive(Debug)]
struct Objdump {
    len: usize,
    mnemonic: String,
    target: Option<u64>,
    /// The target's name when it is a PLT stub (`strcmp@plt`), which no symbol table holds.
    target_plt: Option<String>,
    /// The instruction's text, objdump's comment left out.
    text: String,
}

/// objdump's reading of an image: its instructions by address, and its PLT stubs (names it
/// makes up from the dynamic relocations) with their sizes.
struct Disassembly {
    instructions: HashMap<u64, Objdump>,
    stubs: Vec<(String, u64)>,
}

/// Prefixes objdump and kcrash print as words of their own before the mnemonic.
const PREFIXES: &[&str] = &[
    "cs", "ds", "rex.W", "data16", "notrack", "bnd", "lock", "rep", "repz", "repnz",
];

/// `objdump -d` of the image's text, by `program` (binutils for the image's machine).
fn objdump(program: &str, image: &Path) -> Disassembly {
    let out = tools::output(Command::new(program).args(["-d", "-w"]).arg(image));
    let mut all = HashMap::new();
    let mut stubs: Vec<(String, u64)> = Vec::new();
    // The function a line is in, when it is a stub.
    let mut in_stub = false;
    for line in out.lines() {
        // `0000000000001030 <strcmp@plt>:`
        if let Some(header) = line.strip_suffix(">:") {
            let name = header.split_once(" <").map(|(_, n)| n).unwrap_or_default();
            in_stub = name.ends_with("@plt");
            if in_stub {
                stubs.push((name.to_owned(), 0));
            }
            continue;
        }
        let Some((addr, bytes, text)) = instruction_line(line) else {
            continue;
        };
        let words: Vec<&str> = text.split_whitespace().collect();
        // Prefixes objdump prints as words of their own.
        let mnemonic = words
            .iter()
            .find(|w| !PREFIXES.contains(w))
            .copied()
            .unwrap_or_default();
        let target = if mnemonic.starts_with('j') || mnemonic.starts_with("call") {
            words
                .iter()
                .skip(1)
                .find_map(|w| u64::from_str_radix(w, 16).ok())
        } else if program.starts_with("aarch64") {
            // `adrp x0, 49f000 <tunable_list+0x518>`: every address it names has its symbol.
            let before = text.split_once(" <").map(|(before, _)| before);
            before.and_then(|b| u64::from_str_radix(b.rsplit([' ', '\t']).next()?, 16).ok())
        } else {
            None
        };
        let target_plt = target.and(text.split_once(" <")).and_then(|(_, name)| {
            let name = name.split_once('>')?.0;
            name.ends_with("@plt").then(|| name.to_owned())
        });
        // x86's bytes one by one (`55 48 89 e5`), arm64's a word at a time (`a9b37bfd`).
        let len = bytes.split_whitespace().map(|w| w.len() / 2).sum();
        if let (true, Some((_, size))) = (in_stub, stubs.last_mut()) {
            *size += len as u64;
        }
        all.insert(
            addr,
            Objdump {
                len,
                mnemonic: mnemonic.to_owned(),
                target,
                target_plt,
                text: text
                    .split("//")
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            },
        );
    }
    Disassembly {
        instructions: all,
        stubs,
    }
}

/// Mnemonics alike but for the size suffix one of them writes (`callq`/`call`, `retq`/`ret`).
fn same_mnemonic(a: &str, b: &str) -> bool {
    let base = |m: &str| -> String {
        match m.strip_suffix(['q', 'l', 'w', 'b']) {
            Some(s) if s.len() >= 2 => s.to_owned(),
            _ => m.to_owned(),
        }
    };
    a == b || base(a) == b || a == base(b) || base(a) == base(b)
}

/// What `check_functions` compared.
struct Checked {
    instructions: usize,
    /// Branches to a PLT stub, named as objdump names it.
    plt_calls: usize,
}

/// Checks `dis --json` of every function of `image` (named by nm, placed at `bias`) in `dump`
/// against objdump's reading of the image, `oracle`; with `operands`, each instruction's whole
/// text too.
fn check_functions(
    dump: &Path,
    image: &Path,
    bias: u64,
    functions: &[(String, u64)],
    oracle: &Disassembly,
    operands: bool,
) -> Checked {
    let mut plt_calls = 0;
    let oracle = &oracle.instructions;
    let commands: Vec<String> = functions
        .iter()
        .map(|(f, _)| format!("dis --json {f}"))
        .collect();
    let refs: Vec<&str> = commands.iter().map(String::as_str).collect();
    let out = kcrash().commands(dump, image, &refs);
    let lines = json_lines(&stdout(&out, "dis"));
    let mut checked = 0;
    let mut mismatched = Vec::new();
    for v in &lines {
        assert!(v["unreadable"].is_null(), "{v}");
        let at = u64::from_str_radix(v["address"].as_str().unwrap().trim_start_matches("0x"), 16)
            .unwrap()
            - bias;
        let want = oracle
            .get(&at)
            .unwrap_or_else(|| panic!("{at:#x}: objdump has no instruction there: {v}"));
        let text = v["text"].as_str().unwrap();
        let mnemonic = text
            .split_whitespace()
            .find(|w| !PREFIXES.contains(w))
            .unwrap_or_default();
        assert_eq!(
            v["bytes"].as_str().unwrap().len() / 2,
            want.len,
            "{at:#x}: length: {v}"
        );
        if !same_mnemonic(mnemonic, &want.mnemonic)
            || (operands && arm64_words(text) != arm64_words(&want.text))
        {
            mismatched.push(format!("{at:#x}: {text} / objdump {}", want.text));
        }
        if let Some(t) = want.target {
            let got = v["target"]
                .as_str()
                .map(|s| u64::from_str_radix(&s[2..], 16).unwrap() - bias);
            assert_eq!(got, Some(t), "{at:#x}: branch target: {v}");
        }
        if let Some(stub) = &want.target_plt {
            assert_eq!(v["target_symbol"].as_str(), Some(&stub[..]), "{at:#x}: {v}");
            plt_calls += 1;
        }
        checked += 1;
    }
    // The instructions kcrash shows cover each function as objdump's do.
    let shown: usize = functions.iter().map(|(_, size)| *size as usize).sum();
    let bytes: usize = lines
        .iter()
        .map(|v| v["bytes"].as_str().unwrap().len() / 2)
        .sum();
    assert_eq!(bytes, shown, "the functions' bytes");
    assert!(
        mismatched.is_empty(),
        "{} of {checked} differ:\n{}",
        mismatched.len(),
        mismatched.join("\n")
    );
    Checked {
        instructions: checked,
        plt_calls,
    }
}

/// Every function nm (`program`, binutils for the image's machine) gives a size for (nm -S), by
/// name; a name two local symbols share is left out (`dis NAME` shows the first).
fn sized_functions(program: &str, image: &Path) -> Vec<(String, u64)> {
    let out = tools::output(
        Command::new(program)
            .args(["-S", "--defined-only"])
            .arg(image),
    );
    let mut sizes: HashMap<String, Vec<u64>> = HashMap::new();
    for l in out.lines() {
        if let [_, size, kind, name] = l.split_whitespace().collect::<Vec<_>>()[..] {
            if kind.eq_ignore_ascii_case("t") {
                let size = u64::from_str_radix(size, 16).unwrap();
                sizes.entry(name.to_owned()).or_default().push(size);
            }
        }
    }
    let mut f: Vec<_> = sizes
        .into_iter()
        .filter_map(|(name, s)| match s[..] {
            [size] if size > 0 => Some((name, size)),
            _ => None,
        })
        .collect();
    f.sort();
    f
}

#[test]
fn every_function_of_the_bare_kernel_disassembles_as_objdump_reads_it() {
    if !tools::available_for("dis_bare", &["objdump", "nm"]) {
        return;
    }
    let image = corpus::file("bare/vmlinux");
    let functions = sized_functions("nm", &image);
    assert!(functions.len() > 100, "{} functions", functions.len());
    let checked = check_functions(
        &corpus::file("bare/rings/vmcore.kdump"),
        &image,
        0,
        &functions,
        &objdump("objdump", &image),
        false,
    );
    assert!(
        checked.instructions > 10_000,
        "{} instructions",
        checked.instructions
    );
}

#[test]
fn a_process_cores_functions_disassemble_as_objdump_reads_its_executable() {
    if !tools::available_for("dis_process", &["objdump", "nm"]) {
        return;
    }
    let image = corpus::file("hosted-c/hosted-c");
    let dump = corpus::file("hosted-c/rings/core.gz");
    let oracle = objdump("objdump", &image);
    // The PLT's stubs too: `dis strcmp@plt` shows the stub objdump names so.
    assert!(oracle.stubs.len() > 5, "{:?}", oracle.stubs);
    let functions: Vec<(String, u64)> = sized_functions("nm", &image)
        .into_iter()
        .filter(|(name, _)| !name.starts_with("_start") && !name.contains('@'))
        .chain(oracle.stubs.iter().cloned())
        .collect();
    let main = nm_all(&image)
        .into_iter()
        .find(|(n, ..)| n == "main")
        .unwrap()
        .1;
    let out = kcrash().commands(&dump, &image, &["sym --json main"]);
    let placed = json_lines(&stdout(&out, "sym"))[0]["address"]
        .as_str()
        .unwrap()
        .to_owned();
    let bias = u64::from_str_radix(&placed[2..], 16).unwrap() - main;
    assert!(bias > 0, "a PIE is placed above 0");
    let checked = check_functions(&dump, &image, bias, &functions, &oracle, false);
    assert!(
        checked.instructions > 500,
        "{} instructions",
        checked.instructions
    );
    // Calls into the PLT are named by the function they reach.
    assert!(checked.plt_calls > 10, "{} PLT calls", checked.plt_calls);
}

#[test]
fn an_arm64_cores_functions_disassemble_as_aarch64_objdump_reads_its_executable() {
    let (objdump_a64, nm_a64) = ("aarch64-linux-gnu-objdump", "aarch64-linux-gnu-nm");
    if !tools::available_for("dis_arm64", &[objdump_a64, nm_a64]) {
        return;
    }
    // Static and not position-independent: placed where it was linked.
    let image = corpus::file("hosted-c-arm64/hosted-c-arm64");
    let dump = corpus::file("hosted-c-arm64/rings/core.gz");
    let functions = sized_functions(nm_a64, &image);
    let checked = check_functions(
        &dump,
        &image,
        0,
        &functions,
        &objdump(objdump_a64, &image),
        true,
    );
    assert!(
        checked.instructions > 50_000,
        "{} instructions",
        checked.instructions
    );
}

/// An arm64 instruction starts at a multiple of 4: `dis` says so of any other address.
#[test]
fn arm64_code_is_read_at_its_alignment() {
    let dump = corpus::file("hosted-c-arm64/rings/core.gz");
    let image = corpus::file("hosted-c-arm64/hosted-c-arm64");
    let out = kcrash().commands(&dump, &image, &["dis main+2 1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("arm64 instructions start at multiples of 4"),
        "{err}"
    );
}

#[test]
fn unreadable_code_is_said_never_decoded() {
    let out = kcrash().commands(
        &common::kdump(),
        &common::vmlinux(),
        &["dis 0xffff888000000000 4"],
    );
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("0xffff888000000000: <unreadable: "),
        "{text}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the instructions from 0xffff888000000000 on are unreadable"),
        "{err}"
    );
}

/// `dis -l`: each instruction's source line is the one addr2line (binutils) gives for it.
#[test]
fn source_lines_are_addr2lines() {
    if !tools::available_for("dis_lines", &["addr2line"]) {
        return;
    }
    let image = corpus::file("hosted-c/hosted-c");
    let dump = corpus::file("hosted-c/rings/core.gz");
    let out = kcrash().commands(&dump, &image, &["dis -l --json main", "sym --json main"]);
    let lines = json_lines(&stdout(&out, "dis -l"));
    let (sym, insns) = lines.split_last().unwrap();
    let hex = |v: &serde_json::Value| u64::from_str_radix(&v.as_str().unwrap()[2..], 16).unwrap();
    let main = nm_all(&image)
        .into_iter()
        .find(|(n, ..)| n == "main")
        .unwrap()
        .1;
    let bias = hex(&sym["address"]) - main;
    let addrs: Vec<String> = insns
        .iter()
        .map(|v| format!("{:#x}", hex(&v["address"]) - bias))
        .collect();
    let oracle = tools::output(Command::new("addr2line").arg("-e").arg(&image).args(&addrs));
    let mut with_line = 0;
    for (v, want) in insns.iter().zip(oracle.lines()) {
        // addr2line's `FILE:LINE (discriminator N)` or `??:0` where DWARF has none.
        let want = want.split(" (").next().unwrap();
        match v["source"].as_str() {
            Some(got) => {
                assert_eq!(got.replacen(": ", ":", 1), want, "{v}");
                with_line += 1;
            }
            None => assert!(
                want.ends_with(":0") || want.ends_with(":?"),
                "{v}: addr2line {want}"
            ),
        }
    }
    assert!(with_line > 50, "{with_line} instructions with a line");
}
