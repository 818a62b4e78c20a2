//! A regression run told three ways: text for a person (each failure's diff, each error's
//! reason, the changes `--update` made, a summary), JSON for scripts, and JUnit XML for CI
//! systems.

use std::fmt::Write as _;
use std::io::{self, Write};

use serde_json::{json, Value};

use super::{Case, Outcome, Run, Tally};
use crate::paint::Paint;

/// Every failure with its diff, every error with its reason (once per dump when all of its
/// checks failed to run for the same reason), every file `--update` wrote, then the summary.
pub fn write_text(run: &Run, out: &mut dyn Write, paint: Paint) -> io::Result<()> {
    for entry in &run.entries {
        let mut cases = entry.cases.as_slice();
        while let Some(first) = cases.first() {
            let n = cases.iter().take_while(|c| c.dump == first.dump).count();
            let (dump, rest) = cases.split_at(n);
            write_dump(dump, out, paint)?;
            cases = rest;
        }
        for change in &entry.changes {
            match change.lines {
                None => writeln!(out, "created {}", change.path)?,
                Some((added, removed)) => {
                    writeln!(out, "updated {} (+{added} -{removed} lines)", change.path)?;
                    out.write_all(change.diff.as_bytes())?;
                }
            }
        }
    }
    writeln!(out, "{}", summary(run, paint))
}

/// The cases of one dump of one entry.
fn write_dump(cases: &[Case], out: &mut dyn Write, paint: Paint) -> io::Result<()> {
    let head = |c: &Case| format!("{} [{}] {}", c.entry, c.format, c.dump);
    let reason = |c: &Case| match &c.outcome {
        Outcome::Errored(why) => Some(why.clone()),
        _ => None,
    };
    let first_reason = cases.first().and_then(reason);
    if cases.len() > 1 && first_reason.is_some() && cases.iter().all(|c| reason(c) == first_reason)
    {
        let why = first_reason.unwrap_or_default();
        let label = paint.bad("ERROR");
        return writeln!(out, "{label} {}: every check: {why}", head(&cases[0]));
    }
    for c in cases {
        match &c.outcome {
            Outcome::Passed => {}
            Outcome::Failed(diff) => {
                writeln!(out, "{} {}: {}", paint.bad("FAIL"), head(c), c.command)?;
                out.write_all(diff.as_bytes())?;
                if !diff.ends_with('\n') {
                    writeln!(out)?;
                }
            }
            Outcome::Errored(why) => {
                let label = paint.bad("ERROR");
                writeln!(out, "{label} {}: {}: {why}", head(c), c.command)?;
            }
        }
    }
    Ok(())
}

/// `DIR: 23 entries, 56 dumps, 224 checks: 224 passed, 0 failed, 0 errored in 3.10 s (2 jobs)`.
pub fn summary(run: &Run, paint: Paint) -> String {
    let t = run.tally();
    let dumps: usize = run
        .entries
        .iter()
        .map(|e| {
            let mut paths: Vec<&str> = e
                .cases
                .iter()
                .map(|c| c.dump.as_str())
                .filter(|d| !d.is_empty())
                .collect();
            paths.dedup();
            paths.len()
        })
        .sum();
    let failed = format!("{} failed", t.failed);
    let errored = format!("{} errored", t.errored);
    let mut s = format!(
        "{}: {} entries, {dumps} dumps, {} checks: {} passed, {}, {} in {:.2} s ({} jobs)",
        run.dir.display(),
        run.entries.len(),
        t.total(),
        t.passed,
        if t.failed > 0 {
            paint.bad(failed)
        } else {
            failed
        },
        if t.errored > 0 {
            paint.bad(errored)
        } else {
            errored
        },
        run.seconds,
        run.jobs,
    );
    if run.update {
        let changes: Vec<_> = run.entries.iter().flat_map(|e| &e.changes).collect();
        let created = changes.iter().filter(|c| c.lines.is_none()).count();
        let _ = write!(
            s,
            "\nupdate: {} expected files written ({created} new, {} changed)",
            changes.len(),
            changes.len() - created
        );
    }
    s
}

fn status(outcome: &Outcome) -> (&'static str, Option<&str>) {
    match outcome {
        Outcome::Passed => ("passed", None),
        Outcome::Failed(diff) => ("failed", Some(diff)),
        Outcome::Errored(why) => ("errored", Some(why)),
    }
}

/// The run as one JSON document (schema in kcrash/README.md, "regress").
pub fn json(run: &Run) -> Value {
    let t = run.tally();
    let cases: Vec<Value> = run
        .cases()
        .map(|c| {
            let (status, detail) = status(&c.outcome);
            let mut v = json!({
                "entry": c.entry, "format": c.format, "dump": c.dump, "command": c.command,
                "expect": c.expect, "status": status, "seconds": c.seconds,
            });
            match &c.outcome {
                Outcome::Failed(_) => v["diff"] = detail.into(),
                Outcome::Errored(_) => v["reason"] = detail.into(),
                Outcome::Passed => {}
            }
            v
        })
        .collect();
    let changes: Vec<Value> = run
        .entries
        .iter()
        .flat_map(|e| &e.changes)
        .map(|c| {
            let (added, removed) = c.lines.unwrap_or_default();
            json!({ "path": c.path, "created": c.lines.is_none(), "added": added, "removed": removed })
        })
        .collect();
    json!({
        "corpus": run.dir.display().to_string(),
        "passed": t.passed, "failed": t.failed, "errored": t.errored,
        "seconds": run.seconds, "jobs": run.jobs, "update": run.update,
        "cases": cases, "changes": changes,
    })
}

/// The run as JUnit XML: a test suite per entry, a test case per dump and check, with the diff
/// of a failure and the reason of an error.
pub fn junit(run: &Run) -> String {
    let t = run.tally();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"kcrash regress {}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{:.3}\">",
        escape(&run.dir.display().to_string()),
        t.total(),
        t.failed,
        t.errored,
        run.seconds
    );
    for entry in &run.entries {
        let et = Tally::of(&entry.cases);
        let _ = writeln!(
            x,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{:.3}\">",
            escape(&entry.name),
            et.total(),
            et.failed,
            et.errored,
            entry.seconds
        );
        for c in &entry.cases {
            let _ = write!(
                x,
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                escape(&c.entry),
                escape(&format!("{}: {}", c.format, c.command)),
                c.seconds
            );
            match &c.outcome {
                Outcome::Passed => x.push_str("/>\n"),
                Outcome::Failed(diff) => {
                    let _ = writeln!(
                        x,
                        ">\n      <failure message=\"{} differs from {}\">{}</failure>\n    </testcase>",
                        escape(&c.dump),
                        escape(&c.expect),
                        escape(diff)
                    );
                }
                Outcome::Errored(why) => {
                    let _ = writeln!(
                        x,
                        ">\n      <error message=\"{}\"/>\n    </testcase>",
                        escape(why)
                    );
                }
            }
        }
        x.push_str("  </testsuite>\n");
    }
    x.push_str("</testsuites>\n");
    x
}

/// Text for an XML attribute or element: the five markup characters as entities, and the
/// control characters XML 1.0 cannot hold at all as U+FFFD (a dump's strings can hold any byte).
fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            '\'' => s.push_str("&apos;"),
            '\t' | '\n' | '\r' => s.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => s.push('\u{fffd}'),
            c => s.push(c),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_characters_xml_cannot_hold() {
        assert_eq!(
            escape("a<b> & \"c\" 'd'\n\u{1}\u{7f}"),
            "a&lt;b&gt; &amp; &quot;c&quot; &apos;d&apos;\n\u{fffd}\u{7f}"
        );
    }
}
