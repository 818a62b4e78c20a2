//! The workspace's layering, checked on its sources: no crate has a cycle among its modules,
//! nothing in kcrash imports the shell, and kcrash's commands share code only through the
//! command layer's own modules. The graph is drawn from every `crate::…` and `super::…` path
//! outside comments and `#[cfg(test)]` modules, as a reader of the code would follow them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`commands::sym`) → the source text of the file that defines it.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("source directory") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.insert(module_path(src, &path), without_tests(&read(&path)));
            }
        }
    }
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn module_path(src: &Path, file: &Path) -> String {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts.join("::")
}

/// The text before the file's unit tests, with line comments removed.
fn without_tests(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules `from` names through `crate::`/`super::`/`self::` paths, each resolved to the
/// longest module path that exists (`crate::a::b::Item` → `a::b`).
fn imports(from: &str, text: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find(|c: char| c.is_ascii_alphabetic()) {
        rest = &rest[at..];
        let word_end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let path = &rest[..word_end];
        rest = &rest[word_end..];
        let mut segs = path.split("::").filter(|s| !s.is_empty());
        let mut base: Vec<&str> = match segs.next() {
            Some("crate") => Vec::new(),
            Some("super") => {
                let mut b: Vec<&str> = from.split("::").filter(|s| !s.is_empty()).collect();
                b.pop();
                b
            }
            Some("self") => from.split("::").filter(|s| !s.is_empty()).collect(),
            _ => continue,
        };
        let mut best = None;
        for seg in segs {
            if seg == "super" {
                base.pop();
                continue;
            }
            base.push(seg);
            let m = base.join("::");
            if known.contains(&m) {
                best = Some(m);
            }
        }
        // `use super::{a, b}` names modules too.
        if rest.starts_with('{') {
            let group = &rest[1..rest.find('}').unwrap_or(rest.len())];
            for item in group.split(',') {
                let head = item.trim().split("::").next().unwrap_or("");
                let m = [base.join("::"), head.to_owned()]
                    .iter()
                    .filter(|s| !s.is_empty())
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("::");
                if known.contains(&m) {
                    out.insert(m);
                }
            }
        }
        if let Some(m) = best {
            out.insert(m);
        }
    }
    // A module's own submodules and its ancestors are its parts, not its imports.
    out.retain(|m| {
        m != from && !m.starts_with(&format!("{from}::")) && !from.starts_with(&format!("{m}::"))
    });
    out
}

fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    let known: BTreeSet<String> = mods.keys().cloned().collect();
    mods.iter()
        .map(|(m, text)| (m.clone(), imports(m, text, &known)))
        .collect()
}

/// A cycle of the graph, if it has one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // 0 unvisited, 1 on the path, 2 done; iterative so no input deepens the stack.
    let mut state: BTreeMap<&str, u8> = graph.keys().map(|k| (k.as_str(), 0)).collect();
    for start in graph.keys() {
        if state[start.as_str()] != 0 {
            continue;
        }
        let mut stack: Vec<(&str, Vec<&str>)> =
            vec![(start, graph[start].iter().map(String::as_str).collect())];
        state.insert(start, 1);
        while let Some((node, next)) = stack.last_mut() {
            let node = *node;
            match next.pop() {
                Some(n) if state.get(n) == Some(&1) => {
                    let at = stack.iter().position(|(m, _)| *m == n).unwrap_or(0);
                    return Some(stack[at..].iter().map(|(m, _)| m.to_string()).collect());
                }
                Some(n) if state.get(n) == Some(&0) => {
                    state.insert(n, 1);
                    let outs = graph[n].iter().map(String::as_str).collect();
                    stack.push((n, outs));
                }
                Some(_) => {}
                None => {
                    state.insert(node, 2);
                    stack.pop();
                }
            }
        }
    }
    None
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn no_crate_has_an_import_cycle() {
    for krate in [
        "kcrash",
        "dumpfmt",
        "symbols",
        "klog-runtime",
        "tests/harness",
    ] {
        let g = graph(&workspace().join(krate).join("src"));
        assert!(g.len() > 3, "{krate}: modules not found");
        if let Some(c) = cycle(&g) {
            panic!("{krate}: import cycle {}", c.join(" -> "));
        }
    }
}

/// The files of `commands/` that are no command: the forms commands read alike.
const SHARED: &[&str] = &["args", "per_cpu"];

#[test]
fn nothing_imports_the_shell_and_commands_share_through_the_command_layer() {
    let g = graph(&workspace().join("kcrash/src"));
    for (m, imports) in &g {
        if !m.starts_with("shell") {
            assert!(
                !imports.iter().any(|i| i.starts_with("shell")),
                "{m} imports the shell"
            );
        }
        if let Some(command) = m.strip_prefix("commands::") {
            for i in imports.iter().filter_map(|i| i.strip_prefix("commands::")) {
                assert!(
                    SHARED.contains(&i),
                    "commands::{command} imports commands::{i}"
                );
            }
        }
    }
}

/// The checks can fail: a cycle planted in a small graph is found.
#[test]
fn a_planted_cycle_is_found() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lib.rs"), "mod a; mod b; mod c; mod d;").unwrap();
    std::fs::write(dir.path().join("a.rs"), "use crate::b::X;").unwrap();
    std::fs::write(dir.path().join("b.rs"), "use super::{c, d};").unwrap();
    std::fs::write(dir.path().join("c.rs"), "fn f() { crate::a::g() }").unwrap();
    std::fs::write(dir.path().join("d.rs"), "// use crate::a;").unwrap();
    let g = graph(dir.path());
    let found = cycle(&g).expect("a -> b -> c -> a");
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(g["d"].is_empty(), "a comment is no import");
}
