//! The shell and its commands (`sys`, `sym`, `rd`, `help`, `set`, plumbing, exit codes), driven
//! through the real binary on corpus dumps. Expected values come from elsewhere: `nm`, `readelf`
//! and binutils `addr2line` on the image, the image file's own bytes, and the records and panic
//! line the kernel itself logged (the corpus's expected.json and console.log).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn corpus(rel: &str) -> PathBuf {
    root().join("corpus").join(rel)
}

fn vmlinux() -> PathBuf {
    corpus("bare/vmlinux")
}

/// `kcrash ARGS...` with no terminal anywhere and a private HOME.
fn kcrash(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kcrash"))
        .args(args)
        .env_remove("NO_COLOR")
        .env("HOME", std::env::temp_dir())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run kcrash")
}

/// Runs `commands` with `-c` each on `dump` and `image`.
fn run(dump: &Path, image: &Path, commands: &[&str]) -> Output {
    let mut args: Vec<String> = vec!["-s".into()];
    for c in commands {
        args.push("-c".into());
        args.push((*c).into());
    }
    args.push(dump.display().to_string());
    args.push(image.display().to_string());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    kcrash(&refs)
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("utf-8 stderr")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "kcrash failed: {:?}\n{}",
        o.status,
        stderr(o)
    );
    stdout(o)
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

fn tool(cmd: &mut Command) -> String {
    let o = cmd.output().expect("run tool");
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// nm's (address, type letter) for each symbol, absolute symbols left out.
fn nm_all(image: &Path) -> Vec<(String, u64, char)> {
    tool(Command::new("nm").arg(image))
        .lines()
        .filter_map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                [addr, kind, name] if kind != "A" && kind != "a" => Some((
                    name.to_owned(),
                    u64::from_str_radix(addr, 16).ok()?,
                    kind.chars().next()?,
                )),
                _ => None,
            },
        )
        .collect()
}

/// nm's (address, type letter) by name (the last of several locals of one name).
fn nm(image: &Path) -> HashMap<String, (u64, char)> {
    nm_all(image)
        .into_iter()
        .map(|(n, a, k)| (n, (a, k)))
        .collect()
}

const DUMPS: [&str; 4] = [
    "vmcore.kdump",
    "vmcore.elf.gz",
    "vmcore-paging.elf.gz",
    "vmcore.kdump-flat.gz",
];

// ---- sym ---------------------------------------------------------------------------------------

#[test]
fn sym_list_is_nms_symbol_table() {
    if !have("nm") || !have("readelf") {
        return;
    }
    let nm = nm_all(&vmlinux());
    let out = ok(&run(
        &corpus("bare/fault/vmcore.kdump"),
        &vmlinux(),
        &["sym -l --json"],
    ));
    let listed = json_lines(&out);
    assert!(listed.len() > 100);
    let ours: HashMap<(String, u64), char> = listed
        .iter()
        .map(|s| {
            let name = s["symbol"].as_str().unwrap().to_owned();
            let letter = s["type"].as_str().unwrap().chars().next().unwrap();
            ((name, s["address"].as_u64().unwrap()), letter)
        })
        .collect();
    // Every function and object nm knows is listed at nm's address, global or local as nm says,
    // text as text (labels without a type may be left out).
    let typed: std::collections::HashSet<String> =
        tool(Command::new("readelf").arg("-sW").arg(vmlinux()))
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
    let addrs: Vec<u64> = listed
        .iter()
        .map(|s| s["address"].as_u64().unwrap())
        .collect();
    assert!(addrs.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn sym_translates_both_ways_like_nm_and_addr2line() {
    if !have("nm") || !have("addr2line") {
        return;
    }
    let nm = nm(&vmlinux());
    let klogs = nm["KLogs"].0;
    let buffer = nm["KLogBuffer"].0;
    // The faulting instruction of the fault scenario, from the kernel's own panic line.
    let console = std::fs::read_to_string(corpus("bare/fault/console.log")).unwrap();
    let panic = console
        .lines()
        .find(|l| l.starts_with("KCRASH-PANIC"))
        .unwrap();
    let rip = word_after(panic, "rip");
    let out = ok(&run(
        &corpus("bare/fault/vmcore.kdump"),
        &vmlinux(),
        &[
            "sym KLogs",
            &format!("sym {klogs:x}"),
            &format!("sym 0x{:x}", buffer + 0x18),
            "sym KLogBuffer+0x18",
            &format!("sym {rip:#x} --json"),
        ],
    ));
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
    let a2l = tool(
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

fn word_after(line: &str, key: &str) -> u64 {
    let mut words = line.split_whitespace();
    words.find(|w| *w == key).unwrap();
    let v = words.next().unwrap();
    u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
}

// ---- rd ----------------------------------------------------------------------------------------

/// Every record the kernel logged and the dump still holds, read with `rd` on every dump format:
/// the 8 words are the ones the kernel printed, and `rd -a desc` is its format string.
fn check_records(dump: &Path, image: &Path, expected: &Path) {
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(expected).unwrap()).unwrap();
    let mut commands = Vec::new();
    let mut want = Vec::new();
    for ring in expected["rings"].as_array().unwrap() {
        // A ring the kernel scribbled on is not where its records say; kcrash does not read it.
        if !ring["untrusted"].as_array().is_none_or(|u| u.is_empty()) {
            continue;
        }
        let buffer = ring["buffer"].as_u64().unwrap();
        for rec in ring["records"].as_array().unwrap() {
            // Torn slots carry no words to compare.
            if !rec["damage"].as_array().unwrap().is_empty() {
                continue;
            }
            let u = |k: &str| rec[k].as_u64().unwrap();
            let words: Vec<u64> = rec["words"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            let at = buffer + u("slot") * 64;
            commands.push(format!("rd -64 {at:#x} 8 --json"));
            commands.push(format!("rd -a {:#x} --json", u("desc")));
            want.push((at, words, rec["format"].as_str().unwrap().to_owned()));
        }
    }
    assert!(!want.is_empty());
    let refs: Vec<&str> = commands.iter().map(String::as_str).collect();
    let got = json_lines(&ok(&run(dump, image, &refs)));
    assert_eq!(got.len(), want.len() * 9);
    for (i, (at, words, format)) in want.iter().enumerate() {
        let chunk = &got[i * 9..i * 9 + 9];
        for (j, w) in words.iter().enumerate() {
            assert_eq!(chunk[j]["address"].as_u64(), Some(at + 8 * j as u64));
            assert_eq!(
                chunk[j]["value"].as_u64(),
                Some(*w),
                "{} word {j} at {at:#x}",
                dump.display()
            );
        }
        assert_eq!(chunk[8]["string"].as_str(), Some(format.as_str()));
        assert_eq!(chunk[8]["terminated"], Value::Bool(true));
    }
}

#[test]
fn rd_reads_the_records_the_kernel_logged_in_every_format() {
    for scenario in ["rings", "strings"] {
        for dump in DUMPS {
            check_records(
                &corpus(&format!("bare/{scenario}/{dump}")),
                &vmlinux(),
                &corpus(&format!("bare/{scenario}/expected.json")),
            );
        }
    }
}

#[test]
fn rd_reads_a_process_core_and_the_files_it_left_out() {
    // desc strings sit in .rodata, which the core leaves out: they come from the executable.
    check_records(
        &corpus("hosted/rings/core.gz"),
        &corpus("hosted/hosted"),
        &corpus("hosted/rings/expected.json"),
    );
}

/// `rd -p` of the kernel's code equals the image file's bytes at that physical address, as
/// readelf's program headers place them.
#[test]
fn rd_physical_matches_the_image_file() {
    if !have("readelf") || !have("nm") {
        return;
    }
    let nm = nm(&vmlinux());
    let headers = tool(Command::new("readelf").arg("-lW").arg(vmlinux()));
    let bytes = std::fs::read(vmlinux()).unwrap();
    // The fault scenario's code: the image file holds it as it ran.
    let code = nm
        .iter()
        .find(|(n, _)| n.contains("4bare9scenarios5fault"))
        .map(|(_, v)| v.0)
        .expect("bare::scenarios::fault in nm");
    let (offset, paddr) = headers
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
            let (off, vaddr, paddr, filesz) = (hex(f[1]), hex(f[2]), hex(f[3]), hex(f[4]));
            (vaddr <= code && code + 32 <= vaddr + filesz)
                .then(|| (off + code - vaddr, paddr + code - vaddr))
        })
        .expect("code in a PT_LOAD");
    let want = &bytes[offset as usize..offset as usize + 32];
    for dump in DUMPS {
        let out = ok(&run(
            &corpus(&format!("bare/fault/{dump}")),
            &vmlinux(),
            &[
                &format!("rd -p -8 {paddr:#x} 32 --json"),
                &format!("rd -8 {code:#x} 32 --json"),
            ],
        ));
        let units = json_lines(&out);
        let bytes = |units: &[Value]| -> Vec<u8> {
            units
                .iter()
                .map(|v| v["value"].as_u64().unwrap() as u8)
                .collect()
        };
        assert_eq!(bytes(&units[..32]), want, "{dump} physical");
        assert_eq!(bytes(&units[32..]), want, "{dump} virtual");
    }
}

#[test]
fn rd_text_layout_and_unreadable_memory() {
    let nm = nm(&vmlinux());
    let klogs = nm["KLogs"].0;
    let out = ok(&run(
        &corpus("bare/rings/vmcore.kdump"),
        &vmlinux(),
        &[
            "rd KLogs 3",
            "rd -32 KLogs 5",
            "rd -s KLogs 8",
            "rd 0xffffffffc0000000 1000",
            "rd -a KLogs",
        ],
    ));
    let lines: Vec<&str> = out.lines().collect();
    // Two 64-bit units per line, the ASCII column after them; the last line padded to align.
    assert!(lines[0].starts_with(&format!("{klogs:016x}:  ")));
    assert_eq!(lines[0].len(), lines[1].len() + 8, "{out}");
    assert!(lines[1].starts_with(&format!("{:016x}:  ", klogs + 16)));
    assert_eq!(lines[2].len(), lines[3].len() + 12, "{out}");
    // -s: KLogs[0].buffer (the third word) points at KLogBuffer.
    assert!(
        lines[5..9].iter().any(|l| l.contains("KLogBuffer")),
        "{out}"
    );
    // One line for the whole unreadable run, and the command still succeeds.
    let bad: Vec<&&str> = lines.iter().filter(|l| l.contains("<unreadable")).collect();
    assert_eq!(bad.len(), 1, "{out}");
    assert!(
        bad[0].starts_with("ffffffffc0000000:  <unreadable 0x1f40 bytes: "),
        "{}",
        bad[0]
    );

    // The guest had 32 MiB of RAM (corpus/README.md): a line across its end shows the unit it
    // has and marks the one it has not; the rest is one unreadable run.
    for (cmd, at) in [
        ("rd -p 0x1fffff8 3", 0x1fffff8u64),
        ("rd 0xffffffff81fffff8 3", 0xffffffff81fffff8),
    ] {
        let out = ok(&run(&kdump(), &vmlinux(), &[cmd]));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert!(
            lines[0].starts_with(&format!("{at:016x}:  "))
                && lines[0].contains(" ???????????????? "),
            "{out}"
        );
        assert!(lines[0].contains("<unreadable: "), "{out}");
        assert!(
            lines[1].starts_with(&format!("{:016x}:  <unreadable 0x8 bytes: ", at + 16)),
            "{out}"
        );
    }
}

// ---- sys ---------------------------------------------------------------------------------------

#[test]
fn sys_tells_the_dump_and_the_crash() {
    let console = std::fs::read_to_string(corpus("bare/fault/console.log")).unwrap();
    let panic = console
        .lines()
        .find(|l| l.starts_with("KCRASH-PANIC"))
        .unwrap();
    let cr2 = word_after(panic, "cr2");
    for dump in DUMPS {
        let path = corpus(&format!("bare/fault/{dump}"));
        let out = ok(&run(&path, &vmlinux(), &["sys --json", "sys"]));
        let (json, text) = out.split_at(out.find("\n}\n").unwrap() + 3);
        let doc: Value = serde_json::from_str(json).unwrap();
        assert_eq!(doc["dumpfile"].as_str(), Some(path.to_str().unwrap()));
        assert_eq!(
            doc["size"].as_u64(),
            Some(std::fs::metadata(&path).unwrap().len())
        );
        assert_eq!(doc["cpus"].as_u64(), Some(1), "the harness runs one vCPU");
        assert_eq!(doc["image"].as_str(), Some(vmlinux().to_str().unwrap()));
        assert_eq!(doc["stops"][0]["cr2"].as_u64(), Some(cr2), "{dump}");
        assert!(doc["panic"]
            .as_str()
            .unwrap()
            .contains(&format!("{cr2:#x}")));
        assert!(doc["producer"].as_str().unwrap().contains("QEMU"));
        assert_eq!(
            doc["compression"].as_str().unwrap().contains("gzip"),
            dump.ends_with(".gz")
        );
        assert!(text.contains(&format!("cr2 {cr2:#018x}")), "{text}");
        assert!(text.contains("   DUMPFILE: "));
    }
}

#[test]
fn sys_on_a_process_core_says_signal_and_files() {
    let out = ok(&run(
        &corpus("hosted/rings/core.gz"),
        &corpus("hosted/hosted"),
        &["sys --json"],
    ));
    let doc: Value = serde_json::from_str(&out).unwrap();
    // The scenario ends in abort() (console: "KCRASH-PANIC rings: abort after logging").
    assert!(doc["panic"]
        .as_str()
        .unwrap()
        .contains("signal 6 (SIGABRT)"));
    let image = corpus("hosted/hosted");
    let backed = doc["file_backed"].as_array().unwrap();
    assert!(backed
        .iter()
        .any(|f| f["path"].as_str() == Some(image.to_str().unwrap())));
    let build_id = tool(Command::new("readelf").arg("-n").arg(&image));
    let id = build_id
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap();
    assert_eq!(doc["build_id"].as_str(), Some(id));
    // gdb's gcore of the running program records no signal, and sys does not make one up.
    let out = ok(&run(
        &corpus("hosted/strings-gcore/core.gz"),
        &image,
        &["sys --json"],
    ));
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert!(doc["panic"]
        .as_str()
        .unwrap()
        .starts_with("no signal recorded"));
}

// ---- scripting, plumbing, errors ---------------------------------------------------------------

fn kdump() -> PathBuf {
    corpus("bare/rings/vmcore.kdump")
}

#[test]
fn exit_codes_and_one_line_errors() {
    // A failed command stops the script with status 1, after the output before it.
    let o = run(
        &kdump(),
        &vmlinux(),
        &["sym KLogs", "nosuch 1", "sym KLogBuffer"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o).lines().count(), 1);
    assert_eq!(stderr(&o), "kcrash: nosuch: no such command (try help)\n");
    // --keep-going runs the rest; the status is still 1.
    let o = kcrash(&[
        "-s",
        "--keep-going",
        "-c",
        "sym KLogs",
        "-c",
        "nosuch",
        "-c",
        "sym KLogBuffer",
        kdump().to_str().unwrap(),
        vmlinux().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o).lines().count(), 2);
    // Bad input of every kind: one line on stderr each, the session goes on.
    let bad = [
        (
            "rd nosuchsymbol",
            "kcrash: rd: nosuchsymbol: no such symbol, and not a hex address",
        ),
        ("rd 0xzz", "kcrash: rd: 0xzz: not a hex address"),
        (
            "sym nosuch",
            "kcrash: sym: nosuch: no such symbol, and not a hex address",
        ),
        (
            "rd KLogs many",
            "kcrash: rd: invalid value 'many' for '[COUNT]'",
        ),
        ("rd -q KLogs", "kcrash: rd: unexpected argument '-q' found"),
        ("sym -l '('", "kcrash: sym: regex parse error:"),
        (
            "klog 0 fulll",
            "kcrash: klog: \"fulll\" is neither full nor terse",
        ),
        (
            "set scroll maybe",
            "kcrash: set: scroll is on or off, not \"maybe\"",
        ),
        ("sym KLogs |", "kcrash: nothing after |"),
        ("!exit 3", "kcrash: !exit 3: exit status: 3"),
    ];
    let mut args = vec!["-s".to_owned(), "--keep-going".to_owned()];
    for (cmd, _) in &bad {
        args.extend(["-c".into(), (*cmd).into(), "-c".into(), "sym KLogs".into()]);
    }
    args.extend([
        kdump().display().to_string(),
        vmlinux().display().to_string(),
    ]);
    let o = kcrash(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), bad.len(), "{err}");
    for ((_, want), got) in bad.iter().zip(&lines) {
        assert!(got.starts_with(want), "{got:?} should start with {want:?}");
    }
    assert_eq!(
        stdout(&o).lines().filter(|l| l.contains("KLogs")).count(),
        bad.len()
    );
    // Cannot open: status 2, one line.
    let o = kcrash(&["-c", "sys", "/nonexistent/vmcore"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).lines().count(), 1);
    let o = kcrash(&["--bogus", kdump().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).is_empty());
}

#[test]
fn command_file_and_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("triage.cmds");
    std::fs::write(
        &script,
        "# triage\nsym KLogs\n\n  # indented comment\nsym KLogBuffer\n",
    )
    .unwrap();
    let o = kcrash(&[
        "-s",
        "-i",
        script.to_str().unwrap(),
        kdump().to_str().unwrap(),
        vmlinux().to_str().unwrap(),
    ]);
    let out = ok(&o);
    assert_eq!(out.lines().count(), 2);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    let mut child = Command::new(env!("CARGO_BIN_EXE_kcrash"))
        .args([kdump().to_str().unwrap(), vmlinux().to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"sym KLogs\nq\nsym KLogBuffer\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(ok(&o).lines().count(), 1, "q ends the script");
}

#[test]
fn redirection_pipes_and_shell_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out 1.txt");
    let f = file.to_str().unwrap();
    let o = run(
        &kdump(),
        &vmlinux(),
        &[
            &format!("sym KLogs > '{f}'"),
            &format!("sym KLogBuffer >> \"{f}\""),
            "sym -l 'KLog(s|Buffer)$' | wc -l",
            "sym KLogs | tr a-z A-Z",
            "!echo from-the-shell",
            "help rd | head -1",
        ],
    );
    let out = ok(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0].trim(), "2");
    assert!(lines[1].contains("KLOGS"), "{out}");
    assert_eq!(lines[2], "from-the-shell");
    assert!(lines[3].starts_with("Display memory"), "{out}");
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(written.lines().count(), 2);
    assert!(written.starts_with(&format!("{:016x} (D) KLogs", nm(&vmlinux())["KLogs"].0)));
    assert!(!written.contains('\x1b'));
}

#[test]
fn help_and_json_everywhere() {
    let out = ok(&run(&kdump(), &vmlinux(), &["help"]));
    for name in ["klog", "sys", "sym", "rd", "set", "help", "quit"] {
        assert_eq!(
            out.lines()
                .filter(|l| l.starts_with(&format!("{name} ")))
                .count(),
            1,
            "{name}"
        );
    }
    for name in ["klog", "sys", "sym", "rd"] {
        let text = ok(&run(&kdump(), &vmlinux(), &[&format!("help {name}")]));
        assert!(text.contains("Examples:"), "help {name}");
        assert!(text.contains("--json"), "help {name}");
        let same = ok(&run(&kdump(), &vmlinux(), &[&format!("{name} --help")]));
        assert_eq!(text, same);
    }
    // Colour only when asked for: never in a pipe under auto, always under --color=always.
    let plain = ok(&run(&kdump(), &vmlinux(), &["rd KLogs 2"]));
    assert!(!plain.contains('\x1b'));
    let o = kcrash(&[
        "-s",
        "--color=always",
        "-c",
        "rd KLogs 2",
        kdump().to_str().unwrap(),
        vmlinux().to_str().unwrap(),
    ]);
    assert!(ok(&o).contains("\x1b["));
}

// ---- the prompt --------------------------------------------------------------------------------

/// An interactive session under a pseudo-terminal (python3's pty module drives it; see
/// tests/pty_session.py for the steps).
#[test]
fn interactive_session_under_a_terminal() {
    if !have("python3") {
        eprintln!("python3 not found: the terminal session is not tested");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let o = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pty_session.py"))
        .arg(env!("CARGO_BIN_EXE_kcrash"))
        .arg(kdump())
        .arg(vmlinux())
        .arg(home.path())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `rd -p` over a megabyte of the guest's RAM prints what `xxd -e -g8` prints of the same bytes of
/// QEMU's ELF dump (units and ASCII column; the addresses differ by the segment's file offset).
#[test]
fn rd_physical_agrees_with_xxd() {
    if !have("xxd") || !have("gzip") || !have("readelf") {
        eprintln!("xxd, gzip or readelf not found: rd is not compared with xxd");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let elf = dir.path().join("vmcore.elf");
    let raw = Command::new("gzip")
        .arg("-dc")
        .arg(corpus("bare/rings/vmcore.elf.gz"))
        .output()
        .unwrap();
    std::fs::write(&elf, raw.stdout).unwrap();
    // The first PT_LOAD holds guest physical 0 onwards.
    let headers = tool(Command::new("readelf").arg("-lW").arg(&elf));
    let load = headers
        .lines()
        .find(|l| l.trim_start().starts_with("LOAD"))
        .unwrap();
    let f: Vec<&str> = load.split_whitespace().collect();
    let offset = u64::from_str_radix(f[1].trim_start_matches("0x"), 16).unwrap();
    assert_eq!(f[3], "0x0000000000000000", "{load}");
    let (start, len) = (0x100000u64, 0x100000u64);
    let xxd = tool(
        Command::new("xxd")
            .args([
                "-e",
                "-g8",
                "-s",
                &(offset + start).to_string(),
                "-l",
                &len.to_string(),
            ])
            .arg(&elf),
    );
    let out = ok(&run(
        &elf,
        &vmlinux(),
        &[&format!("rd -p {start:#x} {}", len / 8)],
    ));
    let body = |line: &str| -> String {
        let (_, rest) = line.split_once(':').unwrap();
        rest.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let ours: Vec<String> = out.lines().map(body).collect();
    let theirs: Vec<String> = xxd.lines().map(body).collect();
    assert_eq!(ours.len(), (len / 16) as usize);
    assert_eq!(ours, theirs);
}

/// A PIE program's symbols move by its load bias: the ring buffer address the program printed
/// (console.log's KLOG-RING line for ring 0) is `KLogBuffer` in `nm`, and `KLogs` moves by as much.
#[test]
fn sym_on_a_process_core_applies_the_load_bias() {
    if !have("nm") {
        return;
    }
    let image = corpus("hosted/hosted");
    let nm = nm(&image);
    let console = std::fs::read_to_string(corpus("hosted/rings/console.log")).unwrap();
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
    let out = ok(&run(
        &corpus("hosted/rings/core.gz"),
        &image,
        &[&format!("sym {buffer:#x} --json"), "sym KLogs --json"],
    ));
    let docs = json_lines(&out);
    assert_eq!(docs[0]["symbol"].as_str(), Some("KLogBuffer"));
    assert_eq!(docs[0]["offset"].as_u64(), Some(0));
    assert_eq!(docs[1]["address"].as_u64(), Some(nm["KLogs"].0 + bias));
}
