//! `bt`: the stack of the thread or CPU the dump stopped, walked by call-frame information (and
//! by frame pointers where no table describes the code; arm64 Linux by its frame records),
//! symbolized with inlined functions as gdb shows them, printed as crash prints a backtrace.

use std::io::{self, Write};

use anyhow::{anyhow, bail, Result};
use clap::Parser;
use dumpfmt::notes::FileMapping;
use serde::Serialize;
use symbols::ImageSet;

use super::args::{find_task, number, pid_or_task};
use super::{Context, Flow};
use crate::escape::escaped;
use crate::linux::facts::signal_name;
use crate::linux::tasks::{tasks, Task};
use crate::memory::Memory;
use crate::paint::Paint;
use crate::report::{self, Hex, Report};
use crate::session::Session;
use crate::symbolize::display_name;
use crate::unwind::{
    self, aarch64_pt_regs, pt_regs, switched_out, Cfi, ExceptionEntries, FramePointer,
    FrameRecords, How, Kind, Orc, Registers, Stack, Unwinder,
};
use dumpfmt::Machine;

/// The stack where the dump stopped a thread (process cores) or CPU (kernel dumps).
///
/// Without arguments, the context `set PID|TASK` chose, else the thread that took the signal (a
/// process core's first) or, in a kernel dump, the CPU that crashed (Linux's `panic_cpu`; else
/// the first the dump holds). Each frame is `#N [SP] FUNCTION at PC`:
/// SP the stack pointer in that frame, PC where it runs (a return address past the first frame);
/// a function inlined into its caller is a frame of its own at the same SP and PC, as gdb shows
/// it. Frames found by frame pointer, where no call-frame information covers the code, say so.
/// The walk ends where the outermost frame is, or says why it could go no further.
#[derive(Parser, Debug)]
#[command(name = "bt", no_binary_name = true, disable_version_flag = true)]
#[command(
    after_help = "Examples:\n  bt\n  bt -a\n  bt -l 8389\n  bt ffff8efb81213080\n  bt -f\n  bt --json | jq -r '.contexts[0].frames[].function'"
)]
pub struct Args {
    /// The thread (process cores) to show, by its id as `sys` and gdb's `info threads` give it;
    /// or the Linux task by PID or `task_struct` address, as `ps` lists them (a task not running
    /// starts from the registers the scheduler saved when it switched it out).
    #[arg(value_name = "PID|TASK", value_parser = pid_or_task)]
    pid: Option<u64>,
    /// Every thread or CPU.
    #[arg(short = 'a', conflicts_with_all = ["pid", "cpu"])]
    all: bool,
    /// The CPU to show (kernel dumps).
    #[arg(short = 'c', value_name = "CPU", value_parser = number, conflicts_with = "pid")]
    cpu: Option<u64>,
    /// Each frame's stack words, from its SP up to its caller's.
    #[arg(short = 'f')]
    frames: bool,
    /// Each frame's source file and line.
    #[arg(short = 'l')]
    lines: bool,
    /// One JSON document.
    #[arg(long)]
    json: bool,
}

/// Stack words shown at most for one frame with -f.
const MAX_WORDS: u64 = 4096;

#[derive(Serialize)]
struct Backtrace {
    contexts: Vec<Thread>,
    #[serde(skip)]
    lines: bool,
}

/// One thread's or CPU's stack.
#[derive(Serialize, Default)]
struct Thread {
    /// The thread id (process cores), or the Linux task's PID.
    pid: Option<i64>,
    /// The Linux task (`struct task_struct`).
    task: Option<Hex>,
    cpu: Option<usize>,
    command: Option<String>,
    /// The signal that stopped it; null when none is recorded.
    signal: Option<i32>,
    frames: Vec<Frame>,
    /// Why the walk ended at the last frame.
    stop: String,
}

#[derive(Serialize)]
struct Frame {
    index: usize,
    sp: Hex,
    pc: Hex,
    /// The function, demangled; null where no symbol or DWARF names the code.
    function: Option<String>,
    /// Inlined into the next frame's function: no frame of its own on the stack.
    inlined: bool,
    file: Option<String>,
    line: Option<u32>,
    /// The image (program, library, kernel or module) holding the code.
    image: Option<String>,
    /// The file the process mapped there, when kcrash does not have it.
    mapped: Option<String>,
    how: How,
    /// The registers an exception or interrupt saved on entering this frame (Linux's
    /// `struct pt_regs`), as crash prints them; on the physical frame only.
    exception: Option<Exception>,
    /// Frames between this one and the next that could not be found, and why (the walk went on
    /// past them); on the physical frame only.
    gap: Option<String>,
    /// With -f: the frame's stack words, up to the caller's stack pointer or the first word
    /// that cannot be read (the physical frame carries them, not the functions inlined in it).
    words: Option<Vec<Word>>,
}

#[derive(Serialize)]
struct Exception {
    /// Where the `struct pt_regs` is.
    address: Hex,
    #[serde(flatten)]
    at: Interrupted,
    /// Each register by name (crash's order), null where unreadable.
    registers: Named,
}

/// Where the exception struck: `function+offset` (decimal, as crash writes it) of the saved
/// code addresses, each when it is in an image's symbol.
#[derive(Serialize)]
#[serde(untagged)]
enum Interrupted {
    X86_64 {
        rip_symbol: Option<String>,
    },
    Aarch64 {
        pc_symbol: Option<String>,
        lr_symbol: Option<String>,
    },
}

/// Registers in order, a JSON object by name.
struct Named(Vec<(&'static str, Option<Hex>)>);

impl Serialize for Named {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct Word {
    address: Hex,
    value: Option<Hex>,
    /// Why the word could not be read.
    unreadable: Option<String>,
}

impl Report for Backtrace {
    fn text(&self, out: &mut dyn Write, paint: Paint) -> io::Result<()> {
        for (i, thread) in self.contexts.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            thread.text(out, paint, self.lines)?;
        }
        Ok(())
    }
}

impl Thread {
    /// The header of a Linux task's stack, as crash's: PID, TASK, CPU, COMMAND.
    fn describe(&mut self, task: &Task) {
        self.pid = task.pid.as_ref().ok().map(|&p| i64::from(p));
        self.task = Some(Hex(task.addr));
        self.command = task.comm.as_ref().ok().cloned();
    }

    fn text(&self, out: &mut dyn Write, paint: Paint, lines: bool) -> io::Result<()> {
        let mut head = Vec::new();
        if let Some(pid) = self.pid {
            head.push(format!("PID: {pid}"));
        }
        if let Some(task) = self.task {
            head.push(format!("TASK: {:x}", task.0));
        }
        if let Some(cpu) = self.cpu {
            head.push(format!("CPU: {cpu}"));
        }
        if let Some(c) = &self.command {
            head.push(format!("COMMAND: \"{c}\""));
        }
        if let Some(s) = self.signal {
            head.push(format!("SIGNAL: {s} ({})", signal_name(s)));
        }
        writeln!(out, "{}", head.join("  "))?;
        for f in &self.frames {
            let name = match (&f.function, &f.mapped) {
                (Some(name), _) => paint.name(name).to_string(),
                (None, Some(file)) => format!("?? (in {file}, which kcrash does not have)"),
                (None, None) => "??".into(),
            };
            let mut notes = Vec::new();
            if f.inlined {
                notes.push("inlined");
            }
            if f.how == How::FramePointer {
                notes.push("by frame pointer");
            }
            let notes = if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join(", "))
            };
            writeln!(
                out,
                "{:>3} [{}] {name} at {}{notes}",
                format!("#{}", f.index),
                paint.addr(format_args!("{:016x}", f.sp.0)),
                paint.addr(format_args!("{:x}", f.pc.0)),
            )?;
            if lines {
                if let (Some(file), Some(line)) = (&f.file, f.line) {
                    writeln!(out, "    {file}: {line}")?;
                }
            }
            if let Some(e) = &f.exception {
                e.text(out, paint)?;
            }
            for w in f.words.iter().flatten() {
                match (&w.value, &w.unreadable) {
                    (Some(v), _) => writeln!(out, "    {:016x}: {:016x}", w.address.0, v.0)?,
                    (None, why) => writeln!(
                        out,
                        "    {:016x}: {}",
                        w.address.0,
                        paint.bad(format_args!(
                            "<unreadable: {}>",
                            why.as_deref().unwrap_or_default()
                        ))
                    )?,
                }
            }
            if let Some(gap) = &f.gap {
                writeln!(out, "    {}", paint.strong(format_args!("gap: {gap}")))?;
            }
        }
        writeln!(
            out,
            "    {}",
            paint.strong(format_args!("stop: {}", self.stop))
        )
    }
}

impl Exception {
    /// As crash prints the machine's exception frames.
    fn text(&self, out: &mut dyn Write, paint: Paint) -> io::Result<()> {
        match &self.at {
            Interrupted::X86_64 { rip_symbol } => self.x86_64_text(rip_symbol, out, paint),
            Interrupted::Aarch64 {
                pc_symbol,
                lr_symbol,
            } => self.aarch64_text([pc_symbol, lr_symbol], out, paint),
        }
    }

    /// crash's arm64 layout: PC and LR with their functions, SP and PSTATE, then x29 down to
    /// x0 three a line.
    fn aarch64_text(
        &self,
        symbols: [&Option<String>; 2],
        out: &mut dyn Write,
        paint: Paint,
    ) -> io::Result<()> {
        let value = |i: usize, digits: usize| match self.registers.0.get(i) {
            Some((_, Some(Hex(v)))) => format!("{v:0digits$x}"),
            _ => paint.bad("<unreadable>"),
        };
        for (i, symbol) in symbols.into_iter().enumerate() {
            let name = self.registers.0.get(i).map_or("", |r| r.0);
            match symbol {
                Some(s) => writeln!(out, "    {name:>3}: {}  [{}]", value(i, 16), paint.name(s))?,
                None => writeln!(out, "    {name:>3}: {}", value(i, 16))?,
            }
        }
        writeln!(out, "     SP: {}  PSTATE: {}", value(2, 16), value(3, 8))?;
        let mut line = String::new();
        for (i, (name, _)) in self.registers.0.iter().enumerate().skip(4) {
            line.push_str(&format!("{name:>3}: {}  ", value(i, 16)));
            if (i - 4) % 3 == 2 || i + 1 == self.registers.0.len() {
                writeln!(out, "    {}", line.trim_end())?;
                line.clear();
            }
        }
        Ok(())
    }

    /// crash's x86_64 layout: the interrupted function when it is the kernel's, then three
    /// registers a line, RFLAGS in eight digits and segment registers in four.
    fn x86_64_text(
        &self,
        rip_symbol: &Option<String>,
        out: &mut dyn Write,
        paint: Paint,
    ) -> io::Result<()> {
        if let Some(rip) = rip_symbol {
            writeln!(out, "    [exception RIP: {}]", paint.name(rip))?;
        }
        let mut line = String::new();
        for (i, (name, value)) in self.registers.0.iter().enumerate() {
            let value = match value {
                Some(Hex(v)) if matches!(*name, "CS" | "SS") => format!("{v:04x}"),
                Some(Hex(v)) if *name == "RFLAGS" => format!("{v:08x}"),
                Some(Hex(v)) => format!("{v:016x}"),
                None => paint.bad("<unreadable>"),
            };
            if i < 18 {
                line.push_str(&format!("{name:>3}: {value}  "));
            } else {
                line.push_str(&format!("{name}: {value}  "));
            }
            // RIP RSP RFLAGS / RAX RBX RCX / ... / R13 R14 R15 / ORIG_RAX CS SS
            if i % 3 == 2 && i < 18 {
                writeln!(out, "    {}", line.trim_end())?;
                line.clear();
            }
        }
        writeln!(out, "    {}", line.trim_end())
    }
}

/// Where one stack starts: its header, its registers, and whether its pc is exact.
struct Start {
    head: Thread,
    registers: Registers,
    exact: bool,
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(argv)?;
    let session = cx.session;
    let machine = session.dump.machine();
    let arm64 = machine == Machine::Aarch64;
    if arm64 && session.linux.is_none() && !session.dump.is_process_core() {
        bail!(
            "unwinding an aarch64 kernel needs its vmlinux: a frame record is told from other \
             words by its return address into the kernel's code"
        );
    }
    let mut warnings = Vec::new();
    let all = unwind::contexts(session.dump, &mut warnings);
    let tasks = match session.linux {
        Some(_) => match tasks(session.kernel()) {
            Ok(list) => Some(list.tasks),
            Err(e) => {
                warnings.push(format!("the task list: {e}"));
                None
            }
        },
        None => None,
    };
    for w in &warnings {
        writeln!(cx.err, "bt: {w}")?;
    }
    let tasks = tasks.unwrap_or_default();
    let command = command_name(session);
    let on_cpu = |c: &unwind::Context| -> Start {
        let (pid, cpu) = match c.kind {
            Kind::Thread(t) => (Some(i64::from(t)), None),
            Kind::Cpu { index, pid } => (pid.map(i64::from), Some(index)),
        };
        let running = cpu.and_then(|cpu| {
            tasks
                .iter()
                .find(|t| t.running && t.cpu.as_ref().is_ok_and(|&c| c as usize == cpu))
        });
        let mut head = Thread {
            pid,
            cpu,
            command: command.clone(),
            signal: (c.signal != 0).then_some(c.signal),
            ..Thread::default()
        };
        if let Some(t) = running {
            head.describe(t);
        }
        Start {
            head,
            registers: c.registers.clone(),
            exact: true,
        }
    };
    // `set PID` chose a context for a bare `bt`.
    let pid = args
        .pid
        .or(cx.settings.context.filter(|_| args.cpu.is_none()));
    let starts: Vec<Start> = match (args.all, pid, args.cpu) {
        (true, _, _) => all.iter().map(on_cpu).collect(),
        (_, Some(id), _) if session.linux.is_some() => {
            let Some(task) = find_task(&tasks, id) else {
                bail!("no task {id} in the dump (ps lists them)");
            };
            let cpu = task.cpu.as_ref().ok().map(|&c| c as usize);
            let context = all
                .iter()
                .find(|c| matches!(c.kind, Kind::Cpu { index, .. } if Some(index) == cpu));
            match context {
                Some(c) if task.running => vec![on_cpu(c)],
                _ => {
                    let registers = switched_out(session.kernel(), machine, task.addr)
                        .map_err(|e| anyhow!("task {:#x}: its saved registers: {e}", task.addr))?;
                    let mut head = Thread {
                        cpu,
                        ..Thread::default()
                    };
                    head.describe(task);
                    vec![Start {
                        head,
                        registers,
                        exact: false,
                    }]
                }
            }
        }
        (_, Some(pid), _) => {
            let found = all
                .iter()
                .find(|c| matches!(c.kind, Kind::Thread(t) if u64::try_from(t) == Ok(pid)));
            match found {
                Some(c) => vec![on_cpu(c)],
                None => bail!("no thread {pid} in the dump (bt -a shows every one)"),
            }
        }
        (_, _, Some(cpu)) => match all
            .iter()
            .find(|c| matches!(c.kind, Kind::Cpu { index, .. } if index as u64 == cpu))
        {
            Some(c) => vec![on_cpu(c)],
            None => bail!("no CPU {cpu} in the dump (bt -a shows every one)"),
        },
        _ => {
            let panicked = panic_cpu(session);
            let crashed = all
                .iter()
                .find(|c| matches!(c.kind, Kind::Cpu { index, .. } if Some(index) == panicked));
            crashed.or(all.first()).map(on_cpu).into_iter().collect()
        }
    };
    if starts.is_empty() {
        bail!("the dump holds no thread's or CPU's registers to start from");
    }
    let images = session.images();
    let mem: &dyn Memory = session;
    let arm64_kernel = arm64 && !session.dump.is_process_core();
    let va_bits = if arm64_kernel {
        Some(arm64_va_bits(session)?)
    } else {
        None
    };
    let cfi = Cfi {
        images: &images.set,
        mem,
        va_bits,
    };
    let frame_pointer = FramePointer {
        images: &images.set,
        mem,
    };
    // Linux unwinds itself by its ORC tables, which also describe its entry code; a kernel
    // without them (frame pointers) may still carry call-frame information. A process's code
    // always has call-frame information (the ABI requires it): a frame pointer there would be
    // a guess.
    // arm64 Linux walks itself by its frame records, which a leaf function (or one stopped in
    // its prologue) has not written yet: the vmlinux's `.debug_frame` knows those, as gdb and
    // drgn read it, and the records take over where it says nothing (the entry code).
    let frame_records = va_bits.map(|va_bits| FrameRecords {
        images: &images.set,
        mem,
        va_bits,
        exceptions: exception_entries(session, &images.set),
    });
    let orc = (session.linux.is_some() && !arm64).then(|| Orc::new(session.kernel()));
    let mut unwinders: Vec<&dyn Unwinder> = Vec::new();
    match &orc {
        Some(Ok(orc)) => unwinders.push(orc),
        Some(Err(why)) => writeln!(cx.err, "bt: no ORC tables: {why}")?,
        None => {}
    }
    unwinders.push(&cfi);
    match &frame_records {
        Some(records) => unwinders.push(records),
        None if !session.dump.is_process_core() => unwinders.push(&frame_pointer),
        None => {}
    }
    let mapped = mapped_files(session);
    let mut contexts = Vec::new();
    for Start {
        mut head,
        registers,
        exact,
    } in starts
    {
        crate::interrupt::check()?;
        let stack = unwind::walk(registers, exact, &unwinders);
        head.frames = frames(mem, &images.set, machine, &mapped, &stack, args.frames)?;
        head.stop = stack.stop;
        contexts.push(head);
    }
    let bt = Backtrace {
        contexts,
        lines: args.lines,
    };
    report::document(&bt, args.json, cx.out, cx.paint)?;
    Ok(Flow::Continue)
}

/// An arm64 kernel's virtual address size, VMCOREINFO's `VA_BITS`: which bits of a return address
/// are its authentication code.
fn arm64_va_bits(session: &Session<'_>) -> Result<u32> {
    let info = session.dump.linux_info()?;
    info.and_then(|i| i.arm64?.va_bits).ok_or_else(|| {
        anyhow!("the dump's VMCOREINFO gives no VA_BITS: cannot tell return addresses from their authentication codes")
    })
}

/// Where an arm64 kernel's exception entries are and where their frame record is in the
/// `struct pt_regs` they save, from the vmlinux's symbols and DWARF; `None` when either is
/// missing (their records are then walked as any other).
fn exception_entries(session: &Session<'_>, images: &ImageSet) -> Option<ExceptionEntries> {
    let (_, start) = images.symbol("__entry_text_start")?;
    let (_, end) = images.symbol("__entry_text_end")?;
    let record =
        crate::linux::facts::int(session.kernel(), "&((struct pt_regs *)0)->stackframe").ok()?;
    Some(ExceptionEntries {
        text: (start.address, end.address),
        record: u64::try_from(record).ok()?,
        vectors: images.symbol("vectors").map(|(_, s)| s.address),
    })
}

/// The CPU that panicked, by Linux's `panic_cpu`, when it can be read and one did.
fn panic_cpu(session: &Session<'_>) -> Option<usize> {
    session.linux.as_ref()?;
    crate::linux::facts::panic_cpu(session.kernel())
        .ok()
        .flatten()
}

/// A process core's command name (NT_PRPSINFO), escaped.
fn command_name(session: &Session<'_>) -> Option<String> {
    if !session.dump.is_process_core() {
        return None;
    }
    session
        .dump
        .notes()
        .flatten()
        .find(|n| n.is("CORE", dumpfmt::notes::NT_PRPSINFO))
        .and_then(|n| n.prpsinfo().ok())
        .map(|p| escaped(p.fname.as_bytes()))
}

/// The walked frames as printed: each physical frame's inlined functions first, then its own.
fn frames(
    mem: &dyn Memory,
    images: &ImageSet,
    machine: Machine,
    mapped: &[FileMapping],
    stack: &Stack,
    words: bool,
) -> Result<Vec<Frame>> {
    let mut out = Vec::new();
    for (i, f) in stack.frames.iter().enumerate() {
        crate::interrupt::check()?;
        let at = f.lookup_pc();
        let image = images.image_at(at);
        let mut named = image
            .and_then(|image| image.frames(at).ok())
            .unwrap_or_default();
        let symbol = || {
            images
                .symbolize(at)
                .map(|(_, sym, _)| display_name(&sym.name))
        };
        match named.last_mut() {
            None => named.push(symbols::Frame {
                function: symbol(),
                file: None,
                line: None,
                column: None,
            }),
            // Assembly has lines but no function in DWARF.
            Some(own) if own.function.is_none() => own.function = symbol(),
            Some(_) => {}
        }
        let last = named.len() - 1;
        for (k, n) in named.into_iter().enumerate() {
            out.push(Frame {
                index: out.len(),
                sp: Hex(f.sp),
                pc: Hex(f.pc),
                function: n.function.map(|name| escaped(name.as_bytes())),
                inlined: k < last,
                file: n.file.map(|file| escaped(file.as_bytes())),
                line: n.line,
                image: image.map(|i| escaped(i.path().to_string_lossy().as_bytes())),
                mapped: match image {
                    Some(_) => None,
                    None => mapped
                        .iter()
                        .find(|m| m.start <= f.pc && f.pc < m.end)
                        .map(|m| escaped(m.path.as_bytes())),
                },
                how: f.how,
                exception: f
                    .exception
                    .filter(|_| k == last)
                    .map(|at| exception(mem, images, machine, at)),
                gap: f.gap.clone().filter(|_| k == last),
                words: (words && k == last).then(|| {
                    let next = stack.frames.get(i + 1).map_or(f.sp, |n| n.sp);
                    stack_words(mem, f.sp, next)
                }),
            });
        }
    }
    Ok(out)
}

/// The `struct pt_regs` at `at`, of `machine`'s Linux.
fn exception(mem: &dyn Memory, images: &ImageSet, machine: Machine, at: u64) -> Exception {
    let read = |offset: u64| mem.read_u64(at.wrapping_add(offset)).ok();
    let symbol = |offset: u64| {
        read(offset)
            .and_then(|address| images.symbolize(address))
            .map(|(_, sym, off)| format!("{}+{off}", display_name(&sym.name)))
    };
    let (registers, at_symbols): (Vec<_>, _) = match machine {
        Machine::X86_64 => (
            pt_regs::FIELDS
                .iter()
                .map(|&(name, offset, _)| (name, read(offset).map(Hex)))
                .collect(),
            Interrupted::X86_64 {
                rip_symbol: symbol(pt_regs::IP),
            },
        ),
        Machine::Aarch64 => (
            aarch64_pt_regs::FIELDS
                .iter()
                .map(|&(name, offset)| (name, read(offset).map(Hex)))
                .collect(),
            Interrupted::Aarch64 {
                pc_symbol: symbol(aarch64_pt_regs::PC),
                lr_symbol: symbol(aarch64_pt_regs::LR),
            },
        ),
    };
    Exception {
        address: Hex(at),
        at: at_symbols,
        registers: Named(registers),
    }
}

/// A process core's NT_FILE mappings (none for kernel dumps).
fn mapped_files(session: &Session<'_>) -> Vec<FileMapping> {
    session
        .dump
        .notes()
        .flatten()
        .find(|n| n.is("CORE", dumpfmt::notes::NT_FILE))
        .and_then(|n| n.file_mappings().ok())
        .unwrap_or_default()
}

/// The words in `[from, to)`, at most [`MAX_WORDS`], up to and with the first that cannot be
/// read: past an IRQ stack's end the caller's stack is another one.
fn stack_words(mem: &dyn Memory, from: u64, to: u64) -> Vec<Word> {
    let count = (to.saturating_sub(from) / 8).min(MAX_WORDS);
    let mut words = Vec::new();
    for i in 0..count {
        let address = from + i * 8;
        match mem.read_u64(address) {
            Ok(v) => words.push(Word {
                address: Hex(address),
                value: Some(Hex(v)),
                unreadable: None,
            }),
            Err(e) => {
                words.push(Word {
                    address: Hex(address),
                    value: None,
                    unreadable: Some(e.reason),
                });
                break;
            }
        }
    }
    words
}
