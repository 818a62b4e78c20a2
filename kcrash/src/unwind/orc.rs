//! A caller by Linux's ORC tables, as the kernel's own unwinder (arch/x86/kernel/unwind_orc.c)
//! and drgn find it: for each instruction address, where the previous frame's stack pointer is
//! (a register plus an offset, or read through one), whether the frame is a call or an
//! exception's saved registers (`struct pt_regs`), and where rbp was saved.
//!
//! The tables are read from the dump, as the kernel used them: vmlinux's (`__start_orc_unwind_ip`
//! …) and each loaded module's (`mod->arch.orc_unwind_ip` …). An entry's bit-fields are placed
//! by `struct orc_entry`'s DWARF: Linux 6.4 widened `type` and replaced `end` by `signal`,
//! renumbering the types.

use symbols::{Image, TypeKind};

use super::{saved, Caller, Frame, How, Registers, Step, Unwinder, RBP, RIP, RSP};
use crate::linux::facts::int;
use crate::linux::Kernel;
use crate::memory::Memory;

/// x86_64 Linux's task and IRQ stacks: 16 KiB each, aligned to their size.
const STACK_SIZE: u64 = 16 << 10;
/// More entries than any kernel's table (6.1's vmlinux has 384k): a count past it is damage.
const MAX_ENTRIES: u64 = 1 << 24;
/// `sizeof(struct orc_entry)`.
const ENTRY_SIZE: u64 = 6;

const REG_UNDEFINED: u64 = 0;
const REG_PREV_SP: u64 = 1;
const REG_DX: u64 = 2;
const REG_DI: u64 = 3;
const REG_BP: u64 = 4;
const REG_SP: u64 = 5;
const REG_R10: u64 = 6;
const REG_R13: u64 = 7;
const REG_BP_INDIRECT: u64 = 8;
const REG_SP_INDIRECT: u64 = 9;

/// `struct pt_regs` (x86_64): where each register is, in bytes.
pub mod pt_regs {
    pub const IP: u64 = 128;
    pub const CS: u64 = 136;
    pub const SP: u64 = 152;
    /// Every field in crash's order of printing: its name as crash prints it, its offset, and
    /// the DWARF number of a general register.
    pub const FIELDS: [(&str, u64, Option<u16>); 21] = [
        ("RIP", IP, None),
        ("RSP", SP, Some(7)),
        ("RFLAGS", 144, None),
        ("RAX", 80, Some(0)),
        ("RBX", 40, Some(3)),
        ("RCX", 88, Some(2)),
        ("RDX", 96, Some(1)),
        ("RSI", 104, Some(4)),
        ("RDI", 112, Some(5)),
        ("RBP", 32, Some(6)),
        ("R8", 72, Some(8)),
        ("R9", 64, Some(9)),
        ("R10", 56, Some(10)),
        ("R11", 48, Some(11)),
        ("R12", 24, Some(12)),
        ("R13", 16, Some(13)),
        ("R14", 8, Some(14)),
        ("R15", 0, Some(15)),
        ("ORIG_RAX", 120, None),
        ("CS", CS, None),
        ("SS", 160, None),
    ];
}

/// The kinds of frame an entry describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// No information: the unwinder must stop.
    Undefined,
    EndOfStack,
    Call,
    /// A full `struct pt_regs` at the previous stack pointer.
    Regs,
    /// Only the hardware's iret frame (ip, cs, flags, sp, ss) at the previous stack pointer.
    RegsPartial,
}

/// Where `struct orc_entry`'s bit-fields are, and how its `type` numbers read.
#[derive(Debug, Clone, Copy)]
struct Layout {
    sp_reg: (u64, u64),
    bp_reg: (u64, u64),
    kind: (u64, u64),
    /// Before 6.4: `end` marks the end of the stack, types number CALL 0, REGS 1, PARTIAL 2.
    end: Option<(u64, u64)>,
    /// 6.4 on: `signal` marks a frame whose return address is exact.
    signal: Option<(u64, u64)>,
}

impl Layout {
    fn of(image: &Image) -> Result<Layout, String> {
        let no = |why: String| format!("struct orc_entry: {why}");
        // ORC's own unwinder's unit defines the entry: read instead of a full name index.
        image.consult("unwind_next_frame");
        let id = image
            .type_by_name("struct orc_entry")
            .map_err(|e| no(e.to_string()))?
            .ok_or_else(|| no("not in the image's DWARF".into()))?;
        let ty = image.type_(id).map_err(|e| no(e.to_string()))?;
        if !matches!(ty.kind, TypeKind::Struct { .. }) {
            return Err(no("not a struct".into()));
        }
        let field = |name: &str| {
            ty.member(name)
                .and_then(|m| m.bit_field)
                .map(|b| (b.bit_offset, b.bit_size))
                .filter(|&(offset, size)| size > 0 && size <= 8 && offset + size <= 48)
        };
        let need = |name: &str| field(name).ok_or_else(|| no(format!("no bit-field {name}")));
        Ok(Layout {
            sp_reg: need("sp_reg")?,
            bp_reg: need("bp_reg")?,
            kind: need("type")?,
            end: field("end"),
            signal: field("signal"),
        })
    }
}

/// One entry, decoded.
#[derive(Debug, Clone, Copy)]
struct Entry {
    sp_offset: i64,
    bp_offset: i64,
    sp_reg: u64,
    bp_reg: u64,
    kind: Kind,
    signal: bool,
}

impl Entry {
    fn decode(bytes: [u8; 6], layout: &Layout) -> Entry {
        let mut word = [0u8; 8];
        word[..6].copy_from_slice(&bytes);
        let bits = u64::from_le_bytes(word);
        let get = |(offset, size): (u64, u64)| (bits >> offset) & ((1 << size) - 1);
        let raw_kind = get(layout.kind);
        let (kind, signal) = match layout.end {
            Some(end) => {
                let kind = match raw_kind {
                    _ if get(layout.sp_reg) == REG_UNDEFINED && get(end) == 1 => Kind::EndOfStack,
                    _ if get(layout.sp_reg) == REG_UNDEFINED => Kind::Undefined,
                    0 => Kind::Call,
                    1 => Kind::Regs,
                    2 => Kind::RegsPartial,
                    _ => Kind::Undefined,
                };
                (kind, matches!(kind, Kind::Regs | Kind::RegsPartial))
            }
            None => {
                let kind = match raw_kind {
                    1 => Kind::EndOfStack,
                    2 => Kind::Call,
                    3 => Kind::Regs,
                    4 => Kind::RegsPartial,
                    _ => Kind::Undefined,
                };
                let signal = layout.signal.is_some_and(|s| get(s) == 1);
                (
                    kind,
                    signal || matches!(kind, Kind::Regs | Kind::RegsPartial),
                )
            }
        };
        Entry {
            sp_offset: i64::from(i16::from_le_bytes([bytes[0], bytes[1]])),
            bp_offset: i64::from(i16::from_le_bytes([bytes[2], bytes[3]])),
            sp_reg: get(layout.sp_reg),
            bp_reg: get(layout.bp_reg),
            kind,
            signal,
        }
    }
}

/// One table: the code it covers, its sorted relative ip array and its entries.
#[derive(Debug, Clone)]
struct Table {
    name: String,
    text: Vec<(u64, u64)>,
    ips: u64,
    entries: u64,
    count: u64,
}

impl Table {
    fn covers(&self, pc: u64) -> bool {
        self.text
            .iter()
            .any(|&(start, end)| start <= pc && pc < end)
    }

    /// The entry for `pc`: the last whose address is at or below it (each entry holds until the
    /// next one starts).
    fn find(&self, mem: &dyn Memory, pc: u64, layout: &Layout) -> Result<Entry, String> {
        let ip_at = |i: u64| -> Result<u64, String> {
            let at = self.ips.wrapping_add(i * 4);
            let rel = mem
                .read_uint(at, 4)
                .map_err(|e| format!("{}'s ORC ip table at {at:#x}: {}", self.name, e.reason))?;
            Ok(at.wrapping_add_signed(i64::from(rel as u32 as i32)))
        };
        let (mut low, mut high) = (0, self.count);
        while low < high {
            let mid = low + (high - low) / 2;
            if ip_at(mid)? <= pc {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        let Some(i) = low.checked_sub(1) else {
            return Err(format!("{pc:#x} is before {}'s first ORC entry", self.name));
        };
        let at = self.entries.wrapping_add(i * ENTRY_SIZE);
        let mut bytes = [0u8; 6];
        mem.read(at, &mut bytes)
            .map_err(|e| format!("{}'s ORC entry at {at:#x}: {}", self.name, e.reason))?;
        Ok(Entry::decode(bytes, layout))
    }
}

/// The dump's ORC tables.
pub struct Orc<'a> {
    mem: &'a dyn Memory,
    layout: Layout,
    tables: Vec<Table>,
}

impl<'a> Orc<'a> {
    /// vmlinux's table and every loaded module's; `Err` when the kernel has none (built with
    /// frame pointers, or before 4.14) or they cannot be found.
    pub fn new(kernel: Kernel<'a>) -> Result<Orc<'a>, String> {
        let image = kernel.image.ok_or("no vmlinux")?;
        let layout = Layout::of(image)?;
        let symbol = |name: &str| {
            image
                .symbol(name)
                .map(|s| s.address)
                .ok_or_else(|| format!("no symbol {name} in vmlinux: the kernel has no ORC tables"))
        };
        let ips = symbol("__start_orc_unwind_ip")?;
        let count = (symbol("__stop_orc_unwind_ip")?.wrapping_sub(ips)) / 4;
        if count == 0 || count > MAX_ENTRIES {
            return Err(format!("vmlinux's ORC ip table holds {count} entries"));
        }
        let mut text = vec![(symbol("_stext")?, symbol("_etext")?)];
        if let (Ok(start), Ok(end)) = (symbol("_sinittext"), symbol("_einittext")) {
            text.push((start, end));
        }
        let mut tables = vec![Table {
            name: "vmlinux".into(),
            text,
            ips,
            entries: symbol("__start_orc_unwind")?,
            count,
        }];
        // A module whose table does not read is left out: its code then has no entry, which
        // each frame in it says.
        if let Ok(modules) = crate::linux::modules::modules(kernel) {
            for m in modules {
                let field = |path: &str| {
                    int(
                        kernel,
                        &format!("((struct module *){:#x})->arch.{path}", m.addr),
                    )
                    .map(|v| v as u64)
                };
                if let (Ok(count), Ok(ips), Ok(entries)) = (
                    field("num_orcs"),
                    field("orc_unwind_ip"),
                    field("orc_unwind"),
                ) {
                    if count > 0 && count <= MAX_ENTRIES {
                        tables.push(Table {
                            name: m.name.clone(),
                            text: vec![(m.base, m.base.saturating_add(m.size))],
                            ips,
                            entries,
                            count,
                        });
                    }
                }
            }
        }
        Ok(Orc {
            mem: kernel.mem,
            layout,
            tables,
        })
    }

    fn step(&self, frame: &Frame, registers: &Registers) -> Result<Step, String> {
        let at = frame.lookup_pc();
        let table = self
            .tables
            .iter()
            .find(|t| t.covers(at))
            .ok_or_else(|| format!("{at:#x} is in no ORC table's code"))?;
        let orc = table.find(self.mem, at, &self.layout)?;
        let reg = |r: u16, name: &str| {
            registers
                .get(r)
                .ok_or_else(|| format!("the ORC entry for {at:#x} needs {name}, which is unknown"))
        };
        let word = |what: &str, addr: u64| saved(self.mem, what, addr);
        match orc.kind {
            Kind::Undefined => return Err(format!("the ORC entry for {at:#x} is undefined")),
            Kind::EndOfStack => {
                return Ok(Step::Outermost {
                    why: "the ORC tables mark the end of the stack".into(),
                    exception: None,
                })
            }
            _ => {}
        }
        let mut new_stack = false;
        let sp = match orc.sp_reg {
            REG_SP => reg(RSP, "rsp")?.wrapping_add_signed(orc.sp_offset),
            REG_BP => {
                let sp = reg(RBP, "rbp")?.wrapping_add_signed(orc.sp_offset);
                // Linux 5.8-5.11's asm_call_on_stack switches onto the IRQ stack with rbp left
                // on the stack it came from: a caller on another stack is that switch.
                new_stack = reg(RSP, "rsp")? / STACK_SIZE != sp / STACK_SIZE;
                sp
            }
            REG_SP_INDIRECT => {
                // The stack pointer was switched (onto an IRQ stack): the old one is saved.
                new_stack = true;
                word("the saved stack pointer", reg(RSP, "rsp")?)?
                    .wrapping_add_signed(orc.sp_offset)
            }
            REG_BP_INDIRECT => word(
                "the saved stack pointer",
                reg(RBP, "rbp")?.wrapping_add_signed(orc.sp_offset),
            )?,
            REG_R10 => reg(10, "r10")?,
            REG_R13 => reg(13, "r13")?,
            REG_DI => reg(5, "rdi")?,
            REG_DX => reg(1, "rdx")?,
            other => return Err(format!("the ORC entry for {at:#x} has sp_reg {other}")),
        };
        let mut caller = Registers::default();
        let mut exception = None;
        match orc.kind {
            Kind::Call => {
                caller.set(RIP, Some(word("the return address", sp.wrapping_sub(8))?));
                caller.set(RSP, Some(sp));
            }
            Kind::Regs => {
                for (_, offset, register) in pt_regs::FIELDS {
                    if let Some(r) = register {
                        caller.set(r, self.mem.read_u64(sp.wrapping_add(offset)).ok());
                    }
                }
                caller.set(
                    RIP,
                    Some(word("pt_regs->ip", sp.wrapping_add(pt_regs::IP))?),
                );
                caller.set(
                    RSP,
                    Some(word("pt_regs->sp", sp.wrapping_add(pt_regs::SP))?),
                );
                exception = Some(sp);
            }
            Kind::RegsPartial => {
                // The iret frame is pt_regs' tail.
                let regs = sp.wrapping_sub(pt_regs::IP);
                caller.set(RIP, Some(word("the iret frame's ip", sp)?));
                caller.set(
                    RSP,
                    Some(word("the iret frame's sp", regs.wrapping_add(pt_regs::SP))?),
                );
                caller.set(RBP, registers.get(RBP));
            }
            Kind::Undefined | Kind::EndOfStack => {}
        }
        match orc.bp_reg {
            REG_UNDEFINED if orc.kind == Kind::Call => caller.set(RBP, registers.get(RBP)),
            REG_UNDEFINED => {}
            REG_PREV_SP => caller.set(
                RBP,
                Some(word(
                    "the saved rbp",
                    sp.wrapping_add_signed(orc.bp_offset),
                )?),
            ),
            REG_BP => caller.set(
                RBP,
                Some(word(
                    "the saved rbp",
                    reg(RBP, "rbp")?.wrapping_add_signed(orc.bp_offset),
                )?),
            ),
            other => return Err(format!("the ORC entry for {at:#x} has bp_reg {other}")),
        }
        if let Some(regs) = exception {
            let cs = word("pt_regs->cs", regs.wrapping_add(pt_regs::CS))?;
            if cs & 3 != 0 {
                return Ok(Step::Outermost {
                    why: "entered from user space (the exception frame above)".into(),
                    exception,
                });
            }
        }
        Ok(Step::Caller(Box::new(Caller {
            registers: caller,
            how: How::Orc,
            interrupted: orc.signal,
            trampoline: false,
            new_stack: new_stack || exception.is_some(),
            exception,
            gap: None,
        })))
    }
}

impl Unwinder for Orc<'_> {
    fn caller(&self, frame: &Frame, registers: &Registers) -> Step {
        self.step(frame, registers).unwrap_or_else(Step::Lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::fixture;
    use crate::memory::Runs;
    use crate::unwind::{orc_sample, walk};

    /// The sample tables walked in both entry layouts, and with the stack gone.
    #[test]
    fn the_sample_stack_walks_through_calls_and_an_interrupt_to_its_end() {
        let test = "the_sample_stack_walks_through_calls_and_an_interrupt_to_its_end";
        let dir = tempfile::tempdir().unwrap();
        for (old, flags) in [(false, &[][..]), (true, &["-DOLD_LAYOUT"][..])] {
            let Some(image) = fixture::structs(test, dir.path(), flags) else {
                return;
            };
            let text = image.symbol("_stext").unwrap().address;
            let run = |windows: Vec<(u64, Vec<u8>)>| {
                let mem = Runs(windows);
                let kernel = Kernel {
                    image: Some(&image),
                    mem: &mem,
                };
                let orc = Orc::new(kernel).unwrap();
                let mut registers = Registers::default();
                for r in 0..17u16 {
                    let at = orc_sample::REGISTERS_AT + u64::from(r) * 8;
                    registers.set(r, mem.read_u64(at).ok());
                }
                walk(registers, true, &[&orc])
            };
            let stack = run(orc_sample::windows(&image, old));
            let pcs: Vec<u64> = stack.frames.iter().map(|f| f.pc - text).collect();
            assert_eq!(
                pcs,
                [0x10, 0x110, 0x210, 0x310],
                "old layout: {old}: {}",
                stack.stop
            );
            assert_eq!(stack.stop, "the ORC tables mark the end of the stack");
            let exception: Vec<Option<u64>> = stack.frames.iter().map(|f| f.exception).collect();
            let regs = orc_sample::STACK_AT + 24;
            assert_eq!(exception, [None, None, Some(regs), None]);
            assert!(stack.frames[3].exact, "the interrupted frame's pc is exact");

            let mut no_stack = orc_sample::windows(&image, old);
            no_stack.retain(|(at, _)| *at != orc_sample::STACK_AT);
            let stack = run(no_stack);
            assert_eq!(stack.frames.len(), 1);
            assert!(
                stack.stop.starts_with(&format!(
                    "the return address at {:#x} is unreadable",
                    orc_sample::STACK_AT
                )),
                "{}",
                stack.stop
            );
        }
    }
}
