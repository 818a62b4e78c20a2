//! drgn's stack traces of a Linux guest's tasks beside kcrash's `bt --json`.

use std::path::Path;
use std::process::Command;

use kcrash_harness::run::stdout;
use serde_json::Value;

use super::linux::kcrash_on;

/// drgn's walks ([`WALK`]) of the task on each CPU (each possible one: a panic takes the others
/// offline) and of every task, keyed `cpu N` and `task ADDR`.
const DRGN_WALK: &str = r#"
from drgn.helpers.linux.cpumask import for_each_possible_cpu
from drgn.helpers.linux.pid import for_each_task
from drgn.helpers.linux.sched import cpu_curr
for cpu in for_each_possible_cpu(prog):
    walk("cpu %d" % cpu, cpu_curr(prog, cpu))
for task in for_each_task(prog):
    walk("task %#x" % task.value_(), task)
"#;

/// The walk every script here runs: `@@frame key pc sp inline name` lines, tab-separated, up to
/// the first frame in user space (where drgn would go on reading user memory as a kernel
/// stack), or `@@stop key why` where drgn could go no further.
const WALK: &str = r#"
def walk(key, thread):
    try:
        for frame in prog.stack_trace(thread):
            if frame.pc < 0xffff000000000000:
                break
            print("@@frame\t%s\t%#x\t%#x\t%d\t%s" % (key, frame.pc, frame.sp, frame.is_inline, frame.name))
    except LookupError as e:
        print("@@stop\t%s\t%s" % (key, e))
"#;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub pc: u64,
    pub sp: u64,
    pub inlined: bool,
    pub function: String,
}

/// arm64's exception vector table, where a CPU taking an exception starts.
const VECTORS: &str = "vectors";

/// Whether `bt --json`'s `context` is of a CPU the dump caught taking an exception (in the
/// vector table, having saved nothing of what it interrupted; a CPU still taking the panic's
/// stop IPI, or a timer's interrupt in the panic's last loop, is): then its first frame is the
/// vectors', and it says so — in its stop (from user space: the outermost frame) or in the gap
/// after it (from the kernel: the walk goes on from x29's records).
pub fn taking_exception(context: &Value) -> bool {
    let first = &context["frames"][0];
    if first["function"] != VECTORS {
        return false;
    }
    let said = [&first["gap"], &context["stop"]]
        .iter()
        .filter_map(|v| v.as_str())
        .any(|why| why.contains("the CPU is in the exception vectors, taking "));
    assert!(said, "{context:#}");
    true
}

/// The frames of one of `bt --json`'s contexts.
pub fn frames_of(context: &Value) -> Vec<Frame> {
    context["frames"]
        .as_array()
        .expect("frames")
        .iter()
        .map(|f| Frame {
            pc: super::hex(&f["pc"]),
            sp: super::hex(&f["sp"]),
            inlined: f["inlined"].as_bool().expect("inlined"),
            function: f["function"].as_str().unwrap_or("??").to_owned(),
        })
        .collect()
}

/// Each context of the `bt --json` documents `commands` print, in order.
pub fn contexts(dir: &Path, dump: &str, commands: &[&str]) -> Vec<Value> {
    let text = stdout(
        &kcrash_on(dir, &[dump, "vmlinux", "klogtest.ko"], commands),
        dump,
    );
    serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .flat_map(|doc| {
            doc.expect("bt --json is JSON")["contexts"]
                .as_array()
                .expect("contexts")
                .clone()
        })
        .collect()
}

/// kcrash's `bt -a --json` by CPU.
pub fn ours(dir: &Path, dump: &str) -> Vec<(u64, Vec<Frame>, Value)> {
    contexts(dir, dump, &["bt -a --json"])
        .into_iter()
        .map(|c| (c["cpu"].as_u64().expect("a CPU"), frames_of(&c), c))
        .collect()
}

/// drgn's walks of every CPU's task and every task of `dump` in the guest's `dir`.
pub struct Walks {
    frames: Vec<(String, Frame)>,
    /// The walks drgn could not finish, and why.
    pub stopped: Vec<(String, String)>,
}

impl Walks {
    /// Asserts that `ours` (kcrash's frames of walk `key`) are drgn's — pc, function, inlined or
    /// not — frame for frame, or begin with them and go on where drgn could go no further.
    pub fn assert_same(&self, key: &str, ours: &[Frame]) {
        let want: Vec<(u64, bool, &str)> = self
            .walk(key)
            .iter()
            .map(|f| (f.pc, f.inlined, f.function.as_str()))
            .collect();
        let got: Vec<(u64, bool, &str)> = ours
            .iter()
            .map(|f| (f.pc, f.inlined, f.function.as_str()))
            .collect();
        assert!(!want.is_empty(), "{key}: drgn walked no frame");
        if self.stopped.iter().any(|(k, _)| k == key) {
            // A CPU caught in the vectors from user space has nothing to go on from.
            let caught = got.len() == 1 && got[0].2 == VECTORS;
            assert!(
                got.starts_with(&want) && (got.len() > want.len() || caught),
                "{key}: kcrash (left) begins with drgn's frames (right) and goes on\n{got:#?}\n\
                 {want:#?}"
            );
        } else {
            assert_eq!(got, want, "{key}: kcrash (left) and drgn (right)");
        }
    }

    /// The frames of one walk (`cpu N` or `task 0x…`).
    pub fn walk(&self, key: &str) -> Vec<&Frame> {
        self.frames
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, f)| f)
            .collect()
    }

    /// Every task drgn walked, by address, in its order.
    pub fn tasks(&self) -> Vec<&str> {
        let mut tasks: Vec<&str> = Vec::new();
        for (key, _) in &self.frames {
            if let Some(task) = key.strip_prefix("task ") {
                if !tasks.contains(&task) {
                    tasks.push(task);
                }
            }
        }
        tasks
    }
}

pub fn drgn_walks(dir: &Path, dump: &str) -> Walks {
    parse_walks(&drgn(dir, dump, DRGN_WALK))
}

/// drgn's output for `script` (after [`WALK`]) on `dump` with the vmlinux and the module.
fn drgn(dir: &Path, dump: &str, script: &str) -> String {
    let out = Command::new("drgn")
        .current_dir(dir)
        .args(["-q", "-c", dump, "-s", "vmlinux", "-s", "klogtest.ko"])
        .args(["-e", &format!("{WALK}{script}")])
        .output()
        .expect("drgn runs");
    assert!(out.status.success(), "drgn: {}", super::text(&out.stderr));
    super::text(&out.stdout)
}

/// The `@@frame` and `@@stop` lines of a walk.
fn parse_walks(text: &str) -> Walks {
    let mut walks = Walks {
        frames: Vec::new(),
        stopped: Vec::new(),
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("@@stop\t") {
            let (key, why) = rest.split_once('\t').unwrap_or((rest, ""));
            walks.stopped.push((key.to_owned(), why.to_owned()));
            continue;
        }
        let Some(rest) = line.strip_prefix("@@frame\t") else {
            continue;
        };
        let f: Vec<&str> = rest.split('\t').collect();
        walks.frames.push((
            f[0].to_owned(),
            Frame {
                pc: parse_hex(f[1]),
                sp: parse_hex(f[2]),
                inlined: f[3] == "1",
                function: f[4].to_owned(),
            },
        ));
    }
    walks
}

/// drgn's reading of each `struct pt_regs` at `addresses` (by the vmlinux's DWARF): `@@regs ADDR`
/// with every register as crash names them, then drgn's walk ([`WALK`]) from those registers,
/// keyed by the address.
const DRGN_PT_REGS: &str = r#"
for a in ADDRESSES:
    regs = Object(prog, "struct pt_regs", address=a)
    named = [("X%d" % i, regs.regs[i]) for i in range(30)]
    named += [("LR", regs.regs[30]), ("SP", regs.sp), ("PC", regs.pc), ("PSTATE", regs.pstate)]
    print("@@regs\t%#x\t%s" % (a, " ".join("%s=%#x" % (n, v.value_()) for n, v in named)))
    walk("%#x" % a, regs)
"#;

/// A `struct pt_regs` as drgn read it: its address, and its registers by name.
pub type PtRegs = (u64, Vec<(String, u64)>);

/// drgn's registers of each `struct pt_regs` at `addresses` (by name, as crash names them), and
/// its walks from them keyed by the address (`0x…`).
pub fn drgn_pt_regs(dir: &Path, dump: &str, addresses: &[u64]) -> (Vec<PtRegs>, Walks) {
    let list: Vec<String> = addresses.iter().map(|a| format!("{a:#x}")).collect();
    let script = format!("ADDRESSES = [{}]\n{DRGN_PT_REGS}", list.join(", "));
    let text = drgn(dir, dump, &script);
    let regs = text
        .lines()
        .filter_map(|line| {
            let (at, named) = line.strip_prefix("@@regs\t")?.split_once('\t')?;
            let named = named
                .split(' ')
                .map(|pair| {
                    let (name, value) = pair.split_once('=').expect("NAME=VALUE");
                    (name.to_owned(), parse_hex(value))
                })
                .collect();
            Some((parse_hex(at), named))
        })
        .collect();
    (regs, parse_walks(&text))
}

fn parse_hex(text: &str) -> u64 {
    u64::from_str_radix(text.trim_start_matches("0x"), 16).expect("hex")
}
