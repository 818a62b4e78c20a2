//! Lookups on a large image with no name index at hand read only the units that can answer them
//! (the unit `.debug_aranges` names for the code of the object a symbol came from, and the
//! units read so far), on Debian's vmlinux (the one image here large enough): the answers are
//! the full index's, and none of it is built — the index cache, which the full index is written
//! to, stays empty.

use std::path::Path;

use kcrash_harness::{linux, tools};
use symbols::{Image, Options, Search};

/// The kernel's globals kcrash reads through DWARF when it opens a dump and lists modules,
/// tasks and the log, each found in its own unit or (`consult`ed first where named, as kcrash
/// does) in one read before it. Others are not all found so: `jiffies_64`, laid out among
/// other objects' cache-aligned data, has no neighbour of its own object; those are left to
/// the full index.
const VARIABLES: [(&str, Option<&str>); 7] = [
    ("modules", None),
    ("init_task", None),
    ("prb", None),
    ("panic_cpu", None),
    ("tk_core", None),
    ("__per_cpu_offset", Some("setup_per_cpu_areas")),
    ("nr_cpu_ids", Some("setup_nr_cpu_ids")),
];

/// Types those readers name, each defined in a unit read by then.
const TYPES: [&str; 6] = [
    "struct module",
    "struct task_struct",
    "struct printk_ringbuffer",
    "struct prb_desc",
    "struct list_head",
    "int",
];

fn open(vmlinux: &Path, cache: &Path) -> Image {
    let options = Options {
        index_cache: Some(cache.to_owned()),
        ..Options::default()
    };
    Image::open_with(vmlinux, &options).expect("vmlinux opens")
}

/// A variable or type as text to compare: address and type name, or name and size.
fn variable(image: &Image, name: &str, search: Search) -> Option<String> {
    let v = image.find_variable(name, search).unwrap()?;
    let ty = v.ty.map(|t| image.type_name(t).unwrap());
    Some(format!("{name} at {:x?}: {ty:?}", v.address))
}

fn type_(image: &Image, name: &str, search: Search) -> Option<String> {
    let t = image.find_type(name, search).unwrap()?;
    let ty = image.type_(t).unwrap();
    let members: Vec<String> = match &ty.kind {
        symbols::TypeKind::Struct(members) => members
            .iter()
            .map(|m| format!("{:?}@{}", m.name, m.offset))
            .collect(),
        _ => Vec::new(),
    };
    Some(format!(
        "{name}: {} bytes {members:?}",
        image.size_of(t).unwrap().unwrap_or(0)
    ))
}

#[test]
fn a_large_images_globals_are_found_in_their_own_units() {
    let vmlinux = linux::guest_output().join("vmlinux");
    if !vmlinux.exists() {
        let why = format!("{} is missing (run the Linux guest)", vmlinux.display());
        return tools::not_run("a_large_images_globals_are_found_in_their_own_units", &why);
    }
    let cache = tempfile::tempdir().unwrap();
    let quick = open(&vmlinux, cache.path());
    let mut found = Vec::new();
    for (name, hint) in VARIABLES {
        if let Some(function) = hint {
            quick.consult(function);
        }
        let v = variable(&quick, name, Search::Quick);
        found.push(v.unwrap_or_else(|| panic!("{name} not found quickly")));
    }
    for name in TYPES {
        let t = type_(&quick, name, Search::Quick);
        found.push(t.unwrap_or_else(|| panic!("{name} not found quickly")));
    }
    // A module's variable is not the kernel's: said without looking further.
    assert_eq!(variable(&quick, "KLogs", Search::Quick), None);
    let written: Vec<_> = std::fs::read_dir(cache.path()).unwrap().collect();
    assert!(written.is_empty(), "the full index was built: {written:?}");

    // The same questions of the full index.
    let full = open(&vmlinux, cache.path());
    assert_eq!(
        variable(&full, "kcrash_no_such_variable", Search::Full),
        None
    );
    let indexed: Vec<String> = VARIABLES
        .iter()
        .map(|(name, _)| variable(&full, name, Search::Full).expect(name))
        .chain(
            TYPES
                .iter()
                .map(|name| type_(&full, name, Search::Full).expect(name)),
        )
        .collect();
    assert_eq!(found, indexed, "quick answers, then the full index's");
}
