//! `kcrash [DUMP|FILE@ADDRESS] [IMAGE] [MODULE.ko...]`: a crash(8)-style session on a dump, a
//! raw memory image, or the running kernel. A thin shell over the library.

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use indicatif::{ProgressBar, ProgressStyle};
use kcrash::commands::{Flow, Settings};
use kcrash::error::{one_line, report, Error};
use kcrash::linux::ko::{find_ko, module_name};
use kcrash::linux::live::{self, is_live_path};
use kcrash::paint::{ColorChoice, Paint};
use kcrash::regress::{report, Corpus, EntryRun, Options};
use kcrash::session::{is_gzip, open_dump, sort_files, Session};
use kcrash::shell::{Completion, Shell};
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{Behavior, CompletionType, Config, Editor};

/// Crash-dump inspection for kernel engineers: the KLog event rings, symbols and memory of a
/// QEMU vmcore, a kdump file, a raw memory image or a process core.
#[derive(Parser, Debug)]
#[command(name = "kcrash", version)]
#[command(after_help = "\
Examples:
  kcrash vmcore vmlinux
  kcrash -c 'klog 0 full' vmcore vmlinux
  kcrash -c 'p KLogs[2]' vmcore vmlinux klogtest.ko
  kcrash -c sys -c 'rd -s KLogs 16' vmcore vmlinux
  kcrash -i triage.cmds vmcore vmlinux > report.txt
  kcrash -c 'rd -p 0x100000 8' guest.mem@0 vmlinux   (raw memory: QEMU pmemsave, virsh)
  sudo kcrash -c 'klog 0 full'                 (the running kernel; KLogs' module found by itself)
  sudo kcrash -c 'klog --follow' klogtest.ko
  echo 'klog SCHED' | kcrash core.1234

  kcrash regress corpus --junit report.xml   (kcrash regress --help)

Without -c, -i or piped standard input, kcrash prompts; history is kept in ~/.kcrash_history.
Output on a terminal goes through $PAGER (default less -FRX; LESS=FRX when LESS is unset)
unless --no-pager.

Exit status: 0 when every command succeeded, 1 when a command failed, 2 when the dump could
not be opened or the arguments are wrong.")]
struct Cli {
    /// The dump and its image (vmlinux, the program), in any order; a process core finds its
    /// executable by itself when it is present. Kernel modules' `.ko` files load at their
    /// addresses in the dump (as `mod -s`). Without a dump, or with /proc/kcore, the running
    /// kernel (as root). A raw physical memory image (QEMU's pmemsave, a console's raw memory
    /// dump; plain or gzipped) is FILE@ADDRESS, as in crash: the file's first byte is physical
    /// ADDRESS (hex with 0x, or decimal; k, m or g multiplies by KiB, MiB, GiB), e.g.
    /// guest.mem@0. Without an image it holds only physical memory (rd -p); klog needs the
    /// image. A file whose name holds @ is still that file when it exists.
    #[arg(value_name = "DUMP|FILE@ADDRESS [IMAGE] [MODULE.ko]")]
    files: Vec<PathBuf>,
    /// Run this command, then exit (repeatable; run in order).
    #[arg(short = 'c', long = "command", value_name = "CMD")]
    commands: Vec<String>,
    /// Run the commands in FILE (one per line, `#` comments), each echoed before its output
    /// (`set silent on` in the file stops that), then exit.
    #[arg(short = 'i', long = "input", value_name = "FILE")]
    input: Option<PathBuf>,
    /// Silent start: no banner or notes about the dump.
    #[arg(short = 's', long)]
    silent: bool,
    /// In scripted mode, run the remaining commands after one fails (the exit status is still 1).
    #[arg(long)]
    keep_going: bool,
    /// Never page output (as `set scroll off`).
    #[arg(long)]
    no_pager: bool,
    /// Colour: on a terminal only (auto; NO_COLOR turns it off), always, or never.
    #[arg(long, value_name = "WHEN", default_value = "auto")]
    color: ColorChoice,
    /// Also read event schemata from FILE, or from every schema file in DIR (repeatable);
    /// besides those kcrash ships and those in ~/.config/kcrash/schemata. `schema` lists them.
    #[arg(long = "schema", value_name = "FILE|DIR")]
    schemata: Vec<PathBuf>,
}

/// Run a corpus's checks on every dump (corpus/README.md) and compare each output with the
/// expected one.
#[derive(Parser, Debug)]
#[command(name = "kcrash regress", version)]
#[command(after_help = "\
Examples:
  kcrash regress corpus
  kcrash regress corpus --filter '^hosted/' --jobs 1
  kcrash regress corpus --json report.json --junit report.xml
  kcrash regress corpus --update        after a deliberate change of output
  kcrash regress corpus --shard 2/4     the second of four machines' share

Exit status: 0 when every check passed, 1 when one failed or could not run (a missing or
unreadable dump, image or expected file), 2 when the manifest or the arguments are wrong.")]
struct RegressCli {
    /// The corpus directory, holding manifest.toml.
    dir: PathBuf,
    /// Entries run at once (default: one per core).
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Also write the results as JSON to FILE (- for standard output).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write the results as JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Rewrite each expected file from the output of the entry's first readable dump, and say
    /// what changed; the other dumps are still checked against it.
    #[arg(long)]
    update: bool,
    /// Only entries whose name matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    filter: Option<regex::Regex>,
    /// Only the K-th of N shares of the entries (every N-th from the K-th in name order), for
    /// spreading a corpus over machines.
    #[arg(long, value_name = "K/N")]
    shard: Option<kcrash::batch::sources::Shard>,
    /// Colour: on a terminal only (auto; NO_COLOR turns it off), always, or never.
    #[arg(long, value_name = "WHEN", default_value = "auto")]
    color: ColorChoice,
}

/// kcrash's command line as clap defines it, with the commands listed from the table `help`
/// prints, so the list is never out of date.
fn command_line() -> clap::Command {
    let cli = Cli::command();
    let after = cli
        .get_after_help()
        .map(|h| h.to_string())
        .unwrap_or_default();
    let list = kcrash::commands::help::list(Paint::default());
    let list: String = list.lines().map(|l| format!("  {l}\n")).collect();
    cli.after_help(format!(
        "Commands (help CMD at the prompt for each one's text):\n{list}\n{after}"
    ))
}

fn main() -> ExitCode {
    // `kcrash regress DIR`, `kcrash batch ...`, `kcrash merge ...`, `kcrash man`, `kcrash
    // completions SHELL`: a dump or image of one of these names is `./regress` and so on.
    match std::env::args_os().nth(1) {
        Some(a) if a == "regress" => return regress(std::env::args_os().skip(1)),
        Some(a) if a == "batch" => return kcrash::batch::main(std::env::args_os().skip(1)),
        Some(a) if a == "merge" => return kcrash::batch::merge_main(std::env::args_os().skip(1)),
        Some(a) if a == "man" => return man_page(),
        Some(a) if a == "completions" => return completions(std::env::args_os().nth(2)),
        _ => {}
    }
    let cli = match parse_args::<Cli>(command_line(), std::env::args_os()) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let errors = cli.color.stderr();
    let files = match sort_files(&cli.files) {
        Ok(v) => v,
        Err(e) => return fail_open(errors, &e.to_string()),
    };
    let live = files.phys_start.is_none() && is_live_path(&files.dump);
    let opened = if live {
        dumpfmt::Dump::open_live(&files.dump).map_err(|e| live::open_failure(&files.dump, &e))
    } else {
        if is_gzip(&files.dump) {
            eprintln!(
                "kcrash: {} is gzip-compressed; decompressing it once to a temporary file...",
                files.dump.display()
            );
        }
        open_dump(&files.dump, files.phys_start).map_err(|e| e.to_string())
    };
    let dump = match opened {
        Ok(d) => d,
        Err(e) => return fail_open(errors, &e),
    };
    let mut session = match Session::open(&dump, files.image) {
        Ok(s) => s,
        Err(e) => return fail_open(errors, &e.to_string()),
    };
    session.schemata.add_config_dir();
    for path in &cli.schemata {
        session.schemata.add_path(path);
    }
    // A refused schema file is left out, not fatal: one line each, whatever -s says.
    for why in &session.schemata.refused {
        eprintln!("kcrash: {}", one_line(why));
    }
    // Modules on the command line load as `mod -s NAME FILE` would, as drgn's -s does.
    for ko in &files.modules {
        let loaded = match module_name(ko) {
            Some(name) => session.load_module(&name, ko),
            None => Err(Error::Usage(format!(
                "{}: a module's file is NAME.ko",
                ko.display()
            ))),
        };
        if let Err(e) = loaded {
            return fail_open(errors, &e.to_string());
        }
    }
    if live && files.modules.is_empty() {
        load_klog_module(&session, cli.silent);
    }
    if !cli.silent {
        // Notes name files and values from the dump: one line each, control bytes escaped.
        for note in &session.notes {
            eprintln!("kcrash: {}", one_line(note));
        }
    }
    let mut lines: Vec<Line> = cli.commands.iter().map(|c| Line::given(c)).collect();
    if let Some(file) = &cli.input {
        match std::fs::read_to_string(file) {
            Ok(text) => lines.extend(text.lines().enumerate().map(|(i, l)| Line {
                text: l.to_owned(),
                from: Some((file.display().to_string(), i + 1)),
            })),
            Err(e) => return fail_open(errors, &format!("{}: {e}", file.display())),
        }
    }
    let settings = Settings {
        scroll: !cli.no_pager,
        color: cli.color,
        ..Settings::plain()
    };
    let mut shell = Shell::new(&session, settings);
    run_rc_files(&mut shell, errors);
    let stdin = io::stdin();
    let scripted = !lines.is_empty() || !stdin.is_terminal();
    if scripted && lines.is_empty() {
        return script(
            &mut shell,
            stdin
                .lock()
                .lines()
                .map_while(Result::ok)
                .map(|l| Line::given(&l)),
            cli.keep_going,
            errors,
        );
    }
    if scripted {
        script(&mut shell, lines.into_iter(), cli.keep_going, errors)
    } else {
        prompt(&mut shell, cli.silent, cli.color)
    }
}

/// `~/.kcrashrc`, then `./.kcrashrc`, as crash reads its `.crashrc` files: their commands
/// (aliases, settings) run before any other, without echo; an error is one line naming
/// `FILE:LINE` and the rest still runs. The current directory's file is read only when it is
/// the user's own and no one else may write it: a dump's directory may be anyone's, and the
/// file could run shell commands.
fn run_rc_files(shell: &mut Shell<'_, '_>, errors: Paint) {
    let home = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kcrashrc"));
    let here = PathBuf::from(".kcrashrc");
    let same = |a: &Path, b: &Path| {
        std::fs::canonicalize(a).is_ok_and(|a| std::fs::canonicalize(b).is_ok_and(|b| a == b))
    };
    let here = (!home.as_deref().is_some_and(|h| same(h, &here))).then_some(here);
    for (file, checked) in [(home, false), (here, true)] {
        let Some(file) = file else { continue };
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                eprintln!("{} {}: {e}", errors.bad("kcrash:"), file.display());
                continue;
            }
        };
        if checked {
            if let Some(why) = untrusted(&file) {
                eprintln!(
                    "{} {}: not read: {why}",
                    errors.bad("kcrash:"),
                    file.display()
                );
                continue;
            }
        }
        for (i, line) in text.lines().enumerate() {
            if let Err(e) = shell.run_line(line, &mut io::stderr()) {
                let place = format!("{}:{}:", file.display(), i + 1);
                eprintln!("{} {place} {}", errors.bad("kcrash:"), report(e.as_ref()));
            }
        }
    }
}

/// Why a file of commands in the current directory is not to be run: not the user's, or
/// writable by others.
#[cfg(unix)]
fn untrusted(file: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(file).ok()?;
    // /proc/self belongs to the process's effective user.
    let me = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
    if me != Some(meta.uid()) {
        return Some(format!("it belongs to user {}, not to you", meta.uid()));
    }
    (meta.mode() & 0o022 != 0).then(|| "others may write it".to_owned())
}

#[cfg(not(unix))]
fn untrusted(_: &Path) -> Option<String> {
    None
}

/// On a running kernel without a `.ko` on the command line: when a module defines `KLogs`
/// (/proc/kallsyms says which) and the kernel image given has none, load that module's `.ko`
/// from /lib/modules/RELEASE. What fails is said, and `klog` then says what to give.
fn load_klog_module(session: &Session<'_>, silent: bool) {
    if session
        .image
        .as_ref()
        .is_some_and(|i| i.symbol("KLogs").is_some())
    {
        return;
    }
    let name = match live::module_defining("KLogs") {
        Ok(Some(name)) => name,
        Ok(None) => return,
        Err(e) => return eprintln!("kcrash: {e}"),
    };
    let Some(release) = live::release() else {
        return;
    };
    let dir = PathBuf::from("/lib/modules").join(release);
    let Some(ko) = find_ko(&dir, &name) else {
        return eprintln!(
            "kcrash: module {name} holds KLogs, but {name}.ko is not under {}: give it on the command line",
            dir.display()
        );
    };
    match session.load_module(&name, &ko) {
        Ok(_) if silent => {}
        Ok(_) => eprintln!("kcrash: KLogs is in module {name}: loaded {}", ko.display()),
        Err(e) => eprintln!("kcrash: {e}"),
    }
}

/// Ctrl-C stops the running command, not kcrash.
fn catch_ctrl_c() {
    if let Err(e) = kcrash::interrupt::install() {
        eprintln!("kcrash: {e}");
    }
}

fn fail_open(paint: Paint, msg: &str) -> ExitCode {
    eprintln!("{} {}", paint.bad("kcrash:"), one_line(msg));
    ExitCode::from(2)
}

/// A command of a script, and where it was written when it comes from a command file.
struct Line {
    text: String,
    from: Option<(String, usize)>,
}

impl Line {
    /// A command given by `-c` or on standard input.
    fn given(text: &str) -> Line {
        Line {
            text: text.to_owned(),
            from: None,
        }
    }
}

/// Runs `lines` in order; output to stdout, diagnostics to stderr, status 1 if any failed. A
/// command file's commands are echoed (`kcrash> CMD`) before their output unless `set silent
/// on`, as crash does, and their errors say `FILE:LINE`.
fn script(
    shell: &mut Shell<'_, '_>,
    lines: impl Iterator<Item = Line>,
    keep_going: bool,
    errors: Paint,
) -> ExitCode {
    catch_ctrl_c();
    let mut failed = false;
    for line in lines {
        let command = line.text.trim();
        let echo = line.from.is_some() && !command.is_empty() && !command.starts_with('#');
        if echo && !shell.settings.silent {
            let mut out = io::stdout().lock();
            // A closed stdout is the command's to report.
            let _ = writeln!(out, "kcrash> {}", line.text).and_then(|()| out.flush());
        }
        match shell.run_line(&line.text, &mut io::stderr()) {
            Ok(Flow::Quit) => break,
            Ok(Flow::Continue) => {}
            Err(e) => {
                let place = match &line.from {
                    Some((file, n)) => format!("{file}:{n}: "),
                    None => String::new(),
                };
                eprintln!("{} {place}{}", errors.bad("kcrash:"), report(e.as_ref()));
                failed = true;
                // Ctrl-C ends a script even with --keep-going.
                if !keep_going || kcrash::interrupt::requested() {
                    break;
                }
            }
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The interactive prompt: line editing, completion, history in ~/.kcrash_history.
fn prompt(shell: &mut Shell<'_, '_>, silent: bool, color: ColorChoice) -> ExitCode {
    let errors = color.stderr();
    if !silent {
        eprintln!(
            "kcrash {}: {} — type help",
            env!("CARGO_PKG_VERSION"),
            shell.session.dump.path().display()
        );
    }
    // Tab completes as far as the candidates agree; a second Tab lists them, as readline does.
    // The prompt and the line being edited go to the terminal (/dev/tty) when standard output
    // is redirected: only the commands' output goes there.
    let config = Config::builder().max_history_size(10_000).map(|b| {
        b.auto_add_history(true)
            .completion_type(CompletionType::List)
            .behavior(Behavior::PreferTerm)
            .build()
    });
    let editor = config.and_then(Editor::<Completion, FileHistory>::with_config);
    let mut editor = match editor {
        Ok(e) => e,
        Err(e) => {
            eprintln!("kcrash: cannot start the prompt: {e}");
            return ExitCode::from(2);
        }
    };
    // After the editor, which puts its own SIGINT handler in place; ours chains to it.
    catch_ctrl_c();
    // The prompt goes to the terminal, whatever standard output is.
    let prompt_paint = color.paint_for(true);
    editor.set_helper(Some(Completion::new(shell.session, prompt_paint)));
    let history = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".kcrash_history"));
    if let Some(path) = &history {
        // A first session has no history file yet.
        let _ = editor.load_history(path);
    }
    let status = 'prompt: loop {
        match editor.readline("kcrash> ") {
            // A paste of several lines comes as one (the terminal's bracketed paste): each of
            // its lines is a command, run in order.
            Ok(text) => {
                for line in text.split(['\n', '\r']) {
                    match shell.run_line(line, &mut io::stderr()) {
                        Ok(Flow::Quit) => break 'prompt ExitCode::SUCCESS,
                        Ok(Flow::Continue) => {}
                        Err(e) => eprintln!("{} {}", errors.bad("kcrash:"), report(e.as_ref())),
                    }
                }
            }
            // Ctrl-C at the prompt drops the line, as in a shell.
            Err(ReadlineError::Interrupted) => {}
            Err(ReadlineError::Eof) => break ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kcrash: {e}");
                break ExitCode::from(1);
            }
        }
    };
    if let Some(path) = &history {
        if let Err(e) = editor.save_history(path) {
            eprintln!("kcrash: {}: {e}", path.display());
        }
    }
    status
}

/// The command line `cli` parses from `args`, or the exit status after clap printed help (0) or
/// a usage error (2).
fn parse_args<C: Parser>(
    cli: clap::Command,
    args: impl Iterator<Item = std::ffi::OsString>,
) -> Result<C, ExitCode> {
    let parsed = cli
        .try_get_matches_from(args)
        .and_then(|m| C::from_arg_matches(&m));
    parsed.map_err(|e| {
        let code = if e.use_stderr() { 2 } else { 0 };
        let _ = e.print();
        ExitCode::from(code)
    })
}

/// `kcrash man`: the manual page (roff), from the same definitions as `--help`.
fn man_page() -> ExitCode {
    let mut out = io::stdout().lock();
    match clap_mangen::Man::new(command_line()).render(&mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kcrash: man: {e}");
            ExitCode::from(1)
        }
    }
}

/// `kcrash completions SHELL`: a completion script for bash, zsh, fish, elvish or PowerShell.
fn completions(shell: Option<std::ffi::OsString>) -> ExitCode {
    use std::str::FromStr;
    let name = shell
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Ok(shell) = clap_complete::Shell::from_str(&name) else {
        eprintln!("kcrash: completions: give a shell: bash, zsh, fish, elvish or powershell");
        return ExitCode::from(2);
    };
    clap_complete::generate(shell, &mut command_line(), "kcrash", &mut io::stdout());
    ExitCode::SUCCESS
}

fn regress(args: impl Iterator<Item = std::ffi::OsString>) -> ExitCode {
    let cli = match parse_args::<RegressCli>(RegressCli::command(), args) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let errors = cli.color.stderr();
    let corpus = match Corpus::open(&cli.dir) {
        Ok(c) => c,
        Err(e) => return fail_open(errors, &e),
    };
    let options = Options {
        jobs: cli.jobs.map(usize::from),
        update: cli.update,
        filter: cli.filter,
        shard: cli.shard,
    };
    let entries = corpus.selected(&options);
    if entries.is_empty() && options.shard.is_none() {
        return fail_open(errors, "no entry of the manifest matches --filter");
    }
    // Progress on a terminal only; the summary and the report say the rest.
    let bar = if io::stderr().is_terminal() {
        ProgressBar::new(entries.len() as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} entries {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let done = |run: &EntryRun| {
        bar.set_message(run.name.clone());
        bar.inc(1);
    };
    let run = match corpus.run(&entries, &options, &done) {
        Ok(run) => run,
        Err(e) => return fail_open(errors, &e),
    };
    bar.finish_and_clear();
    let paint = cli.color.paint_for(io::stdout().is_terminal());
    let mut status = if run.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    let mut wrote = |what: &PathBuf, text: String| {
        let result = if what.as_os_str() == "-" {
            io::stdout().write_all(text.as_bytes())
        } else {
            std::fs::write(what, text)
        };
        if let Err(e) = result {
            eprintln!("{} {}: {e}", errors.bad("kcrash:"), what.display());
            status = ExitCode::from(2);
        }
    };
    if let Some(path) = &cli.junit {
        wrote(path, report::junit(&run));
    }
    let json_to_stdout = cli.json.as_ref().is_some_and(|p| p.as_os_str() == "-");
    if let Some(path) = &cli.json {
        let mut text = serde_json::to_string_pretty(&report::json(&run)).unwrap_or_default();
        text.push('\n');
        wrote(path, text);
    }
    // With the JSON on standard output, the text report goes to standard error.
    let text = if json_to_stdout {
        report::write_text(&run, &mut io::stderr(), errors)
    } else {
        report::write_text(&run, &mut io::stdout().lock(), paint)
    };
    if let Err(e) = text {
        eprintln!("{} {e}", errors.bad("kcrash:"));
        status = ExitCode::from(2);
    }
    status
}
