//! klog-runtime/include/klog.h against klog-runtime: gcc compiles small C programs with the header
//! and they must agree with the Rust crate on every offset, constant and bit of the on-dump
//! contract. Needs gcc (see pipeline.rs for what happens without it).

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
