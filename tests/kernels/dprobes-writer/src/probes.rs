//! The probes both test kernels run, on whatever machine they run: each fills its header from
//! the machine, logs its data items (reading memory through the machine's [`Reader`]), and
//! gives the message its template should make, formatted here by `core::fmt`.

use core::ffi::CStr;
use core::fmt::{self, Write};

use crate::{
    Dump, Header, Probe, Reader, F_CPU, F_CS, F_EIP, F_MAJOR, F_MINOR, F_NAME, F_PID, F_TSC,
};

/// Every header item.
pub const ALL_ITEMS: u32 = 0x07ff;

/// What a kernel tells the probes about itself.
///
/// # Safety
/// Probes on one machine value run on one processor, one at a time: the processor's log
/// buffer and trace buffer have no other writer.
pub unsafe trait Machine {
    /// The processor the probes run on.
    fn cpu(&self) -> usize;
    /// The header of a probe for `(major, minor)` in task `task`, every item filled; `flags`
    /// is set by the caller.
    fn header(&self, task: usize) -> Header<'static>;
    /// The tasks' names, NUL-terminated, in memory the probes read.
    fn task_name(&self, task: usize) -> &'static CStr;
    /// How many tasks there are.
    fn tasks(&self) -> usize;
    /// The trace daemon's clock.
    fn now(&self) -> u64;
    /// Where oracle lines go.
    fn console(&self) -> impl Write;
}

/// Enters a probe for `(major, minor)` with the header items `flags` selects.
pub fn enter(m: &impl Machine, flags: u32, major: u32, minor: u32, task: usize) -> Probe<'static> {
    let header = Header {
        flags: flags | F_MAJOR | F_MINOR,
        major,
        minor,
        ..m.header(task)
    };
    // SAFETY: `Machine`'s contract.
    unsafe { Probe::enter(m.cpu(), header) }
}

/// Commits a probe's record, with the name and message its template gives.
pub fn exit(m: &impl Machine, p: Probe, name: &str, msg: fmt::Arguments) {
    p.exit(m.now(), name, msg, &mut m.console());
}

/// Paths the `open` probe logs: static strings of the image.
const PATHS: [&CStr; 4] = [c"/etc/motd", c"/var/log/messages", c"/dev/ttyS0", c""];

/// One round of every probe with successful reads: `i` varies the values and the header items.
pub fn round(m: &impl Machine, r: &impl Reader, i: u64) {
    let flags = [ALL_ITEMS, 0, F_PID | F_TSC, F_NAME | F_CPU][i as usize % 4];
    let task = i as usize % m.tasks();
    let path = PATHS[i as usize % PATHS.len()];
    let fd = 3 + i % 5;
    let mut p = enter(m, flags, 1, 1, task);
    p.log("fd", 4, fd)
        .log_arf("path", r, path.as_ptr() as u64, 64);
    let text = path.to_str().unwrap_or("?");
    exit(m, p, "open", format_args!("fd={fd} path={text}\n"));

    let buf = *b"klog\x00\x01\xfe line";
    let count = 1 + i % buf.len() as u64;
    let mut p = enter(m, flags, 1, 2, task);
    p.log("fd", 4, fd)
        .log("count", 2, count)
        .log_mrf("buf", r, buf.as_ptr() as u64, count as u16);
    let data = &buf[..count as usize];
    exit(
        m,
        p,
        "read",
        format_args!("fd={fd} count={count} buf={}\n", Dump(data)),
    );

    let off = -(i as i64) * 4096 + 17;
    let whence = b"SCE"[i as usize % 3];
    let mut p = enter(m, flags, 1, 3, task);
    p.log("fd", 4, fd)
        .log_signed("off", 8, off)
        .log_char("whence", whence);
    let whence = whence as char;
    exit(
        m,
        p,
        "seek",
        format_args!("fd={fd} off={off} whence={whence}\n"),
    );

    let args = [0x5401u32, i as u32, 0xdead];
    let words = 1 + i as usize % 3;
    let mut p = enter(m, flags, 1, 5, task);
    p.log("fd", 4, fd)
        .log_mrf_words("args", r, args.as_ptr() as u64, words as u16);
    exit(
        m,
        p,
        "ioctl",
        format_args!("fd={fd} args={}\n", Words(&args[..words])),
    );

    let from = m.task_name(task);
    let to = m.task_name((task + 1) % m.tasks());
    let prio = i % 40;
    let mut p = enter(m, flags | F_CS | F_EIP, 2, 1, task);
    p.log_arf("from", r, from.as_ptr() as u64, 16)
        .log_arf("to", r, to.as_ptr() as u64, 16)
        .log("prio", 1, prio);
    let (from, to) = (from.to_str().unwrap_or("?"), to.to_str().unwrap_or("?"));
    exit(
        m,
        p,
        "switch",
        format_args!("from={from} to={to} prio={prio}\n"),
    );
}

/// `count` small `tick` records.
pub fn ticks(m: &impl Machine, count: u64) {
    for n in 0..count {
        let mut p = enter(m, F_TSC, 2, 3, n as usize % m.tasks());
        p.log("n", 8, n);
        exit(m, p, "tick", format_args!("n={n}\n"));
    }
}

/// Reads at `unmapped`, an address nothing maps, and at a string that is there: `fault`
/// records with the flat fault token and with the data, and an `open` whose path faults.
pub fn flat_faults(m: &impl Machine, r: &impl Reader, unmapped: u64) {
    let page = *b"page contents, read in a probe\0";
    for va in [unmapped, page.as_ptr() as u64, unmapped + 0x7ff] {
        let mut p = enter(m, F_PID, 1, 4, 1 % m.tasks());
        p.log_hex("va", 8, va).log_mrf("data", r, va, 16);
        if va == unmapped || va == unmapped + 0x7ff {
            let msg = format_args!("va={va:016x} data=<faulted read (flat address) at {va:#x}>\n");
            exit(m, p, "fault", msg);
        } else {
            let msg = format_args!("va={va:016x} data={}\n", Dump(&page[..16]));
            exit(m, p, "fault", msg);
        }
    }
    let at = unmapped + 0x10;
    let mut p = enter(m, F_NAME, 1, 1, 2 % m.tasks());
    p.log("fd", 4, 9).log_arf("path", r, at, 64);
    let msg = format_args!("fd=9 path=<faulted read (flat address) at {at:#x}>\n");
    exit(m, p, "open", msg);
    core::hint::black_box(&page);
}

/// `%4x` each, as `%r(%4x)` formats them.
struct Words<'a>(&'a [u32]);

impl fmt::Display for Words<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.iter().try_for_each(|w| write!(f, "{w:08x}"))
    }
}
