/* The kernel structures kcrash's Linux readers ask the DWARF about, cut to the members read:
 * modules as Linux 6.4 (mem[]) and 6.1 (-DOLD_LAYOUT: core_layout) declare them, tasks as 6.1
 * does and (-DOLD_LAYOUT) as kernels before 5.14 did (`state`, the CPU in the task, threads on
 * a thread_group ring), and ORC's entry and tables. The image of the modules and tasks unit
 * tests and of the fuzz target "linux" (kcrash/fuzz), over memory they make up. */
#include <stdint.h>

struct list_head { struct list_head *next, *prev; };
struct attribute { const char *name; unsigned short mode; };
struct bin_attribute { struct attribute attr; unsigned long size; void *private; };
struct module_sect_attr { struct bin_attribute battr; unsigned long address; };
struct attribute_group { const char *name; void *attrs; };
struct module_sect_attrs {
	struct attribute_group grp;
	unsigned int nsections;
	struct module_sect_attr attrs[];
};
struct module_layout { void *base; unsigned int size; unsigned int text_size; };
struct module_memory { void *base; unsigned int size; };

struct module {
	int state;
	struct list_head list;
	char name[56];
#ifdef OLD_LAYOUT
	struct module_layout core_layout;
	struct module_layout init_layout;
#else
	struct module_memory mem[7];
#endif
	unsigned long taints;
	struct module_sect_attrs *sect_attrs;
};

struct new_utsname {
	char sysname[65], nodename[65], release[65], version[65], machine[65], domainname[65];
};
struct uts_namespace { struct new_utsname name; };
typedef struct { int counter; } atomic_t;
struct timekeeper { uint64_t xtime_sec; };
struct tk_core_t { unsigned int seq; struct timekeeper timekeeper; };
struct pglist_data { unsigned long node_present_pages; };

struct thread_info { unsigned long flags; unsigned int cpu; };
struct signal_struct { int nr_threads; struct list_head thread_head; };
struct task_struct {
#ifdef OLD_LAYOUT
	long state;
	unsigned int cpu;
#else
	struct thread_info thread_info;
	unsigned int __state;
#endif
	unsigned int flags;
	struct list_head tasks;
	int exit_state;
	int pid;
	int tgid;
	struct task_struct *real_parent;
	struct task_struct *parent;
#ifdef OLD_LAYOUT
	struct list_head thread_group;
#else
	struct list_head thread_node;
#endif
	char comm[16];
	struct signal_struct *signal;
#ifdef OLD_LAYOUT
	/* Before 4.11: clock ticks in a 32-bit cputime_t, which ps -t does not read. */
	unsigned int utime, stime;
#else
	unsigned long long utime, stime;
#endif
	unsigned long long start_time;
};
struct rq { struct task_struct *curr, *idle; };

struct list_head modules;
/* Used, so that gcc describes it (the kernel uses it everywhere). */
struct module *last_unloaded_module;
struct uts_namespace init_uts_ns;
atomic_t __num_online_cpus;
unsigned int nr_cpu_ids = 1;
struct tk_core_t tk_core;
struct pglist_data *node_data[4];
uint64_t jiffies_64 = (uint64_t)(unsigned int)(-300 * 250);
struct task_struct init_task;
/* Per-CPU in the kernel: here one copy, and __per_cpu_offset's zeros find it for every CPU. */
struct task_struct *current_task;
struct rq runqueues;
unsigned long __per_cpu_offset[4];

/* ORC's entry (arch/x86/include/asm/orc_types.h) as 6.4 declares it, and (-DOLD_LAYOUT) as 6.1
 * did; and the tables and the code they cover, named as the kernel's linker script names their
 * bounds: 16 entries over 4 KiB. */
struct orc_entry {
	short sp_offset;
	short bp_offset;
	unsigned sp_reg:4;
	unsigned bp_reg:4;
#ifdef OLD_LAYOUT
	unsigned type:2;
	unsigned end:1;
#else
	unsigned type:3;
	unsigned signal:1;
#endif
} __attribute__((packed));
struct orc_entry orc_example;
__asm__(".data\n"
	".globl _stext\n_stext: .fill 4096, 1, 0\n.globl _etext\n_etext:\n"
	".globl __start_orc_unwind_ip\n__start_orc_unwind_ip: .fill 16, 4, 0\n"
	".globl __stop_orc_unwind_ip\n__stop_orc_unwind_ip:\n"
	".globl __start_orc_unwind\n__start_orc_unwind: .fill 16, 6, 0\n");

int main(void) { return modules.next != 0; }
