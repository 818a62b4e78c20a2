/*
 * klog.h: the Tera kernel event log ("Logging Kernel Events", Tera Computer Company, 1995) for
 * C kernels. It writes the same on-dump format as the klog-runtime crate (src/record.rs is the
 * contract), so one reader serves kernels written in either language.
 *
 * Header word of every record:
 *
 *    63            32 31      24 23      16 15          0
 *   +----------------+----------+----------+-------------+
 *   | MAGIC "KLOG"   | DESC     | RECSIZE 8| subsystem   |
 *   +----------------+----------+----------+-------------+
 *
 * DESC says what the record's desc word is: KLOG_DESC_POINTER, the address of a printf format;
 * KLOG_DESC_INLINE, up to 8 bytes of format text in the word itself, NUL-padded;
 * KLOG_DESC_EVENT, a minor event ID indexing KLogDescriptions.
 *
 * A writer reserves a record with one atomic fetch-add of KLOG_REC_SIZE on its ring's next_write,
 * stores 0 in the header word, stores the other seven words, then stores the real header last with
 * release ordering. A reader that finds header 0 knows the writer was interrupted.
 *
 * The embedding kernel, before including this file, defines its subsystems as the design's debug
 * classes: DBG_NONE (0, the ring of events logged before klogInit), DBG_<NAME> ids in KLogs
 * order, and DBG_MAX. Optionally KLOG_STATIC_LEVEL (default KLOG_TERSE), TOS_KLOG_DEBUG,
 * KLOG_PROCESSORS (sets of rings, one per processor; default 1, every processor sharing each
 * ring) and KLOG_DESCRIPTIONS (entries of its KLogDescriptions table, for KLOG_EVENT). Then in
 * one translation unit it defines the statics declared below:
 *
 *   KLOG_BUFFER_DEFINE(KLOG_TOTAL_RECS);        // every ring's records, once per processor set
 *   KLog KLogs[KLOG_PROCESSORS * DBG_MAX] = {   // processor p's set at p * DBG_MAX; sets
 *       KLOG_CREATE(NONE, 64), KLOG_CREATE(SCHED, 1024), KLOG_GROUP(VM, SCHED, 1024), ... };
 *                                               // left out are copies of the first (klogInit)
 *   const char *const KLogDescriptions[KLOG_DESCRIPTIONS] = { "fault at %lx", ... };
 *   Dbg_Intensity DebugFlags[DBG_MAX] = { KLOG_INTENSITY_DEFAULT, ... };
 *   unsigned int klogLevel = KLOG_STATIC_LEVEL;
 *   uint64_t klogClockHz;                                    // the clock's frequency
 *   KLOG_DESCRIPTOR_DEFINE();              // klogDescriptor and KLogCommits; after KLogBuffer
 *
 * and the platform hooks klogPlatformClock, klogPlatformChoreId and klogPlatformProcDom. If it
 * defines KLOG_PLATFORM_BUILD_ID (or KLOG_PLATFORM_PAGE_TABLE_ROOT) before including this file, it
 * also supplies klogPlatformBuildId (klogPlatformPageTableRoot), which klogInit asks once to
 * seal the descriptor; without them the descriptor says "not known".
 * Every access to a ring word or to next_write/buffer uses GCC/Clang __atomic builtins. C11 only:
 * the compile-time checks are not valid C++.
 */
#ifndef KLOG_H
#define KLOG_H

/* A Linux module has no libc headers: the kernel's own types give the fixed-width integers. */
#ifdef __KERNEL__
#include <linux/stddef.h>
#include <linux/types.h>
#else
#include <stddef.h>
#include <stdint.h>
#endif

/* Upper 32 bits of every record header: ASCII "KLOG". */
#define KLOG_MAGIC 0x4B4C4F47ULL
/* Words per record, as the design hard-codes it. */
#define KLOG_REC_SIZE 8
/* The header word of a record whose writer reserved it but did not finish it. */
#define KLOG_TORN_HEADER 0ULL

/* What a record's desc word holds: the DESC byte of its header. */
enum KLogDesc {
    KLOG_DESC_POINTER = 0, /* the address of a NUL-terminated printf format */
    KLOG_DESC_INLINE = 1,  /* up to 8 bytes of format text, NUL-padded */
    KLOG_DESC_EVENT = 2,   /* an index into KLogDescriptions */
};

/* The header word a writer stores last for an event of subsystem `subsys` whose desc word is
 * of kind `desc`. */
static inline uint64_t klogEncodeHeaderDesc(uint16_t subsys, enum KLogDesc desc)
{
    return (KLOG_MAGIC << 32) | ((uint64_t)desc << 24) | ((uint64_t)KLOG_REC_SIZE << 16) | subsys;
}

static inline uint64_t klogEncodeHeader(uint16_t subsys)
{
    return klogEncodeHeaderDesc(subsys, KLOG_DESC_POINTER);
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
    if ((word >> 32) != KLOG_MAGIC || ((word >> 16) & 0xff) != KLOG_REC_SIZE ||
        ((word >> 24) & 0xff) > KLOG_DESC_EVENT)
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
 * cache line, aligned so processors logging to different rings never share a line. A subsystem
 * grouped into another's ring (KLOG_GROUP) keeps a KLog that never receives records: its
 * `subsystem` names the leader, and buffer, num_recs and buffer_size_1 mirror the leader's. */
typedef struct __attribute__((aligned(64))) _KLog {
    uint64_t subsystem;     /* the subsystem whose ring this is: its own id or its leader's */
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
    const char *desc;  /* printf format: its address, text or event ID (header's DESC) */
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
    uint64_t KLogBuffer[KLOG_REC_SIZE * KLOG_PROCESSORS * (total_recs)] __attribute__((aligned(64)))

/* Sets of rings: with N, processor p logs into KLogs[p % N * DBG_MAX + ...]. */
#ifndef KLOG_PROCESSORS
#define KLOG_PROCESSORS 1
#endif
_Static_assert(KLOG_PROCESSORS >= 1 && KLOG_PROCESSORS <= 65535, "KLOG_PROCESSORS is 1 to 65535");

extern KLog KLogs[KLOG_PROCESSORS * DBG_MAX];
/* KLOG_PROCESSORS, for readers with debug information. */
extern const uint32_t klogProcessors;
/* Bit 0 (KLOG_FLAG_ATTACHED_BUFFERS): some ring's buffer was attached outside KLogBuffer. */
extern uint32_t klogFlags;
#define KLOG_FLAG_ATTACHED_BUFFERS 1u
#ifdef KLOG_DESCRIPTIONS
/* The formats KLOG_EVENT's minor event IDs index. */
extern const char *const KLogDescriptions[KLOG_DESCRIPTIONS];
#endif
extern Dbg_Intensity DebugFlags[DBG_MAX];
extern unsigned int klogLevel;
extern uint64_t klogClockHz;

/* Platform hooks the embedding kernel supplies; called on every logged event. */
uint64_t klogPlatformClock(void);   /* time stamp, in ticks of klogClockHz */
uint64_t klogPlatformChoreId(void); /* thisChore() */
uint64_t klogPlatformProcDom(void); /* klogMakeProcDom(thisProcessor(), thisDomain()) */

/* Platform hooks the embedding kernel may supply for the descriptor; klogInit asks them once. */
#ifdef KLOG_PLATFORM_BUILD_ID
/* The GNU build-id of the image holding the KLog statics: its bytes go to *id (at most 32 are
 * kept); returns how many, 0 when it cannot say. */
size_t klogPlatformBuildId(const uint8_t **id);
#endif
#ifdef KLOG_PLATFORM_PAGE_TABLE_ROOT
/* The physical address of the top page table that maps the KLog statics (CR3's on x86_64), so a
 * reader of raw physical memory can translate their addresses; 0 when it cannot say. */
uint64_t klogPlatformPageTableRoot(void);
#endif

/*
 * The KLog descriptor (klog-runtime's src/descriptor.rs is the format, ABI 2.0): one block named
 * klogDescriptor beside KLogs that says where every KLog static is and how KLog and KLogRec are
 * laid out, so that a reader with no debug information can find and decode the rings.
 * KLOG_DESCRIPTOR_DEFINE() fills everything the linker knows; klogInit copies the names, the
 * build-id and the page-table root in and seals it with a CRC-32 stored last.
 */
#define KLOG_DESCRIPTOR_ABI_MAJOR 2
#define KLOG_DESCRIPTOR_ABI_MINOR 0
#define KLOG_DESCRIPTOR_ENDIAN 0x01020304u
#define KLOG_DESCRIPTOR_HEAD_SIZE 0x100
#define KLOG_DESCRIPTOR_NAME_SIZE 32
#define KLOG_DESCRIPTOR_BUILD_ID_MAX 32

/* One (offset, size) pair of the field tables. */
typedef struct _KLogFieldAt {
    uint16_t offset;
    uint16_t size;
} KLogFieldAt;

/* KLogCommits[ring]: the records whose header the ring's writers stored. Each counter has its
 * own cache line, as each KLog does. */
typedef struct __attribute__((aligned(64))) _KLogCommit {
    uint64_t count;
} KLogCommit;

typedef struct __attribute__((aligned(64))) _KLogDescriptor {
    uint8_t magic[16];    /* "Tera KLog layout", every byte XOR 0xff */
    uint16_t abi_major;   /* KLOG_DESCRIPTOR_ABI_MAJOR */
    uint16_t abi_minor;   /* KLOG_DESCRIPTOR_ABI_MINOR */
    uint32_t endian;      /* KLOG_DESCRIPTOR_ENDIAN in the writer's byte order */
    uint8_t word_size;    /* 8 */
    uint8_t build_id_len; /* meaningful bytes of build_id; 0: none known */
    uint16_t subsystems;  /* DBG_MAX */
    uint32_t size;        /* bytes of the descriptor, names included (no tail padding) */
    const void *self;
    const void *klogs;
    const void *buffer;
    uint64_t buffer_bytes;
    const void *debug_flags;
    const void *klog_level;
    const void *clock_hz;
    const void *commits;
    uint64_t page_table_root; /* physical; 0: not known */
    uint16_t klog_stride;
    uint16_t rec_stride;
    uint16_t debug_flags_stride;
    uint16_t commits_stride;
    uint8_t klog_level_size;
    uint8_t clock_hz_size;
    uint8_t debug_flags_size;
    uint8_t commits_size;
    uint32_t zero;
    /* subsystem name num_recs rec_size header buffer buffer_size_1 next_write */
    KLogFieldAt klog_fields[8];
    KLogFieldAt rec_fields[8]; /* header id proc_dom clock desc data1 data2 data3 */
    uint8_t build_id[KLOG_DESCRIPTOR_BUILD_ID_MAX];
    uint32_t checksum;  /* CRC-32 of `size` bytes with this field 0; 0 until klogInit seals */
    uint32_t name_size; /* KLOG_DESCRIPTOR_NAME_SIZE */
    uint16_t processors;
    uint16_t description_stride;
    uint32_t description_count;
    const void *descriptions; /* KLogDescriptions; 0: none */
    const void *flags;        /* klogFlags */
    uint8_t flags_size;
    uint8_t reserved[7];
    char names[DBG_MAX][KLOG_DESCRIPTOR_NAME_SIZE]; /* KLogs[i].name, NUL-padded, by klogInit */
} KLogDescriptor;

_Static_assert(sizeof(void *) == 8, "the descriptor's word size is 8");
_Static_assert(offsetof(KLogDescriptor, self) == 0x20, "descriptor: self at 0x20");
_Static_assert(offsetof(KLogDescriptor, page_table_root) == 0x60, "descriptor: root at 0x60");
_Static_assert(offsetof(KLogDescriptor, klog_stride) == 0x68, "descriptor: strides at 0x68");
_Static_assert(offsetof(KLogDescriptor, klog_fields) == 0x78, "descriptor: KLog fields at 0x78");
_Static_assert(offsetof(KLogDescriptor, rec_fields) == 0x98, "descriptor: KLogRec fields at 0x98");
_Static_assert(offsetof(KLogDescriptor, build_id) == 0xb8, "descriptor: build_id at 0xb8");
_Static_assert(offsetof(KLogDescriptor, checksum) == 0xd8, "descriptor: checksum at 0xd8");
_Static_assert(offsetof(KLogDescriptor, processors) == 0xe0, "descriptor: processors at 0xe0");
_Static_assert(offsetof(KLogDescriptor, flags) == 0xf0, "descriptor: klogFlags at 0xf0");
_Static_assert(offsetof(KLogDescriptor, names) == 0x100, "descriptor: names at 0x100");
_Static_assert(sizeof(KLogDescriptor) ==
                   (KLOG_DESCRIPTOR_HEAD_SIZE + KLOG_DESCRIPTOR_NAME_SIZE * DBG_MAX + 63) / 64 * 64,
               "descriptor: head and names, padded to 64 bytes as klog-runtime's");
_Static_assert(sizeof(KLogCommit) == 64, "a KLogCommits entry is one cache line");

extern KLogDescriptor klogDescriptor;
extern KLogCommit KLogCommits[KLOG_PROCESSORS * DBG_MAX];

#define KLOG_FIELD_AT_(TYPE, FIELD) {offsetof(TYPE, FIELD), sizeof(((TYPE *)0)->FIELD)}
#define KLOG_MAGIC_BYTE_(c) ((uint8_t)(0xff ^ (c)))

/* With KLOG_COUNT_COMMITS defined, every finished record is counted in KLogCommits (one more
 * atomic increment per event) and the descriptor points at it; without, it says there is none. */
#ifdef KLOG_COUNT_COMMITS
#define KLOG_COMMITS_ADDRESS_ KLogCommits
#else
#define KLOG_COMMITS_ADDRESS_ 0
#endif
#ifdef KLOG_DESCRIPTIONS
#define KLOG_DESCRIPTIONS_ADDRESS_ KLogDescriptions
#define KLOG_DESCRIPTIONS_COUNT_ KLOG_DESCRIPTIONS
#else
#define KLOG_DESCRIPTIONS_ADDRESS_ 0
#define KLOG_DESCRIPTIONS_COUNT_ 0
#endif

/* Defines klogDescriptor, KLogCommits, klogProcessors and klogFlags in the translation unit that
 * defines the other statics,
 * after KLOG_BUFFER_DEFINE (KLogBuffer's size is taken from its definition; before it, this
 * fails to compile). The magic is written inverted, so its text is never in the image. */
#define KLOG_DESCRIPTOR_DEFINE()                                                                   \
    KLogCommit KLogCommits[KLOG_PROCESSORS * DBG_MAX];                                             \
    const uint32_t klogProcessors = KLOG_PROCESSORS;                                               \
    uint32_t klogFlags;                                                                            \
    KLogDescriptor klogDescriptor = {                                                              \
        .magic = {KLOG_MAGIC_BYTE_('T'), KLOG_MAGIC_BYTE_('e'), KLOG_MAGIC_BYTE_('r'),             \
                  KLOG_MAGIC_BYTE_('a'), KLOG_MAGIC_BYTE_(' '), KLOG_MAGIC_BYTE_('K'),             \
                  KLOG_MAGIC_BYTE_('L'), KLOG_MAGIC_BYTE_('o'), KLOG_MAGIC_BYTE_('g'),             \
                  KLOG_MAGIC_BYTE_(' '), KLOG_MAGIC_BYTE_('l'), KLOG_MAGIC_BYTE_('a'),             \
                  KLOG_MAGIC_BYTE_('y'), KLOG_MAGIC_BYTE_('o'), KLOG_MAGIC_BYTE_('u'),             \
                  KLOG_MAGIC_BYTE_('t')},                                                          \
        .abi_major = KLOG_DESCRIPTOR_ABI_MAJOR,                                                    \
        .abi_minor = KLOG_DESCRIPTOR_ABI_MINOR,                                                    \
        .endian = KLOG_DESCRIPTOR_ENDIAN,                                                          \
        .word_size = 8,                                                                            \
        .subsystems = DBG_MAX,                                                                     \
        .size = KLOG_DESCRIPTOR_HEAD_SIZE + KLOG_DESCRIPTOR_NAME_SIZE * DBG_MAX,                   \
        .self = &klogDescriptor,                                                                   \
        .klogs = KLogs,                                                                            \
        .buffer = KLogBuffer,                                                                      \
        .buffer_bytes = sizeof(KLogBuffer),                                                        \
        .debug_flags = DebugFlags,                                                                 \
        .klog_level = &klogLevel,                                                                  \
        .clock_hz = &klogClockHz,                                                                  \
        .commits = KLOG_COMMITS_ADDRESS_,                                                          \
        .klog_stride = sizeof(KLog),                                                               \
        .rec_stride = sizeof(KLogRec),                                                             \
        .debug_flags_stride = sizeof(Dbg_Intensity),                                               \
        .commits_stride = sizeof(KLogCommit),                                                      \
        .klog_level_size = sizeof(klogLevel),                                                      \
        .clock_hz_size = sizeof(klogClockHz),                                                      \
        .debug_flags_size = sizeof(Dbg_Intensity),                                                 \
        .commits_size = sizeof(KLogCommits[0].count),                                              \
        .klog_fields = {KLOG_FIELD_AT_(KLog, subsystem), KLOG_FIELD_AT_(KLog, name),               \
                        KLOG_FIELD_AT_(KLog, num_recs), KLOG_FIELD_AT_(KLog, rec_size),            \
                        KLOG_FIELD_AT_(KLog, header), KLOG_FIELD_AT_(KLog, buffer),                \
                        KLOG_FIELD_AT_(KLog, buffer_size_1), KLOG_FIELD_AT_(KLog, next_write)},    \
        .rec_fields = {KLOG_FIELD_AT_(KLogRec, header), KLOG_FIELD_AT_(KLogRec, id),               \
                       KLOG_FIELD_AT_(KLogRec, proc_dom), KLOG_FIELD_AT_(KLogRec, clock),          \
                       KLOG_FIELD_AT_(KLogRec, desc), KLOG_FIELD_AT_(KLogRec, data1),              \
                       KLOG_FIELD_AT_(KLogRec, data2), KLOG_FIELD_AT_(KLogRec, data3)},            \
        .name_size = KLOG_DESCRIPTOR_NAME_SIZE,                                                    \
        .processors = KLOG_PROCESSORS,                                                             \
        .description_stride = sizeof(const char *),                                                \
        .description_count = KLOG_DESCRIPTIONS_COUNT_,                                             \
        .descriptions = KLOG_DESCRIPTIONS_ADDRESS_,                                                \
        .flags = &klogFlags,                                                                       \
        .flags_size = sizeof(klogFlags),                                                           \
    }

/* CRC-32 (IEEE 802.3, reflected, as zlib's crc32) of `n` bytes at `p`, continuing from `crc`;
 * start at 0. Bit by bit: it runs once, in klogInit. */
static inline uint32_t klogCrc32(uint32_t crc, const volatile uint8_t *p, size_t n)
{
    uint32_t c = ~crc;
    size_t i;
    int k;

    for (i = 0; i < n; i++) {
        c ^= p[i];
        for (k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
    }
    return ~c;
}

/* Fills what only the running kernel knows into klogDescriptor (names, build-id, page-table root)
 * and seals it: the checksum is zeroed first and stored last, with release ordering. */
static inline void klogSealDescriptor_(void)
{
    KLogDescriptor *d = &klogDescriptor;
    const uint8_t *id = NULL;
    size_t id_len = 0;
    uint64_t root = 0;
    int i, j;

    __atomic_store_n(&d->checksum, 0, __ATOMIC_RELAXED);
#ifdef KLOG_PLATFORM_BUILD_ID
    id_len = klogPlatformBuildId(&id);
    if (!id)
        id_len = 0;
#endif
#ifdef KLOG_PLATFORM_PAGE_TABLE_ROOT
    root = klogPlatformPageTableRoot();
#endif
    if (id_len > KLOG_DESCRIPTOR_BUILD_ID_MAX)
        id_len = KLOG_DESCRIPTOR_BUILD_ID_MAX;
    for (i = 0; i < KLOG_DESCRIPTOR_BUILD_ID_MAX; i++)
        d->build_id[i] = (size_t)i < id_len ? id[i] : 0;
    d->build_id_len = (uint8_t)id_len;
    d->page_table_root = root;
    for (i = 0; i < DBG_MAX; i++) {
        const char *name = KLogs[i].name;
        for (j = 0; name && name[j] && j < KLOG_DESCRIPTOR_NAME_SIZE - 1; j++)
            d->names[i][j] = name[j];
        for (; j < KLOG_DESCRIPTOR_NAME_SIZE; j++)
            d->names[i][j] = 0;
    }
    __atomic_store_n(&d->checksum, klogCrc32(0, (const volatile uint8_t *)d, d->size),
                     __ATOMIC_RELEASE);
}

/* Fails to compile unless RECS is a nonzero power of two; evaluates to 0. */
#define KLOG_POW2_CHECK_(RECS)                                                                     \
    (0 * sizeof(struct {                                                                           \
         int klog_ring_size_must_be_a_power_of_two : ((RECS) > 0 && ((RECS) & ((RECS)-1)) == 0)   \
                                                         ? 1                                       \
                                                         : -1;                                     \
     }))

/* A statically initialised KLog for DBG_<NAME> holding RECS records. Its buffer points at
 * KLogBuffer, so events logged before klogInit land in the first ring, which stays there. */
#define KLOG_CREATE(NAME, RECS) KLOG_GROUP(NAME, NAME, RECS)

/* The KLog of DBG_<NAME> when its events go to DBG_<LEADER>'s ring of RECS records (the
 * leader's size; the leader comes first in KLogs). KLOG_CREATE is the ungrouped case. */
#define KLOG_GROUP(NAME, LEADER, RECS)                                                             \
    {                                                                                              \
        .subsystem = DBG_##LEADER,                                                                 \
        .name = #NAME,                                                                             \
        .num_recs = (RECS) + KLOG_POW2_CHECK_(RECS),                                               \
        .rec_size = KLOG_REC_SIZE,                                                                 \
        .header = (KLOG_MAGIC << 32) | ((uint64_t)KLOG_REC_SIZE << 16) | (uint16_t)DBG_##NAME,     \
        .buffer = KLogBuffer,                                                                      \
        .buffer_size_1 = (uint64_t)(RECS) * KLOG_REC_SIZE - 1,                                     \
        .next_write = 0,                                                                           \
    }

/* The design's klogInit(): gives every ring its own part of KLogBuffer, processor set by
 * processor set in KLogs order; a grouped subsystem's KLog mirrors its leader's. The first ring
 * stays at the start, so records logged before this call stay in place. A kernel may initialise
 * only the first set of KLogs: a set left zero is made a copy of the first. Then seals
 * klogDescriptor. Call it once, early, before other processors log. */
static inline void klogInit(void)
{
    uint64_t offset = 0;
    for (int i = DBG_MAX; i < KLOG_PROCESSORS * DBG_MAX; i++) {
        if (KLogs[i].rec_size == 0) {
            KLogs[i] = KLogs[i % DBG_MAX];
            KLogs[i].next_write = 0;
        }
    }
    for (int i = 0; i < KLOG_PROCESSORS * DBG_MAX; i++) {
        int leader = i - i % DBG_MAX + (int)KLogs[i].subsystem;
        uint64_t *at = KLogBuffer + offset;
        if (leader == i)
            offset += KLogs[i].buffer_size_1 + 1;
        else
            at = __atomic_load_n(&KLogs[leader].buffer, __ATOMIC_RELAXED);
        __atomic_store_n(&KLogs[i].buffer, at, __ATOMIC_RELEASE);
    }
    klogSealDescriptor_();
}

/* Gives ring `ring` (an index into KLogs of a subsystem that is not grouped into another's) a
 * buffer allocated after boot of `words` words (a power of two holding at least one record,
 * 64-byte aligned) and starts it empty; sets KLOG_FLAG_ATTACHED_BUFFERS so readers accept a ring
 * outside KLogBuffer. Call it after klogInit while nothing logs to that ring. Returns 0, or -1
 * when the ring or the buffer is not one it can use. */
static inline int klogAttach(int ring, uint64_t *buffer, uint64_t words)
{
    int set = ring - ring % DBG_MAX;
    if (ring < 0 || ring >= KLOG_PROCESSORS * DBG_MAX || (int)KLogs[ring].subsystem != ring - set)
        return -1;
    if (words < KLOG_REC_SIZE || (words & (words - 1)) != 0 || (uintptr_t)buffer % 64 != 0)
        return -1;
    __atomic_fetch_or(&klogFlags, KLOG_FLAG_ATTACHED_BUFFERS, __ATOMIC_RELEASE);
    for (int i = set; i < set + DBG_MAX; i++) {
        if (set + (int)KLogs[i].subsystem != ring)
            continue;
        KLogs[i].num_recs = words / KLOG_REC_SIZE;
        __atomic_store_n(&KLogs[i].buffer_size_1, words - 1, __ATOMIC_RELAXED);
        __atomic_store_n(&KLogs[i].buffer, buffer, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&KLogs[ring].next_write, 0, __ATOMIC_RELEASE);
#ifdef KLOG_COUNT_COMMITS
    __atomic_store_n(&KLogCommits[ring].count, 0, __ATOMIC_RELEASE);
#endif
    return 0;
}

/* The KLogs index of the ring that receives subsystem `subsys`'s events logged with `proc_dom`:
 * its leader's ring in the processor's set, or the first ring before klogInit. */
static inline KLog *klogRing_(uint16_t subsys, uint64_t proc_dom)
{
    int set = (int)(klogProcessor(proc_dom) % KLOG_PROCESSORS) * DBG_MAX;
    int ring = set + (int)KLogs[subsys].subsystem;
    /* Only the first ring really lives at the start of KLogBuffer; another KLog still pointing
     * there (or nowhere: a set klogInit has yet to copy from the first) has not been given its
     * ring by klogInit yet. */
    uint64_t *buffer = __atomic_load_n(&KLogs[ring].buffer, __ATOMIC_RELAXED);
    if (ring != 0 && (buffer == KLogBuffer || buffer == NULL))
        ring = 0;
    return &KLogs[ring];
}

/* Reserves the next slot of `ring`: its sequence number goes to *seq, the slot is returned. */
static inline KLogRec *klogReserve_(KLog *ring, int64_t *seq)
{
    uint64_t old = __atomic_fetch_add(&ring->next_write, KLOG_REC_SIZE, __ATOMIC_RELAXED);
    uint64_t *buffer = __atomic_load_n(&ring->buffer, __ATOMIC_RELAXED);
    uint64_t mask = __atomic_load_n(&ring->buffer_size_1, __ATOMIC_RELAXED);
    *seq = (int64_t)(old / KLOG_REC_SIZE);
    return (KLogRec *)(buffer + (old & mask));
}

/* Writes one record for `subsys` whose desc word `desc` is of kind `kind`, and returns its
 * sequence number in the ring that received it. */
static inline int64_t klogWriteDesc(uint16_t subsys, enum KLogDesc kind, uint64_t desc,
                                    uint64_t d1, uint64_t d2, uint64_t d3)
{
    uint64_t proc_dom = klogPlatformProcDom();
    KLog *ring = klogRing_(subsys, proc_dom);
    int64_t seq;
    KLogRec *rec = klogReserve_(ring, &seq);
    __atomic_store_n(&rec->header, KLOG_TORN_HEADER, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&rec->id, klogPlatformChoreId(), __ATOMIC_RELAXED);
    __atomic_store_n(&rec->proc_dom, proc_dom, __ATOMIC_RELAXED);
    /* Read after reserving so a ring's clocks follow its slot order as closely as possible. */
    __atomic_store_n(&rec->clock, klogPlatformClock(), __ATOMIC_RELAXED);
    __atomic_store_n(&rec->desc, (const char *)(uintptr_t)desc, __ATOMIC_RELAXED);
    __atomic_store_n(&rec->data1, d1, __ATOMIC_RELAXED);
    __atomic_store_n(&rec->data2, d2, __ATOMIC_RELAXED);
    __atomic_store_n(&rec->data3, d3, __ATOMIC_RELAXED);
    __atomic_store_n(&rec->header, klogEncodeHeaderDesc(subsys, kind), __ATOMIC_RELEASE);
#ifdef KLOG_COUNT_COMMITS
    /* Counted on the ring that received the record: with next_write, a reader knows exactly how
     * many reservations were never finished. */
    __atomic_fetch_add(&KLogCommits[ring - KLogs].count, 1, __ATOMIC_RELAXED);
#endif
    return seq;
}

/* Writes one record for `subsys` whose format is at `desc`. Before klogInit every subsystem's
 * records go to the first ring (the header still names `subsys`). */
static inline int64_t klogWrite(uint16_t subsys, const char *desc, uint64_t d1, uint64_t d2,
                                uint64_t d3)
{
    return klogWriteDesc(subsys, KLOG_DESC_POINTER, (uint64_t)(uintptr_t)desc, d1, d2, d3);
}

/* The desc word of an inline description: up to 8 bytes of `text` in memory order, NUL-padded. */
static inline uint64_t klogInlineDesc(const char *text)
{
    union {
        char c[8];
        uint64_t w;
    } u = {{0}};
    for (int i = 0; i < 8 && text[i]; i++)
        u.c[i] = text[i];
    return u.w;
}

/* Reserves a record in the ring receiving `subsys`'s events on this processor and stops after
 * zeroing its header, as a writer interrupted mid-record would; returns its sequence number.
 * For test kernels that must leave a torn record in a real dump. */
static inline int64_t klogReserveTorn(uint16_t subsys)
{
    int64_t seq;
    KLogRec *rec = klogReserve_(klogRing_(subsys, klogPlatformProcDom()), &seq);
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

/* KLOG_INLINE(subsystem, level, "text", d1, d2[, d3]): the format, at most 8 bytes, travels in
 * the record (the design's appendix A.1); a longer literal, or anything but a literal, fails to
 * compile. */
#define KLOG_INLINE(subsys, level, text, d1, ...)                                                  \
    KLOG_INLINE_3_(subsys, level, text, d1, __VA_ARGS__, 0, 0)
#define KLOG_INLINE_3_(subsys, level, text, d1, d2, d3, ...)                                       \
    (KLOG_ENABLED_(subsys, level)                                                                  \
         ? klogWriteDesc((subsys), KLOG_DESC_INLINE,                                               \
                         klogInlineDesc("" text) + 0 * sizeof(struct {                             \
                             int klog_inline_text_is_at_most_8_bytes : sizeof(text) <= 9 ? 1 : -1; \
                         }),                                                                       \
                         KLOG_WORD_(d1), KLOG_WORD_(d2), KLOG_WORD_(d3))                           \
         : (int64_t)-1)

/* KLOG_EVENT(subsystem, level, id, d1, d2[, d3]): the record holds minor event ID `id`, the index
 * of its format in KLogDescriptions (the design's appendix A.1). */
#define KLOG_EVENT(subsys, level, id, d1, ...) KLOG_EVENT_3_(subsys, level, id, d1, __VA_ARGS__, 0, 0)
#define KLOG_EVENT_3_(subsys, level, id, d1, d2, d3, ...)                                          \
    (KLOG_ENABLED_(subsys, level)                                                                  \
         ? klogWriteDesc((subsys), KLOG_DESC_EVENT, (uint64_t)(id), KLOG_WORD_(d1), KLOG_WORD_(d2), \
                         KLOG_WORD_(d3))                                                           \
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
