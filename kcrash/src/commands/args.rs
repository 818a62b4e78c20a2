//! The argument forms every command reads alike: numbers, addresses and symbols.

use anyhow::{anyhow, bail, Result};
use symbols::{Image, Symbol};

use crate::linux::tasks::{tasks, Task};
use crate::session::Session;
use crate::symbolize::lookup;
use crate::unwind::Kind;

/// A count or an id: decimal, or hex with 0x (clap's `value_parser` form).
pub fn number(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("{s:?} is not a number: {e}"))
}

/// The CPUs crash's cpuspec names among `count`, each once and in ascending order, as crash
/// reads it into a CPU mask: `a` or `all` every one, else a list of numbers and ranges
/// (`1,3,5-7`).
pub fn cpu_list(spec: &str, count: usize) -> Result<Vec<usize>> {
    if spec == "a" || spec == "all" {
        return Ok((0..count).collect());
    }
    let mut named = vec![false; count];
    for part in spec.split(',') {
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        let (first, last) = (cpu(first, count)?, cpu(last, count)?);
        if first > last {
            bail!("{part:?}: the range runs backwards");
        }
        named[first..=last].fill(true);
    }
    Ok((0..count).filter(|&c| named[c]).collect())
}

/// CPU number `text` among `count`.
fn cpu(text: &str, count: usize) -> Result<usize> {
    let n: usize = text
        .trim()
        .parse()
        .map_err(|_| anyhow!("{text:?} is not a CPU number (a CPU list is 1,3,5-7; all is a)"))?;
    cpu_among(n, count)
}

/// CPU `n`, if it is among `count`.
pub fn cpu_among(n: usize, count: usize) -> Result<usize> {
    if n >= count {
        bail!(
            "no CPU {n}: the dump's CPUs are 0-{}",
            count.saturating_sub(1)
        );
    }
    Ok(n)
}

/// A PID (decimal, up to ten digits) or a task's address (hex, with or without 0x), as crash's
/// `bt`, `set` and `task` take them.
pub fn pid_or_task(s: &str) -> Result<u64, String> {
    if s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map_err(|e| format!("{s:?} is not a PID: {e}"));
    }
    hex(s).ok_or_else(|| format!("{s:?} is neither a PID nor a task address"))
}

/// A thread or task named on the command line: a process core's thread by its id, or a Linux
/// task by PID or `task_struct` address (a kernel address is a task, as crash takes it).
pub struct Named {
    /// crash's line for it: `PID: 1  TASK: ffff…  CPU: 1  COMMAND: "init"`.
    pub header: String,
    /// The Linux task.
    pub task: Option<Task>,
}

/// Kernel addresses start here (x86_64's upper half).
const KERNEL: u64 = 0xffff_8000_0000_0000;

/// The task whose address or PID is `id`.
pub fn find_task(tasks: &[Task], id: u64) -> Option<&Task> {
    tasks
        .iter()
        .find(|t| t.addr == id || (id < KERNEL && t.pid.as_ref().is_ok_and(|&p| p as u64 == id)))
}

pub fn thread_or_task(session: &Session<'_>, id: u64) -> Result<Named> {
    if session.linux.is_some() {
        let list = tasks(session.kernel())?;
        let task = find_task(&list.tasks, id)
            .cloned()
            .ok_or_else(|| anyhow!("no task {id} in the dump (ps lists them)"))?;
        return Ok(Named {
            header: task_header(&task),
            task: Some(task),
        });
    }
    let mut warnings = Vec::new();
    let thread = crate::unwind::contexts(session.dump, &mut warnings)
        .into_iter()
        .find(|c| matches!(c.kind, Kind::Thread(t) if u64::try_from(t) == Ok(id)));
    match thread {
        Some(_) => Ok(Named {
            header: format!("PID: {id}"),
            task: None,
        }),
        None if session.dump.is_process_core() => {
            bail!("no thread {id} in the core (bt -a shows every one)")
        }
        None => {
            bail!("a task needs a Linux kernel dump and its vmlinux; here a CPU is chosen by bt -c")
        }
    }
}

/// crash's line for a task: `PID: 1  TASK: ffff…  CPU: 1  COMMAND: "init"`, `?` for a field
/// that could not be read.
pub fn task_header(task: &Task) -> String {
    let known = |v: Option<String>| v.unwrap_or_else(|| "?".into());
    format!(
        "PID: {}  TASK: {:x}  CPU: {}  COMMAND: \"{}\"",
        known(task.pid.as_ref().ok().map(i32::to_string)),
        task.addr,
        known(task.cpu.as_ref().ok().map(u32::to_string)),
        known(task.comm.as_ref().ok().cloned()),
    )
}

/// An address in hex, with or without 0x (crash's habit).
pub fn hex(text: &str) -> Option<u64> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// The session's image, which symbol and type commands need.
pub fn image<'s>(session: &'s Session<'_>) -> Result<&'s Image> {
    session
        .image
        .as_deref()
        .ok_or_else(|| anyhow!("no image: give the kernel image or program for symbols"))
}

/// An address given as hex, a symbol (of the image or a loaded module), or SYMBOL+OFFSET
/// (offset hex with 0x, or decimal). A word that is both a symbol and hex (`add`) is the symbol.
pub fn address(session: &Session<'_>, text: &str) -> Result<u64> {
    Ok(named_address(session, text)?.0)
}

/// [`address`], with the symbol that named it when a symbol did.
pub fn named_address(session: &Session<'_>, text: &str) -> Result<(u64, Option<Symbol>)> {
    if text.starts_with("0x") || text.starts_with("0X") {
        let addr = hex(text).ok_or_else(|| anyhow!("{text}: not a hex address"))?;
        return Ok((addr, None));
    }
    let (name, offset) = match text.rsplit_once('+') {
        Some((name, off)) => (
            name,
            number(off).map_err(|_| anyhow!("{text}: {off:?} is not an offset"))?,
        ),
        None => (text, 0),
    };
    if let Some(sym) = session
        .images()
        .set
        .images()
        .iter()
        .find_map(|i| lookup(i, name))
    {
        return Ok((sym.address.wrapping_add(offset), Some(sym)));
    }
    if offset == 0 {
        if let Some(addr) = hex(text) {
            return Ok((addr, None));
        }
    }
    match &session.image {
        Some(_) => bail!("{name}: no such symbol, and not a hex address"),
        None => bail!("{name}: not a hex address (no image for symbols)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_read_as_crash_reads_them() {
        assert_eq!(cpu_list("a", 3).unwrap(), [0, 1, 2]);
        assert_eq!(cpu_list("all", 2).unwrap(), [0, 1]);
        assert_eq!(cpu_list("2,0-1", 4).unwrap(), [0, 1, 2]);
        assert_eq!(cpu_list("1,1,0-1,1", 4).unwrap(), [0, 1]);
        assert_eq!(cpu_list(" 3 ", 4).unwrap(), [3]);
        for (spec, why) in [
            ("4", "no CPU 4: the dump's CPUs are 0-3"),
            ("2-1", "\"2-1\": the range runs backwards"),
            ("x", "\"x\" is not a CPU number"),
            ("", "\"\" is not a CPU number"),
            ("1,,2", "\"\" is not a CPU number"),
            ("-1", "\"\" is not a CPU number"),
        ] {
            let e = cpu_list(spec, 4).unwrap_err().to_string();
            assert!(e.starts_with(why), "{spec:?}: {e}");
        }
    }

    #[test]
    fn numbers_and_hex() {
        assert_eq!(number("42"), Ok(42));
        assert_eq!(number("0x2a"), Ok(42));
        assert!(number("2a").is_err());
        assert!(number("").is_err());
        assert_eq!(hex("2a"), Some(42));
        assert_eq!(hex("0X2A"), Some(42));
        assert_eq!(hex("0x"), None);
        assert_eq!(hex("+1"), None);
        assert_eq!(hex("1ffffffffffffffff"), None);
    }
}
