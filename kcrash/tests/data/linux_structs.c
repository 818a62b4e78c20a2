/* The kernel structures kcrash's Linux readers ask the DWARF about, as Linux 6.1 (-DOLD_LAYOUT:
 * core_layout) and 6.4 (mem[]) declare them, cut to the members read: the image of the
 * modules unit tests and of the fuzz target "linux" (kcrash/fuzz), over memory they make up. */
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

struct list_head modules;
/* Used, so that gcc describes it (the kernel uses it everywhere). */
struct module *last_unloaded_module;
struct uts_namespace init_uts_ns;
atomic_t __num_online_cpus;
unsigned int nr_cpu_ids = 1;
struct tk_core_t tk_core;
struct pglist_data *node_data[4];
uint64_t jiffies_64 = (uint64_t)(unsigned int)(-300 * 250);

int main(void) { return modules.next != 0; }
