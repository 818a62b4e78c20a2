//! `klog` on every dump of the corpus, through the real binary, against the oracle each test
//! kernel printed while it logged (corpus/README.md): every record of every ring by (ring, seq),
//! every field and message, the damage each scenario must report, the per-ring counts, and the
//! FULL and TERSE text forms; big rings by the digest of their words. The dumps come from QEMU
//! (`dump-guest-memory` and `pmemsave`'s raw memory), makedumpfile, Linux and gdb.
//!
//! `KCRASH_CORPUS=DIR` checks another corpus (CI checks the one it has just generated, big-ring
//! dumps included); every entry whose files are there is checked.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

mod common;

use common::{check_records, corpus, json_records, kcrash, klog_entries as entries, klog_schemata};
use kcrash_harness::expected::{message_matches, Expected, Fnv1a, Ring};
use kcrash_harness::run::stdout;
use kcrash_schema::{Identity, Type};
use serde_json::Value;

/// The `[time] ` prefix of a FULL line, from the documented rule: seconds with nine decimals when
/// the kernel recorded its clock rate, `t=<ticks>` otherwise.
fn time(clock: u64, hz: u64) -> String {
    if hz == 0 {
        return format!("t={clock}");
    }
    let nanos = (clock % hz) as u128 * 1_000_000_000 / hz as u128;
    format!("{:>5}.{nanos:09}", clock / hz)
}

#[test]
fn every_corpus_dump_reads_as_its_kernel_logged_it() {
    let entries = entries();
    // The committed corpus has every scenario of every kernel; a generated one, what was asked.
    let least = if std::env::var_os("KCRASH_CORPUS").is_some() {
        1
    } else {
        20
    };
    assert!(
        entries.len() >= least,
        "{} has {} entries",
        corpus().display(),
        entries.len()
    );
    let mut checked = 0;
    for (name, image, dumps, expected) in &entries {
        let big = expected.rings.iter().any(|r| r.digest.is_some());
        for dump in dumps {
            let what = format!("{name} {}", dump.display());
            let files = files(dump, Some(image));
            if big {
                check_digests(&what, &files, expected);
            } else {
                check_json(&what, &files, expected);
                check_text(&what, &files, expected);
            }
            let doc = check_summary(&what, &files, expected);
            assert_eq!(doc["layout"]["source"], "dwarf", "{what}");
            checked += 1;
        }
    }
    let named = NAMED.load(Ordering::Relaxed);
    eprintln!(
        "checked {checked} dumps of {} corpus entries, {named} named fields",
        entries.len()
    );
    assert!(named > 0, "no record was read through a schema");
}

/// Named fields checked against the oracle, over every dump.
static NAMED: AtomicUsize = AtomicUsize::new(0);

/// Every record `klog --json` read through a schema: each named field is the data word the
/// kernel logged (the oracle's `args`) as the schema's type reads it, a string is the text the
/// kernel's own message holds, or unreadable exactly where the oracle says the dump cannot hold
/// it. Returns how many fields were checked.
fn check_named(what: &str, got: &HashMap<(u64, u64), Value>, expected: &Expected) -> usize {
    let schemata = klog_schemata();
    let mut checked = 0;
    for ring in &expected.rings {
        for rec in &ring.records {
            let (Some(ev), Some(v)) = (&rec.event, got.get(&(ring.ring, rec.seq))) else {
                continue;
            };
            // A schema finds a record by its format string: none when it cannot be read.
            if v["format"].is_null() {
                continue;
            }
            let Some(schema) = schemata
                .events
                .iter()
                .find(|s| matches!(&s.identity, Identity::Format(f) if f == ev.format.as_bytes()))
            else {
                assert!(
                    v.get("schema").is_none(),
                    "{what}: {v} has a schema it should not"
                );
                continue;
            };
            let named = &v["schema"];
            assert_eq!(named["name"], schema.name.as_str(), "{what}: {v}");
            let fields = named["fields"].as_array().unwrap();
            // A field the schema could not read would be missing here, and marked.
            assert_eq!(fields.len(), schema.fields.len(), "{what}: {v}");
            for (f, got) in schema.fields.iter().zip(fields) {
                let word = ["data1", "data2", "data3"]
                    .iter()
                    .position(|d| *d == f.from)
                    .map(|i| ev.args[i])
                    .expect("a data word");
                let mask = |bits: u8| {
                    if bits >= 64 {
                        u64::MAX
                    } else {
                        (1 << bits) - 1
                    }
                };
                let at = format!("{what}: {} of {v}", f.name);
                assert_eq!(got["name"], f.name.as_str(), "{at}");
                match &f.ty {
                    Type::Unsigned { bits } => {
                        assert_eq!(dec(&got["value"]), (word & mask(*bits)) as i128, "{at}")
                    }
                    Type::Signed { bits } => {
                        let shift = 64 - u32::from(*bits);
                        let want = ((word << shift) as i64 >> shift) as i128;
                        assert_eq!(dec(&got["value"]), want, "{at}");
                    }
                    Type::Hex { bits } => {
                        assert_eq!(common::hex(&got["value"]), word & mask(*bits), "{at}")
                    }
                    Type::Pointer | Type::Flags(_) => {
                        assert_eq!(common::hex(&got["value"]), word, "{at}")
                    }
                    Type::Enum(e) => {
                        assert_eq!(dec(&got["value"]), word as i128, "{at}");
                        assert_eq!(got["symbol"].as_str(), e.name_of(word as i64), "{at}");
                    }
                    Type::String { .. } if ev.unreadable_at.contains(&word) => {
                        assert_eq!(got["type"], "unreadable", "{at}");
                        assert_eq!(common::hex(&got["addr"]), word, "{at}");
                    }
                    Type::String { .. } => {
                        let text = got["value"].as_str().expect("a string's text");
                        assert!(
                            ev.message.contains(text),
                            "{at}: {text:?} is not in the kernel's message"
                        );
                    }
                    other => panic!("{at}: the test kernels' schemata have no {other:?} field"),
                }
                checked += 1;
            }
        }
    }
    checked
}

/// The objcopy that knows the image's machine: the host's, or binutils-aarch64-linux-gnu's for
/// an arm64 one.
fn objcopy_for(image: &Path) -> &'static str {
    match kcrash_harness::dump::elf_machine(image).expect("the image") {
        Some(object::elf::EM_AARCH64) => "aarch64-linux-gnu-objcopy",
        _ => "objcopy",
    }
}

/// A JSON decimal string as a number.
fn dec(v: &Value) -> i128 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{v} is not a decimal string"))
}

/// The dump, and its image unless the run is without one.
fn files<'p>(dump: &'p Path, image: Option<&'p Path>) -> Vec<&'p str> {
    std::iter::once(dump)
        .chain(image)
        .map(|p| p.to_str().unwrap())
        .collect()
}

/// `kcrash -s -c COMMAND` over `files`.
fn run(command: &str, files: &[&str]) -> std::process::Output {
    kcrash().run(["-s", "-c", command].iter().chain(files))
}

/// Without DWARF, every dump reads as with it: given the image stripped of its debug information
/// (`objcopy --strip-debug`: the layout comes from the descriptor at its `klogDescriptor`
/// symbol), and given no image at all (found by scanning the dump's memory). Kernel dumps hold
/// every format string, so their records are checked against the oracle field for field; a
/// process core leaves the executable's read-only pages to the file, so without it each
/// record's raw words, slot and damage are checked (unless the executable the core names is
/// where it says, which kcrash then opens itself).
#[test]
fn every_corpus_dump_reads_alike_without_debug_information() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for (name, image, dumps, expected) in &entries() {
        if expected.rings.iter().any(|r| r.digest.is_some()) {
            continue;
        }
        let stripped = dir.path().join(name.replace('/', "-"));
        let status = std::process::Command::new(objcopy_for(image))
            .args([
                "--strip-debug",
                image.to_str().unwrap(),
                stripped.to_str().unwrap(),
            ])
            .status()
            .expect("objcopy runs");
        assert!(
            status.success(),
            "objcopy --strip-debug {}",
            image.display()
        );
        let kernel = name.starts_with("bare/");
        for dump in dumps {
            let what = format!("{name} {}", dump.display());
            for (image, how, source) in [
                (Some(stripped.as_path()), "image without DWARF", "symbol"),
                (None, "no image", "scan"),
            ] {
                let what = format!("{what} ({how})");
                let files = files(dump, image);
                // A process core names its executable, which kcrash opens when it is still
                // where the core says (on the machine that made the corpus): then DWARF.
                let sys: Value =
                    serde_json::from_str(&stdout(&run("sys --json", &files), &what)).unwrap();
                let found_exe = image.is_none() && sys["image"] != "none";
                let source = if found_exe { "dwarf" } else { source };
                let doc = check_summary(&what, &files, expected);
                assert_eq!(doc["layout"]["source"], source, "{what}");
                if kernel || image.is_some() || found_exe {
                    check_json(&what, &files, expected);
                } else {
                    check_raw_records(&what, &files, expected);
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 0, "no corpus dump was read without DWARF");
}

/// Every record the oracle says a trusted ring holds, by its slot, damage and raw words.
fn check_raw_records(what: &str, files: &[&str], expected: &Expected) {
    let text = stdout(&run("klog 0 full --json", files), what);
    let got = json_records(text.lines(), what);
    for ring in expected.rings.iter().filter(|r| r.untrusted.is_empty()) {
        for rec in &ring.records {
            let ctx = format!("{what}: ring {} seq {}", ring.ring_name, rec.seq);
            let v = got
                .get(&(ring.ring, rec.seq))
                .unwrap_or_else(|| panic!("{ctx}: missing"));
            assert_eq!(v["slot"], rec.slot, "{ctx}: slot");
            let damage: Vec<String> = rec
                .damage
                .iter()
                .map(|d| format!("{d:?}").to_lowercase())
                .collect();
            assert_eq!(common::damage(v), damage, "{ctx}: damage");
            if let Some(ev) = &rec.event {
                assert_eq!(common::words(v), ev.words, "{ctx}: words");
            }
        }
    }
}

fn check_json(what: &str, files: &[&str], expected: &Expected) {
    let out = run("klog 0 full --json", files);
    let text = stdout(&out, what);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let got = json_records(text.lines(), what);
    for ring in expected.rings.iter().filter(|r| !r.untrusted.is_empty()) {
        check_untrusted(what, files, ring, &stderr);
    }
    check_records(&got, expected, what);
    NAMED.fetch_add(check_named(what, &got, expected), Ordering::Relaxed);
    // Most recent first: a damaged record sorts just after the record before it in its ring,
    // so only whole records are checked for order.
    let whole: Vec<u64> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["damage"].as_array().unwrap().is_empty())
        .map(|v| common::dec(&v["clock"]))
        .collect();
    assert!(
        whole.windows(2).all(|w| w[0] >= w[1]),
        "{what}: not most recent first"
    );
}

/// A big-ring dump (millions of records): every ring's held records, oldest first, must hash to
/// the digest the kernel printed; only the fields that go into it are parsed.
fn check_digests(what: &str, files: &[&str], expected: &Expected) {
    let errors = tempfile::NamedTempFile::new().expect("a temporary file");
    let mut child = kcrash()
        .session(&["klog 0 --json --oldest-first"])
        .args(files)
        .stdout(std::process::Stdio::piped())
        // A file, not a pipe: nobody reads stderr until the end.
        .stderr(errors.reopen().expect("the stderr file"))
        .spawn()
        .expect("kcrash runs");
    // kcrash prints clock order; the digest is over sequence order. Records come back to sequence
    // order through a small pending map (they are out of order only by a few places).
    struct Ring {
        next: u64,
        pending: std::collections::BTreeMap<u64, [u64; 8]>,
        fnv: Fnv1a,
        count: u64,
    }
    let mut rings: HashMap<u64, Ring> = expected
        .rings
        .iter()
        .filter_map(|r| r.digest.as_ref().map(|d| (r.ring, d)))
        .map(|(ring, d)| {
            let first = (d.last_seq + 1).saturating_sub(d.records);
            (
                ring,
                Ring {
                    next: first,
                    pending: Default::default(),
                    fnv: Fnv1a::default(),
                    count: 0,
                },
            )
        })
        .collect();
    #[derive(serde::Deserialize)]
    struct Slim<'a> {
        ring: u64,
        seq: u64,
        /// `"0x…"` strings, borrowed from the line: millions of records are read here.
        #[serde(borrow)]
        words: [&'a str; 8],
    }
    // Streamed, each line parsed whole as JSON: a 4 Mi-record dump prints 2.4 GB of it.
    let lines = BufReader::new(child.stdout.take().expect("kcrash's stdout")).lines();
    for line in lines {
        let line = line.unwrap_or_else(|e| panic!("{what}: reading kcrash's output: {e}"));
        let r: Slim = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{what}: {e}: {line}"));
        let id = r.ring;
        let Some(ring) = rings.get_mut(&id) else {
            continue;
        };
        let mut words = [0u64; 8];
        for (w, text) in words.iter_mut().zip(r.words) {
            *w = text
                .strip_prefix("0x")
                .and_then(|digits| u64::from_str_radix(digits, 16).ok())
                .unwrap_or_else(|| panic!("{what}: word {text:?}: {line}"));
        }
        ring.pending.insert(r.seq, words);
        while let Some(words) = ring.pending.remove(&ring.next) {
            ring.fnv.words(&words);
            ring.count += 1;
            ring.next += 1;
        }
        assert!(
            ring.pending.len() < 4096,
            "{what}: ring {id} is missing seq {}",
            ring.next
        );
    }
    let status = child.wait().expect("kcrash ends");
    assert!(
        status.success(),
        "{what}: {status}: {}",
        std::fs::read_to_string(errors.path()).unwrap_or_default()
    );
    for r in &expected.rings {
        let Some(digest) = &r.digest else { continue };
        let ring = &rings[&r.ring];
        assert!(
            ring.pending.is_empty(),
            "{what}: ring {}: records after a missing seq {}",
            r.ring_name,
            ring.next
        );
        assert_eq!(
            ring.count, digest.records,
            "{what}: ring {} records",
            r.ring_name
        );
        assert_eq!(
            ring.next - 1,
            digest.last_seq,
            "{what}: ring {} last seq",
            r.ring_name
        );
        assert_eq!(
            ring.fnv.finish(),
            digest.fnv1a,
            "{what}: ring {} digest of its words",
            r.ring_name
        );
    }
}

/// A scribbled KLogs entry: reported on stderr naming the field, its ring not read, and its
/// records found by --salvage.
fn check_untrusted(what: &str, files: &[&str], ring: &Ring, stderr: &str) {
    let line = stderr
        .lines()
        .find(|l| l.contains(&format!("KLogs[{}] ({})", ring.ring, ring.ring_name)))
        .unwrap_or_else(|| {
            panic!(
                "{what}: ring {} not reported untrusted:\n{stderr}",
                ring.ring_name
            )
        });
    for u in &ring.untrusted {
        assert!(
            line.contains(&u.field),
            "{what}: {line} does not name {}",
            u.field
        );
    }
    let out = run(&format!("klog {} --salvage --json", ring.ring), files);
    let salvaged: Vec<Vec<u64>> = stdout(&out, what)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            common::words(&v)
        })
        .collect();
    for rec in ring.records.iter().filter_map(|r| r.event.as_ref()) {
        if rec.subsystem == ring.ring {
            assert!(
                salvaged.contains(&rec.words.to_vec()),
                "{what}: salvage lost {:?} of {}",
                rec.words,
                ring.ring_name
            );
        }
    }
}

/// FULL and TERSE lines, in the JSON's order, built from the expected fields by the documented
/// formats; the schemata only add to the end of a line.
fn check_text(what: &str, files: &[&str], expected: &Expected) {
    let json = stdout(&run("klog 0 --json", files), what);
    let full = stdout(&run("klog 0 full --raw", files), what);
    let terse = stdout(&run("klog 0 terse --raw", files), what);
    let named = stdout(&run("klog 0 full", files), what);
    assert_eq!(named.lines().count(), full.lines().count(), "{what}");
    for (n, f) in named.lines().zip(full.lines()) {
        assert!(
            n.starts_with(f),
            "{what}: {n:?} is not {f:?} and a schema's fields"
        );
    }
    let by_key: HashMap<(u64, u64), (&Ring, &kcrash_harness::expected::Record)> = expected
        .rings
        .iter()
        .flat_map(|r| {
            r.records
                .iter()
                .map(move |rec| ((r.ring, rec.seq), (r, rec)))
        })
        .collect();
    let lines: Vec<(&str, &str, &str)> = json
        .lines()
        .zip(full.lines())
        .zip(terse.lines())
        .map(|((j, f), t)| (j, f, t))
        .collect();
    assert_eq!(
        lines.len(),
        json.lines().count(),
        "{what}: text and JSON differ in length"
    );
    assert_eq!(full.lines().count(), terse.lines().count(), "{what}");
    for (j, f, t) in lines {
        let v: Value = serde_json::from_str(j).unwrap();
        let key = (v["ring"].as_u64().unwrap(), v["seq"].as_u64().unwrap());
        let Some((_, rec)) = by_key.get(&key) else {
            continue;
        };
        let Some(ev) = &rec.event else {
            assert!(
                f.ends_with("<torn: the writer was interrupted before finishing this record>"),
                "{what}: {f}"
            );
            continue;
        };
        let head = format!(
            "[{}] [{:x}][{},{},{}] ",
            time(ev.clock, expected.clock_hz),
            ev.id,
            ev.processor,
            ev.domain,
            ev.subsystem_name
        );
        let msg = f
            .strip_prefix(&head)
            .unwrap_or_else(|| panic!("{what}: FULL line\n  got  {f}\n  want {head}…"));
        assert!(
            message_matches(&ev.message, msg),
            "{what}: FULL message {msg}"
        );
        let msg = t
            .strip_prefix(&format!("[{}] ", ev.subsystem_name))
            .unwrap_or_else(|| panic!("{what}: TERSE line {t}"));
        assert!(
            message_matches(&ev.message, msg),
            "{what}: TERSE message {msg}"
        );
    }
}

/// `klog -s --json`: written, held, overwritten and torn per trusted ring.
/// `klog -s` against the oracle's counts; returns the document.
fn check_summary(what: &str, files: &[&str], expected: &Expected) -> Value {
    let doc: Value = serde_json::from_str(&stdout(&run("klog -s --json", files), what)).unwrap();
    // The oracle's 0 is a kernel that never set its clock rate.
    let hz = &doc["clock_hz"];
    assert_eq!(
        if hz.is_null() { 0 } else { common::dec(hz) },
        expected.clock_hz,
        "{what}: clock rate"
    );
    assert_eq!(
        doc["clock_unknown"].is_null(),
        expected.clock_hz != 0,
        "{what}: {}",
        doc["clock_unknown"]
    );
    let rings = doc["rings"].as_array().unwrap();
    for ring in &expected.rings {
        let r = &rings[ring.ring as usize];
        assert_eq!(r["name"], ring.ring_name.as_str(), "{what}");
        assert_eq!(
            r["trusted"],
            ring.untrusted.is_empty(),
            "{what}: ring {} trusted",
            ring.ring_name
        );
        if !ring.untrusted.is_empty() {
            // Counts from a control block that cannot be believed are not shown as numbers.
            for field in ["written", "held", "overwritten", "laps"] {
                assert!(
                    r[field].is_null(),
                    "{what}: ring {} {field}",
                    ring.ring_name
                );
            }
            assert!(r["counts_unknown"].is_string(), "{what}");
            continue;
        }
        assert!(
            r["counts_unknown"].is_null(),
            "{what}: {}",
            r["counts_unknown"]
        );
        for (field, want) in [
            ("written", ring.written),
            ("held", ring.held),
            ("overwritten", ring.overwritten),
            ("torn", ring.torn),
        ] {
            assert_eq!(r[field], want, "{what}: ring {} {field}", ring.ring_name);
        }
    }
    doc
}

/// `--grep` keeps exactly the records whose message the kernel logged matches, and `-n` counts
/// what the filter kept.
#[test]
fn grep_keeps_exactly_the_matching_messages() {
    let dir = corpus();
    let (d, i) = (
        dir.join("bare/rings/vmcore.kdump"),
        dir.join("bare/vmlinux"),
    );
    let expected: Expected = serde_json::from_str(
        &std::fs::read_to_string(dir.join("bare/rings/expected.json")).unwrap(),
    )
    .unwrap();
    let re = regex::Regex::new("^postProcess: task:[0-9a-f]+ curPD:1$").unwrap();
    let want = expected
        .rings
        .iter()
        .flat_map(|r| &r.records)
        .filter_map(|r| r.event.as_ref())
        .filter(|e| re.is_match(&e.message))
        .count();
    assert!(want > 10, "the scenario logs such messages");
    let out = stdout(
        &kcrash().run([
            "-s",
            "-c",
            &format!("klog 0 --json -g '{}'", re.as_str()),
            d.to_str().unwrap(),
            i.to_str().unwrap(),
        ]),
        "grep",
    );
    let got: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got.len(), want);
    assert!(got
        .iter()
        .all(|v| re.is_match(v["message"].as_str().unwrap())));
    let out = stdout(
        &kcrash().run([
            "-s",
            "-c",
            &format!("klog 0 -n 3 -g '{}'", re.as_str()),
            d.to_str().unwrap(),
            i.to_str().unwrap(),
        ]),
        "grep -n",
    );
    assert_eq!(out.lines().count(), 3);
}

/// The bare kernel's `rings` kdump and its image, as arguments.
fn bare_rings() -> [String; 2] {
    ["bare/rings/vmcore.kdump", "bare/vmlinux"].map(|f| corpus().join(f).display().to_string())
}

/// `--since T --until T` at a time a line printed keeps exactly the records printed with that
/// time. The bare kernel's clock runs at 2.3 GHz, so a printed nanosecond spans two or three
/// ticks: a window taken from the time rounded to a tick missed most of them.
#[test]
fn a_window_at_a_printed_time_keeps_the_records_printed_with_it() {
    let bare = bare_rings();
    let files: Vec<&str> = bare.iter().map(String::as_str).collect();
    let all = stdout(&run("klog 0 full", &files), "klog");
    // `[    0.446512427] [ffffffff8010dc58][3,805306815,NONE] ...`
    let time = |line: &str| line[1..].split(']').next().unwrap().trim().to_owned();
    let mut times: Vec<String> = all.lines().map(time).collect();
    times.dedup();
    assert!(times.len() > 100, "{} times", times.len());
    // One session, one window per time: the output is every line, once, in order.
    let mut args = vec!["-s".to_owned()];
    for t in &times {
        args.extend([
            "-c".to_owned(),
            format!("klog 0 full --since {t} --until {t}"),
        ]);
    }
    args.extend(files.iter().map(|f| f.to_string()));
    let windows = stdout(&kcrash().run(&args), "klog windows");
    let (got, want): (Vec<&str>, Vec<&str>) = (windows.lines().collect(), all.lines().collect());
    if let Some(i) = (0..want.len()).find(|&i| got.get(i) != Some(&want[i])) {
        panic!(
            "line {i}: {:?} where {:?} was printed at {}",
            got.get(i),
            want[i],
            time(want[i])
        );
    }
    assert_eq!(got.len(), want.len());
}

/// `--chore` takes the id as a FULL line prints it (16 hex digits, no 0x), as with 0x, and keeps
/// exactly the oracle's records of that chore.
#[test]
fn chore_filter_takes_the_id_as_full_prints_it() {
    let bare = bare_rings();
    let files: Vec<&str> = bare.iter().map(String::as_str).collect();
    let expected: Expected = serde_json::from_str(
        &std::fs::read_to_string(corpus().join("bare/rings/expected.json")).unwrap(),
    )
    .unwrap();
    let first = stdout(&run("klog 0 full -n 1", &files), "klog");
    // `[    0.446512427] [ffffffff8010dc58][3,805306815,NONE] ...`
    let printed = first.split(['[', ']']).nth(3).unwrap().to_owned();
    assert_eq!(printed.len(), 16, "{first}");
    let id = u64::from_str_radix(&printed, 16).unwrap();
    let want = expected
        .rings
        .iter()
        .filter(|r| r.untrusted.is_empty())
        .flat_map(|r| &r.records)
        .filter(|r| r.event.as_ref().is_some_and(|e| e.id == id))
        .count();
    assert!(want > 1);
    for given in [printed.clone(), format!("{id:#x}"), id.to_string()] {
        let out = stdout(
            &run(&format!("klog 0 full --chore {given}"), &files),
            "klog",
        );
        assert_eq!(out.lines().count(), want, "--chore {given}");
        assert!(out.lines().all(|l| l.contains(&format!("[{printed}]"))));
    }
}
