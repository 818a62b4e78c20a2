/*
 * Test fixture: the Tera kernel event-log structures (KLog, KLogRec, Dbg_Intensity bit-fields,
 * the DBG_ ids) and globals, as a C program. Built with gcc by the symbols tests; when run it
 * prints what the compiler itself knows about the layout (sizeof, offsetof, and each bit-field's
 * position found by setting it in a zeroed object), which the tests compare with what the
 * symbols crate reads from the DWARF.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef enum {
    DBG_NONE,
    DBG_PARCHORE,
    DBG_FS,
    DBG_SCHED,
    DBG_VM,
    DBG_MAX
} Dbg_Id;

typedef struct _KLog {
    int64_t subsystem;
    char *name;
    int64_t num_recs;
    int64_t rec_size;
    int64_t header;
    int64_t *buffer;
    int64_t buffer_size_1;
    int64_t next_write;
} KLog;

typedef struct _KLogRec {
    uint64_t header;
    uint64_t id;
    uint64_t proc_dom;
    uint64_t clock;
    uint64_t desc;
    int64_t data1;
    int64_t data2;
    int64_t data3;
} KLogRec;

typedef struct _Dbg_Intensity {
    unsigned int d_prolog:1;
    unsigned int d_terse:1;
    unsigned int d_verbose:1;
    unsigned int d_klog:1;
    unsigned int d_klogprintf:1;
} Dbg_Intensity;

/* A flexible array member and a two-dimensional array, for the array model. */
struct klog_chunk {
    uint32_t count;
    const volatile uint64_t grid[3][4];
    KLogRec recs[];
};

#define KLOG_BUFFER_WORDS 4096

KLog KLogs[DBG_MAX];
int64_t KLogBuffer[KLOG_BUFFER_WORDS];
Dbg_Intensity DebugFlags[DBG_MAX];
int klogLevel = 2;
struct klog_chunk *klog_chunks;
Dbg_Id klog_last_id = DBG_VM;

/* Inlined into main at -O2, so line lookups there have an inlined frame. */
static inline int64_t klog_reserve(KLog *log, int64_t words)
{
    int64_t at = log->next_write;
    log->next_write = (at + words) % (log->buffer_size_1 + 1);
    return at;
}

#define FIELD(type, member) \
    printf("offsetof %s %s %zu\n", #type, #member, offsetof(type, member))

/* The first bit set when only `member` of a zeroed Dbg_Intensity is set. */
#define BIT(member)                                                          \
    do {                                                                     \
        Dbg_Intensity d;                                                     \
        unsigned char bytes[sizeof d];                                       \
        memset(&d, 0, sizeof d);                                             \
        d.member = 1;                                                        \
        memcpy(bytes, &d, sizeof d);                                         \
        for (size_t bit = 0; bit < 8 * sizeof d; bit++)                      \
            if (bytes[bit / 8] & (1u << (bit % 8)))                          \
                printf("bit Dbg_Intensity %s %zu\n", #member, bit);          \
    } while (0)

int main(void)
{
    printf("sizeof KLog %zu\n", sizeof(KLog));
    printf("sizeof KLogRec %zu\n", sizeof(KLogRec));
    printf("sizeof Dbg_Intensity %zu\n", sizeof(Dbg_Intensity));
    printf("sizeof KLogs %zu\n", sizeof(KLogs));
    printf("sizeof KLogBuffer %zu\n", sizeof(KLogBuffer));
    printf("sizeof DebugFlags %zu\n", sizeof(DebugFlags));
    printf("sizeof klog_chunk %zu\n", sizeof(struct klog_chunk));
    FIELD(KLog, subsystem);
    FIELD(KLog, name);
    FIELD(KLog, num_recs);
    FIELD(KLog, rec_size);
    FIELD(KLog, header);
    FIELD(KLog, buffer);
    FIELD(KLog, buffer_size_1);
    FIELD(KLog, next_write);
    FIELD(KLogRec, header);
    FIELD(KLogRec, id);
    FIELD(KLogRec, proc_dom);
    FIELD(KLogRec, clock);
    FIELD(KLogRec, desc);
    FIELD(KLogRec, data1);
    FIELD(KLogRec, data2);
    FIELD(KLogRec, data3);
    FIELD(struct klog_chunk, count);
    FIELD(struct klog_chunk, grid);
    FIELD(struct klog_chunk, recs);
    BIT(d_prolog);
    BIT(d_terse);
    BIT(d_verbose);
    BIT(d_klog);
    BIT(d_klogprintf);
    printf("enum DBG_NONE %d\n", DBG_NONE);
    printf("enum DBG_PARCHORE %d\n", DBG_PARCHORE);
    printf("enum DBG_FS %d\n", DBG_FS);
    printf("enum DBG_SCHED %d\n", DBG_SCHED);
    printf("enum DBG_VM %d\n", DBG_VM);
    printf("enum DBG_MAX %d\n", DBG_MAX);
    KLogs[DBG_FS].num_recs = klogLevel + (int)klog_last_id + (klog_chunks != NULL);
    DebugFlags[DBG_FS].d_klog = 1;
    KLogs[DBG_FS].buffer_size_1 = KLOG_BUFFER_WORDS - 1;
    KLogBuffer[klog_reserve(&KLogs[DBG_FS], 8)] = KLogs[DBG_FS].num_recs;
    return 0;
}
