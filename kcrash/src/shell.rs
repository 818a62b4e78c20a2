//! Running command lines against a session: the dispatch shared by `-c`, command files, standard
//! input and the prompt, with crash's output plumbing (`| pipeline`, `> file`, `>> file`, `!cmd`,
//! the pager).
//!
//! # Adding a command
//!
//! Every command is one row of [`COMMANDS`]: its name, aliases, a one-line summary for `help`,
//! the full help text for `help NAME` (for a clap-parsed command, `clap_help::<Args>` gives its
//! long `--help`), and the function that runs it. A command reads the dump through
//! `cx.session`, writes its output to `cx.out` (which may be a file, a pipe or the pager) and
//! warnings to `cx.err`; it returns an error for failure, with no command-name prefix (the shell
//! adds it) and on one line. Long loops poll [`crate::interrupt::check`] so Ctrl-C stops them.
//! A clap parse error or `--help` is handled here, so commands just call `Args::try_parse_from`.

mod complete;
mod redirect;

use std::io::{self, IsTerminal, Write};

use anyhow::{anyhow, bail, Result};
use clap::CommandFactory;

use crate::commands;
use crate::interrupt;
use crate::paint::{ColorChoice, Paint};
use crate::session::Session;

pub use complete::Completion;
pub use redirect::{split, Target, DEFAULT_PAGER};

/// Whether the session goes on after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Quit,
}

/// What the user chose for the whole session.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `set scroll on|off`, `--no-pager`: long output to a terminal goes through the pager.
    pub scroll: bool,
    pub color: ColorChoice,
}

/// What a running command gets.
pub struct Context<'a, 'd> {
    pub session: &'a Session<'d>,
    pub settings: &'a mut Settings,
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
    /// Colour for `out` (never for files and pipes unless `--color=always`).
    pub paint: Paint,
    /// The command word as typed (`p/x`, `union`).
    pub word: &'a str,
    /// The rest of the command as typed, before any redirection: expressions are not
    /// shell-split, which would eat C's character literals.
    pub raw: &'a str,
}

type Run = fn(&mut Context<'_, '_>, &[String]) -> Result<Flow>;

/// One command of the shell.
pub struct Command {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// One line for `help`.
    pub summary: &'static str,
    /// The full text for `help NAME`, with examples.
    pub help: fn() -> String,
    pub run: Run,
}

/// What `CMD --help` prints for a clap-parsed command.
pub fn clap_help<A: CommandFactory>() -> String {
    match A::command().try_get_matches_from(["--help"]) {
        Err(e) => e.render().to_string(),
        Ok(_) => A::command().render_long_help().to_string(),
    }
}

/// Every command, in the order `help` lists them.
pub const COMMANDS: &[Command] = &[
    Command {
        name: "klog",
        aliases: &[],
        summary: "the kernel event log: klog [SUBSYS] [full|terse] [-n N] [--json] [-s]",
        help: clap_help::<commands::klog::Args>,
        run: run_klog,
    },
    Command {
        name: "print",
        aliases: &["p"],
        summary: "a variable or expression with its DWARF type, as gdb prints it: p[/FMT] EXPR",
        help: || commands::print::HELP.into(),
        run: |cx, _| {
            commands::print::run(cx.session, cx.word, cx.raw, cx.out)?;
            Ok(Flow::Continue)
        },
    },
    Command {
        name: "whatis",
        aliases: &[],
        summary: "the type of an expression, or a type's name: whatis EXPR|TYPE",
        help: || commands::types::WHATIS_HELP.into(),
        run: |cx, _| {
            commands::types::whatis(cx.session, cx.raw, cx.out)?;
            Ok(Flow::Continue)
        },
    },
    Command {
        name: "ptype",
        aliases: &[],
        summary: "a type written out in full, as gdb does: ptype EXPR|TYPE",
        help: || commands::types::PTYPE_HELP.into(),
        run: |cx, _| {
            commands::types::ptype(cx.session, cx.raw, cx.out)?;
            Ok(Flow::Continue)
        },
    },
    Command {
        name: "struct",
        aliases: &["union"],
        summary: "a struct's layout, or an object at an address: struct [-o] NAME[.member] [ADDR]",
        help: || commands::types::STRUCT_HELP.into(),
        run: |cx, args| {
            commands::types::struct_(cx.session, cx.word, args, cx.out)?;
            Ok(Flow::Continue)
        },
    },
    Command {
        name: "sys",
        aliases: &[],
        summary: "the dump: file, format, producer, CPUs, image, VMCOREINFO, panic",
        help: clap_help::<commands::sys::Args>,
        run: commands::sys::run,
    },
    Command {
        name: "log",
        aliases: &["dmesg"],
        summary: "the Linux kernel's message log (printk ring): log [-t|-T] [-m]",
        help: clap_help::<commands::log::Args>,
        run: commands::log::run,
    },
    Command {
        name: "mod",
        aliases: &[],
        summary: "Linux's loaded modules; load a module's .ko: mod [-s NAME [FILE]] [-S [DIR]]",
        help: clap_help::<commands::modules::Args>,
        run: commands::modules::run,
    },
    Command {
        name: "sym",
        aliases: &[],
        summary: "symbol <-> address: sym NAME|ADDR, sym -l [REGEX]",
        help: clap_help::<commands::sym::Args>,
        run: commands::sym::run,
    },
    Command {
        name: "rd",
        aliases: &[],
        summary: "read memory: rd [-p] [-8|-16|-32|-64] [-s] [-a] ADDR|SYMBOL [COUNT]",
        help: clap_help::<commands::rd::Args>,
        run: commands::rd::run,
    },
    Command {
        name: "set",
        aliases: &[],
        summary: "session settings: set scroll on|off",
        help: || SET_HELP.into(),
        run: run_set,
    },
    Command {
        name: "help",
        aliases: &["?"],
        summary: "this list; help CMD for a command's full text",
        help: || HELP_HELP.into(),
        run: run_help,
    },
    Command {
        name: "quit",
        aliases: &["q", "exit"],
        summary: "leave kcrash",
        help: || "quit, q, exit: leave kcrash (so does Ctrl-D at the prompt).\n".into(),
        run: |_, _| Ok(Flow::Quit),
    },
];

const SET_HELP: &str = "\
set: show or change session settings.

  set                 show them
  set scroll off      no pager: long output goes straight to the terminal
  set scroll on       long output to a terminal goes through $PAGER (default less -FRX)

The pager is used only when standard output is a terminal; --no-pager starts with scroll off.
";

const HELP_HELP: &str = "\
help: list the commands, one line each; help CMD prints CMD's full text with examples.

Every command line can end in crash's output plumbing:
  CMD | pipeline      CMD's output goes to `sh -c pipeline`     klog 0 full | grep SCHED
  CMD > file          to a file (created or truncated)          sym -l > symbols.txt
  CMD >> file         appended to a file                        rd KLogs 16 >> notes
  !command            runs a shell command                      !ls -l /var/crash
| and > inside quotes or brackets, or glued to what precedes them, are the command's own:
klog -g 'open|close', p a->b, p (x >> 32), p a|b.
Ctrl-C stops the running command. Commands that print data take --json.
";

/// Finds a command by name or alias; `p/x` and `print/x` are print with a format letter.
pub fn command(name: &str) -> Option<&'static Command> {
    let name = match name.split_once('/') {
        Some((base @ ("p" | "print"), _)) => base,
        _ => name,
    };
    COMMANDS
        .iter()
        .find(|c| c.name == name || c.aliases.contains(&name))
}

fn run_klog(cx: &mut Context<'_, '_>, args: &[String]) -> Result<Flow> {
    let klog = cx.session.klog().map_err(anyhow::Error::msg)?;
    if cx.session.dump.is_live() {
        commands::klog::run_live(args, cx.session, &klog.layout, cx.out, cx.err)?;
    } else {
        commands::klog::run(args, cx.session, klog, cx.out, cx.err)?;
    }
    Ok(Flow::Continue)
}

fn run_help(cx: &mut Context<'_, '_>, args: &[String]) -> Result<Flow> {
    match args {
        [] => {
            for c in COMMANDS {
                writeln!(cx.out, "{:<6} {}", cx.paint.strong(c.name), c.summary)?;
            }
            writeln!(
                cx.out,
                "Output: CMD | pipeline, CMD > file, CMD >> file; !cmd runs a shell command."
            )?;
        }
        [name] => {
            let c = command(name).ok_or_else(|| anyhow!("{name}: no such command"))?;
            write!(cx.out, "{}", (c.help)())?;
        }
        _ => bail!("help takes at most one command name"),
    }
    Ok(Flow::Continue)
}

fn run_set(cx: &mut Context<'_, '_>, args: &[String]) -> Result<Flow> {
    match args {
        [] => writeln!(
            cx.out,
            "scroll: {}",
            if cx.settings.scroll { "on" } else { "off" }
        )?,
        [what, value] if what == "scroll" => {
            cx.settings.scroll = match value.as_str() {
                "on" => true,
                "off" => false,
                other => bail!("scroll is on or off, not {other:?}"),
            }
        }
        _ => bail!("usage: set scroll on|off (help set)"),
    }
    Ok(Flow::Continue)
}

/// The text after a command line's first word.
fn after_word(line: &str) -> &str {
    let line = line.trim_start();
    line.find(char::is_whitespace)
        .map_or("", |at| line[at..].trim())
}

/// A session's shell: the settings and the dispatch with its output plumbing.
pub struct Shell<'a, 'd> {
    pub session: &'a Session<'d>,
    pub settings: Settings,
    /// Standard output is a terminal (the pager and `auto` colour apply).
    stdout_terminal: bool,
}

impl<'a, 'd> Shell<'a, 'd> {
    pub fn new(session: &'a Session<'d>, settings: Settings) -> Self {
        Shell {
            session,
            settings,
            stdout_terminal: io::stdout().is_terminal(),
        }
    }

    /// Runs one command line. Blank lines and `#` comments do nothing. Errors come back as one
    /// line, prefixed with the command's name.
    pub fn run_line(&mut self, line: &str, err: &mut dyn Write) -> Result<Flow> {
        self.run(line, None, err)
    }

    /// [`Shell::run_line`] with what would go to standard output written to `out` instead
    /// (`kcrash regress`); `| pipeline` and `> file` still go where they say.
    pub fn run_captured(
        &mut self,
        line: &str,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<Flow> {
        self.run(line, Some(out), err)
    }

    fn run(
        &mut self,
        line: &str,
        stdout: Option<&mut dyn Write>,
        err: &mut dyn Write,
    ) -> Result<Flow> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(Flow::Continue);
        }
        interrupt::clear();
        if let Some(shell_command) = line.strip_prefix('!') {
            return run_shell(shell_command).map(|()| Flow::Continue);
        }
        let (command_text, target) = split(line)?;
        let words =
            shell_words::split(command_text).map_err(|e| anyhow!("{command_text:?}: {e}"))?;
        let Some((name, args)) = words.split_first() else {
            bail!("no command before the redirection");
        };
        let cmd = command(name).ok_or_else(|| anyhow!("{name}: no such command (try help)"))?;
        let to_terminal = target == Target::Stdout && stdout.is_none() && self.stdout_terminal;
        let pager = std::env::var("PAGER")
            .ok()
            .filter(|p| !p.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_PAGER.into());
        let use_pager = to_terminal && self.settings.scroll;
        let mut sink = redirect::Sink::open(&target, stdout, use_pager.then_some(pager.as_str()))?;
        let paint = self.settings.color.paint_for(to_terminal);
        let result = {
            let mut cx = Context {
                session: self.session,
                settings: &mut self.settings,
                out: &mut sink,
                err,
                paint,
                word: name,
                raw: after_word(command_text),
            };
            (cmd.run)(&mut cx, args).or_else(|e| help_as_output(e, cx.out))
        };
        let finished = sink.finish();
        let flow = match result {
            Ok(flow) => flow,
            Err(e) => return explain(cmd, e),
        };
        finished?;
        Ok(flow)
    }
}

/// `!command`: runs it with kcrash's terminal; a failure to start or a non-zero exit is an error.
fn run_shell(command: &str) -> Result<()> {
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .status()
        .map_err(|e| anyhow!("!{command}: {e}"))?;
    if !status.success() {
        bail!("!{}: {status}", command.trim());
    }
    Ok(())
}

/// `CMD --help` (clap's "error" that is really output) is written where the output goes.
fn help_as_output(e: anyhow::Error, out: &mut dyn Write) -> Result<Flow> {
    use clap::error::ErrorKind;
    match e.downcast_ref::<clap::Error>() {
        Some(clap)
            if matches!(
                clap.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            write!(out, "{}", clap.render())?;
            Ok(Flow::Continue)
        }
        _ => Err(e),
    }
}

/// Turns a command's error into what the user sees: clap's multi-line errors become their first
/// line; a reader that left early is no failure.
fn explain(cmd: &Command, e: anyhow::Error) -> Result<Flow> {
    if is_broken_pipe(&e) {
        return Ok(Flow::Continue);
    }
    if let Some(clap) = e.downcast_ref::<clap::Error>() {
        let text = clap.render().to_string();
        let first = text.lines().next().unwrap_or("bad arguments");
        let first = first.strip_prefix("error: ").unwrap_or(first);
        bail!("{}: {first} (help {})", cmd.name, cmd.name);
    }
    Err(anyhow!("{}: {}", cmd.name, one_line(&format!("{e:#}"))))
}

/// A message on one line: embedded line breaks become "; ".
pub fn one_line(text: &str) -> String {
    text.trim_end().lines().collect::<Vec<_>>().join("; ")
}

/// Whether `e` is a write to a reader that went away (`| head`, the pager quit).
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
