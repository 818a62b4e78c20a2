//! `dplog` on every dump of the corpus's DProbes entries (bare kernel under QEMU, hosted
//! program's Linux core), through the real binary, against the oracle the kernel printed for
//! every record it wrote: every surviving record of every processor's buffer, in order, with
//! its time, place, name, every field (fault tokens as unreadable fields with their address)
//! and message; each buffer's size and counts; and what the damaged scenario must say.
//!
//! `KCRASH_CORPUS=DIR` checks another corpus.

mod common;

use std::path::PathBuf;

use common::{json_lines, kcrash};
use kcrash::regress::manifest::Manifest;
use kcrash_harness::dprobes::{self, SCENARIOS};
use kcrash_harness::{corpus, run::stdout};

fn corpus_dir() -> PathBuf {
    std::env::var_os("KCRASH_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(corpus::default_dir)
}

#[test]
fn every_dprobes_dump_reads_as_its_kernel_logged_it() {
    let dir = corpus_dir();
    let manifest = Manifest::load(&dir).expect("corpus/manifest.toml");
    let kc = kcrash();
    let mut checked = (0, 0, 0);
    for entry in manifest
        .entries
        .iter()
        .filter(|e| SCENARIOS.contains(&e.scenario.as_str()) && dir.join(&e.console).exists())
    {
        let image = dir.join(
            &manifest
                .kernel(&entry.kernel)
                .expect("entry's kernel")
                .image,
        );
        let expected = dprobes::derive_file(&dir.join(&entry.console)).unwrap();
        assert!(expected.events() > 0, "{}: no records", entry.name);
        for dump in &entry.dumps {
            let dump = dump.argument(&dir);
            let what = format!("{} {}", entry.name, dump.display());
            let events = kc.commands(&dump, &image, &["dplog --json --reverse"]);
            let lines = json_lines(&stdout(&events, &what));
            let n = dprobes::compare_events(&expected, &lines)
                .unwrap_or_else(|e| panic!("{what}: {e:#}"));
            let rings = kc.commands(&dump, &image, &["dplog -s --json"]);
            let rings = serde_json::from_str(&stdout(&rings, &what)).expect("JSON");
            dprobes::compare_rings(&expected, &rings).unwrap_or_else(|e| panic!("{what}: {e:#}"));
            checked.0 += 1;
            checked.1 += n;
        }
        checked.2 += 1;
    }
    eprintln!(
        "{} dumps of {} entries, {} records compared",
        checked.0, checked.2, checked.1
    );
    if std::env::var_os("KCRASH_CORPUS").is_none() {
        assert!(checked.2 >= 8, "the committed corpus has 8 DProbes entries");
    }
}
