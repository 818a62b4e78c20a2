//! `kcrash DUMP [IMAGE]`: a crash(8)-style session on a dump. A thin shell over the library.

use std::io::{self, BufRead, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use kcrash::session::{dump_and_image, Session};
use kcrash::shell::{run_line, Flow};

/// Crash-dump inspection for kernel engineers: the KLog event rings, symbols and memory of a
/// QEMU vmcore, a kdump file or a process core.
#[derive(Parser, Debug)]
#[command(name = "kcrash", version)]
#[command(
    after_help = "Examples:\n  kcrash vmcore vmlinux\n  kcrash -c 'klog 0 full' vmcore vmlinux\n  kcrash -i triage.cmds vmcore vmlinux > report.txt\n  echo 'klog SCHED' | kcrash core.1234\n\nExit status: 0 when every command succeeded, 1 when a command failed, 2 when the dump could\nnot be opened or the arguments are wrong."
)]
struct Cli {
    /// The dump and its image (vmlinux, the program), in either order; a process core finds its
    /// executable by itself when it is present.
    #[arg(required = true, value_name = "DUMP [IMAGE]")]
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (dump_path, image_path) = match dump_and_image(&cli.files) {
        Ok(v) => v,
        Err(e) => return fail_open(&e.to_string()),
    };
    let dump = match dumpfmt::Dump::open(&dump_path) {
        Ok(d) => d,
        Err(e) => return fail_open(&e.to_string()),
    };
    let session = match Session::open(&dump, image_path) {
        Ok(s) => s,
        Err(e) => return fail_open(&e.to_string()),
    };
    if !cli.silent {
        for note in &session.notes {
            eprintln!("kcrash: {note}");
        }
    }
    let mut lines: Vec<String> = cli.commands.clone();
    if let Some(file) = &cli.input {
        match std::fs::read_to_string(file) {
            Ok(text) => lines.extend(text.lines().map(str::to_owned)),
            Err(e) => return fail_open(&format!("{}: {e}", file.display())),
        }
    }
    let stdin = io::stdin();
    let scripted = !lines.is_empty() || !stdin.is_terminal();
    if scripted && lines.is_empty() {
        lines.extend(stdin.lock().lines().map_while(Result::ok));
    }
    if scripted {
        script(&session, &lines, cli.keep_going)
    } else {
        prompt(&session, cli.silent)
    }
}

fn fail_open(msg: &str) -> ExitCode {
    eprintln!("kcrash: {msg}");
    ExitCode::from(2)
}

/// Runs `lines` in order; output to stdout, diagnostics to stderr, status 1 if any failed.
fn script(session: &Session<'_>, lines: &[String], keep_going: bool) -> ExitCode {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut err = io::stderr();
    let mut failed = false;
    for line in lines {
        match run_line(session, line, &mut out, &mut err) {
            Ok(Flow::Quit) => break,
            Ok(Flow::Continue) => {}
            Err(e) if is_broken_pipe(&e) => return ExitCode::SUCCESS,
            Err(e) => {
                let _ = out.flush();
                eprintln!("kcrash: {}: {e:#}", line.trim());
                failed = true;
                if !keep_going {
                    break;
                }
            }
        }
    }
    if out.flush().is_err() {
        return ExitCode::SUCCESS;
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The interactive prompt.
fn prompt(session: &Session<'_>, silent: bool) -> ExitCode {
    if !silent {
        eprintln!(
            "kcrash {}: {} — type help",
            env!("CARGO_PKG_VERSION"),
            session.dump.path().display()
        );
    }
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let mut line = String::new();
    loop {
        eprint!("kcrash> ");
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => return ExitCode::SUCCESS,
            Ok(_) => {}
        }
        let stdout = io::stdout();
        let mut out = stdout.lock();
        match run_line(session, &line, &mut out, &mut io::stderr()) {
            Ok(Flow::Quit) => return ExitCode::SUCCESS,
            Ok(Flow::Continue) => {}
            Err(e) => eprintln!("{e:#}"),
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
