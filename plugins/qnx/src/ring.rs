//! Finding the ring: the syspage's trace entry, then the circular list of tracebufs, walked
//! from the head with a bound and every header checked.

use kcrash_plugin::{Memory, Unreadable};

use crate::codes::Raw;

/// The symbol of the syspage's trace entry.
pub const SYSPAGE_SYMBOL: &str = "_syspage_trace";
/// `struct traceheader` on a 64-bit machine: five 32-bit words after two pointers, padding
/// to align `begin_ptr`, `reserved[31]`, padded to 8 bytes.
pub const HEADER_BYTES: u64 = 184;
/// At most this many traceevents per buffer: a hostile `tracelements` cannot size a read.
pub const MAX_ELEMENTS: u32 = 1 << 16;
/// At most this many buffers in a ring: a `next` chain that never returns to the head stops.
pub const MAX_BUFFERS: usize = 1024;
/// At most this many traceevents in the whole ring (all are decoded at once).
pub const MAX_EVENTS: u64 = 1 << 20;

/// The syspage's trace entry.
#[derive(Clone, Copy, Debug)]
pub struct Syspage {
    pub head: u64,
    pub cycles_per_sec: u64,
    pub elements: u32,
}

impl Syspage {
    pub fn read(mem: &dyn Memory, addr: u64) -> Result<Syspage, String> {
        let mut b = [0u8; 20];
        mem.read(addr, &mut b)
            .map_err(|e| format!("{SYSPAGE_SYMBOL} at {addr:#x} cannot be read: {e}"))?;
        let head = u64::from_le_bytes(b[0..8].try_into().unwrap());
        let syspage = Syspage {
            head,
            cycles_per_sec: u64::from_le_bytes(b[8..16].try_into().unwrap()),
            elements: u32::from_le_bytes(b[16..20].try_into().unwrap()),
        };
        if head == 0 {
            return Err(format!(
                "{SYSPAGE_SYMBOL}.tracebuf at {addr:#x} is null: tracing never started"
            ));
        }
        if syspage.elements == 0 || syspage.elements > MAX_ELEMENTS {
            return Err(format!(
                "{SYSPAGE_SYMBOL}.tracelements at {:#x} is {}, not 1 to {MAX_ELEMENTS}",
                addr.wrapping_add(16),
                syspage.elements
            ));
        }
        Ok(syspage)
    }
}

/// One buffer's header, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    pub addr: u64,
    /// Its place in the ring, counted from the head.
    pub index: usize,
    pub next: u64,
    pub flags: u32,
    /// The events it is read for: `num_events`, or 0 when the header cannot be believed.
    pub events: u32,
    pub seq_buff_num: u32,
    pub spin: u32,
}

impl Buffer {
    /// `&data[0]`.
    pub fn data(&self) -> u64 {
        self.addr.wrapping_add(HEADER_BYTES)
    }

    /// Reads and checks the header at `addr`. Err when it is no trace buffer (unreadable, or
    /// its `baseaddr` is not its address); other problems go to `notes`, and a `num_events`
    /// beyond the buffer leaves it read for no events.
    fn read(
        mem: &dyn Memory,
        addr: u64,
        index: usize,
        elements: u32,
        notes: &mut Vec<String>,
    ) -> Result<Buffer, String> {
        let mut b = [0u8; 56];
        mem.read(addr, &mut b)
            .map_err(|e: Unreadable| format!("its header cannot be read: {e}"))?;
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let baseaddr = u64_at(0);
        if baseaddr != addr {
            return Err(format!(
                "baseaddr is {baseaddr:#x}, not the buffer's own address: not a trace buffer"
            ));
        }
        let end = HEADER_BYTES + u64::from(elements) * Raw::BYTES as u64;
        if addr.checked_add(end).is_none() {
            return Err(format!(
                "a buffer of {elements} traceevents at {addr:#x} would end beyond the address space: not a trace buffer"
            ));
        }
        let buf = Buffer {
            addr,
            index,
            next: u64_at(8),
            flags: u32_at(16),
            events: u32_at(20),
            seq_buff_num: u32_at(24),
            spin: u32_at(32),
        };
        let here = format!("buffer {index} at {addr:#x}");
        let (ls13, begin, tail) = (u32_at(28), u64_at(40), u64_at(48));
        if ls13 != (index as u32) << 13 {
            notes.push(format!(
                "{here}: ls13_rb_num is {ls13:#x}, not its place in the ring ({index}) << 13"
            ));
        }
        if buf.spin != 0 {
            notes.push(format!(
                "{here}: its spin lock is held ({:#x}): a writer was storing into it at the crash",
                buf.spin
            ));
        }
        if buf.events > elements {
            notes.push(format!(
                "{here}: num_events is {}, more than the {elements} a buffer holds: its events are not read",
                buf.events
            ));
            return Ok(Buffer { events: 0, ..buf });
        }
        if begin != buf.data() {
            notes.push(format!(
                "{here}: begin_ptr is {begin:#x}, not &data[0] = {:#x}; events read from data[0]",
                buf.data()
            ));
        }
        let want_tail = buf
            .data()
            .wrapping_add(u64::from(buf.events) * Raw::BYTES as u64);
        if tail != want_tail {
            notes.push(format!(
                "{here}: tail_ptr is {tail:#x}, not &data[num_events] = {want_tail:#x}; {} events read as num_events says",
                buf.events
            ));
        }
        Ok(buf)
    }
}

/// The ring as walked from the head.
#[derive(Debug)]
pub struct Ring {
    /// The buffers reached, in ring order.
    pub buffers: Vec<Buffer>,
    /// Why the walk stopped before returning to the head, when it did.
    pub broken: Option<String>,
    pub notes: Vec<String>,
}

impl Ring {
    /// Follows `next` from the head until it returns there, for at most [`MAX_BUFFERS`].
    pub fn walk(mem: &dyn Memory, syspage: &Syspage) -> Result<Ring, String> {
        let mut ring = Ring {
            buffers: Vec::new(),
            broken: None,
            notes: Vec::new(),
        };
        let mut at = syspage.head;
        loop {
            let index = ring.buffers.len();
            let buf = match Buffer::read(mem, at, index, syspage.elements, &mut ring.notes) {
                Ok(buf) => buf,
                Err(why) if index == 0 => {
                    return Err(format!("the ring's head buffer at {at:#x}: {why}"));
                }
                Err(why) => {
                    let prev = &ring.buffers[index - 1];
                    ring.broken = Some(format!(
                        "buffer {} at {:#x}: next leads to {at:#x}, where {why}",
                        prev.index, prev.addr
                    ));
                    break;
                }
            };
            let next = buf.next;
            ring.buffers.push(buf);
            if next == syspage.head {
                break;
            }
            if let Some(seen) = ring.buffers.iter().find(|b| b.addr == next) {
                ring.broken = Some(format!(
                    "buffer {index} at {at:#x}: next is {next:#x}, buffer {} again, not the head: the list is a cycle that never returns to the head",
                    seen.index
                ));
                break;
            }
            if ring.buffers.len() == MAX_BUFFERS {
                ring.broken = Some(format!(
                    "more than {MAX_BUFFERS} buffers follow the head without returning to it"
                ));
                break;
            }
            at = next;
        }
        let total: u64 = ring.buffers.len() as u64 * u64::from(syspage.elements);
        if total > MAX_EVENTS {
            return Err(format!(
                "{} buffers of {} events: more than the {MAX_EVENTS} traceevents kcrash reads",
                ring.buffers.len(),
                syspage.elements
            ));
        }
        Ok(ring)
    }
}
