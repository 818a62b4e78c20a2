//! What `sys` says about a Linux kernel: its utsname, CPUs, memory, clock and the panic, each
//! read from the kernel's own variables (crash's `sys` is the model).

use dumpfmt::VmcoreInfo;

use crate::error::{Context, Error, Result};
use crate::escape::escaped;
use crate::expr::{parse_expr, Evaluator};
use crate::linux::printk::Ring;
use crate::linux::{kaslr, Kernel};

/// `struct new_utsname`: six 65-byte strings, a user-space ABI.
const UTS_LEN: u64 = 65;
const UTS_NODENAME: u64 = 1;
const UTS_RELEASE: u64 = 2;
const UTS_VERSION: u64 = 3;
const UTS_MACHINE: u64 = 4;

/// `init_uts_ns.name`, from VMCOREINFO's SYMBOL(init_uts_ns) and OFFSET(uts_namespace.name),
/// else from the image.
pub struct Utsname {
    pub nodename: String,
    pub release: String,
    pub version: String,
    pub machine: String,
}

impl Utsname {
    pub fn read(kernel: Kernel<'_>, info: Option<&VmcoreInfo<'_>>) -> Result<Utsname> {
        let from_info = info.and_then(|i| {
            // A sum past 2^64 is no address: the image is asked instead.
            i.symbol("init_uts_ns")
                .ok()??
                .checked_add(i.offset("uts_namespace.name").ok()??)
        });
        let name = match from_info {
            Some(name) => name,
            None => {
                let ev = evaluator(kernel)?;
                let e = parse_expr("&init_uts_ns.name").map_err(|e| Error::Usage(e.to_string()))?;
                ev.scalar(&ev.eval(&e)?)?.0
            }
        };
        let field = |n: u64| -> Result<String> {
            let mut out = Vec::new();
            let at = name.checked_add(n * UTS_LEN).ok_or_else(|| {
                Error::Damaged(format!("init_uts_ns.name at {name:#x} runs past 2^64"))
            })?;
            kernel
                .mem
                .read_cstring(at, UTS_LEN as usize, &mut out)
                .context("init_uts_ns")?;
            Ok(escaped(&out))
        };
        Ok(Utsname {
            nodename: field(UTS_NODENAME)?,
            release: field(UTS_RELEASE)?,
            version: field(UTS_VERSION)?,
            machine: field(UTS_MACHINE)?,
        })
    }
}

fn evaluator<'a>(kernel: Kernel<'a>) -> Result<Evaluator<'a>> {
    let image = kernel
        .image
        .ok_or_else(|| Error::Missing("needs the vmlinux with DWARF".into()))?;
    Ok(Evaluator::new(image, kernel.mem))
}

/// Has the units that define `functions` read, where the variables a reader is about to name
/// are defined: a large vmlinux with no name index at hand then need not build one. A name
/// the kernel lacks costs nothing but the full index later.
pub fn consult(kernel: Kernel<'_>, functions: &[&str]) {
    if let Some(image) = kernel.image {
        for f in functions {
            image.consult(f);
        }
    }
}

/// The integer value of a C expression over the kernel's variables.
pub fn int(kernel: Kernel<'_>, expr: &str) -> Result<i64> {
    let ev = evaluator(kernel)?;
    let e = parse_expr(expr).map_err(|e| Error::Usage(e.show(expr)))?;
    let v = ev.eval(&e).context(expr)?;
    Ok(ev.scalar(&v).context(expr)?.0 as i64)
}

/// CPUs online at the crash (`__num_online_cpus`; a panic takes the others offline) and
/// possible (`nr_cpu_ids`).
pub fn cpus(kernel: Kernel<'_>) -> Result<(i64, i64)> {
    consult(kernel, &["set_cpu_online", "setup_nr_cpu_ids"]);
    Ok((
        int(kernel, "__num_online_cpus.counter")?,
        int(kernel, "nr_cpu_ids")?,
    ))
}

/// The CPU that panicked (`panic_cpu`, which panic sets before it stops the others), or None
/// when no CPU had (-1, PANIC_CPU_INVALID).
pub fn panic_cpu(kernel: Kernel<'_>) -> Result<Option<usize>> {
    consult(kernel, &["panic"]);
    let cpu = int(kernel, "panic_cpu.counter")?;
    Ok(usize::try_from(cpu).ok())
}

/// Bytes of RAM: every online node's `node_present_pages`, as crash counts it.
pub fn memory(kernel: Kernel<'_>, page_size: u64) -> Result<u64> {
    consult(kernel, &["numa_set_node"]);
    let nodes = int(kernel, "sizeof(node_data) / sizeof(node_data[0])")?;
    let mut pages = 0u64;
    for i in 0..nodes.clamp(0, 1 << 10) {
        if int(kernel, &format!("node_data[{i}]"))? != 0 {
            let node = int(kernel, &format!("node_data[{i}]->node_present_pages"))? as u64;
            pages = pages.checked_add(node).ok_or_else(|| {
                Error::Damaged(format!("node {i}'s {node} pages take the count past 2^64"))
            })?;
        }
    }
    pages.checked_mul(page_size).ok_or_else(|| {
        Error::Damaged(format!(
            "{pages} pages of {page_size} bytes are more than 2^64 bytes"
        ))
    })
}

/// Seconds since the epoch at the timekeeper's last tick (`xtime_sec`).
pub fn crash_time(kernel: Kernel<'_>) -> Result<i64> {
    int(kernel, "tk_core.timekeeper.xtime_sec")
}

/// Nanoseconds since boot, as crash counts them: jiffies since INITIAL_JIFFIES over HZ. HZ
/// comes from INITIAL_JIFFIES itself, which is `(u32)(-300 * HZ)` and is jiffies_64's
/// initial value in the image file.
pub fn uptime_nsec(kernel: Kernel<'_>) -> Result<i64> {
    let missing = |what: &str| Error::Missing(what.into());
    let image = kernel.image.ok_or_else(|| missing("needs the vmlinux"))?;
    let sym = image
        .symbol("jiffies_64")
        .ok_or_else(|| missing("the image has no jiffies_64"))?;
    let link = sym.address.wrapping_sub(image.load_bias());
    let initial = kaslr::image_bytes(image, link, 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| missing("jiffies_64 is not in the image file"))?;
    let hz = (1u64 << 32).wrapping_sub(initial) / 300;
    if !(1..=100_000).contains(&hz) || (1u64 << 32).wrapping_sub(initial) % 300 != 0 {
        return Err(Error::Damaged(format!(
            "jiffies_64 starts at {initial:#x}, not INITIAL_JIFFIES: HZ unknown"
        )));
    }
    let now = kernel.mem.read_u64(sym.address).context("jiffies_64")?;
    let ticks = now.wrapping_sub(initial);
    Ok((u128::from(ticks) * 1_000_000_000 / u128::from(hz)).min(i64::MAX as u128) as i64)
}

/// What the kernel said about the crash: the last "Kernel panic - not syncing" line of the
/// log, else the last Oops, BUG or general protection fault.
pub fn panic_message(ring: &Ring) -> Option<String> {
    let mut panic = None;
    let mut oops = None;
    for r in ring.records() {
        let text = String::from_utf8_lossy(&r.text);
        let Some(first) = text.lines().next() else {
            continue;
        };
        if is_panic(first) {
            panic = Some(first.trim().to_owned());
        } else if is_oops(first) {
            oops = Some(first.trim().to_owned());
        }
    }
    panic.or(oops)
}

/// Whether a log line is the kernel's panic message (not the `---[ end Kernel panic` trailer).
pub fn is_panic(line: &str) -> bool {
    line.contains("Kernel panic - not syncing") && !line.starts_with("---[")
}

/// Whether a log line opens an Oops-like report: BUG, Oops, a protection fault.
pub fn is_oops(line: &str) -> bool {
    const OOPS: [&str; 4] = [
        "BUG: ",
        "Oops: ",
        "general protection fault",
        "kernel BUG at",
    ];
    OOPS.iter().any(|o| line.starts_with(o))
}

/// `Sun Nov 22 04:51:35 UTC 2026` for seconds since the epoch (proleptic Gregorian, UTC).
pub fn date(secs: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Days to civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{} {} {:>2} {:02}:{:02}:{:02} UTC {year}",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1).clamp(0, 11) as usize],
        day,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `00:00:03` (days first when there are any), as crash prints an uptime.
pub fn uptime(nanos: i64) -> String {
    let s = nanos.max(0) / 1_000_000_000;
    let hms = format!("{:02}:{:02}:{:02}", s / 3600 % 24, s / 60 % 60, s % 60);
    match s / 86_400 {
        0 => hms,
        d => format!("{d} days, {hms}"),
    }
}

/// A Linux signal's name by number (x86_64), or `signal` for one without a usual name.
pub fn signal_name(n: i32) -> &'static str {
    match n {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        31 => "SIGSYS",
        _ => "signal",
    }
}
