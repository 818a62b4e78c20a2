// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * klogtest: a Linux module that logs through klog-runtime/include/klog.h, so that kcrash meets a
 * KLog living in a loadable module of a real distribution kernel (KASLR on, module memory in the
 * vmalloc area). It prints the oracle (corpus/README.md, "Oracle lines") on the console, each
 * message rendered by the kernel's own snprintf, independently of kcrash.
 *
 * What it logs, in order:
 *   - before klogInit: a few events of every subsystem, which land in NONE's ring;
 *   - %s arguments at module .rodata, kmalloc'd heap, kernel .data (utsname), a kthread's
 *     task_struct (comm), and an address that is never mapped (the guard page after a vmalloc);
 *   - then two kthreads bound to CPU 0 and CPU 1 log a mix of events together: VM and NET wrap
 *     their rings, SCHED and FS do not; CPU 1 leaves one torn FS record behind.
 * Then it prints KCRASH-MODULE (its core layout and the addresses of KLogs and KLogBuffer) and
 * returns; the guest's /init panics the kernel with sysrq-c. The kthreads stay alive (asleep) so
 * the task_structs their events point at are still in the dump.
 * Writing N to /sys/module/klogtest/parameters/burst logs N more events, for a reader of the
 * running kernel (kcrash on /proc/kcore).
 */
#include <linux/completion.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/version.h>
#include <linux/timekeeping.h>
#include <linux/utsname.h>
#include <linux/vmalloc.h>

enum { DBG_NONE, DBG_SCHED, DBG_FS, DBG_VM, DBG_NET, DBG_MAX };
#define KLOG_STATIC_LEVEL KLOG_PROLOG
#define TOS_KLOG_DEBUG
/* Counts finished records, so that readers know unfinished reservations exactly. */
#define KLOG_COUNT_COMMITS
#include "klog.h"
#include "klog_oracle.h"

/* Ring sizes in records: VM and NET wrap, SCHED and FS keep every event. */
#define NONE_RECS 64
#define SCHED_RECS 256
#define FS_RECS 128
#define VM_RECS 64
#define NET_RECS 32
#define KLOG_TOTAL_RECS (NONE_RECS + SCHED_RECS + FS_RECS + VM_RECS + NET_RECS)

/* Events each kthread logs. */
#define EVENTS_PER_CPU 200
/* The kthread on CPU 1 leaves a torn FS record after this many events. */
#define TORN_AFTER 120

KLOG_BUFFER_DEFINE(KLOG_TOTAL_RECS);
/* No build-id or page-table root hooks: the module cannot reach its own build-id note, and
 * init_mm (the kernel's page tables) is not exported; a reader takes both from the vmcore. */
KLOG_DESCRIPTOR_DEFINE();
KLog KLogs[DBG_MAX] = {
	KLOG_CREATE(NONE, NONE_RECS), KLOG_CREATE(SCHED, SCHED_RECS), KLOG_CREATE(FS, FS_RECS),
	KLOG_CREATE(VM, VM_RECS),     KLOG_CREATE(NET, NET_RECS),
};
Dbg_Intensity DebugFlags[DBG_MAX] = {
	KLOG_INTENSITY_DEFAULT, KLOG_INTENSITY_DEFAULT, KLOG_INTENSITY_DEFAULT,
	KLOG_INTENSITY_DEFAULT, KLOG_INTENSITY_DEFAULT,
};
unsigned int klogLevel = KLOG_STATIC_LEVEL;
uint64_t klogClockHz;

/* ---- platform: a processor is a CPU, a chore is a task (its pid), the clock is ktime ---- */

/* What the hooks returned for this CPU's last event, for its oracle line. Every event is logged
 * and printed with preemption off, so the values are the event's own. */
struct hook_values {
	u64 clock, chore, proc_dom;
};
static DEFINE_PER_CPU(struct hook_values, last_hooks);

#ifdef CONFIG_ARM64
#include <asm/arch_timer.h>
/* The raw virtual counter (CNTVCT_EL0) and its frequency (CNTFRQ_EL0). */
#define klog_clock_now() __arch_counter_get_cntvct()
#define klog_clock_hz() ((u64)arch_timer_get_cntfrq())
#else
#define klog_clock_now() ktime_get_mono_fast_ns()
#define klog_clock_hz() ((u64)NSEC_PER_SEC)
#endif

uint64_t klogPlatformClock(void)
{
	u64 now = klog_clock_now();

	this_cpu_write(last_hooks.clock, now);
	return now;
}

uint64_t klogPlatformChoreId(void)
{
	u64 chore = (u64)task_pid_nr(current);

	this_cpu_write(last_hooks.chore, chore);
	return chore;
}

uint64_t klogPlatformProcDom(void)
{
	/* Domain 0: every event comes from kernel mode. */
	u64 proc_dom = klogMakeProcDom(smp_processor_id(), 0);

	this_cpu_write(last_hooks.proc_dom, proc_dom);
	return proc_dom;
}

/* ---- the oracle ---- */

/* One CPU's buffers for its oracle lines (too big for a kernel stack frame). */
struct oracle_scratch {
	char line[960];
	char msg[400];
	char fmt[320];
};
static DEFINE_PER_CPU(struct oracle_scratch, scratch);

static bool rings_announced;
/* Lines of events logged before klogInit (by the module's init alone), printed once the rings
 * are announced. */
#define MAX_PENDING 16
static char pending[MAX_PENDING][sizeof(((struct oracle_scratch *)0)->line)];
static int npending;

static void oracle_line(const char *line)
{
	if (READ_ONCE(rings_announced)) {
		pr_info("%s\n", line);
	} else if (npending < MAX_PENDING) {
		strscpy(pending[npending++], line, sizeof(pending[0]));
	} else {
		pr_err("klogtest: too many events before klogInit\n");
	}
}

static void announce_rings(void)
{
	int i;

	pr_info("KLOG-CONFIG clock_hz=%llu\n", (unsigned long long)klogClockHz);
	for (i = 0; i < DBG_MAX; i++)
		pr_info("KLOG-RING ring=%d name=%s num_recs=%llu buffer=0x%lx\n", i, KLogs[i].name,
			(unsigned long long)KLogs[i].num_recs, (unsigned long)KLogs[i].buffer);
	for (i = 0; i < npending; i++)
		pr_info("%s\n", pending[i]);
	WRITE_ONCE(rings_announced, true);
}

static void oracle_torn(int subsys, s64 seq)
{
	struct oracle_scratch *s = this_cpu_ptr(&scratch);
	int ring = receiving_ring(subsys, this_cpu_read(last_hooks.proc_dom));

	snprintf(s->line, sizeof(s->line), "KLOG-TORN ring=%d subsys=%d seq=%lld at=0x%lx", ring,
		 subsys, (long long)seq, record_address(ring, seq));
	oracle_line(s->line);
}

/* One KLOG-EVENT line for the event just logged on this CPU, whose message is in s->msg. */
static void oracle_event(struct oracle_scratch *s, int subsys, s64 seq, const char *desc, u64 d1,
			 u64 d2, u64 d3)
{
	int ring = receiving_ring(subsys, this_cpu_read(last_hooks.proc_dom));

	snprintf(s->line, sizeof(s->line),
		 "KLOG-EVENT ring=%d subsys=%d seq=%lld at=0x%lx id=0x%llx proc_dom=0x%llx clock=%llu desc=0x%lx d1=0x%llx d2=0x%llx d3=0x%llx fmt=",
		 ring, subsys, (long long)seq, record_address(ring, seq),
		 this_cpu_read(last_hooks.chore), this_cpu_read(last_hooks.proc_dom),
		 this_cpu_read(last_hooks.clock), (unsigned long)desc, d1, d2, d3);
	oracle_escape(s->line, sizeof(s->line), desc, true);
	strlcat(s->line, " msg=", sizeof(s->line));
	oracle_escape(s->line, sizeof(s->line), s->msg, false);
	oracle_line(s->line);
}

/* Logs one event through KLOG and prints its oracle line. The data words are the arguments as
 * KLOG stores them; the message is the kernel snprintf's rendering of the same arguments. */
#define EVENT(subsys, level, format, ...)                                                          \
	do {                                                                                       \
		static const char desc_[] = format;                                                \
		u64 w_[3] = { 0, 0, 0 };                                                           \
		struct oracle_scratch *s_;                                                         \
		s64 seq_;                                                                          \
		words_(w_, __VA_ARGS__);                                                           \
		preempt_disable();                                                                 \
		s_ = this_cpu_ptr(&scratch);                                                       \
		seq_ = KLOG(subsys, level, desc_, w_[0], w_[1], w_[2]);                            \
		snprintf(s_->msg, sizeof(s_->msg), format, __VA_ARGS__);                           \
		oracle_event(s_, subsys, seq_, desc_, w_[0], w_[1], w_[2]);                        \
		preempt_enable();                                                                  \
	} while (0)
#define words_(w, ...) words_n_(w, __VA_ARGS__, 0, 0, 0)
#define words_n_(w, a, b, c, ...)                                                                  \
	((w)[0] = KLOG_WORD_(a), (w)[1] = KLOG_WORD_(b), (w)[2] = KLOG_WORD_(c))

/* ---- what is logged ---- */

/* %s arguments in the module's .rodata. */
static const char *const paths[] = { "/etc/motd", "/var/log/klog", "/dev/console", "/lib/modules" };

/* Events logged before klogInit: one of every subsystem, all in NONE's ring. */
static void preinit_events(void)
{
	EVENT(DBG_SCHED, KLOG_TERSE, "early sched tick %d", 1);
	EVENT(DBG_FS, KLOG_TERSE, "early mount %s", paths[3]);
	EVENT(DBG_VM, KLOG_TERSE, "early zone %u pages %lu", 0u, 4096ul);
	EVENT(DBG_NET, KLOG_TERSE, "early link %s up", "lo");
	EVENT(DBG_NONE, KLOG_TERSE, "early none %d", 5);
}

/* Never freed: the strings must still be in the dump. */
static char *heap_name;
/* A vmalloc'd page, and the guard page after it: never mapped while the page lives. */
static char *vpage;

/* %s arguments in every kind of memory, and one that cannot be read. */
static int string_events(void)
{
	char *gone;

	heap_name = kasprintf(GFP_KERNEL, "heap-%u", (unsigned int)(ktime_get_mono_fast_ns() % 13));
	vpage = vmalloc(PAGE_SIZE);
	if (!heap_name || !vpage)
		return -ENOMEM;
	strscpy(vpage, "vmalloc'd string", PAGE_SIZE);
	gone = vpage + PAGE_SIZE;

	EVENT(DBG_FS, KLOG_TERSE, "static %s", paths[0]);
	EVENT(DBG_FS, KLOG_TERSE, "heap %s len %zu", heap_name, strlen(heap_name));
	EVENT(DBG_FS, KLOG_TERSE, "vmalloc %s", vpage);
	EVENT(DBG_FS, KLOG_TERSE, "release %s machine %s", utsname()->release, utsname()->machine);
	EVENT(DBG_FS, KLOG_TERSE, "two %s and %s", paths[2], heap_name);
	EVENT(DBG_FS, KLOG_TERSE, "precision %.3s|%-8s|", "truncated", "pad");
	{
		static const char desc[] = "unmapped %s";
		struct oracle_scratch *s;
		s64 seq;

		preempt_disable();
		s = this_cpu_ptr(&scratch);
		seq = KLOGT1(DBG_FS, desc, KLOG_STR(gone));
		snprintf(s->msg, sizeof(s->msg), "unmapped <unreadable 0x%lx>", (unsigned long)gone);
		oracle_event(s, DBG_FS, seq, desc, (u64)(unsigned long)gone, 0, 0);
		preempt_enable();
	}
	return 0;
}

/* One event of each kind a kernel would log, varying with `i`. */
static void mixed_event(unsigned int cpu, int i)
{
	switch (i % 5) {
	case 0:
		EVENT(DBG_SCHED, KLOG_VERBOSE, "switch to pid %d prio %d on cpu %u",
		      task_pid_nr(current), current->prio, cpu);
		break;
	case 1:
		EVENT(DBG_FS, KLOG_TERSE, "open %s -> fd %d", paths[(i / 5) % 4], i);
		break;
	case 2:
		EVENT(DBG_VM, KLOG_VERBOSE, "fault va=%#lx prot=%x cpu=%u",
		      0x7f0000000000ul + (unsigned long)i * 4096, (unsigned int)(i & 7), cpu);
		break;
	case 3:
		EVENT(DBG_NET, KLOG_PROLOG, "xmit from %s len %u seq %lu", current->comm,
		      (unsigned int)(64 + i), (unsigned long)i * 1000);
		break;
	default:
		EVENT(DBG_SCHED, KLOG_TERSE, "task:" HEX64FORMAT " curPD:%d",
		      (unsigned long)current + (unsigned long)i, (int)cpu * 100 + i);
		break;
	}
}

/* ---- more events on demand, for a reader of the live kernel ---- */

/* Events logged through the burst parameter so far: numbers them. */
static unsigned int burst_count;

/* One event of a burst; its %s arguments are in the module's .rodata, so they stay readable. */
static void burst_event(unsigned int i)
{
	switch (i % 4) {
	case 0:
		EVENT(DBG_SCHED, KLOG_TERSE, "burst %u on cpu %d", i, raw_smp_processor_id());
		break;
	case 1:
		EVENT(DBG_FS, KLOG_TERSE, "burst %u open %s", i, paths[i % 4]);
		break;
	case 2:
		EVENT(DBG_VM, KLOG_VERBOSE, "burst %u fault va=%#lx", i,
		      0x7e0000000000ul + (unsigned long)i * 4096);
		break;
	default:
		EVENT(DBG_NET, KLOG_PROLOG, "burst %u xmit len %u", i, 64 + i);
		break;
	}
}

/* `echo N > /sys/module/klogtest/parameters/burst` logs N more events (each with its oracle
 * line) before the write returns; reading it gives how many were logged so far. */
static int burst_set(const char *val, const struct kernel_param *kp)
{
	unsigned int n, i;
	int err = kstrtouint(val, 0, &n);

	if (err)
		return err;
	if (n > 100000)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		burst_event(burst_count++);
		cond_resched();
	}
	return 0;
}

static const struct kernel_param_ops burst_ops = {
	.set = burst_set,
	.get = param_get_uint,
};
module_param_cb(burst, &burst_ops, &burst_count, 0644);
MODULE_PARM_DESC(burst, "write N to log N more events");

static DECLARE_COMPLETION(start);
static DECLARE_COMPLETION(finished);

/* Events between two rendezvous of the kthreads. */
#define ROUND 10
static atomic_t arrivals = ATOMIC_INIT(0);

/* Waits until both kthreads have finished round `round`, so that their events interleave in
 * every ring rather than one CPU logging all of its events before the other starts. */
static void rendezvous(int round)
{
	atomic_inc(&arrivals);
	while (atomic_read(&arrivals) < 2 * (round + 1))
		cpu_relax();
}

static int worker(void *data)
{
	unsigned int cpu = (unsigned int)(unsigned long)data;
	int i;

	wait_for_completion(&start);
	for (i = 0; i < EVENTS_PER_CPU; i++) {
		if (i % ROUND == 0)
			rendezvous(i / ROUND);
		mixed_event(cpu, i);
		/* ftrace's own printk: a bprint record whose format is in this module. */
		if (i % 8 == 0)
			trace_printk("klogtest cpu %u event %d of %s\n", cpu, i, current->comm);
		if (cpu == 1 && i == TORN_AFTER) {
			/* Interrupted mid-record: the header stays 0; FS never wraps over it. */
			preempt_disable();
			oracle_torn(DBG_FS, klogReserveTorn(DBG_FS));
			preempt_enable();
		}
	}
	/* A constant string: a bputs record. */
	trace_puts("klogtest worker done\n");
	complete(&finished);
	/* Stay alive: events point at this task's comm. */
	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		schedule();
	}
	return 0;
}

/*
 * Where the module's code is and how big its core (what stays after init) is, as /proc/modules
 * says: one core_layout until Linux 6.4, a region per kind of memory (mem[]) since.
 */
static unsigned long module_base(void)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
	return (unsigned long)THIS_MODULE->mem[MOD_TEXT].base;
#else
	return (unsigned long)THIS_MODULE->core_layout.base;
#endif
}

static unsigned int module_core_size(void)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
	unsigned int size = 0;

	for_class_mod_mem_type(type, core)
		size += THIS_MODULE->mem[type].size;
	return size;
#else
	return THIS_MODULE->core_layout.size;
#endif
}

static int __init klogtest_init(void)
{
	unsigned int cpu;
	int err;

	if (num_online_cpus() < 2) {
		pr_err("klogtest: needs 2 CPUs, has %u\n", num_online_cpus());
		return -ENODEV;
	}
	preinit_events();
	klogInit();
	klogClockHz = klog_clock_hz();
	announce_rings();
	err = string_events();
	if (err)
		return err;
	for (cpu = 0; cpu < 2; cpu++) {
		/* kthread_create_on_cpu is not exported before Linux 5.13: create, then bind. */
		struct task_struct *t = kthread_create(worker, (void *)(unsigned long)cpu,
						       "klogtest/%u", cpu);

		if (IS_ERR(t))
			return PTR_ERR(t);
		kthread_bind(t, cpu);
		wake_up_process(t);
	}
	complete_all(&start);
	for (cpu = 0; cpu < 2; cpu++)
		wait_for_completion(&finished);
	pr_info("KCRASH-MODULE name=%s base=0x%lx size=%u klogs=0x%lx klogbuffer=0x%lx\n",
		THIS_MODULE->name, module_base(), module_core_size(), (unsigned long)KLogs,
		(unsigned long)KLogBuffer);
	return 0;
}
module_init(klogtest_init);

MODULE_DESCRIPTION("kcrash's Linux test kernel: a KLog written through klog.h");
/* Dual: ktime_get_mono_fast_ns is a GPL-only export. */
MODULE_LICENSE("Dual MIT/GPL");
