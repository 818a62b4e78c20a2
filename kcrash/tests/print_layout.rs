//! `struct` and `ptype`'s layouts through the real binary: members' offsets and sizes as gdb
//! gives them, in text and JSON, a struct's object at an address, and members alone.
//!
//! Without gdb the comparisons say on stderr that they did not run, and pass; with
//! KCRASH_REQUIRE_TOOLS=1 they fail. The shared setup is tests/common/gdb.rs.

mod common;

use common::gdb::{gdb, hosted_c, kcrash};
use kcrash_harness::tools;

#[test]
fn struct_command_layout_and_object() {
    let d = hosted_c("rings");
    assert_eq!(
        kcrash(&d, "struct -o KLog"),
        "struct _KLog {
    [0x0] uint64_t subsystem;
    [0x8] const char *name;
   [0x10] uint64_t num_recs;
   [0x18] uint64_t rec_size;
   [0x20] uint64_t header;
   [0x28] uint64_t *buffer;
   [0x30] uint64_t buffer_size_1;
   [0x38] uint64_t next_write;
}
SIZE: 64"
    );
    assert_eq!(
        kcrash(&d, "struct -o Dbg_Intensity"),
        "struct _Dbg_Intensity {
  [0x0:0] unsigned int d_prolog : 1;
  [0x0:1] unsigned int d_terse : 1;
  [0x0:2] unsigned int d_verbose : 1;
  [0x0:3] unsigned int d_klog : 1;
  [0x0:4] unsigned int d_klogprintf : 1;
}
SIZE: 4"
    );
    // The object form is gdb's `set print pretty on` of the same value.
    let obj = kcrash(&d, "struct _KLog &KLogs[2]");
    let flat = kcrash(&d, "p KLogs[2]");
    let unpretty: String = obj
        .strip_prefix("struct _KLog ")
        .expect("header")
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
        .replace("{ ", "{")
        .replace(" }", "}");
    assert_eq!(unpretty, flat);
    let addr = kcrash(&d, "p/x &KLogs[2]");
    assert_eq!(kcrash(&d, &format!("struct KLog {addr}")), obj);
    if tools::runs("struct_command_layout_and_object", "gdb") {
        let want = gdb(
            &d,
            false,
            &["set print pretty on".into(), "p KLogs[2]".into()],
        );
        assert_eq!(format!("struct _KLog {}", want[1]), obj);
    }
}

/// `struct --json` gives each member's offset and size; gdb's `&((T *)0)->m` and `sizeof` agree.
#[test]
fn layout_json_offsets_and_sizes_match_gdb() {
    let d = hosted_c("rings");
    let mut gdb_cmds = Vec::new();
    let mut ours = Vec::new();
    for name in ["_KLog", "task", "worker"] {
        let layout: serde_json::Value =
            serde_json::from_str(&kcrash(&d, &format!("struct --json {name}"))).expect("JSON");
        assert_eq!(layout["kind"], "struct");
        assert_eq!(
            layout["size"].to_string(),
            kcrash(&d, &format!("p sizeof(struct {name})"))
        );
        for m in layout["members"].as_array().expect("members") {
            let member = m["name"].as_str().expect("named member");
            gdb_cmds.push(format!("p (long)&((struct {name} *)0)->{member}"));
            gdb_cmds.push(format!("p sizeof(((struct {name} *)0)->{member})"));
            ours.push(m["offset"].to_string());
            ours.push(m["size"].to_string());
        }
    }
    assert!(ours.len() >= 20, "{ours:?}");
    if !tools::runs("layout_json_offsets_and_sizes_match_gdb", "gdb") {
        return;
    }
    let want = gdb(&d, false, &gdb_cmds);
    for ((cmd, got), want) in gdb_cmds.iter().zip(&ours).zip(&want) {
        assert_eq!(got, want, "{cmd}");
    }
}

/// crash's `struct NAME.member[,member] [ADDR]`: offsets and declarations, or values, one member a
/// line; gdb gives the same offsets (`&((T *)0)->m`) and values (`p ((T *)ADDR)->m`).
#[test]
fn struct_members_alone() {
    let d = hosted_c("rings");
    let addr = kcrash(&d, "p/x &workers[1]");
    let values = kcrash(&d, &format!("struct worker.task.name,body,task.cpu {addr}"));
    let layout = kcrash(&d, "struct worker.task.name,body,thread");
    assert_eq!(
        kcrash(&d, "struct _Dbg_Intensity.d_klog"),
        "  [0x0:3] unsigned int d_klog : 1;"
    );
    if !tools::runs("struct_members_alone", "gdb") {
        return;
    }
    let want = gdb(
        &d,
        false,
        &[
            format!("p ((struct worker *){addr})->task.name"),
            format!("p ((struct worker *){addr})->body"),
            format!("p ((struct worker *){addr})->task.cpu"),
            "p/x (long)&((struct worker *)0)->task.name".into(),
            "p/x (long)&((struct worker *)0)->body".into(),
            "p/x (long)&((struct worker *)0)->thread".into(),
        ],
    );
    // A member is shown as inside its struct, as crash shows it: a pointer without its type
    // in front, a comma after.
    let body = want[1]
        .split_once(") ")
        .map_or(want[1].as_str(), |(_, v)| v);
    assert_eq!(
        values,
        format!(
            "  name = {},\n  body = {body},\n  cpu = {},",
            want[0], want[2]
        )
    );
    assert_eq!(
        layout,
        format!(
            "  [{}] char name[24];\n  [{}] function *body;\n  [{}] pthread_t thread;",
            want[3], want[4], want[5]
        )
    );
}
