//! The kernel's tasks, as crash's `ps` lists them: every thread of every process (the processes
//! on `init_task.tasks`, each one's threads on its `signal->thread_head`, or on its
//! `thread_group` ring in kernels without one) and each CPU's idle task, which is on no list
//! (`swapper/N`: init_task is CPU 0's, `runqueues.idle` each CPU's). A task is the one running
//! on its CPU when it is that CPU's current task. Each task is read field by field, so memory
//! that cannot be read costs only the fields in it, with the reason; a list that cannot be
//! followed ends where it breaks, with the reason.

use std::collections::HashSet;

use crate::error::Result;
use crate::escape::escaped;
use crate::linux::facts::{consult, int};
use crate::linux::percpu::{self, PerCpu};
use crate::linux::Kernel;
use crate::memory::{Memory, Unreadable};

/// More tasks than any kernel runs (PID_MAX_LIMIT is 4 Mi): a list that goes on is corrupt.
pub const MAX_TASKS: usize = 1 << 22;
/// `PF_KTHREAD` in `task_struct.flags` (Linux 2.6.27 on): a kernel thread, which crash's `ps`
/// shows in brackets.
const PF_KTHREAD: u64 = 0x0020_0000;
/// TASK_COMM_LEN is 16: a `comm` that says it is bigger is read no further than this.
const COMM_MAX: u64 = 64;

/// A field of a task, or why its memory could not be read.
pub type Read<T> = std::result::Result<T, Unreadable>;

/// One task: a thread, which is what Linux schedules and what crash's `ps` lists.
#[derive(Debug, Clone)]
pub struct Task {
    /// The `struct task_struct`.
    pub addr: u64,
    pub pid: Read<i32>,
    /// Its process's PID (its thread group leader's).
    pub tgid: Read<i32>,
    /// The PID of `parent`: its tracer while it is traced, else its real parent (crash's PPID).
    pub ppid: Read<i32>,
    /// The CPU it runs on, or last ran on.
    pub cpu: Read<u32>,
    pub state: Read<State>,
    /// Escaped (`crate::escape`): a name from the dump.
    pub comm: Read<String>,
    pub kernel_thread: Read<bool>,
    /// It is its CPU's current task: running when the dump was taken.
    pub running: bool,
}

/// Every task, in crash's order (by PID, the idle tasks by CPU), and why the list may be
/// incomplete or a running mark missing.
#[derive(Debug, Clone)]
pub struct TaskList {
    pub tasks: Vec<Task>,
    /// Where a list stopped before its end, a CPU whose current or idle task could not be
    /// read: one sentence each.
    pub problems: Vec<String>,
}

/// A task's `__state | exit_state`, as crash combines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State(pub u64);

// The state bits of Linux 4.14 on (include/linux/sched.h), the values crash derives from the
// kernel's task_state_array.
const INTERRUPTIBLE: u64 = 0x1;
const UNINTERRUPTIBLE: u64 = 0x2;
const STOPPED: u64 = 0x4;
const TRACED: u64 = 0x8;
const EXIT_DEAD: u64 = 0x10;
const EXIT_ZOMBIE: u64 = 0x20;
const PARKED: u64 = 0x40;
const DEAD: u64 = 0x80;
const WAKING: u64 = 0x200;
const NOLOAD: u64 = 0x400;
const NEW: u64 = 0x800;

impl State {
    /// crash's two letters for the state (task.c's task_state_string, whose later tests
    /// override earlier ones): the last bit it names, or the value itself for RU, PA, WA and
    /// NE; DE for a dead bit no other named; `??` for none. Its `SW` (swapping) has no bit in
    /// these kernels and never shows.
    pub fn name(self) -> &'static str {
        let s = self.0;
        let blocked = if s & NOLOAD != 0 { "ID" } else { "UN" };
        let bits = [
            (INTERRUPTIBLE, "IN"),
            (UNINTERRUPTIBLE, blocked),
            (EXIT_ZOMBIE, "ZO"),
            (STOPPED, "ST"),
            (TRACED, "TR"),
        ];
        let named = bits.iter().rev().find(|&&(mask, _)| s & mask != 0);
        match (s, named) {
            (0, _) => "RU",
            (PARKED, _) => "PA",
            (WAKING, _) => "WA",
            (NEW, _) => "NE",
            (_, Some(&(_, name))) => name,
            // Dead only when no other bit named it.
            _ if s & (EXIT_DEAD | DEAD) != 0 => "DE",
            _ => "??",
        }
    }
}

/// Every task the kernel has, read from its lists and its CPUs. Fails only when the kernel's
/// types are not there to read them with (no vmlinux with DWARF, not Linux).
pub fn tasks(kernel: Kernel<'_>) -> Result<TaskList> {
    let layout = Layout::read(kernel)?;
    let init_task = int(kernel, "&init_task")? as u64;
    let mut walk = Walk {
        mem: kernel.mem,
        seen: HashSet::from([init_task]),
        problems: Vec::new(),
        stopped: false,
    };
    let processes = walk.list(
        init_task.wrapping_add(layout.tasks),
        layout.tasks,
        None,
        &|| "init_task.tasks".into(),
    );
    let mut found = vec![init_task];
    for &leader in &processes {
        found.extend(walk.threads(layout.threads, leader));
    }
    found.extend(processes);
    let cpus = CpuTasks::read(kernel, &mut walk.problems);
    // The idle tasks are on no list; nor is a running task that already took itself off
    // (a thread reaping itself as it exits), which crash lists all the same.
    for &task in cpus.idle.iter().chain(&cpus.current) {
        if task != 0 && walk.seen.insert(task) {
            found.push(task);
        }
    }
    let mut tasks = Vec::with_capacity(found.len());
    for addr in found {
        if crate::interrupt::requested() {
            walk.problems
                .push("interrupted (Ctrl-C): the rest of the tasks are not listed".into());
            break;
        }
        let mut task = layout.task(kernel.mem, addr);
        // A CPU that never started keeps its initial current task (init_task on x86): only
        // the task's own CPU counts.
        task.running = match task.cpu {
            Ok(cpu) => cpus.current.get(cpu as usize) == Some(&addr),
            Err(_) => cpus.current.contains(&addr),
        };
        tasks.push(task);
    }
    tasks.sort_by_key(crash_order);
    Ok(TaskList {
        tasks,
        problems: walk.problems,
    })
}

/// crash's order: by PID, the idle tasks (PID 0) by CPU; tasks whose PID is unknown last.
fn crash_order(t: &Task) -> (bool, i32, u32) {
    match t.pid {
        Ok(0) => (false, 0, *t.cpu.as_ref().unwrap_or(&u32::MAX)),
        Ok(pid) => (false, pid, 0),
        Err(_) => (true, 0, 0),
    }
}

/// Where `task_struct`'s members are, from the DWARF.
struct Layout {
    /// The `list_head` on `init_task.tasks`.
    tasks: u64,
    threads: Threads,
    pid: u64,
    tgid: u64,
    parent: u64,
    cpu: u64,
    state: (u64, u64),
    exit_state: (u64, u64),
    flags: (u64, u64),
    comm: (u64, u64),
}

/// How a process's threads are linked.
#[derive(Clone, Copy)]
enum Threads {
    /// `signal->thread_head`, through each thread's `thread_node` (Linux 3.14 on).
    Signal { signal: u64, head: u64, node: u64 },
    /// The ring of `thread_group` nodes through the leader's own.
    Group { node: u64 },
}

impl Layout {
    fn read(kernel: Kernel<'_>) -> Result<Layout> {
        let offset = |member: &str| member_offset(kernel, "task_struct", member);
        let sized = |member: &str| -> Result<(u64, u64)> {
            let size = int(
                kernel,
                &format!("sizeof(((struct task_struct *)0)->{member})"),
            )?;
            Ok((offset(member)?, size as u64))
        };
        let threads = match (
            offset("thread_node"),
            member_offset(kernel, "signal_struct", "thread_head"),
        ) {
            (Ok(node), Ok(head)) => Threads::Signal {
                signal: offset("signal")?,
                head,
                node,
            },
            _ => Threads::Group {
                node: offset("thread_group")?,
            },
        };
        let (comm, comm_size) = sized("comm")?;
        Ok(Layout {
            tasks: offset("tasks")?,
            threads,
            pid: offset("pid")?,
            tgid: offset("tgid")?,
            parent: offset("parent")?,
            // 5.16 moved it back into thread_info, where that is in the task.
            cpu: offset("thread_info.cpu").or_else(|_| offset("cpu"))?,
            // 5.14 renamed `state` to `__state`.
            state: sized("__state").or_else(|_| sized("state"))?,
            exit_state: sized("exit_state")?,
            flags: sized("flags")?,
            comm: (comm, comm_size.min(COMM_MAX)),
        })
    }

    /// Task `addr`'s fields, each read on its own.
    fn task(&self, mem: &dyn Memory, addr: u64) -> Task {
        let uint = |(off, size): (u64, u64)| mem.read_uint(addr.wrapping_add(off), size);
        let int32 = |off: u64| uint((off, 4)).map(|v| v as u32 as i32);
        let ppid = mem
            .read_u64(addr.wrapping_add(self.parent))
            .and_then(|parent| mem.read_uint(parent.wrapping_add(self.pid), 4))
            .map(|v| v as u32 as i32);
        let state = uint(self.state).and_then(|s| Ok(State(s | uint(self.exit_state)?)));
        let mut name = Vec::new();
        let comm = mem
            .read_cstring(
                addr.wrapping_add(self.comm.0),
                self.comm.1 as usize,
                &mut name,
            )
            .map(|()| escaped(&name));
        Task {
            addr,
            pid: int32(self.pid),
            tgid: int32(self.tgid),
            ppid,
            cpu: uint((self.cpu, 4)).map(|c| c as u32),
            state,
            comm,
            kernel_thread: uint(self.flags).map(|f| f & PF_KTHREAD != 0),
            running: false,
        }
    }
}

/// A task's clocks, in nanoseconds, as `ps -t` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    /// When it started, on the monotonic clock (`start_time`: time since boot, not counting
    /// suspend).
    pub start: u64,
    /// CPU time spent in user space (`utime`).
    pub user: u64,
    /// CPU time spent in the kernel (`stime`).
    pub system: u64,
}

/// Where `task_struct` keeps a task's clocks: nanosecond counters since Linux 4.11 (and
/// `start_time` since 3.17); an older kernel's are other units, which are not read.
pub struct TimesLayout {
    start: u64,
    user: u64,
    system: u64,
}

impl TimesLayout {
    pub fn read(kernel: Kernel<'_>) -> Result<TimesLayout> {
        let nanoseconds = |member: &str| -> Result<u64> {
            let size = int(
                kernel,
                &format!("sizeof(((struct task_struct *)0)->{member})"),
            )?;
            if size != 8 {
                return Err(crate::error::Error::Missing(format!(
                    "task_struct.{member} is {size} bytes, not a 64-bit count of nanoseconds: \
                     this kernel keeps its task times in other units"
                )));
            }
            member_offset(kernel, "task_struct", member)
        };
        Ok(TimesLayout {
            start: nanoseconds("start_time")?,
            user: nanoseconds("utime")?,
            system: nanoseconds("stime")?,
        })
    }

    /// Task `addr`'s clocks.
    pub fn times(&self, mem: &dyn Memory, addr: u64) -> Read<Times> {
        let word = |off: u64| mem.read_u64(addr.wrapping_add(off));
        Ok(Times {
            start: word(self.start)?,
            user: word(self.user)?,
            system: word(self.system)?,
        })
    }
}

/// `&((struct STRUCT *)0)->MEMBER`: where a member is in its struct.
fn member_offset(kernel: Kernel<'_>, strukt: &str, member: &str) -> Result<u64> {
    int(kernel, &format!("&((struct {strukt} *)0)->{member}")).map(|v| v as u64)
}

/// The tasks found so far, and what stopped a list.
struct Walk<'a> {
    mem: &'a dyn Memory,
    seen: HashSet<u64>,
    problems: Vec<String>,
    /// The task limit was reached or Ctrl-C pressed: no list is followed any further.
    stopped: bool,
}

impl Walk<'_> {
    /// The new tasks on the circular list at `head` whose `list_head` is `link` bytes into each,
    /// in list order. `leader`, a thread group's leader on its own thread list, is passed over
    /// once. The walk ends at the head, or with a problem (the list named by `what`) where it
    /// cannot go on: a pointer to memory that cannot be read, a task met before (a loop that
    /// does not come back to the head), the task limit, Ctrl-C.
    fn list(
        &mut self,
        head: u64,
        link: u64,
        mut leader: Option<u64>,
        what: &dyn Fn() -> String,
    ) -> Vec<u64> {
        let mut out = Vec::new();
        if self.stopped {
            return out;
        }
        let mut next = match self.mem.read_u64(head) {
            Ok(next) => next,
            Err(e) => {
                self.problems
                    .push(format!("{}: the head is unreadable: {e}", what()));
                return out;
            }
        };
        let mut at = head;
        while next != head {
            // The node must be readable to be a task's: a pointer to nowhere ends the list.
            let after = match self.mem.read_u64(next) {
                Ok(after) => after,
                Err(e) => {
                    self.problems.push(format!(
                        "{}: stops at {at:#x}, whose next pointer {next:#x} is unreadable ({})",
                        what(),
                        e.reason
                    ));
                    break;
                }
            };
            let task = next.wrapping_sub(link);
            if leader == Some(task) {
                leader = None;
            } else if self.seen.len() >= MAX_TASKS {
                self.stop(format!(
                    "more than {MAX_TASKS} tasks: the rest are not listed"
                ));
                break;
            } else if crate::interrupt::requested() {
                self.stop("interrupted (Ctrl-C): the rest of the tasks are not listed".into());
                break;
            } else if !self.seen.insert(task) {
                self.problems.push(format!(
                    "{}: loops back to task {task:#x} without coming back to its head {head:#x}",
                    what()
                ));
                break;
            } else {
                out.push(task);
            }
            at = next;
            next = after;
        }
        out
    }

    /// Process `leader`'s other threads.
    fn threads(&mut self, threads: Threads, leader: u64) -> Vec<u64> {
        let what = || format!("the threads of task {leader:#x}");
        match threads {
            Threads::Signal { signal, head, node } => {
                match self.mem.read_u64(leader.wrapping_add(signal)) {
                    Ok(s) => self.list(s.wrapping_add(head), node, Some(leader), &what),
                    Err(e) => {
                        let why = format!("{}: its signal is unreadable: {e}", what());
                        self.problems.push(why);
                        Vec::new()
                    }
                }
            }
            // The leader's own node is the ring's head.
            Threads::Group { node } => self.list(leader.wrapping_add(node), node, None, &what),
        }
    }

    fn stop(&mut self, why: String) {
        self.problems.push(why);
        self.stopped = true;
    }
}

/// Each CPU's current and idle task, CPU 0 first: 0 for a CPU whose task is unknown, none at all
/// when no CPU's is known.
struct CpuTasks {
    current: Vec<u64>,
    idle: Vec<u64>,
}

impl CpuTasks {
    /// What the per-CPU areas say; what cannot be read is a problem.
    fn read(kernel: Kernel<'_>, problems: &mut Vec<String>) -> CpuTasks {
        // The scheduler's unit defines the runqueues.
        consult(kernel, &["schedule"]);
        let percpu = match PerCpu::read(kernel) {
            Ok(p) => p,
            Err(e) => {
                problems.push(format!(
                    "the per-CPU areas: {e}: no CPU's current or idle task is known"
                ));
                return CpuTasks {
                    current: Vec::new(),
                    idle: Vec::new(),
                };
            }
        };
        let idle = percpu::variable(kernel, "runqueues")
            .and_then(|rq| Ok(rq.wrapping_add(member_offset(kernel, "rq", "idle")?)));
        let mut each = |slot: Result<u64>, what: &str| -> Vec<u64> {
            let base = match slot {
                Ok(base) => base,
                Err(e) => {
                    problems.push(format!("no CPU's {what} task is known: {e}"));
                    return Vec::new();
                }
            };
            let copies = percpu.copies(base).enumerate();
            copies
                .map(|(cpu, at)| {
                    kernel.mem.read_u64(at).unwrap_or_else(|e| {
                        problems.push(format!("CPU {cpu}'s {what} task is unreadable: {e}"));
                        0
                    })
                })
                .collect()
        };
        CpuTasks {
            current: each(current_slot(kernel), "current"),
            idle: each(idle, "idle"),
        }
    }
}

/// Where each CPU keeps its current task: x86's `pcpu_hot.current_task` (6.2 on), else its
/// `current_task`, else the scheduler's `runqueues.curr`.
fn current_slot(kernel: Kernel<'_>) -> Result<u64> {
    if let Ok(hot) = percpu::variable(kernel, "pcpu_hot") {
        return Ok(hot.wrapping_add(member_offset(kernel, "pcpu_hot", "current_task")?));
    }
    if let Ok(current) = percpu::variable(kernel, "current_task") {
        return Ok(current);
    }
    let rq = percpu::variable(kernel, "runqueues")?;
    Ok(rq.wrapping_add(member_offset(kernel, "rq", "curr")?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::fixture::structs;
    use crate::memory::Runs;
    use symbols::Image;

    /// LIST_POISON1: the `next` of a list entry the kernel deleted.
    const POISON: u64 = 0xdead_0000_0000_0100;
    /// Where the made-up tasks are, one a page.
    const INIT: u64 = 0x10_0000;
    const KTHREADD: u64 = 0x10_1000;
    const WORKER: u64 = 0x10_2000;
    const SIGNAL: u64 = 0x10_3000;

    /// A made-up kernel of the fixture's types (`old`: its layout before 5.14): objects as byte
    /// runs, each field written where the DWARF puts it.
    struct Made<'i> {
        image: &'i Image,
        old: bool,
        runs: Vec<(u64, Vec<u8>)>,
    }

    impl<'i> Made<'i> {
        /// init_task (swapper/0, the idle task) and the processes init (PID 1, running, with a
        /// second thread, PID 5) and kthreadd (PID 2, an idle kernel thread), listed in that
        /// order.
        fn new(image: &'i Image, old: bool) -> Made<'i> {
            let mut m = Made {
                image,
                old,
                runs: Vec::new(),
            };
            let (current, runqueues) = (m.sym("current_task"), m.sym("runqueues"));
            m.runs
                .push((m.sym("nr_cpu_ids"), 1u32.to_le_bytes().to_vec()));
            m.runs.push((m.sym("__per_cpu_offset"), vec![0; 32]));
            m.object(current, "struct task_struct *");
            m.object(runqueues, "struct rq");
            let init_task = m.sym("init_task");
            m.task(init_task, 0, init_task, "swapper/0", 0, PF_KTHREAD as u32);
            m.task(INIT, 1, init_task, "init", 0, 0);
            m.task(KTHREADD, 2, init_task, "kthreadd", 0x402, PF_KTHREAD as u32);
            m.task(WORKER, 5, INIT, "worker", 1, 0);
            m.put(
                &format!("&((struct task_struct *){WORKER:#x})->tgid"),
                &1i32.to_le_bytes(),
            );
            m.word(&format!("{current:#x}"), INIT);
            m.word(&format!("&((struct rq *){runqueues:#x})->curr"), INIT);
            m.word(&format!("&((struct rq *){runqueues:#x})->idle"), init_task);
            m.processes(&[INIT, KTHREADD]);
            m.threads(INIT, &[WORKER]);
            m.threads(KTHREADD, &[]);
            m
        }

        /// init_task.tasks through `leaders`, in order.
        fn processes(&mut self, leaders: &[u64]) {
            let tasks = self.int("&((struct task_struct *)0)->tasks");
            let nodes: Vec<u64> = leaders.iter().map(|t| t + tasks).collect();
            self.ring(self.sym("init_task") + tasks, &nodes);
        }

        fn int(&self, expr: &str) -> u64 {
            let none = Runs(Vec::new());
            let kernel = Kernel {
                image: Some(self.image),
                mem: &none,
            };
            int(kernel, expr).unwrap() as u64
        }

        fn sym(&self, name: &str) -> u64 {
            self.image.symbol(name).unwrap().address
        }

        /// A zeroed object of `ty` at `at`.
        fn object(&mut self, at: u64, ty: &str) {
            let size = self.int(&format!("sizeof({ty})"));
            self.runs.push((at, vec![0; size as usize]));
        }

        /// Writes `bytes` at the address `expr` gives, inside an object made before.
        fn put(&mut self, expr: &str, bytes: &[u8]) {
            let at = self.int(expr);
            let (base, run) = self
                .runs
                .iter_mut()
                .find(|(base, run)| (*base..*base + run.len() as u64).contains(&at))
                .unwrap_or_else(|| panic!("{expr} is in no object"));
            let i = (at - *base) as usize;
            run[i..i + bytes.len()].copy_from_slice(bytes);
        }

        fn word(&mut self, expr: &str, value: u64) {
            self.put(expr, &value.to_le_bytes());
        }

        fn task(&mut self, at: u64, pid: i32, parent: u64, comm: &str, state: u32, flags: u32) {
            self.object(at, "struct task_struct");
            let t = format!("((struct task_struct *){at:#x})");
            let state_member = if self.old { "state" } else { "__state" };
            self.put(&format!("&{t}->pid"), &pid.to_le_bytes());
            self.put(&format!("&{t}->tgid"), &pid.to_le_bytes());
            self.word(&format!("&{t}->parent"), parent);
            self.put(&format!("&{t}->comm"), comm.as_bytes());
            self.put(&format!("&{t}->{state_member}"), &state.to_le_bytes());
            self.put(&format!("&{t}->flags"), &flags.to_le_bytes());
        }

        /// Process `leader`'s other threads: on its signal's thread_head, or its thread_group
        /// ring in the old layout.
        fn threads(&mut self, leader: u64, others: &[u64]) {
            let link = if self.old {
                "thread_group"
            } else {
                "thread_node"
            };
            let node = self.int(&format!("&((struct task_struct *)0)->{link}"));
            let others: Vec<u64> = others.iter().map(|t| t + node).collect();
            if self.old {
                return self.ring(leader + node, &others);
            }
            let signal = SIGNAL + leader;
            self.object(signal, "struct signal_struct");
            for t in [leader].iter().chain(&others) {
                let t = t - node * u64::from(*t != leader);
                self.word(&format!("&((struct task_struct *){t:#x})->signal"), signal);
            }
            let head = self.int(&format!(
                "&((struct signal_struct *){signal:#x})->thread_head"
            ));
            let nodes: Vec<u64> = [leader + node].into_iter().chain(others).collect();
            self.ring(head, &nodes);
        }

        /// The circular list at `head` through the `list_head`s at `nodes`, in order.
        fn ring(&mut self, head: u64, nodes: &[u64]) {
            let mut at = head;
            for &node in nodes.iter().chain([&head]) {
                self.word(&format!("{at:#x}"), node);
                at = node;
            }
        }

        fn tasks(self) -> TaskList {
            let mem = Runs(self.runs);
            let kernel = Kernel {
                image: Some(self.image),
                mem: &mem,
            };
            tasks(kernel).unwrap()
        }
    }

    /// Each task as (PID, PPID, state, comm, kernel thread, running).
    fn rows(list: &TaskList) -> Vec<(i32, i32, &'static str, String, bool, bool)> {
        list.tasks
            .iter()
            .map(|t| {
                (
                    *t.pid.as_ref().unwrap(),
                    *t.ppid.as_ref().unwrap(),
                    t.state.as_ref().unwrap().name(),
                    t.comm.clone().unwrap(),
                    *t.kernel_thread.as_ref().unwrap(),
                    t.running,
                )
            })
            .collect()
    }

    fn standard_rows() -> Vec<(i32, i32, &'static str, String, bool, bool)> {
        vec![
            (0, 0, "RU", "swapper/0".into(), true, false),
            (1, 0, "RU", "init".into(), false, true),
            (2, 0, "ID", "kthreadd".into(), true, false),
            (5, 1, "IN", "worker".into(), false, false),
        ]
    }

    #[test]
    fn every_thread_and_the_idle_task_are_listed_in_crash_order() {
        let dir = tempfile::tempdir().unwrap();
        for flags in [&[][..], &["-DOLD_LAYOUT"]] {
            let test = "every_thread_and_the_idle_task_are_listed_in_crash_order";
            let Some(image) = structs(test, dir.path(), flags) else {
                return;
            };
            let list = Made::new(&image, !flags.is_empty()).tasks();
            assert_eq!(list.problems, Vec::<String>::new(), "{flags:?}");
            assert_eq!(rows(&list), standard_rows(), "{flags:?}");
        }
    }

    /// A deleted entry's poisoned `next` ends the list there, with the reason; the tasks before
    /// it are listed, the running task and idle task too.
    #[test]
    fn a_poisoned_list_pointer_ends_the_list_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let test = "a_poisoned_list_pointer_ends_the_list_with_its_reason";
        let Some(image) = structs(test, dir.path(), &[]) else {
            return;
        };
        let mut made = Made::new(&image, false);
        made.word(
            &format!("&((struct task_struct *){INIT:#x})->tasks.next"),
            POISON,
        );
        let list = made.tasks();
        let mut want = standard_rows();
        want.remove(2);
        assert_eq!(rows(&list), want);
        assert_eq!(list.problems.len(), 1, "{:?}", list.problems);
        assert!(
            list.problems[0].starts_with("init_task.tasks: stops at")
                && list.problems[0].contains(&format!("{POISON:#x} is unreadable")),
            "{}",
            list.problems[0]
        );
    }

    /// A list that loops without passing its head again ends at the first task met twice.
    #[test]
    fn a_list_looping_away_from_its_head_ends_at_the_repeat() {
        let dir = tempfile::tempdir().unwrap();
        let test = "a_list_looping_away_from_its_head_ends_at_the_repeat";
        let Some(image) = structs(test, dir.path(), &[]) else {
            return;
        };
        let mut made = Made::new(&image, false);
        let init_node = made.int(&format!("&((struct task_struct *){INIT:#x})->tasks"));
        made.word(
            &format!("&((struct task_struct *){KTHREADD:#x})->tasks.next"),
            init_node,
        );
        let list = made.tasks();
        assert_eq!(rows(&list), standard_rows());
        assert_eq!(list.problems.len(), 1, "{:?}", list.problems);
        assert!(
            list.problems[0].contains(&format!("loops back to task {INIT:#x}")),
            "{}",
            list.problems[0]
        );
    }

    /// A task of which only the list node can be read is listed with every other field
    /// unknown, each with its reason, and the list goes on after it; its threads are not
    /// known, and that is said.
    #[test]
    fn a_task_whose_memory_is_missing_has_unknown_fields() {
        let dir = tempfile::tempdir().unwrap();
        let test = "a_task_whose_memory_is_missing_has_unknown_fields";
        let Some(image) = structs(test, dir.path(), &[]) else {
            return;
        };
        const TORN: u64 = 0x20_0000;
        let mut made = Made::new(&image, false);
        let node = TORN + made.int("&((struct task_struct *)0)->tasks");
        made.runs.push((node, vec![0; 16]));
        made.processes(&[INIT, TORN, KTHREADD]);
        let list = made.tasks();
        let torn = list.tasks.iter().find(|t| t.addr == TORN).expect("listed");
        for e in [
            torn.pid.as_ref().err(),
            torn.ppid.as_ref().err(),
            torn.cpu.as_ref().err(),
            torn.state.as_ref().err(),
            torn.comm.as_ref().err(),
            torn.kernel_thread.as_ref().err(),
        ] {
            assert_eq!(e.expect("unknown").reason, "not in the memory given");
        }
        assert!(list.tasks.iter().any(|t| t.addr == KTHREADD));
        assert_eq!(list.problems.len(), 1, "{:?}", list.problems);
        let why = format!("the threads of task {TORN:#x}: its signal is unreadable");
        assert!(list.problems[0].starts_with(&why), "{}", list.problems[0]);
    }

    /// A task's clocks are its three nanosecond counters; a kernel whose counters are of
    /// another size (older units) is refused whole, never read as nanoseconds.
    #[test]
    fn task_times_are_read_only_as_nanoseconds() {
        let dir = tempfile::tempdir().unwrap();
        for flags in [&[][..], &["-DOLD_LAYOUT"]] {
            let test = "task_times_are_read_only_as_nanoseconds";
            let Some(image) = structs(test, dir.path(), flags) else {
                return;
            };
            let mut made = Made::new(&image, !flags.is_empty());
            let t = format!("((struct task_struct *){INIT:#x})");
            let layout = {
                let none = Runs(Vec::new());
                let kernel = Kernel {
                    image: Some(&image),
                    mem: &none,
                };
                TimesLayout::read(kernel)
            };
            if !flags.is_empty() {
                let e = layout.err().expect("refused").to_string();
                assert!(e.contains("task_struct.utime is 4 bytes"), "{e}");
                continue;
            }
            made.word(&format!("&{t}->start_time"), 396_000_123);
            made.word(&format!("&{t}->utime"), 4_000_000);
            made.word(&format!("&{t}->stime"), 12_000_000);
            let mem = Runs(made.runs);
            let times = layout.unwrap();
            assert_eq!(
                times.times(&mem, INIT),
                Ok(Times {
                    start: 396_000_123,
                    user: 4_000_000,
                    system: 12_000_000
                })
            );
            let e = times.times(&mem, 0x30_0000).unwrap_err();
            assert_eq!(e.reason, "not in the memory given");
        }
    }

    #[test]
    fn states_are_named_as_crash_names_them() {
        for (bits, name) in [
            (0, "RU"),
            (0x1, "IN"),
            (0x2001, "IN"),
            (0x2, "UN"),
            (0x402, "ID"),
            (0x4, "ST"),
            (0x8, "TR"),
            (0x90, "DE"),
            (0x10, "DE"),
            (0xa0, "ZO"),
            (0x40, "PA"),
            (0x200, "WA"),
            (0x800, "NE"),
            (0x1000, "??"),
            (0x5, "ST"),
        ] {
            assert_eq!(State(bits).name(), name, "{bits:#x}");
        }
    }
}
