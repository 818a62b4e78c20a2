//! Tab completion at the prompt: command names, then a command's options after `-`, subsystem
//! names for `klog` and `help`'s command names, struct and union members after `.` and `->` in
//! an expression, type names where a type may be written (read from the DWARF on the first
//! such Tab), and symbol names everywhere else.

use std::borrow::Cow;
use std::sync::OnceLock;

use rustyline::completion::Completer;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};

use crate::commands::COMMANDS;
use crate::paint::Paint;
use crate::plugins::DECODERS;
use crate::session::Session;
use crate::symbolize::display_name;

/// The words the prompt completes: command names from the start, the rest gathered on the first
/// Tab that needs them (the prompt starts at once whatever the image's size); members are looked
/// up in the session's DWARF as they are asked for.
pub struct Completion<'a, 'd> {
    session: &'a Session<'d>,
    commands: Vec<&'static str>,
    /// KLog ring names (SCHED, FS, …), when the image has the KLog.
    subsystems: OnceLock<Vec<String>>,
    /// Sorted: stored symbol names, and the demangled names of Rust symbols.
    symbols: OnceLock<Vec<String>>,
    /// Sorted type names as C spells them (`struct task_struct`, `u64`), read when first asked.
    types: OnceLock<Vec<String>>,
    prompt: Paint,
}

/// The commands whose arguments are expressions, with members to complete.
const EXPRESSIONS: [&str; 5] = ["p", "print", "eval", "whatis", "ptype"];
/// The commands that take a type name, and the words that start one.
const TYPES: [&str; 4] = ["whatis", "ptype", "struct", "union"];
const KEYWORDS: [&str; 3] = ["struct", "union", "enum"];

impl<'a, 'd> Completion<'a, 'd> {
    pub fn new(session: &'a Session<'d>, prompt: Paint) -> Completion<'a, 'd> {
        let mut commands: Vec<&'static str> = COMMANDS
            .iter()
            .flat_map(|c| std::iter::once(c.name).chain(c.aliases.iter().copied()))
            .chain(DECODERS.iter().map(|d| d.command()))
            .collect();
        commands.sort_unstable();
        commands.dedup();
        Completion {
            session,
            types: OnceLock::new(),
            commands,
            subsystems: OnceLock::new(),
            symbols: OnceLock::new(),
            prompt,
        }
    }

    /// The image's symbol names, sorted, read on first use.
    fn symbols(&self) -> &[String] {
        self.symbols.get_or_init(|| {
            let mut symbols: Vec<String> = Vec::new();
            if let Some(image) = &self.session.image {
                for name in image.symbol_names() {
                    let shown = display_name(name);
                    if shown != name && !shown.contains(char::is_whitespace) {
                        symbols.push(shown);
                    }
                    symbols.push(name.to_owned());
                }
            }
            symbols.sort_unstable();
            symbols.dedup();
            symbols
        })
    }

    /// The candidates for `word`, the `index`-th word of a line starting with `first`, after
    /// the word `previous`.
    fn candidates(&self, first: &str, previous: &str, index: usize, word: &str) -> Vec<String> {
        let commands = || {
            self.commands
                .iter()
                .filter(|c| c.starts_with(word))
                .map(|c| c.to_string())
                .collect()
        };
        if index == 0 {
            return commands();
        }
        let command = first.split('/').next().unwrap_or(first);
        if word.starts_with('-') {
            return crate::commands::command(command)
                .map(|c| (c.options)())
                .unwrap_or_default()
                .into_iter()
                .filter(|o| o.starts_with(word))
                .collect();
        }
        if EXPRESSIONS.contains(&command) {
            if let Some(members) = self.members(word) {
                return members;
            }
        }
        // `struct NAME` names a struct: after the keyword in an expression or `ptype`, and as
        // the `struct` and `union` commands' first word.
        let keyword = match command {
            "struct" | "union" if index == 1 => Some(command),
            _ if KEYWORDS.contains(&previous) => Some(previous),
            _ => None,
        };
        if let Some(keyword) = keyword {
            let prefix = format!("{keyword} {word}");
            return self
                .types_from(&prefix)
                .map(|t| t[keyword.len() + 1..].to_owned())
                .collect();
        }
        if TYPES.contains(&command) {
            let mut found: Vec<String> = self
                .types_from(word)
                .filter(|t| !t.contains(' '))
                .map(str::to_owned)
                .collect();
            found.extend(self.symbols_from(word));
            found.sort_unstable();
            found.dedup();
            return found;
        }
        match first {
            "help" | "?" => commands(),
            "klog" => self
                .subsystems
                .get_or_init(|| self.session.klog().map(|k| k.names()).unwrap_or_default())
                .iter()
                .filter(|s| {
                    s.len() >= word.len()
                        && s.as_bytes()[..word.len()].eq_ignore_ascii_case(word.as_bytes())
                })
                .cloned()
                .collect(),
            _ => self.symbols_from(word).collect(),
        }
    }

    fn symbols_from<'s>(&'s self, word: &'s str) -> impl Iterator<Item = String> + 's {
        let symbols = self.symbols();
        let from = symbols.partition_point(|s| s.as_str() < word);
        symbols[from..]
            .iter()
            .take_while(move |s| s.starts_with(word))
            .cloned()
    }

    /// The type names starting with `prefix`, the image's types read on the first call.
    fn types_from<'s>(&'s self, prefix: &'s str) -> impl Iterator<Item = &'s str> + 's {
        let types = self.types.get_or_init(|| {
            self.session
                .image
                .as_ref()
                .and_then(|image| image.type_names().ok())
                .unwrap_or_default()
        });
        let from = types.partition_point(|t| t.as_str() < prefix);
        types[from..]
            .iter()
            .take_while(move |t| t.starts_with(prefix))
            .map(String::as_str)
    }
}

impl Completion<'_, '_> {
    /// `word` completed as `EXPR.member` or `EXPR->member`, when it has a `.` or `->` after an
    /// expression; `None` when it has neither.
    fn members(&self, word: &str) -> Option<Vec<String>> {
        let (at, arrow) = match (word.rfind("->"), word.rfind('.')) {
            (Some(a), Some(d)) if d > a => (d, false),
            (Some(a), _) => (a, true),
            (None, Some(d)) => (d, false),
            (None, None) => return None,
        };
        let (prefix, partial) = (&word[..at], &word[at + if arrow { 2 } else { 1 }..]);
        let text = prefix.trim_start_matches(['*', '&', '(']);
        let Ok(expr) = crate::expr::parse_expr(text) else {
            return Some(Vec::new());
        };
        let images = self.session.images();
        let names = crate::expr::member_names(images.set.images(), self.session, &expr, arrow);
        let sep = if arrow { "->" } else { "." };
        Some(
            names
                .into_iter()
                .filter(|m| m.starts_with(partial))
                .map(|m| format!("{prefix}{sep}{m}"))
                .collect(),
        )
    }
}

impl Completer for Completion<'_, '_> {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let before = &line[..pos];
        let start = before
            .rfind(|c: char| c.is_whitespace() || c == '|' || c == '>')
            .map_or(0, |i| i + 1);
        let word = &before[start..];
        let mut words = before[..start].split_whitespace();
        let first = words.next().unwrap_or("");
        // `(struct ` in a cast is the keyword too.
        let previous = before[..start]
            .split_whitespace()
            .last()
            .unwrap_or("")
            .trim_start_matches('(');
        let index = usize::from(!first.is_empty()) + words.count();
        if before[..start].contains(['|', '>', '!']) {
            return Ok((start, Vec::new()));
        }
        Ok((start, self.candidates(first, previous, index, word)))
    }
}

impl Hinter for Completion<'_, '_> {
    type Hint = String;
}

impl Highlighter for Completion<'_, '_> {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(
        &'s self,
        prompt: &'p str,
        _default: bool,
    ) -> Cow<'b, str> {
        if self.prompt.on {
            Cow::Owned(self.prompt.strong(prompt))
        } else {
            Cow::Borrowed(prompt)
        }
    }
}

impl Validator for Completion<'_, '_> {}

impl Helper for Completion<'_, '_> {}
