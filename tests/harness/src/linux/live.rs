//! The live guest: the Linux guest with a statically linked kcrash in its initramfs,
//! reading its own running kernel through /proc/kcore. Its /init runs [`script`] after the
//! module logged: kcrash as root (the module's .ko given, then found by itself), again after the
//! module logged more, `sym` from /proc/kallsyms, `klog --follow` while the module logs, with
//! addresses hidden by
//! kptr_restrict, and as a user who is not root. Each run's output goes to the console between
//! markers (see [`script`]); the module's oracle lines are on the same console. kcrash's test
//! (kcrash/tests/linux/live.rs) checks one against the other.

use super::debian::{build_module, ensure_packages, kernel_image, BUSYBOX};
use super::guest::{boot_to_panic, initramfs, Boot, Extra};
use super::READY;
use crate::arch::Arch;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where a run writes when not told: `<cache>/linux-live/<release>`.
pub fn default_out(cache: &Path, release: &str) -> PathBuf {
    cache.join("linux-live").join(release)
}

/// Events the module logs through its `burst` parameter before the second run.
pub const SECOND_BURST: u32 = 40;
/// Events it logs while `klog --follow` runs: NET (a quarter of them) wraps its 32-record ring
/// several times over.
pub const FOLLOW_BURST: u32 = 400;
/// `klog --follow --interval`, seconds: long enough that NET's ring may lap between two polls.
pub const FOLLOW_INTERVAL: u32 = 2;

/// The guest's part, run by /init as root. A run's output is written to files while it runs and
/// printed afterwards, while the module is quiet and the console takes no printk, so that no
/// kernel message splits its lines:
/// `KCRASH-LIVE-OUT NAME rc=N`, its stdout, `KCRASH-LIVE-ERR NAME`, its stderr,
/// `KCRASH-LIVE-DONE NAME`. `KCRASH-LIVE-MARK WHAT` goes through /dev/kmsg, ordered among the
/// module's oracle lines: what was logged before a mark was logged before that moment.
pub fn script(release: &str) -> String {
    format!(
        r#"
$B mkdir -p /tmp
K=/bin/kcrash
P=/sys/module/klogtest/parameters/burst
mark() {{ echo "KCRASH-LIVE-MARK $1" > /dev/kmsg; }}
# Returns once the serial port has sent what the tty still holds: its transmit count (tx: in
# /proc/tty/driver/serial) stops moving between two looks 0.2 s apart; 10 s at most. printk
# writes to the port directly, past the tty's queue, so a message let through before then would
# land inside the queued text. Without that file, a second's wait.
drain() {{
    [ -r /proc/tty/driver/serial ] || {{ $B sleep 1; return; }}
    prev=
    now=$($B cat /proc/tty/driver/serial)
    tries=0
    while [ "$now" != "$prev" ] && [ $tries -lt 50 ]; do
        prev=$now
        $B sleep 0.2
        now=$($B cat /proc/tty/driver/serial)
        tries=$((tries + 1))
    done
}}
show() {{
    # The kernel's own messages (`random: crng init done` comes when it comes) stay off the
    # console while the output is printed, or one would land inside a line of it.
    level=$($B cat /proc/sys/kernel/printk)
    echo 1 > /proc/sys/kernel/printk
    echo "KCRASH-LIVE-OUT $1 rc=$2"
    $B cat /tmp/out
    echo "KCRASH-LIVE-ERR $1"
    $B cat /tmp/err
    echo "KCRASH-LIVE-DONE $1"
    drain
    echo "$level" > /proc/sys/kernel/printk
}}
mark first
$K -s -c 'klog 0 full --json' /proc/kcore /lib/modules/klogtest.ko > /tmp/out 2> /tmp/err
show first $?
echo {SECOND_BURST} > $P
mark second
$K -c 'klog 0 full --json' > /tmp/out 2> /tmp/err
show second $?
$K -s -c 'sym _text' -c 'sym KLogs' > /tmp/out 2> /tmp/err
show symbols $?
mark follow-start
$K -s -c 'klog 0 full --json --follow --interval {FOLLOW_INTERVAL}' /lib/modules/{release}/extra/klogtest.ko > /tmp/out 2> /tmp/err &
pid=$!
$B sleep 8
echo {FOLLOW_BURST} > $P
$B sleep 6
mark follow-stop
$B kill -INT $pid
wait $pid
show follow $?
restrict=$($B cat /proc/sys/kernel/kptr_restrict)
echo 2 > /proc/sys/kernel/kptr_restrict
$K -s -c 'klog 0' /lib/modules/klogtest.ko > /tmp/out 2> /tmp/err
show hidden $?
echo $restrict > /proc/sys/kernel/kptr_restrict
$B su -s /bin/sh nobody -c "$K -s -c 'klog 0'" > /tmp/out 2> /tmp/err
show nonroot $?
# The last lines out before the panic's printk.
drain
"#
    )
}

/// Users for `su`: root and nobody.
const PASSWD: &str = "root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n";
const GROUP: &str = "root:x:0:\nnogroup:x:65534:\n";

/// Builds the module, boots the guest with `kcrash` (a static binary) in it, and writes
/// `console.log`, `klogtest.ko` and READY into the output directory; returns it.
pub fn generate(
    cache: &Path,
    series: &str,
    out: Option<PathBuf>,
    kcrash: &Path,
) -> Result<PathBuf> {
    let kernel = kernel_image(cache, series, Arch::X86_64)?;
    ensure_packages(&kernel)?;
    let module = build_module(&kernel, &kernel.headers())?;
    let out = out.unwrap_or_else(|| default_out(cache, &kernel.release));
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("removing {}", out.display()))?;
    }
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let stripped = out.join("kcrash");
    let status = Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(kcrash)
        .status()
        .context("running strip")?;
    anyhow::ensure!(status.success(), "strip {} failed", kcrash.display());
    let file = |guest: &str, data: Vec<u8>, mode: u32| Extra {
        guest: guest.into(),
        data,
        mode,
    };
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let extras = vec![
        file("bin/kcrash", read(&stripped)?, 0o755),
        // su runs the user's shell: busybox, as sh.
        file("bin/sh", read(Path::new(BUSYBOX))?, 0o755),
        file("etc/passwd", PASSWD.into(), 0o644),
        file("etc/group", GROUP.into(), 0o644),
        file(
            &format!("lib/modules/{}/extra/klogtest.ko", kernel.release),
            read(&module)?,
            0o644,
        ),
    ];
    std::fs::remove_file(&stripped)?;
    let initramfs_path = out.join("initramfs.cpio");
    std::fs::write(
        &initramfs_path,
        initramfs(&kernel, &module, &extras, Some(&script(&kernel.release)))?,
    )?;
    std::fs::copy(&module, out.join("klogtest.ko"))?;
    let console = out.join("console.log");
    let stopped = boot_to_panic(&Boot {
        kernel: &kernel,
        initramfs: &initramfs_path,
        vmcoreinfo: false,
        console: &console,
        timeout: Duration::from_secs(600),
    })?;
    eprintln!(
        "linux live: boot, kcrash runs and panic in {:.1}s",
        stopped.boot_time.as_secs_f64()
    );
    stopped.quit()?;
    std::fs::remove_file(&initramfs_path)?;
    std::fs::write(out.join(READY), "")?;
    Ok(out)
}
