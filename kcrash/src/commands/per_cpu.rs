//! crash's per-CPU forms, read alike by `p` and `struct`: `NAME:CPUS` names CPUs' copies of a
//! Linux per-CPU variable, CPUS being `a` (all), a list such as `0,2-3`, or nothing for the
//! current context's CPU; and what a copy that cannot be read prints as in JSON.

use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};

use super::args::{cpu_among, cpu_list, thread_or_task};
use crate::expr::{parse_expr, Expr};
use crate::linux::{facts, percpu};
use crate::report::Hex;
use crate::session::Session;

/// crash's per-CPU forms: `NAME` or `NAME:CPUS` where NAME is a per-CPU variable of the
/// kernel, with its symbol's address and the CPUS as typed. `None` for any other expression;
/// an error for `NAME:CPUS` when NAME is a plain variable.
pub fn per_cpu_name<'t>(
    session: &Session<'_>,
    text: &'t str,
) -> Result<Option<(&'t str, u64, Option<&'t str>)>> {
    let (name, cpus) = match text.split_once(':') {
        // `hosted::KLogs` and `a ? b : c` are expressions.
        Some((name, cpus)) if !cpus.contains(':') => (name.trim(), Some(cpus.trim())),
        Some(_) => return Ok(None),
        None => (text, None),
    };
    // A name as the expression parser reads one.
    if !matches!(parse_expr(name), Ok(Expr::Name(n)) if n == name) {
        return Ok(None);
    }
    let symbol = session
        .kernel()
        .image
        .filter(|_| session.linux.is_some())
        .and_then(|image| image.symbol(name))
        .filter(percpu::is_per_cpu);
    match (symbol, cpus) {
        (Some(symbol), _) => Ok(Some((name, symbol.address, cpus))),
        (None, Some(_)) => {
            bail!("{name} is not a per-CPU variable of a Linux kernel: NAME:CPUS needs one")
        }
        (None, None) => Ok(None),
    }
}

/// The CPU of the current context: the task `set` chose, else the CPU that panicked.
fn context_cpu(session: &Session<'_>, context: Option<u64>) -> Result<usize> {
    let cpu = match context {
        Some(id) => {
            let task = thread_or_task(session, id)?.task;
            let cpu = task
                .map(|t| t.cpu)
                .ok_or_else(|| anyhow!("the context is no task"))?;
            cpu.map_err(|e| anyhow!("the context's CPU: {e}"))? as usize
        }
        None => facts::panic_cpu(session.kernel())?.ok_or_else(|| {
            anyhow!("no CPU panicked and set chose no task: name the CPUs (NAME:0, NAME:a)")
        })?,
    };
    Ok(cpu)
}

/// The CPUs `spec` names among `count`: crash's list, or for an empty one the CPU of the
/// current context (`context`, the task `set` chose, else the CPU that panicked).
pub fn cpus_of(
    session: &Session<'_>,
    context: Option<u64>,
    spec: &str,
    count: usize,
) -> Result<Vec<usize>> {
    match spec {
        "" => Ok(vec![cpu_among(context_cpu(session, context)?, count)?]),
        spec => cpu_list(spec, count),
    }
}

/// A CPU's copy that could not be read, as one JSON object: its type, address, variable, CPU
/// and why.
pub fn unread_json(ty: &str, address: u64, name: &str, cpu: usize, why: &str) -> Value {
    json!({"type": ty, "address": Hex(address), "name": name, "cpu": cpu, "error": why})
}

/// The command's failure after every copy printed, when `unread` of `cpus` could not be read.
pub fn unread_copies(unread: usize, cpus: usize, name: &str) -> Result<()> {
    if unread > 0 {
        bail!("{unread} of {cpus} CPUs' copies of {name} could not be read (marked above)");
    }
    Ok(())
}
