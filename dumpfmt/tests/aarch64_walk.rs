//! arm64 kernels' dumps as QEMU writes them (ELF and kdump-zlib of Debian's arm64 kernel, the
//! harness's `linux-arm64` output, $KCRASH_LINUX_ARM64 or CI's default): the machine is told from
//! the file, and the walk of the kernel's tables agrees with the kernel's own arithmetic from
//! VMCOREINFO — the image's `swapper_pg_dir` and `_stext` at `va - kimage_voffset`, the
//! linear-map address `SYMBOL(mem_section)` at `(va & ~PAGE_OFFSET) + PHYS_OFFSET`.

use dumpfmt::{AddressSpace, Dump, Machine, Regs};

#[test]
fn the_kernels_tables_walk_as_its_own_arithmetic_says() {
    let test = "the_kernels_tables_walk_as_its_own_arithmetic_says";
    let Some((_, dumps)) = kcrash_harness::linux::arm64::guest_dumps(test) else {
        return;
    };
    for path in dumps {
        let dump = Dump::open(&path).unwrap();
        assert_eq!(dump.machine(), Machine::Aarch64, "{}", path.display());
        let info = dump.vmcoreinfo().unwrap().unwrap();
        let number = |key: &str| info.number(key).unwrap().unwrap() as u64;
        let symbol = |name: &str| info.symbol(name).unwrap().unwrap();
        let space = AddressSpace::from_dump(&dump).unwrap();
        let kimage_voffset = number("kimage_voffset");
        for name in ["swapper_pg_dir", "_stext"] {
            let va = symbol(name);
            assert_eq!(
                space.translate(va).unwrap(),
                va.wrapping_sub(kimage_voffset),
                "{}: {name} at {va:#x}",
                path.display()
            );
        }
        // SYMBOL(mem_section) is the array's address in the linear map (sparsemem's roots).
        let linear = symbol("mem_section");
        let page_offset = (!0u64) << number("VA_BITS");
        let want = (linear & !page_offset).wrapping_add(number("PHYS_OFFSET"));
        assert_eq!(space.translate(linear).unwrap(), want, "{}", path.display());
        // A page of the linear map reads as the same physical page.
        let (mut by_va, mut by_pa) = ([0u8; 64], [0u8; 64]);
        space.read_virt(linear, &mut by_va).unwrap();
        dump.read_phys(want, &mut by_pa).unwrap();
        assert_eq!(by_va, by_pa);
        // Every CPU's registers are arm64's, and the panicking one stopped in the kernel.
        let cpus: Vec<_> = dump.prstatus().map(Result::unwrap).collect();
        assert!(!cpus.is_empty(), "{}: no NT_PRSTATUS", path.display());
        for cpu in &cpus {
            assert!(matches!(cpu.regs, Regs::Aarch64(_)));
            assert_eq!(
                cpu.regs.pc() >> 48,
                0xffff,
                "{}: pc {:#x}",
                path.display(),
                cpu.regs.pc()
            );
        }
        eprintln!(
            "{}: {} CPUs, linear {linear:#x} -> {want:#x}",
            path.display(),
            cpus.len()
        );
    }
}
