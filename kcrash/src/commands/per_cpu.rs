//! crash's per-CPU forms, read alike by `p` and `struct`: `NAME:CPUS` names CPUs' copies of a
//! Linux per-CPU variable, CPUS being `a` (all), a list such as `0,2-3`, or nothing for the
//! current context's CPU; and how the copies are shown, one that cannot be read marked in its
//! place.

use std::io::{self, Write};

use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};

use super::args::{cpu_among, cpu_list, thread_or_task};
use crate::expr::{parse_expr, Expr};
use crate::linux::{facts, percpu};
use crate::report::{self, Hex};
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

/// A copy's JSON object, `body`, with the variable's name and the CPU.
pub fn tagged(mut body: Value, name: &str, cpu: usize) -> Value {
    if let Some(object) = body.as_object_mut() {
        object.insert("name".into(), json!(name));
        object.insert("cpu".into(), json!(cpu));
    }
    body
}

/// The copies of one per-CPU variable a command shows, counting those it could not read.
pub struct Shown<'a> {
    name: &'a str,
    /// The variable's type, as JSON names it.
    ty: &'a str,
    json: bool,
    shown: usize,
    unread: usize,
}

impl<'a> Shown<'a> {
    pub fn new(name: &'a str, ty: &'a str, json: bool) -> Self {
        Shown {
            name,
            ty,
            json,
            shown: 0,
            unread: 0,
        }
    }

    /// Shows CPU `cpu`'s copy, at `address`, with `show`. A copy `show` could not read is
    /// marked in its place (`text` in text, an object with `error` in JSON) and the others still
    /// show; an error writing the output ends the command.
    pub fn copy(
        &mut self,
        (cpu, address): (usize, u64),
        out: &mut dyn Write,
        show: impl FnOnce(&mut dyn Write) -> Result<()>,
        text: impl FnOnce(&anyhow::Error) -> String,
    ) -> Result<()> {
        self.shown += 1;
        let Err(e) = show(out) else {
            return Ok(());
        };
        if e.downcast_ref::<io::Error>().is_some() {
            return Err(e);
        }
        self.unread += 1;
        if self.json {
            let body = json!({"type": self.ty, "address": Hex(address), "name": self.name,
                "cpu": cpu, "error": e.to_string()});
            report::json_line(&body, out)?;
        } else {
            writeln!(out, "{}", text(&e))?;
        }
        Ok(())
    }

    /// The command's failure when a copy could not be read, after every copy was shown.
    pub fn finish(self) -> Result<()> {
        if self.unread > 0 {
            bail!(
                "{} of {} CPUs' copies of {} could not be read (marked above)",
                self.unread,
                self.shown,
                self.name
            );
        }
        Ok(())
    }
}
