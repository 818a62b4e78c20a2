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
