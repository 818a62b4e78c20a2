//! Mutated corpus dumps, process cores and images through the commands a user runs first
//! (`klog`, `sys`, `rd`, `p`), each run under an address-space limit and a deadline: kcrash must
//! exit with one of its statuses (never a signal, a panic or a hang), print no raw control
//! bytes from the dump, and mark what it could not read. Where the damage is a region lost from
//! the dump (a truncated file, a page left out), every record whose slot lies in it must print
//! as unreadable and every other record must print the words the kernel wrote.
//!
//! The mutations are drawn from a fixed seed, so a failure names a run that can be repeated:
//! `KCRASH_MUTATION_RUNS=N` sets how many (default 400), `KCRASH_MUTATION_FIRST=K` where to start.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kcrash_harness::corpus;
use kcrash_harness::expected::Expected;
use kcrash_harness::run::{bounded, Ended};

mod common;

use common::edit::{drop_page, file_offset, inflated};

/// What one session runs: the rings, the machine, raw memory and typed values.
const COMMANDS: &[&str] = &[
    "klog -s --json",
    "klog 0 --json",
    "klog 0 full -n 200",
    "klog -s",
    "sys",
    "rd -64 KLogs 32",
    "rd KLogBuffer 16",
    "p KLogs",
    "p klogLevel",
    "p DebugFlags",
];

/// Commands for a process core, whose program has no KLogs symbol of that name in every build.
const PROCESS_COMMANDS: &[&str] = &["klog -s", "klog 0 full -n 200", "sys", "p KLogs"];

const MEMORY: u64 = 1 << 30;
const DEADLINE: Duration = Duration::from_secs(30);

/// xorshift64*: small, and the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn in_range(&mut self, r: std::ops::Range<usize>) -> usize {
        r.start + self.below((r.end - r.start) as u64) as usize
    }
}

/// Values a hostile or broken kernel leaves in a word.
const EXTREMES: [u64; 8] = [
    0,
    u64::MAX,
    1 << 63,
    (1 << 56) - 8,
    0x1000,
    0xffff_ffff_8000_0000,
    0x4141_4141_4141_4141,
    7,
];

fn first_event(expected: &Expected) -> &kcrash_harness::expected::Event {
    expected.rings[0]
        .events()
        .next()
        .expect("NONE's ring holds an event")
}

/// A region of the bare kernel's dump the mutation took away, as virtual addresses.
struct Lost(std::ops::Range<u64>);

/// The bare kernel's `rings` dump and what the tests know of it.
struct Bare {
    elf: Vec<u8>,
    kdump: Vec<u8>,
    image: Vec<u8>,
    expected: Expected,
    /// File offset of the kernel's virtual address 0 in the ELF dump (the image is linear).
    base: i64,
}

impl Bare {
    fn load() -> Bare {
        let elf = inflated("bare/rings/vmcore.elf.gz");
        let expected: Expected = serde_json::from_slice(
            &std::fs::read(corpus::file("bare/rings/expected.json")).unwrap(),
        )
        .unwrap();
        let ev = first_event(&expected).clone();
        let known = [ev.format.as_bytes(), b"\0"].concat();
        let base = file_offset(&elf, &known, ev.desc, 0) as i64;
        Bare {
            elf,
            kdump: std::fs::read(corpus::file("bare/rings/vmcore.kdump")).unwrap(),
            image: std::fs::read(common::vmlinux()).unwrap(),
            expected,
            base,
        }
    }

    fn offset(&self, addr: u64) -> usize {
        (self.base + addr as i64) as usize
    }

    fn addr(&self, offset: usize) -> u64 {
        (offset as i64 - self.base) as u64
    }

    /// The ELF file offsets of the regions kcrash reads most: the control blocks, KLogBuffer,
    /// the format strings.
    fn hot(&self, nm: &HashMap<String, (u64, char)>) -> Vec<std::ops::Range<usize>> {
        let at = |name: &str| self.offset(nm[name].0);
        let desc = self.offset(first_event(&self.expected).desc);
        vec![
            at("KLogs")..at("KLogs") + 0x140,
            at("KLogBuffer")..at("KLogBuffer") + 0x18000,
            desc - 0x800..desc + 0x800,
            at("klogLevel")..at("klogLevel") + 8,
        ]
    }
}

/// One mutated input: the files to open and, for a lost region, what it took away.
struct Case {
    what: String,
    dump: PathBuf,
    image: PathBuf,
    commands: &'static [&'static str],
    lost: Option<Lost>,
}

fn mutate(i: u64, bare: &Bare, hot: &[std::ops::Range<usize>], dir: &Path) -> Case {
    let mut rng = Rng::new(i);
    let dump = dir.join(format!("dump-{i}"));
    let mut case = Case {
        what: String::new(),
        dump: dump.clone(),
        image: common::vmlinux(),
        commands: COMMANDS,
        lost: None,
    };
    let pick_hot = |rng: &mut Rng| {
        let r = &hot[rng.below(hot.len() as u64) as usize];
        rng.in_range(r.clone())
    };
    let bytes = match i % 7 {
        0 => {
            // Truncated, mostly inside the regions klog reads.
            let cut = if rng.below(4) == 0 {
                rng.in_range(0..bare.elf.len())
            } else {
                pick_hot(&mut rng)
            };
            case.what = format!("ELF dump truncated at {cut:#x}");
            if cut > bare.offset(0xffff_ffff_8000_0000) {
                case.lost = Some(Lost(bare.addr(cut)..u64::MAX));
            }
            bare.elf[..cut].to_vec()
        }
        1 => {
            let at = pick_hot(&mut rng);
            let mut b = bare.elf.clone();
            drop_page(&mut b, at);
            let page = bare.addr(at) & !0xfff;
            case.what = format!("ELF dump without the page at {page:#x}");
            case.lost = Some(Lost(page..page + 0x1000));
            b
        }
        2 => {
            // A hostile kernel: words of the control blocks, the ring and the strings.
            let mut b = bare.elf.clone();
            let n = 1 + rng.below(6);
            let mut at_list = Vec::new();
            for _ in 0..n {
                let at = pick_hot(&mut rng) & !7;
                let v = EXTREMES[rng.below(EXTREMES.len() as u64) as usize];
                b[at..at + 8].copy_from_slice(&v.to_le_bytes());
                at_list.push(format!("{:#x}={v:#x}", bare.addr(at)));
            }
            case.what = format!("ELF dump with words set: {}", at_list.join(" "));
            b
        }
        3 => {
            let mut b = bare.elf.clone();
            flip(
                &mut rng,
                &mut b,
                0..0x1000.min(bare.elf.len()),
                "ELF headers and notes",
                &mut case.what,
            );
            b
        }
        4 => {
            let mut b = bare.kdump.clone();
            let head = 0..0x8000.min(b.len());
            flip(
                &mut rng,
                &mut b,
                head,
                "kdump headers and bitmaps",
                &mut case.what,
            );
            b
        }
        5 => {
            let cut = rng.in_range(0..bare.kdump.len());
            case.what = format!("kdump truncated at {cut:#x}");
            bare.kdump[..cut].to_vec()
        }
        _ => {
            // A damaged image: its DWARF and symbols, with the dump intact.
            let mut image = bare.image.clone();
            let len = image.len();
            flip(&mut rng, &mut image, 0..len, "image", &mut case.what);
            let path = dir.join(format!("vmlinux-{i}"));
            std::fs::write(&path, &image).unwrap();
            case.image = path;
            bare.elf.clone()
        }
    };
    std::fs::write(&dump, bytes).unwrap();
    case
}

/// Flips 1 to 32 random bytes of `b` in `range`.
fn flip(rng: &mut Rng, b: &mut [u8], range: std::ops::Range<usize>, name: &str, what: &mut String) {
    let n = 1 + rng.below(32);
    let mut at_list = Vec::new();
    for _ in 0..n {
        let at = rng.in_range(range.clone());
        b[at] ^= 1 << rng.below(8);
        at_list.push(format!("{at:#x}"));
    }
    *what = format!("{name} with bytes flipped at {}", at_list.join(" "));
}

/// A mutated process core of the hosted C kernel: truncated or flipped.
fn mutate_core(i: u64, core: &[u8], dir: &Path) -> Case {
    let mut rng = Rng::new(i);
    let path = dir.join(format!("core-{i}"));
    let mut b = core.to_vec();
    let mut what = String::new();
    if rng.below(2) == 0 {
        let cut = rng.in_range(0..b.len());
        b.truncate(cut);
        what = format!("process core truncated at {cut:#x}");
    } else {
        let head = 0..0x4000.min(b.len());
        flip(
            &mut rng,
            &mut b,
            head,
            "process core headers and notes",
            &mut what,
        );
    }
    std::fs::write(&path, b).unwrap();
    Case {
        what,
        dump: path,
        image: corpus::file("hosted-c/hosted-c"),
        commands: PROCESS_COMMANDS,
        lost: None,
    }
}

/// What the runs exercised, so the test cannot pass by checking nothing.
#[derive(Default, Debug)]
struct Seen {
    /// Runs by exit status 0, 1, 2.
    status: [u64; 3],
    /// Records checked inside and outside a lost region.
    lost_records: u64,
    kept_records: u64,
}

/// Runs one case and says what was wrong with the run, if anything.
fn check(case: &Case, bare: &Bare, seen: &mut Seen) -> Result<(), String> {
    let mut cmd = common::kcrash().session(case.commands);
    cmd.arg(&case.dump).arg(&case.image);
    let out = match bounded(cmd, MEMORY, DEADLINE) {
        Ended::TimedOut => return Err(format!("still running after {DEADLINE:?}")),
        Ended::Signalled(sig, out) => {
            return Err(format!(
                "killed by signal {sig}\n{}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
        Ended::Exited(out) => out,
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !matches!(out.status.code(), Some(0..=2)) {
        return Err(format!("exit status {:?}\n{stderr}", out.status.code()));
    }
    if stderr.contains("panicked") {
        return Err(format!("a panic\n{stderr}"));
    }
    for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        if let Some(b) = bytes
            .iter()
            .find(|&&b| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f)
        {
            return Err(format!("raw control byte {b:#04x} on {name}"));
        }
        if std::str::from_utf8(bytes).is_err() {
            return Err(format!("{name} is not UTF-8"));
        }
    }
    let code = out.status.code().unwrap_or(1);
    seen.status[code as usize] += 1;
    if code == 2 && !out.stdout.is_empty() {
        return Err("the dump could not be opened, yet something printed".into());
    }
    match &case.lost {
        Some(lost) if code != 2 => records_marked(&out.stdout, lost, bare, seen),
        _ => Ok(()),
    }
}

/// Every record whose slot lies in the lost region prints as unreadable; every other record
/// prints the words the kernel wrote (the oracle's), so nothing is invented or left unmarked.
fn records_marked(stdout: &[u8], lost: &Lost, bare: &Bare, seen: &mut Seen) -> Result<(), String> {
    let text = String::from_utf8_lossy(stdout);
    for line in text
        .lines()
        .filter(|l| l.starts_with("{\"kcrash_json\":1,\"ring\""))
    {
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("{e}: {line}"))?;
        let ring = &bare.expected.rings[v["ring"].as_u64().unwrap() as usize];
        let slot = v["slot"].as_u64().unwrap();
        let addr = ring.buffer + slot * 64;
        let in_lost = addr < lost.0.end && lost.0.start < addr + 64;
        let damage = common::damage(&v);
        let unreadable = damage.iter().any(|d| d == "unreadable");
        if in_lost {
            seen.lost_records += 1;
        } else {
            seen.kept_records += 1;
        }
        if in_lost != unreadable {
            return Err(format!(
                "slot at {addr:#x} {} the lost region, yet damage is {damage:?}: {line}",
                if in_lost { "in" } else { "outside" }
            ));
        }
        if !in_lost {
            let seq = v["seq"].as_u64().unwrap();
            let want = ring
                .records
                .iter()
                .find(|r| r.seq == seq)
                .and_then(|r| r.event.as_ref());
            if let Some(ev) = want {
                if common::words(&v) != ev.words {
                    return Err(format!(
                        "slot at {addr:#x}: words differ from the kernel's: {line}"
                    ));
                }
            }
        }
    }
    Ok(())
}

#[test]
fn mutated_dumps_cores_and_images_never_crash_hang_or_go_unmarked() {
    let runs: u64 = std::env::var("KCRASH_MUTATION_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let first: u64 = std::env::var("KCRASH_MUTATION_FIRST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bare = Bare::load();
    let nm = common::nm(&common::vmlinux());
    let hot = bare.hot(&nm);
    let core = inflated("hosted-c/rings/core.gz");
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut seen = Seen::default();
    for i in first..first + runs {
        // One run in eight is a process core.
        let case = if i % 8 == 7 {
            mutate_core(i, &core, dir.path())
        } else {
            mutate(i, &bare, &hot, dir.path())
        };
        if let Err(why) = check(&case, &bare, &mut seen) {
            failures.push(format!("run {i} ({}): {why}", case.what));
        }
        let _ = std::fs::remove_file(&case.dump);
    }
    eprintln!("mutation: {runs} runs from {first}: {seen:?}");
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // The runs reached every outcome the checks are about.
    if runs >= 100 {
        assert!(seen.status.iter().all(|&n| n > 0), "{seen:?}");
        assert!(seen.lost_records > 0 && seen.kept_records > 0, "{seen:?}");
    }
}
