//! DProbes scenarios: each thread is a processor whose probes log into its own trace buffer of
//! `dprobes-writer`. A probe reads memory with `process_vm_readv` on this process, which fails
//! with EFAULT where nothing is mapped instead of killing the thread: the flat fault token is
//! logged. Selectors mean nothing to a 64-bit Linux process, so the bad-selector token is the
//! bare kernel's alone. See tests/kernels/README.md.

use std::ffi::CStr;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use dprobes_writer::probes::{self, Machine};
use dprobes_writer::{self as dp, Fault, Header, Reader};

use crate::platform::{monotonic_ns, CLOCK_HZ};
use crate::scenarios::{on_every_cpu, start_logging, CPUS};
use crate::Crash;

/// The tasks the probes run in.
const TASKS: [&CStr; 4] = [c"idle", c"pager", c"fsd", c"shell"];

/// One thread playing processor `cpu`.
struct Hosted {
    cpu: usize,
}

// SAFETY: each processor's probes run on its own thread (`on_every_cpu`), one at a time.
unsafe impl Machine for Hosted {
    fn cpu(&self) -> usize {
        self.cpu
    }

    fn header(&self, task: usize) -> Header<'static> {
        let (cs, ss): (u16, u16);
        let (rsp, rip): (u64, u64);
        // SAFETY: reads of segment registers, the stack pointer and the instruction pointer.
        unsafe {
            std::arch::asm!("mov {0:x}, cs", "mov {1:x}, ss", "mov {2}, rsp", "lea {3}, [rip]",
                out(reg) cs, out(reg) ss, out(reg) rsp, out(reg) rip,
                options(nomem, nostack, preserves_flags));
        }
        Header {
            cpu: self.cpu as u32,
            // SAFETY: gettid and getuid have no preconditions.
            pid: unsafe { libc::gettid() } as u32,
            uid: unsafe { libc::getuid() },
            cs: cs.into(),
            eip: rip,
            ss: ss.into(),
            esp: rsp,
            // SAFETY: rdtsc has no side effects.
            tsc: unsafe { std::arch::x86_64::_rdtsc() },
            name: TASKS[task].to_bytes(),
            ..Header::default()
        }
    }

    fn task_name(&self, task: usize) -> &'static CStr {
        TASKS[task]
    }

    fn tasks(&self) -> usize {
        TASKS.len()
    }

    fn now(&self) -> u64 {
        monotonic_ns()
    }

    fn console(&self) -> impl std::fmt::Write {
        Stdout(std::io::stdout().lock())
    }
}

/// Oracle lines to stdout, each whole under the lock.
struct Stdout(std::io::StdoutLock<'static>);

impl std::fmt::Write for Stdout {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.write_all(s.as_bytes()).map_err(|_| std::fmt::Error)
    }
}

/// Reads this process's memory as another process would: a fault is an error, not a signal.
struct VmRead;

impl Reader for VmRead {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: `local` is `buf`; the kernel checks `remote` and fails with EFAULT.
        let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        match usize::try_from(n) {
            Ok(n) if n == buf.len() => Ok(()),
            // A partial read stopped at the first byte it could not read.
            Ok(n) => Err(Fault::Flat(addr + n as u64)),
            Err(_) => Err(Fault::Flat(addr)),
        }
    }

    /// Only the selector this process's data is addressed through, `%ds`, whose base is 0 in
    /// 64-bit mode: any other cannot be loaded here.
    fn read_segmented(&self, selector: u16, offset: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let ds: u16;
        // SAFETY: reads a segment register.
        unsafe { std::arch::asm!("mov {0:x}, ds", out(reg) ds, options(nomem, nostack)) };
        if selector != ds {
            return Err(Fault::Selector(selector));
        }
        self.read(offset, buf)
    }
}

/// KLog started and left empty (so the KLog oracle holds for these dumps too), then the trace.
fn init() {
    start_logging();
    dp::init(CPUS, CLOCK_HZ, &mut Stdout(std::io::stdout().lock()));
}

/// Each processor a few rounds of every probe: the buffers far from full.
pub fn plain(crash: Crash) -> ! {
    init();
    on_every_cpu(|cpu| {
        for i in 0..6 {
            probes::round(&Hosted { cpu: cpu as usize }, &VmRead, i + u64::from(cpu));
        }
    });
    crash.now("dprobes records logged")
}

/// Processor 1 ticks until its 8 KiB buffer has wrapped several times; the others log a round.
pub fn wrap(crash: Crash) -> ! {
    init();
    on_every_cpu(|cpu| {
        let m = Hosted { cpu: cpu as usize };
        probes::round(&m, &VmRead, 0);
        if cpu == 1 {
            probes::ticks(&m, 600);
        }
        probes::round(&m, &VmRead, 1);
    });
    crash.now("dprobes buffer of processor 1 wrapped")
}

/// Reads at a page mapped with no access, so that no later mapping (a thread's stack) can take
/// its place: the flat fault token, by every processor.
pub fn faults(crash: Crash) -> ! {
    init();
    // SAFETY: a fresh private anonymous mapping, never accessed; checked for failure below.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            0x1000,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if page == libc::MAP_FAILED {
        eprintln!("hosted: mmap: {}", std::io::Error::last_os_error());
        std::process::exit(2);
    }
    NO_ACCESS.store(page as u64, Ordering::Relaxed);
    on_every_cpu(|cpu| {
        let m = Hosted { cpu: cpu as usize };
        probes::round(&m, &VmRead, u64::from(cpu));
        probes::flat_faults(&m, &VmRead, NO_ACCESS.load(Ordering::Relaxed));
    });
    crash.now("dprobes reads faulted")
}

/// Where `faults` mapped its page, for its threads.
static NO_ACCESS: AtomicU64 = AtomicU64::new(0);

/// Every buffer wrapped, then two controls scribbled on: processor 2's `tail` past its `head`,
/// processor 3's `written` below its `overwritten`.
pub fn damaged(crash: Crash) -> ! {
    init();
    on_every_cpu(|cpu| {
        for n in 0..300 {
            probes::round(&Hosted { cpu: cpu as usize }, &VmRead, n);
        }
    });
    let mut out = Stdout(std::io::stdout().lock());
    let head = dp::dprobes_trace.buffers[2].head.load(Ordering::Relaxed);
    dp::scribble(2, dp::Control::Tail, head + 0x10_0000, &mut out);
    dp::scribble(3, dp::Control::Written, 3, &mut out);
    drop(out);
    crash.now("dprobes controls scribbled")
}
