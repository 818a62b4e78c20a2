//! Drive every lazy path of an open dump: notes and their typed descriptors, VMCOREINFO,
//! physical and virtual reads at addresses taken from `seed_bytes`. Used by the mutation test
//! and the fuzz target; any panic is a bug, errors are expected.

use dumpfmt::{AddressSpace, Dump};

pub fn exercise(dump: &Dump, seed_bytes: &[u8]) {
    for note in dump.notes().flatten() {
        let _ = note.prstatus(dumpfmt::Machine::X86_64);
        let _ = note.prstatus(dumpfmt::Machine::Aarch64);
        let _ = note.prpsinfo();
        let _ = note.siginfo();
        let _ = note.file_mappings();
        let _ = note.qemu_cpu_state();
        let _ = note.auxv().count();
    }
    if let Ok(Some(linux)) = dump.linux_info() {
        let _ = (linux.kernel_root(), linux.kernel_image_map());
    }
    if let Ok(Some(info)) = dump.vmcoreinfo() {
        let _ = info.entries().count();
        let _ = info.phys_base();
        let _ = info.symbol("init_top_pgt");
    }
    let mut buf = [0u8; 64];
    let probes = seed_bytes
        .chunks_exact(8)
        .take(16)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()));
    for addr in probes.chain([0, 0x1000, 0x10_0000, u64::MAX - 8]) {
        let _ = dump.read_phys(addr, &mut buf);
        let _ = dump.read_phys(addr & 0xf_ffff, &mut buf);
        let _ = dump.read_dump_mapping(addr, &mut buf);
    }
    if let Ok(space) = AddressSpace::from_dump(dump) {
        let _ = space.read_virt(0xffff_ffff_8000_0000, &mut buf);
    }
}
