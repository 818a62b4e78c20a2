//! `mod`: the dump's loaded kernel modules, and loading a module's `.ko` (symbols and DWARF) at
//! the addresses its sections have in the dump, as crash's `mod -s` / `mod -S` do.

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use clap::Parser;
use serde::Serialize;

use super::{Context, Flow};
use crate::linux::ko::{find_ko, find_kos};
use crate::linux::modules::modules;
use crate::paint::Paint;
use crate::report::{self, Hex, Report};
use crate::session::Session;

/// List the kernel's loaded modules (newest first, as the kernel's list holds them): the
/// `struct module`, name, base and size of its code, taint letters (as /proc/modules), and
/// the `.ko` loaded for it. With -s or -S, load modules' `.ko` files: their symbols and DWARF
/// then serve `sym`, `p`, `klog` at the addresses the module was loaded at.
#[derive(Parser, Debug)]
#[command(name = "mod", no_binary_name = true, disable_version_flag = true)]
#[command(after_help = "\
A .ko given on kcrash's command line (kcrash vmcore vmlinux klogtest.ko) is loaded as by
mod -s at start-up; its module name is the file's name without .ko, dashes as underscores.
Compressed modules (.ko.xz, .ko.zst) must be decompressed first.

Examples:
  mod
  mod -s klogtest ./klogtest.ko
  mod -s klogtest                      (looks in /lib/modules/RELEASE)
  mod -S ./build                       (every module whose NAME.ko is under ./build)
  mod --json | jq '.modules[].name'")]
pub struct Args {
    /// Load module NAME's .ko: FILE, or NAME.ko found under /lib/modules/RELEASE.
    #[arg(short = 's', value_names = ["NAME", "FILE"], num_args = 1..=2)]
    load: Option<Vec<String>>,
    /// Load every module whose NAME.ko is under DIR (default /lib/modules/RELEASE).
    #[arg(short = 'S', value_name = "DIR", num_args = 0..=1)]
    load_all: Option<Vec<String>>,
    /// One JSON document.
    #[arg(long)]
    json: bool,
}

/// `/lib/modules/RELEASE`, the release from the dump.
fn default_dir(session: &Session<'_>) -> Result<PathBuf> {
    let info = session.dump.vmcoreinfo()?;
    let release = match info.as_ref().and_then(|i| i.osrelease()) {
        Some(r) => r.to_owned(),
        None => crate::linux::facts::Utsname::read(session.kernel(), None)?.release,
    };
    Ok(PathBuf::from("/lib/modules").join(release))
}

pub fn run(cx: &mut Context<'_, '_>, argv: &[String]) -> Result<Flow> {
    let args = Args::try_parse_from(argv)?;
    let session = cx.session;
    // A live kernel places a .ko from /sys/module without a vmlinux; listing needs one.
    let live_load = session.dump.is_live() && args.load.is_some();
    if session.linux.is_none() && !live_load {
        bail!("mod needs a Linux kernel dump and its vmlinux");
    }
    if let Some(load) = &args.load {
        let name = &load[0];
        let file = match load.get(1) {
            Some(f) => PathBuf::from(f),
            None => {
                let dir = default_dir(session)?;
                find_ko(&dir, name)
                    .ok_or_else(|| anyhow!("{name}.ko is not under {}", dir.display()))?
            }
        };
        session.load_module(name, &file)?;
        writeln!(cx.out, "{name}: symbols and DWARF from {}", file.display())?;
        return Ok(Flow::Continue);
    }
    if let Some(dir) = &args.load_all {
        let dir = match dir.first() {
            Some(d) => PathBuf::from(d),
            None => default_dir(session)?,
        };
        let mut found = Vec::new();
        find_kos(&dir, &mut found);
        for m in modules(session.kernel())? {
            match found.iter().find(|(n, _)| *n == m.name) {
                Some((_, file)) => match session.load_module(&m.name, file) {
                    Ok(_) => writeln!(cx.out, "{}: {}", m.name, file.display())?,
                    Err(e) => writeln!(cx.err, "mod: {e}")?,
                },
                None => writeln!(cx.err, "mod: {}.ko is not under {}", m.name, dir.display())?,
            }
        }
        return Ok(Flow::Continue);
    }
    list(cx, args.json)
}

/// `mod`: the kernel's module list.
#[derive(Serialize)]
struct Modules {
    modules: Vec<Row>,
}

#[derive(Serialize)]
struct Row {
    /// The `struct module`.
    module: Hex,
    name: String,
    base: Hex,
    size: u64,
    taints: String,
    /// The `.ko` loaded for it.
    object: Option<String>,
}

impl Report for Modules {
    fn text(&self, out: &mut dyn Write, _: Paint) -> io::Result<()> {
        writeln!(
            out,
            "{:>16}  {:<20} {:>16}  {:>8}  {:<5}  OBJECT FILE",
            "MODULE", "NAME", "BASE", "SIZE", "TAINT"
        )?;
        for m in &self.modules {
            writeln!(
                out,
                "{:016x}  {:<20} {:016x}  {:>8}  {:<5}  {}",
                m.module.0,
                m.name,
                m.base.0,
                m.size,
                m.taints,
                m.object.as_deref().unwrap_or("(not loaded)")
            )?;
        }
        Ok(())
    }
}

fn list(cx: &mut Context<'_, '_>, json: bool) -> Result<Flow> {
    let session = cx.session;
    let images = session.images();
    let modules = modules(session.kernel())?
        .into_iter()
        .map(|m| Row {
            module: Hex(m.addr),
            taints: m.taint_letters(),
            object: images
                .modules()
                .find(|(name, _)| *name == m.name)
                .map(|(_, image)| image.path().display().to_string()),
            name: m.name,
            base: Hex(m.base),
            size: m.size,
        })
        .collect();
    report::document(&Modules { modules }, json, cx.out, cx.paint)?;
    Ok(Flow::Continue)
}
