//! Where ftrace's structures keep what the reader needs, from the vmlinux's DWARF: the trace
//! arrays, their ring buffers per CPU, the buffer pages, and the event descriptions. Every
//! offset is read, never assumed, so the kernels whose layouts differ (5.10, 6.1, 6.12) read
//! alike.

use symbols::{Image, TypeId, TypeKind};

use crate::latency::TraceFlags;

/// Why the layout could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("the image's DWARF has no {0}")]
    NoType(String),
    #[error("{0} has no member {1}")]
    NoMember(String, String),
    #[error("the image has no variable {0}")]
    NoVariable(&'static str),
    #[error("{0}")]
    Dwarf(String),
}

impl From<symbols::Error> for LayoutError {
    fn from(e: symbols::Error) -> LayoutError {
        LayoutError::Dwarf(e.to_string())
    }
}

/// A member's place: offset and size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    pub offset: u64,
    pub size: u64,
}

/// One struct of the image, for finding members by path.
struct Struct<'i> {
    image: &'i Image,
    name: String,
    id: TypeId,
}

/// How deep anonymous members are searched.
const MAX_ANONYMOUS: usize = 4;

impl<'i> Struct<'i> {
    fn named(image: &'i Image, name: &str) -> Result<Struct<'i>, LayoutError> {
        let id = image
            .type_by_name(name)?
            .ok_or_else(|| LayoutError::NoType(name.to_owned()))?;
        Ok(Struct {
            image,
            name: name.to_owned(),
            id: image.value_type(id)?,
        })
    }

    /// `a.b.c`: each segment a member of the one before (anonymous unions and structs on the
    /// way looked through): its offset, and its size when it has one (a flexible array has
    /// none).
    fn place(&self, path: &str) -> Result<(u64, Option<u64>), LayoutError> {
        let missing = || LayoutError::NoMember(self.name.clone(), path.to_owned());
        let mut ty = self.id;
        let mut offset = 0;
        let mut size = None;
        for segment in path.split('.') {
            let (off, member_ty) =
                find_member(self.image, ty, segment, MAX_ANONYMOUS)?.ok_or_else(missing)?;
            offset += off;
            size = self.image.size_of(member_ty)?;
            ty = self.image.value_type(member_ty)?;
        }
        Ok((offset, size))
    }

    fn at(&self, path: &str) -> Result<At, LayoutError> {
        let (offset, size) = self.place(path)?;
        let size = size.ok_or_else(|| {
            LayoutError::NoMember(self.name.clone(), format!("{path} (its size)"))
        })?;
        Ok(At { offset, size })
    }

    fn offset(&self, path: &str) -> Result<u64, LayoutError> {
        Ok(self.place(path)?.0)
    }

    /// The member's place, or `None` when this kernel's struct has no such member.
    fn maybe(&self, path: &str) -> Result<Option<At>, LayoutError> {
        match self.at(path) {
            Ok(at) => Ok(Some(at)),
            Err(LayoutError::NoMember(..)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn size(&self) -> Result<u64, LayoutError> {
        self.image
            .size_of(self.id)?
            .ok_or_else(|| LayoutError::NoType(format!("{} (its size)", self.name)))
    }
}

/// Member `name` of struct `ty`, or of an anonymous struct or union in it.
fn find_member(
    image: &Image,
    ty: TypeId,
    name: &str,
    depth: usize,
) -> Result<Option<(u64, TypeId)>, LayoutError> {
    let t = image.type_(ty)?;
    let (TypeKind::Struct(members) | TypeKind::Union(members)) = &t.kind else {
        return Ok(None);
    };
    for m in members {
        let Some(mty) = m.ty else { continue };
        match &m.name {
            Some(n) if n == name => return Ok(Some((m.offset, mty))),
            None if depth > 0 => {
                let inner = image.value_type(mty)?;
                if let Some((off, found)) = find_member(image, inner, name, depth - 1)? {
                    return Ok(Some((m.offset + off, found)));
                }
            }
            _ => {}
        }
    }
    Ok(None)
}

/// Every offset the reader uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    // struct trace_array
    pub tr_list: u64,
    pub tr_name: u64,
    pub tr_buffer: u64,
    pub tr_clock_id: Option<At>,
    // struct trace_buffer
    pub tb_buffers: u64,
    /// 6.7 on: data bytes per sub-buffer (PAGE_SIZE − 16 before).
    pub tb_subbuf_size: Option<At>,
    // struct ring_buffer_per_cpu
    pub cpu_nr_pages: At,
    pub cpu_pages: u64,
    pub cpu_head_page: u64,
    pub cpu_commit_page: u64,
    pub cpu_reader_page: u64,
    pub cpu_overrun: At,
    pub cpu_entries: At,
    pub cpu_read: At,
    /// Events refused for want of room (a buffer not overwriting, or a writer lapping the
    /// commit): the two counters the kernel keeps, both since 3.x.
    pub cpu_dropped_events: Option<At>,
    pub cpu_commit_overrun: Option<At>,
    // struct buffer_page
    pub bp_list: u64,
    pub bp_page: u64,
    // struct buffer_data_page
    pub data_time_stamp: u64,
    pub data_commit: At,
    pub data_offset: u64,
    // struct trace_event_call
    pub call_list: u64,
    pub call_class: u64,
    pub call_name: u64,
    pub call_type: At,
    pub call_print_fmt: u64,
    pub call_flags: At,
    /// `data`: a syscall event's `struct syscall_metadata`.
    pub call_data: Option<u64>,
    /// `struct syscall_metadata`'s `enter_fields`: where a syscall entry event's fields are
    /// (its class finds them by a callback); absent without CONFIG_FTRACE_SYSCALLS.
    pub syscall_enter_fields: Option<u64>,
    /// `struct tracepoint`'s name, which an event of a tracepoint names itself by.
    pub tracepoint_name: u64,
    // struct trace_event_class
    pub class_system: u64,
    pub class_fields: u64,
    pub class_get_fields: u64,
    // struct ftrace_event_field
    pub field_link: u64,
    pub field_name: u64,
    pub field_type: u64,
    pub field_offset: At,
    pub field_size: At,
    pub field_signed: At,
    /// 6.1.12 on: an array field's length.
    pub field_len: Option<At>,
    /// The bits of an event's `common_flags`; `None` when the DWARF does not say.
    pub trace_flags: Option<TraceFlags>,
}

impl Layout {
    /// The layout from `image` (the vmlinux). Reads first the units that define ftrace's
    /// structures, so that a vmlinux with no name index at hand need not build one.
    pub fn read(image: &Image) -> Result<Layout, LayoutError> {
        for function in [
            "ring_buffer_lock_reserve",
            "trace_array_printk",
            "tracing_gen_ctx_irq_test",
            "trace_event_raw_init",
            "trace_define_field",
            "ftrace_syscall_enter",
        ] {
            image.consult(function);
        }
        let tr = Struct::named(image, "struct trace_array")?;
        let tb = Struct::named(image, "struct trace_buffer")?;
        let cpu = Struct::named(image, "struct ring_buffer_per_cpu")?;
        let bp = Struct::named(image, "struct buffer_page")?;
        let data = Struct::named(image, "struct buffer_data_page")?;
        let call = Struct::named(image, "struct trace_event_call")?;
        let class = Struct::named(image, "struct trace_event_class")?;
        let field = Struct::named(image, "struct ftrace_event_field")?;
        let tp = Struct::named(image, "struct tracepoint")?;
        let syscall_enter_fields = match Struct::named(image, "struct syscall_metadata") {
            Ok(meta) => meta.maybe("enter_fields")?.map(|at| at.offset),
            Err(LayoutError::NoType(_)) => None,
            Err(e) => return Err(e),
        };
        Ok(Layout {
            tr_list: tr.offset("list")?,
            tr_name: tr.offset("name")?,
            tr_buffer: tr.offset("array_buffer.buffer")?,
            tr_clock_id: tr.maybe("clock_id")?,
            tb_buffers: tb.offset("buffers")?,
            tb_subbuf_size: tb.maybe("subbuf_size")?,
            cpu_nr_pages: cpu.at("nr_pages")?,
            cpu_pages: cpu.offset("pages")?,
            cpu_head_page: cpu.offset("head_page")?,
            cpu_commit_page: cpu.offset("commit_page")?,
            cpu_reader_page: cpu.offset("reader_page")?,
            cpu_overrun: cpu.at("overrun")?,
            cpu_entries: cpu.at("entries")?,
            cpu_read: cpu.at("read")?,
            cpu_dropped_events: cpu.maybe("dropped_events")?,
            cpu_commit_overrun: cpu.maybe("commit_overrun")?,
            bp_list: bp.offset("list")?,
            bp_page: bp.offset("page")?,
            data_time_stamp: data.offset("time_stamp")?,
            data_commit: data.at("commit")?,
            data_offset: data.offset("data")?,
            call_list: call.offset("list")?,
            call_class: call.offset("class")?,
            call_name: call.offset("name")?,
            call_type: call.at("event.type")?,
            call_print_fmt: call.offset("print_fmt")?,
            call_flags: call.at("flags")?,
            call_data: call.maybe("data")?.map(|at| at.offset),
            syscall_enter_fields,
            tracepoint_name: tp.offset("name")?,
            class_system: class.offset("system")?,
            class_fields: class.offset("fields")?,
            class_get_fields: class.offset("get_fields")?,
            field_link: field.offset("link")?,
            field_name: field.offset("name")?,
            field_type: field.offset("type")?,
            field_offset: field.at("offset")?,
            field_size: field.at("size")?,
            field_signed: field.at("is_signed")?,
            field_len: field.maybe("len")?,
            trace_flags: TraceFlags::read(image)?,
        })
        .and_then(|l| {
            // A buffer page's list must come first: the ring's flags sit in its `next`; the
            // data page's header is small and holds its members.
            let header = data.size()?;
            let inside = |end: u64| end <= header;
            if l.bp_list != 0
                || header > 64
                || !inside(l.data_offset)
                || !inside(l.data_time_stamp.saturating_add(8))
                || !inside(l.data_commit.offset.saturating_add(l.data_commit.size))
            {
                return Err(LayoutError::Dwarf(format!(
                    "struct buffer_page's list is at {} (not first), or struct buffer_data_page is not a small header",
                    l.bp_list
                )));
            }
            Ok(l)
        })
    }
}
