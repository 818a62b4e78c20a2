//! The KLog descriptor in a real dump (the bare kernel's QEMU ELF dump of its `rings` crash),
//! edited as damage or a hostile kernel would leave it: every damaged descriptor is refused by
//! name and never trusted, a disagreement with DWARF is reported and DWARF wins, two valid
//! descriptors are trusted by neither, and a copy is not mistaken for the descriptor.

use std::path::{Path, PathBuf};

use klog_runtime::descriptor::{self, CHECKSUM_AT};
use serde_json::Value;

mod common;

use common::edit::{file_offset, inflated};

/// The dump inflated, with `edit` applied to it and to the descriptor's file offset.
fn edited(dir: &Path, edit: impl Fn(&mut Vec<u8>, usize)) -> PathBuf {
    let mut bytes = inflated("bare/rings/vmcore.elf.gz");
    let magic = descriptor::stored_magic();
    let at = bytes
        .windows(16)
        .position(|w| w == magic)
        .expect("the dump holds the descriptor");
    edit(&mut bytes, at);
    let path = dir.join("vmcore.elf");
    std::fs::write(&path, &bytes).unwrap();
    path
}

/// Stores a fresh checksum over the descriptor at `at`, so that only the checks after the
/// checksum's can refuse an edit.
fn reseal(b: &mut [u8], at: usize) {
    assert!(descriptor::reseal(&mut b[at..]));
}

fn summary(dump: &Path, image: Option<&Path>) -> (Option<i32>, Value, String) {
    let mut files = vec![dump.to_str().unwrap()];
    files.extend(image.map(|i| i.to_str().unwrap()));
    let out = common::kcrash().run(["-s", "-c", "klog -s --json"].iter().chain(&files));
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code(),
        doc,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_damaged_descriptor_is_refused_by_name_and_never_trusted() {
    let dir = tempfile::tempdir().unwrap();
    type Edit = fn(&mut Vec<u8>, usize);
    let cases: [(&str, Edit, &str); 6] = [
        (
            "a flipped name byte",
            |b, at| b[at + 0xe0] ^= 0x20,
            "does not match its bytes",
        ),
        (
            "checksum zeroed",
            |b, at| b[at + CHECKSUM_AT..at + CHECKSUM_AT + 4].fill(0),
            "not sealed",
        ),
        (
            "ABI 3",
            |b, at| {
                b[at + 0x10] = 3;
                reseal(b, at)
            },
            "ABI 3.0",
        ),
        (
            "a field past its struct",
            |b, at| {
                b[at + 0x78 + 28] = 60;
                reseal(b, at)
            },
            "KLog field 7",
        ),
        (
            "a size that is not the subsystems'",
            |b, at| b[at + 0x1c] ^= 0x40,
            "does not fit",
        ),
        (
            "the endianness marker",
            |b, at| b[at + 0x14] = 9,
            "endianness marker",
        ),
    ];
    for (what, edit, why) in cases {
        let dump = edited(dir.path(), edit);
        // No image: there is nothing else to trust.
        let (code, _, stderr) = summary(&dump, None);
        assert_eq!(code, Some(1), "{what}: {stderr}");
        assert!(stderr.contains(why), "{what}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{what}: one line: {stderr}");
        // With the image's DWARF, the rings read, and the refusal is said.
        let (code, doc, stderr) = summary(&dump, Some(&common::vmlinux()));
        assert_eq!(code, Some(0), "{what}: {stderr}");
        assert_eq!(doc["layout"]["source"], "dwarf", "{what}");
        let notes = doc["layout"]["notes"].to_string();
        assert!(
            notes.contains(why) && notes.contains("DWARF is used"),
            "{what}: {notes}"
        );
        assert_eq!(doc["rings"][3]["written"], 300, "{what}");
    }
}

#[test]
fn a_descriptor_that_disagrees_with_dwarf_is_reported_and_dwarf_wins() {
    let dir = tempfile::tempdir().unwrap();
    let dump = edited(dir.path(), |b, at| {
        // klogLevel 8 bytes further on.
        b[at + 0x48] = b[at + 0x48].wrapping_add(8);
        reseal(b, at);
    });
    let (code, doc, stderr) = summary(&dump, Some(&common::vmlinux()));
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(doc["layout"]["source"], "dwarf");
    let notes = doc["layout"]["notes"].to_string();
    assert!(
        notes.contains("disagrees with DWARF, which is used") && notes.contains("klogLevel"),
        "{notes}"
    );
    assert_eq!(doc["klog_level"], "3 (PROLOG)", "DWARF's klogLevel is read");
    // Without the image the descriptor is all there is, and it is what is read.
    let (code, doc, _) = summary(&dump, None);
    assert_eq!(code, Some(0));
    assert_eq!(doc["layout"]["source"], "scan");
}

/// The heap arena's second half, unused by the `rings` scenario: (its virtual address, its
/// offset in the dump).
fn free_space(bytes: &[u8], descriptor_at: usize) -> (u64, usize) {
    let nm = common::nm(&common::vmlinux());
    let arena = nm
        .iter()
        .find(|(n, _)| n.contains("4heap5ARENA"))
        .map(|(_, (a, _))| *a)
        .expect("the bare kernel's heap arena");
    let this = nm["klogDescriptor"].0;
    // Descriptors are 64-byte aligned; the scan looks nowhere else.
    let to = (arena + 0x3000).next_multiple_of(64);
    let magic = descriptor::stored_magic();
    let at = file_offset(bytes, &magic, this, to);
    assert_eq!(at - descriptor_at, (to - this) as usize);
    (to, at)
}

#[test]
fn two_valid_descriptors_are_trusted_by_neither() {
    let dir = tempfile::tempdir().unwrap();
    let dump = edited(dir.path(), |b, at| {
        let size = descriptor::claimed_size(&b[at..]).unwrap();
        let (to, copy) = free_space(b, at);
        assert!(b[copy..copy + size].iter().all(|&x| x == 0), "arena unused");
        b.copy_within(at..at + size, copy);
        // A second descriptor that says it is where it is.
        b[copy + 0x20..copy + 0x28].copy_from_slice(&to.to_le_bytes());
        reseal(b, copy);
    });
    let (code, _, stderr) = summary(&dump, None);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("2 KLog descriptors") && stderr.contains("trusts none"),
        "{stderr}"
    );
    let (code, doc, _) = summary(&dump, Some(&common::vmlinux()));
    assert_eq!(
        (code, &doc["layout"]["source"]),
        (Some(0), &Value::from("dwarf"))
    );
}

#[test]
fn a_copy_of_the_descriptor_is_not_taken_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut found = 0;
    let dump = edited(dir.path(), |b, at| {
        let size = descriptor::claimed_size(&b[at..]).unwrap();
        let (_, copy) = free_space(b, at);
        b.copy_within(at..at + size, copy);
    });
    let (code, doc, stderr) = summary(&dump, None);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(doc["layout"]["source"], "scan");
    for note in doc["layout"]["notes"].as_array().unwrap() {
        found += usize::from(note.as_str().unwrap().contains("a copy"));
    }
    assert_eq!(found, 1, "{}", doc["layout"]);
    assert_eq!(doc["rings"][3]["written"], 300);
}
