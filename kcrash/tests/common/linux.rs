//! The Linux guest's output (Debian's distribution kernel under QEMU with KASLR on, dumped by
//! QEMU (ELF) and makedumpfile (kdump), with Debian's debug vmlinux) for kcrash's tests of it:
//! `vmcore.elf`, `vmcore.kdump`, `console.log` (the serial console: an oracle kcrash does not
//! read), `vmlinux`, from `KCRASH_LINUX_GUEST` or where CI leaves them. Without it the tests say
//! NOT RUN; under KCRASH_REQUIRE_TOOLS=1 they fail. Where crash(8) is installed, kcrash is
//! compared with it on the same dump.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kcrash_harness::{linux, tools};

/// The Linux guest's output directory, if it holds `files`; else says NOT RUN (or fails under
/// KCRASH_REQUIRE_TOOLS=1).
pub fn guest(test: &str, files: &[&str]) -> Option<PathBuf> {
    let dir = linux::guest_output();
    if let Some(missing) = files.iter().find(|f| !dir.join(f).exists()) {
        tools::not_run(test, &format!("{} not there", dir.join(missing).display()));
        return None;
    }
    Some(dir)
}

/// A guest run's two dumps, its console and its image: what most of its tests read.
pub const DUMPS_AND_CONSOLE: [&str; 4] = ["vmcore.elf", "vmcore.kdump", "console.log", "vmlinux"];

/// [`guest`], when crash(8) reads its kernel too (see [`crash_reads`]).
pub fn guest_crash_reads(test: &str, files: &[&str]) -> Option<PathBuf> {
    guest(test, files).filter(|dir| crash_reads(test, dir))
}

/// A scratch directory holding `bytes` as the guest's dump `dump` (an edited copy) beside a
/// link to the guest's vmlinux, for [`kcrash`].
pub fn edited_dump(dir: &Path, dump: &str, bytes: &[u8]) -> tempfile::TempDir {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    std::fs::write(scratch.path().join(dump), bytes).expect("the edited dump");
    std::os::unix::fs::symlink(dir.join("vmlinux"), scratch.path().join("vmlinux")).expect("link");
    scratch
}

/// `kcrash -s -c COMMAND... DUMP vmlinux` in the guest's directory.
pub fn kcrash(dir: &Path, dump: &str, commands: &[&str]) -> Output {
    kcrash_on(dir, &[dump, "vmlinux"], commands)
}

/// `kcrash -s -c COMMAND... FILES...` in the guest's directory.
pub fn kcrash_on(dir: &Path, files: &[&str], commands: &[&str]) -> Output {
    super::kcrash()
        .session(commands)
        .current_dir(dir)
        .args(files)
        .output()
        .expect("kcrash runs")
}

/// crash(8)'s output for `commands` on `dump`, the prompt echo left out, after what crash printed
/// on opening the dump (its warnings), as a run of its own prints. One crash session per dump
/// serves every test of the binary, one caller at a time: crash takes about 15 s of CPU to
/// open Debian's vmlinux, and milliseconds a command after that. A session crash ended (it could
/// not open the dump) answers with what it printed, and the next call starts another.
pub fn crash(dir: &Path, dump: &str, commands: &str) -> String {
    type Slot = Arc<Mutex<Option<CrashSession>>>;
    static SESSIONS: Mutex<Vec<(PathBuf, Slot)>> = Mutex::new(Vec::new());
    let key = dir.join(dump);
    let slot = {
        let mut sessions = SESSIONS.lock().unwrap_or_else(|e| e.into_inner());
        match sessions.iter().find(|(k, _)| *k == key) {
            Some((_, slot)) => slot.clone(),
            None => {
                let slot = Slot::default();
                sessions.push((key, slot.clone()));
                slot
            }
        }
    };
    let mut session = slot.lock().unwrap_or_else(|e| e.into_inner());
    let running = session.get_or_insert_with(|| CrashSession::open(dir, dump));
    let (text, ended) = running.ask(commands);
    let text = format!("{}{text}", running.opening);
    if ended {
        *session = None;
    }
    text
}

/// A running `crash -s --no_scroll vmlinux DUMP`: commands go to its stdin, and each answer ends
/// at a marker line that `echo` prints after it (crash hands a command it does not know to the
/// shell). Its stdout lines come through a thread, so that a silent crash fails the test at a
/// deadline instead of hanging it. crash exits when the test binary does (its stdin closes).
struct CrashSession {
    stdin: std::process::ChildStdin,
    lines: Receiver<Vec<u8>>,
    asked: u64,
    dump: PathBuf,
    /// What crash printed on opening the dump, before any command.
    opening: String,
}

impl CrashSession {
    /// Longest wait for one answer, opening the vmlinux included, on a loaded CI machine.
    const DEADLINE: Duration = Duration::from_secs(900);

    fn open(dir: &Path, dump: &str) -> CrashSession {
        // crash asks for a signal when the thread that started it ends (PR_SET_PDEATHSIG), and
        // a test's thread ends with the test: the thread that reads crash starts it, and lives
        // as long as it does.
        let mut command = Command::new("crash");
        command
            .current_dir(dir)
            .args(["-s", "--no_scroll", "vmlinux", dump])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let (send_stdin, started) = std::sync::mpsc::channel();
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut child = command.spawn().expect("crash runs");
            let stdout = child.stdout.take().expect("crash's stdout");
            let _ = send_stdin.send(child.stdin.take().expect("crash's stdin"));
            let mut stdout = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match stdout.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) if send.send(line).is_err() => break,
                    Ok(_) => {}
                }
            }
            let _ = child.wait();
        });
        let stdin = started.recv().expect("crash started");
        let mut session = CrashSession {
            stdin,
            lines,
            asked: 0,
            dump: dir.join(dump),
            opening: String::new(),
        };
        session.opening = session.ask("").0;
        session
    }

    /// `commands`' output, and whether crash ended before answering in full.
    fn ask(&mut self, commands: &str) -> (String, bool) {
        self.asked += 1;
        let marker = format!("kcrash-test-answer-{}", self.asked);
        // A crash that has exited shows as the end of its output below.
        let _ = writeln!(self.stdin, "{commands}\necho {marker}").and_then(|()| self.stdin.flush());
        let mut text = Vec::new();
        loop {
            match self.lines.recv_timeout(Self::DEADLINE) {
                Ok(line) if line.trim_ascii_end() == marker.as_bytes() => {
                    return (String::from_utf8_lossy(&text).into_owned(), false)
                }
                Ok(line) => text.extend_from_slice(&line),
                Err(RecvTimeoutError::Disconnected) => {
                    return (String::from_utf8_lossy(&text).into_owned(), true)
                }
                Err(RecvTimeoutError::Timeout) => panic!(
                    "crash on {} gave no answer to {commands:?} in {:?}",
                    self.dump.display(),
                    Self::DEADLINE
                ),
            }
        }
    }
}

/// Whether crash(8) is there and opens this guest's kernel: crash 8.0.2 (Debian 12's) prints
/// nothing after its banner on Linux 6.12. Says NOT RUN for `test` when it cannot: under
/// KCRASH_REQUIRE_TOOLS=1 a missing crash fails, as does one that cannot open 6.1 or older; a
/// newer kernel does not (the tests compare with drgn there too).
pub fn crash_reads(test: &str, dir: &Path) -> bool {
    static OPENS: Mutex<Vec<(PathBuf, bool)>> = Mutex::new(Vec::new());
    if !tools::runs(test, "crash") {
        return false;
    }
    let mut known = OPENS.lock().unwrap_or_else(|e| e.into_inner());
    let opens = match known.iter().find(|(d, _)| d == dir) {
        Some(&(_, opens)) => opens,
        None => {
            let opens = crash(dir, "vmcore.elf", "sys").contains("RELEASE:");
            known.push((dir.to_path_buf(), opens));
            opens
        }
    };
    if !opens {
        let why = format!("crash cannot open the kernel of {}", dir.display());
        // Only a kernel newer than Debian 12's own (6.1) may be past what its crash knows.
        if newer_than_6_1(dir) {
            tools::not_run_here(test, &why);
        } else {
            tools::not_run(test, &why);
        }
    }
    opens
}

/// Whether `dump` of the guest may lack slab pages: makedumpfile 1.7.2 (Debian 12's) judges
/// pages by flags that kernels newer than 6.1 have changed, and drops their slab pages at
/// `-d 31`.
pub fn slab_may_be_excluded(dir: &Path, dump: &str) -> bool {
    dump.contains("-d31") && newer_than_6_1(dir)
}

/// Whether kcrash, given the guest's klogtest.ko, refused `dump` because the module's own
/// bookkeeping (its section names) is on a slab page the dump left out
/// ([`slab_may_be_excluded`]): asked of such dumps only, and the refusal must say so.
pub fn module_unplaceable(dir: &Path, dump: &str) -> bool {
    if !slab_may_be_excluded(dir, dump) {
        return false;
    }
    let out = kcrash_on(dir, &[dump, "vmlinux", "klogtest.ko"], &["sys"]);
    if out.status.success() {
        return false;
    }
    let err = super::text(&out.stderr);
    assert!(
        out.status.code() == Some(2) && err.contains("page was excluded when the dump was written"),
        "{dump}: {err}"
    );
    true
}

/// Whether the guest's release (guest.toml's `release`) is a Linux newer than 6.1.
pub fn newer_than_6_1(dir: &Path) -> bool {
    let toml = std::fs::read_to_string(dir.join("guest.toml")).expect("guest.toml");
    let release = toml
        .lines()
        .find_map(|l| l.strip_prefix("release = "))
        .expect("guest.toml names its release")
        .trim_matches('"');
    let mut numbers = release
        .split(['.', '-', '+'])
        .map(|n| n.parse::<u32>().ok());
    (numbers.next().flatten(), numbers.next().flatten()) > (Some(6), Some(1))
}

/// The KASLR offset the kernel printed when it panicked ("Kernel Offset: 0x... from ...").
pub fn console_kaslr(dir: &Path) -> u64 {
    let console = std::fs::read_to_string(dir.join("console.log")).expect("console.log");
    let hex = console
        .split("Kernel Offset: 0x")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the panic printed the kernel offset");
    u64::from_str_radix(hex, 16).expect("hex offset")
}

/// The kernel's lines in the serial console: from the `[ sssss.uuuuuu] ` stamp on (the stamp
/// may follow a firmware's escape sequences on the same line), carriage returns dropped. The
/// trace files /init prints (`KCRASH-TRACE...`) are not the kernel's lines, though a `console`
/// event quotes one.
pub fn console_kernel_lines(dir: &Path) -> Vec<String> {
    let bytes = std::fs::read(dir.join("console.log")).expect("console.log");
    let text = String::from_utf8_lossy(&bytes);
    let stamp = |s: &str| {
        let b = s.as_bytes();
        b.len() >= 15
            && b[0] == b'['
            && b[6] == b'.'
            && b[13] == b']'
            && b[1..13]
                .iter()
                .enumerate()
                .all(|(i, c)| i == 5 || c.is_ascii_digit() || (*c == b' ' && i < 4))
    };
    text.lines()
        .filter_map(|line| {
            let line = line.trim_end_matches('\r');
            if line.starts_with("KCRASH-TRACE") {
                return None;
            }
            let at = line.char_indices().find(|&(i, _)| stamp(&line[i..]))?.0;
            Some(line[at..].to_owned())
        })
        .collect()
}

/// The CPU that panicked, by the console: the `CPU: N PID: …` line of the stack the panic
/// printed.
pub fn panicking_cpu(console: &[String]) -> u64 {
    let panic_at = console
        .iter()
        .position(|l| l.contains("] Kernel panic - not syncing: "))
        .expect("the console's panic line");
    console[panic_at..]
        .iter()
        .find_map(|l| {
            // "CPU: 1 PID: 1 Comm: …", or since 6.12 "CPU: 1 UID: 0 PID: 1 Comm: …".
            let (_, rest) = l.split_once("] CPU: ")?;
            let (cpu, rest) = rest.split_once(' ')?;
            rest.contains("PID: ").then(|| cpu.parse().ok())?
        })
        .expect("the panic's CPU: line")
}

/// The contract's two dumps, then the other formats the guest pipeline writes when they are
/// there: QEMU's flattened kdump, makedumpfile's zlib and lzo kdumps at -d 31 and -d 0 (whose
/// excluded pages read as not in the dump) and its -E ELF.
pub fn dumps(dir: &Path) -> Vec<&'static str> {
    const MORE: [&str; 6] = [
        "vmcore.kdump-flat",
        "vmcore-c-d31.kdump",
        "vmcore-c-d0.kdump",
        "vmcore-l-d31.kdump",
        "vmcore-l-d0.kdump",
        "vmcore-E-d31.elf",
    ];
    let mut all = vec!["vmcore.elf", "vmcore.kdump"];
    all.extend(MORE.into_iter().filter(|f| dir.join(f).exists()));
    all
}

/// Where `log`'s lines start to be the console's: the ring wraps where it will, and its oldest
/// records may be debug messages (pcpu-alloc's table) the console, at its default level, never
/// printed. The callers check the levels of the lines before it.
pub fn first_console_line(dump: &str, log: &[&str], console: &[String]) -> usize {
    log.iter()
        .position(|l| console.iter().any(|c| c == l))
        .unwrap_or_else(|| panic!("{dump}: the console printed none of log's lines"))
}

/// A `log -m` line's level and its line as `log` prints it: "[    0.000000] <7>text" gives
/// (7, "[    0.000000] text").
pub fn split_level(line: &str) -> (u8, String) {
    let end = line.find("] <").expect("a stamp and a level") + 2;
    let close = end + line[end..].find('>').expect("a level");
    let level = line[end + 1..close].parse().expect("a numeric level");
    (level, format!("{}{}", &line[..end], &line[close + 1..]))
}

/// The console's lines are in `log`'s, in order, from `log`'s first on (the ring may have
/// wrapped: its first line may also be an earlier one of the console's, so each place the
/// console printed it is tried), and both end with the same line.
pub fn assert_console_in_log(dump: &str, log: &[&str], console: &[String]) {
    let first = *log.first().expect("a record");
    let starts: Vec<usize> = (0..console.len())
        .filter(|&i| console[i] == first)
        .collect();
    assert!(
        !starts.is_empty(),
        "{dump}: the console printed no {first:?}"
    );
    // The first console line from `from` on that is not in the log in order, if any.
    let missing = |from: usize| {
        let mut at = 0;
        console[from..]
            .iter()
            .find(|want| match log[at..].iter().position(|l| l == *want) {
                Some(i) => {
                    at += i + 1;
                    false
                }
                None => true,
            })
    };
    let failed: Vec<&String> = starts.iter().filter_map(|&from| missing(from)).collect();
    if failed.len() == starts.len() {
        let want = failed.last().expect("a start tried");
        panic!("{dump}: the console's {want:?} is not in kcrash's log in order");
    }
    assert_eq!(
        log.last().copied(),
        console.last().map(String::as_str),
        "{dump}"
    );
}

/// A loaded module as /proc/modules and `mod` both show it: name, base, size, taint flags.
pub type ModuleRow = (String, u64, u64, String);

/// The modules the guest's /proc/modules listed, sorted: its init script put each line on the
/// console as `KCRASH-PROC-MODULES name size references users state base [(taints)]`.
pub fn proc_modules(dir: &Path) -> Vec<ModuleRow> {
    let mut rows: Vec<ModuleRow> = console_kernel_lines(dir)
        .iter()
        .filter_map(|line| {
            let row = line.split_once("KCRASH-PROC-MODULES ")?.1;
            let fields: Vec<&str> = row.split_whitespace().collect();
            assert!(fields.len() >= 6, "a /proc/modules line: {row:?}");
            let base = fields[5].strip_prefix("0x").expect("a hex base");
            let taints = fields.get(6).map_or("", |t| t.trim_matches(['(', ')']));
            Some((
                fields[0].to_owned(),
                u64::from_str_radix(base, 16).expect("a hex base"),
                fields[1].parse().expect("a decimal size"),
                taints.to_owned(),
            ))
        })
        .collect();
    rows.sort();
    rows
}

/// What `mod --json` lists of `dump` read with the guest's vmlinux, sorted.
pub fn mod_rows(dir: &Path, dump: &str) -> Vec<ModuleRow> {
    let out = kcrash_harness::run::stdout(&kcrash(dir, dump, &["mod --json"]), dump);
    let json: serde_json::Value = serde_json::from_str(&out).expect("mod --json");
    let mut rows: Vec<ModuleRow> = json["modules"]
        .as_array()
        .expect("modules")
        .iter()
        .map(|m| {
            (
                m["name"].as_str().expect("name").to_owned(),
                super::hex(&m["base"]),
                m["size"].as_u64().expect("size"),
                m["taints"].as_str().expect("taints").to_owned(),
            )
        })
        .collect();
    rows.sort();
    rows
}
