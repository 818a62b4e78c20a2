//! Open time, random 8-byte reads and sequential 4 KiB reads on real QEMU dumps (ELF,
//! kdump-zlib flattened, and makedumpfile -R's plain kdump) of a 128 MiB guest whose RAM holds
//! 32 MiB of compressible text and 8 MiB of random bytes.
//!
//! The dumps are made here with QEMU; set DUMPFMT_BENCH_DIR to a directory holding
//! guest.elf, guest.kdump-flat and guest.kdump made by an earlier run to skip that.
//! Comparison: the same reads as plain copies out of a Vec (the ceiling for any reader).

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dumpfmt::translate::x86_64::X86_64;
use dumpfmt::{AddressSpace, Dump, LinearMap, Source};
use kcrash_harness::makedumpfile;

const MEM_MIB: u64 = 128;
const TEXT_AT: u64 = 0x100_0000;
const TEXT_LEN: usize = 32 << 20;
const RANDOM_AT: u64 = 0x300_0000;
const RANDOM_LEN: usize = 8 << 20;
const TABLES_AT: u64 = 0x700_0000;
/// Mapped onto TEXT_AT by 2 MiB pages in the guest page tables loaded at TABLES_AT.
const KERNEL_VA: u64 = 0xffff_ffff_8000_0000;
/// Window for "cached" random reads: well inside the 8 MiB page cache.
const HOT_LEN: u64 = 2 << 20;
const READS: usize = 4096;

/// PML4 → PDPT → PD with 2 MiB pages mapping KERNEL_VA.. onto the text.
fn page_tables() -> Vec<u8> {
    let mut blob = vec![0u8; 3 * 4096];
    let mut set = |table: usize, index: u64, entry: u64| {
        let at = table * 4096 + index as usize * 8;
        blob[at..at + 8].copy_from_slice(&entry.to_le_bytes());
    };
    set(0, (KERNEL_VA >> 39) & 0x1ff, (TABLES_AT + 0x1000) | 3);
    set(1, (KERNEL_VA >> 30) & 0x1ff, (TABLES_AT + 0x2000) | 3);
    for i in 0..(TEXT_LEN as u64 >> 21) {
        set(
            2,
            ((KERNEL_VA >> 21) & 0x1ff) + i,
            (TEXT_AT + (i << 21)) | 0x83,
        );
    }
    blob
}

fn make_dumps() -> Option<(Option<tempfile::TempDir>, PathBuf)> {
    if let Some(dir) = std::env::var_os("DUMPFMT_BENCH_DIR") {
        return Some((None, PathBuf::from(dir)));
    }
    common::tool("qemu-system-x86_64", "qemu-system-x86", "read benchmark")?;
    common::tool("makedumpfile", "makedumpfile", "read benchmark")?;
    let dir = tempfile::tempdir().ok()?;
    let p = dir.path();
    let files = [
        ("text.bin", common::text_bytes(TEXT_LEN), TEXT_AT),
        ("random.bin", common::random_bytes(RANDOM_LEN, 7), RANDOM_AT),
        ("tables.bin", page_tables(), TABLES_AT),
    ];
    let mut loads = Vec::new();
    for (name, bytes, addr) in &files {
        std::fs::write(p.join(name), bytes).ok()?;
        loads.push((p.join(name), *addr));
    }
    let loads: Vec<(&Path, u64)> = loads.iter().map(|(f, a)| (f.as_path(), *a)).collect();
    {
        let mut guest = common::QemuGuest::start(p, MEM_MIB as u32, &loads);
        guest.dump(&p.join("guest.elf"), "elf", false);
        guest.dump(&p.join("guest.kdump-flat"), "kdump-zlib", false);
    }
    makedumpfile::unflatten(&p.join("guest.kdump-flat"), &p.join("guest.kdump")).unwrap();
    let path = p.to_path_buf();
    Some((Some(dir), path))
}

fn offsets(len: u64, seed: u64) -> Vec<u64> {
    common::random_bytes(READS * 8, seed)
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()) % (len - 8))
        .collect()
}

fn bench(c: &mut Criterion) {
    let Some((_keep, dir)) = make_dumps() else {
        return;
    };
    let names = ["guest.elf", "guest.kdump", "guest.kdump-flat"];

    let mut open = c.benchmark_group("open");
    for name in names {
        let path = dir.join(name);
        open.bench_function(name, |b| b.iter(|| Dump::open(&path).unwrap()));
    }
    open.finish();

    let hot = offsets(HOT_LEN, 1);
    let cold = offsets(TEXT_LEN as u64, 2);
    let baseline = common::text_bytes(TEXT_LEN);

    let mut random = c.benchmark_group("random_8_byte_reads");
    random.throughput(Throughput::Elements(READS as u64));
    random.bench_function("baseline_vec_copy", |b| {
        b.iter(|| {
            let mut buf = [0u8; 8];
            for &o in &hot {
                buf.copy_from_slice(&baseline[o as usize..o as usize + 8]);
                std::hint::black_box(&buf);
            }
        })
    });
    for name in names {
        let dump = Dump::open(dir.join(name)).unwrap();
        let linear = {
            let mut s = AddressSpace::new(&dump);
            s.push(Source::Linear(LinearMap {
                virt_start: KERNEL_VA,
                len: TEXT_LEN as u64,
                phys_start: TEXT_AT,
            }));
            s
        };
        let walked = {
            let mut s = AddressSpace::new(&dump);
            s.push(Source::PageTables {
                walker: Arc::new(X86_64::new(false)),
                root: TABLES_AT,
            });
            s
        };
        let mut buf = [0u8; 8];
        random.bench_function(BenchmarkId::new("phys_hot", name), |b| {
            b.iter(|| {
                for &o in &hot {
                    dump.read_phys(TEXT_AT + o, &mut buf).unwrap();
                }
            })
        });
        random.bench_function(BenchmarkId::new("virt_linear_hot", name), |b| {
            b.iter(|| {
                for &o in &hot {
                    linear.read_virt(KERNEL_VA + o, &mut buf).unwrap();
                }
            })
        });
        random.bench_function(BenchmarkId::new("virt_pagetables_hot", name), |b| {
            b.iter(|| {
                for &o in &hot {
                    walked.read_virt(KERNEL_VA + o, &mut buf).unwrap();
                }
            })
        });
        random.bench_function(BenchmarkId::new("phys_cold_32MiB", name), |b| {
            b.iter(|| {
                for &o in &cold {
                    dump.read_phys(TEXT_AT + o, &mut buf).unwrap();
                }
            })
        });
    }
    random.finish();

    let mut seq = c.benchmark_group("sequential_4k_reads");
    seq.sample_size(10);
    for name in names {
        let dump = Dump::open(dir.join(name)).unwrap();
        let mut page = vec![0u8; 4096];
        seq.throughput(Throughput::Bytes(TEXT_LEN as u64));
        seq.bench_function(BenchmarkId::new("text_32MiB", name), |b| {
            b.iter(|| {
                for off in (0..TEXT_LEN as u64).step_by(4096) {
                    dump.read_phys(TEXT_AT + off, &mut page).unwrap();
                }
            })
        });
        seq.throughput(Throughput::Bytes(RANDOM_LEN as u64));
        seq.bench_function(BenchmarkId::new("random_8MiB", name), |b| {
            b.iter(|| {
                for off in (0..RANDOM_LEN as u64).step_by(4096) {
                    dump.read_phys(RANDOM_AT + off, &mut page).unwrap();
                }
            })
        });
    }
    seq.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
