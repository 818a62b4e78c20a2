/*
 * hosted-c: a Linux program whose threads play a C kernel's processors. It logs through
 * klog-runtime/include/klog.h, prints the oracle (corpus/README.md, "Oracle lines") with the C library's
 * snprintf, then dies by abort() so Linux writes an ELF core (or stops itself for gdb's gcore).
 *
 *   hosted-c SCENARIO [--stop]
 *
 * Scenarios: rings wrap unfilled preinit strings torn scribbled off. The oracle goes to stdout.
 *
 * Built with -DHOSTED_PER_PROCESSOR it is hosted-c-percpu, the C twin of the Rust program's
 * per-processor feature: a ring set per processor (4), VM's events in FS's ring (KLOG_GROUP), two
 * minor event IDs (KLogDescriptions), threads pinned to CPUs where they can be, and the scenario
 * percpu besides the others.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { DBG_NONE, DBG_PARCHORE, DBG_FS, DBG_SCHED, DBG_VM, DBG_MAX };
#define KLOG_STATIC_LEVEL KLOG_PROLOG
#define TOS_KLOG_DEBUG
/* Counts finished records, so that readers know unfinished reservations exactly. */
#define KLOG_COUNT_COMMITS
#define KLOG_PLATFORM_BUILD_ID /* klogPlatformBuildId below: the program's own GNU build-id */
#ifdef HOSTED_PER_PROCESSOR
#define KLOG_PROCESSORS 4
/* Minor event IDs, in the Rust program's order, and the formats they stand for. */
enum { EVT_FAULT, EVT_IDLE, EVT_MAX };
#define EVT_FAULT_FORMAT "fault va=%#lx prot=%x"
#define EVT_IDLE_FORMAT "cpu %u idle for %lu ns"
#define KLOG_DESCRIPTIONS EVT_MAX
/* The oracle states the grouping of KLogs below itself rather than reading it back from KLogs. */
#define ORACLE_LEADER(subsys) ((subsys) == DBG_VM ? DBG_FS : (subsys))
#endif
#include "klog.h"
/* Relative to this file: the harness compiles it in place with -Iklog-runtime/include only. */
#include "../include/klog_oracle.h"

/* Ring sizes in records; the Rust hosted program uses the same ones. */
#define NONE_RECS 64
#define PARCHORE_RECS 256
#define FS_RECS 128
#define SCHED_RECS 1024
#define VM_RECS 64

#ifdef HOSTED_PER_PROCESSOR
/* VM has no ring of its own: its KLog mirrors FS's. */
#define VM_RING KLOG_GROUP(VM, FS, FS_RECS)
#define KLOG_TOTAL_RECS (NONE_RECS + PARCHORE_RECS + FS_RECS + SCHED_RECS)
#else
#define VM_RING KLOG_CREATE(VM, VM_RECS)
#define KLOG_TOTAL_RECS (NONE_RECS + PARCHORE_RECS + FS_RECS + SCHED_RECS + VM_RECS)
#endif
/* One processor's set of KLogs. */
#define RING_SET                                                                                   \
    KLOG_CREATE(NONE, NONE_RECS), KLOG_CREATE(PARCHORE, PARCHORE_RECS), KLOG_CREATE(FS, FS_RECS),  \
        KLOG_CREATE(SCHED, SCHED_RECS), VM_RING

KLOG_BUFFER_DEFINE(KLOG_TOTAL_RECS);
KLOG_DESCRIPTOR_DEFINE();
#ifdef HOSTED_PER_PROCESSOR
_Static_assert(KLOG_PROCESSORS == 4, "KLogs below holds four sets");
KLog KLogs[KLOG_PROCESSORS * DBG_MAX] = {RING_SET, RING_SET, RING_SET, RING_SET};
const char *const KLogDescriptions[KLOG_DESCRIPTIONS] = {
    [EVT_FAULT] = EVT_FAULT_FORMAT,
    [EVT_IDLE] = EVT_IDLE_FORMAT,
};
#else
KLog KLogs[DBG_MAX] = {RING_SET};
#endif
Dbg_Intensity DebugFlags[DBG_MAX] = {
    KLOG_INTENSITY_DEFAULT, KLOG_INTENSITY_DEFAULT, KLOG_INTENSITY_DEFAULT,
    KLOG_INTENSITY_DEFAULT, KLOG_INTENSITY_DEFAULT,
};
unsigned int klogLevel = KLOG_STATIC_LEVEL;
uint64_t klogClockHz;

/* ---- platform: a thread is a processor, its task struct's address is the chore id ---- */

struct task {
    uint32_t cpu;
    char name[24];
};

static __thread struct task *this_task;
/* What the hooks returned for this thread's last event, for its oracle line. */
static __thread uint64_t last_clock, last_chore, last_proc_dom;

uint64_t klogPlatformClock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    last_clock = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return last_clock;
}

uint64_t klogPlatformChoreId(void)
{
    last_chore = (uint64_t)(uintptr_t)this_task;
    return last_chore;
}

uint64_t klogPlatformProcDom(void)
{
    last_proc_dom = klogMakeProcDom(this_task ? this_task->cpu : 0, 1);
    return last_proc_dom;
}

struct build_id {
    const uint8_t *bytes;
    size_t len;
};

/* The GNU build-id note of the main program (the first object dl_iterate_phdr reports), for the
 * descriptor: found in *(struct build_id *)out; the walk stops after the main program. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        /* Notes are padded to their segment's alignment (4, or 8 for .note.gnu.property). */
        size_t align = ph->p_align == 8 ? 8 : 4;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
        const char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *n;
            const char *desc = name + ((n->n_namesz + align - 1) & ~(align - 1));
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
                desc + n->n_descsz <= end) {
                struct build_id *id = out;
                id->bytes = (const uint8_t *)desc;
                id->len = n->n_descsz;
                return 1;
            }
            p = desc + ((n->n_descsz + align - 1) & ~(align - 1));
        }
    }
    return 1; /* only the main program */
}

size_t klogPlatformBuildId(const uint8_t **id)
{
    struct build_id found = {NULL, 0};
    dl_iterate_phdr(find_build_id, &found);
    *id = found.bytes;
    return found.len;
}

/* ---- the oracle ---- */

static pthread_mutex_t oracle_lock = PTHREAD_MUTEX_INITIALIZER;
static int rings_announced;
/* Lines of events logged before klogInit, printed once the rings are announced. */
static char pending[64][1024];
static int npending;

static void die(const char *what)
{
    fprintf(stderr, "hosted-c: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void oracle_line(const char *line)
{
    pthread_mutex_lock(&oracle_lock);
    if (rings_announced) {
        fputs(line, stdout);
    } else if (npending < 64) {
        snprintf(pending[npending++], sizeof pending[0], "%s", line);
    } else {
        fputs("hosted-c: too many events before klogInit\n", stderr);
        exit(2);
    }
    pthread_mutex_unlock(&oracle_lock);
}

/* Sets the clock frequency, then prints it, every KLog's place (each processor set's; a group
 * member's mirrors its leader's) and the events logged before. */
static void announce_rings(uint64_t hz)
{
    klogClockHz = hz;
    pthread_mutex_lock(&oracle_lock);
    printf("KLOG-CONFIG clock_hz=%lu\n", (unsigned long)klogClockHz);
    for (int i = 0; i < KLOG_PROCESSORS * DBG_MAX; i++)
        printf("KLOG-RING ring=%d name=%s num_recs=%lu buffer=%p\n", i, KLogs[i].name,
               (unsigned long)KLogs[i].num_recs, (void *)KLogs[i].buffer);
    for (int i = 0; i < npending; i++)
        fputs(pending[i], stdout);
    rings_announced = 1;
    pthread_mutex_unlock(&oracle_lock);
}

/* The oracle line of a torn reservation. */
static void oracle_torn(int subsys, int64_t seq)
{
    char line[160];
    int ring = receiving_ring(subsys, last_proc_dom);
    snprintf(line, sizeof line, "KLOG-TORN ring=%d subsys=%d seq=%lld at=0x%lx\n", ring, subsys,
             (long long)seq, (unsigned long)record_address(ring, seq));
    oracle_line(line);
}

/* What a record's desc word should hold: the word, its kind, and the format it stands for. */
struct description {
    enum KLogDesc kind;
    uint64_t word;
    const char *text;
};

/* A format logged by its address. */
static struct description pointer_desc(const char *format)
{
    return (struct description){KLOG_DESC_POINTER, (uint64_t)(uintptr_t)format, format};
}

/* One KLOG-EVENT (or KLOG-SKIP when the event was off) with the message snprintf made. */
static void oracle_event(int subsys, int64_t seq, struct description desc, uint64_t d1,
                         uint64_t d2, uint64_t d3, const char *msg)
{
    /* The harness's names for kinds other than an address, after desc=. */
    static const char *const kinds[] = {
        [KLOG_DESC_POINTER] = "",
        [KLOG_DESC_INLINE] = " desc_kind=inline",
        [KLOG_DESC_EVENT] = " desc_kind=event",
    };
    char line[1024];
    if (seq < 0) {
        snprintf(line, sizeof line, "KLOG-SKIP subsys=%d fmt=", subsys);
    } else {
        int ring = receiving_ring(subsys, last_proc_dom);
        /* desc= as a number: %p would print event ID 0 as "(nil)". */
        snprintf(line, sizeof line,
                 "KLOG-EVENT ring=%d subsys=%d seq=%lld at=0x%lx id=0x%lx proc_dom=0x%lx clock=%lu "
                 "desc=0x%lx%s d1=0x%lx d2=0x%lx d3=0x%lx fmt=",
                 ring, subsys, (long long)seq, (unsigned long)record_address(ring, seq),
                 (unsigned long)last_chore, (unsigned long)last_proc_dom,
                 (unsigned long)last_clock, (unsigned long)desc.word, kinds[desc.kind],
                 (unsigned long)d1, (unsigned long)d2, (unsigned long)d3);
    }
    oracle_escape(line, sizeof line, desc.text, true);
    strncat(line, " msg=", sizeof line - strlen(line) - 1);
    oracle_escape(line, sizeof line - 1, msg, false);
    strcat(line, "\n");
    oracle_line(line);
}

/* Logs one event at `level` through `log` (KLOG, KLOG_INLINE or KLOG_EVENT, given `arg` for its
 * description) and prints its oracle line, `described` saying what the desc word should hold.
 * The data words are the arguments as the KLOG macros store them; the message is snprintf's
 * rendering of the same arguments. */
#define LOG_EVENT_(log, arg, described, subsys, level, format, ...)                                \
    do {                                                                                           \
        uint64_t w_[3] = {0, 0, 0};                                                                \
        words_(w_, __VA_ARGS__);                                                                   \
        int64_t seq_ = log(subsys, level, arg, w_[0], w_[1], w_[2]);                               \
        char msg_[512];                                                                            \
        snprintf(msg_, sizeof msg_, format, __VA_ARGS__); /* the literal: gcc checks the args */  \
        oracle_event(subsys, seq_, described, w_[0], w_[1], w_[2], msg_);                          \
    } while (0)

/* An event whose format is logged by its address. */
#define EVENT(subsys, level, format, ...)                                                          \
    do {                                                                                           \
        static const char desc_[] = format;                                                        \
        LOG_EVENT_(KLOG, desc_, pointer_desc(desc_), subsys, level, format, __VA_ARGS__);          \
    } while (0)

/* An event whose format (at most 8 bytes) travels in the record; the oracle's word is its own
 * packing of the text, not klog.h's. */
#define EVENT_INLINE(subsys, level, format, ...)                                                   \
    LOG_EVENT_(KLOG_INLINE, format,                                                                \
               ((struct description){KLOG_DESC_INLINE, oracle_inline_desc(format), format}),       \
               subsys, level, format, __VA_ARGS__)

/* An event logged by minor event ID `id` (EVT_<NAME>, whose format is EVT_<NAME>_FORMAT). */
#define EVENT_ID(subsys, level, id, ...)                                                           \
    LOG_EVENT_(KLOG_EVENT, id, ((struct description){KLOG_DESC_EVENT, id, id##_FORMAT}), subsys,   \
               level, id##_FORMAT, __VA_ARGS__)
#define words_(w, ...) words_n_(w, __VA_ARGS__, 0, 0, 0)
#define words_n_(w, a, b, c, ...)                                                                  \
    ((w)[0] = KLOG_WORD_(a), (w)[1] = KLOG_WORD_(b), (w)[2] = KLOG_WORD_(c))

/* ---- scenarios ---- */

#define CPUS 4

struct worker {
    struct task task;
    pthread_t thread;
    void (*body)(int cpu);
};

static struct worker workers[CPUS];

#ifdef HOSTED_PER_PROCESSOR
/* Pins the calling thread to the `n`th CPU it may run on (modulo their number), as the Rust
 * program does. Best effort: a record names its task's processor, whichever CPU ran it. */
static void pin_to_a_cpu(int n)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) == 0)
        return;
    int skip = n % CPU_COUNT(&allowed);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed) || skip-- > 0)
            continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        (void)sched_setaffinity(0, sizeof one, &one);
        return;
    }
}
#endif

static void *worker_main(void *arg)
{
    struct worker *w = arg;
#ifdef HOSTED_PER_PROCESSOR
    pin_to_a_cpu((int)w->task.cpu);
#endif
    this_task = &w->task;
    w->body((int)w->task.cpu);
    return NULL;
}

/* Runs `body` on CPUS threads, each with its own task struct, and waits for them. */
static void on_every_cpu(void (*body)(int cpu))
{
    for (int i = 0; i < CPUS; i++) {
        workers[i].task.cpu = (uint32_t)i;
        snprintf(workers[i].task.name, sizeof workers[i].task.name, "cpu%d", i);
        workers[i].body = body;
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]))
            die("pthread_create");
    }
    for (int i = 0; i < CPUS; i++)
        pthread_join(workers[i].thread, NULL);
}

static const char *const paths[] = {"/etc/motd", "/var/log/klog", "/dev/console", "/tmp"};

/* One event of each kind a small kernel would log, varying with `i`. */
static void mixed_event(int cpu, int i)
{
    switch (i % 4) {
    case 0:
        EVENT(DBG_SCHED, KLOG_VERBOSE, "postProcess: task:" HEX64FORMAT " curPD:%d",
              (unsigned long)(uintptr_t)this_task + (unsigned long)i, cpu * 100 + i);
        break;
    case 1:
        EVENT(DBG_FS, KLOG_TERSE, "open %s -> fd %d", paths[(i / 4) % 4], i);
        break;
    case 2:
        EVENT(DBG_VM, KLOG_VERBOSE, "fault va=%#lx prot=%x cpu=%u",
              0x7f0000000000ul + (unsigned long)i * 4096, (unsigned)(i & 7), (unsigned)cpu);
        break;
    default:
        EVENT(DBG_PARCHORE, KLOG_PROLOG, "chore %p spawned, %ld ready", (void *)this_task,
              (long)(i - 50));
        break;
    }
}

static void rings_body(int cpu)
{
    for (int i = 0; i < 150; i++)
        mixed_event(cpu, i);
}

static void wrap_body(int cpu)
{
    for (int i = 0; i < VM_RECS * 8; i++)
        EVENT(DBG_VM, KLOG_TERSE, "page %u of cpu %d", (unsigned)i, cpu);
}

static void unfilled_body(int cpu)
{
    if (cpu == 0)
        for (int i = 0; i < 5; i++)
            EVENT(DBG_SCHED, KLOG_TERSE, "tick %d", i);
    if (cpu == 1)
        for (int i = 0; i < 3; i++)
            EVENT(DBG_FS, KLOG_TERSE, "sync %d of %d", i, 3);
}

static void preinit_body(int cpu)
{
    for (int i = 0; i < 10; i++)
        mixed_event(cpu, i);
}

static void torn_body(int cpu)
{
    for (int i = 0; i < 20; i++) {
        EVENT(DBG_FS, KLOG_TERSE, "write block %d cpu %d", i, cpu);
        /* cpu 2 is interrupted mid-record once; the others keep logging past it. */
        if (cpu == 2 && i == 7) {
            oracle_torn(DBG_FS, klogReserveTorn(DBG_FS));
        }
    }
}

static void startup(uint64_t hz)
{
    klogInit();
    announce_rings(hz);
}

#ifdef HOSTED_PER_PROCESSOR
#define PERCPU_SCENARIO " percpu"

/* Gives processor `cpu`'s PARCHORE ring a 64-record buffer allocated now, after klogInit, as a
 * kernel gives a ring memory it allocates after boot. Never freed, as a kernel's ring is not. */
static void attach_parchore(int cpu)
{
    const uint64_t words = 64 * KLOG_REC_SIZE;
    uint64_t *buffer = aligned_alloc(64, words * sizeof *buffer);
    if (!buffer)
        die("aligned_alloc");
    memset(buffer, 0, words * sizeof *buffer);
    if (klogAttach(cpu * DBG_MAX + DBG_PARCHORE, buffer, words) != 0) {
        fputs("hosted-c: klogAttach refused a 64-record aligned buffer\n", stderr);
        exit(2);
    }
}

/* Each processor logs into its own rings: rings' mix, with every tenth an idle event (event ID),
 * a sync (inline) and a fault (event ID, VM into FS's ring); processor 1 then overwrites most of
 * its SCHED ring. */
static void percpu_body(int cpu)
{
    for (int i = 0; i < 120; i++) {
        mixed_event(cpu, i);
        if (i % 10 == 0) {
            EVENT_ID(DBG_SCHED, KLOG_TERSE, EVT_IDLE, (unsigned)cpu, (unsigned long)i * 1000);
            EVENT_INLINE(DBG_FS, KLOG_TERSE, "sync %u", (unsigned)i);
            EVENT_ID(DBG_VM, KLOG_VERBOSE, EVT_FAULT, 0x50000000ul + (unsigned long)i * 4096, 5u);
        }
    }
    if (cpu == 1)
        for (unsigned tick = 0; tick < 3000; tick++)
            EVENT(DBG_SCHED, KLOG_TERSE, "cpu1 tick %u", tick);
}
#else
#define PERCPU_SCENARIO ""
#endif

static void crash(const char *why, int stop)
{
    printf("KCRASH-PANIC %s\n", why);
    fflush(stdout);
    if (stop) {
        /* The harness takes a core with gdb's gcore, then kills us. */
        raise(SIGSTOP);
        for (;;)
            pause();
    }
    abort();
}

static void raise_core_limit(void)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_CORE, &lim))
        die("getrlimit");
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_CORE, &lim))
        die("setrlimit");
}

static void scribble(int subsys, const char *field, uint64_t value)
{
    char line[160];
    snprintf(line, sizeof line, "KLOG-DAMAGE ring=%d kind=scribbled field=%s value=0x%lx\n",
             subsys, field, (unsigned long)value);
    oracle_line(line);
    if (strcmp(field, "next_write") == 0)
        __atomic_store_n(&KLogs[subsys].next_write, value, __ATOMIC_RELAXED);
    else
        __atomic_store_n(&KLogs[subsys].buffer, (uint64_t *)(uintptr_t)value, __ATOMIC_RELAXED);
}

static struct task boot_task = {.cpu = 0, .name = "boot"};

/* %s arguments at static, heap, stack and unmapped strings. Crashes from this frame, so the stack
 * string is still live in the dump. */
static void strings_scenario(int stop)
{
    char stack_name[32];
    snprintf(stack_name, sizeof stack_name, "stack-%d", (int)getpid() % 7);
    char *heap_name = malloc(32);
    if (!heap_name)
        die("malloc");
    snprintf(heap_name, 32, "heap-%lu", (unsigned long)klogClockHz % 13);
    long page = sysconf(_SC_PAGESIZE);
    char *gone = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (gone == MAP_FAILED)
        die("mmap");
    strcpy(gone, "unmapped before the crash");

    EVENT(DBG_FS, KLOG_TERSE, "static %s", "/etc/motd");
    EVENT(DBG_FS, KLOG_TERSE, "heap %s len %zu", heap_name, strlen(heap_name));
    EVENT(DBG_FS, KLOG_TERSE, "stack %s at %p", stack_name, (void *)stack_name);
    EVENT(DBG_FS, KLOG_TERSE, "two %s and %s", "/dev/console", heap_name);
    EVENT(DBG_FS, KLOG_TERSE, "precision %.3s|%-8s|", "truncated", "pad");

    /* The page is gone from the process (and so from its core) when the dump is taken. */
    {
        static const char desc[] = "unmapped %s";
        int64_t seq = KLOGT1(DBG_FS, desc, KLOG_STR(gone));
        char msg[64];
        snprintf(msg, sizeof msg, "unmapped <unreadable %p>", (void *)gone);
        oracle_event(DBG_FS, seq, pointer_desc(desc), (uint64_t)(uintptr_t)gone, 0, 0, msg);
    }
    if (munmap(gone, (size_t)page))
        die("munmap");
    crash("strings: abort with heap, stack and unmapped strings logged", stop);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s SCENARIO [--stop]\n", argv[0]);
        return 2;
    }
    const char *scenario = argv[1];
    int stop = argc > 2 && strcmp(argv[2], "--stop") == 0;
    raise_core_limit();
    this_task = &boot_task;
    const uint64_t hz = 1000000000u; /* CLOCK_MONOTONIC nanoseconds */

    if (strcmp(scenario, "rings") == 0) {
        startup(hz);
        on_every_cpu(rings_body);
    } else if (strcmp(scenario, "wrap") == 0) {
        startup(hz);
        on_every_cpu(wrap_body);
    } else if (strcmp(scenario, "unfilled") == 0) {
        startup(hz);
        on_every_cpu(unfilled_body);
    } else if (strcmp(scenario, "preinit") == 0) {
        EVENT(DBG_SCHED, KLOG_TERSE, "boot: sched before klogInit %d", 1);
        EVENT(DBG_VM, KLOG_TERSE, "boot: %lu pages", 8192ul);
        EVENT(DBG_NONE, KLOG_TERSE, "boot: console %s", "ttyS0");
        EVENT(DBG_FS, KLOG_VERBOSE, "boot: root on %s flags %#x", "/dev/vda1", 0x41u);
        startup(hz);
        on_every_cpu(preinit_body);
    } else if (strcmp(scenario, "strings") == 0) {
        startup(hz);
        strings_scenario(stop);
    } else if (strcmp(scenario, "torn") == 0) {
        startup(hz);
        on_every_cpu(torn_body);
        /* The very last VM record is torn too: a writer interrupted by the crash itself. */
        EVENT(DBG_VM, KLOG_TERSE, "last whole record %d", 1);
        oracle_torn(DBG_VM, klogReserveTorn(DBG_VM));
    } else if (strcmp(scenario, "scribbled") == 0) {
        startup(hz);
        on_every_cpu(rings_body);
        scribble(DBG_FS, "next_write", 0xdeadbeefdeadbeefull);
        scribble(DBG_SCHED, "buffer", 0x0badc0de0badc0deull);
    } else if (strcmp(scenario, "off") == 0) {
        startup(hz);
        klogLevel = KLOG_OFF;
        on_every_cpu(rings_body);
#ifdef HOSTED_PER_PROCESSOR
    } else if (strcmp(scenario, "percpu") == 0) {
        klogInit();
        attach_parchore(3);
        announce_rings(hz);
        on_every_cpu(percpu_body);
#endif
    } else {
        fprintf(stderr, "hosted-c: unknown scenario %s (rings wrap unfilled preinit strings torn "
                        "scribbled off" PERCPU_SCENARIO ")\n", scenario);
        return 2;
    }
    char why[96];
    snprintf(why, sizeof why, "%s: abort after logging", scenario);
    crash(why, stop);
}
