//! The process that reads one dump of a batch: opens it as kcrash's command line would (its
//! image given, named by the list, or found by build-id in the symbol directories), runs every
//! command with its output captured, and writes what it found for the batch to complete.
//! A process of its own, so that the batch can bound its time and memory and outlive it.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::report::{CommandRun, Found};
use crate::commands::Settings;
use crate::error::report;
use crate::linux::ko::module_name;
use crate::redirect;
use crate::session::{open_dump, sort_files, Session};

/// Reads the dump among `files` with the others, runs `lines` on it, each command's output kept
/// up to `max_output` bytes.
pub fn read(files: &[PathBuf], lines: &[String], symbols: &[PathBuf], max_output: usize) -> Found {
    let mut found = Found::default();
    if let Err(e) = open_and_run(files, lines, symbols, max_output, &mut found) {
        found.open_error = Some(e);
    }
    found
}

fn open_and_run(
    files: &[PathBuf],
    lines: &[String],
    symbols: &[PathBuf],
    max_output: usize,
    found: &mut Found,
) -> Result<(), String> {
    let files = sort_files(files).map_err(|e| e.to_string())?;
    let dump = open_dump(&files.dump, files.phys_start).map_err(|e| e.to_string())?;
    let image = match files.image {
        Some(image) => Some(image),
        None => by_build_id(&dump, symbols),
    };
    found.image = image.as_ref().map(|p| p.display().to_string());
    let mut session = Session::open(&dump, image).map_err(|e| e.to_string())?;
    session.schemata.add_config_dir();
    for ko in &files.modules {
        let name = module_name(ko)
            .ok_or_else(|| format!("{}: a module's file is NAME.ko", ko.display()))?;
        session.load_module(&name, ko).map_err(|e| e.to_string())?;
        found.modules.push(ko.display().to_string());
    }
    found.notes = session.notes.clone();
    let mut settings = Settings::plain();
    for line in lines {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let started = Instant::now();
        let mut stdout = Capped::new(max_output);
        let mut stderr = Vec::new();
        let result = redirect::run_line(
            &session,
            &mut settings,
            line,
            Some(&mut stdout),
            &mut stderr,
            false,
        );
        let text = String::from_utf8_lossy(&stdout.bytes).into_owned();
        let json = (line.split_whitespace().any(|w| w == "--json") && !stdout.cut)
            .then(|| json_of(&text))
            .flatten();
        found.commands.push(CommandRun {
            command: line.to_owned(),
            ok: result.is_ok(),
            seconds: started.elapsed().as_secs_f64(),
            stdout: text,
            stdout_cut: stdout.cut,
            json,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            error: result.err().map(|e| report(e.as_ref())),
        });
    }
    Ok(())
}

/// A command's `--json` output as one value: its document, or its lines as an array.
fn json_of(text: &str) -> Option<serde_json::Value> {
    if let Ok(value) = serde_json::from_str(text) {
        return Some(value);
    }
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<Vec<serde_json::Value>, _>>()
        .ok()
        .map(serde_json::Value::Array)
}

/// The kernel image of `dump`, by the build-id its VMCOREINFO gives, in `dirs`: as a separate
/// debug file (`.build-id/ab/cdef….debug`, the layout of /usr/lib/debug) or in a directory
/// named by the build-id (`abcdef…/vmlinux`, `abcdef…/debuginfo`, as debuginfod's cache keeps
/// them).
fn by_build_id(dump: &dumpfmt::Dump, dirs: &[PathBuf]) -> Option<PathBuf> {
    let info = dump.vmcoreinfo().ok()??;
    let id = info.get("BUILD-ID")?.trim().to_ascii_lowercase();
    if id.len() < 3 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    dirs.iter().find_map(|dir| {
        [
            dir.join(".build-id")
                .join(&id[..2])
                .join(format!("{}.debug", &id[2..])),
            dir.join(&id).join("vmlinux"),
            dir.join(&id).join("debuginfo"),
        ]
        .into_iter()
        .find(|p| p.is_file())
    })
}

/// Output kept up to a limit; what comes after is counted out, not stored.
struct Capped {
    bytes: Vec<u8>,
    max: usize,
    cut: bool,
}

impl Capped {
    fn new(max: usize) -> Capped {
        Capped {
            bytes: Vec::new(),
            max,
            cut: false,
        }
    }
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.max.saturating_sub(self.bytes.len());
        if buf.len() > room {
            self.cut = true;
        }
        self.bytes.extend_from_slice(&buf[..buf.len().min(room)]);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The worker's whole job: what it found, written to `report` for the batch.
pub fn main(
    report: &Path,
    files: &[PathBuf],
    lines: &[String],
    symbols: &[PathBuf],
    max_output: usize,
) -> io::Result<()> {
    let found = read(files, lines, symbols, max_output);
    super::report::write_whole(report, &found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_limit_is_cut_and_said() {
        let mut out = Capped::new(5);
        out.write_all(b"abc").unwrap();
        out.write_all(b"defg").unwrap();
        assert_eq!((out.bytes.as_slice(), out.cut), (&b"abcde"[..], true));
    }

    #[test]
    fn json_output_is_one_value() {
        assert_eq!(json_of("{\"a\": 1}\n"), Some(serde_json::json!({"a": 1})));
        assert_eq!(
            json_of("{\"a\":1}\n{\"a\":2}\n"),
            Some(serde_json::json!([{"a": 1}, {"a": 2}]))
        );
        assert_eq!(json_of("not json"), None);
    }
}
