//! Time to open an image and resolve one global variable with its full type (every type it
//! reaches, as `ptype` shows it), cold: a new `Image` each iteration, so the name index is
//! built every time. And the same lookup on an image whose index is already built.
//!
//! Input: `SYMBOLS_BENCH_ELF=FILE SYMBOLS_BENCH_VAR=NAME cargo bench -p symbols`. Without them,
//! the Rust test fixture is built with rustc and its `KLOGS` is looked up.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;

use criterion::{criterion_group, criterion_main, Criterion};
use symbols::{Image, TypeId};

fn input() -> (PathBuf, String, Option<tempfile::TempDir>) {
    if let (Ok(file), Ok(var)) = (
        std::env::var("SYMBOLS_BENCH_ELF"),
        std::env::var("SYMBOLS_BENCH_VAR"),
    ) {
        return (file.into(), var, None);
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("klog_fixture");
    let status = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args([
            "--edition",
            "2021",
            "-C",
            "debuginfo=2",
            "--crate-name",
            "klog_fixture",
        ])
        .arg("-o")
        .arg(&out)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/rust_fixture.rs"
        ))
        .status()
        .expect("rustc runs");
    assert!(status.success(), "building the fixture failed");
    (out, "KLOGS".into(), Some(dir))
}

/// Resolves `name` and every type reachable from its type; returns how many types.
fn resolve(image: &Image, name: &str) -> usize {
    let variable = image
        .variable(name)
        .expect("lookup works")
        .expect("the variable exists");
    let mut seen = HashSet::new();
    let mut todo: Vec<TypeId> = variable.ty.into_iter().collect();
    while let Some(id) = todo.pop() {
        if seen.insert(id) {
            image.type_name(id).expect("type name");
            image.size_of(id).expect("size");
            todo.extend(image.type_(id).expect("type").references());
        }
    }
    seen.len()
}

fn bench(c: &mut Criterion) {
    let (file, name, _dir) = input();
    let mut group = c.benchmark_group("lookup");
    group.sample_size(20);
    group.bench_function("open and resolve with full type (cold)", |b| {
        b.iter(|| resolve(&Image::open(&file).expect("opens"), &name))
    });
    let image = Image::open(&file).expect("opens");
    resolve(&image, &name);
    group.bench_function("resolve with full type (index built)", |b| {
        b.iter(|| resolve(&image, &name))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
