//! `sys`: what the dump is — file, format, producer, CPUs, the image, VMCOREINFO, the files that
//! served a process core's missing ranges, and what it says about the crash.

use anyhow::Result;
use clap::Parser;
use dumpfmt::{Dump, Format, Machine, PrStatus, QemuCpuState};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{json, Map, Value};
use symbols::Image;

use std::io::{self, Write};

use super::{Context, Flow};
use crate::error::one_line;
use crate::escape::escaped;
use crate::linux::facts::signal_name;
use crate::linux::facts::{self, Utsname};
use crate::linux::printk;
use crate::paint::Paint;
use crate::report::{self, Hex};
use crate::session::Session;
use crate::symbolize::describe;

/// Describe the dump: file, format and compression, size, producer, CPUs, crash time, image and
/// build-id, VMCOREINFO, which files served which ranges (process cores), and the crash itself
/// (the panic message when the dump holds one, else each CPU's stopping point or the signal).
#[derive(Parser, Debug)]
#[command(name = "sys", no_binary_name = true, disable_version_flag = true)]
#[command(after_help = "Examples:\n  sys\n  sys --json | jq .vmcoreinfo")]
pub struct Args {
    /// One JSON document.
    #[arg(long)]
    json: bool,
}

const NT_PRPSINFO: u32 = 3;
const NT_SIGINFO: u32 = 0x5349_4749;

/// One CPU or thread where the dump stopped it. In JSON its registers go by their architecture's
/// names: `rip`, `rip_symbol`, `rsp` and `cr2` on x86_64; `pc`, `pc_symbol` and `sp` on arm64.
struct Stop {
    /// The CPU (its note's place among the CPUs', as bt counts them), or the thread id.
    id: i64,
    machine: Machine,
    pc: Hex,
    /// `name+off` of the pc, when the image has a symbol there.
    pc_symbol: Option<String>,
    sp: Hex,
    /// CR2 (QEMU's x86 notes): the last page-fault address.
    cr2: Option<Hex>,
}

impl Stop {
    /// The names of the program counter and stack pointer.
    fn register_names(&self) -> (&'static str, &'static str) {
        match self.machine {
            Machine::X86_64 => ("rip", "rsp"),
            Machine::Aarch64 => ("pc", "sp"),
        }
    }
}

impl Serialize for Stop {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (pc, sp) = self.register_names();
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry(pc, &self.pc)?;
        map.serialize_entry(&format!("{pc}_symbol"), &self.pc_symbol)?;
        map.serialize_entry(sp, &self.sp)?;
        if self.machine == Machine::X86_64 {
            map.serialize_entry("cr2", &self.cr2)?;
        }
        map.end()
    }
}

/// A range of a process's memory read from a file.
#[derive(Serialize)]
struct Backed {
    start: Hex,
    end: Hex,
    file_offset: Hex,
    path: String,
}

impl Stop {
    /// From QEMU's CPU notes when there are any (they have CR2), else from NT_PRSTATUS.
    fn all(
        machine: Machine,
        process: bool,
        qemu: &[QemuCpuState],
        prstatus: &[PrStatus],
        image: Option<&Image>,
    ) -> Vec<Stop> {
        let stop = |id: i64, pc: u64, sp: u64, cr2: Option<u64>| Stop {
            id,
            machine,
            pc: Hex(pc),
            pc_symbol: image.and_then(|i| describe(i, pc)),
            sp: Hex(sp),
            cr2: cr2.map(Hex),
        };
        if qemu.is_empty() {
            // A kernel dump's notes come one per CPU in CPU order, as bt numbers them; their
            // pid is the task that ran there (the kernel's notes) or QEMU's CPU number plus one.
            prstatus
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let id = if process { p.pid.into() } else { i as i64 };
                    stop(id, p.regs.pc(), p.regs.sp(), None)
                })
                .collect()
        } else {
            qemu.iter()
                .enumerate()
                .map(|(i, q)| stop(i as i64, q.rip, q.gprs[6], Some(q.cr[2])))
                .collect()
        }
    }
}

fn format_name(dump: &Dump, process: bool) -> &'static str {
    match (dump.format(), process) {
        (Format::Elf, true) => "ELF core (process)",
        (Format::Elf, false) => "ELF core (kernel)",
        (Format::Kdump, _) => "kdump-compressed",
        (Format::KdumpFlattened, _) => "kdump-compressed, makedumpfile flattened stream",
        (Format::Raw, _) => "raw memory",
    }
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(argv)?;
    let report = Report::gather(cx.session);
    for w in &report.warnings {
        writeln!(cx.err, "sys: {w}")?;
    }
    report::document(&report, args.json, cx.out, cx.paint)?;
    Ok(Flow::Continue)
}

/// What `sys` found, in the order it prints it.
struct Report {
    /// (key, value): the JSON key, and upper-cased the text label.
    facts: Vec<(&'static str, Value)>,
    stops: Vec<Stop>,
    vmcoreinfo: Vec<(String, String)>,
    /// A process core (not a kernel dump, even one with only virtual addresses).
    process: bool,
    file_backed: Vec<Backed>,
    notes: Vec<String>,
    warnings: Vec<String>,
}

impl Report {
    fn gather(session: &Session<'_>) -> Report {
        let dump = session.dump;
        let mut facts: Vec<(&'static str, Value)> = Vec::new();
        let mut warnings = Vec::new();
        let qemu: Vec<_> = dump
            .qemu_cpu_states()
            .filter_map(|r| r.map_err(|e| warnings.push(e.to_string())).ok())
            .collect();
        // QEMU's paging=true ELF dumps have only virtual addresses, like a process core, but they
        // carry QEMU's CPU notes.
        let process = dump.is_process_core() && qemu.is_empty();
        facts.push(("dumpfile", json!(dump.path().display().to_string())));
        facts.push(("format", json!(format_name(dump, process))));
        let mut compression = Vec::new();
        if dump.was_gzipped() {
            compression.push("gzip (whole file, read decompressed)");
        }
        if matches!(dump.format(), Format::Kdump | Format::KdumpFlattened) {
            compression.push("kdump pages compressed one by one");
        }
        facts.push((
            "compression",
            json!(if compression.is_empty() {
                "none".to_owned()
            } else {
                compression.join("; ")
            }),
        ));
        match std::fs::metadata(dump.path()) {
            Ok(m) => facts.push(("size", json!(m.len()))),
            Err(e) => warnings.push(format!("size: {e}")),
        }
        if dump.is_incomplete() {
            facts.push(("incomplete", json!(true)));
        }
        if let Some(range) = dump.raw_range() {
            facts.push((
                "physical",
                json!(format!(
                    "[{:#x}, {:#x}): the file, from its first byte",
                    range.start, range.end
                )),
            ));
        }

        let prstatus: Vec<_> = dump
            .prstatus()
            .filter_map(|r| r.map_err(|e| warnings.push(e.to_string())).ok())
            .collect();
        let producer = if process {
            "Linux (the kernel's core dump or gdb gcore)"
        } else if !qemu.is_empty() {
            "QEMU dump-guest-memory (QEMU CPU-state notes)"
        } else if dump.kdump_header().is_some_and(|h| h.machine == "Unknown") {
            // makedumpfile copies the kernel's uname; QEMU names only the machines it knows.
            "QEMU dump-guest-memory (kdump header's machine \"Unknown\")"
        } else if dump.kdump_header().is_some() {
            "kdump (makedumpfile)"
        } else if dump.format() == Format::Raw {
            "unknown (a raw memory image names none)"
        } else {
            "unknown"
        };
        facts.push(("producer", json!(producer)));
        let info = dump.vmcoreinfo().ok().flatten();
        let linux = session.linux.is_some() || info.and_then(|i| i.osrelease()).is_some();
        if let Some(h) = dump.kdump_header().filter(|_| !linux) {
            if !h.release.is_empty() {
                facts.push(("release", json!(escaped(h.release.as_bytes()))));
            }
            facts.push(("machine", json!(escaped(h.machine.as_bytes()))));
            facts.push(("dump_level", json!(h.dump_level)));
        }
        let stops = Stop::all(
            dump.machine(),
            process,
            &qemu,
            &prstatus,
            session.image.as_deref(),
        );
        let cpus = match dump.kdump_header() {
            Some(h) if h.nr_cpus > 0 => h.nr_cpus as usize,
            _ => stops.len(),
        };
        if process {
            facts.push(("threads", json!(stops.len())));
        } else if dump.format() == Format::Raw {
            facts.push((
                "cpus",
                json!("unknown (a raw memory image holds no CPU state)"),
            ));
        } else if linux {
            match facts::cpus(session.kernel()) {
                Ok((online, _)) => facts.push((
                    "cpus",
                    json!(format!("{cpus} (online at the crash: {online})")),
                )),
                Err(e) => {
                    warnings.push(format!("online CPUs: {e}"));
                    facts.push(("cpus", json!(cpus)));
                }
            }
        } else {
            facts.push(("cpus", json!(cpus)));
        }
        let mut panic = None;
        if linux {
            panic = linux_facts(session, info.as_ref(), &mut facts, &mut warnings);
        } else {
            facts.push((
                "crash_time",
                json!("unknown (kcrash reads no time of crash from this dump)"),
            ));
        }
        image_facts(session, &mut facts);
        klog_facts(session, &mut facts);
        process_facts(dump, &mut facts);
        let vmcoreinfo: Vec<(String, String)> = match dump.vmcoreinfo() {
            Ok(Some(v)) => v
                .entries()
                .map(|(k, v, _)| (k.to_owned(), v.to_owned()))
                .collect(),
            Ok(None) => Vec::new(),
            Err(e) => {
                warnings.push(e.to_string());
                Vec::new()
            }
        };
        if !process {
            // Linux names the CPU that panicked; a test kernel has one CPU.
            let panicked = if linux {
                match facts::panic_cpu(session.kernel()) {
                    Ok(cpu) => cpu.and_then(|c| stops.get(c)),
                    Err(e) => {
                        warnings.push(format!("the CPU that panicked: {e}"));
                        None
                    }
                }
            } else {
                stops.first()
            };
            facts.push(("panic", json!(kernel_panic(panicked, linux, panic))));
        } else if !facts.iter().any(|(k, _)| *k == "panic") {
            facts.push((
                "panic",
                json!(
                    "no signal recorded (no NT_SIGINFO: gdb's gcore of a running process, likely)"
                ),
            ));
        }
        let file_backed = session
            .file_backed
            .ranges
            .iter()
            .map(|f| Backed {
                start: Hex(f.start),
                end: Hex(f.end),
                file_offset: Hex(f.file_offset),
                path: f.path.display().to_string(),
            })
            .collect();
        Report {
            facts,
            stops,
            vmcoreinfo,
            process,
            file_backed,
            notes: session.notes.clone(),
            warnings,
        }
    }
}

/// The facts by their keys, then `stops`, `vmcoreinfo` (an object), `file_backed` and `notes`.
impl Serialize for Report {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for (k, v) in &self.facts {
            map.serialize_entry(k, v)?;
        }
        map.serialize_entry("stops", &self.stops)?;
        let vmcoreinfo: Map<String, Value> = self
            .vmcoreinfo
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        map.serialize_entry("vmcoreinfo", &vmcoreinfo)?;
        map.serialize_entry("file_backed", &self.file_backed)?;
        map.serialize_entry("notes", &self.notes)?;
        map.end()
    }
}

impl report::Report for Report {
    fn text(&self, out: &mut dyn Write, paint: Paint) -> io::Result<()> {
        let process = self.process;
        for (key, value) in &self.facts {
            let label = key.replace('_', " ").to_uppercase();
            let text = match value {
                Value::String(s) => s.clone(),
                other if *key == "size" => format!("{other} bytes"),
                other => other.to_string(),
            };
            writeln!(out, "{:>12}: {text}", paint.strong(label))?;
        }
        let what = if process { "THREAD" } else { "CPU" };
        for s in &self.stops {
            let (pc, sp) = s.register_names();
            write!(
                out,
                "{:>12}: {pc} {} ",
                paint.strong(format!("{what} {}", s.id)),
                paint.addr(format_args!("{:#018x}", s.pc.0))
            )?;
            if let Some(name) = &s.pc_symbol {
                write!(out, "({}) ", paint.name(name))?;
            }
            write!(out, "{sp} {:#018x}", s.sp.0)?;
            if let Some(cr2) = s.cr2 {
                write!(out, " cr2 {:#018x}", cr2.0)?;
            }
            writeln!(out)?;
        }
        if !self.file_backed.is_empty() {
            writeln!(
                out,
                "{:>12}: memory the core left out, read from these files",
                paint.strong("FILE-BACKED")
            )?;
            for f in &self.file_backed {
                writeln!(
                    out,
                    "    {:016x}-{:016x}  {} +{:#x}",
                    f.start.0, f.end.0, f.path, f.file_offset.0
                )?;
            }
        }
        for note in &self.notes {
            writeln!(out, "{:>12}: {note}", paint.strong("NOTE"))?;
        }
        if self.vmcoreinfo.is_empty() && !process {
            writeln!(out, "{:>12}: none in the dump", paint.strong("VMCOREINFO"))?;
        } else if !self.vmcoreinfo.is_empty() {
            writeln!(out, "{:>12}:", paint.strong("VMCOREINFO"))?;
            for (k, v) in &self.vmcoreinfo {
                writeln!(out, "    {k}={v}")?;
            }
        }
        Ok(())
    }
}

/// The image: path, build-id, where DWARF comes from, load bias.
fn image_facts(session: &Session<'_>, facts: &mut Vec<(&'static str, Value)>) {
    if let Some(image) = &session.image {
        facts.push(("image", json!(image.path().display().to_string())));
        facts.push((
            "build_id",
            json!(image
                .build_id()
                .map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>())
                .unwrap_or_else(|| "none".into())),
        ));
        facts.push((
            "debug_info",
            json!(image
                .debug_path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "none (symbols only)".into())),
        ));
        if image.load_bias() != 0 {
            facts.push(("load_bias", json!(format!("{:#x}", image.load_bias()))));
        }
    } else {
        facts.push(("image", json!("none")));
    }
}

/// Where the KLog's layout comes from, and what finding it noticed (the descriptor agreeing
/// with DWARF or not), or why there is none.
fn klog_facts(session: &Session<'_>, facts: &mut Vec<(&'static str, Value)>) {
    match session.klog() {
        Ok(klog) => {
            facts.push(("klog_layout", json!(klog.source.to_string())));
            if !klog.notes.is_empty() {
                facts.push(("klog_layout_notes", json!(klog.notes.join("; "))));
            }
        }
        Err(e) => facts.push((
            "klog_layout",
            json!(format!("none: {}", one_line(&e.to_string()))),
        )),
    }
}

/// A process core's command line, pid and signal.
fn process_facts(dump: &Dump, facts: &mut Vec<(&'static str, Value)>) {
    for note in dump.notes().flatten() {
        if note.is("CORE", NT_PRPSINFO) {
            if let Ok(p) = note.prpsinfo() {
                facts.push(("command", json!(escaped(p.psargs.as_bytes()))));
                facts.push(("pid", json!(p.pid)));
            }
        }
        if note.is("CORE", NT_SIGINFO) {
            if let Ok(s) = note.siginfo() {
                facts.push((
                    "panic",
                    json!(format!(
                        "killed by signal {} ({}), si_code {}",
                        s.signo,
                        signal_name(s.signo),
                        s.code
                    )),
                ));
            }
        }
    }
}

/// Linux's utsname, memory, clock and uptime; the panic message from its log.
fn linux_facts(
    session: &Session<'_>,
    info: Option<&dumpfmt::VmcoreInfo<'_>>,
    facts: &mut Vec<(&'static str, Value)>,
    warnings: &mut Vec<String>,
) -> Option<String> {
    match Utsname::read(session.kernel(), info) {
        Ok(u) => {
            facts.push(("release", json!(u.release)));
            facts.push(("version", json!(u.version)));
            facts.push(("machine", json!(u.machine)));
            facts.push(("nodename", json!(u.nodename)));
        }
        Err(e) => {
            // Kernels before VMCOREINFO gave `uts_namespace.name`'s offset (5.10) still wrote
            // their release there, and the dump says its machine: the rest of utsname needs
            // the vmlinux.
            match info.and_then(|i| i.osrelease()) {
                Some(release) => {
                    facts.push(("release", json!(escaped(release.as_bytes()))));
                    facts.push(("machine", json!(session.dump.machine().name())));
                    warnings.push(format!("utsname's version and nodename: {e}"));
                }
                None => warnings.push(format!("utsname: {e}")),
            }
        }
    }
    let page_size = info
        .and_then(|i| i.page_size().ok().flatten())
        .unwrap_or(4096);
    match facts::memory(session.kernel(), page_size) {
        Ok(bytes) => facts.push((
            "memory",
            json!(format!("{:.1} MB", bytes as f64 / (1 << 20) as f64)),
        )),
        Err(e) => warnings.push(format!("memory: {e}")),
    }
    match facts::crash_time(session.kernel()) {
        Ok(secs) => facts.push(("crash_time", json!(facts::date(secs)))),
        Err(e) => {
            warnings.push(format!("crash time: {e}"));
            facts.push((
                "crash_time",
                json!("unknown (the timekeeper could not be read)"),
            ));
        }
    }
    match facts::uptime_nsec(session.kernel()) {
        Ok(nsec) => facts.push(("uptime", json!(facts::uptime(nsec)))),
        Err(e) => warnings.push(format!("uptime: {e}")),
    }
    let ring = session
        .dump
        .vmcoreinfo()
        .map_err(crate::error::Error::from)
        .and_then(|info| printk::find(info.as_ref(), session.image.as_deref(), session, false));
    match ring {
        Ok(ring) => facts::panic_message(&ring),
        Err(e) => {
            warnings.push(format!("log: {e}"));
            None
        }
    }
}

/// What a kernel dump says about the panic: for Linux, the message its log holds. A kernel
/// without VMCOREINFO (the test kernels) keeps no console log in memory. Then where the CPU
/// that panicked stopped, when it is known.
fn kernel_panic(panicked: Option<&Stop>, linux: bool, message: Option<String>) -> String {
    let mut text = match (linux, message) {
        (_, Some(m)) => format!("{m:?}"),
        (true, None) => "no panic, Oops or BUG message in the kernel's log".to_owned(),
        (false, None) => {
            "no panic message in the dump (the console log is not kept in memory)".to_owned()
        }
    };
    if let Some(s) = panicked {
        text.push_str(&format!("; CPU {} stopped at {:#x}", s.id, s.pc.0));
        if let Some(name) = &s.pc_symbol {
            text.push_str(&format!(" ({name})"));
        }
        if let Some(cr2) = s.cr2.filter(|&c| c.0 != 0) {
            text.push_str(&format!(", last page fault at {:#x} (cr2)", cr2.0));
        }
    }
    text
}
