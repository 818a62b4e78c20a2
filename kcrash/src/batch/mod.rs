//! `kcrash batch`: one command file run over many dumps, each in a process of its own bounded in
//! time and memory, several at once; a JSON report per dump and a summary, and a later run
//! skips the dumps whose report is complete. `--shard K/N` takes every N-th dump from the K-th,
//! so that any scheduler can spread one batch over machines, and `kcrash merge` joins their
//! reports.

pub mod report;
pub mod sources;
pub mod worker;

use std::io::{IsTerminal, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Parser;

use report::{Found, Report, Status, Summary};
use sources::{Job, Shard};

/// What the worker may write on its own standard error that the report keeps (a panic's
/// message, the allocator's complaint).
const STDERR_KEPT: u64 = 4096;

/// Run one command file over many dumps, each in a process of its own, and report on each.
#[derive(Parser, Debug)]
#[command(name = "kcrash batch", version)]
#[command(after_help = "\
Each dump runs in a kcrash process of its own (and process group), at most --timeout seconds
and --memory MiB of allocated memory: a hostile dump ends its own run (timed out, out of
memory, crashed), never the batch. OUT/reports/ gets one JSON report per dump (every command's output, its JSON when run
with --json, its errors; how the run ended, its time and peak memory), written whole or not at
all; OUT/summary.json (summary-K-of-N.json for a shard) counts them. A dump whose report is
already complete is not run again (--rerun runs it): an interrupted batch goes on where it
stopped.

Images: --image for every dump; an @LIST line's own; else, for a kernel dump, the vmlinux whose
build-id VMCOREINFO gives, in a --symbols directory (DIR/.build-id/ab/cdef....debug, as
/usr/lib/debug keeps them, or DIR/BUILDID/vmlinux, DIR/BUILDID/debuginfo, as debuginfod's cache
does); a process core finds the executable it names.

Examples:
  kcrash batch -i triage.cmds -o out /var/crash
  kcrash batch -c sys -c 'klog 0 full -n 50' -o out --symbols /usr/lib/debug 'dumps/*/vmcore'
  kcrash batch -i triage.cmds -o out --shard 2/8 @fleet.list      (on the second of 8 machines)
  kcrash merge all shard-*/                                        (the shards' reports, joined)

Exit status: 0 when every dump's run ended ok, 1 when one did not, 2 when the arguments or the
output directory are wrong.")]
pub struct Cli {
    /// The dumps: files, directories (every dump under them, told by content), glob patterns
    /// ('dumps/*.kdump', quoted), or @LIST (a dump a line, optionally with its image and
    /// modules: `vmcore vmlinux klogtest.ko`).
    #[arg(required = true, value_name = "DUMP|DIR|PATTERN|@LIST")]
    sources: Vec<String>,
    /// A file of commands, one a line, run on every dump.
    #[arg(short = 'i', long = "commands", value_name = "FILE")]
    commands: Option<PathBuf>,
    /// A command to run on every dump (repeatable; after the file's).
    #[arg(short = 'c', long = "command", value_name = "CMD")]
    command: Vec<String>,
    /// Where the reports and the summary go.
    #[arg(
        short = 'o',
        long,
        value_name = "DIR",
        required_unless_present = "worker"
    )]
    out: Option<PathBuf>,
    /// The image of every dump.
    #[arg(long, value_name = "FILE")]
    image: Option<PathBuf>,
    /// Directories where images are found by build-id (repeatable).
    #[arg(long = "symbols", value_name = "DIR")]
    symbols: Vec<PathBuf>,
    /// Dumps read at once (default: one per core).
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Seconds a dump's run may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    timeout: u64,
    /// MiB of memory a dump's run may allocate (RLIMIT_DATA: its heap and anonymous maps; the
    /// dump's and images' read-only maps do not count).
    #[arg(long, value_name = "MIB", default_value_t = 4096)]
    memory: u64,
    /// MiB of each command's output a report keeps; the rest is counted out.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    max_output: u64,
    /// Only the K-th of N shares of the dumps (every N-th from the K-th, in path order).
    #[arg(long, value_name = "K/N")]
    shard: Option<Shard>,
    /// Run again the dumps whose report is complete.
    #[arg(long)]
    rerun: bool,
    /// No progress line, even on a terminal.
    #[arg(long)]
    quiet: bool,
    /// The worker of one dump (run by the batch itself): where its findings go.
    #[arg(long, hide = true, value_name = "FILE")]
    worker: Option<PathBuf>,
}

/// `kcrash batch`.
pub fn main(args: impl Iterator<Item = std::ffi::OsString>) -> ExitCode {
    exit(Cli::try_parse_from(args), "batch", |cli| run(&cli))
}

/// Runs `what` (`kcrash batch` or `merge`) on its parsed arguments: status 0 when every dump
/// ended ok, 1 when one did not, 2 when the arguments or the output directory are wrong (0 for
/// `--help`).
fn exit<C>(
    parsed: Result<C, clap::Error>,
    what: &str,
    run: impl FnOnce(C) -> Result<Summary, String>,
) -> ExitCode {
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli) {
        Ok(summary) if summary.not_ok() == 0 => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("kcrash: {what}: {e}");
            ExitCode::from(2)
        }
    }
}

/// The commands every dump runs: the file's lines, then `-c`'s.
fn command_lines(cli: &Cli) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    if let Some(file) = &cli.commands {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        lines.extend(text.lines().map(str::to_owned));
    }
    lines.extend(cli.command.iter().cloned());
    if !lines
        .iter()
        .any(|l| !l.trim().is_empty() && !l.trim().starts_with('#'))
    {
        return Err("no command to run: give -i FILE or -c CMD".into());
    }
    Ok(lines)
}

fn run(cli: &Cli) -> Result<Summary, String> {
    let lines = command_lines(cli)?;
    let max_output = usize::try_from(cli.max_output.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
    if let Some(found_file) = &cli.worker {
        let files: Vec<PathBuf> = cli.sources.iter().map(PathBuf::from).collect();
        worker::main(found_file, &files, &lines, &cli.symbols, max_output)
            .map_err(|e| format!("{}: {e}", found_file.display()))?;
        return Ok(Summary::of(&[], None, 0, 0.0, 1));
    }
    let out = cli.out.as_deref().unwrap_or(Path::new("."));
    let started = Instant::now();
    let all = sources::list(&cli.sources)?;
    let jobs: Vec<Job> = all
        .into_iter()
        .enumerate()
        .filter(|(i, _)| cli.shard.is_none_or(|s| s.takes(*i)))
        .map(|(_, j)| j)
        .collect();
    std::fs::create_dir_all(out.join(report::REPORTS))
        .map_err(|e| format!("{}: {e}", out.display()))?;
    let (done, todo): (Vec<&Job>, Vec<&Job>) = jobs
        .iter()
        .partition(|j| !cli.rerun && report::read(&report::path_for(out, &j.dump)).is_some());
    let threads = cli.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        usize::from,
    );
    let progress = Progress::new(todo.len(), done.len(), !cli.quiet);
    let bounds = Bounds {
        timeout: Duration::from_secs(cli.timeout),
        memory: cli.memory.saturating_mul(1 << 20),
    };
    let spawn = |job: &Job| -> Report {
        let mut args: Vec<std::ffi::OsString> = vec!["batch".into()];
        if let Some(file) = &cli.commands {
            args.extend(["--commands".into(), file.clone().into_os_string()]);
        }
        for c in &cli.command {
            args.extend(["--command".into(), c.into()]);
        }
        for dir in &cli.symbols {
            args.extend(["--symbols".into(), dir.clone().into_os_string()]);
        }
        args.extend(["--max-output".into(), cli.max_output.to_string().into()]);
        let mut files = vec![job.dump.clone()];
        if job.with.is_empty() {
            files.extend(cli.image.iter().cloned());
        }
        files.extend(job.with.iter().cloned());
        one(out, &job.dump, args, &files, bounds)
    };
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(PathBuf, Report)>();
    std::thread::scope(|s| {
        for _ in 0..threads.min(todo.len().max(1)) {
            let tx = tx.clone();
            let (next, todo, spawn) = (&next, &todo, &spawn);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = todo.get(i) else { break };
                let report = spawn(job);
                let file = report::path_for(out, &job.dump);
                if tx.send((file, report)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for (file, report) in rx {
            if let Err(e) = report::write_whole(&file, &report) {
                progress.say(&format!("kcrash: batch: {}: {e}", file.display()));
            }
            progress.done(&report);
        }
    });
    progress.finish();
    // The summary is of this shard's dumps: every report written now or before.
    let reports: Vec<(PathBuf, Report)> = jobs
        .iter()
        .filter_map(|j| {
            let file = report::path_for(out, &j.dump);
            report::read(&file).map(|r| (file, r))
        })
        .collect();
    let seconds = started.elapsed().as_secs_f64();
    let summary = Summary::of(
        &reports,
        cli.shard.map(|s| s.to_string()),
        todo.len(),
        seconds,
        threads,
    );
    let name = match cli.shard {
        Some(s) => format!("summary-{}-of-{}.json", s.index, s.count),
        None => "summary.json".to_owned(),
    };
    let file = out.join(name);
    report::write_whole(&file, &summary).map_err(|e| format!("{}: {e}", file.display()))?;
    print_summary(&summary, done.len(), &file);
    Ok(summary)
}

/// What a dump's run may use.
#[derive(Clone, Copy)]
struct Bounds {
    timeout: Duration,
    memory: u64,
}

/// Runs the worker for `dump` (`files` with it) bounded by `bounds`, and makes its report from
/// what it found and how it ended.
fn one(
    out: &Path,
    dump: &Path,
    mut args: Vec<std::ffi::OsString>,
    files: &[PathBuf],
    bounds: Bounds,
) -> Report {
    let started = Instant::now();
    let mut report = Report {
        kcrash_json: crate::report::JSON_VERSION,
        dump: dump.display().to_string(),
        status: Status::Crashed,
        why: None,
        seconds: 0.0,
        peak_rss_kib: 0,
        exit_code: None,
        signal: None,
        found: Found::default(),
        worker_stderr: String::new(),
    };
    let scratch = match tempfile::Builder::new()
        .prefix(".worker-")
        .tempdir_in(out.join(report::REPORTS))
    {
        Ok(dir) => dir,
        Err(e) => {
            report.why = Some(format!("no scratch directory in {}: {e}", out.display()));
            return report;
        }
    };
    let found_file = scratch.path().join("found.json");
    let stderr_file = scratch.path().join("stderr");
    args.extend([
        "--worker".into(),
        found_file.clone().into_os_string(),
        "--".into(),
    ]);
    args.extend(files.iter().map(|f| f.clone().into_os_string()));
    let ended = match (std::env::current_exe(), std::fs::File::create(&stderr_file)) {
        // No backtrace: printing one allocates, and at the memory limit that deadlocked the
        // worker in the allocator's own report instead of ending it.
        (Ok(exe), Ok(stderr)) => bounded(
            Command::new(exe)
                .args(&args)
                .env("RUST_BACKTRACE", "0")
                .stderr(stderr),
            bounds,
        ),
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    report.seconds = started.elapsed().as_secs_f64();
    report.worker_stderr = tail(&stderr_file, STDERR_KEPT);
    let ended = match ended {
        Ok(ended) => ended,
        Err(e) => {
            report.why = Some(format!("the worker could not run: {e}"));
            return report;
        }
    };
    report.peak_rss_kib = ended.peak_rss_kib;
    report.exit_code = ended.code;
    report.signal = ended.signal;
    let found = std::fs::read(&found_file)
        .ok()
        .and_then(|b| serde_json::from_slice::<Found>(&b).ok());
    let allocation_failed = report.worker_stderr.contains("memory allocation of");
    (report.status, report.why) = match (&found, ended.timed_out) {
        (_, true) => (
            Status::TimedOut,
            Some(format!("killed after {} s", bounds.timeout.as_secs())),
        ),
        (Some(f), _) if f.open_error.is_some() => (Status::NotOpened, f.open_error.clone()),
        (Some(f), _) => match f.commands.iter().find(|c| !c.ok) {
            Some(c) => (
                Status::Failed,
                Some(format!(
                    "{}: {}",
                    c.command,
                    c.error.as_deref().unwrap_or("failed")
                )),
            ),
            None => (Status::Ok, None),
        },
        (None, _) if allocation_failed => (
            Status::OutOfMemory,
            Some(format!(
                "stopped at its limit of {} MiB",
                bounds.memory >> 20
            )),
        ),
        (None, _) => {
            let how = match (ended.signal, ended.code) {
                (Some(sig), _) => format!("ended by signal {sig} before it reported"),
                (None, Some(code)) => format!("exited with status {code} before it reported"),
                (None, None) => "ended before it reported".to_owned(),
            };
            // What it said last, when it said anything (a panic's message).
            let said = report
                .worker_stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty() && !l.starts_with("note: "));
            let why = match said {
                Some(line) => format!("{how}: {}", crate::escape::escaped(line.as_bytes())),
                None => how,
            };
            (Status::Crashed, Some(why))
        }
    };
    report.found = found.unwrap_or_default();
    report
}

/// How a bounded process ended.
struct Ended {
    code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    peak_rss_kib: u64,
}

/// Runs `cmd` in a process group of its own with at most `bounds.memory` bytes of data
/// (RLIMIT_DATA), the whole group killed at `bounds.timeout` (a command's `!sleep` with it).
fn bounded(cmd: &mut Command, bounds: Bounds) -> std::io::Result<Ended> {
    let memory = bounds.memory;
    cmd.process_group(0);
    // SAFETY: setrlimit is async-signal-safe, and the closure touches nothing of the parent's.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: memory,
                rlim_max: memory,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).spawn()?;
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + bounds.timeout;
    let mut timed_out = false;
    let mut status = 0;
    // SAFETY: rusage is plain data, filled by wait4.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pid is our child's, not yet reaped; the pointers are to locals.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if reaped == pid {
            break;
        }
        if reaped < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        if !timed_out && Instant::now() >= deadline {
            timed_out = true;
            // SAFETY: signalling our own child's process group; the child is not yet reaped,
            // so the group's id is still its.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let (code, signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    };
    Ok(Ended {
        code,
        signal,
        timed_out,
        peak_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    })
}

/// The last `max` bytes of `file`, as text.
fn tail(file: &Path, max: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(file) else {
        return String::new();
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let mut bytes = Vec::new();
    if f.seek(SeekFrom::Start(len.saturating_sub(max))).is_ok() {
        let _ = f.take(max).read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The progress line on a terminal: dumps done of all, and how they ended so far.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    counts: std::sync::Mutex<std::collections::BTreeMap<Status, usize>>,
}

impl Progress {
    fn new(todo: usize, done: usize, wanted: bool) -> Progress {
        let bar = (wanted && std::io::stderr().is_terminal() && todo > 0).then(|| {
            let bar = indicatif::ProgressBar::new(todo as u64);
            let style = indicatif::ProgressStyle::with_template(
                "{elapsed_precise} {bar:30} {pos}/{len} dumps ({per_sec}) {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
            bar.set_style(style);
            if done > 0 {
                bar.set_message(format!("{done} reported before"));
            }
            bar
        });
        Progress {
            bar,
            counts: Default::default(),
        }
    }

    fn done(&self, report: &Report) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        *counts.entry(report.status).or_insert(0) += 1;
        if let Some(bar) = &self.bar {
            let shown: Vec<String> = counts
                .iter()
                .map(|(s, n)| format!("{n} {}", s.name()))
                .collect();
            bar.set_message(shown.join(", "));
            bar.inc(1);
        }
    }

    fn say(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn print_summary(summary: &Summary, before: usize, file: &Path) {
    let mut out = std::io::stdout().lock();
    let counts: Vec<String> = summary
        .counts
        .iter()
        .map(|(status, n)| format!("{n} {status}"))
        .collect();
    let _ = writeln!(
        out,
        "kcrash batch: {} dump{}{} ({} run now, {before} reported before) in {:.1} s, {} at a time: {}",
        summary.dumps,
        if summary.dumps == 1 { "" } else { "s" },
        summary.shard.as_deref().map(|s| format!(" of shard {s}")).unwrap_or_default(),
        summary.ran,
        summary.seconds,
        summary.jobs,
        counts.join(", ")
    );
    for line in summary.dumps_list.iter().filter(|l| l.status != Status::Ok) {
        let _ = writeln!(
            out,
            "  {}: {}: {}",
            crate::escape::escaped(line.dump.as_bytes()),
            line.status.name(),
            crate::escape::escaped(line.why.as_deref().unwrap_or("").as_bytes())
        );
    }
    let _ = writeln!(out, "summary: {}", file.display());
}

/// Join the reports of a batch's shards into one directory, with one summary of them all.
#[derive(Parser, Debug)]
#[command(name = "kcrash merge", version)]
#[command(after_help = "\
Each shard's reports (SHARD/reports/*.json) are copied into OUT/reports/ — a shard's report
and OUT's of the same dump must agree, or the merge stops — and OUT/summary.json counts them
all. Shards that wrote into one shared directory need only `kcrash merge DIR` for the summary.

Example:
  for k in 1 2 3; do kcrash batch -i triage.cmds -o shard-$k --shard $k/3 /var/crash & done; wait
  kcrash merge all shard-1 shard-2 shard-3")]
pub struct MergeCli {
    /// Where the reports go.
    out: PathBuf,
    /// The shards' output directories.
    shards: Vec<PathBuf>,
}

/// `kcrash merge`.
pub fn merge_main(args: impl Iterator<Item = std::ffi::OsString>) -> ExitCode {
    exit(MergeCli::try_parse_from(args), "merge", |cli| {
        merge(&cli.out, &cli.shards)
    })
}

fn merge(out: &Path, shards: &[PathBuf]) -> Result<Summary, String> {
    std::fs::create_dir_all(out.join(report::REPORTS))
        .map_err(|e| format!("{}: {e}", out.display()))?;
    let mut broken = Vec::new();
    for shard in shards {
        if !shard.join(report::REPORTS).is_dir() {
            return Err(format!(
                "{}: no reports/ (not a batch's output)",
                shard.display()
            ));
        }
        for (file, r) in report::all_in(shard, &mut broken) {
            let Some(name) = file.file_name() else {
                continue;
            };
            let to = out.join(report::REPORTS).join(name);
            if same_file(&file, &to) {
                continue;
            }
            if let Some(there) = report::read(&to) {
                if there.dump != r.dump {
                    return Err(format!(
                        "{} and {} are reports of different dumps under one name",
                        file.display(),
                        to.display()
                    ));
                }
            }
            report::write_whole(&to, &r).map_err(|e| format!("{}: {e}", to.display()))?;
        }
    }
    let reports = report::all_in(out, &mut broken);
    for file in &broken {
        eprintln!(
            "kcrash: merge: {}: not a whole report, left out",
            file.display()
        );
    }
    let summary = Summary::of(&reports, None, 0, 0.0, 0);
    let file = out.join("summary.json");
    report::write_whole(&file, &summary).map_err(|e| format!("{}: {e}", file.display()))?;
    print_summary(&summary, summary.dumps, &file);
    Ok(summary)
}

fn same_file(a: &Path, b: &Path) -> bool {
    matches!((std::fs::canonicalize(a), std::fs::canonicalize(b)), (Ok(a), Ok(b)) if a == b)
}
