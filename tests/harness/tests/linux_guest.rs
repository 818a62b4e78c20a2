//! The Linux guest's output (`kcrash-harness linux`, tests/kernels/linux) checked on its own,
//! independently of kcrash: the oracle derives again from the console, says what the module's
//! scenario promises, and agrees with the module's own addresses; the console has the panic
//! and the kernel offset; every dump is what guest.toml says and dumpfmt opens it; and every
//! held record's 64 bytes are in the physical memory of QEMU's ELF dumps.
//!
//! Reads the directory named by KCRASH_LINUX_GUEST (.ci/run runs the pipeline and sets it).
//! Without it the test says NOT RUN, or fails under KCRASH_REQUIRE_TOOLS=1.

use kcrash_harness::expected::{Expected, RecordDamage};
use kcrash_harness::linux::guest::{self, ConsoleFacts};
use kcrash_harness::linux::GuestManifest;
use kcrash_harness::{dump::Magic, oracle, tools};
use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

const GUEST_ENV: &str = "KCRASH_LINUX_GUEST";

fn guest_dir(test: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(GUEST_ENV) {
        return Some(PathBuf::from(dir));
    }
    tools::not_run(
        test,
        &format!(
            "{GUEST_ENV} is not set (cargo run --release -p kcrash-harness -- linux prints the \
             directory to set it to)"
        ),
    );
    None
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn manifest(dir: &Path) -> GuestManifest {
    toml::from_str(&read(&dir.join("guest.toml"))).expect("guest.toml parses")
}

fn hex(text: &str) -> u64 {
    u64::from_str_radix(text.trim_start_matches("0x"), 16).expect("a hex address")
}

/// The `KCRASH-SECTION` addresses the guest's /init printed, by section name.
fn sections(console: &str) -> Vec<(String, u64)> {
    console
        .lines()
        .map(guest::console_line)
        .filter_map(|l| l.strip_prefix("KCRASH-SECTION "))
        .map(|rest| {
            let line = oracle::Line::parse(&format!("KLOG-SECTION {rest}"))
                .unwrap()
                .unwrap();
            (
                line.str("name").unwrap().to_string(),
                line.num("addr").unwrap(),
            )
        })
        .collect()
}

#[test]
fn every_boot_has_its_oracle_scenario_and_addresses() {
    let Some(dir) = guest_dir("every_boot_has_its_oracle_scenario_and_addresses") else {
        return;
    };
    let guest = manifest(&dir);
    assert_eq!((guest.cpus, guest.memory_mib), (2, 512));
    assert_eq!(
        guest.boots.iter().map(|b| b.vmcoreinfo).collect::<Vec<_>>(),
        [true, false]
    );
    for boot in &guest.boots {
        let console = read(&dir.join(&boot.console));
        let facts = ConsoleFacts::parse(&console).unwrap();
        assert_eq!(facts.release, guest.release);
        assert_eq!(facts.panic, "sysrq triggered crash");
        assert_eq!(format!("{:#x}", facts.kaslr_offset), boot.kaslr_offset);
        assert_ne!(facts.kaslr_offset, 0, "KASLR is on");
        assert!(console.contains("---[ end Kernel panic - not syncing: sysrq triggered crash"));

        // expected.json is what the console's oracle derives.
        let expected: Expected =
            serde_json::from_str(&read(&dir.join(&boot.expected))).expect("expected.json");
        assert_eq!(
            oracle::derive(&guest::console_text(&console)).unwrap(),
            expected
        );
        assert_eq!(
            (expected.clock_hz, expected.panic.as_str()),
            (1_000_000_000, "sysrq triggered crash")
        );
        let names: Vec<&str> = expected
            .rings
            .iter()
            .map(|r| r.ring_name.as_str())
            .collect();
        assert_eq!(names, ["NONE", "SCHED", "FS", "VM", "NET"]);
        let ring = |name| expected.ring_named(name).unwrap();
        // Five events before klogInit, one of each subsystem, in NONE's ring.
        let early: Vec<u64> = ring("NONE").events().map(|e| e.subsystem).collect();
        assert_eq!(early, [1, 2, 3, 4, 0]);
        // VM and NET wrap; SCHED and FS hold everything; FS has the one torn record.
        for (name, wraps) in [("SCHED", false), ("FS", false), ("VM", true), ("NET", true)] {
            assert_eq!(ring(name).overwritten > 0, wraps, "{name}");
        }
        assert_eq!(ring("FS").torn_seqs().len(), 1);
        assert!(ring("FS")
            .records
            .iter()
            .any(|r| r.damage == [RecordDamage::Torn]));
        // Both kthreads' CPUs logged into every ring, the wrapped ones' survivors included.
        for name in ["SCHED", "FS", "VM", "NET"] {
            let cpus: HashSet<u32> = ring(name).events().map(|e| e.processor).collect();
            assert_eq!(cpus, HashSet::from([0, 1]), "{name}");
        }
        // The %s cases: kernel .data, kmalloc heap, vmalloc, a task's comm, and one never mapped.
        let messages: Vec<&str> = expected
            .rings
            .iter()
            .flat_map(|r| r.events())
            .map(|e| e.message.as_str())
            .collect();
        assert!(messages.contains(&format!("release {} machine x86_64", guest.release).as_str()));
        assert!(messages.contains(&"vmalloc vmalloc'd string"));
        assert!(messages.iter().any(|m| m.starts_with("heap heap-")));
        for cpu in 0..2 {
            let comm = format!("xmit from klogtest/{cpu} ");
            assert!(messages.iter().any(|m| m.starts_with(&comm)), "{comm}");
        }
        let unreadable: Vec<u64> = ring("FS")
            .events()
            .flat_map(|e| e.unreadable_at.clone())
            .collect();
        assert_eq!(unreadable.len(), 1);

        // The module's own addresses: its core layout holds KLogs, the rings and every format.
        let (base, size) = (hex(&boot.module_base), boot.module_size);
        let in_module = |a: u64| (base..base + size).contains(&a);
        assert_eq!(facts.module.num("base").unwrap(), base);
        assert_eq!(hex(&boot.klogs), facts.module.num("klogs").unwrap());
        assert!(in_module(hex(&boot.klogs)) && in_module(hex(&boot.klogbuffer)));
        assert_eq!(ring("NONE").buffer, hex(&boot.klogbuffer));
        for event in expected.rings.iter().flat_map(|r| r.events()) {
            assert!(in_module(event.desc), "desc {:#x}", event.desc);
        }
        // /sys/module/klogtest/sections and /proc/modules agree with THIS_MODULE.
        let sections = sections(&console);
        let section = |name: &str| sections.iter().find(|(n, _)| n == name).map(|(_, a)| *a);
        assert_eq!(section(".text"), Some(base));
        assert_eq!(section(".data"), Some(hex(&boot.klogs) & !0xfff));
        assert!(section(".bss").unwrap() <= hex(&boot.klogbuffer));
        let proc_modules = console
            .lines()
            .map(guest::console_line)
            .find_map(|l| l.strip_prefix("KCRASH-PROC-MODULES klogtest "))
            .expect("/proc/modules line of klogtest");
        assert!(
            proc_modules.contains(&format!("Live {base:#x}")),
            "{proc_modules}"
        );
    }
}

#[test]
fn every_dump_is_what_guest_toml_says_and_dumpfmt_opens_it() {
    let Some(dir) = guest_dir("every_dump_is_what_guest_toml_says_and_dumpfmt_opens_it") else {
        return;
    };
    let guest = manifest(&dir);
    let files: Vec<&str> = guest.dumps.iter().map(|d| d.file.as_str()).collect();
    assert_eq!(
        files,
        [
            "vmcore.elf",
            "vmcore.kdump-flat",
            "vmcore.kdump",
            "vmcore-c-d31.kdump",
            "vmcore-c-d0.kdump",
            "vmcore-l-d31.kdump",
            "vmcore-l-d0.kdump",
            "vmcore-E-d31.elf",
            "vmcore-novmcoreinfo.elf",
        ]
    );
    for name in [&guest.vmlinux, &guest.vmlinuz, &guest.module] {
        assert!(dir.join(name).is_file(), "{name}");
    }
    let ko = std::fs::read(dir.join(&guest.module)).unwrap();
    let ko = object::File::parse(&*ko).unwrap();
    assert!(object::Object::section_by_name(&ko, ".debug_info").is_some());
    let mut failures = Vec::new();
    for record in &guest.dumps {
        let path = dir.join(&record.file);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            record.bytes,
            "{}",
            record.file
        );
        assert_eq!(
            Magic::of_file(&path).unwrap().map(Magic::name),
            Some(record.magic.as_str()),
            "{}",
            record.file
        );
        match dumpfmt::Dump::open(&path) {
            Ok(dump) => {
                let info = dump.vmcoreinfo().unwrap();
                let release = info.as_ref().and_then(|i| i.get("OSRELEASE"));
                let boot = guest.boots.iter().find(|b| b.name == record.boot).unwrap();
                let want = boot.vmcoreinfo.then_some(guest.release.as_str());
                assert_eq!(release, want, "{}: VMCOREINFO's OSRELEASE", record.file);
            }
            Err(err) => failures.push(format!("{}: {err}", record.file)),
        }
    }
    assert!(failures.is_empty(), "dumpfmt cannot open: {failures:#?}");

    // -d 31 excluded pages: smaller than -d 0 of the same compression, and the ELF says so in
    // PT_LOADs whose p_filesz < p_memsz.
    let bytes = |file: &str| guest.dumps.iter().find(|d| d.file == file).unwrap().bytes;
    assert!(bytes("vmcore-c-d31.kdump") < bytes("vmcore-c-d0.kdump"));
    assert!(bytes("vmcore-l-d31.kdump") < bytes("vmcore-l-d0.kdump"));
    assert!(
        elf_loads(&dir.join("vmcore-E-d31.elf"))
            .iter()
            .any(|(filesz, memsz)| filesz < memsz),
        "no PT_LOAD of vmcore-E-d31.elf lacks pages"
    );
}

/// (p_filesz, p_memsz) of each PT_LOAD of an ELF core, read with object's parser.
fn elf_loads(path: &Path) -> Vec<(u64, u64)> {
    use object::read::elf::{FileHeader, ProgramHeader};
    let mut head = vec![0u8; 1 << 20];
    let n = std::fs::File::open(path).unwrap().read(&mut head).unwrap();
    head.truncate(n);
    let header = object::elf::FileHeader64::<object::Endianness>::parse(&*head).unwrap();
    let endian = header.endian().unwrap();
    header
        .program_headers(endian, &*head)
        .unwrap()
        .iter()
        .filter(|ph| ph.p_type(endian) == object::elf::PT_LOAD)
        .map(|ph| (ph.p_filesz(endian), ph.p_memsz(endian)))
        .collect()
}

/// The 64 bytes of every whole record a boot's oracle holds.
fn record_bytes(expected: &Expected) -> HashSet<[u8; 64]> {
    expected
        .rings
        .iter()
        .flat_map(|r| r.events())
        .map(|e| {
            let mut bytes = [0u8; 64];
            for (chunk, word) in bytes.chunks_exact_mut(8).zip(e.words) {
                chunk.copy_from_slice(&word.to_le_bytes());
            }
            bytes
        })
        .collect()
}

/// The records of `wanted` found 64-byte aligned in the PT_LOADs of the ELF core at `path`
/// (read with object's ELF parser, not dumpfmt): physical memory, so no address translation.
fn records_in_elf(path: &Path, wanted: &HashSet<[u8; 64]>) -> HashSet<[u8; 64]> {
    use object::read::elf::{FileHeader, ProgramHeader};
    let mut file = std::fs::File::open(path).unwrap();
    let mut head = vec![0u8; 64 * 1024];
    let n = file.read(&mut head).unwrap();
    head.truncate(n);
    let header = object::elf::FileHeader64::<object::Endianness>::parse(&*head).unwrap();
    let endian = header.endian().unwrap();
    let mut found = HashSet::new();
    let mut chunk = vec![0u8; 1 << 20];
    for ph in header.program_headers(endian, &*head).unwrap() {
        if ph.p_type(endian) != object::elf::PT_LOAD {
            continue;
        }
        let (offset, size) = (ph.p_offset(endian), ph.p_filesz(endian));
        file.seek(SeekFrom::Start(offset)).unwrap();
        let mut left = size;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            file.read_exact(&mut chunk[..n]).unwrap();
            for block in chunk[..n].chunks_exact(64) {
                // The header's upper half is "KLOG": a cheap filter before the set lookup.
                if block[4..8] == *b"GOLK" {
                    if let Some(record) = wanted.get(block) {
                        found.insert(*record);
                    }
                }
            }
            left -= n as u64;
        }
    }
    found
}

#[test]
fn every_held_record_is_in_qemus_elf_dumps() {
    let Some(dir) = guest_dir("every_held_record_is_in_qemus_elf_dumps") else {
        return;
    };
    let guest = manifest(&dir);
    for boot in &guest.boots {
        let expected: Expected = serde_json::from_str(&read(&dir.join(&boot.expected))).unwrap();
        let wanted = record_bytes(&expected);
        assert!(wanted.len() > 300, "{} records", wanted.len());
        let elf = guest
            .dumps
            .iter()
            .find(|d| d.boot == boot.name && d.producer.starts_with("qemu") && d.format == "elf")
            .unwrap();
        let found = records_in_elf(&dir.join(&elf.file), &wanted);
        assert_eq!(
            found.len(),
            wanted.len(),
            "{}: {} of {} records missing",
            elf.file,
            wanted.len() - found.len(),
            wanted.len()
        );
    }
}
