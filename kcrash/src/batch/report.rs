//! What a batch writes: one report per dump (what each command printed, how the dump's run
//! ended, its time and memory) and a summary of them; and the merge of shards' reports.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How one dump's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Opened, and every command succeeded.
    Ok,
    /// Opened; a command failed (its error is in its entry).
    Failed,
    /// The dump, or a file given with it, could not be opened.
    NotOpened,
    /// Killed at the time limit.
    TimedOut,
    /// Stopped at the memory limit.
    OutOfMemory,
    /// Ended by a signal or an unexpected exit, without a report of its own.
    Crashed,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Ok,
        Status::Failed,
        Status::NotOpened,
        Status::TimedOut,
        Status::OutOfMemory,
        Status::Crashed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::NotOpened => "not opened",
            Status::TimedOut => "timed out",
            Status::OutOfMemory => "out of memory",
            Status::Crashed => "crashed",
        }
    }
}

/// One command's result on one dump.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommandRun {
    pub command: String,
    pub ok: bool,
    pub seconds: f64,
    /// Standard output as printed (up to the batch's output limit).
    pub stdout: String,
    /// The output cut at the limit.
    pub stdout_cut: bool,
    /// For a command run with `--json`: the document, or the lines as an array.
    pub json: Option<Value>,
    /// Warnings the command wrote.
    pub stderr: String,
    /// Why it failed, as kcrash would say after `kcrash: `.
    pub error: Option<String>,
}

/// What the worker that read one dump found out; the batch adds how it ended.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Found {
    /// The image the dump was read with, when there was one.
    pub image: Option<String>,
    pub modules: Vec<String>,
    /// What opening said (the KASLR offset, the image found for a core, ...).
    pub notes: Vec<String>,
    /// Why the dump could not be opened.
    pub open_error: Option<String>,
    pub commands: Vec<CommandRun>,
}

/// The report of one dump.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub kcrash_json: u32,
    pub dump: String,
    pub status: Status,
    /// A line saying why, for every status but ok.
    pub why: Option<String>,
    /// Wall time of the dump's run, from its start to its end.
    pub seconds: f64,
    /// The run's peak resident memory (KiB), as the kernel accounts it.
    pub peak_rss_kib: u64,
    /// The worker's exit status, or the signal that ended it.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    #[serde(flatten)]
    pub found: Found,
    /// What the worker printed on its own standard error (a panic's message): the last bytes.
    pub worker_stderr: String,
}

/// One dump's line in a summary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Line {
    pub dump: String,
    pub report: String,
    pub status: Status,
    pub why: Option<String>,
    pub seconds: f64,
    pub peak_rss_kib: u64,
}

/// A summary of the reports in a batch's directory (of one shard's dumps, or merged).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub kcrash_json: u32,
    /// `K/N` when the summary is of one shard.
    pub shard: Option<String>,
    pub dumps: usize,
    /// Dumps by how their run ended.
    pub counts: std::collections::BTreeMap<String, usize>,
    /// Dumps run now (the others' reports were already complete).
    pub ran: usize,
    /// Wall time of the batch.
    pub seconds: f64,
    pub jobs: usize,
    /// Dumps run per second of the batch's wall time.
    pub dumps_per_second: f64,
    pub largest_peak_rss_kib: u64,
    pub dumps_list: Vec<Line>,
}

impl Summary {
    /// The summary of `reports` (file, report), each dump listed in path order.
    pub fn of(
        reports: &[(PathBuf, Report)],
        shard: Option<String>,
        ran: usize,
        seconds: f64,
        jobs: usize,
    ) -> Summary {
        let mut counts = std::collections::BTreeMap::new();
        for s in Status::ALL {
            counts.insert(s.name().to_owned(), 0);
        }
        let mut lines: Vec<Line> = reports
            .iter()
            .map(|(file, r)| {
                *counts.entry(r.status.name().to_owned()).or_insert(0) += 1;
                Line {
                    dump: r.dump.clone(),
                    report: file.display().to_string(),
                    status: r.status,
                    why: r.why.clone(),
                    seconds: r.seconds,
                    peak_rss_kib: r.peak_rss_kib,
                }
            })
            .collect();
        lines.sort_by(|a, b| a.dump.cmp(&b.dump));
        Summary {
            kcrash_json: crate::report::JSON_VERSION,
            shard,
            dumps: lines.len(),
            counts,
            ran,
            seconds,
            jobs,
            dumps_per_second: if seconds > 0.0 {
                ran as f64 / seconds
            } else {
                0.0
            },
            largest_peak_rss_kib: lines.iter().map(|l| l.peak_rss_kib).max().unwrap_or(0),
            dumps_list: lines,
        }
    }

    /// How many dumps did not end ok.
    pub fn not_ok(&self) -> usize {
        self.dumps_list
            .iter()
            .filter(|l| l.status != Status::Ok)
            .count()
    }
}

/// The report in `file`, when it is a whole one (a batch writes reports whole or not at all).
pub fn read(file: &Path) -> Option<Report> {
    let text = std::fs::read(file).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Every whole report in `dir`'s `reports/`, by file; a file that is not one is named in
/// `broken`.
pub fn all_in(dir: &Path, broken: &mut Vec<PathBuf>) -> Vec<(PathBuf, Report)> {
    let Ok(entries) = std::fs::read_dir(dir.join(REPORTS)) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        match read(&path) {
            Some(report) => found.push((path, report)),
            None => broken.push(path),
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// Where a batch keeps its per-dump reports, under its output directory.
pub const REPORTS: &str = "reports";

/// The report file of `dump` in `out`: its file name, then a hash of its whole path (dumps of
/// one name in several directories are told apart), stable from run to run and machine to
/// machine, so that a run finds what an earlier one wrote.
pub fn path_for(out: &Path, dump: &Path) -> PathBuf {
    let name = dump
        .file_name()
        .map_or_else(|| "dump".into(), |n| n.to_string_lossy().into_owned());
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    out.join(REPORTS).join(format!(
        "{safe}-{:016x}.json",
        fnv1a(dump.as_os_str().as_encoded_bytes())
    ))
}

/// FNV-1a, 64 bits: a fixed function of the bytes, unlike the standard library's hashers.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Writes `value` to `file` whole: to a temporary file beside it, renamed over it when written.
pub fn write_whole(file: &Path, value: &impl Serialize) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    serde_json::to_writer_pretty(&mut tmp, value)?;
    std::io::Write::write_all(&mut tmp, b"\n")?;
    tmp.persist(file).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_files_are_named_by_the_dumps_path() {
        let out = Path::new("/out");
        let a = path_for(out, Path::new("/dumps/a/vmcore"));
        let b = path_for(out, Path::new("/dumps/b/vmcore"));
        assert_ne!(a, b);
        assert_eq!(a, path_for(out, Path::new("/dumps/a/vmcore")));
        assert!(
            a.to_string_lossy().starts_with("/out/reports/vmcore-"),
            "{}",
            a.display()
        );
        let odd = path_for(out, Path::new("/d/we ird\n.core"));
        let name = odd.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("we_ird_.core-"), "{name}");
        // The function is FNV-1a's: its published value for "a".
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
