//! Writes seed inputs made from real dumps and images: `seeds OUT` fills OUT/klog, OUT/printf,
//! OUT/expr_parse, OUT/expr_eval, OUT/expr_dwarf, OUT/linux, OUT/shell_line, OUT/dprobes,
//! OUT/qnx, OUT/klogger, OUT/schema_file, OUT/schema_klogger, OUT/schema_qnx,
//! OUT/schema_dprobes, OUT/unwind_cfi and OUT/ftrace, from the corpus, the gcc fixtures, the small text files under
//! kcrash/fuzz/seeds and the schema files the decoders ship. Run by `.ci/fuzz` before fuzzing; nothing it writes is committed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kcrash::klog::Klog;
use kcrash::linux::{facts::int, Kernel};
use kcrash::memory::Memory;
use kcrash::session::Session;
use kcrash_fuzz::{data_segment, encode, fixed, gcc, repo, Windows};
use kcrash_plugin::Context;
use symbols::Image;

// Built with the targets' coverage flags, so it needs libFuzzer's coverage hooks; its own `main`
// keeps libFuzzer's out.
use libfuzzer_sys as _;

fn main() {
    let out = PathBuf::from(std::env::args().nth(1).expect("usage: seeds OUT"));
    let mut formats = Vec::new();
    klog(&out.join("klog"), &mut formats);
    printf(&out.join("printf"), &formats);
    files("kcrash/fuzz/seeds/printf", &out.join("printf"));
    expr(&out);
    linux(&out.join("linux"));
    descriptors(&out.join("descriptor"), &out.join("scan"));
    qnx(&out.join("qnx"));
    lines("kcrash/fuzz/seeds/expr/lines", &out.join("expr_parse"));
    lines("kcrash/fuzz/seeds/shell/lines", &out.join("shell_line"));
    dprobes(&out.join("dprobes"));
    klogger(&out.join("klogger"));
    files("plugins/klog/schemas", &out.join("schema_file"));
    files("plugins/klogger/schemas", &out.join("schema_klogger"));
    files("plugins/qnx/schemas", &out.join("schema_qnx"));
    files("plugins/dprobes/schemas", &out.join("schema_dprobes"));
    unwind_cfi(&out.join("unwind_cfi"));
    files("kcrash/fuzz/seeds/ftrace", &out.join("ftrace"));
}

/// The hosted C program's crashes: its image, and up to 16 KiB of the stack from the first frame the
/// corpus core's walk finds in the program (at the program's link-time addresses, as the target
/// opens the image unplaced).
fn unwind_cfi(dir: &Path) {
    use kcrash::unwind::{contexts, walk, Cfi, Registers, RIP, RSP};
    let root = repo().join("corpus/hosted-c");
    let exe = std::fs::read(root.join("hosted-c")).expect("the hosted C program");
    for scenario in ["rings", "rings-gcore", "strings"] {
        let Ok(dump) = dumpfmt::Dump::open(&root.join(scenario).join("core.gz")) else {
            continue;
        };
        let Ok(session) = Session::open(&dump, Some(root.join("hosted-c"))) else {
            continue;
        };
        let Some(image) = session.image.clone() else {
            continue;
        };
        let images = session.images();
        let cfi = Cfi {
            images: &images.set,
            mem: &session,
            va_bits: None,
        };
        let Some(first) = contexts(&dump, &mut Vec::new()).into_iter().next() else {
            continue;
        };
        let stack = walk(first.registers, true, &[&cfi]);
        let Some(frame) = stack.frames.iter().find(|f| image.contains(f.pc)) else {
            continue;
        };
        // Up to where the stack ends.
        let mut bytes = Vec::new();
        let mut word = [0u8; 8];
        while bytes.len() < 16 << 10
            && session
                .read(frame.sp + bytes.len() as u64, &mut word)
                .is_ok()
        {
            bytes.extend_from_slice(&word);
        }
        let mut registers = Registers::default();
        registers.set(RIP, Some(frame.pc.wrapping_sub(image.load_bias())));
        registers.set(RSP, Some(frame.sp));
        let input =
            kcrash_fuzz::unwind_input::encode(&registers, &exe, &encode(&[(frame.sp, &bytes)]));
        write(dir, scenario, &input);
    }
}

/// Every file of a committed directory, each a seed (named without a leading dot: hidden files
/// are easy to miss in a corpus directory).
fn files(from: &str, dir: &Path) {
    for entry in std::fs::read_dir(repo().join(from)).expect("committed files") {
        let path = entry.expect("committed file").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let name = name.trim_start_matches('.');
        write(dir, name, &std::fs::read(&path).expect("seed"));
    }
}

/// The test kernels' Klogger writer, each of its scenarios into two 1 KiB buffers, relocated
/// to `fixed::BASE`: the log, then its schema, then the buffers.
fn klogger(dir: &Path) {
    use klogger_writer::oracle::Printer;
    use klogger_writer::{script, Buffer, Log, OVERWRITE};
    const SCHEMA_AT: u64 = 0x200;
    const BUFFERS_AT: u64 = 0x800;
    const SIZE: u64 = 1024;
    let scenarios: [(
        &str,
        fn(&Log, u32, u32, fn() -> u64, &mut dyn klogger_writer::Sink),
        u32,
    ); 3] = [
        ("mixed", script::mixed, OVERWRITE),
        ("wrap", script::wrap, OVERWRITE),
        ("lose", script::lose, 0),
    ];
    for (name, run, flags) in scenarios {
        let log = Box::new(Log::new());
        let buffers = [
            Box::new(Buffer::<1024>::new()),
            Box::new(Buffer::<1024>::new()),
        ];
        let regions: Vec<(u64, u64, u32)> = buffers
            .iter()
            .map(|b| (b.region().0, SIZE, flags))
            .collect();
        log.enable(1_000_000, &regions);
        let mut sink = Printer(String::new);
        for cpu in 0..2 {
            run(&log, cpu, 40, || 7, &mut sink);
        }
        let as_bytes = |addr: u64, len: u64| {
            // SAFETY: the writer's own structures, not written while copied.
            unsafe { std::slice::from_raw_parts(addr as *const u8, len as usize) }.to_vec()
        };
        let log_addr = &*log as *const Log as u64;
        let mut memory = as_bytes(log_addr, std::mem::size_of::<Log>() as u64);
        memory.resize(SCHEMA_AT as usize, 0);
        memory.extend_from_slice(klogger_writer::SCHEMA);
        assert!(
            memory.len() <= BUFFERS_AT as usize,
            "the schema outgrew its room"
        );
        memory.resize(BUFFERS_AT as usize, 0);
        for b in &buffers {
            memory.extend_from_slice(&as_bytes(b.region().0, SIZE));
        }
        // The pointers, moved: the schema's, then each buffer's.
        let mut put =
            |at: usize, value: u64| memory[at..at + 8].copy_from_slice(&value.to_le_bytes());
        put(24, fixed::BASE + SCHEMA_AT);
        for cpu in 0..2 {
            put(40 + 64 * cpu, fixed::BASE + BUFFERS_AT + SIZE * cpu as u64);
        }
        write(dir, name, &memory);
    }
}

/// Each DProbes corpus dump's trace, its first buffer's control and bytes and its templates,
/// moved to where the `dprobes` target reads them: the trace at 0x10000, then the rest.
fn dprobes(dir: &Path) {
    const BASE: u64 = 0x10000;
    for (kernel, image, dump) in [
        ("dprobes", "vmlinux", "vmcore.kdump"),
        ("hosted-dprobes", "hosted-dprobes", "core.gz"),
    ] {
        let root = repo().join("corpus").join(kernel);
        for scenario in ["dprobes-plain", "dprobes-faults", "dprobes-damaged"] {
            let Ok(dump) = dumpfmt::Dump::open(&root.join(scenario).join(dump)) else {
                continue;
            };
            let Ok(session) = Session::open(&dump, Some(root.join(image))) else {
                continue;
            };
            let Some(trace) = kcrash_plugin::Context::symbol(&session, "dprobes_trace") else {
                continue;
            };
            let read = |addr: u64, len: u64| {
                let mut b = vec![0u8; len as usize];
                session.read(addr, &mut b).ok().map(|()| b)
            };
            let Some(mut bytes) = read(trace.address, 40 + 64) else {
                continue;
            };
            let word = |b: &[u8], at: usize| {
                u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default())
            };
            let (templates, templates_len) = (word(&bytes, 24), word(&bytes, 32));
            let (data, size) = (word(&bytes, 48), word(&bytes, 56));
            let (Some(t), Some(d)) = (read(templates, templates_len), read(data, size)) else {
                continue;
            };
            // One buffer in use; the templates and the data right after the control.
            bytes[12..16].copy_from_slice(&1u32.to_le_bytes());
            let t_at = BASE + bytes.len() as u64;
            let d_at = t_at + t.len() as u64;
            bytes[24..32].copy_from_slice(&t_at.to_le_bytes());
            bytes[48..56].copy_from_slice(&d_at.to_le_bytes());
            bytes.extend_from_slice(&t);
            bytes.extend_from_slice(&d);
            write(dir, &format!("{kernel}-{scenario}"), &bytes);
        }
    }
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("seed directory");
    std::fs::write(dir.join(name), bytes).expect("seed file");
}

/// Each corpus entry's rings relocated to `fixed`'s addresses: the newest records of the first
/// rings, with their format strings and `%s` arguments copied after the buffer.
fn klog(dir: &Path, formats: &mut Vec<Vec<u8>>) {
    for (kernel, image) in [
        ("bare", "vmlinux"),
        ("hosted", "hosted"),
        ("hosted-c", "hosted-c"),
    ] {
        let root = repo().join("corpus").join(kernel);
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        for entry in entries.flatten().filter(|e| e.path().is_dir()) {
            let Some(dump) = ["vmcore.kdump", "core.gz", "vmcore.elf.gz"]
                .iter()
                .map(|f| entry.path().join(f))
                .find(|p| p.exists())
            else {
                continue;
            };
            let Ok(dump) = dumpfmt::Dump::open(&dump) else {
                continue;
            };
            let Ok(session) = Session::open(&dump, Some(root.join(image))) else {
                continue;
            };
            let Ok(klog) = session.klog() else {
                continue;
            };
            let name = format!("{kernel}-{}", entry.file_name().to_string_lossy());
            write(dir, &name, &relocate(klog, &session, formats));
        }
    }
}

fn relocate(klog: &Klog, mem: &dyn Memory, formats: &mut Vec<Vec<u8>>) -> Vec<u8> {
    let mut bytes = vec![0u8; (fixed::STRINGS - fixed::BASE) as usize];
    let mut moved: HashMap<u64, u64> = HashMap::new();
    let mut string = |bytes: &mut Vec<u8>, addr: u64| -> Option<u64> {
        if let Some(&at) = moved.get(&addr) {
            return Some(at);
        }
        let mut s = Vec::new();
        mem.read_cstring(addr, 4096, &mut s).ok()?;
        let at = fixed::BASE + bytes.len() as u64;
        bytes.extend_from_slice(&s);
        bytes.push(0);
        moved.insert(addr, at);
        Some(at)
    };
    let put = |bytes: &mut Vec<u8>, addr: u64, v: &[u8]| {
        let at = (addr - fixed::BASE) as usize;
        bytes[at..at + v.len()].copy_from_slice(v);
    };
    for (i, ring) in klog.rings.iter().take(fixed::RINGS as usize).enumerate() {
        let cb = fixed::BASE + i as u64 * fixed::KLOG_SIZE;
        let name = ring.name.clone().unwrap_or_default();
        let name_at = fixed::BASE + bytes.len() as u64;
        bytes.extend_from_slice(name.as_bytes());
        bytes.push(0);
        let buffer = fixed::BUFFER + i as u64 * fixed::RING_RECORDS * 64;
        let words = [
            ring.subsystem,
            name_at,
            fixed::RING_RECORDS,
            ring.rec_size,
            ring.header,
            buffer,
            fixed::RING_RECORDS * 8 - 1,
            ring.next_write,
        ];
        for (w, v) in words.iter().enumerate() {
            put(&mut bytes, cb + w as u64 * 8, &v.to_le_bytes());
        }
        let written = ring.written();
        for seq in written.saturating_sub(fixed::RING_RECORDS)..written {
            let mut rec = [0u8; 64];
            if mem.read(ring.record_addr(seq), &mut rec).is_err() {
                continue;
            }
            let word = |rec: &[u8; 64], w: usize| {
                u64::from_le_bytes(rec[w * 8..w * 8 + 8].try_into().unwrap_or_default())
            };
            let desc = word(&rec, 4);
            if let Some(at) = string(&mut bytes, desc) {
                rec[32..40].copy_from_slice(&at.to_le_bytes());
                let mut format = Vec::new();
                if mem.read_cstring(desc, 4096, &mut format).is_ok() {
                    formats.push(format.clone());
                }
                // Data words that point at strings are `%s` arguments: moved along.
                if format.windows(2).any(|w| w == b"%s") {
                    for w in 5..8 {
                        if let Some(at) = string(&mut bytes, word(&rec, w)) {
                            rec[w * 8..w * 8 + 8].copy_from_slice(&at.to_le_bytes());
                        }
                    }
                }
            }
            let slot = seq % fixed::RING_RECORDS;
            put(&mut bytes, buffer + slot * 64, &rec);
        }
    }
    let layout = &klog.layout;
    if let Some(flags) = layout.debug_flags {
        for i in 0..flags.len.min(fixed::RINGS) {
            let v = mem.read_uint(flags.addr + i * flags.stride, 4).unwrap_or(0) as u32;
            put(&mut bytes, fixed::DEBUG_FLAGS + i * 4, &v.to_le_bytes());
        }
    }
    if let Some(Ok(level)) = klog.level {
        put(&mut bytes, fixed::KLOG_LEVEL, &(level as u32).to_le_bytes());
    }
    let hz = klog.clock_rate.hz().unwrap_or(0);
    put(&mut bytes, fixed::CLOCK_HZ, &hz.to_le_bytes());
    // The fixed layout is one set of rings, whatever the dump had.
    put(&mut bytes, fixed::PROCESSORS, &1u32.to_le_bytes());
    bytes
}

/// The corpus's format strings, each with three data words and a pool of strings.
fn printf(dir: &Path, formats: &[Vec<u8>]) {
    let mut seen = std::collections::HashSet::new();
    for (i, format) in formats.iter().filter(|f| seen.insert(*f)).enumerate() {
        let mut seed = vec![3u8];
        for word in [42u64, 0x10, u64::MAX] {
            seed.extend_from_slice(&word.to_le_bytes());
        }
        seed.extend_from_slice(format);
        seed.extend_from_slice(b"\0vm\0sched\0");
        write(dir, &format!("corpus-{i}"), &seed);
    }
}

/// The gcc fixture's data segment, after each expression line (expr_eval), and with the image
/// itself in front, as DWARF 5 and 4 (expr_dwarf).
fn expr(out: &Path) {
    let lines = std::fs::read_to_string(repo().join("kcrash/fuzz/seeds/expr/lines"))
        .expect("committed expression lines");
    for (flags, name) in [
        (&["-g"][..], "klog"),
        (&["-g", "-gdwarf-4"][..], "klog-dwarf4"),
    ] {
        let path = gcc("symbols/tests/data/klog.c", flags, name);
        let image = Image::open(&path).expect("fixture opens");
        let Some((_, data)) = data_segment(&image, "klogLevel") else {
            continue;
        };
        let file = std::fs::read(&path).expect("fixture reads");
        let mut seed = (file.len() as u32).to_le_bytes().to_vec();
        seed.extend_from_slice(&file);
        seed.extend_from_slice(data);
        write(&out.join("expr_dwarf"), name, &seed);
        if name == "klog" {
            for (i, line) in lines.lines().enumerate() {
                let mut seed = format!("{line}\n").into_bytes();
                seed.extend_from_slice(data);
                write(&out.join("expr_eval"), &format!("line-{i}"), &seed);
            }
        }
    }
}

/// A two-task kernel at the fixture's addresses: init_task (CPU 0's idle task) and init,
/// running, alone on its signal's thread list; one CPU, its per-CPU offset 0.
fn task_windows(image: &Image, off: &dyn Fn(&str) -> u64) -> Vec<(u64, Vec<u8>)> {
    let sym = |name: &str| image.symbol(name).expect("fixture symbol").address;
    let member = |m: &str| off(&format!("&((struct task_struct *)0)->{m}")) as usize;
    let (init_task, init, signal) = (sym("init_task"), 0x11_0000u64, 0x12_0000u64);
    let (tasks, node) = (member("tasks"), member("thread_node"));
    let head = off("&((struct signal_struct *)0)->thread_head");
    let task = |pid: i32, next: u64, comm: &[u8]| {
        let mut t = vec![0u8; off("sizeof(struct task_struct)") as usize];
        let mut put = |at: usize, bytes: &[u8]| t[at..at + bytes.len()].copy_from_slice(bytes);
        put(member("pid"), &pid.to_le_bytes());
        put(member("tgid"), &pid.to_le_bytes());
        put(member("parent"), &init_task.to_le_bytes());
        put(member("comm"), comm);
        put(tasks, &next.to_le_bytes());
        put(member("signal"), &signal.to_le_bytes());
        put(node, &(signal + head).to_le_bytes());
        t
    };
    let mut signal_bytes = vec![0u8; off("sizeof(struct signal_struct)") as usize];
    let at = head as usize;
    signal_bytes[at..at + 8].copy_from_slice(&(init + node as u64).to_le_bytes());
    let runqueue = [0u64.to_le_bytes(), init_task.to_le_bytes()].concat();
    vec![
        (init_task, task(0, init + tasks as u64, b"swapper/0")),
        (init, task(1, init_task + tasks as u64, b"init")),
        (signal, signal_bytes),
        (sym("nr_cpu_ids"), 1u32.to_le_bytes().to_vec()),
        (sym("__per_cpu_offset"), vec![0; 32]),
        (sym("current_task"), init.to_le_bytes().to_vec()),
        (sym("runqueues"), runqueue),
    ]
}

/// The 6.1 guest's VMCOREINFO with a two-module list and a two-task kernel at the fixture's
/// addresses; with the guest's dump, also its printk ring's structures and the start of each
/// of its arrays.
/// For each corpus dump that holds a KLog descriptor: the descriptor and the memory after it
/// (`descriptor`), and for kernel dumps the physical address of a window around it with the
/// window's bytes (`scan`).
fn descriptors(descriptor_dir: &Path, scan_dir: &Path) {
    const WINDOW: u64 = 60 << 10;
    let magic = klog_runtime::descriptor::stored_magic();
    for (kernel, dump) in [
        ("bare", "rings/vmcore.elf.gz"),
        ("bare", "strings/vmcore.kdump"),
        ("hosted", "rings/core.gz"),
        ("hosted-c", "rings/core.gz"),
    ] {
        let Ok(d) = dumpfmt::Dump::open(repo().join("corpus").join(kernel).join(dump)) else {
            continue;
        };
        let mut at = None;
        d.search(&magic, 64, &mut |a| {
            at = Some(a);
            std::ops::ControlFlow::Break(())
        });
        let Some(at) = at else { continue };
        let read = |from: u64, len: u64| {
            let mut buf = vec![0u8; len as usize];
            let ok = if d.is_process_core() {
                d.read_dump_mapping(from, &mut buf)
                    .is_ok_and(|n| n == buf.len())
            } else {
                d.read_phys(from, &mut buf).is_ok()
            };
            ok.then_some(buf)
        };
        let name = format!("{kernel}-{}", dump.replace('/', "-"));
        if let Some(bytes) = read(at, 64 << 10) {
            // Resealed and not: the flag byte's low bit.
            for flag in [0u8, 1] {
                let seed = [&[flag][..], &bytes].concat();
                write(descriptor_dir, &format!("{name}-{flag}"), &seed);
            }
        }
        let start = at.saturating_sub(WINDOW) & !0xfff;
        if let Some(bytes) = read(start, 2 * WINDOW).filter(|_| !d.is_process_core()) {
            let mut seed = (start | 1).to_le_bytes().to_vec();
            seed.extend_from_slice(&bytes);
            write(scan_dir, &name, &seed);
        }
    }
}

fn linux(dir: &Path) {
    let info = std::fs::read(repo().join("kcrash/fuzz/seeds/linux/vmcoreinfo-6.1"))
        .expect("committed VMCOREINFO");
    let image =
        Image::open(gcc("kcrash/tests/data/linux_structs.c", &["-g"], "linux")).expect("fixture");
    let none = Windows::default();
    let kernel = Kernel {
        image: Some(&image),
        mem: &none,
    };
    let off = |e: &str| int(kernel, e).expect("fixture offset") as u64;
    let head = off("&modules");
    let (list, name, taints) = (
        off("&((struct module *)0)->list"),
        off("&((struct module *)0)->name"),
        off("&((struct module *)0)->taints"),
    );
    let size = off("sizeof(struct module)");
    // Two modules after the fixture's data, linked head -> a -> b -> head.
    let (a, b) = (0x10_0000u64, 0x10_0000 + size.next_multiple_of(64));
    let module = |at: u64, next: u64, label: &[u8]| {
        let mut m = vec![0u8; size as usize];
        m[list as usize..list as usize + 8].copy_from_slice(&next.to_le_bytes());
        m[name as usize..name as usize + label.len()].copy_from_slice(label);
        m[taints as usize] = 0x30; // OE
        (at, m)
    };
    let ma = module(a, b + list, b"klogtest");
    let mb = module(b, head, b"pvpanic");
    let head_bytes = (a + list).to_le_bytes();
    let mut windows: Vec<(u64, Vec<u8>)> = vec![(head, head_bytes.to_vec()), ma, mb];
    windows.extend(task_windows(&image, &off));
    let guest = Path::new("/var/cache/kcrash-ci/linux-guest/6.1.0-56-amd64/vmcore.kdump");
    if let Ok(dump) = dumpfmt::Dump::open(guest) {
        if let Ok(session) = Session::open(&dump, None) {
            windows.extend(printk_windows(&info, &session));
        }
    }
    for (layout, old) in [("6.4", false), ("6.1", true)] {
        let mut windows = windows.clone();
        windows.extend(kcrash::unwind::orc_sample::windows(&image, old));
        let borrowed: Vec<(u64, &[u8])> = windows.iter().map(|(a, b)| (*a, b.as_slice())).collect();
        let mut seed = info.clone();
        seed.push(0);
        seed.extend_from_slice(&encode(&borrowed));
        write(dir, &format!("guest-6.1-orc-{layout}"), &seed);
    }
}

/// `prb`, the ring it points at, and the first KiB of its descriptors, infos and text.
fn printk_windows(info: &[u8], mem: &dyn Memory) -> Vec<(u64, Vec<u8>)> {
    let text = String::from_utf8_lossy(info);
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| u64::from_str_radix(v, 16).ok())
    };
    let mut out = Vec::new();
    let read = |addr: u64, len: usize| {
        let mut b = vec![0u8; len];
        mem.read(addr, &mut b).ok().map(|()| (addr, b))
    };
    let Some(prb) = value("SYMBOL(prb)") else {
        return out;
    };
    let Some((_, p)) = read(prb, 8) else {
        return out;
    };
    let rb = u64::from_le_bytes(p.clone().try_into().unwrap_or_default());
    out.push((prb, p));
    let Some(ring) = read(rb, 88) else {
        return out;
    };
    // 6.1's offsets (as this VMCOREINFO gives them): descs, infos, text data.
    for at in [8usize, 16, 56] {
        let ptr = u64::from_le_bytes(ring.1[at..at + 8].try_into().unwrap_or_default());
        out.extend(read(ptr, 1024));
    }
    out.push(ring);
    out
}

/// One seed per line of a committed lines file.
fn lines(from: &str, dir: &Path) {
    let text = std::fs::read_to_string(repo().join(from)).expect("committed lines");
    for (i, line) in text.lines().enumerate() {
        write(dir, &format!("line-{i}"), line.as_bytes());
    }
}

/// Each QNX corpus entry's trace ring moved to `fixed::BASE`: the syspage's trace entry and
/// the buffers after it as the dump holds them, every pointer shifted with them.
fn qnx(dir: &Path) {
    for (kernel, image) in [("bare-qnx", "vmlinux"), ("hosted-qnx", "hosted-qnx")] {
        let root = repo().join("corpus").join(kernel);
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        for entry in entries.flatten().filter(|e| e.path().is_dir()) {
            let Some(dump) = ["vmcore-paging.elf.gz", "core.gz"]
                .iter()
                .map(|f| entry.path().join(f))
                .find(|p| p.exists())
            else {
                continue;
            };
            let Ok(dump) = dumpfmt::Dump::open(&dump) else {
                continue;
            };
            let Ok(session) = Session::open(&dump, Some(root.join(image))) else {
                continue;
            };
            let Some(sym) = Context::symbol(&session, "_syspage_trace") else {
                continue;
            };
            if let Some(bytes) = qnx_ring(&session, sym.address) {
                let name = format!("{kernel}-{}", entry.file_name().to_string_lossy());
                write(dir, &name, &bytes);
            }
        }
    }
}

/// The syspage entry at `at` and the ring it points to, moved to `fixed::BASE` (qnx-writer's
/// layout: 184-byte headers, pointers at 0, 8, 40 and 48 of each).
fn qnx_ring(mem: &dyn Memory, at: u64) -> Option<Vec<u8>> {
    const HEADER: u64 = 184;
    let mut syspage = [0u8; 24];
    mem.read(at, &mut syspage).ok()?;
    let head = u64::from_le_bytes(syspage[..8].try_into().ok()?);
    let elements = u64::from(u32::from_le_bytes(syspage[16..20].try_into().ok()?));
    let size = HEADER + elements.min(1024) * 16;
    let mut out = syspage.to_vec();
    let mut bufs = vec![head];
    while bufs.len() < 8 {
        let next = mem.read_u64(bufs[bufs.len() - 1] + 8).ok()?;
        if next == head {
            break;
        }
        bufs.push(next);
    }
    let moved = |old: u64| -> u64 {
        match bufs.iter().position(|&b| old.wrapping_sub(b) < size) {
            Some(i) => fixed::BASE + 24 + i as u64 * size + (old - bufs[i]),
            None => old,
        }
    };
    out[..8].copy_from_slice(&moved(head).to_le_bytes());
    for &b in &bufs {
        let mut buf = vec![0u8; size as usize];
        mem.read(b, &mut buf).ok()?;
        for field in [0, 8, 40, 48] {
            let old = u64::from_le_bytes(buf[field..field + 8].try_into().ok()?);
            buf[field..field + 8].copy_from_slice(&moved(old).to_le_bytes());
        }
        out.extend_from_slice(&buf);
    }
    Some(out)
}
