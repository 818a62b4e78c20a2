//! A kernel's per-CPU variables under KASLR. x86_64 links them from 0 and the kernel knows each
//! by that offset, which KASLR leaves as linked: a load bias moves neither their symbols nor
//! their DWARF addresses, and no run-time address is put down to one of them. (A user address
//! just above a 4 MiB slide was once named after `bpf_misc_sds`.) Oracle: `nm` on Debian's
//! vmlinux.

mod common;

use symbols::{Image, ImageSet};

use common::module::debian_file;
use common::nm;
use kcrash_harness::tools;

const VMLINUX: &str = "/var/cache/kcrash-ci/linux-dbg/usr/lib/debug/boot/vmlinux-{release}";

#[test]
fn per_cpu_variables_keep_their_offsets_and_hold_no_address() {
    let vmlinux = debian_file(VMLINUX);
    if !vmlinux.exists() {
        return tools::not_run(
            "per_cpu_variables_keep_their_offsets_and_hold_no_address",
            &format!("{} is not there", vmlinux.display()),
        );
    }
    let nm = nm(&vmlinux);
    let (start, end) = (nm["__per_cpu_start"], nm["__per_cpu_end"]);
    assert_eq!(start, 0, "x86_64 links its per-CPU section at 0");
    let mut kernel = Image::open(&vmlinux).unwrap();
    // A slide KASLR chose on a guest: its per-CPU section's extent, biased, takes in the user
    // addresses of a static busybox.
    let kaslr = 0x40_0000;
    kernel.set_load_bias(kaslr);

    let offset = nm["runqueues"];
    assert!(offset < end);
    assert_eq!(kernel.symbol("runqueues").unwrap().address, offset);
    let variable = kernel.variable("runqueues").unwrap().unwrap();
    assert_eq!(variable.address, Some(offset));
    for address in [kaslr, kaslr + offset, kaslr + end - 1, offset] {
        assert_eq!(kernel.symbolize(address), None, "{address:#x}");
        assert!(!kernel.contains(address), "{address:#x}");
    }
    // By its offset, a per-CPU variable is found, and nothing else is.
    let size = kernel.symbol("runqueues").unwrap().size;
    let named = |at: u64| {
        kernel
            .symbolize_offset(at)
            .map(|(s, off)| (s.name, s.address, off))
    };
    assert_eq!(named(offset), Some(("runqueues".into(), offset, 0)));
    assert_eq!(
        named(offset + size - 1),
        Some(("runqueues".into(), offset, size - 1))
    );
    assert_ne!(named(offset + size).map(|n| n.0), Some("runqueues".into()));
    for outside in [end + 0x1000, nm["schedule"], nm["schedule"] + kaslr] {
        assert_eq!(named(outside), None, "{outside:#x}");
    }

    // The rest of the kernel moves with the slide.
    let schedule = kernel.symbol("schedule").unwrap();
    assert_eq!(schedule.address, nm["schedule"] + kaslr);
    let mut set = ImageSet::new();
    set.push(kernel);
    let (_, symbol, at) = set.symbolize(schedule.address + 1).unwrap();
    assert_eq!((symbol.name.as_str(), at), ("schedule", 1));
    assert!(set.image_at(kaslr + offset).is_none());
}
