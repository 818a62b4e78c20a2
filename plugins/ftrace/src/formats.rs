//! The kernel's own descriptions of its trace events, read from memory as tracefs prints them
//! in each event's `format` file: every `struct trace_event_call` on `ftrace_events`, its id,
//! system, name, fields (with offsets, sizes and signedness) and print format.

use std::collections::HashMap;

use kcrash_plugin::memory::{Memory, Unreadable};

use crate::layout::{At, Layout};

/// More events than any kernel defines (Debian's 6.1 has about 2,500).
const MAX_EVENTS: usize = 1 << 16;
/// More fields than any event has.
const MAX_FIELDS: usize = 512;
/// A name or type string's longest read.
const NAME_MAX: usize = 256;
/// A print format's longest read (the longest in 6.1 is about 3 KiB).
const PRINT_FMT_MAX: usize = 16 << 10;
/// The bit of `trace_event_call.flags` that says `name` is a `struct tracepoint *`
/// (`TRACE_EVENT_FL_TRACEPOINT_BIT`, the fifth of an anonymous enum in every kernel from 5.10
/// to 6.12; the name read through it is checked).
const TRACEPOINT_FLAG: u64 = 1 << 4;

/// One field of an event's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDesc {
    pub name: String,
    /// The C type as the kernel declares it (`char[16]`, `__data_loc char[]`, `pid_t`).
    pub ty: String,
    pub offset: u32,
    pub size: u32,
    pub signed: bool,
    /// An array field's length, when the kernel records it (6.1.12 on).
    pub len: Option<u32>,
}

impl FieldDesc {
    /// Whether the field is a dynamic array (`__data_loc` or `__rel_loc`): a word at its offset
    /// says where in the record its bytes are.
    pub fn is_dynamic(&self) -> bool {
        self.ty.starts_with("__data_loc") || self.ty.starts_with("__rel_loc")
    }

    /// A dynamic array's bytes in the record `data`, cut at the record's end; None when its
    /// word is outside the record.
    pub fn dynamic_bytes<'d>(&self, data: &'d [u8]) -> Option<&'d [u8]> {
        let at = self.offset as usize;
        let word = u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?);
        let (off, len) = ((word & 0xffff) as usize, (word >> 16) as usize);
        // `__rel_loc` counts from the end of its own word, `__data_loc` from the record's start.
        let base = if self.ty.starts_with("__rel_loc") {
            at + 4
        } else {
            0
        };
        data.get(base + off..(base + off + len).min(data.len()))
    }

    /// A field with no recorded array length.
    pub fn new(name: &str, ty: &str, offset: u32, size: u32, signed: bool) -> FieldDesc {
        FieldDesc {
            name: name.into(),
            ty: ty.into(),
            offset,
            size,
            signed,
            len: None,
        }
    }
}

/// One event's description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    pub id: u16,
    pub system: String,
    pub name: String,
    /// The event's own fields, in declaration order (after the common header's).
    pub fields: Vec<FieldDesc>,
    /// Why the fields are not known, when they are not (an event whose fields come from a
    /// callback, a list that could not be read).
    pub fields_unknown: Option<String>,
    pub print_fmt: Vec<u8>,
}

/// The fields every event's record begins with (`struct trace_entry`).
pub fn common_fields() -> &'static [FieldDesc] {
    static COMMON: std::sync::LazyLock<[FieldDesc; 4]> = std::sync::LazyLock::new(|| {
        [
            FieldDesc::new("common_type", "unsigned short", 0, 2, false),
            FieldDesc::new("common_flags", "unsigned char", 2, 1, false),
            FieldDesc::new("common_preempt_count", "unsigned char", 3, 1, false),
            FieldDesc::new("common_pid", "int", 4, 4, true),
        ]
    });
    &*COMMON
}

/// Every event description, by id.
#[derive(Debug, Clone, Default)]
pub struct Formats {
    pub by_id: HashMap<u16, Format>,
    /// What could not be read, one sentence each.
    pub problems: Vec<String>,
}

impl Formats {
    /// The events on the `ftrace_events` list at `head`.
    pub fn read(mem: &dyn Memory, layout: &Layout, head: u64) -> Result<Formats, Unreadable> {
        let mut formats = Formats::default();
        let mut next = mem.read_u64(head)?;
        let mut seen = std::collections::HashSet::new();
        while next != head {
            if formats.by_id.len() >= MAX_EVENTS || !seen.insert(next) {
                formats.problems.push(format!(
                    "ftrace_events does not come back to its head at {head:#x}"
                ));
                break;
            }
            let call = next.wrapping_sub(layout.call_list);
            match event(mem, layout, call) {
                Ok(f) => {
                    formats.by_id.entry(f.id).or_insert(f);
                }
                Err(e) => formats
                    .problems
                    .push(format!("trace event at {call:#x}: {e}")),
            }
            next = match mem.read_u64(next) {
                Ok(n) => n,
                Err(e) => {
                    formats.problems.push(format!("ftrace_events stops: {e}"));
                    break;
                }
            };
        }
        Ok(formats)
    }
}

fn uint(mem: &dyn Memory, base: u64, at: At) -> Result<u64, Unreadable> {
    mem.read_uint(base.wrapping_add(at.offset), at.size)
}

fn string(mem: &dyn Memory, addr: u64, max: usize) -> Result<String, Unreadable> {
    let mut bytes = Vec::new();
    mem.read_cstring(addr, max, &mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// An event's name: a C identifier (the check that tells a name from a tracepoint's bytes).
fn is_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn event(mem: &dyn Memory, layout: &Layout, call: u64) -> Result<Format, Unreadable> {
    let ptr = |off: u64| mem.read_u64(call.wrapping_add(off));
    let id = uint(mem, call, layout.call_type)? as u16;
    let flags = uint(mem, call, layout.call_flags)?;
    let name_word = ptr(layout.call_name)?;
    let name = if flags & TRACEPOINT_FLAG != 0 {
        let tp_name = mem.read_u64(name_word.wrapping_add(layout.tracepoint_name))?;
        string(mem, tp_name, NAME_MAX)?
    } else {
        string(mem, name_word, NAME_MAX)?
    };
    let name = if is_name(&name) {
        name
    } else {
        format!("<event {id}: name unreadable>")
    };
    let class = ptr(layout.call_class)?;
    let system = string(
        mem,
        mem.read_u64(class.wrapping_add(layout.class_system))?,
        NAME_MAX,
    )?;
    let print_fmt_at = ptr(layout.call_print_fmt)?;
    let mut print_fmt = Vec::new();
    if print_fmt_at != 0 {
        mem.read_cstring(print_fmt_at, PRINT_FMT_MAX, &mut print_fmt)?;
    }
    let get_fields = mem.read_u64(class.wrapping_add(layout.class_get_fields))?;
    // Only the syscall entry events' class finds its fields by a callback: they are on the
    // event's own `syscall_metadata`, its arguments after `__syscall_nr`.
    let list = if get_fields == 0 {
        Ok(class.wrapping_add(layout.class_fields))
    } else {
        match (
            system.as_str(),
            layout.call_data,
            layout.syscall_enter_fields,
        ) {
            ("syscalls", Some(data), Some(enter)) => Ok(ptr(data)?.wrapping_add(enter)),
            _ => Err("its fields are found by a callback the DWARF does not describe".to_owned()),
        }
    };
    let (fields, fields_unknown) = match list.map(|at| fields(mem, layout, at)) {
        Ok(Ok(f)) => (f, None),
        Ok(Err(e)) => (Vec::new(), Some(e.to_string())),
        Err(why) => (Vec::new(), Some(why)),
    };
    Ok(Format {
        id,
        system: kcrash_plugin::escape::escaped(system.as_bytes()),
        name,
        fields,
        fields_unknown,
        print_fmt,
    })
}

/// The fields on the list at `head`, in declaration order: the kernel adds each at the list's
/// front, so the list runs backwards.
fn fields(mem: &dyn Memory, layout: &Layout, head: u64) -> Result<Vec<FieldDesc>, Unreadable> {
    let mut out = Vec::new();
    let mut next = mem.read_u64(head)?;
    while next != head {
        if out.len() >= MAX_FIELDS {
            return Err(Unreadable {
                addr: head,
                reason: format!(
                    "the field list does not come back to its head within {MAX_FIELDS} fields"
                ),
            });
        }
        let f = next.wrapping_sub(layout.field_link);
        let text = |off: u64| -> Result<String, Unreadable> {
            string(mem, mem.read_u64(f.wrapping_add(off))?, NAME_MAX)
        };
        out.push(FieldDesc {
            name: text(layout.field_name)?,
            ty: text(layout.field_type)?,
            offset: uint(mem, f, layout.field_offset)? as u32,
            size: uint(mem, f, layout.field_size)? as u32,
            signed: uint(mem, f, layout.field_signed)? != 0,
            len: match layout.field_len {
                Some(at) => Some(uint(mem, f, at)? as u32),
                None => None,
            },
        });
        next = mem.read_u64(next)?;
    }
    out.reverse();
    Ok(out)
}

impl Format {
    /// The event's `format` file as tracefs prints it (`f_show`), which trace-cmd parses.
    pub fn text(&self) -> String {
        let mut s = format!("name: {}\nID: {}\nformat:\n", self.name, self.id);
        for f in common_fields() {
            s += &field_line(f);
        }
        s.push('\n');
        for f in &self.fields {
            s += &field_line(f);
        }
        s.push('\n');
        s += "print fmt: ";
        s += &String::from_utf8_lossy(&self.print_fmt);
        s.push('\n');
        s
    }
}

/// One `field:` line, arrays as the kernel prints them.
fn field_line(f: &FieldDesc) -> String {
    let bracket = (!f.ty.starts_with("__data_loc") && !f.ty.starts_with("__rel_loc"))
        .then(|| f.ty.find('['))
        .flatten();
    let decl = match (bracket, f.len) {
        (None, _) => format!("{} {}", f.ty, f.name),
        (Some(b), Some(0)) => format!("{} {}[]", &f.ty[..b], f.name),
        (Some(b), Some(len)) => format!("{} {}[{len}]", &f.ty[..b], f.name),
        (Some(b), None) => format!("{} {}{}", &f.ty[..b], f.name, &f.ty[b..]),
    };
    format!(
        "\tfield:{decl};\toffset:{};\tsize:{};\tsigned:{};\n",
        f.offset,
        f.size,
        u8::from(f.signed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's own `format` file of `ftrace/print` (6.1, x86-64).
    #[test]
    fn a_format_prints_as_tracefs_prints_it() {
        let print = Format {
            id: 5,
            system: "ftrace".into(),
            name: "print".into(),
            fields: vec![
                FieldDesc::new("ip", "unsigned long", 8, 8, false),
                FieldDesc {
                    len: Some(0),
                    ..FieldDesc::new("buf", "char[]", 16, 0, true)
                },
            ],
            fields_unknown: None,
            print_fmt: b"\"%ps: %s\", (void *)REC->ip, REC->buf".to_vec(),
        };
        assert_eq!(
            print.text(),
            "name: print\nID: 5\nformat:\n\
             \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
             \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
             \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
             \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
             \tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\
             \tfield:char buf[];\toffset:16;\tsize:0;\tsigned:1;\n\n\
             print fmt: \"%ps: %s\", (void *)REC->ip, REC->buf\n"
        );
        let comm = FieldDesc::new("prev_comm", "char[16]", 8, 16, true);
        assert!(field_line(&comm).starts_with("\tfield:char prev_comm[16];"));
        let with_len = FieldDesc {
            ty: "char[TASK_COMM_LEN]".into(),
            len: Some(16),
            ..comm
        };
        assert!(field_line(&with_len).starts_with("\tfield:char prev_comm[16];"));
    }
}
