//! The corpus's real dumps: kernel dumps and process cores told apart, and the same dump read
//! from its file and from bytes in memory.

use std::io::Read;

use dumpfmt::Dump;
use kcrash_harness::corpus::file as corpus;

#[path = "common/broken.rs"]
mod broken;

/// Including QEMU's paging=true dump of a kernel that maps everything from physical address 0
/// (so every PT_LOAD has p_paddr 0, as a process core's do).
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

/// Every 64 KiB of what `dump` holds (its segments, or a kdump's PFN range, and past it) read
/// physically and through its own mappings: the bytes, or the error's text.
fn sample_reads(dump: &Dump) -> Vec<Result<Vec<u8>, String>> {
    const STEP: u64 = 0x1_0000;
    let ranges: Vec<(u64, u64)> = match dump.kdump_header() {
        Some(h) => vec![(0, (h.max_mapnr + 1) * h.block_size)],
        None => dump
            .segments()
            .iter()
            .flat_map(|s| [(s.paddr, s.memsz + STEP), (s.vaddr, s.memsz + STEP)])
            .collect(),
    };
    let mut reads = Vec::new();
    for (start, len) in ranges {
        for addr in (start..start.saturating_add(len)).step_by(STEP as usize) {
            let mut buf = vec![0u8; 4096];
            reads.push(
                dump.read_phys(addr, &mut buf)
                    .map(|_| buf.clone())
                    .map_err(|e| e.to_string()),
            );
            reads.push(
                dump.read_dump_mapping(addr, &mut buf)
                    .map(|n| buf[..n].to_vec())
                    .map_err(|e| e.to_string()),
            );
        }
    }
    reads
}

#[test]
fn bytes_in_memory_read_as_the_file_does() {
    for rel in [
        "bare/rings/vmcore.elf.gz",
        "bare/rings/vmcore-paging.elf.gz",
        "bare/rings/vmcore.kdump",
        "bare/rings/vmcore.kdump-flat.gz",
        "hosted/rings/core.gz",
    ] {
        let path = corpus(rel);
        let from_file = Dump::open(&path).unwrap();
        let file_bytes = std::fs::read(&path).unwrap();
        let mut inflated = Vec::new();
        let bytes = if from_file.was_gzipped() {
            flate2::read::GzDecoder::new(&file_bytes[..])
                .read_to_end(&mut inflated)
                .unwrap();
            vec![(file_bytes, true), (inflated, false)]
        } else {
            vec![(file_bytes, false)]
        };
        let plain = bytes.last().map(|(b, _)| b.clone()).unwrap_or_default();
        // The same dump with 64 MiB of zeros behind it in its gzip stream.
        let bomb = broken::gzip_with_zeros(&plain, 64);
        let mut bytes: Vec<(Vec<u8>, bool, bool)> =
            bytes.into_iter().map(|(b, gz)| (b, gz, false)).collect();
        bytes.push((bomb, true, true));
        let expected = sample_reads(&from_file);
        assert!(
            expected.iter().filter(|r| r.is_ok()).count() > 16,
            "{rel}: too few reads to compare"
        );
        for (bytes, gzipped, bomb) in bytes {
            // Named as the file, so that errors read alike.
            let written = broken::written_by_this_thread();
            let from_bytes = Dump::from_bytes(&path, bytes).unwrap();
            let written = broken::written_by_this_thread() - written;
            if bomb {
                // Inflated as far as the headers claim: an ELF core or a flattened stream to
                // its very end; a kdump's claim (max_mapnr pages) can reach into the zeros.
                let len = plain.len() as u64;
                if from_file.format() == dumpfmt::Format::Kdump {
                    assert!(
                        from_bytes.gzip_stopped_at().is_none_or(|end| end >= len),
                        "{rel}"
                    );
                } else {
                    assert_eq!(from_bytes.gzip_stopped_at(), Some(len), "{rel}");
                    assert!(written < len + (1 << 20), "{rel}: {written} bytes written");
                }
            } else {
                assert_eq!(from_bytes.gzip_stopped_at(), None, "{rel}");
            }
            assert_eq!(from_bytes.path(), path);
            assert_eq!(from_bytes.was_gzipped(), gzipped, "{rel}");
            assert_eq!(from_bytes.format(), from_file.format(), "{rel}");
            assert_eq!(from_bytes.segments(), from_file.segments(), "{rel}");
            assert_eq!(from_bytes.kdump_header(), from_file.kdump_header(), "{rel}");
            let notes = |d: &Dump| {
                d.notes()
                    .map(|n| n.map(|n| n.desc.to_vec()).map_err(|e| e.to_string()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(notes(&from_bytes), notes(&from_file), "{rel}");
            assert_eq!(
                sample_reads(&from_bytes),
                expected,
                "{rel} (gzipped: {gzipped})"
            );
        }
    }
}

/// `Dump::search` finds exactly what a byte-by-byte look at the same memory finds: every place
/// of a pattern that recurs across the bare kernel's memory (its records' KLOG headers, at
/// 8-byte alignment), in an ELF dump (4 MiB windows), the same dump given as bytes (nothing to
/// give back), and a kdump file (page by page); and a process core's matches are virtual.
#[test]
fn search_finds_what_reading_every_byte_finds() {
    let needle = &klog_header()[2..];
    let mut elf_bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(corpus("bare/rings/vmcore.elf.gz")).unwrap())
        .read_to_end(&mut elf_bytes)
        .unwrap();
    let dumps = [
        Dump::open(corpus("bare/rings/vmcore.elf.gz")).unwrap(),
        Dump::from_bytes("vmcore.elf", elf_bytes).unwrap(),
        Dump::open(corpus("bare/rings/vmcore.kdump")).unwrap(),
    ];
    let mut all = Vec::new();
    for dump in &dumps {
        let mut found = Vec::new();
        let searched = dump.search(needle, 2, &mut |at| {
            found.push(at);
            std::ops::ControlFlow::Continue(())
        });
        assert!(!searched.virtual_addresses);
        assert!(searched.bytes >= 32 << 20, "{searched:?}");
        // The same memory read whole, 1 MiB at a time with the needle's overlap.
        let mut want = Vec::new();
        let mut buf = vec![0u8; (1 << 20) + needle.len()];
        for start in (0..32u64 << 20).step_by(1 << 20) {
            if dump.read_phys(start, &mut buf).is_err() {
                continue;
            }
            for i in 0..1 << 20 {
                if buf[i..i + needle.len()] == *needle && (start + i as u64) % 2 == 0 {
                    want.push(start + i as u64);
                }
            }
        }
        assert!(want.len() > 500, "the rings' records are there");
        assert_eq!(found, want);
        all.push(found);
    }
    // Stopping early stops.
    let mut n = 0;
    dumps[0].search(needle, 2, &mut |_| {
        n += 1;
        std::ops::ControlFlow::Break(())
    });
    assert_eq!(n, 1);
    let core = Dump::open(corpus("hosted/rings/core.gz")).unwrap();
    let mut first = None;
    let searched = core.search(needle, 2, &mut |at| {
        first = Some(at);
        std::ops::ControlFlow::Break(())
    });
    assert!(searched.virtual_addresses);
    let mut got = [0u8; 6];
    assert_eq!(core.read_dump_mapping(first.unwrap(), &mut got).unwrap(), 6);
    assert_eq!(&got, needle);
}

/// A KLOG record header of subsystem 0: "KLOG", record size 8.
fn klog_header() -> [u8; 8] {
    ((0x4B4C_4F47u64 << 32) | (8 << 16)).to_le_bytes()
}
