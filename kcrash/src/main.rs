//! `kcrash [DUMP] [IMAGE] [MODULE.ko...]`: a crash(8)-style session on a dump, or on the running
//! kernel. A thin shell over the library.

use std::io::{self, BufRead, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use kcrash::commands::modules::{find_ko, module_name};
use kcrash::linux::live::{self, is_live_path};
use kcrash::paint::{ColorChoice, Paint};
use kcrash::session::{sort_files, Session};
use kcrash::shell::{one_line, Completion, Flow, Settings, Shell};
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{Config, Editor};

/// Crash-dump inspection for kernel engineers: the KLog event rings, symbols and memory of a
/// QEMU vmcore, a kdump file or a process core.
#[derive(Parser, Debug)]
#[command(name = "kcrash", version)]
#[command(after_help = "\
Commands (help CMD at the prompt for each one's text):
  klog [SUBSYS] [full|terse]   the kernel event log
  sys                          the dump, its image, CPUs, VMCOREINFO, the crash
  log [-t|-T] [-m]             Linux's kernel message log
  mod [-s NAME [FILE]] [-S [DIR]]   Linux's modules; load a module's .ko
  sym NAME|ADDR, sym -l [RE]   symbols
  rd [-p] [-8|-16|-32|-64] [-s] [-a] ADDR|SYMBOL [COUNT]   memory
  set scroll on|off, help, q
Any command line may end in `| pipeline`, `> file` or `>> file`; `!cmd` runs a shell command.

Examples:
  kcrash vmcore vmlinux
  kcrash -c 'klog 0 full' vmcore vmlinux
  kcrash -c 'p KLogs[2]' vmcore vmlinux klogtest.ko
  kcrash -c sys -c 'rd -s KLogs 16' vmcore vmlinux
  kcrash -i triage.cmds vmcore vmlinux > report.txt
  sudo kcrash -c 'klog 0 full'                 (the running kernel; KLogs' module found by itself)
  sudo kcrash -c 'klog --follow' klogtest.ko
  echo 'klog SCHED' | kcrash core.1234

Without -c, -i or piped standard input, kcrash prompts; history is kept in ~/.kcrash_history.
Output on a terminal goes through $PAGER (default less -FRX) unless --no-pager.

Exit status: 0 when every command succeeded, 1 when a command failed, 2 when the dump could
not be opened or the arguments are wrong.")]
struct Cli {
    /// The dump and its image (vmlinux, the program), in any order; a process core finds its
    /// executable by itself when it is present. Kernel modules' `.ko` files load at their
    /// addresses in the dump (as `mod -s`). Without a dump, or with /proc/kcore, the running
    /// kernel (as root).
    #[arg(value_name = "DUMP [IMAGE] [MODULE.ko]")]
    files: Vec<PathBuf>,
    /// Run this command, then exit (repeatable; run in order).
    #[arg(short = 'c', long = "command", value_name = "CMD")]
    commands: Vec<String>,
    /// Run the commands in FILE (one per line, `#` comments), then exit.
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
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let errors = cli.color.stderr();
    let files = match sort_files(&cli.files) {
        Ok(v) => v,
        Err(e) => return fail_open(errors, &e.to_string()),
    };
    let live = is_live_path(&files.dump);
    let opened = if live {
        dumpfmt::Dump::open_live(&files.dump).map_err(|e| live::open_failure(&files.dump, &e))
    } else {
        dumpfmt::Dump::open(&files.dump).map_err(|e| e.to_string())
    };
    let dump = match opened {
        Ok(d) => d,
        Err(e) => return fail_open(errors, &e),
    };
    let session = match Session::open(&dump, files.image) {
        Ok(s) => s,
        Err(e) => return fail_open(errors, &e.to_string()),
    };
    // Modules on the command line load as `mod -s NAME FILE` would, as drgn's -s does.
    for ko in &files.modules {
        let loaded = match module_name(ko) {
            Some(name) => session.load_module(&name, ko),
            None => Err(format!("{}: a module's file is NAME.ko", ko.display())),
        };
        if let Err(e) = loaded {
            return fail_open(errors, &e);
        }
    }
    if live && files.modules.is_empty() {
        load_klog_module(&session, cli.silent);
    }
    if !cli.silent {
        for note in &session.notes {
            eprintln!("kcrash: {note}");
        }
    }
    let mut lines: Vec<String> = cli.commands.clone();
    if let Some(file) = &cli.input {
        match std::fs::read_to_string(file) {
            Ok(text) => lines.extend(text.lines().map(str::to_owned)),
            Err(e) => return fail_open(errors, &format!("{}: {e}", file.display())),
        }
    }
    let settings = Settings {
        scroll: !cli.no_pager,
        color: cli.color,
    };
    let mut shell = Shell::new(&session, settings);
    let stdin = io::stdin();
    let scripted = !lines.is_empty() || !stdin.is_terminal();
    if scripted && lines.is_empty() {
        return script(
            &mut shell,
            stdin.lock().lines().map_while(Result::ok),
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

/// Runs `lines` in order; output to stdout, diagnostics to stderr, status 1 if any failed.
fn script(
    shell: &mut Shell<'_, '_>,
    lines: impl Iterator<Item = String>,
    keep_going: bool,
    errors: Paint,
) -> ExitCode {
    catch_ctrl_c();
    let mut failed = false;
    for line in lines {
        match shell.run_line(&line, &mut io::stderr()) {
            Ok(Flow::Quit) => break,
            Ok(Flow::Continue) => {}
            Err(e) => {
                eprintln!("{} {}", errors.bad("kcrash:"), one_line(&format!("{e:#}")));
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
    let config = Config::builder()
        .max_history_size(10_000)
        .map(|b| b.auto_add_history(true).build());
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
    // The prompt goes to the terminal rustyline writes to (stdout).
    let prompt_paint = color.paint_for(io::stdout().is_terminal());
    editor.set_helper(Some(Completion::new(shell.session, prompt_paint)));
    let history = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".kcrash_history"));
    if let Some(path) = &history {
        // A first session has no history file yet.
        let _ = editor.load_history(path);
    }
    let status = loop {
        match editor.readline("kcrash> ") {
            Ok(line) => match shell.run_line(&line, &mut io::stderr()) {
                Ok(Flow::Quit) => break ExitCode::SUCCESS,
                Ok(Flow::Continue) => {}
                Err(e) => eprintln!("{} {}", errors.bad("kcrash:"), one_line(&format!("{e:#}"))),
            },
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
