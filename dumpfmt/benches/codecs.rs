//! Page decoding throughput of each kdump compression on the same real pages: a Linux kernel
//! (Debian's 6.1, `$KCRASH_TEST_VMLINUZ` or the newest /boot/vmlinuz-*) booted under QEMU with
//! 256 MiB until it panics, dumped as ELF; makedumpfile `-c -d 0` (zlib) and `-l -d 0` (lzo)
//! of that ELF; and the zlib file's pages re-encoded as snappy (`snap`) and zstd (libzstd
//! level 1, as makedumpfile calls it), since Debian's makedumpfile has both compiled out.
//!
//! Each iteration reads every non-zero page of guest RAM once, in address order, through
//! `Dump::read_phys`: far more pages than the 8 MiB page cache holds, so every read decodes.
//! Comparison: zlib pages of the same dump (the common case), and the ELF (plain copies, the
//! ceiling). Set DUMPFMT_CODEC_BENCH_DIR to a directory of an earlier run's files to skip the
//! boot.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dumpfmt::Dump;
use kcrash_harness::makedumpfile;

const FILES: [(&str, &str); 5] = [
    ("elf", "guest.elf"),
    ("zlib", "zlib.kdump"),
    ("lzo", "lzo.kdump"),
    ("snappy", "snappy.kdump"),
    ("zstd", "zstd.kdump"),
];

fn make_dumps() -> Option<(Option<tempfile::TempDir>, PathBuf)> {
    if let Some(dir) = std::env::var_os("DUMPFMT_CODEC_BENCH_DIR") {
        return Some((None, PathBuf::from(dir)));
    }
    let test = "codec benchmark";
    common::tool("qemu-system-x86_64", "qemu-system-x86", test)?;
    common::tool("makedumpfile", "makedumpfile", test)?;
    let kernel = common::kernel_image(test)?;
    let dir = tempfile::tempdir().ok()?;
    let p = dir.path();
    let mut panicked = common::panicked_kernel::boot_until_panic(p, &kernel);
    if !panicked.vmcoreinfo {
        kcrash_harness::tools::not_run_here(
            test,
            "no VMCOREINFO in the guest, so makedumpfile cannot run",
        );
        return None;
    }
    panicked.guest.dump(&p.join("guest.elf"), "elf", false);
    drop(panicked);
    let input = p.join("for-makedumpfile.elf");
    makedumpfile::elf_for_makedumpfile(&p.join("guest.elf"), &input).unwrap();
    makedumpfile::run(&["-c", "-d", "0"], &input, &p.join("zlib.kdump")).unwrap();
    makedumpfile::run(&["-l", "-d", "0"], &input, &p.join("lzo.kdump")).unwrap();
    let zlib = p.join("zlib.kdump");
    common::panicked_kernel::reencode(&zlib, &p.join("snappy.kdump"), 0x4, |page| {
        snap::raw::Encoder::new().compress_vec(page).unwrap()
    });
    common::panicked_kernel::reencode(&zlib, &p.join("zstd.kdump"), 0x20, |page| {
        zstd::bulk::compress(page, 1).unwrap()
    });
    let path = p.to_path_buf();
    Some((Some(dir), path))
}

fn bench(c: &mut Criterion) {
    let Some((_keep, dir)) = make_dumps() else {
        return;
    };
    let elf = Dump::open(dir.join("guest.elf")).unwrap();
    let mut page = vec![0u8; 4096];
    let pfns: Vec<u64> = elf
        .segments()
        .iter()
        .filter(|s| s.paddr + s.memsz <= 0xe000_0000)
        .flat_map(|s| (s.paddr / 4096)..(s.paddr + s.memsz) / 4096)
        .filter(|&pfn| {
            elf.read_phys(pfn * 4096, &mut page).unwrap();
            page.iter().any(|&b| b != 0)
        })
        .collect();
    eprintln!(
        "codec benchmark: {} non-zero pages ({} MiB)",
        pfns.len(),
        pfns.len() / 256
    );
    let mut group = c.benchmark_group("decode_nonzero_pages");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(pfns.len() as u64 * 4096));
    for (name, file) in FILES {
        let dump = Dump::open(dir.join(file)).unwrap();
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                for &pfn in &pfns {
                    dump.read_phys(pfn * 4096, &mut page).unwrap();
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
