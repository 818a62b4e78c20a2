//! kcrash on the per-processor corpus dump (hosted-percpu, Linux's core of the `percpu`
//! scenario): four processors' ring sets, VM grouped into FS, processor 3's PARCHORE ring
//! attached after klog_init, inline and event-ID descriptions, processor 1's SCHED ring wrapped.
//! What the kernel logged is read exactly, one processor's rings alone, and a damaged group or
//! attached ring is refused by name while the rest still reads.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use kcrash_harness::corpus;
use kcrash_harness::expected::Expected;
use serde_json::Value;

mod common;

use common::edit::{inflated, replace_all};

const ENTRY: &str = "hosted-percpu/percpu";

fn image() -> PathBuf {
    corpus::file("hosted-percpu/hosted-percpu")
}

fn expected() -> Expected {
    let text = std::fs::read_to_string(corpus::file(&format!("{ENTRY}/expected.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn core(dir: &Path, edit: impl Fn(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = inflated(&format!("{ENTRY}/core.gz"));
    edit(&mut bytes);
    let path = dir.join("core");
    std::fs::write(&path, &bytes).unwrap();
    path
}

fn run(core: &Path, command: &str) -> (Option<i32>, String, String) {
    let out = common::kcrash().commands(core, &image(), &[command]);
    (
        out.status.code(),
        common::text(&out.stdout),
        common::text(&out.stderr),
    )
}

fn summary(core: &Path) -> Value {
    let (code, stdout, stderr) = run(core, "klog -s --json");
    assert_eq!(code, Some(0), "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn every_ring_set_reads_as_the_kernel_logged_it() {
    let dir = tempfile::tempdir().unwrap();
    let core = core(dir.path(), |_| {});
    let expected = expected();
    let s = summary(&core);
    assert_eq!(s["processors"], 4);
    let rings = s["rings"].as_array().unwrap();
    assert_eq!(rings.len(), 20);
    for (i, r) in rings.iter().enumerate() {
        assert_eq!(r["processor"], i / 5, "ring {i}");
        assert_eq!(r["trusted"], true, "ring {i}: {}", r["problems"]);
        let want = &expected.rings[i];
        assert_eq!(r["written"], want.written, "ring {i}");
        assert_eq!(r["held"], want.held, "ring {i}");
        assert_eq!(
            r["grouped_into"],
            if i % 5 == 4 {
                Value::from(i - 2)
            } else {
                Value::Null
            }
        );
        assert_eq!(r["attached"], i == 16, "ring {i}");
    }
    assert_eq!(
        rings[8]["overwritten"], 2018,
        "processor 1 lost its oldest SCHED events"
    );

    let (code, stdout, stderr) = run(&core, "klog 0 --json");
    assert_eq!(code, Some(0), "{stderr}");
    let records: HashMap<(u64, u64), Value> = common::json_lines(&stdout)
        .into_iter()
        .map(|v| ((v["ring"].as_u64().unwrap(), v["seq"].as_u64().unwrap()), v))
        .collect();
    common::check_records(&records, &expected, ENTRY);
    let kinds: BTreeSet<&str> = records
        .values()
        .map(|v| v["desc_kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["event", "inline", "pointer"].into());
}

/// `--cpu` reads that processor's rings: exactly the records the kernel logged on it.
#[test]
fn one_processors_rings_alone() {
    let dir = tempfile::tempdir().unwrap();
    let core = core(dir.path(), |_| {});
    let expected = expected();
    for cpu in 0..4u64 {
        let (code, stdout, stderr) = run(&core, &format!("klog 0 --json --cpu {cpu}"));
        assert_eq!(code, Some(0), "{stderr}");
        let got: BTreeSet<(u64, u64)> = common::json_lines(&stdout)
            .iter()
            .map(|v| (v["ring"].as_u64().unwrap(), v["seq"].as_u64().unwrap()))
            .collect();
        let want: BTreeSet<(u64, u64)> = expected
            .rings
            .iter()
            .flat_map(|r| {
                r.records
                    .iter()
                    .filter(|rec| {
                        rec.event
                            .as_ref()
                            .is_some_and(|e| u64::from(e.processor) == cpu)
                    })
                    .map(move |rec| (r.ring, rec.seq))
            })
            .collect();
        assert_eq!(got, want, "cpu {cpu}");
        assert!(got.iter().all(|(ring, _)| ring / 5 == cpu), "cpu {cpu}");
    }
    // VM's events are in every processor's FS ring.
    let (_, stdout, _) = run(&core, "klog VM --json");
    let vm = common::json_lines(&stdout);
    let want = expected
        .rings
        .iter()
        .flat_map(|r| r.events())
        .filter(|e| e.subsystem == 4)
        .count();
    assert_eq!(vm.len(), want);
    assert!(vm
        .iter()
        .all(|v| v["subsystem"] == 4 && v["ring"].as_u64().unwrap() % 5 == 2));
}

/// A KLog's eight words as they sit in the dump, from `num_recs` on (unique per KLog).
fn klog_tail(ring: &kcrash_harness::expected::Ring, subsystem: u64, next_write: u64) -> Vec<u8> {
    [
        ring.num_recs,
        8,
        (0x4b4c_4f47 << 32) | (8 << 16) | subsystem,
        ring.buffer,
        ring.num_recs * 8 - 1,
        next_write,
    ]
    .iter()
    .flat_map(|w| w.to_le_bytes())
    .collect()
}

/// A group member whose KLog no longer mirrors its leader, or an attached ring that is not
/// aligned, is refused by name; every other ring still reads.
#[test]
fn a_damaged_group_or_attached_ring_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let expected = expected();
    let vm = &expected.rings[4];
    let parchore3 = &expected.rings[16];
    // What, which KLog, its bytes before and after, and the reason kcrash must give.
    type Case = (
        &'static str,
        usize,
        &'static str,
        Vec<u8>,
        Vec<u8>,
        &'static str,
    );
    let cases: [Case; 3] = [
        (
            "a member with a buffer of its own",
            4,
            "VM",
            klog_tail(vm, 4, 0),
            {
                let mut moved = vm.clone();
                moved.buffer += 64;
                klog_tail(&moved, 4, 0)
            },
            "is not the leader's",
        ),
        (
            "an attached ring off its alignment",
            16,
            "PARCHORE",
            klog_tail(parchore3, 1, parchore3.written * 8),
            {
                let mut moved = parchore3.clone();
                moved.buffer += 8;
                klog_tail(&moved, 1, parchore3.written * 8)
            },
            "nor an attached ring",
        ),
        (
            "an attached ring whose next_write is torn",
            16,
            "PARCHORE",
            klog_tail(parchore3, 1, parchore3.written * 8),
            klog_tail(parchore3, 1, parchore3.written * 8 + 1),
            "not a multiple of rec_size",
        ),
    ];
    for (what, index, subsystem, from, to, why) in cases {
        let core = core(dir.path(), |b| {
            assert_eq!(replace_all(b, &from, &to), 1, "{what}")
        });
        let s = summary(&core);
        let rings = s["rings"].as_array().unwrap();
        let problems = rings[index]["problems"].to_string();
        assert_eq!(rings[index]["trusted"], false, "{what}");
        assert!(problems.contains(why), "{what}: {problems}");
        let others = rings
            .iter()
            .enumerate()
            .filter(|(i, r)| *i != index && r["trusted"] == true)
            .count();
        assert_eq!(others, 19, "{what}: the other rings read");
        // The whole log and the subsystem's own view both name the refused KLog.
        for command in ["klog 0".to_owned(), format!("klog {subsystem}")] {
            let (code, _, stderr) = run(&core, &command);
            assert_eq!(code, Some(0), "{what}: {command}: {stderr}");
            assert!(
                stderr.contains(&format!("KLogs[{index}]")),
                "{what}: {command}: {stderr}"
            );
            // Salvage scans KLogBuffer: it is not offered for a ring attached outside it.
            let attached = rings[index]["attached"] == true;
            assert_eq!(
                stderr.contains("outside KLogBuffer, which `klog --salvage` scans"),
                attached,
                "{what}: {command}: {stderr}"
            );
        }
    }
}
