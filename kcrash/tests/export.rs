//! The exports (`--perfetto`, `--chrome-json`, `--svg`) of the corpus's dumps, read back by
//! readers that share no code with kcrash's writers — Perfetto's own generated protobuf classes
//! (PyPI's `perfetto`, through tests/perfetto_read.py), a JSON parser, librsvg's renderer — and
//! compared with the kernel's own log (the corpus oracle): every record once, on its ring's
//! track, at its time, named by its schema or its format, with its message and raw words; the
//! interning rules of Perfetto's sequences kept. Then what must never happen to a file: a
//! destination that cannot be written, a full disk, the dump itself as destination.
//!
//! Needs python3 with the `perfetto` package (`KCRASH_PYTHON` names another interpreter) and
//! rsvg-convert (librsvg2-bin); without them the tests say NOT RUN, and fail under
//! KCRASH_REQUIRE_TOOLS=1.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

use common::{kcrash, klog_entries, klog_schemata};
use kcrash_harness::expected::{message_matches, Expected};
use kcrash_harness::tools;
use kcrash_schema::{Identity, SchemaFile};
use serde_json::Value;

/// An exported event as a viewer sees it, whichever the format.
#[derive(Debug)]
struct Exported {
    track: String,
    parent: Option<String>,
    ts: u64,
    name: String,
    message: Option<String>,
    chore: Option<u64>,
    domain: Option<u64>,
    data: [Option<u64>; 3],
    processor: Option<u64>,
    seq: Option<u64>,
    damage: Option<String>,
}

/// The python that has Perfetto's classes, if there is one, by the path of its executable: a
/// version manager's shim (pyenv's runs dozens of processes) then runs once, not once a trace.
fn python(test: &str) -> Option<String> {
    let python = std::env::var("KCRASH_PYTHON").unwrap_or_else(|_| "python3".into());
    let found = Command::new(&python)
        .args([
            "-c",
            "import sys, perfetto.protos.perfetto.trace.perfetto_trace_pb2; print(sys.executable)",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|path| path.trim().to_owned())
        .filter(|path| !path.is_empty());
    if found.is_none() {
        tools::not_run(
            test,
            &format!("{python} cannot import the perfetto package"),
        );
    }
    found
}

fn run(files: &[&Path], commands: &[&str]) -> Output {
    kcrash()
        .session(commands)
        .args(files)
        .output()
        .expect("kcrash runs")
}

fn ok(o: &Output, what: &str) -> String {
    kcrash_harness::run::stdout(o, what)
}

/// The trace as Perfetto's classes read it (tests/perfetto_read.py's document).
fn read_perfetto(python: &str, trace: &Path) -> Value {
    read_perfettos(python, &[trace]).remove(0)
}

/// [`read_perfetto`] of each trace, by one python.
fn read_perfettos(python: &str, traces: &[&Path]) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto_read.py");
    let o = Command::new(python)
        .arg(script)
        .args(traces)
        .output()
        .expect("python runs");
    assert!(
        o.status.success(),
        "perfetto_read.py {traces:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let docs: Vec<Value> = o
        .stdout
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("perfetto_read.py prints JSON"))
        .collect();
    assert_eq!(docs.len(), traces.len(), "perfetto_read.py {traces:?}");
    docs
}

/// The events of a Perfetto trace, after checking that it keeps the sequence rules.
fn perfetto_events(doc: &Value, what: &str) -> Vec<Exported> {
    assert_eq!(
        doc["errors"],
        serde_json::json!([]),
        "{what}: the trace breaks Perfetto's rules"
    );
    let arg = |e: &Value, key: &str| -> Option<Value> {
        let v = e["args"].get(key)?.as_object()?;
        v.values().next().cloned()
    };
    doc["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| Exported {
            track: e["track"].as_str().unwrap().to_owned(),
            parent: e["parent"].as_str().map(str::to_owned),
            ts: e["ts"].as_u64().unwrap(),
            name: e["name"].as_str().unwrap().to_owned(),
            message: arg(e, "message").and_then(|v| v.as_str().map(str::to_owned)),
            chore: arg(e, "chore").and_then(|v| v.as_u64()),
            domain: arg(e, "domain").and_then(|v| v.as_u64()),
            data: ["data1", "data2", "data3"].map(|k| arg(e, k).and_then(|v| v.as_u64())),
            processor: arg(e, "processor").and_then(|v| v.as_u64()),
            seq: arg(e, "seq").and_then(|v| v.as_u64()),
            damage: arg(e, "damage").and_then(|v| v.as_str().map(str::to_owned)),
        })
        .collect()
}

/// The events of a Chrome trace-event JSON file, tracks named by its metadata events.
fn chrome_events(doc: &Value) -> Vec<Exported> {
    let all = doc["traceEvents"].as_array().expect("traceEvents");
    let mut processes = HashMap::new();
    let mut threads = HashMap::new();
    for e in all.iter().filter(|e| e["ph"] == "M") {
        let name = e["args"]["name"].as_str().map(str::to_owned);
        match e["name"].as_str() {
            Some("process_name") => {
                processes.insert(e["pid"].as_u64().unwrap(), name.unwrap());
            }
            Some("thread_name") => {
                let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
                let old = threads.insert(key, name.clone().unwrap());
                assert!(
                    old.is_none_or(|o| Some(o) == name),
                    "{key:?} named twice, differently"
                );
            }
            _ => {}
        }
    }
    let hex = |v: &Value| u64::from_str_radix(v.as_str()?.strip_prefix("0x")?, 16).ok();
    all.iter()
        .filter(|e| e["ph"] != "M")
        .map(|e| {
            assert_eq!(
                (&e["ph"], &e["s"]),
                (&Value::from("i"), &Value::from("t")),
                "{e}"
            );
            let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            let a = &e["args"];
            Exported {
                track: threads.get(&(pid, tid)).cloned().unwrap_or_default(),
                parent: processes.get(&pid).cloned(),
                ts: (e["ts"].as_f64().unwrap() * 1000.0).round() as u64,
                name: e["name"].as_str().unwrap().to_owned(),
                message: a["message"].as_str().map(str::to_owned),
                chore: hex(&a["chore"]),
                domain: a["domain"].as_u64(),
                data: ["data1", "data2", "data3"].map(|k| hex(&a[k])),
                processor: a["processor"].as_u64(),
                seq: a["seq"].as_u64(),
                damage: a["damage"].as_str().map(str::to_owned),
            }
        })
        .collect()
}

/// Nanoseconds of `clock` ticks at `hz`, by the documented rule; ticks when the rate is unknown.
fn nanos(clock: u64, hz: u64) -> u64 {
    if hz == 0 {
        return clock;
    }
    (u128::from(clock) * 1_000_000_000 / u128::from(hz)) as u64
}

/// The name an export must give a record logged with `format`: the shipped schema's, else the
/// format string.
fn expected_name<'s>(schemata: &'s SchemaFile, format: &'s str) -> &'s str {
    schemata
        .events
        .iter()
        .find(|s| matches!(&s.identity, Identity::Format(f) if f == format.as_bytes()))
        .map_or(format, |s| s.name.as_str())
}

/// Every record of every trusted ring of the oracle is exactly one exported event: on its ring's
/// track under the KLog's, at its time, named, with its message and raw words; nothing else was
/// exported. Returns how many were checked.
fn check_against_oracle(
    what: &str,
    events: Vec<Exported>,
    expected: &Expected,
    schemata: &SchemaFile,
) -> usize {
    // Per-processor rings share a subsystem's name: `SCHED/1` is SCHED's ring of processor 1.
    let mut by_key: HashMap<(String, u64), Vec<Exported>> = HashMap::new();
    for e in events {
        let base = e.track.split('/').next().unwrap_or_default().to_owned();
        let seq = e.seq.unwrap_or_else(|| panic!("{what}: {e:?} has no seq"));
        by_key.entry((base, seq)).or_default().push(e);
    }
    let mut checked = 0;
    for ring in expected.rings.iter().filter(|r| r.untrusted.is_empty()) {
        for rec in &ring.records {
            let ctx = format!("{what}: ring {} seq {}", ring.ring_name, rec.seq);
            let candidates = by_key
                .get_mut(&(ring.ring_name.clone(), rec.seq))
                .unwrap_or_else(|| panic!("{ctx}: not exported"));
            let Some(ev) = rec.event.as_ref().filter(|_| rec.damage.is_empty()) else {
                // A damaged record is exported with what is wrong with it.
                let at = candidates.iter().position(|e| e.damage.is_some());
                candidates.swap_remove(at.unwrap_or_else(|| panic!("{ctx}: damage not said")));
                checked += 1;
                continue;
            };
            let ts = nanos(ev.clock, expected.clock_hz);
            let at = candidates.iter().position(|e| e.ts == ts);
            let e =
                candidates.swap_remove(at.unwrap_or_else(|| {
                    panic!("{ctx}: no event at {ts} ns; exported: {candidates:?}")
                }));
            assert_eq!(e.parent.as_deref(), Some("KLog"), "{ctx}: parent track");
            let unreadable_format = e
                .message
                .as_deref()
                .is_some_and(|m| m.contains("<unreadable"))
                && e.name == ev.subsystem_name;
            if !unreadable_format {
                assert_eq!(e.name, expected_name(schemata, &ev.format), "{ctx}: name");
            }
            assert_eq!(e.chore, Some(ev.id), "{ctx}: chore");
            assert_eq!(e.domain, Some(ev.domain.into()), "{ctx}: domain");
            assert_eq!(e.data, ev.args.map(Some), "{ctx}: data words");
            assert_eq!(e.processor, Some(ev.processor.into()), "{ctx}: processor");
            assert_eq!(e.damage, None, "{ctx}: damage");
            let message = e.message.unwrap_or_else(|| panic!("{ctx}: no message"));
            assert!(
                message_matches(&ev.message, &message),
                "{ctx}: message\n  export: {message}\n  kernel: {}",
                ev.message
            );
            checked += 1;
        }
    }
    let left: Vec<_> = by_key.values().flatten().collect();
    assert!(left.is_empty(), "{what}: exported but not logged: {left:?}");
    checked
}

/// The first dump of every KLog entry of the corpus (every scenario of every kernel), its image,
/// and the oracle; big rings (checked by digest elsewhere) left out.
fn scenarios() -> Vec<(String, PathBuf, PathBuf, Expected)> {
    klog_entries()
        .into_iter()
        .filter(|(.., e)| e.rings.iter().all(|r| r.digest.is_none()))
        .map(|(name, image, dumps, e)| (name, dumps[0].clone(), image, e))
        .collect()
}

/// The image's build-id in hex, read by the object crate.
fn build_id(image: &Path) -> Option<String> {
    use object::Object;
    let data = std::fs::read(image).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let id = file.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

#[test]
fn perfetto_traces_hold_every_record_as_the_kernel_logged_it() {
    let Some(python) = python("perfetto_traces_hold_every_record_as_the_kernel_logged_it") else {
        return;
    };
    let schemata = klog_schemata();
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    let scenarios = scenarios();
    assert!(scenarios.len() >= 15, "{} scenarios", scenarios.len());
    let traces: Vec<PathBuf> = scenarios
        .iter()
        .map(|(name, ..)| {
            dir.path()
                .join(format!("{}.pftrace", name.replace('/', "-")))
        })
        .collect();
    let said: Vec<String> = scenarios
        .iter()
        .zip(&traces)
        .map(|((name, dump, image, _), trace)| {
            let command = format!("klog 0 --perfetto {}", trace.display());
            ok(&run(&[dump, image], &[&command]), name)
        })
        .collect();
    let traces: Vec<&Path> = traces.iter().map(PathBuf::as_path).collect();
    let docs = read_perfettos(&python, &traces);
    for (((name, dump, image, expected), said), doc) in scenarios.iter().zip(&said).zip(&docs) {
        let events = perfetto_events(doc, name);
        assert!(
            said.contains(&format!("Perfetto trace of {} events", events.len())),
            "{name}: {said}"
        );
        let attrs = &doc["attributes"];
        assert_eq!(attrs["kcrash.dump"], dump.display().to_string(), "{name}");
        assert_eq!(attrs["kcrash.image"], image.display().to_string(), "{name}");
        assert_eq!(
            attrs["kcrash.image_build_id"].as_str(),
            build_id(image).as_deref(),
            "{name}"
        );
        let unit = attrs["kcrash.time_unit"].as_str().unwrap();
        assert_eq!(
            unit.starts_with("ns "),
            expected.clock_hz != 0,
            "{name}: {unit}"
        );
        checked += check_against_oracle(name, events, expected, &schemata);
    }
    eprintln!("{checked} records of {} dumps checked", scenarios.len());
}

#[test]
fn chrome_json_holds_every_record_as_the_kernel_logged_it() {
    let schemata = klog_schemata();
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for (name, dump, image, expected) in &scenarios() {
        let file = dir.path().join(format!("{}.json", name.replace('/', "-")));
        let command = format!("klog 0 --chrome-json {}", file.display());
        ok(&run(&[dump, image], &[&command]), name);
        let doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(doc["displayTimeUnit"], "ns");
        assert_eq!(
            doc["otherData"]["kcrash.dump"],
            dump.display().to_string(),
            "{name}"
        );
        checked += check_against_oracle(name, chrome_events(&doc), expected, &schemata);
    }
    assert!(checked > 1000, "{checked} records");
}

/// The corpus's entries of the other logs (QNX, Klogger, DProbes): name, first dump, image.
fn other_log_entries() -> Vec<(String, PathBuf, PathBuf)> {
    let dir = common::corpus();
    let manifest = kcrash::regress::manifest::Manifest::load(&dir).expect("corpus manifest");
    manifest
        .entries
        .iter()
        .filter(|e| {
            !e.checks.iter().any(|c| c.command.starts_with("klog"))
                || kcrash_harness::klogger::owns(&e.scenario)
        })
        .filter_map(|e| {
            let kernel = manifest.kernels.iter().find(|k| k.name == e.kernel)?;
            let dump = e.dumps.first()?.argument(&dir);
            Some((e.name.clone(), dump, dir.join(&kernel.image)))
        })
        .collect()
}

#[test]
fn other_logs_export_every_event_the_timeline_prints() {
    let Some(python) = python("other_logs_export_every_event_the_timeline_prints") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let entries = other_log_entries();
    assert!(entries.len() >= 3, "{} entries", entries.len());
    let mut kinds = std::collections::BTreeSet::new();
    let mut commands = std::collections::BTreeSet::new();
    for (name, dump, image) in &entries {
        let trace = dir.path().join("t.pftrace");
        let json = ok(&run(&[dump, image], &["timeline --json"]), name);
        let export = format!("timeline --perfetto {}", trace.display());
        ok(&run(&[dump, image], &[&export]), name);
        let mut got: HashMap<(String, String, u64), Exported> = HashMap::new();
        for e in perfetto_events(&read_perfetto(&python, &trace), name) {
            let key = (
                e.parent.clone().unwrap_or_default(),
                e.track.clone(),
                e.seq.unwrap(),
            );
            assert!(!got.contains_key(&key), "{name}: {key:?} exported twice");
            got.insert(key, e);
        }
        let lines = common::json_lines(&json);
        for v in &lines {
            let key = (
                v["log"].as_str().unwrap().to_owned(),
                v["ring"].as_str().unwrap().to_owned(),
                common::dec(&v["seq"]),
            );
            kinds.insert(key.0.clone());
            let e = got
                .remove(&key)
                .unwrap_or_else(|| panic!("{name}: {key:?} not exported"));
            let want = v["schema"]["name"].as_str().or(v["name"].as_str()).unwrap();
            assert_eq!(e.name, want, "{name}: {key:?}");
            let seconds = v["seconds"].as_f64().expect("a clock rate");
            assert!(
                (e.ts as f64 - seconds * 1e9).abs() < 1e3,
                "{name}: {key:?} at {}",
                e.ts
            );
        }
        assert!(
            got.is_empty(),
            "{name}: exported, not printed: {:?}",
            got.keys()
        );
        assert!(!lines.is_empty(), "{name}: no event");
        // Each log's own command exports the same events.
        let here: std::collections::BTreeSet<&str> =
            lines.iter().filter_map(|v| v["log"].as_str()).collect();
        for d in kcrash::plugins::DECODERS
            .iter()
            .filter(|d| here.contains(d.kind()))
        {
            if ["klog", "log"].contains(&d.command()) {
                continue;
            }
            let file = dir.path().join("own.json");
            let command = format!("{} --chrome-json {}", d.command(), file.display());
            ok(&run(&[dump, image], &[&command]), &command);
            let doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
            let own = chrome_events(&doc);
            let want = lines.iter().filter(|v| v["log"] == d.kind()).count();
            assert_eq!(own.len(), want, "{name}: {command}");
            assert!(own.iter().all(|e| e.parent.as_deref() == Some(d.kind())));
            commands.insert(d.command());
        }
    }
    assert!(kinds.len() >= 3, "logs exported: {kinds:?}");
    assert!(commands.len() >= 3, "own commands exported: {commands:?}");
}

/// The committed corpus's `rings` dump of the hosted kernel: every subsystem logs on every
/// processor.
fn hosted_rings() -> (String, PathBuf, PathBuf, Expected) {
    scenarios()
        .into_iter()
        .find(|(n, ..)| n == "hosted/rings")
        .expect("hosted/rings in the corpus")
}

/// Every record of the oracle's trusted rings.
fn oracle_events(e: &Expected) -> impl Iterator<Item = &kcrash_harness::expected::Event> {
    e.rings
        .iter()
        .filter(|r| r.untrusted.is_empty())
        .flat_map(|r| &r.records)
        .filter_map(|r| r.event.as_ref())
}

#[test]
fn lanes_are_processors_or_a_fields_values_when_asked() {
    let Some(python) = python("lanes_are_processors_or_a_fields_values_when_asked") else {
        return;
    };
    let (_, dump, image, expected) = hosted_rings();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pftrace");
    let total = oracle_events(&expected).count();
    for (lanes, track) in [
        (
            "cpu",
            &(|e: &Exported| format!("cpu {}", e.processor.unwrap()))
                as &dyn Fn(&Exported) -> String,
        ),
        ("chore", &|e: &Exported| {
            format!("chore={:#x}", e.chore.unwrap())
        }),
    ] {
        let command = format!("klog 0 --perfetto {} --lanes {lanes}", trace.display());
        ok(&run(&[&dump, &image], &[&command]), lanes);
        let events = perfetto_events(&read_perfetto(&python, &trace), lanes);
        assert_eq!(events.len(), total, "{lanes}");
        let mut tracks = std::collections::HashSet::new();
        for e in &events {
            assert_eq!(e.track, track(e), "--lanes {lanes}: {e:?}");
            assert_eq!(e.parent.as_deref(), Some("KLog"));
            tracks.insert(e.track.clone());
        }
        assert!(tracks.len() > 1, "--lanes {lanes}: one lane");
    }
}

#[test]
fn klog_exports_only_the_subsystem_and_chore_asked_for() {
    let (_, dump, image, expected) = hosted_rings();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.json");
    let chore = oracle_events(&expected)
        .find(|e| e.subsystem_name == "SCHED")
        .unwrap()
        .id;
    for (args, want) in [
        (
            "SCHED",
            oracle_events(&expected)
                .filter(|e| e.subsystem_name == "SCHED")
                .count(),
        ),
        (
            &*format!("0 --chore {chore:#x}"),
            oracle_events(&expected).filter(|e| e.id == chore).count(),
        ),
    ] {
        let command = format!("klog {args} --chrome-json {}", file.display());
        ok(&run(&[&dump, &image], &[&command]), args);
        let doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let events = chrome_events(&doc);
        assert!(
            want > 0 && events.len() == want,
            "klog {args}: {} of {want}",
            events.len()
        );
    }
}

#[test]
fn svg_draws_a_lane_per_ring_and_renders() {
    if !tools::available_for("svg_draws_a_lane_per_ring_and_renders", &["rsvg-convert"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, dump, image, expected) in scenarios().iter().filter(|(n, ..)| {
        ["bare/rings", "hosted/rings", "hosted-c-percpu/percpu"].contains(&n.as_str())
    }) {
        let svg = dir.path().join("t.svg");
        let png = dir.path().join("t.png");
        let total = oracle_events(expected).count();
        for (select, want) in [
            (String::new(), total),
            (since_middle(expected), total.div_ceil(2)),
        ] {
            let command = format!("timeline --svg {} {select}", svg.display());
            let said = ok(&run(&[dump, image], &[&command]), name);
            let svg_text = std::fs::read_to_string(&svg).unwrap();
            let texts = texts(&svg_text);
            let drawn = format!(
                "{}: {want} events of KLog",
                dump.file_name().unwrap().to_string_lossy()
            );
            assert!(
                said.contains(&format!("SVG timeline of {want} events")),
                "{name} {select}: {said}"
            );
            assert!(
                texts.contains(&drawn),
                "{name} {select}: title {drawn:?} not in {texts:?}"
            );
            assert!(texts.iter().any(|t| t == "last event"), "{name}: no marker");
            assert!(
                texts
                    .iter()
                    .any(|t| t.starts_with("time relative to the last event")),
                "{name}"
            );
            // Every ring that holds records has its lane (zoomed, only those with events left).
            for ring in expected
                .rings
                .iter()
                .filter(|r| !r.records.is_empty() && select.is_empty())
            {
                let lane = |t: &String| t.split('/').next() == Some(ring.ring_name.as_str());
                assert!(texts.iter().any(lane), "{name}: no lane {}", ring.ring_name);
            }
            let png = render(&svg, &png);
            assert!(
                png.starts_with(b"\x89PNG") && png.len() > 2000,
                "{name}: {} bytes",
                png.len()
            );
        }
    }
}

/// `svg` rendered to `png` by librsvg, which must take it without error; the PNG's bytes.
fn render(svg: &Path, png: &Path) -> Vec<u8> {
    let o = Command::new("rsvg-convert")
        .arg(svg)
        .arg("-o")
        .arg(png)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "rsvg-convert {}: {}",
        svg.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read(png).unwrap()
}

/// The text of every `<text>` element of an SVG file, trimmed.
fn texts(svg: &str) -> Vec<String> {
    let re = regex::Regex::new(r"(?s)<text[^>]*>(.*?)</text>").unwrap();
    re.captures_iter(svg)
        .map(|c| c[1].trim().to_owned())
        .collect()
}

/// `--since T` that keeps the newer half of the oracle's records (seconds; one log, its clock).
fn since_middle(expected: &Expected) -> String {
    let mut clocks: Vec<u64> = oracle_events(expected).map(|e| e.clock).collect();
    clocks.sort_unstable();
    let t = clocks[clocks.len() / 2];
    let older = clocks.iter().filter(|&&c| c < t).count();
    assert_eq!(
        clocks.len() - older,
        clocks.len().div_ceil(2),
        "a repeated clock at the middle"
    );
    let hz = expected.clock_hz;
    // Seconds as the command line takes them, rounded down to the nanosecond.
    format!(
        "--since {}.{:09}",
        t / hz,
        (u128::from(t % hz) * 1_000_000_000 / u128::from(hz))
    )
}

#[test]
fn an_export_that_fails_leaves_no_file_passed_off_as_complete() {
    // An uncompressed dump: a gzipped one would be decompressed first, and meet the file size
    // limit below before the export does.
    let (dump, image) = (common::kdump(), common::vmlinux());
    let dir = tempfile::tempdir().unwrap();
    let fails = |command: &str, files: &[&Path], what: &str| -> String {
        let o = run(files, &[command]);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{what}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let no_dir = dir.path().join("no/such/dir/t.pftrace");
    let err = fails(
        &format!("timeline --perfetto {}", no_dir.display()),
        &[&dump, &image],
        "no dir",
    );
    assert!(err.contains("no/such/dir"), "{err}");
    assert!(!dir.path().join("no").exists());

    let err = fails(
        &format!("timeline --svg {}", dir.path().display()),
        &[&dump, &image],
        "a dir",
    );
    assert!(err.contains("is a directory"), "{err}");

    // The dump itself as destination: refused, the dump untouched.
    let copy = dir.path().join("vmcore.kdump");
    std::fs::copy(&dump, &copy).unwrap();
    let before = std::fs::read(&copy).unwrap();
    let err = fails(
        &format!("timeline --perfetto {}", copy.display()),
        &[&copy, &image],
        "the dump",
    );
    assert!(err.contains("refusing to write over it"), "{err}");
    assert_eq!(std::fs::read(&copy).unwrap(), before);

    let err = fails(
        &format!("timeline --json --perfetto {}/t", dir.path().display()),
        &[&dump, &image],
        "--json",
    );
    assert!(err.contains("--json"), "{err}");

    // A full disk: a file size limit, its signal ignored so that writes fail with EFBIG. The
    // file already there keeps its contents; nothing else is left.
    let dest = dir.path().join("full.json");
    std::fs::write(&dest, "old").unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 16; exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_kcrash"))
        .args([
            "-s",
            "-c",
            &format!("timeline --chrome-json {}", dest.display()),
        ])
        .arg(&dump)
        .arg(&image)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("full.json"), "{err}");
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "old");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".part"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The Linux guest (Debian's kernel with the KLog module, panicked by sysrq): the timeline of the
/// KLog and printk rings, exported. The picture marks the panic at the time the kernel printed it;
/// the trace holds every record of the module's log as it logged it, and the panic message at
/// its console time.
#[test]
fn a_linux_guests_timeline_marks_its_panic_and_holds_the_modules_log() {
    let test = "a_linux_guests_timeline_marks_its_panic_and_holds_the_modules_log";
    let Some(python) = python(test) else {
        return;
    };
    if !tools::available_for(test, &["rsvg-convert"]) {
        return;
    }
    let files = ["vmcore.elf", "vmlinux", "klogtest.ko"];
    let Some(dir) = common::linux::guest(
        test,
        &[&files[..], &["expected.json", "console.log"]].concat(),
    ) else {
        return;
    };
    let expected: Expected =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let (svg, trace) = (
        scratch.path().join("t.svg"),
        scratch.path().join("t.pftrace"),
    );
    let o = common::linux::kcrash_on(
        &dir,
        &files,
        &[
            &format!("timeline --svg {}", svg.display()),
            &format!("timeline --perfetto {}", trace.display()),
        ],
    );
    ok(&o, test);
    let texts = texts(&std::fs::read_to_string(&svg).unwrap());
    assert!(
        texts.iter().any(|t| t == "panic"),
        "no panic marked: {texts:?}"
    );
    assert!(texts
        .iter()
        .any(|t| t.starts_with("time relative to the panic")));
    assert!(
        texts
            .iter()
            .any(|t| t.ends_with("events of KLog, printk, ftrace")),
        "{texts:?}"
    );
    for lane in ["KLog SCHED", "KLog FS", "printk"] {
        assert!(texts.iter().any(|t| t == lane), "no lane {lane}: {texts:?}");
    }
    let png = render(&svg, &scratch.path().join("t.png"));
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");

    let doc = read_perfetto(&python, &trace);
    assert!(doc["attributes"]["kcrash.kernel_release"]
        .as_str()
        .is_some_and(|r| !r.is_empty()));
    assert_eq!(doc["release"], doc["attributes"]["kcrash.kernel_release"]);
    let (klog, others): (Vec<_>, Vec<_>) = perfetto_events(&doc, test)
        .into_iter()
        .partition(|e| e.parent.as_deref() == Some("KLog"));
    // The guest traced with ftrace while the module ran: its rings are the third log.
    let (printk, ftrace): (Vec<_>, Vec<_>) = others
        .into_iter()
        .partition(|e| e.parent.as_deref() == Some("printk"));
    assert!(!ftrace.is_empty());
    assert!(ftrace.iter().all(|e| e.parent.as_deref() == Some("ftrace")));
    let checked = check_against_oracle(test, klog, &expected, &klog_schemata());
    assert!(checked > 100, "{checked} KLog records");
    // The console's `[    2.574425] Kernel panic - not syncing: ...`, to the microsecond.
    let console = std::fs::read_to_string(dir.join("console.log")).unwrap();
    let (stamp, said) = console
        .lines()
        .filter_map(|l| l.strip_prefix('['))
        .filter_map(|l| l.split_once("] "))
        .find(|(_, m)| m.starts_with("Kernel panic - not syncing"))
        .expect("the console's panic line");
    let (secs, micros) = stamp.trim().split_once('.').unwrap();
    let at = secs.parse::<u64>().unwrap() * 1_000_000 + micros.parse::<u64>().unwrap();
    let panic = printk
        .iter()
        .find(|e| {
            e.message
                .as_deref()
                .is_some_and(|m| m.starts_with(said.trim_end()))
        })
        .unwrap_or_else(|| panic!("no printk event says {said:?}"));
    assert_eq!(panic.ts / 1000, at, "the panic's time");
    assert!(printk.iter().all(|e| e.track == "printk"));
}
