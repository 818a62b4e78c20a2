//! `p` on Rust values, through the real binary, checked against gdb on the same dump: the bare
//! kernel's QEMU dump and the Rust hosted program's core (rustc's DWARF). gdb prints values of
//! Rust units in Rust's syntax and shows atomics as the structs they are; kcrash prints every
//! value in gdb's C syntax and atomics as their value, so these tests compare leaves (numbers,
//! pointers, the atomics' inner values) one by one. Enums, `*const u8` strings and std types.
//!
//! Without gdb the comparisons say on stderr that they did not run, and pass; with
//! KCRASH_REQUIRE_TOOLS=1 they fail. The shared setup is tests/common/gdb.rs.

mod common;

use common::gdb::{bare, gdb, hosted_rust, kcrash, Dump};
use kcrash_harness::tools;

/// Rust's DWARF: gdb prints Rust syntax, so leaves are compared one by one.
fn rust_leaves(d: &Dump, path: &str) {
    let fields = [
        "subsystem",
        "num_recs",
        "rec_size",
        "header",
        "buffer_size_1",
    ];
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for i in 0..5 {
        for f in fields {
            ours.push(format!("p {path}KLogs[{i}].{f}"));
            theirs.push(format!("p {path}KLogs[{i}].{f}"));
        }
        // Atomics print as their value: gdb's path to the same number.
        ours.push(format!("p {path}KLogs[{i}].next_write"));
        theirs.push(format!("p {path}KLogs[{i}].next_write.v.value"));
        ours.push(format!("p {path}DebugFlags[{i}]"));
        theirs.push(format!("p {path}DebugFlags[{i}].0.v.value"));
        // A pointer with its symbol, gdb's words.
        ours.push(format!("p &{path}KLogs[{i}]"));
        theirs.push(format!("p &{path}KLogs[{i}]"));
        ours.push(format!("p {path}KLogs[{i}].buffer"));
        theirs.push(format!("p {path}KLogs[{i}].buffer.p.value"));
        ours.push(format!("p/x {path}KLogs[{i}].header"));
        theirs.push(format!("p/x {path}KLogs[{i}].header"));
        ours.push(format!("p *{path}KLogs[{i}].name"));
        theirs.push(format!("p *{path}KLogs[{i}].name"));
    }
    ours.push(format!("p {path}klogLevel"));
    theirs.push(format!("p {path}klogLevel.v.value"));
    ours.push(format!("whatis {path}KLogs"));
    theirs.push(format!("whatis {path}KLogs"));
    ours.push(format!("whatis {path}KLogs[1].next_write"));
    theirs.push(format!("whatis {path}KLogs[1].next_write"));
    ours.push(format!("p &{path}KLogBuffer"));
    theirs.push(format!("p &{path}KLogBuffer"));
    let want = gdb(d, true, &theirs);
    for ((cmd, gdb_cmd), want) in ours.iter().zip(&theirs).zip(&want) {
        let got = kcrash(d, cmd);
        // kcrash shows the target of a pointer whose type is an atomic wrapper as the inner
        // pointer type; gdb names `*mut u64` the same way.
        assert_eq!(
            got, *want,
            "kcrash `{cmd}` (left) and gdb `{gdb_cmd}` (right) differ"
        );
    }
}

#[test]
fn bare_kernel_rust_values_match_gdb() {
    if !tools::runs("bare_kernel_rust_values_match_gdb", "gdb") {
        return;
    }
    rust_leaves(&bare("rings"), "bare::platform::");
}

#[test]
fn hosted_rust_values_match_gdb() {
    if !tools::runs("hosted_rust_values_match_gdb", "gdb") {
        return;
    }
    rust_leaves(&hosted_rust("rings"), "hosted::");
}

/// kcrash's `&CStr` print of the second chore's name: (address, string).
fn got_pager(d: &Dump) -> (String, String) {
    let got = kcrash(d, "p bare::chore::CHORES[1].name");
    let (_, rest) = got.split_once(") ").expect("typed pointer");
    let (addr, string) = rest.split_once(' ').expect("address and string");
    (addr.to_owned(), string.to_owned())
}

/// Rust strings: gdb shows a `*const i8` or a `&CStr` as an address only; kcrash adds the C
/// string there, which gdb's `x/s` reads the same.
#[test]
fn rust_char_pointers_show_their_string() {
    if !tools::runs("rust_char_pointers_show_their_string", "gdb") {
        return;
    }
    let d = bare("rings");
    for (expr, ty, gdb_addr) in [
        (
            "KLogs[3].name",
            "*const i8",
            "p/x bare::platform::KLogs[3].name",
        ),
        (
            "bare::chore::CHORES[1].name",
            "&core::ffi::c_str::CStr",
            "p/x bare::chore::CHORES[1].name.data_ptr",
        ),
    ] {
        let got = kcrash(&d, &format!("p {expr}"));
        let (got_ty, rest) = got.split_once(") ").expect("typed pointer");
        assert_eq!(got_ty, format!("({ty}"));
        let (addr, string) = rest.split_once(' ').expect("address and string");
        let want = gdb(&d, true, &[gdb_addr.into()]);
        assert_eq!(want[0], addr, "{expr}");
        // The string after the symbol it is in, when kcrash names one (as gdb's `p` does);
        // gdb's `x/s` names it before its colon.
        let string = match string.split_once("> ") {
            Some((sym, s)) if sym.starts_with('<') => s,
            _ => string,
        };
        let want = gdb(&d, false, &[format!("x/s {addr}")]);
        assert!(
            want[0].starts_with(addr) && want[0].ends_with(&format!(":\t{string}")),
            "{expr}: kcrash {string}, gdb {}",
            want[0]
        );
    }
    // The same bytes as a `&str` (its length counts the CStr's NUL, which a &str shows).
    let s = kcrash(&d, "p *(&str *)&bare::chore::CHORES[1].name");
    let (_, pager) = got_pager(&d);
    assert_eq!(s, format!("{}\\000\"", pager.trim_end_matches('"')));
    // A symbol LLVM made up, named in full as gdb's /a names it.
    let got = kcrash(&d, "p/a bare::chore::CHORES[1].name.data_ptr");
    let want = gdb(
        &d,
        true,
        &["p/a bare::chore::CHORES[1].name.data_ptr".into()],
    );
    assert_eq!(got, want[0]);
}

/// A Rust enum with data prints the variant its discriminant selects: gdb's answer without the
/// type's path in front (kcrash writes the variant as C writes a value, with no type).
#[test]
fn rust_enums_select_the_variant_gdb_selects() {
    if !tools::runs("rust_enums_select_the_variant_gdb_selects", "gdb") {
        return;
    }
    let d = bare("rings");
    let places = [
        "&bare::platform::KLogs[0]",
        "&bare::platform::KLogs[1]",
        "&bare::platform::KLogs[1].num_recs",
        "&bare::platform::KLogs[3].subsystem",
    ];
    let theirs: Vec<String> = places
        .iter()
        .map(|p| format!("p *({p} as *const core::option::Option<u8>)"))
        .collect();
    let want = gdb(&d, true, &theirs);
    for (p, want) in places.iter().zip(&want) {
        let got = kcrash(&d, &format!("p *(core::option::Option<u8> *){p}"));
        // A discriminant no variant has (3): gdb errors, kcrash says so in the value's place.
        if want.contains("Could not find active enum variant") {
            assert_eq!(got, "<invalid discriminant 0x3>", "{p}");
            continue;
        }
        let want = want
            .strip_prefix("core::option::Option<u8>::")
            .unwrap_or_else(|| panic!("gdb: {want}"));
        assert_eq!(got, want, "{p}");
    }
}

/// std's types in a Rust program print whole; a `u8` pointer (a Vec's buffer, dangling while the
/// Vec is empty) is an address, not a string to read.
#[test]
fn rust_std_types_print_without_reading_byte_pointers() {
    let d = hosted_rust("rings");
    let got = kcrash(&d, "p hosted::oracle::STATE");
    assert!(got.starts_with("{inner = {futex = 0}, poison = {failed = 0}, data = {announced = true, pending = {buf = {inner = {ptr = {pointer = {pointer = 0x"), "{got}");
    assert!(!got.contains("error"), "{got}");
    assert!(got.ends_with("len = 0}}}"), "{got}");
    if !tools::runs("rust_std_types_print_without_reading_byte_pointers", "gdb") {
        return;
    }
    let path = "hosted::oracle::STATE.data.value.pending";
    let want = gdb(
        &d,
        true,
        &[
            format!("p {path}.len"),
            format!("p {path}.buf.inner.ptr.pointer.pointer"),
        ],
    );
    let addr = want[1].rsplit(' ').next().unwrap_or("");
    let none = "{<No data fields>}";
    let tail = format!(
        "pointer = {addr}}}, _marker = {none}}}, cap = 0, alloc = {none}}}, _marker = {none}}}, len = {}}}}}}}",
        want[0]
    );
    assert!(got.ends_with(&tail), "kcrash: {got}\ngdb: {want:?}");
}
