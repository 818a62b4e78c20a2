//! `hosted SCENARIO [--stop]`: a Linux program whose threads play a kernel's processors. It logs
//! through klog-runtime, prints the oracle on stdout, then dies by `abort()` so Linux writes an
//! ELF core; with `--stop` it stops itself (SIGSTOP) instead, for a harness that takes the core
//! with gdb's gcore. See tests/kernels/README.md.

#[cfg(feature = "dprobes")]
mod dprobes;
#[cfg(feature = "klogger")]
mod klogger;
mod oracle;
mod platform;
mod qnx;
mod scenarios;

use platform::HostPlatform;

#[cfg(not(any(feature = "big-rings", feature = "per-processor")))]
klog_runtime::klog_config! {
    platform = HostPlatform;
    static_level = klog_runtime::KLOG_PROLOG;
    subsystems { DBG_NONE = 64, DBG_PARCHORE = 256, DBG_FS = 128, DBG_SCHED = 1024, DBG_VM = 64 }
}

// 4 Mi + 128 records: 256 MiB of KLogBuffer.
#[cfg(all(feature = "big-rings", not(feature = "per-processor")))]
klog_runtime::klog_config! {
    platform = HostPlatform;
    static_level = klog_runtime::KLOG_PROLOG;
    subsystems {
        DBG_NONE = 64, DBG_PARCHORE = 1 << 20, DBG_FS = 1 << 20, DBG_SCHED = 1 << 21, DBG_VM = 64
    }
}

// One set of rings per processor thread; VM's events go to FS's ring; two formats by event ID.
#[cfg(all(feature = "per-processor", not(feature = "big-rings")))]
klog_runtime::klog_config! {
    platform = HostPlatform;
    static_level = klog_runtime::KLOG_PROLOG;
    processors = 4;
    subsystems { DBG_NONE = 64, DBG_PARCHORE = 256, DBG_FS = 128, DBG_SCHED = 1024, DBG_VM = 0 }
    groups { DBG_VM => DBG_FS }
    descriptions { EVT_FAULT = "fault va=%#lx prot=%x", EVT_IDLE = "cpu %u idle for %lu ns" }
}

// The big rings split among four processors' sets: 4 Mi + 512 records, 256 MiB of KLogBuffer,
// in 20 rings, to read against the shared big rings.
#[cfg(all(feature = "big-rings", feature = "per-processor"))]
klog_runtime::klog_config! {
    platform = HostPlatform;
    static_level = klog_runtime::KLOG_PROLOG;
    processors = 4;
    subsystems {
        DBG_NONE = 64, DBG_PARCHORE = 1 << 18, DBG_FS = 1 << 18, DBG_SCHED = 1 << 19, DBG_VM = 64
    }
}

/// Every subsystem, indexed by id.
pub const SUBSYSTEMS: [klog_runtime::Subsys<KlogConfig>; DBG_MAX] =
    [DBG_NONE, DBG_PARCHORE, DBG_FS, DBG_SCHED, DBG_VM];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (name, stop) = match args.as_slice() {
        [name] => (name.as_str(), false),
        [name, flag] if flag == "--stop" => (name.as_str(), true),
        _ => usage(),
    };
    raise_core_limit();
    if let Some(message) = qnx::run(name) {
        // Not through the KLog oracle, which holds its lines until the rings are announced.
        println!("KCRASH-PANIC {name}: {message}");
        crash(stop)
    }
    let Some(scenario) = scenarios::find(name) else {
        usage()
    };
    scenario(Crash {
        scenario: name,
        stop,
    })
}

fn usage() -> ! {
    eprintln!(
        "usage: hosted SCENARIO [--stop]\nscenarios: {}",
        scenarios::NAMES.join(" ")
    );
    std::process::exit(2);
}

/// Lets Linux write a core of any size when we abort (up to the hard limit).
fn raise_core_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit to read into and from.
    let ok = unsafe {
        libc::getrlimit(libc::RLIMIT_CORE, &mut limit) == 0 && {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_CORE, &limit) == 0
        }
    };
    if !ok {
        eprintln!(
            "hosted: cannot raise RLIMIT_CORE: {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(2);
    }
}

/// How a scenario ends: it calls [`Crash::now`] from the frame whose locals must be in the dump.
pub struct Crash<'a> {
    scenario: &'a str,
    stop: bool,
}

impl Crash<'_> {
    /// Prints the panic line and dies by abort (or stops for gcore with `--stop`).
    pub fn now(self, message: &str) -> ! {
        oracle::panic(&format!("{}: {message}", self.scenario));
        crash(self.stop)
    }
}

fn crash(stop: bool) -> ! {
    if stop {
        // SAFETY: raising a signal at ourselves; the harness runs gcore, then kills us.
        unsafe { libc::raise(libc::SIGSTOP) };
        loop {
            // SAFETY: pause has no preconditions.
            unsafe { libc::pause() };
        }
    }
    std::process::abort()
}
