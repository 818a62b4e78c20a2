//! klog-runtime/include/klog.h against klog-runtime: gcc compiles small C programs with the header
//! and they must agree with the Rust crate on every offset, constant and bit of the on-dump
//! contract, the KLog descriptor included. Needs gcc (see pipeline.rs for what happens without it).

use klog_runtime::descriptor::{self, HEAD_SIZE};
use klog_runtime::{intensity, CacheAligned, KLog, KLogRec};
use std::mem::offset_of;
use std::path::Path;
use std::process::Command;

use kcrash_harness::repo_root;
use kcrash_harness::tools;

fn have_gcc(test: &str) -> bool {
    tools::available_for(test, &[tools::GCC])
}

/// The definitions an embedding kernel supplies, then `body`.
fn program(body: &str) -> String {
    format!(
        r#"#include <stddef.h>
#include <stdio.h>
enum {{ DBG_NONE, DBG_SCHED, DBG_MAX }};
#define TOS_KLOG_DEBUG
#define KLOG_COUNT_COMMITS
#include "klog.h"
KLOG_BUFFER_DEFINE(4 + 8);
KLOG_DESCRIPTOR_DEFINE();
uint64_t klogPlatformClock(void) {{ return 7; }}
uint64_t klogPlatformChoreId(void) {{ return 0xc0de; }}
uint64_t klogPlatformProcDom(void) {{ return klogMakeProcDom(3, 1); }}
Dbg_Intensity DebugFlags[DBG_MAX] = {{ KLOG_INTENSITY_DEFAULT, KLOG_INTENSITY_DEFAULT }};
unsigned int klogLevel;
uint64_t klogClockHz;
{body}
"#
    )
}

/// Compiles `source` with the header; runs it if it built and `run` is set. Returns the build's
/// success and the program's stdout.
fn gcc(dir: &Path, source: &str, run: bool) -> (bool, String) {
    let c = dir.join("t.c");
    let exe = dir.join("t");
    std::fs::write(&c, source).unwrap();
    let built = Command::new(tools::GCC)
        .args(["-std=gnu11", "-Wall", "-Werror", "-I"])
        .arg(repo_root().join("klog-runtime/include"))
        .arg(&c)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    if !built.status.success() || !run {
        return (
            built.status.success(),
            String::from_utf8_lossy(&built.stderr).into_owned(),
        );
    }
    let out = Command::new(&exe).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (true, String::from_utf8(out.stdout).unwrap())
}

#[test]
fn klog_h_lays_out_and_encodes_as_klog_runtime() {
    if !have_gcc("klog_h_lays_out_and_encodes_as_klog_runtime") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let body = r#"
KLog KLogs[DBG_MAX] = { KLOG_CREATE(NONE, 4), KLOG_CREATE(SCHED, 8) };
int main(void) {
    printf("KLog %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu\n", _Alignof(KLog), sizeof(KLog),
        offsetof(KLog, subsystem), offsetof(KLog, name), offsetof(KLog, num_recs),
        offsetof(KLog, rec_size), offsetof(KLog, header), offsetof(KLog, buffer),
        offsetof(KLog, buffer_size_1), offsetof(KLog, next_write));
    printf("KLogBuffer %zu\n", (size_t)__alignof__(KLogBuffer));
    printf("KLogRec %zu %zu %zu %zu %zu %zu %zu %zu %zu\n", sizeof(KLogRec),
        offsetof(KLogRec, header), offsetof(KLogRec, id), offsetof(KLogRec, proc_dom),
        offsetof(KLogRec, clock), offsetof(KLogRec, desc), offsetof(KLogRec, data1),
        offsetof(KLogRec, data2), offsetof(KLogRec, data3));
    printf("header %lx %lx\n", (unsigned long)klogEncodeHeader(1), (unsigned long)KLogs[1].header);
    printf("proc_dom %lx\n", (unsigned long)klogMakeProcDom(3, 1));
    const char *names[] = {"d_prolog", "d_terse", "d_verbose", "d_klog", "d_klogprintf"};
    for (int bit = 0; bit < 5; bit++) {
        Dbg_Intensity d = {0};
        switch (bit) {
        case 0: d.d_prolog = 1; break;
        case 1: d.d_terse = 1; break;
        case 2: d.d_verbose = 1; break;
        case 3: d.d_klog = 1; break;
        default: d.d_klogprintf = 1; break;
        }
        unsigned int word;
        memcpy(&word, &d, sizeof word);
        printf("%s %x\n", names[bit], word);
    }
    printf("levels %d %d %d %d %d\n", KLOG_OFF, KLOG_TERSE, KLOG_VERBOSE, KLOG_PROLOG, KLOG_ALL);
    return 0;
}
"#;
    let source = program(body).replace(
        "#include <stdio.h>",
        "#include <stdio.h>\n#include <string.h>",
    );
    let (built, out) = gcc(dir.path(), &source, true);
    assert!(built, "{out}");
    let klog = [
        align_of::<KLog>(),
        size_of::<KLog>(),
        offset_of!(KLog, subsystem),
        offset_of!(KLog, name),
        offset_of!(KLog, num_recs),
        offset_of!(KLog, rec_size),
        offset_of!(KLog, header),
        offset_of!(KLog, buffer),
        offset_of!(KLog, buffer_size_1),
        offset_of!(KLog, next_write),
    ];
    let rec = [
        size_of::<KLogRec>(),
        offset_of!(KLogRec, header),
        offset_of!(KLogRec, id),
        offset_of!(KLogRec, proc_dom),
        offset_of!(KLogRec, clock),
        offset_of!(KLogRec, desc),
        offset_of!(KLogRec, data1),
        offset_of!(KLogRec, data2),
        offset_of!(KLogRec, data3),
    ];
    let join = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(" ");
    let header = klog_runtime::encode_header(1);
    let want = format!(
        "KLog {}\nKLogBuffer {}\nKLogRec {}\nheader {header:x} {header:x}\nproc_dom {:x}\nd_prolog {:x}\nd_terse {:x}\nd_verbose {:x}\nd_klog {:x}\nd_klogprintf {:x}\nlevels 0 1 2 3 {}\n",
        join(&klog),
        align_of::<CacheAligned<[u64; 1]>>(),
        join(&rec),
        klog_runtime::proc_dom(3, 1),
        intensity::D_PROLOG,
        intensity::D_TERSE,
        intensity::D_VERBOSE,
        intensity::D_KLOG,
        intensity::D_KLOGPRINTF,
        klog_runtime::KLOG_ALL,
    );
    assert_eq!(out, want);
}

#[test]
fn klog_h_writes_records_and_redirects_before_init() {
    if !have_gcc("klog_h_writes_records_and_redirects_before_init") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Prints every written word of KLogBuffer: NONE's ring is words 0..32, SCHED's 32..96.
    let body = r#"
KLog KLogs[DBG_MAX] = { KLOG_CREATE(NONE, 4), KLOG_CREATE(SCHED, 8) };
static void dump(void) {
    for (int i = 0; i < 96; i++) if (KLogBuffer[i]) printf("%d=%lx ", i, (unsigned long)KLogBuffer[i]);
    printf("\n");
}
int main(void) {
    klogLevel = KLOG_VERBOSE;
    long early = KLOGT1(DBG_SCHED, "early %d", -1);
    klogInit();
    long late = KLOGV2(DBG_SCHED, "late %d %d", 5, 6);
    long off = KLOGP0(DBG_SCHED, "prolog is above klogLevel");
    long torn = klogReserveTorn(DBG_SCHED);
    printf("%ld %ld %ld %ld %lu\n", early, late, off, torn, (unsigned long)KLogs[1].next_write);
    KLogBuffer[32 + 8] = 0x5555; /* the torn slot's header was 0 */
    dump();
    return 0;
}
"#;
    let (built, out) = gcc(dir.path(), &program(body), true);
    assert!(built, "{out}");
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("0 0 -1 1 16"));
    let words: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let header = klog_runtime::encode_header(1);
    // Early record in NONE's ring (words 0..8) with SCHED's header; late record at word 32.
    let expect_record = |at: usize, d1: u64, d2: u64| {
        [
            format!("{}={header:x}", at),
            format!("{}=c0de", at + 1),
            format!("{}=300000001", at + 2),
            format!("{}=7", at + 3),
        ]
        .into_iter()
        .chain(
            [(5, d1), (6, d2)]
                .into_iter()
                .filter(|&(_, v)| v != 0)
                .map(|(i, v)| format!("{}={v:x}", at + i)),
        )
        .collect::<Vec<_>>()
    };
    for word in expect_record(0, -1i64 as u64, 0)
        .iter()
        .chain(&expect_record(32, 5, 6))
    {
        assert!(
            words.contains(&word.as_str()),
            "{word} missing from {words:?}"
        );
    }
    assert!(words.contains(&"40=5555"), "torn slot written: {words:?}");
    assert!(
        !words.iter().any(|w| w.starts_with("41=")),
        "torn slot has only its header: {words:?}"
    );
}

/// With KLOG_PROCESSORS 2 and only the first set of KLogs written out, klogInit makes the second
/// a copy of the first (empty, its rings after the first set's); before it, every record goes to
/// the first ring, never through the second set's zero buffers.
#[test]
fn klog_h_sets_left_out_are_copies_of_the_first() {
    if !have_gcc("klog_h_sets_left_out_are_copies_of_the_first") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The program's processor is 3: set 3 % 2 = 1, whose SCHED ring is KLogs[3].
    let body = r#"
KLog KLogs[KLOG_PROCESSORS * DBG_MAX] = { KLOG_CREATE(NONE, 4), KLOG_CREATE(SCHED, 8) };
int main(void) {
    klogLevel = KLOG_VERBOSE;
    long early = KLOGT1(DBG_SCHED, "early %d", -1);
    klogInit();
    long late = KLOGT1(DBG_SCHED, "late %d", 5);
    printf("%ld %ld %lu %lu %lu %ld %lu\n", early, late, (unsigned long)KLogs[0].next_write,
           (unsigned long)KLogs[2].next_write, (unsigned long)KLogs[3].next_write,
           (long)(KLogs[3].buffer - KLogBuffer), (unsigned long)KLogs[3].subsystem);
    return 0;
}
"#;
    let source = format!("#define KLOG_PROCESSORS 2\n{}", program(body));
    let (built, out) = gcc(dir.path(), &source, true);
    assert!(built, "{out}");
    // Set 1 starts after set 0's 4 + 8 records (96 words); its SCHED after its NONE (32).
    assert_eq!(out.trim(), "0 0 8 0 8 128 1");
}

#[test]
fn klog_h_refuses_ring_sizes_that_are_not_powers_of_two() {
    if !have_gcc("klog_h_refuses_ring_sizes_that_are_not_powers_of_two") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let with = |recs: u32| {
        program(&format!(
            "KLog KLogs[DBG_MAX] = {{ KLOG_CREATE(NONE, 4), KLOG_CREATE(SCHED, {recs}) }};\nint main(void) {{ return 0; }}\n"
        ))
    };
    assert!(gcc(dir.path(), &with(8), false).0);
    let (built, stderr) = gcc(dir.path(), &with(6), false);
    assert!(!built);
    assert!(stderr.contains("power_of_two"), "{stderr}");
    assert!(!gcc(dir.path(), &with(0), false).0);
}

/// What the C program's descriptor must say of the hooks, and what the Rust kernel below says.
const BUILD_ID: [u8; 8] = [0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4];
const PAGE_TABLE_ROOT: u64 = 0x1000;

pub struct Platform;
impl klog_runtime::Platform for Platform {
    fn clock() -> u64 {
        7
    }
    fn chore_id() -> u64 {
        0xc0de
    }
    fn proc_dom() -> u64 {
        klog_runtime::proc_dom(3, 1)
    }
    fn build_id() -> &'static [u8] {
        &BUILD_ID
    }
    fn page_table_root() -> u64 {
        PAGE_TABLE_ROOT
    }
}

// The Rust twin of `program`'s C configuration: its descriptor must be the C one's byte for byte
// but for the addresses and the checksum.
klog_runtime::klog_config! {
    platform = Platform;
    static_level = klog_runtime::KLOG_PROLOG;
    subsystems { DBG_NONE = 4, DBG_SCHED = 8 }
}

/// `program`'s descriptor after klogInit, with what the C program says of its own statics.
struct CDescriptor {
    /// Each line's words after its label.
    lines: std::collections::HashMap<String, Vec<String>>,
}

impl CDescriptor {
    fn words(&self, label: &str) -> &[String] {
        self.lines
            .get(label)
            .unwrap_or_else(|| panic!("no {label} line"))
    }
    fn hex(&self, label: &str) -> Vec<u64> {
        self.words(label)
            .iter()
            .map(|w| u64::from_str_radix(w, 16).unwrap())
            .collect()
    }
    fn dec(&self, label: &str) -> Vec<u64> {
        self.words(label)
            .iter()
            .map(|w| w.parse().unwrap())
            .collect()
    }
    fn bytes(&self, label: &str) -> Vec<u8> {
        let hex = &self.words(label)[0];
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }
}

fn c_descriptor() -> Option<CDescriptor> {
    if !have_gcc("klog_h_descriptor") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let body = r#"
KLog KLogs[DBG_MAX] = { KLOG_CREATE(NONE, 4), KLOG_CREATE(SCHED, 8) };
static const uint8_t build_id[] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4};
size_t klogPlatformBuildId(const uint8_t **id) { *id = build_id; return sizeof build_id; }
uint64_t klogPlatformPageTableRoot(void) { return 0x1000; }
#define X(p) (unsigned long)(uintptr_t)(p)
#define F(T, f) printf(" %zu %zu", offsetof(T, f), sizeof(((T *)0)->f))
static void bytes(const char *label) {
    const unsigned char *b = (const unsigned char *)&klogDescriptor;
    printf("%s ", label);
    for (uint32_t i = 0; i < klogDescriptor.size; i++) printf("%02x", b[i]);
    printf("\n");
}
int main(void) {
    printf("unsealed %x\n", klogDescriptor.checksum);
    klogLevel = KLOG_TERSE;
    KLOGT0(DBG_SCHED, "before klogInit: counted on NONE's ring");
    klogInit();
    KLOGT0(DBG_SCHED, "a");
    KLOGT0(DBG_SCHED, "b");
    KLOGT0(DBG_NONE, "c");
    klogReserveTorn(DBG_SCHED);
    printf("addresses %lx %lx %lx %lx %lx %lx %lx %lx\n", X(&klogDescriptor), X(KLogs),
        X(KLogBuffer), (unsigned long)sizeof KLogBuffer, X(DebugFlags), X(&klogLevel),
        X(&klogClockHz), X(KLogCommits));
    printf("sizes %zu %zu %zu %zu %zu %zu %zu %zu %zu\n", sizeof(KLogDescriptor), sizeof(KLog),
        sizeof(KLogRec), sizeof(Dbg_Intensity), sizeof(KLogCommits[0]), sizeof klogLevel,
        sizeof klogClockHz, sizeof(Dbg_Intensity), sizeof KLogCommits[0].count);
    printf("klog");
    F(KLog, subsystem); F(KLog, name); F(KLog, num_recs); F(KLog, rec_size);
    F(KLog, header); F(KLog, buffer); F(KLog, buffer_size_1); F(KLog, next_write);
    printf("\nrec");
    F(KLogRec, header); F(KLogRec, id); F(KLogRec, proc_dom); F(KLogRec, clock);
    F(KLogRec, desc); F(KLogRec, data1); F(KLogRec, data2); F(KLogRec, data3);
    printf("\ncommits %lu %lu\n", (unsigned long)KLogCommits[0].count,
        (unsigned long)KLogCommits[1].count);
    printf("next_write %lu %lu\n", (unsigned long)KLogs[0].next_write,
        (unsigned long)KLogs[1].next_write);
    bytes("sealed");
    /* A name longer than a slot: kept to 31 bytes and a NUL. Resealed by a second klogInit. */
    KLogs[1].name = "A_SUBSYSTEM_NAME_OF_FORTY_BYTES_LONG_XYZ";
    klogInit();
    bytes("long");
    return 0;
}
"#;
    let source = program(body).replace(
        "#define TOS_KLOG_DEBUG",
        "#define TOS_KLOG_DEBUG\n#define KLOG_PLATFORM_BUILD_ID\n#define KLOG_PLATFORM_PAGE_TABLE_ROOT",
    );
    let (built, out) = gcc(dir.path(), &source, true);
    assert!(built, "{out}");
    let lines = out
        .lines()
        .map(|l| {
            let mut w = l.split_whitespace().map(str::to_string);
            (w.next().unwrap(), w.collect())
        })
        .collect();
    Some(CDescriptor { lines })
}

#[test]
fn klog_h_descriptor_records_the_c_programs_statics_and_layout() {
    let Some(c) = c_descriptor() else { return };
    assert_eq!(c.words("unsealed"), ["0"], "unsealed before klogInit");
    let b = c.bytes("sealed");
    let d = descriptor::parse(&b).expect("the C descriptor parses");
    let [this, klogs, buffer, buffer_bytes, flags, level, clock_hz, commits] =
        c.hex("addresses")[..]
    else {
        panic!("{:?}", c.words("addresses"))
    };
    let [size, klog, rec, flag, commit, level_size, clock_hz_size, flag_size, commit_size] =
        c.dec("sizes")[..]
    else {
        panic!("{:?}", c.words("sizes"))
    };
    assert_eq!(size, (HEAD_SIZE as u64 + 32 * 2).next_multiple_of(64));
    assert_eq!(b.len(), HEAD_SIZE + 32 * 2, "size: head and two names");
    assert_eq!(d.this, this);
    assert_eq!(
        (d.klogs, d.klog_stride as u64, d.subsystems),
        (klogs, klog, 2)
    );
    assert_eq!((d.buffer, d.buffer_bytes), (buffer, buffer_bytes));
    assert_eq!(buffer_bytes, (4 + 8) * 64);
    assert_eq!(d.debug_flags, Some((flags, flag as u16, flag_size as u8)));
    assert_eq!(d.klog_level, Some((level, level_size as u8)));
    assert_eq!(d.clock_hz, Some((clock_hz, clock_hz_size as u8)));
    assert_eq!(d.commits, Some((commits, commit as u16, commit_size as u8)));
    assert_eq!(d.rec_stride as u64, rec);
    assert_eq!(d.page_table_root, Some(PAGE_TABLE_ROOT));
    assert_eq!(d.build_id(), Some(&BUILD_ID[..]));
    let table = |label| {
        c.dec(label)
            .chunks(2)
            .map(|p| descriptor::FieldAt {
                offset: p[0] as u16,
                size: p[1] as u16,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(d.klog_fields[..], table("klog")[..]);
    assert_eq!(d.rec_fields[..], table("rec")[..]);
    assert_eq!(descriptor::name(&b, 0), Some(&b"NONE"[..]));
    assert_eq!(descriptor::name(&b, 1), Some(&b"SCHED"[..]));
    // The pre-init record counted on NONE's ring with "c"; "a" and "b" on SCHED's, whose torn
    // reservation is the one next_write has and the counter lacks.
    assert_eq!(c.dec("commits"), [2, 2]);
    assert_eq!(c.dec("next_write"), [2 * 8, 3 * 8]);

    let long = c.bytes("long");
    descriptor::parse(&long).expect("resealed by a second klogInit");
    assert_eq!(
        descriptor::name(&long, 1),
        Some(&b"A_SUBSYSTEM_NAME_OF_FORTY_BYTES"[..]),
        "31 bytes and a NUL"
    );
}

#[test]
fn klog_h_descriptor_is_klog_runtimes_but_for_addresses() {
    let Some(c) = c_descriptor() else { return };
    let c_bytes = c.bytes("sealed");
    klog_init();
    let size = klogDescriptor.head.size as usize;
    let base = (&raw const klogDescriptor).cast::<u8>();
    // SAFETY: the descriptor's own `size` bytes; nothing writes them after klog_init.
    let mut rust = unsafe { std::slice::from_raw_parts(base, size) }.to_vec();
    descriptor::parse(&rust).expect("the Rust descriptor parses");
    assert_eq!(rust.len(), c_bytes.len());
    // The addresses (self, KLogs, KLogBuffer; DebugFlags … KLogCommits; KLogDescriptions,
    // klogFlags) are each program's own: with the C program's put in, and the checksum
    // recomputed, nothing else may differ. With no descriptions klog.h stores 0 where
    // klog_config! points at its empty table; both have count 0.
    for range in [0x20..0x38, 0x40..0x60, 0xe8..0xf8] {
        rust[range.clone()].copy_from_slice(&c_bytes[range]);
    }
    assert!(descriptor::reseal(&mut rust));
    let differ: Vec<usize> = (0..rust.len()).filter(|&i| rust[i] != c_bytes[i]).collect();
    assert!(differ.is_empty(), "bytes differ at {differ:x?}");
}
