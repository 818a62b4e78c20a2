//! The shell itself, through the real binary on a corpus dump: exit codes and one-line errors,
//! command files and standard input, redirection, pipes and shell escapes, `help` and `--json`
//! everywhere, and an interactive session under a terminal. The commands' own output is checked
//! in sym.rs, rd.rs and sys.rs.

use std::path::Path;
use std::process::Command;

mod common;

use common::{kcrash, kdump, nm, text, vmlinux};
use kcrash_harness::run::stdout;
use kcrash_harness::tools;

#[test]
fn exit_codes_and_one_line_errors() {
    // A failed command stops the script with status 1, after the output before it.
    let o = kcrash().commands(
        &kdump(),
        &vmlinux(),
        &["sym KLogs", "nosuch 1", "sym KLogBuffer"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o.stdout).lines().count(), 1);
    assert_eq!(
        text(&o.stderr),
        "kcrash: nosuch: no such command (try help)\n"
    );
    // --keep-going runs the rest; the status is still 1.
    let o = kcrash().run([
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
    assert_eq!(text(&o.stdout).lines().count(), 2);
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
        // clap's whole message on one line: what is missing, the argument that was meant.
        (
            "sym",
            "kcrash: sym: the following required arguments were not provided: <NAME|ADDR>... \
             (help sym)",
        ),
        (
            "sym --jsno KLogs",
            "kcrash: sym: unexpected argument '--jsno' found; tip: a similar argument exists: \
             '--json' (help sym)",
        ),
        ("sym -l '('", "kcrash: sym: regex parse error:"),
        (
            "klog 0 fulll",
            "kcrash: klog: \"fulll\" is neither full nor terse",
        ),
        (
            "set scroll maybe",
            "kcrash: set: scroll is on or off, not \"maybe\"",
        ),
        ("set radix 8", "kcrash: set: radix is 10 or 16, not \"8\""),
        (
            "set 1",
            "kcrash: set: a task needs a Linux kernel dump and its vmlinux; here a CPU is chosen \
             by bt -c",
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
    let o = kcrash().run(args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), bad.len(), "{err}");
    for ((_, want), got) in bad.iter().zip(&lines) {
        assert!(got.starts_with(want), "{got:?} should start with {want:?}");
    }
    assert_eq!(
        text(&o.stdout)
            .lines()
            .filter(|l| l.contains("KLogs"))
            .count(),
        bad.len()
    );
    // Cannot open: status 2, one line.
    let o = kcrash().run(["-c", "sys", "/nonexistent/vmcore"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o.stderr).lines().count(), 1);
    let o = kcrash().run(["--bogus", kdump().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stdout).is_empty());
}

/// Lines of input that are megabytes long or hold NULs and escape sequences come back in error
/// lines escaped and cut to their start and their reason, one line each.
#[test]
fn hostile_input_lines_are_echoed_escaped_and_bounded() {
    let mut input = "x".repeat(3_000_000).into_bytes();
    input.extend_from_slice(b"\nrd \0\x1b[2J 4\np ");
    input.extend(std::iter::repeat_n(b'a', 200_000));
    input.extend_from_slice(b"\nsym \x1b[31mfoo\n");
    let mut child = kcrash()
        .command()
        .args([
            "--keep-going",
            kdump().to_str().unwrap(),
            vmlinux().to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(&input).unwrap();
    });
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        !o.stderr.iter().any(|&b| b < 0x20 && b != b'\n'),
        "a raw control byte in an error line"
    );
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert!(lines.iter().all(|l| l.chars().count() < 500), "{err}");
    assert!(
        lines[0].ends_with(": no such command (try help)"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("characters left out]"), "{}", lines[0]);
    assert!(
        lines[1].starts_with(r"kcrash: rd: \x00\x1b[2J: "),
        "{}",
        lines[1]
    );
    assert!(
        lines[3].starts_with(r"kcrash: sym: \x1b[31mfoo: "),
        "{}",
        lines[3]
    );
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
    let o = kcrash().run([
        "-s",
        "-i",
        script.to_str().unwrap(),
        kdump().to_str().unwrap(),
        vmlinux().to_str().unwrap(),
    ]);
    // Each command echoed before its output, as crash echoes a command file's; comments and
    // blank lines not.
    let out = stdout(&o, "kcrash");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(
        (lines[0], lines[2]),
        ("kcrash> sym KLogs", "kcrash> sym KLogBuffer")
    );
    assert!(
        lines[1].contains(" KLogs ") && lines[3].contains(" KLogBuffer "),
        "{out}"
    );
    assert!(text(&o.stderr).is_empty(), "{}", text(&o.stderr));
    // `set silent on` stops the echo; an error names the file and line.
    std::fs::write(&script, "set silent on\nsym KLogs\nsym nonesuch\n").unwrap();
    let o = kcrash().run([
        "-s",
        "-i",
        script.to_str().unwrap(),
        kdump().to_str().unwrap(),
        vmlinux().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let out = text(&o.stdout);
    assert_eq!(out.lines().collect::<Vec<_>>().len(), 2, "{out}");
    assert!(out.starts_with("kcrash> set silent on\n"), "{out}");
    let err = text(&o.stderr);
    assert!(
        err.starts_with(&format!("kcrash: {}:3: sym", script.display())),
        "{err}"
    );
    let mut child = kcrash()
        .command()
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
    assert_eq!(stdout(&o, "kcrash").lines().count(), 1, "q ends the script");
}

#[test]
fn redirection_pipes_and_shell_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out 1.txt");
    let f = file.to_str().unwrap();
    let o = kcrash().commands(
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
    let out = stdout(&o, "kcrash");
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
    let out = stdout(
        &kcrash().commands(&kdump(), &vmlinux(), &["help"]),
        "kcrash",
    );
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
        let text = stdout(
            &kcrash().commands(&kdump(), &vmlinux(), &[&format!("help {name}")]),
            "kcrash",
        );
        assert!(text.contains("Examples:"), "help {name}");
        assert!(text.contains("--json"), "help {name}");
        let same = stdout(
            &kcrash().commands(&kdump(), &vmlinux(), &[&format!("{name} --help")]),
            "kcrash",
        );
        assert_eq!(text, same);
    }
    // Colour only when asked for: never in a pipe under auto, always under --color=always.
    let plain = stdout(
        &kcrash().commands(&kdump(), &vmlinux(), &["rd KLogs 2"]),
        "kcrash",
    );
    assert!(!plain.contains('\x1b'));
    let o = coloured("rd KLogs 2");
    assert!(stdout(&o, "kcrash").contains("\x1b["));
}

/// An interactive session under a pseudo-terminal (python3's pty module drives it; see
/// tests/pty_session.py for the steps).
#[test]
fn interactive_session_under_a_terminal() {
    if !tools::runs("interactive_session_under_a_terminal", "python3") {
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

/// `help` lists every command with the summaries in one column, coloured or not; `kcrash
/// --help` lists the same commands.
#[test]
fn help_lists_every_command_aligned_and_so_does_dash_dash_help() {
    let coloured = coloured("help");
    let coloured = stdout(&coloured, "help");
    assert!(coloured.contains("\x1b["), "asked for colour");
    let plain = regex::Regex::new("\x1b\\[[0-9;]*m")
        .unwrap()
        .replace_all(&coloured, "")
        .into_owned();
    let rows: Vec<&str> = plain
        .lines()
        .filter(|l| !l.starts_with("Output:"))
        .collect();
    assert!(rows.len() >= 15, "{plain}");
    let column = |l: &str| {
        l.find(' ')
            .map(|i| i + l[i..].len() - l[i..].trim_start().len())
    };
    let first = column(rows[0]);
    for l in &rows {
        assert_eq!(column(l), first, "not aligned: {l:?}\n{plain}");
    }
    let o = kcrash().run(["--help"]);
    let long = stdout(&o, "--help");
    for l in &rows {
        let name = l.split_whitespace().next().unwrap();
        assert!(
            long.contains(&format!("\n  {name} ")),
            "--help lacks {name}"
        );
        // Every command's own text ends its last line.
        let help = format!("help {name}");
        let text = stdout(&kcrash().commands(&kdump(), &vmlinux(), &[&help]), &help);
        assert!(
            text.ends_with('\n') && !text.ends_with("\n\n\n"),
            "{help}: {text:?}"
        );
    }
}

/// `kcrash man` and `kcrash completions SHELL` come from the same definitions as `--help`: the
/// page names every option and command, renders with man(1) where it is installed, and bash
/// takes the completion script.
#[test]
fn man_page_and_completions_come_from_the_command_line() {
    let page = stdout(&kcrash().run(["man"]), "man");
    assert!(
        page.starts_with(".ie") || page.contains(".TH kcrash 1"),
        "{page}"
    );
    let help = stdout(&kcrash().run(["--help"]), "--help");
    // The option lines of --help: `  -c, --command <CMD>  ...`, `      --keep-going  ...`.
    let options: Vec<&str> = help
        .lines()
        .filter(|l| l.trim_start().starts_with('-') && l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("--")))
        .collect();
    assert!(options.len() >= 8, "{help}");
    for option in options {
        let roff = option.replace('-', "\\-");
        assert!(page.contains(&roff), "the man page lacks {option}");
    }
    for command in ["klog", "timeline", "dis", "tracelog"] {
        assert!(
            page.contains(&format!("  {command} ")),
            "the man page lacks {command}"
        );
    }
    if tools::find("man").is_some() {
        let mut man = Command::new("man")
            .args(["-l", "-"])
            .env("MANPAGER", "cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        man.stdin
            .take()
            .unwrap()
            .write_all(page.as_bytes())
            .unwrap();
        let o = man.wait_with_output().unwrap();
        assert!(o.status.success() && text(&o.stdout).contains("OPTIONS"));
    }
    let script = stdout(&kcrash().run(["completions", "bash"]), "completions");
    let o = Command::new("bash")
        .arg("-c")
        .arg("eval \"$1\" && complete -p kcrash")
        .arg("bash")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        text(&o.stdout).contains("-F _kcrash kcrash"),
        "{}",
        text(&o.stderr)
    );
    for shell in ["zsh", "fish"] {
        let script = stdout(&kcrash().run(["completions", shell]), shell);
        assert!(
            script.contains("kcrash") && script.contains("keep-going"),
            "{shell}"
        );
    }
    assert_eq!(kcrash().run(["completions", "tcsh"]).status.code(), Some(2));
}

/// `~/.kcrashrc` and `./.kcrashrc` run first (aliases, settings), an error in them naming its
/// line; the current directory's only when no one else may write it. `alias` names command
/// lines, never hides a command, and expands once.
#[test]
fn rc_files_and_aliases() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let here = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join(".kcrashrc"),
        "alias kl klog 0 full\n# a comment\nnonesuch\nalias loop loop\n",
    )
    .unwrap();
    let local = here.path().join(".kcrashrc");
    std::fs::write(&local, "alias s1 sym KLogs\n").unwrap();
    std::fs::set_permissions(&local, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = |commands: &[&str]| {
        kcrash()
            .session(commands)
            .env("HOME", home.path())
            .current_dir(here.path())
            .args([kdump(), vmlinux()])
            .output()
            .unwrap()
    };
    let o = run(&["kl -n 1", "s1", "alias kl"]);
    let out = stdout(&o, "aliases");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].starts_with("[ ") && lines[0].contains("]["),
        "klog 0 full -n 1: {out}"
    );
    assert!(lines[1].contains(" (D) KLogs "), "{out}");
    assert_eq!(lines[2], "kl\tklog 0 full");
    let err = text(&o.stderr);
    let rc = home.path().join(".kcrashrc");
    assert!(
        err.contains(&format!(
            "kcrash: {}:3: nonesuch: no such command",
            rc.display()
        )),
        "{err}"
    );
    // A quoted name, not ASCII: the text is what follows its word as typed.
    let o = run(&["alias \"kö\" klog 0 full -n 1", "kö"]);
    assert_eq!(stdout(&o, "quoted alias").lines().count(), 1);
    // An alias of itself is run once, as the command it names, not again.
    let o = run(&["loop"]);
    assert!(
        text(&o.stderr).contains("loop: no such command"),
        "{}",
        text(&o.stderr)
    );
    // A command's name cannot be an alias.
    let o = run(&["alias klog sym KLogs"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("klog is a command"));
    // Writable by others: not read, and said.
    std::fs::set_permissions(&local, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = run(&["s1"]);
    let err = text(&o.stderr);
    assert!(
        err.contains(".kcrashrc: not read: others may write it"),
        "{err}"
    );
    assert!(err.contains("s1: no such command"), "{err}");
}

/// `kcrash -s --color=always -c COMMAND` on the bare kernel's kdump.
fn coloured(command: &str) -> std::process::Output {
    kcrash()
        .command()
        .args(["-s", "--color=always", "-c", command])
        .args([kdump(), vmlinux()])
        .output()
        .unwrap()
}
