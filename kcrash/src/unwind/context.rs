//! Where stacks start: the registers each thread (a process core) or CPU (a kernel dump) had
//! when the dump was taken, from the dump's notes.

use dumpfmt::notes::{QemuCpuState, Regs};
use dumpfmt::{Dump, Machine};

use super::{Registers, PC, RBP, RIP, RSP, SP, X29};
use crate::linux::facts::int;
use crate::linux::Kernel;

/// A thread or CPU and its registers.
#[derive(Debug, Clone)]
pub struct Context {
    pub kind: Kind,
    pub registers: Registers,
    /// The signal that stopped the thread (process cores), or the CPU's (kdump); 0 is none.
    pub signal: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A process's thread, by its id (LWP).
    Thread(i32),
    /// A CPU by index; `pid` is the task the kernel's crash note says ran there (kdump).
    Cpu { index: usize, pid: Option<i32> },
}

/// Every context the dump holds registers for, in the dump's order (a process core: the thread
/// that took the signal first). A note that does not parse is left out and said in `warnings`.
pub fn contexts(dump: &Dump, warnings: &mut Vec<String>) -> Vec<Context> {
    let qemu: Vec<QemuCpuState> = dump
        .qemu_cpu_states()
        .filter_map(|r| r.map_err(|e| warnings.push(e.to_string())).ok())
        .collect();
    if !qemu.is_empty() {
        return qemu
            .iter()
            .enumerate()
            .map(|(index, q)| from_qemu(index, q))
            .collect();
    }
    let process = dump.is_process_core();
    dump.prstatus()
        .filter_map(|r| r.map_err(|e| warnings.push(e.to_string())).ok())
        .enumerate()
        .map(|(index, p)| {
            let regs = match &p.regs {
                Regs::X86_64(r) => Registers::from_user(r),
                Regs::Aarch64(r) => Registers::from_aarch64(r),
            };
            (index, regs, p)
        })
        .map(|(index, registers, p)| Context {
            kind: if process {
                Kind::Thread(p.pid)
            } else {
                Kind::Cpu {
                    index,
                    pid: Some(p.pid),
                }
            },
            registers,
            signal: p.signal,
        })
        .collect()
}

/// QEMU's CPU state: rax, rbx, rcx, rdx, rsi, rdi, rsp, rbp, r8–r15, in that order.
fn from_qemu(index: usize, q: &QemuCpuState) -> Context {
    const DWARF: [u16; 16] = [0, 3, 2, 1, 4, 5, RSP, RBP, 8, 9, 10, 11, 12, 13, 14, 15];
    let mut registers = Registers::default();
    for (value, register) in q.gprs.iter().zip(DWARF) {
        registers.set(register, Some(*value));
    }
    registers.set(RIP, Some(q.rip));
    Context {
        kind: Kind::Cpu { index, pid: None },
        registers,
        signal: 0,
    }
}

/// A Linux task that is not running: the registers the scheduler saved when it switched the task
/// out, where Linux's own unwinder and drgn start. x86_64: those `__switch_to_asm` pushed
/// (`struct inactive_task_frame` at `thread.sp`); arm64: those `cpu_switch_to` stored in
/// `thread.cpu_context`. The first frame's pc is a return address into the scheduler.
pub fn switched_out(kernel: Kernel<'_>, machine: Machine, task: u64) -> Result<Registers, String> {
    let read = |expr: String| {
        int(kernel, &expr)
            .map(|v| v as u64)
            .map_err(|e| e.to_string())
    };
    if machine == Machine::Aarch64 {
        let field = |name: &str| {
            read(format!(
                "((struct task_struct *){task:#x})->thread.cpu_context.{name}"
            ))
        };
        let mut registers = Registers::new(Machine::Aarch64);
        for (register, name) in (19..).zip([
            "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28",
        ]) {
            registers.set(register, field(name).ok());
        }
        registers.set(X29, Some(field("fp")?));
        registers.set(SP, Some(field("sp")?));
        registers.set(PC, Some(field("pc")?));
        return Ok(registers);
    }
    let sp = read(format!("((struct task_struct *){task:#x})->thread.sp"))?;
    let field = |name: &str| read(format!("((struct inactive_task_frame *){sp:#x})->{name}"));
    let mut registers = Registers::default();
    for (register, name) in [
        (3, "bx"),
        (RBP, "bp"),
        (12, "r12"),
        (13, "r13"),
        (14, "r14"),
        (15, "r15"),
    ] {
        registers.set(register, field(name).ok());
    }
    registers.set(RIP, Some(field("ret_addr")?));
    let size = read("sizeof(struct inactive_task_frame)".into())?;
    registers.set(RSP, Some(sp.wrapping_add(size)));
    Ok(registers)
}
