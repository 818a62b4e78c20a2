/*
 * klog.h: the Tera kernel event log ("Logging Kernel Events", Tera Computer Company, 1995) for
 * C kernels. It writes the same on-dump format as the klog-runtime crate (src/record.rs is the
 * contract), so one reader serves kernels written in either language.
 *
 * Header word of every record:
 *
 *    63            32 31       16 15          0
 *   +----------------+-----------+-------------+
 *   | MAGIC "KLOG"   | RECSIZE 8 | subsystem   |
 *   +----------------+-----------+-------------+
 *
 * A writer reserves a record with one atomic fetch-add of KLOG_REC_SIZE on its ring's next_write,
 * stores 0 in the header word, stores the other seven words, then stores the real header last with
 * release ordering. A reader that finds header 0 knows the writer was interrupted.
 *
 * The embedding kernel, before including this file, defines its subsystems as the design's debug
 * classes: DBG_NONE (0, the ring of events logged before klogInit), DBG_<NAME> ids in KLogs
 * order, and DBG_MAX. Optionally KLOG_STATIC_LEVEL (default KLOG_TERSE) and TOS_KLOG_DEBUG. Then
 * in one translation unit it defines the statics declared below:
 *
 *   KLOG_BUFFER_DEFINE(KLOG_TOTAL_RECS);                      // sum of every ring's records
 *   KLog KLogs[DBG_MAX] = { KLOG_CREATE(NONE, 64), KLOG_CREATE(SCHED, 1024), ... };
 *   Dbg_Intensity DebugFlags[DBG_MAX] = { KLOG_INTENSITY_DEFAULT, ... };
 *   unsigned int klogLevel = KLOG_STATIC_LEVEL;
 *   uint64_t klogClockHz;                                    // the clock's frequency
 *
 * and the platform hooks klogPlatformClock, klogPlatformChoreId and klogPlatformProcDom.
 * Every access to a ring word or to next_write/buffer uses GCC/Clang __atomic builtins. C11 only:
 * the compile-time checks are not valid C++.
 */
#ifndef KLOG_H
#define KLOG_H

/* A Linux module has no libc headers: the kernel's own types give the fixed-width integers. */
#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

/* Upper 32 bits of every record header: ASCII "KLOG". */
#define KLOG_MAGIC 0x4B4C4F47ULL
/* Words per record, as the design hard-codes it. */
#define KLOG_REC_SIZE 8
/* The header word of a record whose writer reserved it but did not finish it. */
#define KLOG_TORN_HEADER 0ULL

/* The header word a writer stores last for an event of subsystem `subsys`. */
static inline uint64_t klogEncodeHeader(uint16_t subsys)
{
    return (KLOG_MAGIC << 32) | ((uint64_t)KLOG_REC_SIZE << 16) | subsys;
}

/* What a header word says about its record (klogDecodeHeader). */
enum KLogHeaderKind {
    KLOG_HEADER_VALID,   /* a complete record; *subsys receives its subsystem */
    KLOG_HEADER_TORN,    /* header 0: the writer was interrupted */
    KLOG_HEADER_INVALID, /* never written, or overwritten by something else */
};

static inline enum KLogHeaderKind klogDecodeHeader(uint64_t word, uint16_t *subsys)
{
    if (word == KLOG_TORN_HEADER)
        return KLOG_HEADER_TORN;
    if ((word >> 32) != KLOG_MAGIC || ((word >> 16) & 0xffff) != KLOG_REC_SIZE)
        return KLOG_HEADER_INVALID;
    *subsys = (uint16_t)word;
    return KLOG_HEADER_VALID;
}

/* thisProcessor():thisDomain() packed into one word: processor in the upper half. */
static inline uint64_t klogMakeProcDom(uint32_t processor, uint32_t domain)
{
    return ((uint64_t)processor << 32) | domain;
}

static inline uint32_t klogProcessor(uint64_t proc_dom) { return (uint32_t)(proc_dom >> 32); }
static inline uint32_t klogDomain(uint64_t proc_dom) { return (uint32_t)proc_dom; }

/* The control block of one subsystem's ring. Every field is 64 bits; each KLog is one 64-byte
 * cache line, aligned so processors logging to different subsystems never share a line. */
typedef struct __attribute__((aligned(64))) _KLog {
    uint64_t subsystem;
    const char *name;       /* subsystem name without DBG_ ("SCHED") */
    uint64_t num_recs;      /* records the ring holds, a power of two */
    uint64_t rec_size;      /* # words per record: KLOG_REC_SIZE */
    uint64_t header;        /* formatted header for EvtTr compat */
    uint64_t *buffer;       /* first word of the ring; KLogBuffer until klogInit */
    uint64_t buffer_size_1; /* total number of words in buffer - 1: the wrap mask */
    uint64_t next_write;    /* word index of the next record; only grows */
} KLog;

/* One event record, exactly as it sits in a ring. */
typedef struct _KLogRec {
    uint64_t header;   /* MAGIC:RECSIZE:subsystem */
    uint64_t id;       /* thisChore() */
    uint64_t proc_dom; /* thisProcessor():thisDomain() */
    uint64_t clock;    /* platform clock, in ticks of klogClockHz */
    const char *desc;  /* printf format of the event */
    uint64_t data1;
    uint64_t data2;
    uint64_t data3;
} KLogRec;

_Static_assert(sizeof(KLog) == 8 * 8 && _Alignof(KLog) == 64, "KLog is one cache line of eight 64-bit words");
_Static_assert(sizeof(KLogRec) == KLOG_REC_SIZE * 8, "KLogRec is KLOG_REC_SIZE 64-bit words");

/* A subsystem's debugging intensity, one entry of DebugFlags (bit 0 first, as klog-runtime). */
typedef struct _Dbg_Intensity {
    unsigned int d_prolog : 1;     /* log function entry/exit */
    unsigned int d_terse : 1;      /* important trace messages */
    unsigned int d_verbose : 1;    /* detailed trace messages */
    unsigned int d_klog : 1;       /* enable event logging */
    unsigned int d_klogprintf : 1; /* print events to the console */
} Dbg_Intensity;

/* Every subsystem logs by default, as the design says. */
#define KLOG_INTENSITY_DEFAULT {.d_klog = 1}

enum {
    KLOG_OFF,     /* 0: no KLOG event logging */
    KLOG_TERSE,   /* 1: terse events logged */
    KLOG_VERBOSE, /* 2: verbose events logged */
    KLOG_PROLOG,  /* 3: prolog events logged */
    KLOG_ALL      /* this enum should always be last */
};

/* Without TOS_KLOG_DEBUG, events above this level compile to nothing. */
#ifndef KLOG_STATIC_LEVEL
#define KLOG_STATIC_LEVEL KLOG_TERSE
#endif

/* Format for a 64-bit data word in hex. */
#define HEX64FORMAT "%016lx"

/* Every ring's records, 64-byte aligned as klog-runtime's KLogBuffer is, so that no record
 * straddles two cache lines. Define it with KLOG_BUFFER_DEFINE(total_recs). */
extern uint64_t KLogBuffer[] __attribute__((aligned(64)));
#define KLOG_BUFFER_DEFINE(total_recs)                                                             \
    uint64_t KLogBuffer[KLOG_REC_SIZE * (total_recs)] __attribute__((aligned(64)))
extern KLog KLogs[DBG_MAX];
extern Dbg_Intensity DebugFlags[DBG_MAX];
extern unsigned int klogLevel;
extern uint64_t klogClockHz;

/* Platform hooks the embedding kernel supplies; called on every logged event. */
uint64_t klogPlatformClock(void);   /* time stamp, in ticks of klogClockHz */
uint64_t klogPlatformChoreId(void); /* thisChore() */
uint64_t klogPlatformProcDom(void); /* klogMakeProcDom(thisProcessor(), thisDomain()) */

/* Fails to compile unless RECS is a nonzero power of two; evaluates to 0. */
#define KLOG_POW2_CHECK_(RECS)                                                                     \
    (0 * sizeof(struct {                                                                           \
         int klog_ring_size_must_be_a_power_of_two : ((RECS) > 0 && ((RECS) & ((RECS)-1)) == 0)   \
                                                         ? 1                                       \
                                                         : -1;                                     \
     }))

/* A statically initialised KLog for DBG_<NAME> holding RECS records. Its buffer points at
 * KLogBuffer, so events logged before klogInit land in the NONE ring, which stays there. */
#define KLOG_CREATE(NAME, RECS)                                                                    \
    {                                                                                              \
        .subsystem = DBG_##NAME,                                                                   \
        .name = #NAME,                                                                             \
        .num_recs = (RECS) + KLOG_POW2_CHECK_(RECS),                                               \
        .rec_size = KLOG_REC_SIZE,                                                                 \
        .header = (KLOG_MAGIC << 32) | ((uint64_t)KLOG_REC_SIZE << 16) | (uint16_t)DBG_##NAME,     \
        .buffer = KLogBuffer,                                                                      \
        .buffer_size_1 = (uint64_t)(RECS) * KLOG_REC_SIZE - 1,                                     \
        .next_write = 0,                                                                           \
    }

/* The design's klogInit(): gives every subsystem its own part of KLogBuffer, in KLogs order.
 * The NONE ring stays at the start, so records logged before this call stay in place. Call it
 * once, early, before other processors log. */
static inline void klogInit(void)
{
    uint64_t offset = 0;
    for (int i = 0; i < DBG_MAX; i++) {
        __atomic_store_n(&KLogs[i].buffer, KLogBuffer + offset, __ATOMIC_RELEASE);
        offset += KLogs[i].buffer_size_1 + 1;
    }
}

/* Reserves the next slot of `ring`: its sequence number goes to *seq, the slot is returned. */
static inline KLogRec *klogReserve_(KLog *ring, int64_t *seq)
{
    uint64_t old = __atomic_fetch_add(&ring->next_write, KLOG_REC_SIZE, __ATOMIC_RELAXED);
    uint64_t *buffer = __atomic_load_n(&ring->buffer, __ATOMIC_RELAXED);
    *seq = (int64_t)(old / KLOG_REC_SIZE);
    return (KLogRec *)(buffer + (old & ring->buffer_size_1));
}

/* Writes one record for `subsys` and returns its sequence number in the ring that received it.
 * Before klogInit every subsystem's records go to the NONE ring (header still names `subsys`). */
static inline int64_t klogWrite(uint16_t subsys, const char *desc, uint64_t d1, uint64_t d2,
                                uint64_t d3)
{
    KLog *ring = &KLogs[subsys];
    /* Only NONE's ring really lives at the start of KLogBuffer; another KLog still pointing there
     * has not been given its ring by klogInit yet. */
    if (subsys != 0 && __atomic_load_n(&ring->buffer, __ATOMIC_RELAXED) == KLogBuffer)
        ring = &KLogs[0];
    int64_t seq;
    KLogRec *rec = klogReserve_(ring, &seq);
    __atomic_store_n(&rec->header, KLOG_TORN_HEADER, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&rec->id, klogPlatformChoreId(), __ATOMIC_RELAXED);
    __atomic_store_n(&rec->proc_dom, klogPlatformProcDom(), __ATOMIC_RELAXED);
    /* Read after reserving so a ring's clocks follow its slot order as closely as possible. */
    __atomic_store_n(&rec->clock, klogPlatformClock(), __ATOMIC_RELAXED);
    __atomic_store_n(&rec->desc, desc, __ATOMIC_RELAXED);
    __atomic_store_n(&rec->data1, d1, __ATOMIC_RELAXED);
    __atomic_store_n(&rec->data2, d2, __ATOMIC_RELAXED);
    __atomic_store_n(&rec->data3, d3, __ATOMIC_RELAXED);
    __atomic_store_n(&rec->header, klogEncodeHeader(subsys), __ATOMIC_RELEASE);
    return seq;
}

/* Reserves a record for `subsys` and stops after zeroing its header, as a writer interrupted
 * mid-record would; returns its sequence number. For test kernels that must leave a torn record
 * in a real dump. */
static inline int64_t klogReserveTorn(uint16_t subsys)
{
    int64_t seq;
    KLogRec *rec = klogReserve_(&KLogs[subsys], &seq);
    __atomic_store_n(&rec->header, KLOG_TORN_HEADER, __ATOMIC_RELEASE);
    return seq;
}

#ifdef TOS_KLOG_DEBUG
/* The design's run-time checks: the subsystem's d_klog flag and klogLevel. */
static inline int klogEnabled(uint16_t subsys, unsigned int level)
{
    return DebugFlags[subsys].d_klog && level <= __atomic_load_n(&klogLevel, __ATOMIC_RELAXED);
}
#define KLOG_ENABLED_(subsys, level) klogEnabled((subsys), (level))
#else
/* A constant: the compiler removes every event above the static level. */
#define KLOG_ENABLED_(subsys, level) ((level) <= KLOG_STATIC_LEVEL)
#endif

/* A data word from any integer or pointer; signed values are sign-extended. */
#define KLOG_WORD_(x) ((uint64_t)(uintptr_t)(x))

/* A %s argument: the address of a NUL-terminated string. */
#define KLOG_STR(s) ((uint64_t)(uintptr_t)(const char *)(s))

/* Logs an event and evaluates to its sequence number in its ring, or -1 when the event is off.
 * KLOG(subsystem, level, desc, d1, d2[, d3]); desc is a printf format. */
#define KLOG(subsys, level, desc, d1, ...) KLOG_3_(subsys, level, desc, d1, __VA_ARGS__, 0, 0)
#define KLOG_3_(subsys, level, desc, d1, d2, d3, ...)                                              \
    (KLOG_ENABLED_(subsys, level)                                                                  \
         ? klogWrite((subsys), (desc), KLOG_WORD_(d1), KLOG_WORD_(d2), KLOG_WORD_(d3))             \
         : (int64_t)-1)

/* KLOG[012](subsystem, level, desc[, d1][, d2]): level given, 0, 1 or 2 data words. */
#define KLOG0(subsys, level, desc) KLOG(subsys, level, desc, 0, 0)
#define KLOG1(subsys, level, desc, d1) KLOG(subsys, level, desc, d1, 0)
#define KLOG2(subsys, level, desc, d1, d2) KLOG(subsys, level, desc, d1, d2)

/* KLOG[TVP][012](subsystem, desc[, d1][, d2]): terse, verbose or prolog. No digit means 2. */
#define KLOGT0(subsys, desc) KLOG0(subsys, KLOG_TERSE, desc)
#define KLOGT1(subsys, desc, d1) KLOG1(subsys, KLOG_TERSE, desc, d1)
#define KLOGT2(subsys, desc, d1, d2) KLOG2(subsys, KLOG_TERSE, desc, d1, d2)
#define KLOGT(subsys, desc, d1, d2) KLOG2(subsys, KLOG_TERSE, desc, d1, d2)
#define KLOGV0(subsys, desc) KLOG0(subsys, KLOG_VERBOSE, desc)
#define KLOGV1(subsys, desc, d1) KLOG1(subsys, KLOG_VERBOSE, desc, d1)
#define KLOGV2(subsys, desc, d1, d2) KLOG2(subsys, KLOG_VERBOSE, desc, d1, d2)
#define KLOGV(subsys, desc, d1, d2) KLOG2(subsys, KLOG_VERBOSE, desc, d1, d2)
#define KLOGP0(subsys, desc) KLOG0(subsys, KLOG_PROLOG, desc)
#define KLOGP1(subsys, desc, d1) KLOG1(subsys, KLOG_PROLOG, desc, d1)
#define KLOGP2(subsys, desc, d1, d2) KLOG2(subsys, KLOG_PROLOG, desc, d1, d2)
#define KLOGP(subsys, desc, d1, d2) KLOG2(subsys, KLOG_PROLOG, desc, d1, d2)

#endif /* KLOG_H */
