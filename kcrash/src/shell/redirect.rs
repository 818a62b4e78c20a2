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
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (_, '\\') if quote != Some('\'') => escaped = true,
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '|') => {
                let pipeline = line[i + 1..].trim();
                if pipeline.is_empty() {
                    bail!("nothing after |");
                }
                return Ok((&line[..i], Target::Pipe(pipeline.to_owned())));
            }
            (None, '>') => {
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
pub struct Sink {
    writer: Box<dyn Write>,
    child: Option<Child>,
}

/// The pager when `$PAGER` is not set.
pub const DEFAULT_PAGER: &str = "less -FRX";

impl Sink {
    /// Opens `target`; `pager` is used for standard output when given.
    pub fn open(target: &Target, pager: Option<&str>) -> Result<Sink> {
        match target {
            Target::Stdout => match pager {
                Some(pager) => Sink::spawn(pager).with_context(|| format!("pager {pager:?}")),
                None => Ok(Sink {
                    writer: Box::new(BufWriter::new(io::stdout())),
                    child: None,
                }),
            },
            Target::File { path, append } => {
                let file = if *append {
                    OpenOptions::new().create(true).append(true).open(path)
                } else {
                    File::create(path)
                }
                .with_context(|| format!("{}", path.display()))?;
                Ok(Sink {
                    writer: Box::new(BufWriter::new(file)),
                    child: None,
                })
            }
            Target::Pipe(pipeline) => Sink::spawn(pipeline),
        }
    }

    /// `sh -c command` reading the sink; its output and errors go where kcrash's go.
    fn spawn(command: &str) -> Result<Sink> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot run sh -c {command:?}"))?;
        let stdin = child.stdin.take().ok_or_else(|| anyhow!("no pipe to sh"))?;
        Ok(Sink {
            writer: Box::new(BufWriter::new(stdin)),
            child: Some(child),
        })
    }

    pub fn writer(&mut self) -> &mut dyn Write {
        &mut *self.writer
    }

    /// Flushes, closes the pipe and waits for the reader. A reader that stopped reading early
    /// (`| head`, quitting the pager) is not an error.
    pub fn finish(mut self) -> Result<()> {
        let flushed = self.writer.flush();
        drop(self.writer);
        if let Some(mut child) = self.child.take() {
            child.wait().context("waiting for the pipeline")?;
        }
        match flushed {
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
            _ => Ok(()),
        }
    }
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
        assert!(split("klog > a b").is_err());
        assert!(split("klog >").is_err());
    }
}
