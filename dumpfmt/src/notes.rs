//! ELF notes (PT_NOTE contents, and the note area of kdump files) and the typed descriptors a
//! crash dump carries. Parsing is lazy: [`Notes`] walks the raw bytes on demand.

use crate::bytes::{c_string, i32_le, slice, u16_le, u32_le, u64_le};
use crate::error::{Error, FileRef};
use crate::Machine;

pub const NT_PRSTATUS: u32 = 1;
pub const NT_PRPSINFO: u32 = 3;
pub const NT_AUXV: u32 = 6;
pub const NT_SIGINFO: u32 = 0x5349_4749;
pub const NT_FILE: u32 = 0x4649_4c45;

/// One note: its owner name (without the NUL), type, descriptor bytes, and where it sits.
#[derive(Debug, Clone, Copy)]
pub struct Note<'a> {
    pub name: &'a [u8],
    pub n_type: u32,
    pub desc: &'a [u8],
    /// File offset of the note header (offset into the reassembled file for flattened dumps).
    pub offset: u64,
    /// File offset of the descriptor.
    pub desc_offset: u64,
    file: &'a FileRef,
}

/// Iterator over the notes of one or more note areas. Yields an error (and then stops) at the
/// first malformed note.
pub struct Notes<'a> {
    areas: std::vec::IntoIter<(&'a [u8], u64)>,
    current: Option<(&'a [u8], u64)>,
    pos: u64,
    file: &'a FileRef,
    failed: bool,
}

const HEADER: u64 = 12;

fn align4(n: u64) -> u64 {
    (n + 3) & !3
}

impl<'a> Notes<'a> {
    /// `areas` are (bytes, file offset of the first byte).
    pub(crate) fn new(file: &'a FileRef, areas: Vec<(&'a [u8], u64)>) -> Self {
        let mut areas = areas.into_iter();
        let current = areas.next();
        Notes {
            areas,
            current,
            pos: 0,
            file,
            failed: false,
        }
    }

    fn parse_one(&self, data: &'a [u8], base: u64) -> Result<(Note<'a>, u64), Error> {
        let at = base + self.pos;
        let too_short = || {
            self.file
                .malformed(at, "note header runs past the end of the note area")
        };
        let namesz = u64::from(u32_le(data, self.pos).ok_or_else(too_short)?);
        let descsz = u64::from(u32_le(data, self.pos + 4).ok_or_else(too_short)?);
        let n_type = u32_le(data, self.pos + 8).ok_or_else(too_short)?;
        // u64 arithmetic: u32 sizes cannot overflow it.
        let name_at = self.pos + HEADER;
        let desc_at = name_at + align4(namesz);
        let next = desc_at + align4(descsz);
        let area_len = data.len() as u64;
        if desc_at + descsz > area_len {
            return Err(self.file.malformed(
                at,
                format!(
                    "note sizes (name {namesz}, descriptor {descsz}) run past the end of the note area ({} bytes left)",
                    area_len - self.pos
                ),
            ));
        }
        let name = slice(data, name_at, namesz).ok_or_else(too_short)?;
        let name = name.strip_suffix(&[0]).unwrap_or(name);
        let desc = slice(data, desc_at, descsz).ok_or_else(too_short)?;
        Ok((
            Note {
                name,
                n_type,
                desc,
                offset: at,
                desc_offset: base + desc_at,
                file: self.file,
            },
            next.min(area_len),
        ))
    }
}

impl<'a> Iterator for Notes<'a> {
    type Item = Result<Note<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed {
                return None;
            }
            let (data, base) = self.current?;
            let remaining = data.len() as u64 - self.pos;
            // An all-zero header (or padding too short for a header) ends a kernel note buffer.
            let terminator = slice(data, self.pos, HEADER.min(remaining))
                .is_some_and(|h| h.iter().all(|&b| b == 0));
            if remaining == 0 || terminator {
                self.current = self.areas.next();
                self.pos = 0;
                continue;
            }
            return Some(match self.parse_one(data, base) {
                Ok((note, next)) => {
                    self.pos = next;
                    Ok(note)
                }
                Err(e) => {
                    self.failed = true;
                    Err(e)
                }
            });
        }
    }
}

impl<'a> Note<'a> {
    pub fn is(&self, name: &str, n_type: u32) -> bool {
        self.name == name.as_bytes() && self.n_type == n_type
    }

    fn short(&self, what: &str, need: usize) -> Error {
        self.file.malformed(
            self.offset,
            format!(
                "{what} note descriptor is {} bytes, need at least {need}",
                self.desc.len()
            ),
        )
    }

    fn need(&self, what: &str, size: usize) -> Result<(), Error> {
        if self.desc.len() < size {
            return Err(self.short(what, size));
        }
        Ok(())
    }

    /// NT_PRSTATUS: the registers of one CPU (or thread), in `machine`'s layout.
    pub fn prstatus(&self, machine: Machine) -> Result<PrStatus, Error> {
        let (size, what) = match machine {
            Machine::X86_64 => (PRSTATUS_SIZE, "NT_PRSTATUS (x86_64)"),
            Machine::Aarch64 => (AARCH64_PRSTATUS_SIZE, "NT_PRSTATUS (aarch64)"),
        };
        self.need(what, size)?;
        let d = self.desc;
        // `pr_reg` starts at 112 in both layouts; only its length differs.
        let word = |i: usize| u64_le(d, 112 + 8 * i as u64).unwrap_or_default();
        let regs = match machine {
            Machine::X86_64 => Regs::X86_64(X86_64Regs(std::array::from_fn(word))),
            Machine::Aarch64 => Regs::Aarch64(Aarch64Regs(std::array::from_fn(word))),
        };
        Ok(PrStatus {
            signal: i32_le(d, 0).unwrap_or_default(),
            current_signal: u16_le(d, 12).unwrap_or_default(),
            pid: i32_le(d, 32).unwrap_or_default(),
            ppid: i32_le(d, 36).unwrap_or_default(),
            regs,
        })
    }

    /// NT_PRPSINFO: process name, arguments and ids.
    pub fn prpsinfo(&self) -> Result<PrPsInfo, Error> {
        self.need("NT_PRPSINFO", 136)?;
        let d = self.desc;
        Ok(PrPsInfo {
            state: d[0] as i8,
            sname: d[1] as char,
            uid: u32_le(d, 16).unwrap_or_default(),
            gid: u32_le(d, 20).unwrap_or_default(),
            pid: i32_le(d, 24).unwrap_or_default(),
            ppid: i32_le(d, 28).unwrap_or_default(),
            fname: c_string(&d[40..56]),
            psargs: c_string(&d[56..136]),
        })
    }

    /// NT_SIGINFO: the signal that caused the core.
    pub fn siginfo(&self) -> Result<SigInfo, Error> {
        self.need("NT_SIGINFO", 12)?;
        Ok(SigInfo {
            signo: i32_le(self.desc, 0).unwrap_or_default(),
            errno: i32_le(self.desc, 4).unwrap_or_default(),
            code: i32_le(self.desc, 8).unwrap_or_default(),
        })
    }

    /// NT_AUXV: the auxiliary vector, up to AT_NULL.
    pub fn auxv(&self) -> impl Iterator<Item = (u64, u64)> + 'a {
        self.desc
            .chunks_exact(16)
            .map(|c| {
                (
                    u64_le(c, 0).unwrap_or_default(),
                    u64_le(c, 8).unwrap_or_default(),
                )
            })
            .take_while(|&(t, _)| t != 0)
    }

    /// NT_FILE: the files mapped into the process. The count is checked against the descriptor
    /// size before anything is allocated.
    pub fn file_mappings(&self) -> Result<Vec<FileMapping>, Error> {
        let d = self.desc;
        let bad = |what: &str| self.file.malformed(self.offset, format!("NT_FILE: {what}"));
        let count = u64_le(d, 0).ok_or_else(|| bad("descriptor shorter than its header"))?;
        let page_size = u64_le(d, 8).ok_or_else(|| bad("descriptor shorter than its header"))?;
        let table_len = count
            .checked_mul(24)
            .filter(|&len| len <= d.len() as u64 - 16)
            .ok_or_else(|| bad(&format!("{count} entries do not fit in {} bytes", d.len())))?;
        let mut names = d[16 + table_len as usize..].split(|&b| b == 0);
        (0..count)
            .map(|i| {
                let e = 16 + 24 * i;
                let name = names
                    .next()
                    .ok_or_else(|| bad(&format!("entry {i} has no file name")))?;
                // The table fits in the descriptor (checked above).
                let (start, end) = (u64_le(d, e).unwrap_or_default(), u64_le(d, e + 8).unwrap_or_default());
                if end < start {
                    return Err(bad(&format!(
                        "entry {i} ends at {end:#x}, before its start {start:#x}"
                    )));
                }
                let pages = u64_le(d, e + 16).unwrap_or_default();
                let file_offset = pages.checked_mul(page_size).ok_or_else(|| {
                    bad(&format!(
                        "entry {i}: file offset of {pages:#x} pages of {page_size:#x} bytes overflows"
                    ))
                })?;
                Ok(FileMapping {
                    start,
                    end,
                    file_offset,
                    path: String::from_utf8_lossy(name).into_owned(),
                })
            })
            .collect()
    }

    /// QEMU's per-CPU state note ("QEMU", type 0): control registers and segment bases.
    pub fn qemu_cpu_state(&self) -> Result<QemuCpuState, Error> {
        self.need("QEMU CPU state", QEMU_CPU_STATE_SIZE)?;
        let d = self.desc;
        let q = |off: u64| u64_le(d, off).unwrap_or_default();
        let seg = |off: u64| Segment {
            selector: u32_le(d, off).unwrap_or_default(),
            limit: u32_le(d, off + 4).unwrap_or_default(),
            flags: u32_le(d, off + 8).unwrap_or_default(),
            base: q(off + 16),
        };
        let mut gprs = [0u64; 16];
        for (i, r) in gprs.iter_mut().enumerate() {
            *r = q(8 + 8 * i as u64);
        }
        Ok(QemuCpuState {
            version: u32_le(d, 0).unwrap_or_default(),
            gprs,
            rip: q(136),
            rflags: q(144),
            cs: seg(152),
            ds: seg(176),
            es: seg(200),
            fs: seg(224),
            gs: seg(248),
            ss: seg(272),
            ldt: seg(296),
            tr: seg(320),
            gdt: seg(344),
            idt: seg(368),
            cr: [q(392), q(400), q(408), q(416), q(424)],
        })
    }
}

const PRSTATUS_SIZE: usize = 336;
/// 112 bytes before `pr_reg`, 34 registers, `pr_fpvalid` and padding.
pub(crate) const AARCH64_PRSTATUS_SIZE: usize = 392;
const QEMU_CPU_STATE_SIZE: usize = 432;

/// NT_PRSTATUS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrStatus {
    /// `pr_info.si_signo`.
    pub signal: i32,
    pub current_signal: u16,
    /// The PID running on this CPU (kdump), the thread id (process cores), or vCPU index + 1 (QEMU).
    pub pid: i32,
    pub ppid: i32,
    pub regs: Regs,
}

/// `pr_reg`, by architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Regs {
    X86_64(X86_64Regs),
    Aarch64(Aarch64Regs),
}

impl Regs {
    /// The program counter (`rip`, `pc`).
    pub fn pc(&self) -> u64 {
        match self {
            Regs::X86_64(r) => r.rip(),
            Regs::Aarch64(r) => r.pc(),
        }
    }

    /// The stack pointer (`rsp`, `sp`).
    pub fn sp(&self) -> u64 {
        match self {
            Regs::X86_64(r) => r.rsp(),
            Regs::Aarch64(r) => r.sp(),
        }
    }

    /// The x86_64 registers, or None for another architecture.
    pub fn x86_64(&self) -> Option<&X86_64Regs> {
        match self {
            Regs::X86_64(r) => Some(r),
            Regs::Aarch64(_) => None,
        }
    }

    /// Names and values, in the kernel's order.
    pub fn named(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        let (names, values): (&[&'static str], &[u64]) = match self {
            Regs::X86_64(r) => (&X86_64Regs::NAMES, &r.0),
            Regs::Aarch64(r) => (&Aarch64Regs::NAMES, &r.0),
        };
        names.iter().copied().zip(values.iter().copied())
    }
}

/// `user_pt_regs`: x0 to x30, sp, pc, pstate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aarch64Regs(pub [u64; 34]);

impl Aarch64Regs {
    pub const NAMES: [&'static str; 34] = [
        "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13",
        "x14", "x15", "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26",
        "x27", "x28", "x29", "x30", "sp", "pc", "pstate",
    ];

    pub fn pc(&self) -> u64 {
        self.0[32]
    }

    pub fn sp(&self) -> u64 {
        self.0[31]
    }

    /// x29, the frame pointer.
    pub fn fp(&self) -> u64 {
        self.0[29]
    }
}

/// `user_regs_struct`: 27 registers in kernel order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct X86_64Regs(pub [u64; 27]);

impl X86_64Regs {
    pub const NAMES: [&'static str; 27] = [
        "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx",
        "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds",
        "es", "fs", "gs",
    ];

    /// A register by its `user_regs_struct` name.
    pub fn get(&self, name: &str) -> Option<u64> {
        let i = Self::NAMES.iter().position(|&n| n == name)?;
        self.0.get(i).copied()
    }

    pub fn rip(&self) -> u64 {
        self.0[16]
    }

    pub fn rsp(&self) -> u64 {
        self.0[19]
    }

    pub fn rbp(&self) -> u64 {
        self.0[4]
    }
}

/// NT_PRPSINFO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrPsInfo {
    pub state: i8,
    pub sname: char,
    pub uid: u32,
    pub gid: u32,
    pub pid: i32,
    pub ppid: i32,
    pub fname: String,
    pub psargs: String,
}

/// The first fields of NT_SIGINFO's `siginfo_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SigInfo {
    pub signo: i32,
    pub errno: i32,
    pub code: i32,
}

/// One NT_FILE entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMapping {
    pub start: u64,
    pub end: u64,
    /// Byte offset in the file.
    pub file_offset: u64,
    pub path: String,
}

/// A segment or descriptor-table register from the QEMU note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub selector: u32,
    pub limit: u32,
    pub flags: u32,
    pub base: u64,
}

/// QEMU's `QEMUCPUState` (version 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QemuCpuState {
    pub version: u32,
    /// rax, rbx, rcx, rdx, rsi, rdi, rsp, rbp, r8..r15.
    pub gprs: [u64; 16],
    pub rip: u64,
    pub rflags: u64,
    pub cs: Segment,
    pub ds: Segment,
    pub es: Segment,
    pub fs: Segment,
    pub gs: Segment,
    pub ss: Segment,
    pub ldt: Segment,
    pub tr: Segment,
    pub gdt: Segment,
    pub idt: Segment,
    /// CR0..CR4.
    pub cr: [u64; 5],
}

impl QemuCpuState {
    pub fn cr3(&self) -> u64 {
        self.cr[3]
    }

    /// CR4.LA57: the CPU uses 5-level paging.
    pub fn la57(&self) -> bool {
        self.cr[4] & (1 << 12) != 0
    }

    /// CR0.PG: paging is on.
    pub fn paging(&self) -> bool {
        self.cr[0] & (1 << 31) != 0
    }
}
