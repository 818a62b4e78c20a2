//! crash's output plumbing for one command line: `CMD | pipeline`, `CMD > file`, `CMD >> file`,
//! `!cmd`, and the pager for long output on a terminal, around [`commands::execute`]. The
//! prompt, scripts and `kcrash regress` all run their lines through [`run_line`].

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::thread::JoinHandle;

use anyhow::{anyhow, bail, Context as _, Result};

use crate::commands::{self, Flow, Settings};
use crate::interrupt;
use crate::session::Session;

/// Runs one command line with its plumbing. Blank lines and `#` comments do nothing. Standard
/// output is `stdout` when given (a capture: `kcrash regress`), else the process's, paged when
/// it is a terminal (`stdout_terminal`) and `set scroll` is on. Errors come back as one line,
/// prefixed with the command's name.
pub fn run_line(
    session: &Session<'_>,
    settings: &mut Settings,
    line: &str,
    stdout: Option<&mut dyn Write>,
    err: &mut dyn Write,
    stdout_terminal: bool,
) -> Result<Flow> {
    let expanded = settings.expand(line.trim());
    let line = expanded.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(Flow::Continue);
    }
    interrupt::clear();
    if let Some(shell_command) = line.strip_prefix('!') {
        return run_shell(shell_command).map(|()| Flow::Continue);
    }
    let (command_text, target) = split(line)?;
    let to_terminal = target == Target::Stdout && stdout.is_none() && stdout_terminal;
    let pager = std::env::var("PAGER")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_PAGER.into());
    let use_pager = to_terminal && settings.scroll;
    let mut sink = Sink::open(&target, stdout, use_pager.then_some(pager.as_str()))?;
    let paint = settings.color.paint_for(to_terminal);
    let result = commands::execute(session, settings, &mut sink, err, paint, command_text);
    let finished = sink.finish();
    let flow = result?;
    finished?;
    Ok(flow)
}

/// `!command`: runs it with kcrash's terminal; a failure to start or a non-zero exit is an error.
fn run_shell(command: &str) -> Result<()> {
    let status = Command::new("sh")
        .arg("-c")
        .arg(command)
        .status()
        .map_err(|e| anyhow!("!{command}: {e}"))?;
    if !status.success() {
        bail!("!{}: {status}", command.trim());
    }
    Ok(())
}

/// Where a command's output goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Standard output, through the pager when it is on.
    Stdout,
    /// `> file` (`append` false) or `>> file`.
    File { path: PathBuf, append: bool },
    /// `| pipeline`, run by `sh -c`.
    Pipe(String),
}

/// Splits `line` at its first `|` or `>` outside quotes: the command, and where its output goes.
pub fn split(line: &str) -> Result<(&str, Target)> {
    let mut quote = None;
    let mut escaped = false;
    // Plumbing stands apart from the command, as in crash: `| grep`, `> file`. A `|` or `>` glued
    // to what precedes it is an expression's own (`a->b`, `x|y`, `v>>2`), and `||` never pipes.
    // Inside brackets they are too: `p (x >> 32)`.
    let apart = |i: usize| i > 0 && line[..i].ends_with(char::is_whitespace);
    let mut depth = 0usize;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (None, '(' | '[') => depth += 1,
            (None, ')' | ']') => depth = depth.saturating_sub(1),
            (_, '\\') if quote != Some('\'') => escaped = true,
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '|') if depth == 0 && apart(i) && !line[i + 1..].starts_with('|') => {
                let pipeline = line[i + 1..].trim();
                if pipeline.is_empty() {
                    bail!("nothing after |");
                }
                return Ok((&line[..i], Target::Pipe(pipeline.to_owned())));
            }
            (None, '>') if depth == 0 && apart(i) => {
                let append = line[i + 1..].starts_with('>');
                let rest = &line[i + 1 + usize::from(append)..];
                let words = shell_words::split(rest).map_err(|e| anyhow!("{rest:?}: {e}"))?;
                let [path] = words.as_slice() else {
                    bail!("> wants one file name, got {rest:?}");
                };
                return Ok((
                    &line[..i],
                    Target::File {
                        path: PathBuf::from(path),
                        append,
                    },
                ));
            }
            _ => {}
        }
    }
    Ok((line, Target::Stdout))
}

/// An open output for one command: a writer, and the process reading it, if any.
pub struct Sink<'w> {
    writer: Option<Box<dyn Write + 'w>>,
    child: Option<Child>,
    /// A captured command's pipeline: the thread reading what the pipeline prints, and where
    /// that goes once it is done.
    collect: Option<(Reader, &'w mut dyn Write)>,
    /// The pager, started on the first write so that a command without output starts none.
    pager: Option<String>,
}

/// The thread reading a captured pipeline's output to its end.
type Reader = JoinHandle<io::Result<Vec<u8>>>;

/// The pager when `$PAGER` is not set.
pub const DEFAULT_PAGER: &str = "less -FRX";

impl<'w> Sink<'w> {
    /// Opens `target`; standard output is `stdout` when given (a capture), else the process's,
    /// through `pager` when given.
    pub fn open(
        target: &Target,
        stdout: Option<&'w mut dyn Write>,
        pager: Option<&str>,
    ) -> Result<Sink<'w>> {
        let sink = |writer: Box<dyn Write + 'w>| Sink {
            writer: Some(writer),
            child: None,
            collect: None,
            pager: None,
        };
        match (target, stdout) {
            (Target::Stdout, Some(out)) => Ok(sink(Box::new(out))),
            (Target::Stdout, None) => match pager {
                Some(pager) => Ok(Sink {
                    writer: None,
                    child: None,
                    collect: None,
                    pager: Some(pager.to_owned()),
                }),
                None => Ok(sink(Box::new(BufWriter::new(io::stdout())))),
            },
            (Target::File { path, append }, _) => {
                let file = if *append {
                    OpenOptions::new().create(true).append(true).open(path)
                } else {
                    File::create(path)
                }
                .with_context(|| format!("{}", path.display()))?;
                Ok(sink(Box::new(BufWriter::new(file))))
            }
            (Target::Pipe(pipeline), capture) => {
                let (writer, mut child) = spawn(pipeline, capture.is_some(), false)?;
                // Read on a thread, so that neither side blocks on a full pipe.
                let collect = match (capture, child.stdout.take()) {
                    (Some(out), Some(stdout)) => {
                        Some((std::thread::spawn(|| read_all(stdout)), out))
                    }
                    _ => None,
                };
                Ok(Sink {
                    writer: Some(writer),
                    child: Some(child),
                    collect,
                    pager: None,
                })
            }
        }
    }

    /// Flushes, closes the pipe and waits for the reader. A reader that stopped reading early
    /// (`| head`, quitting the pager) is not an error.
    pub fn finish(mut self) -> Result<()> {
        let flushed = self.flush();
        drop(self.writer.take());
        if let Some(mut child) = self.child.take() {
            child.wait().context("waiting for the pipeline")?;
        }
        if let Some((reader, out)) = self.collect.take() {
            let printed = reader
                .join()
                .map_err(|_| anyhow!("the thread reading the pipeline panicked"))?
                .context("reading the pipeline's output")?;
            out.write_all(&printed)?;
        }
        match flushed {
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
            _ => Ok(()),
        }
    }

    fn writer(&mut self) -> io::Result<&mut Box<dyn Write + 'w>> {
        if let Some(pager) = self.pager.take() {
            let (writer, child) = spawn(&pager, false, true).map_err(|e| {
                io::Error::other(format!(
                    "pager {pager:?}: {e:#} (set scroll off, or --no-pager)"
                ))
            })?;
            self.writer = Some(writer);
            self.child = Some(child);
        }
        self.writer
            .as_mut()
            .ok_or_else(|| io::Error::other("output already closed"))
    }
}

impl Write for Sink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer()?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.writer {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

/// `sh -c command` reading what is written; its output (unless `capture`: then a pipe) and
/// errors go where kcrash's go. A pager is given `LESS=FRX` when `LESS` is unset, as git gives
/// its pager: less then passes colour through, quits on a short page and leaves it on screen.
fn spawn(command: &str, capture: bool, pager: bool) -> Result<(Box<dyn Write>, Child)> {
    let mut sh = Command::new("sh");
    if pager && std::env::var_os("LESS").is_none() {
        sh.env("LESS", "FRX");
    }
    let mut child = sh
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(if capture {
            Stdio::piped()
        } else {
            Stdio::inherit()
        })
        .spawn()
        .with_context(|| format!("cannot run sh -c {command:?}"))?;
    let stdin = child.stdin.take().ok_or_else(|| anyhow!("no pipe to sh"))?;
    Ok((Box::new(BufWriter::new(stdin)), child))
}

fn read_all(mut stdout: ChildStdout) -> io::Result<Vec<u8>> {
    let mut printed = Vec::new();
    io::Read::read_to_end(&mut stdout, &mut printed)?;
    Ok(printed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_outside_quotes_only() {
        assert_eq!(split("klog 0").unwrap(), ("klog 0", Target::Stdout));
        assert_eq!(
            split("klog -g 'a|b' | grep x").unwrap(),
            ("klog -g 'a|b' ", Target::Pipe("grep x".into()))
        );
        assert_eq!(
            split(r#"klog -g "x>y" >> 'out file'"#).unwrap(),
            (
                r#"klog -g "x>y" "#,
                Target::File {
                    path: "out file".into(),
                    append: true
                }
            )
        );
        assert_eq!(
            split(r"sym a\|b > f").unwrap().1,
            Target::File {
                path: "f".into(),
                append: false
            }
        );
        assert!(split("klog |").is_err());
        // Expression operators glued to their operands are not plumbing.
        for expr in [
            "p ((KLog *)&KLogs[3])->num_recs",
            "p a|b",
            "p x>>2",
            "p a || b",
            "p/x v>1",
        ] {
            assert_eq!(split(expr).unwrap(), (expr, Target::Stdout), "{expr}");
        }
        assert_eq!(
            split("p a->b | wc -l").unwrap(),
            ("p a->b ", Target::Pipe("wc -l".into()))
        );
        assert!(split("klog > a b").is_err());
        assert!(split("klog >").is_err());
    }

    #[test]
    fn a_captured_pipeline_prints_into_the_capture() {
        let mut captured = Vec::new();
        let target = Target::Pipe("grep -v b".into());
        let mut sink = Sink::open(&target, Some(&mut captured), None).unwrap();
        // More than a pipe holds, so a reader that waited for the end would deadlock.
        for _ in 0..20_000 {
            sink.write_all(b"a\nb\n").unwrap();
        }
        sink.finish().unwrap();
        assert_eq!(captured, b"a\n".repeat(20_000));
    }
}
