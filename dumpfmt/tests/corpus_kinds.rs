//! Kernel dumps and process cores told apart on the corpus's real dumps, including QEMU's
//! paging=true dump of a kernel that maps everything from physical address 0 (so every PT_LOAD
//! has p_paddr 0, as a process core's do).

use kcrash_harness::corpus::file as corpus;

#[test]
fn qemu_dumps_are_kernel_dumps_and_cores_are_process_cores() {
    for kernel in [
        "bare/rings/vmcore-paging.elf.gz",
        "bare/rings/vmcore.elf.gz",
        "bare/rings/vmcore.kdump",
    ] {
        let dump = dumpfmt::Dump::open(corpus(kernel)).unwrap();
        assert!(!dump.is_process_core(), "{kernel}");
    }
    let paging = dumpfmt::Dump::open(corpus("bare/rings/vmcore-paging.elf.gz")).unwrap();
    assert!(
        paging.segments().iter().all(|s| s.paddr == 0),
        "the case this test is about"
    );
    for core in [
        "hosted/rings/core.gz",
        "hosted/rings-gcore/core.gz",
        "hosted-c/rings/core.gz",
    ] {
        let dump = dumpfmt::Dump::open(corpus(core)).unwrap();
        assert!(dump.is_process_core(), "{core}");
    }
}
