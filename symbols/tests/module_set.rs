//! A kernel image and a module opened as one set at the module's load addresses, and section
//! addresses for sections the module file lacks refused. Setup: tests/common/module.rs.

mod common;

use symbols::{Error, Image, ImageSet, SectionAddresses};

use common::module::{debian_file, kotest, layout, objdump_symbols};
use kcrash_harness::tools;

const VMLINUX: &str = "/var/cache/kcrash-ci/linux-dbg/usr/lib/debug/boot/vmlinux-{release}";

/// The kernel and a module searched as one: each name from the image that has it, each
/// address from the image whose sections hold it.
#[test]
fn kernel_and_module_as_one_set() {
    let Some(module) = kotest() else { return };
    let vmlinux = debian_file(VMLINUX);
    if !vmlinux.exists() {
        return tools::not_run(
            "kernel_and_module_as_one_set",
            &format!("{} is not there", vmlinux.display()),
        );
    }
    let sections = layout(module);
    let mut kernel = Image::open(&vmlinux).unwrap();
    let kaslr = 0x1c00_0000;
    kernel.set_load_bias(kaslr);
    // printk is `_printk` since 5.15, `printk` before.
    let printk = ["_printk", "printk"]
        .into_iter()
        .find_map(|name| kernel.symbol(name))
        .unwrap();
    let printk_name = printk.name.clone();
    let mut set = ImageSet::new();
    set.push(kernel);
    set.push(Image::open_relocatable(module, &sections).unwrap());
    let (image, symbol) = set.symbol("ko_exported").unwrap();
    assert_eq!(image.path(), module);
    let in_text = objdump_symbols(module)["ko_exported"].1;
    assert_eq!(
        Some(symbol.address),
        sections.get(".text").map(|t| t + in_text)
    );
    let (image, symbol, offset) = set.symbolize(symbol.address + 3).unwrap();
    assert_eq!(
        (image.path(), symbol.name.as_str(), offset),
        (module, "ko_exported", 3)
    );
    let (image, symbol, offset) = set.symbolize(printk.address + 1).unwrap();
    assert_eq!(
        (image.path(), symbol.name.as_str(), offset),
        (vmlinux.as_path(), printk_name.as_str(), 1)
    );
    assert!(set.image_at(0x1000).is_none());
    assert!(set.symbolize(0xffff_ffff_c0a0_0000 - 1).is_none());
    let (image, variable) = set.variable("ko_records").unwrap().unwrap();
    assert_eq!(image.path(), module);
    assert_eq!(
        variable.address,
        image.symbol("ko_records").map(|s| s.address)
    );
    let frames = set
        .frames(image.symbol("ko_bump").unwrap().address + 5)
        .unwrap();
    assert_eq!(
        frames.first().and_then(|f| f.function.as_deref()),
        Some("ko_bump")
    );
}

/// Sections named in the addresses that the file does not have: not the loaded file.
#[test]
fn addresses_for_sections_the_file_lacks_are_refused() {
    let Some(module) = kotest() else { return };
    let mut sections = layout(module);
    sections.insert(".text.unlikely", 0xffff_ffff_c0b0_0000);
    match Image::open_relocatable(module, &sections) {
        Err(Error::Placement { what, .. }) => assert!(what.contains(".text.unlikely"), "{what}"),
        other => panic!("expected a placement error, got {other:?}"),
    }
    // An executable has no sections to place.
    let vmlinux_like = std::env::current_exe().unwrap();
    assert!(matches!(
        Image::open_relocatable(&vmlinux_like, &SectionAddresses::new()),
        Err(Error::Placement { .. })
    ));
}
