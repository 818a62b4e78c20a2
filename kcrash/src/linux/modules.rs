//! Loaded kernel modules, from the kernel's `modules` list: each `struct module`'s name, where
//! its code is and how big it is (6.1's `core_layout`, 6.4's `mem[]`, told apart by the DWARF),
//! its taint flags, and where its sections were put (`sect_attrs`), which places its `.ko`.

use symbols::SectionAddresses;

use crate::error::{Context, Error, Result};
use crate::escape::escaped;
use crate::linux::facts::int;
use crate::linux::Kernel;

/// `MODULE_NAME_LEN`'s bound on what is read of a name (56 on 64-bit).
const NAME_MAX: usize = 64;
/// More modules than any kernel loads: a list that goes on is corrupt.
const MAX_MODULES: usize = 1 << 16;
/// A module has a few dozen sections; a count beyond this is not a count.
const MAX_SECTIONS: i64 = 4096;
/// The kernel's taint letters by bit (kernel/panic.c taint_flags).
const TAINT_LETTERS: &[u8] = b"PFSRMBUDAWCIOELKXTN";

/// One loaded module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// The `struct module`.
    pub addr: u64,
    pub name: String,
    /// Where its core code starts.
    pub base: u64,
    /// Bytes of its core (6.4+: of all its memory regions).
    pub size: u64,
    pub taints: u64,
}

impl Module {
    /// The taint letters, as /proc/modules prints them (`OE`); empty when untainted.
    pub fn taint_letters(&self) -> String {
        TAINT_LETTERS
            .iter()
            .enumerate()
            .filter(|&(bit, _)| self.taints & (1 << bit) != 0)
            .map(|(_, &c)| c as char)
            .collect()
    }

    fn field(&self, kernel: Kernel<'_>, path: &str) -> Result<i64> {
        int(
            kernel,
            &format!("((struct module *){:#x})->{path}", self.addr),
        )
    }

    /// Where each of its sections was loaded, from `sect_attrs` (what /sys/module/NAME/sections
    /// shows and crash's `mod -s` reads). `struct module_sect_attrs` is complete only in the
    /// unit that defines it, so the pointer is cast to the type found by name.
    pub fn sections(&self, kernel: Kernel<'_>) -> Result<SectionAddresses> {
        let attrs = self.field(kernel, "sect_attrs")? as u64;
        let field = |path: &str| {
            int(
                kernel,
                &format!("((struct module_sect_attrs *){attrs:#x})->{path}"),
            )
        };
        let n = field("nsections")?;
        if !(0..=MAX_SECTIONS).contains(&n) {
            return Err(Error::Damaged(format!(
                "{}: sect_attrs says {n} sections",
                self.name
            )));
        }
        let mut out = SectionAddresses::new();
        let mut name = Vec::new();
        for i in 0..n {
            let attr = format!("attrs[{i}]");
            let name_at = field(&format!("{attr}.battr.attr.name"))? as u64;
            kernel
                .mem
                .read_cstring(name_at, 256, &mut name)
                .with_context(|| format!("{}: section {i}'s name", self.name))?;
            let address = field(&format!("{attr}.address"))? as u64;
            out.insert(String::from_utf8_lossy(&name).into_owned(), address);
        }
        Ok(out)
    }
}

/// Every module on the kernel's `modules` list, in list order (newest first).
pub fn modules(kernel: Kernel<'_>) -> Result<Vec<Module>> {
    let head = int(kernel, "&modules")? as u64;
    let list = int(kernel, "&((struct module *)0)->list")? as u64;
    let name_off = int(kernel, "&((struct module *)0)->name")? as u64;
    // 6.4 replaced core_layout by mem[MOD_MEM_NUM_TYPES], MOD_TEXT first.
    let regions = int(
        kernel,
        "sizeof(((struct module *)0)->mem) / sizeof(((struct module *)0)->mem[0])",
    )
    .ok();
    let mut out = Vec::new();
    let mut next = kernel.mem.read_u64(head).context("modules")?;
    while next != head {
        if out.len() == MAX_MODULES {
            return Err(Error::Damaged(format!(
                "the modules list does not come back to {head:#x}"
            )));
        }
        let addr = next.wrapping_sub(list);
        let mut name = Vec::new();
        kernel
            .mem
            .read_cstring(addr + name_off, NAME_MAX, &mut name)
            .with_context(|| format!("module at {addr:#x}: name"))?;
        let mut m = Module {
            addr,
            name: escaped(&name),
            base: 0,
            size: 0,
            taints: 0,
        };
        match regions {
            None => {
                m.base = m.field(kernel, "core_layout.base")? as u64;
                m.size = m.field(kernel, "core_layout.size")? as u64;
            }
            Some(n) => {
                m.base = m.field(kernel, "mem[0].base")? as u64;
                for i in 0..n.clamp(0, 16) {
                    m.size += m.field(kernel, &format!("mem[{i}].size"))? as u64;
                }
            }
        }
        m.taints = m.field(kernel, "taints")? as u64;
        out.push(m);
        next = kernel
            .mem
            .read_u64(next)
            .with_context(|| format!("modules list at {next:#x}"))?;
    }
    Ok(out)
}
