//! A real Linux kernel booted in QEMU until it panics, then dumped by QEMU as ELF with
//! paging=true (QEMU walks the guest page tables itself and writes the mappings as PT_LOADs), ELF
//! with paging=false, and kdump-zlib (flattened, and reassembled by makedumpfile). From the ELF,
//! makedumpfile writes kdump files with zlib (`-c`) and lzo (`-l`) pages at dump levels 31 and
//! 0, and a filtered ELF (`-E -d 31`). snappy and zstd pages: Debian's makedumpfile has both
//! compiled out, so the test re-encodes the real zlib pages of QEMU's kdump with the `snap` and
//! `zstd` (libzstd) encoders into kdump files of its own.
//!
//! When the kernel's qemu_fw_cfg module is at hand, a tiny static /init loads it (so that the
//! kernel hands QEMU its VMCOREINFO through `-device vmcoreinfo`) and crashes the kernel with
//! sysrq-c; otherwise the kernel panics for want of a root file system.
//!
//! Oracles: QEMU's own page-table walk (the paging=true PT_LOADs) for our x86_64 walker; the
//! serial console (the panic text must be in memory, the release and KASLR offset in
//! VMCOREINFO); and the formats against each other. The guest and its dumps, made once for all
//! these tests: tests/common/panicked_kernel.rs.

mod common;

use std::path::PathBuf;

use common::panicked_kernel::dumps;
use dumpfmt::translate::x86_64::X86_64;
use dumpfmt::translate::PageTableWalker;
use dumpfmt::{AddressSpace, Dump, Format, MissingReason, Source};
use kcrash_harness::tools;

const PANIC_TEXT: &str = "Kernel panic - not syncing: ";

const KERNEL_MAP: u64 = 0xffff_ffff_8000_0000;
const KERNEL_MAP_END: u64 = 0xffff_ffff_c000_0000;

#[test]
fn x86_64_walk_agrees_with_qemus_own_walk() {
    let Some(d) = dumps("x86_64_walk_agrees_with_qemus_own_walk") else {
        return;
    };
    let dump = Dump::open(&d.paging).unwrap();
    assert_eq!(dump.elf_machine(), Some(62));
    assert!(dump.has_virtual_mappings());
    // More PT_LOADs than e_phnum can hold: the count came from section header 0 (PN_XNUM).
    let segments = dump.segments();
    assert!(segments.len() > 0xffff, "{} segments", segments.len());

    let cpu = dump.qemu_cpu_states().next().unwrap().unwrap();
    assert!(cpu.paging());
    let walker = X86_64::new(cpu.la57());
    let step = segments.len() / 400;
    let sample = segments
        .iter()
        .step_by(step)
        .chain(segments.iter().filter(|s| s.memsz >= 1 << 21));
    let mut checked = 0;
    for seg in sample {
        for va in [
            seg.vaddr,
            seg.vaddr + ((seg.memsz / 2) & !7),
            seg.vaddr + seg.memsz - 1,
        ] {
            let m = walker
                .translate(&dump, cpu.cr3(), va)
                .unwrap_or_else(|e| panic!("{va:#x}: {e}"));
            assert_eq!(m.paddr, seg.paddr + (va - seg.vaddr), "va {va:#x}");
            checked += 1;
        }
    }
    assert!(checked > 1000);

    // The kernel text the console names is mapped, by QEMU and by us, to the same place.
    let text = 0xffff_ffff_8100_0000 + d.kernel_offset;
    let seg = segments
        .iter()
        .find(|s| s.vaddr <= text && text < s.vaddr + s.memsz)
        .expect("kernel text mapped");
    let m = walker.translate(&dump, cpu.cr3(), text).unwrap();
    assert_eq!(m.paddr, seg.paddr + (text - seg.vaddr));
    // Large pages: the kernel's direct map uses 2 MiB or 1 GiB pages.
    assert!(segments.iter().any(|s| s.memsz >= 1 << 21
        && walker
            .translate(&dump, cpu.cr3(), s.vaddr)
            .unwrap()
            .page_size
            > 4096));
}

#[test]
fn panic_registers_and_console_text_are_in_every_format() {
    let Some(d) = dumps("panic_registers_and_console_text_are_in_every_format") else {
        return;
    };
    let reference = Dump::open(&d.plain).unwrap();
    let needle = PANIC_TEXT.as_bytes();
    let find = |dump: &Dump| -> Vec<u64> {
        let mut hits = Vec::new();
        let mut chunk = vec![0u8; 1 << 20];
        for seg in reference.segments() {
            let mut at = seg.paddr;
            while at < seg.paddr + seg.memsz {
                let n = chunk.len().min((seg.paddr + seg.memsz - at) as usize);
                dump.read_phys(at, &mut chunk[..n])
                    .unwrap_or_else(|e| panic!("{e}"));
                hits.extend(find_all(&chunk[..n], needle).map(|i| at + i as u64));
                at += n as u64;
            }
        }
        hits
    };
    let expected = find(&reference);
    assert!(!expected.is_empty(), "the panic message is in guest memory");

    let cpu0 = reference.prstatus().next().unwrap().unwrap();
    let rip = cpu0.regs.pc();
    assert!(
        (KERNEL_MAP..KERNEL_MAP_END).contains(&rip),
        "rip {rip:#x} in kernel text"
    );
    for (path, format) in [(&d.flat, Format::KdumpFlattened), (&d.kdump, Format::Kdump)] {
        let dump = Dump::open(path).unwrap();
        assert_eq!(dump.format(), format);
        assert_eq!(find(&dump), expected, "{}", path.display());
        let cpu = dump.prstatus().next().unwrap().unwrap();
        assert_eq!(cpu.regs, cpu0.regs, "{}", path.display());
        assert_eq!(dump.qemu_cpu_states().next().unwrap().unwrap().rip, rip);
    }
    // paging=true describes only RAM that some page table maps; what it describes must agree.
    let paging = Dump::open(&d.paging).unwrap();
    assert_eq!(paging.prstatus().next().unwrap().unwrap().regs, cpu0.regs);
    let mut described = 0;
    for &hit in &expected {
        let mut buf = vec![0u8; needle.len()];
        match paging.read_phys(hit, &mut buf) {
            Ok(()) => {
                assert_eq!(buf, needle);
                described += 1;
            }
            Err(e) => assert_eq!(e.missing_reason(), Some(&MissingReason::Unmapped), "{e}"),
        }
    }
    assert!(described > 0, "the direct map covers the log buffer");
}

#[test]
fn virtual_reads_agree_between_dump_mappings_and_page_tables() {
    let Some(d) = dumps("virtual_reads_agree_between_dump_mappings_and_page_tables") else {
        return;
    };
    let paging = Dump::open(&d.paging).unwrap();
    let mut by_segments = AddressSpace::new(&paging);
    by_segments.push(Source::DumpMappings);
    let rip = paging.prstatus().next().unwrap().unwrap().regs.pc();
    let probes: Vec<u64> = [rip, 0xffff_ffff_8100_0000 + d.kernel_offset]
        .into_iter()
        .chain(
            paging
                .segments()
                .iter()
                .step_by(997)
                .map(|s| s.vaddr + s.memsz / 3),
        )
        .collect();
    let mut expected = Vec::new();
    for &va in &probes {
        let mut buf = [0u8; 256];
        by_segments
            .read_virt(va, &mut buf)
            .unwrap_or_else(|e| panic!("{e}"));
        expected.push(buf);
    }
    for path in [&d.plain, &d.kdump, &d.flat] {
        let dump = Dump::open(path).unwrap();
        let space = AddressSpace::from_dump(&dump).unwrap();
        // The kernel PGD from VMCOREINFO (when the guest provided it), the QEMU note's CR3, then
        // the kernel image mapping from VMCOREINFO.
        let sources = space.sources();
        if d.vmcoreinfo {
            assert!(
                matches!(
                    sources,
                    [
                        Source::PageTables { .. },
                        Source::PageTables { .. },
                        Source::Linear(_)
                    ]
                ),
                "{sources:?}"
            );
        } else {
            assert!(
                matches!(sources, [Source::PageTables { .. }]),
                "{sources:?}"
            );
        }
        for (va, want) in probes.iter().zip(&expected) {
            let mut buf = [0u8; 256];
            space
                .read_virt(*va, &mut buf)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(&buf, want, "{:#x} in {}", va, path.display());
        }
        // A hole in the kernel half: not mapped, and the error says which level stopped.
        let err = space
            .read_virt(0xffff_ff00_0000_0000, &mut [0u8; 8])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not present"), "{err}");
    }
}

fn find_all<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    hay.windows(needle.len())
        .enumerate()
        .filter(move |(_, w)| w[0] == needle[0] && *w == needle)
        .map(|(i, _)| i)
}

#[test]
fn vmcoreinfo_matches_the_console_and_locates_the_kernel_page_tables() {
    let test = "vmcoreinfo_matches_the_console_and_locates_the_kernel_page_tables";
    let Some(d) = dumps(test) else { return };
    if !d.vmcoreinfo {
        tools::not_run_here(
            test,
            "the guest could not load qemu_fw_cfg, so there is no VMCOREINFO",
        );
        return;
    }
    let elf = Dump::open(&d.plain).unwrap();
    let kdump = Dump::open(&d.kdump).unwrap();
    let flat = Dump::open(&d.flat).unwrap();
    let info = elf
        .vmcoreinfo()
        .unwrap()
        .expect("VMCOREINFO note in the ELF dump");
    // kdump keeps its own copy (offset_vmcoreinfo); it must be the same text.
    for other in [&kdump, &flat] {
        assert_eq!(
            other
                .vmcoreinfo()
                .unwrap()
                .expect("VMCOREINFO in kdump")
                .text(),
            info.text()
        );
    }
    assert_eq!(info.osrelease(), Some(d.release.as_str()));
    // Offsets in errors point at the line in the file.
    let bytes = std::fs::read(&d.plain).unwrap();
    for (key, value, at) in info.entries().step_by(7) {
        let line = format!("{key}={value}\n");
        assert_eq!(
            &bytes[at as usize..at as usize + line.len()],
            line.as_bytes()
        );
    }
    assert_eq!(info.page_size().unwrap(), Some(4096));
    assert_eq!(info.kernel_offset().unwrap(), Some(d.kernel_offset));
    assert_eq!(info.pgtable_l5_enabled().unwrap(), Some(false));

    // init_top_pgt is in the kernel image: pa = va - __START_KERNEL_map + phys_base. Walking from
    // there must agree with QEMU's walk for the kernel half.
    let pgd = info
        .symbol("init_top_pgt")
        .unwrap()
        .expect("SYMBOL(init_top_pgt)");
    let phys_base = info.phys_base().unwrap().expect("NUMBER(phys_base)");
    let root = (pgd - KERNEL_MAP).wrapping_add(phys_base as u64);
    let linux = elf.linux_info().unwrap().unwrap();
    assert_eq!(linux.kernel_root(), Some(root));
    let paging = Dump::open(&d.paging).unwrap();
    let walker = X86_64::new(false);
    let kernel_half: Vec<_> = paging
        .segments()
        .iter()
        .filter(|s| s.vaddr >= 0xffff_8000_0000_0000)
        .collect();
    for seg in kernel_half.iter().step_by(kernel_half.len() / 200 + 1) {
        let m = walker
            .translate(&elf, root, seg.vaddr)
            .unwrap_or_else(|e| panic!("{:#x}: {e}", seg.vaddr));
        assert_eq!(m.paddr, seg.paddr, "{:#x}", seg.vaddr);
    }
}

/// PFNs of guest RAM in QEMU's paging=false ELF: its segments below the PCI hole (it also
/// dumps the BIOS flash at 0xfffc0000, which is no RAM, and which makedumpfile leaves out).
fn ram_pages(reference: &Dump) -> Vec<u64> {
    reference
        .segments()
        .iter()
        .filter(|s| s.paddr + s.memsz <= 0xe000_0000)
        .flat_map(|s| (s.paddr / 4096)..(s.paddr + s.memsz).div_ceil(4096))
        .collect()
}

#[test]
fn qemu_7_2_elf_reads_as_written() {
    let test = "qemu_7_2_elf_reads_as_written";
    let Some(d) = dumps(test) else { return };
    let header = std::fs::read(&d.plain).unwrap()[..64].to_vec();
    let field16 = |at: usize| u16::from_le_bytes([header[at], header[at + 1]]);
    let phoff = u64::from_le_bytes(header[32..40].try_into().unwrap());
    let shoff = u64::from_le_bytes(header[40..48].try_into().unwrap());
    let version = std::process::Command::new("qemu-system-x86_64")
        .arg("--version")
        .output()
        .unwrap();
    if String::from_utf8_lossy(&version.stdout).contains("version 7.2") {
        // QEMU 7.2's layout: ELF header (claiming e_ehsize 8), section headers at 64, program
        // headers behind them at 192.
        assert_eq!((phoff, shoff, field16(52)), (192, 64, 8));
    } else {
        tools::not_run_here(test, "not QEMU 7.2: its ELF layout quirk was not checked");
    }
    let dump = Dump::open(&d.plain).unwrap();
    assert_eq!(dump.format(), Format::Elf);
    let ram = dump.segments().iter().find(|s| s.paddr == 0).unwrap();
    assert_eq!(ram.memsz, 256 << 20);
    assert!(dump.vmcoreinfo().unwrap().is_some() || !d.vmcoreinfo);
}

/// Every page of guest RAM in each makedumpfile output and re-encoded kdump equals the page in
/// QEMU's ELF, or, at dump level 31 only, is reported excluded ("not in dump"), which is not
/// the answer for memory the dump never had.
#[test]
fn makedumpfile_and_reencoded_pages_equal_the_elf() {
    let test = "makedumpfile_and_reencoded_pages_equal_the_elf";
    let Some(d) = dumps(test) else { return };
    let Some(derived) = &d.derived else {
        tools::not_run_here(
            test,
            "no VMCOREINFO in the guest, so makedumpfile cannot run",
        );
        return;
    };
    let reference = Dump::open(&d.plain).unwrap();
    let pfns = ram_pages(&reference);
    let mut cases: Vec<(String, &PathBuf, bool, u32)> = derived
        .kdumps
        .iter()
        .map(|(args, path)| {
            let status = if args.starts_with("-l") { 0x2 } else { 0x1 };
            (
                format!("makedumpfile {args}"),
                path,
                args.ends_with("31"),
                status,
            )
        })
        .collect();
    cases.push(("makedumpfile -E -d 31".into(), &derived.elf_d31, true, 0));
    cases.push((
        "zlib pages re-encoded as snappy".into(),
        &derived.snappy,
        false,
        0x4,
    ));
    cases.push((
        "zlib pages re-encoded as zstd".into(),
        &derived.zstd,
        false,
        0x20,
    ));
    let mut want = vec![0u8; 4096];
    let mut got = vec![0u8; 4096];
    for (name, path, filtered, status) in cases {
        let dump = Dump::open(path).unwrap();
        if let Some(h) = dump.kdump_header() {
            assert_eq!(h.status, status, "{name}: compression in the header");
        }
        let (mut same, mut excluded) = (0, 0);
        for &pfn in &pfns {
            reference.read_phys(pfn * 4096, &mut want).unwrap();
            match dump.read_phys(pfn * 4096, &mut got) {
                Ok(()) => {
                    assert!(want == got, "{name}: PFN {pfn:#x} differs");
                    same += 1;
                }
                Err(e) if filtered => {
                    assert_eq!(
                        e.missing_reason(),
                        Some(&MissingReason::Excluded),
                        "{name}: {e}"
                    );
                    assert!(e.to_string().contains("not in dump"), "{e}");
                    excluded += 1;
                }
                Err(e) => panic!("{name}: {e}"),
            }
        }
        eprintln!("{name}: {same} pages equal, {excluded} excluded");
        if filtered {
            assert!(
                excluded > 1000 && same > 1000,
                "{name}: {same} equal, {excluded} excluded"
            );
        }
        // Beyond guest RAM is another answer than "excluded".
        let beyond = dump.read_phys(0x2_0000_0000, &mut got).unwrap_err();
        assert_eq!(
            beyond.missing_reason(),
            Some(&MissingReason::Unmapped),
            "{name}"
        );
    }
    // makedumpfile -E marks excluded runs by p_filesz < p_memsz.
    let e = Dump::open(&derived.elf_d31).unwrap();
    let partial = e
        .segments()
        .iter()
        .find(|s| s.filesz < s.memsz)
        .expect("a segment whose tail was excluded");
    let tail = partial.paddr + partial.filesz;
    let err = e.read_phys(tail - 8, &mut [0u8; 16]).unwrap_err();
    assert!(
        matches!(err, dumpfmt::Error::Phys { addr, reason: MissingReason::Excluded, .. } if addr == tail),
        "{err}"
    );
}

/// The address space built from VMCOREINFO alone (as for a real machine's kdump, which has no
/// QEMU CPU notes) translates the kernel half as QEMU's own walk (the paging=true
/// PT_LOADs) and as a walk from the CR3 in QEMU's CPU note; the kernel image mapping agrees
/// for the kernel image; and init_top_pgt is System.map's address plus the KASLR offset.
#[test]
fn vmcoreinfo_address_space_translates_like_qemu_and_cr3() {
    let test = "vmcoreinfo_address_space_translates_like_qemu_and_cr3";
    let Some(d) = dumps(test) else { return };
    let Some(derived) = &d.derived else {
        tools::not_run_here(test, "no VMCOREINFO in the guest");
        return;
    };
    let paging = Dump::open(&d.paging).unwrap();
    let plain = Dump::open(&d.plain).unwrap();
    let cpu = plain.qemu_cpu_states().next().unwrap().unwrap();
    let cr3_walker = X86_64::new(cpu.la57());
    let kernel_half: Vec<_> = paging
        .segments()
        .iter()
        .filter(|s| s.vaddr >= 0xffff_8000_0000_0000)
        .collect();
    let in_image = |va: u64| (KERNEL_MAP..KERNEL_MAP_END).contains(&va);
    // makedumpfile -c -d 31 (kdump) and -E -d 31 (ELF).
    for path in [&derived.kdumps[0].1, &derived.elf_d31] {
        let dump = Dump::open(path).unwrap();
        let linux = dump.linux_info().unwrap().expect("VMCOREINFO");
        assert_eq!(linux.kernel_offset, Some(d.kernel_offset));
        assert_eq!(linux.osrelease.as_deref(), Some(d.release.as_str()));
        assert_eq!(linux.page_size, Some(4096));
        assert!(linux.build_id.as_ref().is_some_and(|b| b.len() == 40));
        // from_dump puts VMCOREINFO's tables first and its image mapping last (makedumpfile
        // copied QEMU's CPU notes too, so CR3 is in between); the checks use VMCOREINFO only.
        let root = linux.kernel_root().expect("init_top_pgt and phys_base");
        let from_dump = AddressSpace::from_dump(&dump).unwrap();
        match from_dump.sources() {
            [Source::PageTables { root: first, .. }, .., Source::Linear(map)] => {
                assert_eq!(*first, root);
                assert_eq!(Some(*map), linux.kernel_image_map());
            }
            other => panic!("{other:?}"),
        }
        let space = {
            let mut s = AddressSpace::new(&dump);
            s.push(Source::PageTables {
                walker: std::sync::Arc::new(linux.x86_64_walker()),
                root,
            });
            s
        };
        let image_only = {
            let mut s = AddressSpace::new(&dump);
            s.push(Source::Linear(linux.kernel_image_map().unwrap()));
            s
        };
        // Kernel data read through either: init_uts_ns's release is the console's.
        let info = dump.vmcoreinfo().unwrap().unwrap();
        let uts = info.symbol("init_uts_ns").unwrap().unwrap()
            + info.offset("uts_namespace.name").unwrap().unwrap();
        for s in [&space, &image_only] {
            let mut release = [0u8; 65];
            s.read_virt(uts + 2 * 65, &mut release).unwrap();
            let len = release.iter().position(|&b| b == 0).unwrap();
            assert_eq!(&release[..len], d.release.as_bytes());
        }
        let image: Vec<_> = kernel_half.iter().filter(|s| in_image(s.vaddr)).collect();
        let sample = kernel_half
            .iter()
            .step_by(kernel_half.len() / 300 + 1)
            .chain(image);
        let mut image_checked = 0;
        for seg in sample {
            // Segment ends, and every 64 KiB inside the kernel image's few big segments.
            let inner = (seg.vaddr..seg.vaddr + seg.memsz)
                .step_by(0x10000)
                .filter(|&va| in_image(va));
            for va in [seg.vaddr, seg.vaddr + seg.memsz - 8]
                .into_iter()
                .chain(inner)
            {
                let want = seg.paddr + (va - seg.vaddr);
                assert_eq!(
                    space.translate(va).unwrap(),
                    want,
                    "{va:#x} in {}",
                    path.display()
                );
                let by_cr3 = cr3_walker.translate(&plain, cpu.cr3(), va).unwrap();
                assert_eq!(by_cr3.paddr, want, "{va:#x} by CR3");
                if in_image(va) {
                    assert_eq!(image_only.translate(va).unwrap(), want, "{va:#x} image map");
                    image_checked += 1;
                }
            }
        }
        assert!(
            image_checked > 10,
            "{image_checked} image addresses checked"
        );
    }

    // The first page mapped at or above __START_KERNEL_map is the runtime _stext: how the KASLR
    // slide is found without VMCOREINFO (crash's way), from CR3 alone.
    let info = plain.linux_info().unwrap().unwrap();
    let first = cr3_walker
        .first_mapping(&plain, cpu.cr3(), KERNEL_MAP..KERNEL_MAP_END)
        .unwrap()
        .expect("kernel text mapped");
    let stext = plain
        .vmcoreinfo()
        .unwrap()
        .unwrap()
        .symbol("_stext")
        .unwrap()
        .unwrap();
    assert_eq!(first.vaddr, stext);
    assert_eq!(stext, 0xffff_ffff_8100_0000 + d.kernel_offset);
    let phys_base = info.phys_base.unwrap();
    assert_eq!(
        first.paddr,
        (first.vaddr - KERNEL_MAP).wrapping_add(phys_base as u64)
    );

    // The vmlinux with symbols (Debian's System.map is a stub pointing at the -dbg package):
    // its link-time init_top_pgt and _stext plus KERNELOFFSET are what VMCOREINFO says.
    let Some(vmlinux) = debug_vmlinux(&d.release) else {
        tools::not_run_here(
            test,
            "no debug vmlinux (set KCRASH_TEST_VMLINUX or install linux-image-*-dbg); \
             init_top_pgt not checked against its symbols",
        );
        return;
    };
    common::tool("nm", "binutils", test).expect("nm");
    let nm = std::process::Command::new("nm")
        .arg(&vmlinux)
        .output()
        .unwrap();
    let symbols = String::from_utf8_lossy(&nm.stdout);
    let linked = |name: &str| {
        symbols
            .lines()
            .find_map(|l| {
                let mut f = l.split_whitespace();
                let (addr, _, sym) = (f.next()?, f.next()?, f.next()?);
                (sym == name).then(|| u64::from_str_radix(addr, 16).ok())?
            })
            .unwrap_or_else(|| panic!("{name} in {}", vmlinux.display()))
    };
    assert_eq!(
        info.init_top_pgt,
        Some(linked("init_top_pgt") + d.kernel_offset)
    );
    assert_eq!(stext, linked("_stext") + d.kernel_offset);
}

/// `$KCRASH_TEST_VMLINUX`, else where Debian's linux-image-*-dbg installs it.
fn debug_vmlinux(release: &str) -> Option<PathBuf> {
    std::env::var_os("KCRASH_TEST_VMLINUX")
        .map(PathBuf::from)
        .or_else(|| {
            Some(PathBuf::from(format!(
                "/usr/lib/debug/boot/vmlinux-{release}"
            )))
        })
        .filter(|p| p.is_file())
}
