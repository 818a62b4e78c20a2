//! Loaded kernel modules, from the kernel's `modules` list: each `struct module`'s name, where
//! its code is and how big it is (6.1's `core_layout`, 6.4's `mem[]`, told apart by the DWARF),
//! its taint flags, and where its sections were put (`sect_attrs`), which places its `.ko`.

use std::collections::HashSet;

use symbols::SectionAddresses;

use crate::error::{Context, Error, Result};
use crate::escape::escaped;
use crate::linux::facts::{consult, int};
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
        // The unit that defines the attributes has their read callback (never inlined: its
        // address is taken).
        consult(kernel, &["module_sect_read"]);
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
    // A damaged list can loop without coming back to the head: without this, each of
    // MAX_MODULES laps would be read in full (seconds of DWARF lookups) before giving up.
    let mut seen = HashSet::new();
    let mut next = kernel.mem.read_u64(head).context("modules")?;
    while next != head {
        if !seen.insert(next) {
            return Err(Error::Damaged(format!(
                "the modules list loops at {next:#x} without coming back to {head:#x}"
            )));
        }
        if out.len() == MAX_MODULES {
            return Err(Error::Damaged(format!(
                "the modules list does not come back to {head:#x}"
            )));
        }
        let addr = next.wrapping_sub(list);
        let mut name = Vec::new();
        kernel
            .mem
            // Hostile list pointers can put the name past the top: an unreadable address then.
            .read_cstring(addr.wrapping_add(name_off), NAME_MAX, &mut name)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::fixture::structs;
    use crate::memory::{Memory, Unreadable};

    /// Memory holding only some u64s, each at its address.
    struct Words(Vec<(u64, u64)>);

    impl Memory for Words {
        fn read(&self, addr: u64, buf: &mut [u8]) -> std::result::Result<(), Unreadable> {
            for (i, b) in buf.iter_mut().enumerate() {
                let at = addr.wrapping_add(i as u64);
                let word = self.0.iter().find(|&&(w, _)| (w..w + 8).contains(&at));
                *b = match word {
                    Some(&(w, v)) => v.to_le_bytes()[(at - w) as usize],
                    None => {
                        return Err(Unreadable {
                            addr: at,
                            reason: "not in the test's memory".into(),
                        })
                    }
                };
            }
            Ok(())
        }
    }

    /// The fuzz target's first finding: a list head holding 0 puts its "module" just below 2^64,
    /// and its name past the top. That is an unreadable name, not an overflow.
    #[test]
    fn a_module_address_at_the_top_is_unreadable_not_an_overflow() {
        let dir = tempfile::tempdir().unwrap();
        let test = "a_module_address_at_the_top_is_unreadable_not_an_overflow";
        let Some(image) = structs(test, dir.path(), &[]) else {
            return;
        };
        let head = image.symbol("modules").unwrap().address;
        let mem = Words(vec![(head, 0)]);
        let kernel = Kernel {
            image: Some(&image),
            mem: &mem,
        };
        let e = modules(kernel).unwrap_err().to_string();
        assert!(e.contains("name"), "{e}");
    }

    /// The fuzz target's second finding: a list that loops without passing its head again
    /// was walked MAX_MODULES times (over ten seconds); it is refused at its first repeat.
    #[test]
    fn a_list_looping_away_from_its_head_is_refused_at_the_repeat() {
        let dir = tempfile::tempdir().unwrap();
        let test = "a_list_looping_away_from_its_head_is_refused_at_the_repeat";
        let Some(image) = structs(test, dir.path(), &[]) else {
            return;
        };
        let head = image.symbol("modules").unwrap().address;
        let list = 8; // offsetof(struct module, list)
        let node = 0x10_0000u64;
        let nothing = Words(Vec::new());
        let ev = crate::expr::Evaluator::new(&image, &nothing);
        let sizeof = ev
            .eval(&crate::expr::parse_expr("sizeof(struct module)").unwrap())
            .and_then(|v| ev.scalar(&v))
            .unwrap()
            .0;
        // head -> node -> node -> ...; the module's other members read as zeros.
        let mut words = vec![(head, node + list), (node + list, node + list)];
        words.extend(
            (0..sizeof / 8)
                .map(|i| (node + i * 8, 0))
                .filter(|&(a, _)| a != node + list),
        );
        let mem = Words(words);
        let kernel = Kernel {
            image: Some(&image),
            mem: &mem,
        };
        let e = modules(kernel).unwrap_err().to_string();
        assert!(e.contains("loops at"), "{e}");
    }
}
