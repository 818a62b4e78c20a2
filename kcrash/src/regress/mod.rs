//! `kcrash regress DIR`: runs a corpus's checks (corpus/README.md, "manifest.toml") on every
//! dump of every entry, in-process through the same line runner the prompt uses, and compares each
//! output with its expected file. Entries run in parallel; the dumps of one entry, which are the
//! same crash written by different producers, must all print what the expected file holds.
//!
//! A dump, image or expected file that cannot be read makes its checks errored, with the reason;
//! nothing listed is skipped. `--update` makes the first dump of each entry that opens the
//! reference: its output becomes the expected file, and the entry's other dumps are still
//! compared with it.

pub mod manifest;
pub mod output;
pub mod report;

use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use regex::Regex;

use crate::commands::Settings;
use crate::error::report;
use crate::redirect;
use crate::session::{open_dump, Session};
use manifest::{Check, Entry, Manifest};
use output::{Output, Verdict};

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Threads for entries (default: rayon's, one per core).
    pub jobs: Option<usize>,
    /// Rewrite the expected files from the output.
    pub update: bool,
    /// Only entries whose name matches.
    pub filter: Option<Regex>,
    /// Only the K-th of N shares of the selected entries, in name order.
    pub shard: Option<crate::batch::sources::Shard>,
}

/// What became of one check on one dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// The output is not the expected one: a diff, or why there is none.
    Failed(String),
    /// The check could not run or be compared: the dump, image or expected file is missing or
    /// unreadable. The reason names the file.
    Errored(String),
}

/// One check on one dump.
#[derive(Debug, Clone)]
pub struct Case {
    pub entry: String,
    /// The dump's format name and path, as the manifest gives them.
    pub format: String,
    pub dump: String,
    pub command: String,
    pub expect: String,
    pub outcome: Outcome,
    /// Time the command took (0 when it did not run).
    pub seconds: f64,
}

/// An expected file `--update` wrote.
#[derive(Debug, Clone)]
pub struct Change {
    pub path: String,
    /// `None` when the file is new.
    pub lines: Option<(usize, usize)>,
    /// The old file against the new one (empty when new).
    pub diff: String,
}

/// The results of one entry: its cases in manifest order (dump by dump, check by check).
#[derive(Debug, Clone)]
pub struct EntryRun {
    pub name: String,
    pub cases: Vec<Case>,
    pub changes: Vec<Change>,
    pub seconds: f64,
}

/// A whole run.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir: PathBuf,
    pub entries: Vec<EntryRun>,
    pub seconds: f64,
    pub jobs: usize,
    pub update: bool,
}

/// Counts of a run's cases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub passed: usize,
    pub failed: usize,
    pub errored: usize,
}

impl Tally {
    pub fn of<'a>(cases: impl IntoIterator<Item = &'a Case>) -> Tally {
        cases.into_iter().fold(Tally::default(), |mut t, c| {
            match c.outcome {
                Outcome::Passed => t.passed += 1,
                Outcome::Failed(_) => t.failed += 1,
                Outcome::Errored(_) => t.errored += 1,
            }
            t
        })
    }

    pub fn total(&self) -> usize {
        self.passed + self.failed + self.errored
    }
}

impl Run {
    pub fn cases(&self) -> impl Iterator<Item = &Case> {
        self.entries.iter().flat_map(|e| &e.cases)
    }

    pub fn tally(&self) -> Tally {
        Tally::of(self.cases())
    }

    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        let t = self.tally();
        t.failed == 0 && t.errored == 0
    }
}

/// A corpus directory with its manifest.
pub struct Corpus {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

impl Corpus {
    pub fn open(dir: &Path) -> Result<Corpus, String> {
        Ok(Corpus {
            dir: dir.to_owned(),
            manifest: Manifest::load(dir)?,
        })
    }

    /// The entries `options.filter` selects, in manifest order; with a shard, its share of them
    /// (every N-th from the K-th in name order, so that shards split any manifest alike).
    pub fn selected<'a>(&'a self, options: &Options) -> Vec<&'a Entry> {
        let mut chosen: Vec<&Entry> = self
            .manifest
            .entries
            .iter()
            .filter(|e| {
                options
                    .filter
                    .as_ref()
                    .is_none_or(|re| re.is_match(&e.name))
            })
            .collect();
        if let Some(shard) = options.shard {
            let mut names: Vec<&str> = chosen.iter().map(|e| e.name.as_str()).collect();
            names.sort_unstable();
            chosen.retain(|e| {
                names
                    .binary_search(&e.name.as_str())
                    .is_ok_and(|i| shard.takes(i))
            });
        }
        chosen
    }

    /// Runs `entries` in parallel; `done` is called as each entry finishes (for progress).
    pub fn run(
        &self,
        entries: &[&Entry],
        options: &Options,
        done: &(dyn Fn(&EntryRun) + Sync),
    ) -> Result<Run, String> {
        let mut pool = rayon::ThreadPoolBuilder::new();
        if let Some(jobs) = options.jobs {
            pool = pool.num_threads(jobs);
        }
        let pool = pool
            .build()
            .map_err(|e| format!("cannot start the worker threads: {e}"))?;
        let started = Instant::now();
        let runs = pool.install(|| {
            entries
                .par_iter()
                .map(|entry| {
                    let run = self.run_entry(entry, options.update);
                    done(&run);
                    run
                })
                .collect()
        });
        Ok(Run {
            dir: self.dir.clone(),
            entries: runs,
            seconds: started.elapsed().as_secs_f64(),
            jobs: pool.current_num_threads(),
            update: options.update,
        })
    }

    fn run_entry(&self, entry: &Entry, update: bool) -> EntryRun {
        let started = Instant::now();
        let image = self
            .manifest
            .kernel(&entry.kernel)
            .map(|k| self.dir.join(&k.image))
            .ok_or_else(|| format!("kernel {} is not in the manifest", entry.kernel));
        // Every dump's outputs, check by check, or why the dump could not be read.
        let outputs: Vec<Result<Vec<(Output, f64)>, String>> = entry
            .dumps
            .iter()
            .map(|d| {
                let image = image.as_ref().map_err(Clone::clone)?;
                run_dump(&self.dir.join(&d.path), d.phys_start, image, &entry.checks)
            })
            .collect();
        let mut cases = Vec::new();
        let mut changes = Vec::new();
        if entry.dumps.is_empty() || entry.checks.is_empty() {
            let what = if entry.dumps.is_empty() {
                "dump"
            } else {
                "check"
            };
            cases.push(Case {
                entry: entry.name.clone(),
                format: String::new(),
                dump: String::new(),
                command: String::new(),
                expect: String::new(),
                outcome: Outcome::Errored(format!("the manifest lists no {what} for this entry")),
                seconds: 0.0,
            });
        }
        for (i, check) in entry.checks.iter().enumerate() {
            let path = self.dir.join(&check.expect);
            let expected = if update {
                self.update(check, &path, &outputs, i, &mut changes)
            } else {
                read_expected(&path)
            };
            for (dump, out) in entry.dumps.iter().zip(&outputs) {
                let (outcome, seconds) = match (out, &expected) {
                    (Err(why), _) => (Outcome::Errored(why.clone()), 0.0),
                    (Ok(outs), Err(why)) => (Outcome::Errored(why.clone()), outs[i].1),
                    (Ok(outs), Ok(want)) => {
                        let labels = (check.expect.as_str(), dump.path.as_str());
                        let outcome = match output::compare(check.compare, want, &outs[i].0, labels)
                        {
                            Ok(Verdict::Same) => Outcome::Passed,
                            Ok(Verdict::Differs(diff)) => Outcome::Failed(diff),
                            Err(why) => Outcome::Errored(why),
                        };
                        (outcome, outs[i].1)
                    }
                };
                cases.push(Case {
                    entry: entry.name.clone(),
                    format: dump.format.clone(),
                    dump: dump.path.clone(),
                    command: check.command.clone(),
                    expect: check.expect.clone(),
                    outcome,
                    seconds,
                });
            }
        }
        // Dump by dump reads better in reports than check by check.
        cases.sort_by_key(|c| entry.dumps.iter().position(|d| d.path == c.dump));
        EntryRun {
            name: entry.name.clone(),
            cases,
            changes,
            seconds: started.elapsed().as_secs_f64(),
        }
    }

    /// `--update` for check `i`: the first dump that ran it with an output of the right form
    /// gives the new expected file, written when it changed. Without one, the file stays.
    fn update(
        &self,
        check: &Check,
        path: &Path,
        outputs: &[Result<Vec<(Output, f64)>, String>],
        i: usize,
        changes: &mut Vec<Change>,
    ) -> Result<String, String> {
        let Some(new) = outputs
            .iter()
            .flatten()
            .find_map(|outs| outs[i].0.expected_file(check.compare).ok())
        else {
            return read_expected(path);
        };
        let old = std::fs::read_to_string(path).ok();
        if old.as_deref() == Some(new.as_str()) {
            return Ok(new);
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("{}: cannot create: {e}", parent.display()))?;
        }
        std::fs::write(path, &new).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
        changes.push(Change {
            path: check.expect.clone(),
            lines: old.as_deref().map(|old| output::line_counts(old, &new)),
            diff: old.as_deref().map_or_else(String::new, |old| {
                output::diff(old, &new, (&check.expect, "new"))
            }),
        });
        Ok(new)
    }
}

fn read_expected(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::NotFound {
            " (kcrash regress --update writes it)"
        } else {
            ""
        };
        format!("expected output {}: {e}{hint}", path.display())
    })
}

/// Opens one dump (raw memory when `phys_start` is given) with its image and runs every check
/// on it, capturing what each prints.
fn run_dump(
    path: &Path,
    phys_start: Option<u64>,
    image: &Path,
    checks: &[Check],
) -> Result<Vec<(Output, f64)>, String> {
    let dump = open_dump(path, phys_start).map_err(|e| e.to_string())?;
    let session = Session::open(&dump, Some(image.to_owned())).map_err(|e| e.to_string())?;
    let mut settings = Settings::plain();
    Ok(checks
        .iter()
        .map(|check| {
            let started = Instant::now();
            let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
            let result = redirect::run_line(
                &session,
                &mut settings,
                &check.command,
                Some(&mut stdout),
                &mut stderr,
                false,
            );
            let output = Output {
                stdout: String::from_utf8_lossy(&stdout).into_owned(),
                stderr: String::from_utf8_lossy(&stderr).into_owned(),
                error: result.err().map(|e| report(e.as_ref())),
            }
            .replaced(&check.replace);
            (output, started.elapsed().as_secs_f64())
        })
        .collect())
}
