//! A check's captured output, the form its expected file takes, and the comparison of the two
//! with a readable diff.

use serde_json::{json, Value};
use similar::{ChangeTag, TextDiff};

use super::manifest::{Compare, Replace};

/// Everything one command printed, and whether it failed: a failing command's error is part of
/// its output, so an expected failure can be checked like any output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    pub stdout: String,
    /// Warnings (`klog: KLogs[2] ... is inconsistent`).
    pub stderr: String,
    /// The error line the CLI would print after `kcrash: `, when the command failed.
    pub error: Option<String>,
}

/// Marks where a text form's standard error and error parts start.
const STDERR_MARK: &str = "--- stderr ---\n";
const ERROR_MARK: &str = "--- error ---\n";

/// Lines of diff shown per failure; the rest is counted.
const MAX_DIFF_LINES: usize = 80;

impl Output {
    /// The output with a check's `replace` rules applied to each of its parts.
    pub fn replaced(mut self, rules: &[Replace]) -> Output {
        let apply = |text: &mut String| {
            for rule in rules {
                if let std::borrow::Cow::Owned(new) =
                    rule.regex.replace_all(text, rule.with.as_str())
                {
                    *text = new;
                }
            }
        };
        apply(&mut self.stdout);
        apply(&mut self.stderr);
        if let Some(error) = &mut self.error {
            apply(error);
        }
        self
    }

    /// The text form: standard output as printed, then the `--- stderr ---` and `--- error ---`
    /// parts when there is something in them.
    pub fn text(&self) -> String {
        fn end_line(s: &mut String) {
            if !s.is_empty() && !s.ends_with('\n') {
                s.push('\n');
            }
        }
        let mut s = self.stdout.clone();
        if !self.stderr.is_empty() {
            end_line(&mut s);
            s.push_str(STDERR_MARK);
            s.push_str(&self.stderr);
            end_line(&mut s);
        }
        if let Some(error) = &self.error {
            end_line(&mut s);
            s.push_str(ERROR_MARK);
            s.push_str(error);
            s.push('\n');
        }
        s
    }

    /// The JSON form: `{"output": ...}` with standard output parsed (one document, or a JSON
    /// value per line as an array; null when empty), plus `stderr` (its lines) and `error` when
    /// there is something in them. An error says where standard output stops being JSON.
    pub fn json(&self) -> Result<Value, String> {
        let mut doc = json!({ "output": parse_json(&self.stdout)? });
        if !self.stderr.is_empty() {
            doc["stderr"] = self.stderr.lines().collect();
        }
        if let Some(error) = &self.error {
            doc["error"] = Value::from(error.as_str());
        }
        Ok(doc)
    }

    /// What `--update` writes as the expected file. Pretty JSON with sorted keys gives small
    /// diffs in review.
    pub fn expected_file(&self, compare: Compare) -> Result<String, String> {
        match compare {
            Compare::Text => Ok(self.text()),
            Compare::Json => Ok(pretty(&self.json()?)),
        }
    }
}

fn pretty(value: &Value) -> String {
    // serde_json's maps are sorted by key (no preserve_order feature), so this is canonical.
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}

fn parse_json(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    if let Ok(value) = serde_json::from_str(text) {
        return Ok(value);
    }
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
        .map_err(|e| format!("standard output is not JSON: {e}"))
}

/// How an output compares with its expected file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Same,
    /// What differs, as a unified diff (expected `-`, actual `+`) or the reason there is none.
    Differs(String),
}

/// Compares `output` with the expected file's text. `Err` when the expected file itself is
/// not what `compare` needs (the corpus is broken, not the dump).
pub fn compare(
    compare: Compare,
    expected: &str,
    output: &Output,
    labels: (&str, &str),
) -> Result<Verdict, String> {
    match compare {
        Compare::Text => {
            let actual = output.text();
            Ok(if actual == expected {
                Verdict::Same
            } else {
                Verdict::Differs(diff(expected, &actual, labels))
            })
        }
        Compare::Json => {
            let want: Value = serde_json::from_str(expected)
                .map_err(|e| format!("{}: not JSON: {e}", labels.0))?;
            let got = match output.json() {
                Ok(got) => got,
                Err(e) => return Ok(Verdict::Differs(e)),
            };
            Ok(if got == want {
                Verdict::Same
            } else {
                Verdict::Differs(diff(&pretty(&want), &pretty(&got), labels))
            })
        }
    }
}

/// A unified diff of `old` and `new` by lines, cut at [`MAX_DIFF_LINES`].
pub fn diff(old: &str, new: &str, (old_label, new_label): (&str, &str)) -> String {
    let text = TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_label, new_label)
        .missing_newline_hint(true)
        .to_string();
    let total = text.lines().count();
    if total <= MAX_DIFF_LINES {
        return text;
    }
    let mut cut: String = text.split_inclusive('\n').take(MAX_DIFF_LINES).collect();
    cut.push_str(&format!(
        "... {} more lines of diff\n",
        total - MAX_DIFF_LINES
    ));
    cut
}

/// Lines added and removed going from `old` to `new`.
pub fn line_counts(old: &str, new: &str) -> (usize, usize) {
    let diff = TextDiff::from_lines(old, new);
    diff.iter_all_changes()
        .fold((0, 0), |(added, removed), c| match c.tag() {
            ChangeTag::Insert => (added + 1, removed),
            ChangeTag::Delete => (added, removed + 1),
            ChangeTag::Equal => (added, removed),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABELS: (&str, &str) = ("expected", "actual");

    fn out(stdout: &str) -> Output {
        Output {
            stdout: stdout.into(),
            ..Output::default()
        }
    }

    #[test]
    fn text_form_keeps_warnings_and_errors() {
        let o = Output {
            stdout: "a\nb".into(),
            stderr: "warn\n".into(),
            error: Some("klog: no such subsystem".into()),
        };
        assert_eq!(
            o.text(),
            "a\nb\n--- stderr ---\nwarn\n--- error ---\nklog: no such subsystem\n"
        );
        assert_eq!(out("x\n").text(), "x\n");
    }

    #[test]
    fn text_compares_byte_for_byte_with_a_diff() {
        let o = out("one\ntwo\nthree\n");
        assert_eq!(
            compare(Compare::Text, "one\ntwo\nthree\n", &o, LABELS),
            Ok(Verdict::Same)
        );
        let Ok(Verdict::Differs(d)) = compare(Compare::Text, "one\n2\nthree\n", &o, LABELS) else {
            panic!("a changed line must differ");
        };
        assert!(d.contains("--- expected\n+++ actual\n"), "{d}");
        assert!(d.contains("\n-2\n+two\n"), "{d}");
    }

    #[test]
    fn json_compares_structure_not_layout() {
        let o = out("{\"b\": [1, 2], \"a\": {\"y\": null, \"x\": \"s\"}}\n");
        let reordered = "{ \"output\": {\"a\": {\"x\": \"s\",\n \"y\": null}, \"b\": [1,2]} }";
        assert_eq!(
            compare(Compare::Json, reordered, &o, LABELS),
            Ok(Verdict::Same)
        );
        // Array order matters; a changed value shows in a diff of the pretty forms.
        let swapped = r#"{"output": {"a": {"x": "s", "y": null}, "b": [2, 1]}}"#;
        let Ok(Verdict::Differs(d)) = compare(Compare::Json, swapped, &o, LABELS) else {
            panic!("array order must matter");
        };
        assert!(d.contains("-      2,\n") || d.contains("+      2\n"), "{d}");
        assert!(compare(Compare::Json, "not json", &o, LABELS).is_err());
    }

    #[test]
    fn json_lines_become_an_array_and_failures_are_kept() {
        let o = Output {
            stdout: "{\"seq\": 1}\n{\"seq\": 2}\n".into(),
            stderr: "w1\nw2\n".into(),
            error: Some("klog: broken".into()),
        };
        assert_eq!(
            o.json().unwrap(),
            json!({"output": [{"seq": 1}, {"seq": 2}], "stderr": ["w1", "w2"], "error": "klog: broken"})
        );
        assert_eq!(out("").json().unwrap(), json!({ "output": null }));
        let err = out("{\"seq\": 1}\nseq 2\n").json().unwrap_err();
        assert!(err.contains("not JSON"), "{err}");
        let Ok(Verdict::Differs(why)) =
            compare(Compare::Json, "{\"output\": null}", &out("x"), LABELS)
        else {
            panic!("text is not JSON");
        };
        assert!(why.contains("not JSON"), "{why}");
    }

    #[test]
    fn long_diffs_are_cut_and_counted() {
        let old: String = (0..500).map(|i| format!("{i}\n")).collect();
        let new: String = (0..500).map(|i| format!("{}\n", i * 2)).collect();
        let d = diff(&old, &new, LABELS);
        assert_eq!(d.lines().count(), MAX_DIFF_LINES + 1);
        assert!(d.ends_with("more lines of diff\n"), "{d}");
        assert_eq!(line_counts("a\nb\nc\n", "a\nB\nc\nd\n"), (2, 1));
    }
}
