//! The ftrace decoder over hostile bytes, in three parts of one input:
//! - a data page: every record inside the committed bytes, each event inside the page;
//! - a print format and a record (split at the first NUL): parsed, and rendered against an event
//!   with fields of every kind the kernel's formats have, by name and bound to the event (its
//!   constants folded), which must agree; and the same text as a trace_printk format with the
//!   record as its packed arguments;
//! - the whole input as memory at `BASE`: the trace arrays and the event descriptions read
//!   through a layout of small offsets, every list bounded, every string bounded.
//!
//! A panic, a walk without end or an event outside its page is a bug.

#![no_main]

use kcrash_ftrace::formats::{FieldDesc, Format, Formats};
use kcrash_ftrace::layout::{At, Layout};
use kcrash_ftrace::print_fmt::{PrintFmt, Record, Resolve};
use kcrash_ftrace::{bprint, rings};
use kcrash_fuzz::Windows;
use kcrash_plugin::Memory;
use libfuzzer_sys::fuzz_target;

const BASE: u64 = 0x10000;

/// A symbol and a string at every even address, variables and structs with names of even
/// length: every lookup is taken both ways.
struct EvenKernel;

impl Resolve for EvenKernel {
    fn symbol(&self, addr: u64) -> Option<(String, u64, u64)> {
        (addr & 1 == 0).then(|| ("f".to_owned(), addr & 0xff, 0x100))
    }
    fn string(&self, addr: u64) -> Option<Vec<u8>> {
        (addr & 1 == 0).then(|| b"s".to_vec())
    }
    fn variable(&self, name: &str) -> Option<i128> {
        (name.len() % 2 == 0).then_some(i128::from(u64::MAX))
    }
    fn size_of(&self, ty: &str) -> Option<u64> {
        (ty.len() % 2 == 0).then_some(64)
    }
}

/// A layout whose members are a few words apart, so that hostile memory reaches them all.
fn layout() -> Layout {
    let at = |offset, size| At { offset, size };
    Layout {
        tr_list: 0,
        tr_name: 16,
        tr_buffer: 24,
        tr_clock_id: Some(at(32, 4)),
        tb_buffers: 8,
        tb_subbuf_size: None,
        cpu_nr_pages: at(8, 8),
        cpu_pages: 16,
        cpu_head_page: 24,
        cpu_commit_page: 32,
        cpu_reader_page: 40,
        cpu_overrun: at(48, 8),
        cpu_entries: at(56, 8),
        cpu_read: at(64, 8),
        cpu_dropped_events: Some(at(72, 8)),
        cpu_commit_overrun: Some(at(80, 8)),
        bp_list: 0,
        bp_page: 48,
        data_time_stamp: 0,
        data_commit: at(8, 8),
        data_offset: 16,
        call_list: 0,
        call_class: 16,
        call_name: 24,
        call_type: at(32, 2),
        call_print_fmt: 40,
        call_flags: at(48, 4),
        call_data: Some(56),
        syscall_enter_fields: Some(16),
        tracepoint_name: 0,
        class_system: 0,
        class_fields: 8,
        class_get_fields: 24,
        field_link: 0,
        field_name: 16,
        field_type: 24,
        field_offset: at(32, 4),
        field_size: at(36, 4),
        field_signed: at(40, 4),
        field_len: Some(at(44, 4)),
        trace_flags: None,
    }
}

fuzz_target!(|data: &[u8]| {
    // A data page.
    let used = data.first().map_or(0, |&b| usize::from(b) * 16);
    let page = data.get(1..).unwrap_or_default();
    let _ = rings::events(page, u64::MAX - 5, used, |raw| {
        assert!(
            raw.data.len() <= page.len(),
            "an event longer than its page"
        );
    });

    // A print format and a record.
    let (text, record) = match data.iter().position(|&b| b == 0) {
        Some(nul) => (&data[..nul], &data[nul + 1..]),
        None => (data, &[][..]),
    };
    let format = Format {
        id: 1,
        system: "fuzz".into(),
        name: "event".into(),
        fields: vec![
            FieldDesc::new("i", "int", 8, 4, true),
            FieldDesc::new("l", "long", 12, 8, true),
            FieldDesc::new("u", "unsigned char", 20, 1, false),
            FieldDesc::new("comm", "char[16]", 21, 16, true),
            FieldDesc::new("name", "__data_loc char[]", 37, 4, true),
            FieldDesc::new("rel", "__rel_loc char[]", 41, 4, true),
            FieldDesc::new("buf", "char[]", 45, 0, true),
            FieldDesc::new("args", "unsigned long[2]", 45, 16, false),
        ],
        fields_unknown: None,
        print_fmt: text.to_vec(),
    };
    if let Ok(p) = PrintFmt::parse(text) {
        let rec = Record {
            data: record,
            format: &format,
        };
        let _ = p.render(&rec, &EvenKernel);
        // Bound to the format, its constants folded: the same answer, or the same refusal.
        let bound = p.clone().bind(&format);
        assert_eq!(
            p.render(&rec, &EvenKernel).ok(),
            bound.render(&rec, &EvenKernel).ok(),
            "binding changed the rendering"
        );
    }
    let _ = bprint::render(text, record, &EvenKernel);

    // The whole input as memory: trace arrays, buffers, pages, event descriptions.
    let mem = Windows::at(BASE, data);
    let layout = layout();
    let mut problems = Vec::new();
    if let Ok(instances) =
        rings::instances(&mem as &dyn Memory, &layout, BASE, None, 4, &mut problems)
    {
        for i in &instances {
            for c in &i.cpus {
                assert!(c.pages.len() as u64 <= c.nr_pages.clamp(1, 1 << 20) + 10);
            }
        }
    }
    if let Ok(formats) = Formats::read(&mem as &dyn Memory, &layout, BASE) {
        for f in formats.by_id.values() {
            let _ = f.text();
        }
    }
});
