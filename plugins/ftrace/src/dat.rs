//! trace-cmd's trace.dat, version 6 (trace-cmd's `trace-cmd.dat.v6(5)`): the header, the ring
//! buffer's page and event headers as the kernel prints them, every event's format, the
//! kernel's symbols, the `trace_printk` formats the records name, the command names, then each
//! CPU's data pages exactly as they were in memory, page-aligned. `trace-cmd report` reads it
//! as it reads a recording.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use kcrash_plugin::Memory;

use crate::rings::{Instance, COMMIT_MASK, PAGE_SIZE};
use crate::Trace;

/// `trace-cmd`'s magic and the file version this writes.
const MAGIC: &[u8] = b"\x17\x08\x44tracing";
/// Option ids (trace-cmd-private.h).
const OPTION_DONE: u16 = 0;
const OPTION_TRACECLOCK: u16 = 4;
const OPTION_UNAME: u16 = 5;

/// What a written file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub cpus: usize,
    pub pages: usize,
    pub events: usize,
    pub bytes: u64,
    /// Pages that could not be read, one sentence each: left out of the file.
    pub left_out: Vec<String>,
}

/// One symbol for the file's kallsyms: its address, its nm type letter, its name and module.
pub struct Kallsym {
    pub addr: u64,
    pub kind: char,
    pub name: String,
    pub module: Option<String>,
}

/// Writes instance `instance` (empty: the top trace array) of `trace` as a trace.dat to `out`,
/// with `kallsyms` for symbol names and `release` as the recording machine's uname.
pub fn write(
    out: &mut dyn Write,
    trace: &Trace,
    mem: &dyn Memory,
    instance: &str,
    kallsyms: &[Kallsym],
    release: Option<&str>,
) -> io::Result<Written> {
    let inst = trace
        .instances
        .iter()
        .find(|i| i.name == instance)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no trace instance {instance:?}"),
            )
        })?;
    // Every page is read once before anything is written: which can be read (the CPU table
    // gives each CPU's size before its pages), how many events they hold, and the
    // trace_printk formats they name. Then the pages are read again as they are written.
    let survey = survey(trace, mem, instance, inst);
    let mut w = Counted { out, bytes: 0 };
    w.put(MAGIC)?;
    w.put(b"6\0")?;
    w.put(&[0, 8])?; // little-endian, 8-byte longs
    w.put(&(PAGE_SIZE as u32).to_le_bytes())?;
    section(
        &mut w,
        b"header_page\0",
        header_page(inst.data_size).as_bytes(),
    )?;
    section(&mut w, b"header_event\0", HEADER_EVENT.as_bytes())?;
    // The events by system, ftrace's first and apart, as trace-cmd expects them.
    let mut systems: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for f in trace.formats.by_id.values() {
        if f.fields_unknown.is_none() && !f.name.starts_with('<') {
            systems.entry(f.system.as_str()).or_default().push(f.text());
        }
    }
    for texts in systems.values_mut() {
        texts.sort();
    }
    let ftrace = systems.remove("ftrace").unwrap_or_default();
    w.put(&(ftrace.len() as u32).to_le_bytes())?;
    for text in &ftrace {
        w.put(&(text.len() as u64).to_le_bytes())?;
        w.put(text.as_bytes())?;
    }
    w.put(&(systems.len() as u32).to_le_bytes())?;
    for (system, texts) in &systems {
        w.put(system.as_bytes())?;
        w.put(b"\0")?;
        w.put(&(texts.len() as u32).to_le_bytes())?;
        for text in texts {
            w.put(&(text.len() as u64).to_le_bytes())?;
            w.put(text.as_bytes())?;
        }
    }
    let mut syms = String::new();
    for s in kallsyms {
        syms += &match &s.module {
            Some(m) => format!("{:016x} {} {}\t[{m}]\n", s.addr, s.kind, s.name),
            None => format!("{:016x} {} {}\n", s.addr, s.kind, s.name),
        };
    }
    w.put(&(syms.len() as u32).to_le_bytes())?;
    w.put(syms.as_bytes())?;
    let printk = printk_formats(mem, &survey.printk);
    w.put(&(printk.len() as u32).to_le_bytes())?;
    w.put(printk.as_bytes())?;
    let mut cmdlines: Vec<(&i32, &Vec<u8>)> = trace.comms.iter().collect();
    cmdlines.sort();
    // Escaped: a name's own newline would end its line early.
    let cmdlines: String = cmdlines
        .iter()
        .map(|(p, c)| format!("{p} {}\n", kcrash_plugin::escape::escaped(c)))
        .collect();
    w.put(&(cmdlines.len() as u64).to_le_bytes())?;
    w.put(cmdlines.as_bytes())?;
    // Every CPU id up to the highest with a buffer has an entry.
    let cpus = inst.cpu_count();
    w.put(&(cpus as u32).to_le_bytes())?;
    w.put(b"options  \0")?;
    let clock = inst
        .clock_id
        .and_then(|id| trace.clocks.get(id as usize))
        .map_or("local", |(name, _)| name.as_str());
    let clock_option = format!("[{clock}]\0");
    option(&mut w, OPTION_TRACECLOCK, clock_option.as_bytes())?;
    if let Some(release) = release {
        option(
            &mut w,
            OPTION_UNAME,
            format!("Linux {release}\0").as_bytes(),
        )?;
    }
    w.put(&OPTION_DONE.to_le_bytes())?;
    w.put(b"flyrecord\0")?;
    let clock_block = format!("[{clock}]");
    let table_end = w.bytes + cpus as u64 * 16 + 8 + clock_block.len() as u64;
    let mut offset = table_end.div_ceil(PAGE_SIZE) * PAGE_SIZE;
    for pages in &survey.readable {
        let size = pages.len() as u64 * PAGE_SIZE;
        w.put(&(if size == 0 { 0 } else { offset }).to_le_bytes())?;
        w.put(&size.to_le_bytes())?;
        offset += size;
    }
    w.put(&(clock_block.len() as u64).to_le_bytes())?;
    w.put(clock_block.as_bytes())?;
    let pad = table_end.div_ceil(PAGE_SIZE) * PAGE_SIZE - w.bytes;
    w.put(&vec![0u8; pad as usize])?;
    let mut pages = 0;
    let mut bytes = vec![0u8; PAGE_SIZE as usize];
    let commit_at = trace.layout.data_commit.offset as usize;
    for &data in survey.readable.iter().flatten() {
        let mut lost = None;
        match mem.read(data, &mut bytes) {
            // The commit word without the flags the file's reader would act on.
            Ok(()) => {
                let commit = bytes
                    .get(commit_at..commit_at + 8)
                    .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
                if let Some(b) = bytes.get_mut(commit_at..commit_at + 8) {
                    b.copy_from_slice(&(commit & COMMIT_MASK).to_le_bytes());
                }
            }
            // Read a moment ago: only a running kernel's memory can do this.
            Err(e) => {
                bytes.fill(0);
                lost = Some(e);
            }
        }
        w.put(&bytes)?;
        pages += 1;
        if let Some(e) = lost {
            return Err(io::Error::other(format!(
                "page {data:#x} became unreadable while it was written: {e}"
            )));
        }
    }
    w.out.flush()?;
    Ok(Written {
        cpus,
        pages,
        events: survey.events,
        bytes: w.bytes,
        left_out: survey.left_out,
    })
}

/// A writer that counts what it wrote, for the page-aligned offsets.
struct Counted<'a> {
    out: &'a mut dyn Write,
    bytes: u64,
}

impl Counted<'_> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.out.write_all(b)?;
        self.bytes += b.len() as u64;
        Ok(())
    }
}

fn section(w: &mut Counted<'_>, name: &[u8], text: &[u8]) -> io::Result<()> {
    w.put(name)?;
    w.put(&(text.len() as u64).to_le_bytes())?;
    w.put(text)
}

fn option(w: &mut Counted<'_>, id: u16, data: &[u8]) -> io::Result<()> {
    w.put(&id.to_le_bytes())?;
    w.put(&(data.len() as u32).to_le_bytes())?;
    w.put(data)
}

/// The ring buffer's page header, as the kernel prints it in `events/header_page`.
fn header_page(data_size: u64) -> String {
    format!(
        "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
         \tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
         \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
         \tfield: char data;\toffset:16;\tsize:{data_size};\tsigned:1;\n"
    )
}

/// The event header, as the kernel prints it in `events/header_event`.
const HEADER_EVENT: &str = "# compressed entry header\n\
\ttype_len    :    5 bits\n\
\ttime_delta  :   27 bits\n\
\tarray       :   32 bits\n\
\n\
\tpadding     : type == 29\n\
\ttime_extend : type == 30\n\
\ttime_stamp : type == 31\n\
\tdata max type_len  == 28\n";

/// What the pages to write hold, found by reading each once.
struct Survey {
    /// Each CPU's data pages that were read, by address.
    readable: Vec<Vec<u64>>,
    events: usize,
    /// The addresses of the strings `printk_formats` lists: the kernel's own, and those the
    /// bprint and bputs records name (a module's among them).
    printk: BTreeSet<u64>,
    /// Pages that cannot be read, one sentence each.
    left_out: Vec<String>,
}

fn survey(trace: &Trace, mem: &dyn Memory, instance: &str, inst: &Instance) -> Survey {
    // bprint's `fmt` and bputs's `str`: where each record names its text.
    let named: BTreeMap<u16, u32> = trace
        .formats
        .by_id
        .values()
        .filter(|f| f.system == "ftrace" && (f.name == "bprint" || f.name == "bputs"))
        .filter_map(|f| {
            let field = if f.name == "bprint" { "fmt" } else { "str" };
            Some((f.id, f.fields.iter().find(|d| d.name == field)?.offset))
        })
        .collect();
    let mut survey = Survey {
        readable: vec![Vec::new(); inst.cpu_count()],
        events: 0,
        printk: trace.printk_strings(mem).into_iter().collect(),
        left_out: Vec::new(),
    };
    let mut bytes = Vec::new();
    for cpu in &inst.cpus {
        for page in &cpu.pages {
            let (mut events, mut printk) = (0, Vec::new());
            let read = crate::decode_page(
                mem,
                &trace.layout,
                page,
                inst.data_size,
                &mut bytes,
                |raw| {
                    events += 1;
                    let id = raw
                        .data
                        .get(..2)
                        .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
                    if let Some(&at) = named.get(&id) {
                        let at = at as usize;
                        if let Some(word) = raw.data.get(at..at + 8) {
                            printk.push(u64::from_le_bytes(word.try_into().unwrap_or_default()));
                        }
                    }
                },
            );
            match read {
                Ok(_) => {
                    survey.events += events;
                    survey.printk.extend(printk);
                    if let Ok(data) = page.data {
                        survey.readable[cpu.cpu as usize].push(data);
                    }
                }
                Err(e) => survey.left_out.push(format!(
                    "{}cpu{} buffer page {:#x}: {e}",
                    prefix(instance),
                    cpu.cpu,
                    page.bpage
                )),
            }
        }
    }
    survey
}

fn prefix(instance: &str) -> String {
    if instance.is_empty() {
        String::new()
    } else {
        format!("{instance}/")
    }
}

/// The `trace_printk` formats and strings at `addrs`, as the kernel's `printk_formats` file
/// lists them (`0xADDR : "text"`).
fn printk_formats(mem: &dyn Memory, addrs: &BTreeSet<u64>) -> String {
    let mut text = String::new();
    let mut bytes = Vec::new();
    for &addr in addrs {
        if mem.read_cstring(addr, 4096, &mut bytes).is_ok() {
            let mut escaped = String::new();
            for c in String::from_utf8_lossy(&bytes).chars() {
                match c {
                    '\n' => escaped += "\\n",
                    '\t' => escaped += "\\t",
                    '"' => escaped += "\\\"",
                    c => escaped.push(c),
                }
            }
            text += &format!("0x{addr:x} : \"{escaped}\"\n");
        }
    }
    text
}
