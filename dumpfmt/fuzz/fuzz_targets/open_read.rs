//! Open arbitrary bytes as a dump and exercise every lazy path: notes and their typed
//! descriptors, VMCOREINFO, physical reads, virtual reads. Any panic is a bug.
//!
//! Run: `cd dumpfmt/fuzz && cargo +nightly fuzz run open_read`

#![no_main]

use std::io::Write;

use dumpfmt::{AddressSpace, Dump};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut file = tempfile_in_shm();
    file.as_file_mut().write_all(data).unwrap();
    let Ok(dump) = Dump::open(file.path()) else { return };
    for note in dump.notes().flatten() {
        let _ = note.prstatus();
        let _ = note.prpsinfo();
        let _ = note.siginfo();
        let _ = note.file_mappings();
        let _ = note.qemu_cpu_state();
        let _ = note.auxv().count();
    }
    if let Ok(Some(info)) = dump.vmcoreinfo() {
        let _ = info.entries().count();
        let _ = info.phys_base();
        let _ = info.symbol("init_top_pgt");
    }
    let mut buf = [0u8; 64];
    let probes = data.chunks_exact(8).take(16).map(|c| u64::from_le_bytes(c.try_into().unwrap()));
    for addr in probes.chain([0, 0x1000, 0x10_0000]) {
        let _ = dump.read_phys(addr, &mut buf);
        let _ = dump.read_phys(addr & 0xffff_ffff, &mut buf);
    }
    if let Ok(space) = AddressSpace::from_dump(&dump) {
        let _ = space.read_virt(0xffff_ffff_8000_0000, &mut buf);
    }
});

fn tempfile_in_shm() -> tempfile::NamedTempFile {
    tempfile::NamedTempFile::new_in("/dev/shm").or_else(|_| tempfile::NamedTempFile::new()).unwrap()
}
