//! crash's output plumbing for one command line: `CMD | pipeline`, `CMD > file`, `CMD >> file`,
//! and the pager for long output on a terminal.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use anyhow::{anyhow, bail, Context as _, Result};

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
    /// The pager, started on the first write so that a command without output starts none.
    pager: Option<String>,
}

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
            pager: None,
        };
        match (target, stdout) {
            (Target::Stdout, Some(out)) => Ok(sink(Box::new(out))),
            (Target::Stdout, None) => match pager {
                Some(pager) => Ok(Sink {
                    writer: None,
                    child: None,
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
            (Target::Pipe(pipeline), _) => {
                let (writer, child) = spawn(pipeline)?;
                Ok(Sink {
                    writer: Some(writer),
                    child: Some(child),
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
        match flushed {
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
            _ => Ok(()),
        }
    }

    fn writer(&mut self) -> io::Result<&mut Box<dyn Write + 'w>> {
        if let Some(pager) = self.pager.take() {
            let (writer, child) = spawn(&pager).map_err(|e| {
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

/// `sh -c command` reading what is written; its output and errors go where kcrash's go.
fn spawn(command: &str) -> Result<(Box<dyn Write>, Child)> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run sh -c {command:?}"))?;
    let stdin = child.stdin.take().ok_or_else(|| anyhow!("no pipe to sh"))?;
    Ok((Box::new(BufWriter::new(stdin)), child))
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
}
