//! The KASLR offset kcrash finds in the Linux guest's dumps is the one the kernel printed when
//! it panicked, by every way of finding it: VMCOREINFO, the CPUs' page tables (CR3), and a scan
//! for the banner; and a dump without VMCOREINFO still finds it. Setup: tests/common/linux.rs.

use crate::common;
use dumpfmt::translate::x86_64::X86_64;
use dumpfmt::translate::{AddressSpace, Source};
use dumpfmt::Dump;
use kcrash::linux::kaslr::{self, Found};

use common::linux::{console_kaslr, guest, kcrash, DUMPS_AND_CONSOLE};
use kcrash_harness::run::stdout;
use symbols::Image;

#[test]
fn kaslr_offset_is_the_one_the_kernel_printed_by_every_way_of_finding_it() {
    let Some(dir) = guest("kaslr_offset", &DUMPS_AND_CONSOLE) else {
        return;
    };
    let want = console_kaslr(&dir);
    for dump in ["vmcore.elf", "vmcore.kdump"] {
        let out = kcrash(&dir, dump, &["sys"]);
        let text = stdout(&out, dump);
        assert!(
            text.contains(&format!(
                "KASLR offset {want:#x}, from VMCOREINFO KERNELOFFSET"
            )),
            "{dump}: {text}"
        );
    }
    let dump = Dump::open(dir.join("vmcore.elf")).expect("dump");
    let image = Image::open(dir.join("vmlinux")).expect("vmlinux");
    // Through the CPU's CR3 only, as for a dump without VMCOREINFO.
    let mut space = AddressSpace::new(&dump);
    let cr3 = dump
        .qemu_cpu_states()
        .map(|c| c.expect("cpu note"))
        .find(|c| c.paging())
        .expect("a CPU with paging on")
        .cr3();
    space.push(Source::PageTables {
        walker: std::sync::Arc::new(X86_64::new(false)),
        root: X86_64::cr3_root(cr3),
    });
    let (offset, found) = kaslr::search(&dump, &mut space, &image).expect("found through CR3");
    assert_eq!(
        (offset, found),
        (want, Found::Banner("the CPUs' page tables (CR3)"))
    );
    // Through nothing: the banner in physical memory gives init_top_pgt.
    for name in ["vmcore.elf", "vmcore.kdump"] {
        let dump = Dump::open(dir.join(name)).expect("dump");
        let mut space = AddressSpace::new(&dump);
        let (offset, found) = kaslr::search(&dump, &mut space, &image).expect("found by scan");
        assert_eq!(offset, want, "{name}");
        assert!(matches!(found, Found::Banner(t) if t.starts_with("init_top_pgt")));
    }
}

#[test]
fn a_dump_without_vmcoreinfo_finds_its_kaslr_offset_through_the_cpus_page_tables() {
    let Some(dir) = guest(
        "no_vmcoreinfo",
        &[
            "vmcore-novmcoreinfo.elf",
            "console-novmcoreinfo.log",
            "vmlinux",
        ],
    ) else {
        return;
    };
    let console = std::fs::read_to_string(dir.join("console-novmcoreinfo.log")).expect("console");
    let want = console
        .split("Kernel Offset: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the panic printed the kernel offset");
    let out = kcrash(
        &dir,
        "vmcore-novmcoreinfo.elf",
        &["sys", "p init_task.comm"],
    );
    let text = stdout(&out, "no VMCOREINFO");
    // The release comes from the banner then; the console's banner names it too.
    let release = console
        .split("Linux version ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the console's banner");
    assert!(
        text.contains(&format!(
            "Linux {release}: KASLR offset {want}, from the image's linux_banner found in the dump through the \
             CPUs' page tables (CR3)"
        )),
        "{text}"
    );
    assert!(
        text.ends_with("\"swapper/0\\000\\000\\000\\000\\000\\000\"\n"),
        "{text}"
    );
}
