//! The name-index cache through the public API, on Debian's vmlinux (the one image here large
//! enough to be cached): the first open writes the cache, later ones answer from it, and a
//! damaged file is noticed, dropped and rebuilt, with the same answers throughout.
//!
use std::path::Path;

use kcrash_harness::{linux, tools};
use symbols::{Image, Options, Search};

/// What a session asks of the kernel image, as text to compare.
fn answers(vmlinux: &Path, cache: &Path) -> String {
    let options = Options {
        index_cache: Some(cache.to_owned()),
        ..Options::default()
    };
    let image = Image::open_with(vmlinux, &options).expect("vmlinux opens");
    // A name no unit has needs the full index: the session builds (and caches) it, or reads it
    // from the cache. Every answer below then comes from it.
    let none = image.find_variable("kcrash_no_such_variable", Search::Full);
    assert!(none.unwrap().is_none());
    let mut out = String::new();
    for name in ["jiffies_64", "init_task", "prb", "modules"] {
        let variable = image.variable(name).unwrap().expect(name);
        let ty = variable.ty.map(|t| image.type_name(t).unwrap());
        out += &format!("{name}: {:x?} {ty:?}\n", variable.address);
    }
    for name in [
        "struct module",
        "struct module_sect_attrs",
        "struct printk_ringbuffer",
    ] {
        let ty = image.type_by_name(name).unwrap().expect(name);
        out += &format!("{name}: {:?} {:?}\n", ty, image.size_of(ty).unwrap());
    }
    out
}

#[test]
fn cache_is_written_used_and_replaced_when_damaged() {
    // Debian's vmlinux, as the Linux guest leaves it.
    let vmlinux = linux::guest_output().join("vmlinux");
    if !vmlinux.exists() {
        let why = format!("{} is missing (run the Linux guest)", vmlinux.display());
        return tools::not_run("cache_is_written_used_and_replaced_when_damaged", &why);
    }
    let cache = tempfile::tempdir().unwrap();
    let cache_file = || {
        let files: Vec<_> = std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.first().cloned()
    };

    let scanned = answers(&vmlinux, cache.path());
    let file = cache_file().expect("the first session wrote the cache");
    let written = std::fs::read(&file).unwrap();
    assert_eq!(
        answers(&vmlinux, cache.path()),
        scanned,
        "answers from the cache"
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        written,
        "a warm session rewrote the cache"
    );

    // Damaged entries (a byte in every 4 KiB from a tenth of the way in; the header and tables
    // are in the first 100 KB): noticed by a lookup, the file is removed, the answers stay.
    let mut damaged = written.clone();
    for at in (damaged.len() / 10..damaged.len()).step_by(4096) {
        damaged[at] ^= 0x55;
    }
    std::fs::write(&file, &damaged).unwrap();
    assert_eq!(
        answers(&vmlinux, cache.path()),
        scanned,
        "answers with damaged entries"
    );
    assert!(!file.exists(), "the damaged cache file was not removed");

    // A damaged header: refused on opening, the session scans and writes a good file again.
    std::fs::write(&file, &written[..written.len() - 1]).unwrap();
    assert_eq!(
        answers(&vmlinux, cache.path()),
        scanned,
        "answers with a truncated file"
    );
    assert_eq!(std::fs::read(&file).unwrap(), written, "not rebuilt");
}
