//! Per-CPU variables (`DEFINE_PER_CPU`): CPU n's copy of one is at the variable's address plus
//! `__per_cpu_offset[n]`, for each possible CPU below `nr_cpu_ids`.

use symbols::{Image, Symbol};

use crate::error::{Context, Error, Result};
use crate::linux::facts::{consult, int};
use crate::linux::Kernel;

/// Linux's largest NR_CPUS: a CPU count beyond it is no count.
const MAX_CPUS: i64 = 1 << 13;

/// Where each possible CPU's per-CPU area is.
#[derive(Debug, Clone)]
pub struct PerCpu {
    /// `__per_cpu_offset[n]` for each CPU n below `nr_cpu_ids`.
    offsets: Vec<u64>,
}

impl PerCpu {
    /// Each possible CPU's offset. A kernel built without SMP has no `__per_cpu_offset`: its one
    /// CPU's variables are where the image says.
    pub fn read(kernel: Kernel<'_>) -> Result<PerCpu> {
        let image = vmlinux(kernel)?;
        if image.symbol("__per_cpu_offset").is_none() {
            return Ok(PerCpu { offsets: vec![0] });
        }
        // The units that define the table and the count: x86 defines the table with its
        // setup_per_cpu_areas, the other architectures in mm/percpu.c.
        consult(
            kernel,
            &[
                "setup_per_cpu_areas",
                "pcpu_setup_first_chunk",
                "setup_nr_cpu_ids",
            ],
        );
        let table = int(kernel, "&__per_cpu_offset")?;
        let cpus = int(kernel, "nr_cpu_ids")?;
        let room = int(
            kernel,
            "sizeof(__per_cpu_offset) / sizeof(__per_cpu_offset[0])",
        )?;
        // A declaration without its bound (`extern unsigned long __per_cpu_offset[]`) has size
        // 0: the bound is then unknown, not 0.
        let room = if room == 0 { MAX_CPUS } else { room };
        if !(1..=room.min(MAX_CPUS)).contains(&cpus) {
            return Err(Error::Damaged(format!(
                "nr_cpu_ids is {cpus}, not a CPU count (__per_cpu_offset has {room})"
            )));
        }
        let offsets = (0..cpus as u64)
            .map(|cpu| {
                kernel
                    .mem
                    .read_u64((table as u64).wrapping_add(cpu * 8))
                    .with_context(|| format!("__per_cpu_offset[{cpu}]"))
            })
            .collect::<Result<_>>()?;
        Ok(PerCpu { offsets })
    }

    /// How many CPUs have an area: the possible ones below `nr_cpu_ids`.
    pub fn count(&self) -> usize {
        self.offsets.len()
    }

    /// Where CPU `cpu`'s copy of the per-CPU variable at `base` is; `None` past [`PerCpu::count`].
    pub fn copy(&self, base: u64, cpu: usize) -> Option<u64> {
        Some(base.wrapping_add(*self.offsets.get(cpu)?))
    }

    /// Where each CPU's copy of the per-CPU variable at `base` ([`variable`]) is, CPU 0 first.
    pub fn copies(&self, base: u64) -> impl Iterator<Item = u64> + '_ {
        self.offsets.iter().map(move |off| base.wrapping_add(*off))
    }

    /// Which per-CPU variable of `image` `addr` is in, the offset in it, and whose copy it is:
    /// every CPU whose area puts that variable there (more than one where their offsets are
    /// the same, as before the areas are set up, or in a damaged table).
    pub fn place(&self, image: &Image, addr: u64) -> Option<(Symbol, u64, Vec<usize>)> {
        let mut found: Option<(Symbol, u64, Vec<usize>)> = None;
        for (cpu, &off) in self.offsets.iter().enumerate() {
            let template = addr.wrapping_sub(off);
            // Linked at 0 on x86_64; at a kernel address elsewhere, where the template's own
            // symbol holds it.
            let Some((symbol, within)) = image
                .symbolize_offset(template)
                .or_else(|| image.symbolize(template).filter(|(s, _)| is_per_cpu(s)))
            else {
                continue;
            };
            match &mut found {
                Some((s, w, cpus)) if (s.address, *w) == (symbol.address, within) => cpus.push(cpu),
                // Areas that overlap at different variables: the lowest CPU's is kept.
                Some(_) => {}
                None => found = Some((symbol, within, vec![cpu])),
            }
        }
        found
    }
}

/// The address per-CPU variable `name` is known by, to which a CPU's offset is added: its
/// symbol's (x86_64 links per-CPU variables from 0, and their symbols stay there under KASLR).
pub fn variable(kernel: Kernel<'_>, name: &str) -> Result<u64> {
    let sym = vmlinux(kernel)?
        .symbol(name)
        .ok_or_else(|| Error::NoSymbol {
            name: name.to_owned(),
        })?;
    Ok(sym.address)
}

/// Whether `sym` is a per-CPU variable: one in `.data..percpu`, the template every CPU's copy
/// is made from (linked at 0 on x86_64, at a kernel address elsewhere).
pub fn is_per_cpu(sym: &Symbol) -> bool {
    sym.section.as_deref() == Some(".data..percpu")
}

fn vmlinux<'a>(kernel: Kernel<'a>) -> Result<&'a Image> {
    kernel
        .image
        .ok_or_else(|| Error::Missing("needs the vmlinux".into()))
}
