//! The event schemata a session uses: the files the decoders ship, the user's configuration
//! directory and `--schema FILE|DIR`, each read in the syntax its name says
//! ([`crate::plugins::SYNTAXES`]); and an event read through the schema that claims it.
//!
//! A file that cannot be read or claims an event another file claims is refused with one line
//! naming the file (and the line and column, or both places) and left out; the rest load.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kcrash_plugin::{Event, Key, Log};
use kcrash_schema::file::MAX_FILE;
use kcrash_schema::{Applied, EventSchema, Lookup, Resolve, Schemata, Subject, Syntax};

use crate::plugins::{DECODERS, SYNTAXES};

/// Most files read from one directory: a directory is the user's, but not a reason to read
/// without end.
const MAX_DIR_FILES: usize = 4096;

/// The schemata loaded, and what was refused (one line each).
#[derive(Debug, Default)]
pub struct Catalog {
    pub set: Schemata,
    pub refused: Vec<String>,
}

impl Catalog {
    /// The schema files every decoder ships, built into kcrash.
    pub fn shipped() -> Catalog {
        let mut c = Catalog::default();
        for d in DECODERS {
            for &(path, text) in d.schemata() {
                c.add_text(Arc::from(path), text);
            }
        }
        c
    }

    /// Adds the schema file at `path`, or every file of the directory at `path` that a syntax
    /// claims (in name order; others are skipped). A file named on its own must be claimed.
    pub fn add_path(&mut self, path: &Path) {
        if !path.is_dir() {
            return self.add_file(path, true);
        }
        let entries = match std::fs::read_dir(path) {
            Ok(entries) => entries,
            Err(e) => return self.refused.push(format!("{}: {e}", path.display())),
        };
        let mut files: Vec<PathBuf> = Vec::new();
        for entry in entries.flatten() {
            if files.len() == MAX_DIR_FILES {
                self.refused.push(format!(
                    "{}: more than {MAX_DIR_FILES} entries; the rest are not read",
                    path.display()
                ));
                break;
            }
            files.push(entry.path());
        }
        files.sort();
        for f in files.iter().filter(|f| f.is_file()) {
            self.add_file(f, false);
        }
    }

    /// The user's schema directory: `$XDG_CONFIG_HOME/kcrash/schemata`, or
    /// `~/.config/kcrash/schemata`, when it exists.
    pub fn add_config_dir(&mut self) {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
        if let Some(dir) = base.map(|b| b.join("kcrash/schemata")) {
            if dir.is_dir() {
                self.add_path(&dir);
            }
        }
    }

    fn add_file(&mut self, path: &Path, named: bool) {
        let name = path.file_name().map(|n| n.to_string_lossy());
        let Some(syntax) = name.as_deref().and_then(syntax_of) else {
            if named {
                self.refused.push(format!(
                    "{}: no schema syntax has files of this name ({})",
                    path.display(),
                    SYNTAX_NAMES
                ));
            }
            return;
        };
        match read_text(path) {
            Ok(text) => self.add_parsed(Arc::from(path.display().to_string()), &text, syntax),
            Err(why) => self.refused.push(format!("{}: {why}", path.display())),
        }
    }

    fn add_text(&mut self, file: Arc<str>, text: &str) {
        match syntax_of(file.rsplit('/').next().unwrap_or(&file)) {
            Some(syntax) => self.add_parsed(file, text, syntax),
            None => self
                .refused
                .push(format!("{file}: no schema syntax has files of this name")),
        }
    }

    fn add_parsed(&mut self, file: Arc<str>, text: &str, syntax: &'static Syntax) {
        let added = (syntax.parse)(&file, text).and_then(|f| self.set.add(file, syntax.name, f));
        if let Err(e) = added {
            self.refused.push(e.to_string());
        }
    }
}

/// The files each syntax reads, for an error about one that none reads.
const SYNTAX_NAMES: &str =
    "kcrash NAME.toml, Klogger .klogger.conf.NAME, QNX NAME.fmt, DProbes NAME.dpt";

fn syntax_of(name: &str) -> Option<&'static Syntax> {
    SYNTAXES.iter().copied().find(|s| (s.claims)(name))
}

/// A schema file's text: at most [`MAX_FILE`] bytes, UTF-8.
fn read_text(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() > MAX_FILE {
        return Err(format!("larger than {MAX_FILE} bytes"));
    }
    String::from_utf8(bytes)
        .map_err(|e| format!("offset {:#x}: not UTF-8 text", e.utf8_error().valid_up_to()))
}

/// What a schema made of an event.
pub enum Schematized<'s> {
    One(Applied<'s>),
    /// Two schemata claim the event (one by its format, one by its symbol): neither is used.
    Conflict(&'s EventSchema, &'s EventSchema),
}

/// The schemata a command reads events through, and what they read from the dump besides the
/// event: symbols and strings.
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    pub set: &'a Schemata,
    pub resolve: &'a (dyn Resolve + Sync),
}

impl<'a> Reader<'a> {
    /// The event read through the schema that claims it, if one does.
    pub fn apply(&self, log: &dyn Log, event: &Event<'_>) -> Option<Schematized<'a>> {
        apply(self.set, log, event, self.resolve)
    }

    /// Whether a schema could claim an event of `log` logged with `format`.
    pub fn may_claim(&self, log: &dyn Log, format: &[u8]) -> bool {
        self.set.may_claim(log.kind(), format)
    }

    /// Whether any schema is for `log`: a caller skips making events for one otherwise.
    pub fn reads(&self, log: &dyn Log) -> bool {
        self.set.has_log(log.kind())
    }
}

fn apply<'s>(
    schemata: &'s Schemata,
    log: &dyn Log,
    event: &Event<'_>,
    cx: &dyn Resolve,
) -> Option<Schematized<'s>> {
    match lookup(schemata, log, event, cx) {
        Lookup::None => None,
        Lookup::One(s) => Some(Schematized::One(s.apply(&event.fields, log.clock(), cx))),
        Lookup::Conflict(a, b) => Some(Schematized::Conflict(a, b)),
    }
}

/// The schema that claims `event` of `log`, if one does; two, if two do.
pub fn lookup<'s>(
    schemata: &'s Schemata,
    log: &dyn Log,
    event: &Event<'_>,
    cx: &dyn Resolve,
) -> Lookup<'s> {
    if !schemata.has_log(log.kind()) {
        return Lookup::None;
    }
    let (format, symbol) = match &event.key {
        Key::Format { addr, text } => {
            // A format string with a symbol of its own (a named static) may be keyed by it.
            let symbol = (*addr != 0 && schemata.keys_symbols(log.kind()))
                .then(|| cx.symbol_at(*addr))
                .flatten()
                .filter(|&(_, off)| off == 0)
                .map(|(name, _)| name);
            (Some(text.as_ref()), symbol)
        }
        _ => (None, None),
    };
    let subject = Subject {
        log: log.kind(),
        ring: log.rings().get(event.ring).map_or("", |r| r.name.as_str()),
        name: &event.name,
        format,
        symbol: symbol.as_deref(),
        code: match event.key {
            Key::Code(a, b) => Some((a, b)),
            _ => None,
        },
    };
    schemata.lookup(&subject)
}
