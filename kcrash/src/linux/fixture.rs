//! The Linux readers' unit-test kernel: `tests/data/linux_structs.c` built by gcc, whose DWARF
//! has the kernel structures the readers ask about, over memory each test makes up.

use std::path::Path;

use kcrash_harness::tools;
use symbols::Image;

/// The fixture built with gcc's `flags` into `dir`, or `None` (and a note) without gcc.
pub fn structs(test: &str, dir: &Path, flags: &[&str]) -> Option<Image> {
    if !tools::available_for(test, &["gcc"]) {
        return None;
    }
    let program = dir.join("linux_structs");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/linux_structs.c");
    let built = std::process::Command::new("gcc")
        .args(["-g", "-o"])
        .arg(&program)
        .args(flags)
        .arg(source)
        .status()
        .unwrap();
    assert!(built.success(), "gcc");
    Some(Image::open(&program).unwrap())
}
