//! The trace arrays (the top one and each named instance), each one's ring buffer per CPU, and
//! that buffer's pages in the order they were written, as the kernel's own reader walks them:
//! the reader page when it holds data, then from the head page (found by the flag its
//! predecessor's `next` carries, not by the cached `head_page`) to the commit page. Pages
//! reserved after the commit page hold nothing committed and are left out.

use kcrash_plugin::memory::{Memory, Unreadable};

use crate::layout::{At, Layout};

/// More instances than anyone makes: a list that goes on is corrupt.
const MAX_INSTANCES: usize = 1024;
/// More CPUs than Linux's NR_CPUS allows.
const MAX_CPUS: u64 = 8192;
/// A ring of more pages than this (4 GiB of 4 KiB pages per CPU) is corrupt.
const MAX_PAGES: u64 = 1 << 20;
/// The commit word's flags: events missed before the page, and their count stored after the
/// data. The size is the low 27 bits.
pub const COMMIT_MASK: u64 = (1 << 27) - 1;
/// `RB_PAGE_HEAD | RB_PAGE_UPDATE`: the flags a ring's `next` pointers carry.
const PAGE_FLAGS: u64 = 3;
/// The page size of the kernels read (x86-64's 4 KiB).
pub const PAGE_SIZE: u64 = 4096;

/// One trace array: the top one (`name` empty) or a named instance.
#[derive(Debug, Clone)]
pub struct Instance {
    /// The instance's name, escaped; empty for the top trace array.
    pub name: String,
    pub addr: u64,
    /// Its `struct trace_buffer`.
    pub buffer: u64,
    /// Its clock's index in `trace_clocks`, when the kernel says.
    pub clock_id: Option<u64>,
    /// Bytes of event data a page holds.
    pub data_size: u64,
    pub cpus: Vec<CpuBuffer>,
}

/// One CPU's ring buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuBuffer {
    pub cpu: u32,
    /// Its `struct ring_buffer_per_cpu`.
    pub addr: u64,
    /// The data pages to read, oldest first: (its `struct buffer_data_page`, the page's
    /// `struct buffer_page`).
    pub pages: Vec<Page>,
    pub nr_pages: u64,
    /// Events ever committed, overwritten by newer ones, and consumed by a reader.
    pub entries: Result<u64, Unreadable>,
    pub overrun: Result<u64, Unreadable>,
    pub read: Result<u64, Unreadable>,
    /// `dropped_events + commit_overrun`; None when this kernel keeps neither.
    pub lost: Option<Result<u64, Unreadable>>,
    /// What could not be followed or read, one sentence each: the pages listed are those that
    /// could.
    pub problems: Vec<String>,
}

/// A data page to read, or the place in the ring of pages that cannot be (a `buffer_page` the
/// dump lacks, or where the ring's links stop): marked where it stands, never skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub data: Result<u64, Unreadable>,
    pub bpage: u64,
    /// The reader page, outside the ring: what it holds is older than the ring's.
    pub reader: bool,
}

/// Every trace array on `ftrace_trace_arrays` at `list_head` (the instances first, as the
/// kernel lists them, the top one last), with `cpus` CPUs' buffers each. Fails only when the
/// list's head cannot be read; what breaks later is a problem of the instance or buffer.
pub fn instances(
    mem: &dyn Memory,
    layout: &Layout,
    list_head: u64,
    top: Option<u64>,
    cpus: u64,
    problems: &mut Vec<String>,
) -> Result<Vec<Instance>, Unreadable> {
    let mut found = Vec::new();
    let mut next = mem.read_u64(list_head)?;
    let mut seen = std::collections::HashSet::new();
    while next != list_head {
        if found.len() >= MAX_INSTANCES || !seen.insert(next) {
            problems.push(format!(
                "ftrace_trace_arrays does not come back to its head at {list_head:#x}: the instances after {} are not read",
                found.len()
            ));
            break;
        }
        let tr = next.wrapping_sub(layout.tr_list);
        match instance(mem, layout, tr, top, cpus) {
            Ok(i) => found.push(i),
            Err(e) => problems.push(format!("trace array at {tr:#x}: {e}")),
        }
        next = match mem.read_u64(next) {
            Ok(n) => n,
            Err(e) => {
                problems.push(format!("ftrace_trace_arrays stops at {next:#x}: {e}"));
                break;
            }
        };
    }
    Ok(found)
}

fn instance(
    mem: &dyn Memory,
    layout: &Layout,
    tr: u64,
    top: Option<u64>,
    cpus: u64,
) -> Result<Instance, Unreadable> {
    let name_at = mem.read_u64(tr.wrapping_add(layout.tr_name))?;
    let name = if name_at == 0 || top == Some(tr) {
        String::new()
    } else {
        let mut bytes = Vec::new();
        mem.read_cstring(name_at, 256, &mut bytes)?;
        kcrash_plugin::escape::escaped(&bytes)
    };
    let buffer = mem.read_u64(tr.wrapping_add(layout.tr_buffer))?;
    let clock_id = layout.tr_clock_id.and_then(|at| read_at(mem, tr, at).ok());
    let data_size = match layout.tb_subbuf_size {
        Some(at) => read_at(mem, buffer, at)?,
        None => PAGE_SIZE - layout.data_offset,
    };
    let buffers = mem.read_u64(buffer.wrapping_add(layout.tb_buffers))?;
    let mut bufs = Vec::new();
    for cpu in 0..cpus.min(MAX_CPUS) {
        let per_cpu = mem.read_u64(buffers.wrapping_add(cpu * 8))?;
        if per_cpu != 0 {
            bufs.push(cpu_buffer(mem, layout, cpu as u32, per_cpu));
        }
    }
    Ok(Instance {
        name,
        addr: tr,
        buffer,
        clock_id,
        data_size: data_size.min(PAGE_SIZE),
        cpus: bufs,
    })
}

/// An unsigned member of the struct at `base`.
fn read_at(mem: &dyn Memory, base: u64, at: At) -> Result<u64, Unreadable> {
    mem.read_uint(base.wrapping_add(at.offset), at.size)
}

impl Instance {
    /// One past the highest CPU id with a buffer: how many CPUs a trace.dat of it lists.
    pub fn cpu_count(&self) -> usize {
        self.cpus
            .iter()
            .map(|c| c.cpu as usize + 1)
            .max()
            .unwrap_or(0)
    }
}

/// One CPU's buffer and the pages to read, in order.
fn cpu_buffer(mem: &dyn Memory, layout: &Layout, cpu: u32, addr: u64) -> CpuBuffer {
    let mut problems = Vec::new();
    let field = |at: At| read_at(mem, addr, at);
    let ptr = |off: u64| mem.read_u64(addr.wrapping_add(off));
    let nr_pages = field(layout.cpu_nr_pages).unwrap_or(0);
    let mut pages = Vec::new();
    match (
        ptr(layout.cpu_pages),
        ptr(layout.cpu_commit_page),
        ptr(layout.cpu_reader_page),
    ) {
        (Ok(start), Ok(commit), Ok(reader)) => {
            let ring = walk(mem, layout, start, nr_pages, &mut problems);
            let ends = Ends {
                commit,
                reader,
                cached_head: ptr(layout.cpu_head_page).ok(),
            };
            pages = order(mem, layout, &ring, &ends, &mut problems);
        }
        (a, b, c) => {
            for e in [a.err(), b.err(), c.err()].into_iter().flatten() {
                problems.push(format!("the buffer's page pointers are unreadable: {e}"));
            }
        }
    }
    CpuBuffer {
        cpu,
        addr,
        pages,
        nr_pages,
        entries: field(layout.cpu_entries),
        overrun: field(layout.cpu_overrun),
        read: field(layout.cpu_read),
        lost: lost(mem, layout, addr),
        problems,
    }
}

fn lost(mem: &dyn Memory, layout: &Layout, addr: u64) -> Option<Result<u64, Unreadable>> {
    let counters = [layout.cpu_dropped_events, layout.cpu_commit_overrun];
    if counters.iter().all(Option::is_none) {
        return None;
    }
    let mut sum = 0u64;
    for at in counters.into_iter().flatten() {
        match read_at(mem, addr, at) {
            Ok(n) => sum = sum.saturating_add(n),
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(sum))
}

/// The ring of buffer pages from the one whose list node is at `start`, in ring order, with the
/// head page (the one a flagged `next` points at) marked by its index.
struct Ring {
    pages: Vec<u64>,
    head: Option<usize>,
    /// Why the walk stopped at the last page of `pages` before coming back to the first.
    broken: Option<Unreadable>,
    /// `nr_pages`: how many pages the ring has.
    expected: u64,
}

fn walk(
    mem: &dyn Memory,
    layout: &Layout,
    start: u64,
    nr_pages: u64,
    problems: &mut Vec<String>,
) -> Ring {
    let limit = nr_pages.clamp(1, MAX_PAGES) + 8;
    let mut ring = Ring {
        pages: Vec::new(),
        head: None,
        broken: None,
        expected: nr_pages,
    };
    let mut at = start & !PAGE_FLAGS;
    loop {
        ring.pages.push(at.wrapping_sub(layout.bp_list));
        let raw = match mem.read_u64(at) {
            Ok(raw) => raw,
            Err(e) => {
                problems.push(format!("the page ring stops at {at:#x}: {e}"));
                ring.broken = Some(e);
                break;
            }
        };
        let next = raw & !PAGE_FLAGS;
        if raw & PAGE_FLAGS != 0 && ring.head.is_none() {
            ring.head = Some(ring.pages.len());
        }
        if next == start & !PAGE_FLAGS {
            break;
        }
        if ring.pages.len() as u64 >= limit {
            problems.push(format!(
                "the page ring does not come back to {start:#x} within {limit} pages (nr_pages {nr_pages})"
            ));
            break;
        }
        at = next;
    }
    // The flag on the last page's `next` names the first page.
    if ring.head == Some(ring.pages.len()) {
        ring.head = Some(0);
    }
    if nr_pages != 0 && ring.pages.len() as u64 != nr_pages {
        problems.push(format!(
            "the ring has {} pages, nr_pages says {nr_pages}",
            ring.pages.len()
        ));
    }
    ring
}

/// The buffer pages a CPU buffer points at besides its ring.
struct Ends {
    commit: u64,
    reader: u64,
    /// `head_page`, which lags the flagged head.
    cached_head: Option<u64>,
}

/// The pages holding committed events, oldest first: the reader page if it holds any, then
/// the ring from its head to the commit page.
fn order(
    mem: &dyn Memory,
    layout: &Layout,
    ring: &Ring,
    ends: &Ends,
    problems: &mut Vec<String>,
) -> Vec<Page> {
    let &Ends {
        commit,
        reader,
        cached_head,
    } = ends;
    let mut pages = Vec::new();
    let page = |bpage: u64, reader: bool| Page {
        data: mem.read_u64(bpage.wrapping_add(layout.bp_page)),
        bpage,
        reader,
    };
    let first = page(reader, true);
    match &first.data {
        Ok(data) => {
            let used = read_at(mem, *data, layout.data_commit).map_or(0, |c| c & COMMIT_MASK);
            if used > 0 {
                pages.push(first);
            }
        }
        Err(e) => {
            // Whether it held events is unknown: marked, as a page that may have.
            problems.push(format!("the reader page {reader:#x} is unreadable: {e}"));
            pages.push(first);
        }
    }
    if reader == commit || ring.pages.is_empty() {
        return pages;
    }
    let head = match ring.head {
        Some(h) => h,
        None => {
            // No flag found (a ring caught mid-update): the cached head, which may lag.
            let cached = cached_head.and_then(|h| ring.pages.iter().position(|&p| p == h));
            problems.push(
                "no page carries the head flag: read from the cached head_page, which may lag"
                    .into(),
            );
            cached.unwrap_or(0)
        }
    };
    let n = ring.pages.len();
    // Past a break in the links come pages the dump does not reach, then the walk's first
    // pages again: newer than the lost ones only when the commit page is among them.
    let commit_walked = ring.pages.contains(&commit);
    for k in 0..n {
        let i = (head + k) % n;
        let bpage = ring.pages[i];
        let mut p = page(bpage, false);
        let at_break = i == n - 1 && ring.broken.is_some();
        match &ring.broken {
            // The walk's own problem already says where the links stop.
            Some(e) if at_break => {
                p.data = Err(Unreadable {
                    addr: e.addr,
                    reason: format!(
                        "the ring of pages cannot be followed past here ({}): this page and the \
                         {} after it are lost",
                        e.reason,
                        ring.expected.saturating_sub(n as u64)
                    ),
                })
            }
            _ => {
                if let Err(e) = &p.data {
                    problems.push(format!("buffer page {bpage:#x} is unreadable: {e}"));
                }
            }
        }
        pages.push(p);
        if bpage == commit || at_break && !commit_walked {
            return pages;
        }
    }
    problems.push(format!(
        "the commit page {commit:#x} is not in the ring: every page was read"
    ));
    pages
}

/// One event's place in a page: its time and its bytes (the `trace_entry` header first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw<'p> {
    pub ts: u64,
    pub data: &'p [u8],
}

/// What a page's records say beyond their events.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PageEnd {
    /// Where the records stopped making sense, and why, when they did before the commit.
    pub broken: Option<(usize, String)>,
}

/// `ring_buffer_event` types (`type_len`).
const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// Bits of `time_delta` in an event header; a TIME_EXTEND's array word holds the bits above.
const TS_SHIFT: u32 = 27;

/// The events of one data page (`page`: its bytes from `data_offset`, `used` of them
/// committed), with their times from the page's `time_stamp`, as libtraceevent's kbuffer reads
/// them (a discarded event's delta counts), calling `each` for every one.
pub fn events<'p>(
    page: &'p [u8],
    time_stamp: u64,
    used: usize,
    mut each: impl FnMut(Raw<'p>),
) -> PageEnd {
    let used = used.min(page.len());
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(page.get(at..at + 4)?.try_into().ok()?))
    };
    let mut ts = time_stamp;
    let mut at = 0usize;
    let broken = |at: usize, why: &str| PageEnd {
        broken: Some((at, why.to_owned())),
    };
    while at + 4 <= used {
        let Some(head) = word(at) else { break };
        let type_len = head & 0x1f;
        let delta = u64::from(head >> 5);
        match type_len {
            TYPE_PADDING => {
                if delta == 0 {
                    // The rest of the page is empty.
                    return PageEnd::default();
                }
                let Some(len) = word(at + 4) else {
                    return broken(at, "a padding record runs past the page");
                };
                ts = ts.wrapping_add(delta);
                at = at.saturating_add(4 + len as usize);
            }
            TYPE_TIME_EXTEND => {
                let Some(high) = word(at + 4) else {
                    return broken(at, "a time extension runs past the page");
                };
                ts = ts.wrapping_add((u64::from(high) << TS_SHIFT) | delta);
                at += 8;
            }
            TYPE_TIME_STAMP => {
                let Some(high) = word(at + 4) else {
                    return broken(at, "a time stamp runs past the page");
                };
                let abs = (u64::from(high) << TS_SHIFT) | delta;
                // 59 bits are stored: the top bits are the running time's.
                let top = ts & !((1 << 59) - 1);
                ts = abs | top;
                at += 8;
            }
            0 => {
                let Some(len) = word(at + 4) else {
                    return broken(at, "an event's length runs past the page");
                };
                let (start, end) = (at + 8, (at + 4).saturating_add(len as usize));
                if len < 4 || end > used {
                    return broken(at, "an event's length runs past the committed data");
                }
                ts = ts.wrapping_add(delta);
                each(Raw {
                    ts,
                    data: &page[start..end],
                });
                at = end;
            }
            n => {
                let end = at + 4 + n as usize * 4;
                if end > used {
                    return broken(at, "an event runs past the committed data");
                }
                ts = ts.wrapping_add(delta);
                each(Raw {
                    ts,
                    data: &page[at + 4..end],
                });
                at = end;
            }
        }
    }
    PageEnd::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(type_len: u32, delta: u32) -> [u8; 4] {
        (type_len | delta << 5).to_le_bytes()
    }

    /// Small and large events, a time extension, a discarded event and the page's end, with
    /// their times.
    #[test]
    fn a_pages_records_give_their_events_and_times() {
        let mut page = Vec::new();
        page.extend(header(2, 0)); // 8 bytes of data
        page.extend([1, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd]);
        page.extend(header(TYPE_TIME_EXTEND, 5));
        page.extend(1u32.to_le_bytes()); // + (1 << 27) | 5
        page.extend(header(1, 0)); // 4 bytes
        page.extend([2, 0, 0, 0]);
        page.extend(header(TYPE_PADDING, 3)); // a discarded event, 12 bytes in all, delta 3
        page.extend(8u32.to_le_bytes());
        page.extend([0; 4]);
        page.extend(header(0, 7)); // a large event: length word 12 (itself and 8 bytes)
        page.extend(12u32.to_le_bytes());
        page.extend([3, 0, 0, 0, 9, 9, 9, 9]);
        page.extend(header(TYPE_PADDING, 0)); // the end
        let used = page.len();
        page.resize(64, 0xee);
        let mut seen = Vec::new();
        let end = events(&page, 1000, used, |r| seen.push((r.ts, r.data.to_vec())));
        assert_eq!(end, PageEnd::default());
        let ext = 1000 + ((1 << 27) | 5);
        assert_eq!(
            seen,
            vec![
                (1000, vec![1, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd]),
                (ext, vec![2, 0, 0, 0]),
                (ext + 3 + 7, vec![3, 0, 0, 0, 9, 9, 9, 9]),
            ]
        );
    }

    /// A length that runs past the committed bytes stops the page there, saying where.
    #[test]
    fn a_record_past_the_commit_stops_the_page() {
        let mut page = Vec::new();
        page.extend(header(1, 0));
        page.extend([1, 0, 0, 0]);
        page.extend(header(0, 0));
        page.extend(0xffff_fff0u32.to_le_bytes());
        let used = page.len();
        let mut n = 0;
        let end = events(&page, 0, used, |_| n += 1);
        assert_eq!(n, 1);
        assert_eq!(end.broken.map(|(at, _)| at), Some(8));
        // A count of committed bytes past the page is the page.
        let end = events(&page[..8], 0, 1 << 20, |_| n += 1);
        assert_eq!((n, end), (2, PageEnd::default()));
    }
}
