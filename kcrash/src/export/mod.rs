//! Events written for a viewer instead of printed: Perfetto's protobuf trace
//! ([`perfetto`]), Chrome's trace-event JSON ([`chrome`]) and an SVG picture of the timeline
//! ([`svg`]). Each is one pass over the same merged stream the text output uses (every ring read
//! on a thread of its own, [`crate::timeline::stream`]), so an export never holds the log in
//! memory, and each is written to a temporary file beside its destination and renamed into place
//! only when complete: an error, a full disk or Ctrl-C leaves no half-written file under the
//! name asked for.

pub mod chrome;
pub mod perfetto;
pub mod svg;

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kcrash_plugin::{Event, Field, Key, Log, Memory, Value};
use tempfile::NamedTempFile;

use crate::escape::escape_into;
use crate::schemata::{Reader, Schematized};
use crate::session::Session;
use crate::timeline::{Plan, Select};

/// The export options every event command takes.
#[derive(clap::Args, Debug, Default)]
pub struct Exports {
    /// Write the events as a Perfetto trace to FILE (open it in ui.perfetto.dev or
    /// trace_processor) instead of printing them.
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<PathBuf>,
    /// Write the events as Chrome trace-event JSON to FILE (chrome://tracing, Perfetto, and tools
    /// that read only JSON; larger than --perfetto).
    #[arg(long = "chrome-json", value_name = "FILE")]
    pub chrome_json: Option<PathBuf>,
    /// Draw the timeline as an SVG picture in FILE: a lane per ring (see --lanes), a tick where
    /// events are, darker where they are dense, the panic (or the last event) marked; --since and
    /// --until zoom.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// The lanes of an export: `ring` (one per ring), `cpu` (one per processor), or the name of an
    /// event field (`chore`, `pid`): one per value of it.
    #[arg(long, value_name = "BY", default_value = "ring")]
    pub lanes: LaneBy,
}

impl Exports {
    /// The files asked for, with their formats.
    fn wanted(&self) -> Vec<(Format, &Path)> {
        [
            (Format::Perfetto, &self.perfetto),
            (Format::ChromeJson, &self.chrome_json),
            (Format::Svg, &self.svg),
        ]
        .into_iter()
        .filter_map(|(f, p)| Some((f, p.as_deref()?)))
        .collect()
    }

    /// Whether any export is asked for: then the command writes files instead of printing.
    pub fn any(&self) -> bool {
        !self.wanted().is_empty()
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Format {
    Perfetto,
    ChromeJson,
    Svg,
}

impl Format {
    fn describe(self) -> &'static str {
        match self {
            Format::Perfetto => "Perfetto trace",
            Format::ChromeJson => "Chrome trace-event JSON",
            Format::Svg => "SVG timeline",
        }
    }
}

/// What an export's lanes are.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum LaneBy {
    #[default]
    Ring,
    Cpu,
    /// A lane per value of the event field of this name.
    Field(String),
}

impl FromStr for LaneBy {
    type Err = String;

    fn from_str(s: &str) -> Result<LaneBy, String> {
        Ok(match s {
            "ring" => LaneBy::Ring,
            "cpu" => LaneBy::Cpu,
            "" => return Err("empty: ring, cpu or a field's name".into()),
            field => LaneBy::Field(field.to_owned()),
        })
    }
}

/// The lane an event goes in: its log's index in the run, and a number saying which lane of
/// that log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lane {
    pub log: usize,
    pub kind: LaneKind,
    pub value: u64,
}

/// What a lane is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LaneKind {
    Ring,
    Cpu,
    /// Events with no processor, or without the field, or whose field could not be read.
    Unknown,
    Field,
}

impl LaneBy {
    /// The lane of `event` of the run's `log`-th log.
    pub fn lane_of(&self, log: usize, event: &Event<'_>) -> Lane {
        let (kind, value) = match self {
            LaneBy::Ring => (LaneKind::Ring, event.ring as u64),
            LaneBy::Cpu => match event.processor {
                Some(p) => (LaneKind::Cpu, p.into()),
                None => (LaneKind::Unknown, 0),
            },
            LaneBy::Field(name) => match field(&event.fields, name).and_then(value_key) {
                Some(v) => (LaneKind::Field, v),
                None => (LaneKind::Unknown, 0),
            },
        };
        Lane { log, kind, value }
    }

    /// The lane's name as a viewer shows it: the ring's, `cpu N`, `FIELD=VALUE`; escaped.
    pub fn name(&self, log: &dyn Log, event: &Event<'_>, lane: Lane) -> String {
        let mut out = Vec::new();
        match (self, lane.kind) {
            (_, LaneKind::Ring) => {
                let ring = log.rings().get(event.ring).map_or("?", |r| r.name.as_str());
                escape_into(ring.as_bytes(), &mut out);
            }
            (_, LaneKind::Cpu) => out.extend_from_slice(format!("cpu {}", lane.value).as_bytes()),
            (LaneBy::Field(name), LaneKind::Field) => {
                escape_into(name.as_bytes(), &mut out);
                out.push(b'=');
                if let Some(f) = field(&event.fields, name) {
                    write_value(&f.value, &mut out);
                }
            }
            (LaneBy::Field(name), _) => {
                out.extend_from_slice(b"no ");
                escape_into(name.as_bytes(), &mut out);
            }
            (_, _) => out.extend_from_slice(b"cpu unknown"),
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl Lane {
    /// A track identifier that is the same for the same lane in every ring and every run, so
    /// that rings read on different threads describe it alike. Small for rings and processors,
    /// since every event carries it: the log, the kind and the value packed; a field's value (any
    /// number) mixed into 64 bits.
    pub fn uuid(self) -> u64 {
        match self.kind {
            LaneKind::Ring | LaneKind::Cpu | LaneKind::Unknown if self.value < 1 << 20 => {
                log_uuid(self.log) | (self.kind as u64 + 1) << 20 | self.value
            }
            _ => mix(&[self.log as u64 + 1, self.kind as u64 + 1, self.value]),
        }
    }
}

/// The track identifier of the run's `log`-th log, the parent of its lanes.
pub fn log_uuid(log: usize) -> u64 {
    (log as u64 + 1) << 24
}

/// The parts mixed into one 64-bit number (SplitMix64's finaliser over each in turn).
fn mix(parts: &[u64]) -> u64 {
    let mut h = 0x6b63_7261_7368_u64;
    for &p in parts {
        h = (h ^ p).wrapping_add(0x9e37_79b9_7f4a_7c15);
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
    }
    h
}

fn field<'f, 'a>(fields: &'f [Field<'a>], name: &str) -> Option<&'f Field<'a>> {
    fields.iter().find(|f| f.name == name)
}

/// A field's value as a lane key: a number as it is, text by a hash of it; none when unreadable.
fn value_key(f: &Field<'_>) -> Option<u64> {
    Some(match &f.value {
        Value::Unsigned(n) | Value::Hex(n) => *n,
        Value::Signed(n) => *n as u64,
        Value::Enum { value, .. } | Value::Flags { value, .. } => *value,
        Value::Pointer { addr, .. } => *addr,
        Value::Duration { raw, .. } => *raw,
        Value::Time { ticks, .. } => *ticks,
        // Text by its bytes, eight at a time, each word mixed into the last: no allocation.
        Value::Text(b) | Value::Bytes(b) => b.chunks(8).fold(0, |h, c| {
            mix(&[h, c.iter().fold(0, |a, &x| a << 8 | u64::from(x))])
        }),
        Value::Unreadable { .. } => return None,
    })
}

/// An argument value as an export writes it: a number when it is one, else the text kcrash
/// prints for it (escaped).
pub enum Scalar {
    Unsigned(u64),
    Signed(i64),
    /// An address or bit mask, shown in hex.
    Hex(u64),
    /// Text, escaped, appended to the caller's buffer from `start`.
    Text {
        start: usize,
    },
}

/// `value` as a [`Scalar`], its text appended to `text` when it is text.
pub fn scalar(value: &Value<'_>, text: &mut Vec<u8>) -> Scalar {
    match value {
        Value::Unsigned(n) => Scalar::Unsigned(*n),
        Value::Signed(n) => Scalar::Signed(*n),
        Value::Hex(n)
        | Value::Pointer {
            addr: n,
            symbol: None,
        } => Scalar::Hex(*n),
        other => {
            let start = text.len();
            write_value(other, text);
            Scalar::Text { start }
        }
    }
}

/// A value's text: as kcrash prints it, text unquoted (still escaped).
fn write_value(value: &Value<'_>, out: &mut Vec<u8>) {
    match value {
        Value::Text(t) => escape_into(t, out),
        other => other.write(out),
    }
}

/// The name an export gives an event, escaped: its schema's name when one claims it, else the
/// format string it was logged with, else its decoder's name for it.
pub fn event_name(event: &Event<'_>, schema: Option<&Schematized<'_>>, out: &mut Vec<u8>) {
    match (schema, &event.key) {
        (Some(Schematized::One(a)), _) => escape_into(a.schema.name.as_bytes(), out),
        (_, Key::Format { text, .. }) => escape_into(text, out),
        _ => escape_into(event.name.as_bytes(), out),
    }
}

/// What is wrong with an event, in words, when anything is: its damage and a lost time stamp.
pub fn damage_text(event: &Event<'_>) -> Option<String> {
    let mut parts: Vec<String> = event.damage.iter().map(|d| d.describe()).collect();
    if !event.own_time {
        parts.push("its time stamp is lost: placed at the event before it in its ring".into());
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// What says which dump a trace is of, and how to read its times.
pub struct Identity {
    /// `(key, value)` pairs, values escaped: the dump, the image and its build-id, the kernel's
    /// release, the logs, the time unit.
    pub pairs: Vec<(&'static str, String)>,
    /// The crashed kernel's release, when the dump says.
    pub release: Option<String>,
    pub linux: bool,
    /// The dump's file name, escaped.
    pub dump_name: String,
}

impl Identity {
    fn of(session: &Session<'_>, plan: &Plan<'_>) -> Identity {
        let mut pairs = vec![
            ("kcrash.version", env!("CARGO_PKG_VERSION").to_owned()),
            (
                "kcrash.dump",
                escaped(&session.dump.path().display().to_string()),
            ),
        ];
        if let Some(image) = &session.image {
            pairs.push(("kcrash.image", escaped(&image.path().display().to_string())));
            if let Some(b) = image.build_id() {
                let hex = b.iter().map(|x| format!("{x:02x}")).collect();
                pairs.push(("kcrash.image_build_id", hex));
            }
        }
        let release = kernel_release(session).map(|r| escaped(&r));
        if let Some(r) = &release {
            pairs.push(("kcrash.kernel_release", r.clone()));
        }
        let logs: Vec<&str> = plan.logs.iter().map(|l| l.kind()).collect();
        pairs.push(("kcrash.logs", logs.join(",")));
        pairs.push((
            "kcrash.time_unit",
            if plan.in_nanos() {
                "ns since each log's clock's zero".to_owned()
            } else {
                let why = plan.logs.first().and_then(|l| l.clock().unknown_because());
                format!(
                    "ticks of a clock whose rate is unknown ({}), written where nanoseconds go",
                    escaped(&why.unwrap_or_default())
                )
            },
        ));
        let name = session.dump.path().file_name().unwrap_or_default();
        Identity {
            pairs,
            release,
            linux: session.linux.is_some(),
            dump_name: escaped(&name.to_string_lossy()),
        }
    }
}

fn escaped(s: &str) -> String {
    let mut out = Vec::new();
    escape_into(s.as_bytes(), &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The crashed kernel's release, when the dump says: Linux's utsname, else a kdump header's.
fn kernel_release(session: &Session<'_>) -> Option<String> {
    let info = session.dump.vmcoreinfo().ok().flatten();
    if session.linux.is_some() {
        if let Ok(u) = crate::linux::facts::Utsname::read(session.kernel(), info.as_ref()) {
            return Some(u.release);
        }
    }
    let h = session.dump.kdump_header()?;
    (!h.release.is_empty()).then(|| String::from_utf8_lossy(h.release.as_bytes()).into_owned())
}

/// What every export reads: the run's plan and the memory its logs are in, the lanes asked for,
/// and what says which dump it is.
pub struct Source<'a, 's> {
    pub plan: &'s Plan<'a>,
    pub mem: &'a (dyn Memory + Sync),
    pub lanes: &'s LaneBy,
    pub identity: &'s Identity,
}

/// Writes every export `exports` asks for of the events of `logs` that `select` (and `keep`)
/// keep, one pass per file; says on `out` what each file holds.
pub fn run<'a>(
    exports: &Exports,
    logs: &[&'a dyn Log],
    session: &'a Session<'_>,
    select: &Select,
    keep: Option<&'a (dyn Fn(&Event<'_>) -> bool + Sync)>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    if select.json {
        bail!("--json prints events; an export writes them to its file instead: give one or the other");
    }
    let mem: &(dyn Memory + Sync) = session;
    let wanted = exports.wanted();
    // Every file is checked before any is written, so a mistyped last one costs no pass.
    for (_, path) in &wanted {
        check_destination(path, session)?;
    }
    let mut plan = Plan::new(logs, session.schema_reader(false), select, err)?;
    plan.keep = keep;
    let identity = Identity::of(session, &plan);
    let source = Source {
        plan: &plan,
        mem,
        lanes: &exports.lanes,
        identity: &identity,
    };
    for (format, path) in wanted {
        let mut file = Output::create(path, format.describe())?;
        let shown = match format {
            Format::Perfetto => perfetto::write(&source, &mut file),
            Format::ChromeJson => chrome::write(&source, &mut file),
            Format::Svg => svg::write(&source, &mut file),
        }
        .with_context(|| format!("{}: {}", path.display(), format.describe()))?;
        let bytes = file.finish()?;
        write!(
            out,
            "{}: {} of {shown} events, {bytes} bytes",
            path.display(),
            format.describe()
        )?;
        if shown > 0 && format != Format::Svg {
            write!(out, " ({:.1} bytes per event)", bytes as f64 / shown as f64)?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Refuses a destination that is the dump or its image (an export never writes over what it
/// reads) or whose directory does not exist.
fn check_destination(path: &Path, session: &Session<'_>) -> Result<()> {
    let dir = parent(path);
    if !dir.is_dir() {
        bail!(
            "{}: no directory {} to write it in",
            path.display(),
            dir.display()
        );
    }
    let read: Vec<&Path> = std::iter::once(session.dump.path())
        .chain(session.image.as_deref().map(|i| i.path()))
        .collect();
    if let Ok(dest) = std::fs::canonicalize(path) {
        for r in read {
            if std::fs::canonicalize(r).is_ok_and(|r| r == dest) {
                bail!(
                    "{}: is a file this session reads; refusing to write over it",
                    path.display()
                );
            }
        }
        if dest.is_dir() {
            bail!("{}: is a directory", path.display());
        }
    }
    Ok(())
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// A file being exported: a temporary file beside the destination, renamed over it by
/// [`Output::finish`]; dropped unfinished, it is removed. Shows progress on a terminal once it
/// has taken a second.
pub struct Output {
    path: PathBuf,
    file: BufWriter<NamedTempFile>,
    bytes: u64,
    started: Instant,
    progress: Option<ProgressBar>,
    what: &'static str,
}

/// Writes a file of `what` (a trace.dat, ...) to `path` with `write`, as the exports are
/// written: never over a file the session reads, never half (a temporary file renamed into
/// place when `write` succeeds). Returns what `write` returned and the file's size.
pub fn write_file<T>(
    path: &Path,
    what: &'static str,
    session: &Session<'_>,
    write: impl FnOnce(&mut dyn Write) -> Result<T>,
) -> Result<(T, u64)> {
    check_destination(path, session)?;
    let mut file = Output::create(path, what)?;
    let done = write(&mut file).with_context(|| format!("{}: {what}", path.display()))?;
    Ok((done, file.finish()?))
}

impl Output {
    fn create(path: &Path, what: &'static str) -> Result<Output> {
        let tmp = tempfile::Builder::new()
            .prefix(".kcrash-export-")
            .suffix(".part")
            .tempfile_in(parent(path))
            .with_context(|| format!("{}: cannot write beside it", path.display()))?;
        Ok(Output {
            path: path.to_owned(),
            file: BufWriter::with_capacity(1 << 20, tmp),
            bytes: 0,
            started: Instant::now(),
            progress: None,
            what,
        })
    }

    /// Flushes the file and renames it into place; returns its size.
    fn finish(mut self) -> Result<u64> {
        self.file
            .flush()
            .with_context(|| self.path.display().to_string())?;
        if let Some(bar) = self.progress.take() {
            bar.finish_and_clear();
        }
        let tmp = self
            .file
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| self.path.display().to_string())?;
        // A temporary file is private to its owner; the export is an ordinary file.
        set_ordinary_mode(tmp.as_file());
        tmp.persist(&self.path)
            .map_err(|e| e.error)
            .with_context(|| {
                format!(
                    "{}: cannot rename the finished file into place",
                    self.path.display()
                )
            })?;
        Ok(self.bytes)
    }

    fn tick(&mut self) {
        const AFTER: Duration = Duration::from_secs(1);
        if self.progress.is_none() && self.started.elapsed() >= AFTER && io::stderr().is_terminal()
        {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            self.progress = Some(bar);
        }
        if let Some(bar) = &self.progress {
            bar.set_message(format!(
                "{}: {:.1} MB written in {:.1} s",
                self.what,
                self.bytes as f64 / 1e6,
                self.started.elapsed().as_secs_f64()
            ));
            bar.tick();
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        // The merge writes in chunks of tens of kilobytes: a tick per chunk is cheap.
        self.bytes += n as u64;
        if buf.len() >= 1 << 12 {
            self.tick();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(unix)]
fn set_ordinary_mode(file: &File) {
    use std::os::unix::fs::PermissionsExt;
    // Read-write for the owner, readable by others; the umask is not consulted, as for cp.
    let _ = file.set_permissions(std::fs::Permissions::from_mode(0o644));
}

#[cfg(not(unix))]
fn set_ordinary_mode(_: &File) {}

/// The schemata a ring's exporter reads events through, the log, and what it shares with the
/// text output: the prefix `-g` matches against.
pub struct RingView<'r> {
    pub log: &'r dyn Log,
    pub log_index: usize,
    pub prefix: crate::event_view::RingPrefix,
    pub schemata: Option<Reader<'r>>,
    /// For `-g`'s match.
    pub scratch: Vec<u8>,
}

impl<'r> RingView<'r> {
    pub fn new(plan: &Plan<'r>, log: &'r dyn Log, ring: usize) -> RingView<'r> {
        RingView {
            log,
            log_index: plan
                .logs
                .iter()
                .position(|l| std::ptr::addr_eq(*l, log))
                .unwrap_or(0),
            prefix: crate::event_view::RingPrefix::new(log, ring, plan.logs.len() > 1),
            schemata: plan.schemata,
            scratch: Vec::new(),
        }
    }

    /// The event read through its schema, or `None` when `-g` drops it.
    pub fn read(&mut self, plan: &Plan<'_>, event: &Event<'_>) -> Option<Option<Schematized<'r>>> {
        let schema = self.schemata.and_then(|s| s.apply(self.log, event));
        plan.filter
            .grep_keeps(
                &mut self.scratch,
                &self.prefix,
                self.log.clock(),
                event,
                schema.as_ref(),
            )
            .then_some(schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an interrupted or failed export leaves: the `?` that ends it drops the unfinished
    /// output, which removes its temporary file and leaves the destination as it was.
    #[test]
    fn an_unfinished_output_leaves_nothing_and_a_finished_one_replaces_the_destination() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("t.pftrace");
        std::fs::write(&dest, b"old").unwrap();
        let files = || std::fs::read_dir(dir.path()).unwrap().count();
        let mut out = Output::create(&dest, Format::Perfetto.describe()).unwrap();
        out.write_all(&[7; 100_000]).unwrap();
        assert_eq!(files(), 2, "the destination and the temporary file");
        drop(out);
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        assert_eq!(files(), 1);
        let mut out = Output::create(&dest, Format::Perfetto.describe()).unwrap();
        out.write_all(b"new").unwrap();
        assert_eq!(out.finish().unwrap(), 3);
        assert_eq!(std::fs::read(&dest).unwrap(), b"new");
        assert_eq!(files(), 1);
    }
}
