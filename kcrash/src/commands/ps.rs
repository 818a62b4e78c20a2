//! `ps`: the Linux kernel's tasks, as crash's `ps` lists them.

use std::collections::BTreeMap;
use std::io::{self, Write};

use anyhow::{bail, Result};
use clap::Parser;
use serde::Serialize;

use super::args::{hex, task_header};
use super::{Context, Flow};
use crate::linux::facts;
use crate::linux::tasks::{tasks, Read, Task, Times, TimesLayout};
use crate::paint::Paint;
use crate::report::{self, Dec, Hex, Report};

/// List the kernel's tasks as crash's ps does: every thread of every process, and each CPU's
/// idle task (swapper/N), by PID. Columns: PID, PPID, the CPU it runs or last ran on, its
/// task_struct, its state in crash's two letters, its command (in brackets for a kernel
/// thread); `>` marks each CPU's running task.
#[derive(Parser, Debug)]
#[command(name = "ps", no_binary_name = true, disable_version_flag = true)]
#[command(after_help = "\
States, from __state | exit_state as crash reads them: RU running, IN interruptible, UN
uninterruptible, ID idle (uninterruptible, not counted as load), ZO zombie, ST stopped, TR
traced, DE dead, PA parked, WA waking, NE new; ?? none of these.

A field whose memory cannot be read shows ?, with the reason on the line under the task; a
task list that cannot be followed to its end stops there, with the reason after the table.
Either way ps then fails, after printing all it could read.

-t shows each task's clocks instead, oldest task first, as crash's ps -t: RUN TIME (from its
start to the dump's uptime, jiffies_64 over HZ as sys counts it), START TIME (task_struct
start_time: monotonic nanoseconds since boot), UTIME and STIME (CPU time in user space and in
the kernel, nanoseconds).

Examples:
  ps
  ps 1 kthreadd ffff8efb81216100
  ps -t 1
  ps -k | grep kworker
  ps --json | jq -r '.tasks[] | select(.running) | .comm'")]
pub struct Args {
    /// Kernel threads only.
    #[arg(short = 'k', conflicts_with = "user")]
    kernel: bool,
    /// User tasks only (no kernel threads).
    #[arg(short = 'u')]
    user: bool,
    /// Each task's start, run, user and system times, oldest task first.
    #[arg(short = 't')]
    times: bool,
    /// One JSON document.
    #[arg(long)]
    json: bool,
    /// Only these tasks: a PID (decimal), a task_struct address (hex), or a command name
    /// (\NAME for a name that reads as a number).
    #[arg(value_name = "PID|TASK|COMM")]
    which: Vec<String>,
}

/// What a word of `ps PID|TASK|COMM...` selects, as crash reads it.
#[derive(Debug, PartialEq, Eq)]
enum Select {
    Pid(i32),
    Task(u64),
    Comm(String),
}

impl Select {
    fn parse(word: &str) -> Select {
        if let Some(name) = word.strip_prefix('\\') {
            return Select::Comm(name.to_owned());
        }
        if let Ok(pid) = word.parse() {
            return Select::Pid(pid);
        }
        match hex(word) {
            Some(addr) => Select::Task(addr),
            None => Select::Comm(word.to_owned()),
        }
    }

    /// What is said when no task is this.
    fn missing(&self) -> String {
        match self {
            Select::Pid(pid) => format!("no task has PID {pid}"),
            Select::Task(addr) => format!("no task is at {addr:#x}"),
            Select::Comm(name) => format!("no task is named {name:?}"),
        }
    }

    fn matches(&self, t: &Task) -> bool {
        match self {
            Select::Pid(pid) => t.pid.as_ref() == Ok(pid),
            Select::Task(addr) => t.addr == *addr,
            Select::Comm(name) => t.comm.as_ref() == Ok(name),
        }
    }
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(argv)?;
    let session = cx.session;
    if session.linux.is_none() {
        bail!("needs a Linux kernel dump (or /proc/kcore) and its vmlinux");
    }
    let list = tasks(session.kernel())?;
    let select: Vec<Select> = args.which.iter().map(|w| Select::parse(w)).collect();
    // A task whose kind is unknown is shown by -k and -u alike: nothing drops out unseen.
    let kind = |t: &Task| match t.kernel_thread {
        Ok(true) => !args.user,
        Ok(false) => !args.kernel,
        Err(_) => true,
    };
    let chosen = list
        .tasks
        .iter()
        .filter(|t| kind(t) && (select.is_empty() || select.iter().any(|s| s.matches(t))));
    let (rows, uptime) = if args.times {
        let kernel = session.kernel();
        let layout = TimesLayout::read(kernel)?;
        let uptime = facts::uptime_nsec(kernel).map_err(|e| format!("uptime: {e}"));
        let mut rows: Vec<Row> = chosen
            .map(|t| Row::with_times(t, layout.times(kernel.mem, t.addr), &uptime))
            .collect();
        // crash's order for -t: by start, oldest first; unknown starts last.
        rows.sort_by_key(|r| match &r.times {
            Some(Some(t)) => (false, t.start.0),
            _ => (true, 0),
        });
        (rows, Some(Uptime::from(uptime)))
    } else {
        (chosen.map(Row::from).collect(), None)
    };
    let unmatched: Vec<String> = select
        .iter()
        .filter(|s| !list.tasks.iter().any(|t| s.matches(t)))
        .map(Select::missing)
        .collect();
    let unreadable = rows.iter().filter(|r| !r.unreadable.is_empty()).count();
    let ps = Ps {
        tasks: rows,
        uptime,
        problems: list.problems,
    };
    report::document(&ps, args.json, cx.out, cx.paint)?;
    if !unmatched.is_empty() {
        bail!("{}", unmatched.join("; "));
    }
    // All that could be read is printed; the status tells a script that not everything could.
    if !ps.problems.is_empty() {
        bail!("the task list may be incomplete (marked above)");
    }
    if unreadable > 0 {
        bail!("{unreadable} tasks have fields that could not be read (marked above)");
    }
    Ok(Flow::Continue)
}

/// `ps`: the tasks, and why the list may be incomplete.
#[derive(Serialize)]
struct Ps {
    tasks: Vec<Row>,
    /// With -t: the dump's uptime, which run times are counted to.
    #[serde(skip_serializing_if = "Option::is_none")]
    uptime: Option<Uptime>,
    problems: Vec<String>,
}

/// Nanoseconds since boot when the dump was taken, or why that is unknown.
#[derive(Serialize)]
struct Uptime {
    nanoseconds: Option<Dec>,
    unknown: Option<String>,
}

impl From<std::result::Result<i64, String>> for Uptime {
    fn from(r: std::result::Result<i64, String>) -> Uptime {
        match r {
            Ok(ns) => Uptime {
                nanoseconds: Some(Dec(ns.into())),
                unknown: None,
            },
            Err(why) => Uptime {
                nanoseconds: None,
                unknown: Some(why),
            },
        }
    }
}

/// A task's clocks (-t), nanoseconds.
#[derive(Serialize)]
struct RowTimes {
    /// `start_time`: monotonic time since boot.
    start: Dec,
    /// From its start to the dump's uptime; null when the uptime is unknown.
    run: Option<Dec>,
    user: Dec,
    system: Dec,
}

/// One task; a field whose memory could not be read is null, with the reason in `unreadable`.
#[derive(Serialize)]
struct Row {
    pid: Option<i32>,
    ppid: Option<i32>,
    cpu: Option<u32>,
    /// The `struct task_struct`.
    task: Hex,
    /// crash's two letters.
    state: Option<&'static str>,
    /// `__state | exit_state`, the value the letters name.
    state_bits: Option<Hex>,
    comm: Option<String>,
    kernel_thread: Option<bool>,
    /// Its CPU's current task when the dump was taken.
    running: bool,
    /// Its process's PID.
    tgid: Option<i32>,
    /// With -t: its clocks, null when unreadable (absent without -t).
    #[serde(skip_serializing_if = "Option::is_none")]
    times: Option<Option<RowTimes>>,
    /// The header crash prints above a task's times.
    #[serde(skip)]
    header: String,
    /// For each unknown field, the address that could not be read and why.
    unreadable: BTreeMap<&'static str, String>,
}

impl From<&Task> for Row {
    fn from(t: &Task) -> Row {
        let mut why = BTreeMap::new();
        let state = known(&t.state, "state", &mut why);
        Row {
            pid: known(&t.pid, "pid", &mut why),
            ppid: known(&t.ppid, "ppid", &mut why),
            cpu: known(&t.cpu, "cpu", &mut why),
            task: Hex(t.addr),
            state: state.map(|s| s.name()),
            state_bits: state.map(|s| Hex(s.0)),
            comm: known(&t.comm, "comm", &mut why),
            kernel_thread: known(&t.kernel_thread, "kernel_thread", &mut why),
            running: t.running,
            tgid: known(&t.tgid, "tgid", &mut why),
            times: None,
            header: task_header(t),
            unreadable: why,
        }
    }
}

impl Row {
    /// The row of `ps -t`: `t` with its clocks, run time counted to `uptime`.
    fn with_times(t: &Task, times: Read<Times>, uptime: &std::result::Result<i64, String>) -> Row {
        let mut row = Row::from(t);
        let times = known(&times, "times", &mut row.unreadable).map(|t| RowTimes {
            start: Dec(t.start.into()),
            run: uptime
                .as_ref()
                .ok()
                .map(|&now| Dec(i128::from(now) - i128::from(t.start))),
            user: Dec(t.user.into()),
            system: Dec(t.system.into()),
        });
        row.times = Some(times);
        row
    }
}

/// `value` when it could be read; else `None`, and why under `field` in `why`.
fn known<T: Clone>(
    value: &Read<T>,
    field: &'static str,
    why: &mut BTreeMap<&'static str, String>,
) -> Option<T> {
    match value {
        Ok(v) => Some(v.clone()),
        Err(e) => {
            why.insert(field, e.to_string());
            None
        }
    }
}

impl Report for Ps {
    /// crash's columns, less its memory ones (%MEM, VSZ, RSS); with -t, crash's lines of times.
    fn text(&self, out: &mut dyn Write, paint: Paint) -> io::Result<()> {
        if let Some(uptime) = &self.uptime {
            return self.times(uptime, out, paint);
        }
        writeln!(out, "      PID    PPID  CPU       TASK        ST  COMM")?;
        let unknown = || "?".to_owned();
        for r in &self.tasks {
            let comm = match (&r.comm, r.kernel_thread) {
                (Some(c), Some(true)) => format!("[{c}]"),
                (Some(c), _) => c.clone(),
                (None, _) => unknown(),
            };
            writeln!(
                out,
                "{} {:>7} {:>7} {:>3}  {} {:>3}  {comm}",
                if r.running { ">" } else { " " },
                r.pid.map_or_else(unknown, |p| p.to_string()),
                r.ppid.map_or_else(unknown, |p| p.to_string()),
                r.cpu.map_or_else(unknown, |c| c.to_string()),
                paint.addr(format_args!("{:016x}", r.task.0)),
                r.state.unwrap_or("?"),
            )?;
            r.unreadable(out, paint)?;
        }
        self.incomplete(out, paint)
    }
}

impl Ps {
    /// `ps -t`: per task, crash's header and its four times.
    fn times(&self, uptime: &Uptime, out: &mut dyn Write, paint: Paint) -> io::Result<()> {
        for r in &self.tasks {
            writeln!(out, "{}", r.header)?;
            if let Some(Some(t)) = &r.times {
                let run = match (&t.run, &uptime.unknown) {
                    (Some(run), _) => facts::uptime(run.0.clamp(0, i64::MAX.into()) as i64),
                    (None, Some(why)) => paint.bad(format_args!("unknown ({why})")).to_string(),
                    (None, None) => paint.bad("unknown").to_string(),
                };
                writeln!(out, "    RUN TIME: {run}")?;
                writeln!(out, "  START TIME: {}", t.start.0)?;
                writeln!(out, "       UTIME: {}", t.user.0)?;
                writeln!(out, "       STIME: {}", t.system.0)?;
            }
            r.unreadable(out, paint)?;
            writeln!(out)?;
        }
        self.incomplete(out, paint)
    }

    fn incomplete(&self, out: &mut dyn Write, paint: Paint) -> io::Result<()> {
        for p in &self.problems {
            writeln!(out, "{}", paint.bad(format_args!("incomplete: {p}")))?;
        }
        Ok(())
    }
}

impl Row {
    /// The line under a task that says which of its fields could not be read, and why.
    fn unreadable(&self, out: &mut dyn Write, paint: Paint) -> io::Result<()> {
        if self.unreadable.is_empty() {
            return Ok(());
        }
        let why: Vec<String> = self
            .unreadable
            .iter()
            .map(|(field, e)| format!("{field}: {e}"))
            .collect();
        writeln!(
            out,
            "          {}",
            paint.bad(format_args!("unreadable: {}", why.join("; ")))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_select_as_crash_reads_them() {
        assert_eq!(Select::parse("1"), Select::Pid(1));
        assert_eq!(
            Select::parse("ffff8efb81216100"),
            Select::Task(0xffff_8efb_8121_6100)
        );
        assert_eq!(Select::parse("0x10"), Select::Task(0x10));
        assert_eq!(Select::parse("kthreadd"), Select::Comm("kthreadd".into()));
        assert_eq!(Select::parse("\\123"), Select::Comm("123".into()));
    }
}
