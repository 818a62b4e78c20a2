//! The commands a kcrash session runs, and the contract they share.
//!
//! # Adding a command
//!
//! A command is one file here and one row of [`COMMANDS`]: its name, aliases, a one-line summary
//! for `help`, the full help text for `help NAME` (for a clap-parsed command, `clap_help::<Args>`
//! gives its long `--help`), and its [`Run`] function. A command reads the dump through
//! `cx.session`, writes its output to `cx.out` (a file, a pipe or the pager: the front end
//! decides) and warnings to `cx.err`; it returns an error for failure, with no command-name
//! prefix (dispatch adds it) and on one line. Long loops poll [`crate::interrupt::check`] so
//! Ctrl-C stops them. Arguments are parsed with [`args`]'s helpers, so every command reads
//! numbers, addresses and symbols alike.

pub mod alias;
pub mod args;
pub mod bt;
pub mod dis;
pub mod eval;
pub mod events;
pub mod help;
pub mod klog;
pub mod log;
pub mod modules;
pub mod per_cpu;
pub mod plugins;
pub mod print;
pub mod ps;
pub mod rd;
pub mod schema;
mod set;
pub mod sym;
pub mod sys;
pub mod task;
pub mod timeline;
pub mod trace;
pub mod types;

use std::collections::BTreeMap;
use std::io::{self, Write};

use anyhow::{anyhow, bail, Result};
use clap::CommandFactory;

use crate::error::report;
use crate::paint::{ColorChoice, Paint};
use crate::session::Session;

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
    /// `set silent on|off`: a command file's commands are not echoed before their output.
    pub silent: bool,
    /// `alias NAME TEXT`: a command line's first word NAME stands for TEXT.
    pub aliases: BTreeMap<String, String>,
    /// `set radix 16`: `p` prints integers in hex unless given a format.
    pub hex: bool,
    /// `set PID|TASK`, `task PID|TASK`: the thread or Linux task `bt` shows without arguments
    /// (its PID or task address, as given).
    pub context: Option<u64>,
}

impl Settings {
    /// `line` with its first word replaced by the text it is an alias of, when it is one (once:
    /// an alias's text is not expanded again, so no alias can loop).
    pub fn expand<'l>(&self, line: &'l str) -> std::borrow::Cow<'l, str> {
        let word = line.split_whitespace().next().unwrap_or_default();
        match self.aliases.get(word) {
            Some(text) => {
                let rest = &line.trim_start()[word.len()..];
                std::borrow::Cow::Owned(format!("{text}{rest}"))
            }
            None => std::borrow::Cow::Borrowed(line),
        }
    }

    /// For output to no terminal (a check, a test): no pager, no colour.
    pub fn plain() -> Settings {
        Settings {
            scroll: false,
            color: ColorChoice::Never,
            silent: false,
            aliases: BTreeMap::new(),
            hex: false,
            context: None,
        }
    }
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

/// Every command's one signature: the context and the shell-split arguments after its name.
pub type Run = fn(&mut Context<'_, '_>, &[String]) -> Result<Flow>;

/// One command of the table.
pub struct Command {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// One line for `help`.
    pub summary: &'static str,
    /// The full text for `help NAME`, with examples.
    pub help: fn() -> String,
    /// Its options, `--long` and `-s`, for the prompt to complete.
    pub options: fn() -> Vec<String>,
    pub run: Run,
}

/// What `CMD --help` prints for a clap-parsed command.
fn clap_help<A: CommandFactory>() -> String {
    match A::command().try_get_matches_from(["--help"]) {
        Err(e) => e.render().to_string(),
        Ok(_) => A::command().render_long_help().to_string(),
    }
}

/// The options of a clap-parsed command.
fn clap_options<A: CommandFactory>() -> Vec<String> {
    let command = A::command();
    let mut options = Vec::new();
    for arg in command.get_arguments() {
        options.extend(arg.get_long().map(|l| format!("--{l}")));
        options.extend(arg.get_short().map(|c| format!("-{c}")));
    }
    options.push("--help".into());
    options
}

/// Every command, in the order `help` lists them.
pub const COMMANDS: &[Command] = &[
    Command {
        name: "klog",
        aliases: &[],
        summary: "the kernel event log: klog [SUBSYS] [full|terse] [-n N] [--json] [-s]",
        help: clap_help::<klog::Args>,
        options: clap_options::<klog::Args>,
        run: klog::run,
    },
    Command {
        name: "trace",
        aliases: &[],
        summary: "Linux's ftrace ring buffers, as trace-cmd report: trace [-n N] [--cpu N] [--instance NAME] [--dat FILE] [--json] [-s]",
        help: clap_help::<trace::Args>,
        options: clap_options::<trace::Args>,
        run: trace::run,
    },
    Command {
        name: "timeline",
        aliases: &[],
        summary: "every log in the dump merged by time: timeline [-n N] [--log LOG] [--json]",
        help: clap_help::<timeline::Args>,
        options: clap_options::<timeline::Args>,
        run: timeline::run,
    },
    Command {
        name: "print",
        aliases: &["p"],
        summary: "a variable or expression with its DWARF type, as gdb prints it: p[/FMT] EXPR",
        // These texts end without a newline: `help CMD` adds it, as `CMD --help`'s writeln does.
        help: || format!("{}\n", print::HELP),
        options: || vec!["--json".into(), "--pretty".into(), "--help".into()],
        run: print::run,
    },
    Command {
        name: "eval",
        aliases: &[],
        summary: "an integer expression in hex, decimal, octal and binary: eval EXPR",
        help: || eval::HELP.into(),
        options: || vec!["--json".into(), "--help".into()],
        run: eval::run,
    },
    Command {
        name: "whatis",
        aliases: &[],
        summary: "the type of an expression, or a type's name: whatis EXPR|TYPE",
        help: || format!("{}\n", types::WHATIS_HELP),
        options: || vec!["--json".into(), "--help".into()],
        run: types::whatis,
    },
    Command {
        name: "ptype",
        aliases: &[],
        summary: "a type written out in full, as gdb does: ptype EXPR|TYPE",
        help: || format!("{}\n", types::PTYPE_HELP),
        options: || vec!["--json".into(), "--help".into()],
        run: types::ptype,
    },
    Command {
        name: "struct",
        aliases: &["union"],
        summary: "a struct's layout, or an object at an address: struct [-o] NAME[.member] [ADDR]",
        help: || format!("{}\n", types::STRUCT_HELP),
        options: || vec!["-o".into(), "--json".into(), "--help".into()],
        run: types::struct_,
    },
    Command {
        name: "sys",
        aliases: &[],
        summary: "the dump: file, format, producer, CPUs, image, VMCOREINFO, panic",
        help: clap_help::<sys::Args>,
        options: clap_options::<sys::Args>,
        run: sys::run,
    },
    Command {
        name: "log",
        aliases: &["dmesg"],
        summary: "the Linux kernel's message log (printk ring): log [-t|-T] [-m]",
        help: clap_help::<log::Args>,
        options: clap_options::<log::Args>,
        run: log::run,
    },
    Command {
        name: "mod",
        aliases: &[],
        summary: "Linux's loaded modules; load a module's .ko: mod [-s NAME [FILE]] [-S [DIR]]",
        help: clap_help::<modules::Args>,
        options: clap_options::<modules::Args>,
        run: modules::run,
    },
    Command {
        name: "ps",
        aliases: &[],
        summary: "Linux's tasks, as crash's ps: ps [-k|-u] [PID|TASK|COMM]...",
        help: clap_help::<ps::Args>,
        options: clap_options::<ps::Args>,
        run: ps::run,
    },
    Command {
        name: "sym",
        aliases: &[],
        summary: "symbol <-> address: sym NAME|ADDR, sym -l [REGEX]",
        help: clap_help::<sym::Args>,
        options: clap_options::<sym::Args>,
        run: sym::run,
    },
    Command {
        name: "bt",
        aliases: &[],
        summary: "the stack where the dump stopped: bt [-a] [-f] [-l] [-c CPU] [PID]",
        help: clap_help::<bt::Args>,
        options: clap_options::<bt::Args>,
        run: bt::run,
    },
    Command {
        name: "task",
        aliases: &[],
        summary: "the current context's task or thread; task PID|TASK makes it current",
        help: clap_help::<task::Args>,
        options: clap_options::<task::Args>,
        run: task::run,
    },
    Command {
        name: "dis",
        aliases: &[],
        summary: "disassemble: dis FUNC, dis ADDR [COUNT], -l for source lines",
        help: clap_help::<dis::Args>,
        options: clap_options::<dis::Args>,
        run: dis::run,
    },
    Command {
        name: "rd",
        aliases: &[],
        summary: "read memory: rd [-p] [-8|-16|-32|-64] [-s] [-a] ADDR|SYMBOL [COUNT]",
        help: clap_help::<rd::Args>,
        options: clap_options::<rd::Args>,
        run: rd::run,
    },
    Command {
        name: "plugins",
        aliases: &[],
        summary: "the log decoders, and which of their logs this dump holds: plugins [--json]",
        help: clap_help::<plugins::Args>,
        options: clap_options::<plugins::Args>,
        run: plugins::run,
    },
    Command {
        name: "schema",
        aliases: &[],
        summary: "the event schemata loaded and the events each names: schema [-e] [--json]",
        help: clap_help::<schema::Args>,
        options: clap_options::<schema::Args>,
        run: schema::run,
    },
    Command {
        name: "alias",
        aliases: &[],
        summary: "name a command line: alias [NAME [COMMAND...]]",
        help: || alias::HELP.into(),
        options: Vec::new,
        run: alias::run,
    },
    Command {
        name: "set",
        aliases: &[],
        summary: "session settings: set scroll|silent on|off, set radix 10|16, set PID|TASK",
        help: || set::HELP.into(),
        options: Vec::new,
        run: set::run,
    },
    Command {
        name: "help",
        aliases: &["?"],
        summary: "this list; help CMD for a command's full text",
        help: || help::HELP.into(),
        options: Vec::new,
        run: help::run,
    },
    Command {
        name: "quit",
        aliases: &["q", "exit"],
        summary: "leave kcrash",
        help: || "quit, q, exit: leave kcrash (so does Ctrl-D at the prompt).\n".into(),
        options: Vec::new,
        run: |_, _| Ok(Flow::Quit),
    },
];

/// `help CMD` for a decoder's command.
pub fn decoder_help(decoder: &dyn kcrash_plugin::Decoder) -> String {
    events::help(decoder)
}

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

/// Runs one command (no output plumbing: that is the front end's) and turns its error into
/// what the user sees, prefixed with the command's name and on one line. `CMD --help` is
/// output, not an error; a reader that went away (`| head`, the pager quit) is no failure.
pub fn execute(
    session: &Session<'_>,
    settings: &mut Settings,
    out: &mut dyn Write,
    err: &mut dyn Write,
    paint: Paint,
    text: &str,
) -> Result<Flow> {
    let words = shell_words::split(text).map_err(|e| anyhow!("{text:?}: {e}"))?;
    let Some((name, args)) = words.split_first() else {
        bail!("no command before the redirection");
    };
    let mut cx = Context {
        session,
        settings,
        out,
        err,
        paint,
        word: name,
        raw: after_word(text),
    };
    let Some(cmd) = command(name) else {
        // A decoder's log with no command of its own is printed by the one for every log.
        let decoder = crate::plugins::by_command(name)
            .ok_or_else(|| anyhow!("{name}: no such command (try help)"))?;
        return match events::run(&mut cx, decoder, args).or_else(|e| help_as_output(e, cx.out)) {
            Ok(flow) => Ok(flow),
            Err(e) => explain(decoder.command(), e),
        };
    };
    match (cmd.run)(&mut cx, args).or_else(|e| help_as_output(e, cx.out)) {
        Ok(flow) => Ok(flow),
        Err(e) => explain(cmd.name, e),
    }
}

/// The text after a command line's first word.
pub(super) fn after_word(line: &str) -> &str {
    let line = line.trim_start();
    line.find(char::is_whitespace)
        .map_or("", |at| line[at..].trim())
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

/// A command's error as the user sees it: clap's multi-line errors become their first line; a
/// reader that left early is no failure.
fn explain(name: &str, e: anyhow::Error) -> Result<Flow> {
    if is_broken_pipe(&e) {
        return Ok(Flow::Continue);
    }
    if let Some(clap) = e.downcast_ref::<clap::Error>() {
        bail!("{name}: {} (help {name})", clap_line(clap));
    }
    Err(anyhow!("{name}: {}", report(e.as_ref())))
}

/// clap's error on one line: what is wrong, with what it names (the missing argument, the
/// similar one that exists), without its usage lines and its pointer to --help.
fn clap_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut line = String::new();
    for part in text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
    {
        // A line that ends in a colon introduces the next ("not provided: <NAME>").
        if !line.is_empty() {
            line.push_str(if line.ends_with(':') { " " } else { "; " });
        }
        line.push_str(part.strip_prefix("error: ").unwrap_or(part));
    }
    if line.is_empty() {
        line.push_str("bad arguments");
    }
    line
}

/// Whether `e` is a write to a reader that went away (`| head`, the pager quit).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
