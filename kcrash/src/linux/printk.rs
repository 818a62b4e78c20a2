//! The kernel's printk ring (Linux 5.10+, kernel/printk/printk_ringbuffer.h): a ring of
//! descriptors (state and the text's place), a parallel array of `printk_info` (sequence number,
//! timestamp, level), and a data ring of text blocks, each headed by its descriptor's id.
//!
//! Member offsets come from VMCOREINFO (the kernel exports them for makedumpfile's
//! `--dump-dmesg`) or, when it has none, from the image's DWARF. The level is a bit-field
//! VMCOREINFO does not describe: it comes from DWARF when there is DWARF.

use dumpfmt::VmcoreInfo;
use symbols::Image;

use crate::error::{Context, Error, Result};
use crate::memory::Memory;

/// The state in a descriptor's top two bits (`enum desc_state`).
const STATE_SHIFT: u32 = 62;
const ID_MASK: u64 = (1 << STATE_SHIFT) - 1;
const COMMITTED: u64 = 1;
const FINALIZED: u64 = 2;
/// Sanity bounds on the ring's size fields, read from an untrusted dump: the kernel allows a
/// log buffer of at most 2^31 bytes (LOG_BUF_LEN_MAX); descriptors are a fraction of that.
const MAX_COUNT_BITS: u64 = 26;
const MAX_SIZE_BITS: u64 = 31;
/// The most bytes one of the ring's arrays is read into: the text ring's own maximum. A
/// descriptor or info array that would be larger (2^26 entries of a 4 KiB struct is 256 GiB)
/// is no kernel's.
const MAX_ARRAY: u64 = 1 << MAX_SIZE_BITS;
/// The ring's arrays are read this much at a time, so memory grows only with what the dump
/// holds: an array the dump does not hold fails at its first missing chunk.
const CHUNK: u64 = 1 << 20;

/// Where the ring's fields are.
#[derive(Debug, Clone)]
pub struct Layout {
    desc_ring: u64,
    count_bits: u64,
    descs: u64,
    infos: u64,
    head_id: u64,
    tail_id: u64,
    desc_size: u64,
    state_var: u64,
    text_blk_lpos: u64,
    lpos_begin: u64,
    lpos_next: u64,
    text_data_ring: u64,
    size_bits: u64,
    data: u64,
    info_size: u64,
    seq: u64,
    ts_nsec: u64,
    text_len: u64,
    caller_id: u64,
    /// The level bit-field: (bit offset in `printk_info`, width).
    level: Option<(u64, u64)>,
}

type Fields<'a> = [(&'a str, &'a str); 19];

/// (struct, member) of each field, in `Layout`'s order.
const FIELDS: Fields<'static> = [
    ("printk_ringbuffer", "desc_ring"),
    ("prb_desc_ring", "count_bits"),
    ("prb_desc_ring", "descs"),
    ("prb_desc_ring", "infos"),
    ("prb_desc_ring", "head_id"),
    ("prb_desc_ring", "tail_id"),
    ("prb_desc", ""),
    ("prb_desc", "state_var"),
    ("prb_desc", "text_blk_lpos"),
    ("prb_data_blk_lpos", "begin"),
    ("prb_data_blk_lpos", "next"),
    ("printk_ringbuffer", "text_data_ring"),
    ("prb_data_ring", "size_bits"),
    ("prb_data_ring", "data"),
    ("printk_info", ""),
    ("printk_info", "seq"),
    ("printk_info", "ts_nsec"),
    ("printk_info", "text_len"),
    ("printk_info", "caller_id"),
];

impl Layout {
    fn from_values(v: [u64; 19], level: Option<(u64, u64)>) -> Layout {
        Layout {
            desc_ring: v[0],
            count_bits: v[1],
            descs: v[2],
            infos: v[3],
            head_id: v[4],
            tail_id: v[5],
            desc_size: v[6],
            state_var: v[7],
            text_blk_lpos: v[8],
            lpos_begin: v[9],
            lpos_next: v[10],
            text_data_ring: v[11],
            size_bits: v[12],
            data: v[13],
            info_size: v[14],
            seq: v[15],
            ts_nsec: v[16],
            text_len: v[17],
            caller_id: v[18],
            level,
        }
    }

    /// From VMCOREINFO's OFFSET()/SIZE() lines, without the level; `None` when any is missing
    /// (a kernel before 5.10, or no VMCOREINFO).
    pub fn from_vmcoreinfo(info: &VmcoreInfo<'_>) -> Option<Layout> {
        let mut v = [0u64; 19];
        for (slot, (st, member)) in v.iter_mut().zip(FIELDS) {
            *slot = if member.is_empty() {
                info.size(st).ok()??
            } else {
                info.offset(&format!("{st}.{member}")).ok()??
            };
        }
        Some(Layout::from_values(v, None))
    }

    /// The level's place from the image's DWARF (which VMCOREINFO does not give). Costs the
    /// DWARF type index, so only done when levels are wanted.
    pub fn with_level(mut self, image: &Image) -> Result<Layout> {
        if self.level.is_none() {
            self.level = level_from_dwarf(image)?;
        }
        Ok(self)
    }

    /// Struct sizes a kernel could have and members inside them: the sizes multiply into
    /// what is read, and they come from the dump (VMCOREINFO) or its image.
    fn check(&self) -> Result<()> {
        const MAX_STRUCT: u64 = 4096;
        let inside = |offset: u64, size: u64, width: u64| {
            (1..=MAX_STRUCT).contains(&size) && offset.saturating_add(width) <= size
        };
        let lpos = self.text_blk_lpos;
        let ok = inside(self.state_var, self.desc_size, 8)
            && inside(lpos.saturating_add(self.lpos_begin), self.desc_size, 8)
            && inside(lpos.saturating_add(self.lpos_next), self.desc_size, 8)
            && inside(self.seq, self.info_size, 8)
            && inside(self.ts_nsec, self.info_size, 8)
            && inside(self.text_len, self.info_size, 2)
            && inside(self.caller_id, self.info_size, 4)
            && self
                .level
                .is_none_or(|(bit, width)| width <= 8 && bit / 8 + 2 <= self.info_size);
        if ok {
            Ok(())
        } else {
            Err(Error::Damaged(format!(
                "the printk ring's layout is not a kernel's: prb_desc {} bytes, printk_info {} \
                 bytes, with members outside them",
                self.desc_size, self.info_size
            )))
        }
    }

    /// From the image's DWARF.
    pub fn from_dwarf(image: &Image) -> Result<Layout> {
        let mut v = [0u64; 19];
        for (slot, (st, member)) in v.iter_mut().zip(FIELDS) {
            let ty = struct_type(image, st)?;
            *slot = if member.is_empty() {
                image
                    .size_of(ty)?
                    .ok_or_else(|| Error::Missing(format!("struct {st} has no size")))?
            } else {
                let t = image.type_(ty)?;
                t.member(member)
                    .ok_or_else(|| Error::Missing(format!("struct {st} has no member {member}")))?
                    .offset
            };
        }
        Ok(Layout::from_values(v, level_from_dwarf(image)?))
    }
}

fn struct_type(image: &Image, name: &str) -> Result<symbols::TypeId> {
    image
        .type_by_name(&format!("struct {name}"))?
        .ok_or_else(|| {
            Error::Missing(format!(
                "the image's DWARF has no struct {name} (a kernel before 5.10?)"
            ))
        })
}

/// `printk_info.level`'s bits.
fn level_from_dwarf(image: &Image) -> Result<Option<(u64, u64)>> {
    if image.debug_path().is_none() {
        return Ok(None);
    }
    let ty = struct_type(image, "printk_info")?;
    let t = image.type_(ty)?;
    Ok(t.member("level").map(|m| match m.bit_field {
        Some(b) => (b.bit_offset, b.bit_size),
        None => (m.offset * 8, 8),
    }))
}

/// One record of the ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    /// Nanoseconds since boot (the kernel's local_clock).
    pub ts_nsec: u64,
    pub level: Option<u8>,
    /// `caller_id`: a task id, or a CPU number with the top bit set.
    pub caller_id: u32,
    /// The text, possibly several lines (the kernel keeps a message whole).
    pub text: Vec<u8>,
}

/// The ring, read whole: its three arrays copied out of the dump once.
pub struct Ring {
    /// The `printk_ringbuffer` `prb` points to.
    addr: u64,
    layout: Layout,
    count: u64,
    descs: Vec<u8>,
    infos: Vec<u8>,
    data: Vec<u8>,
    tail_id: u64,
    head_id: u64,
}

fn read_vec(mem: &dyn Memory, addr: u64, len: Option<u64>, what: &str) -> Result<Vec<u8>> {
    let len = len.filter(|&l| l <= MAX_ARRAY).ok_or_else(|| {
        Error::Damaged(format!(
            "the printk ring's {what} would be over {MAX_ARRAY} bytes: not a printk ring"
        ))
    })?;
    let mut buf = Vec::new();
    while (buf.len() as u64) < len {
        let at = buf.len();
        let n = CHUNK.min(len - at as u64) as usize;
        buf.resize(at + n, 0);
        mem.read(addr.wrapping_add(at as u64), &mut buf[at..])
            .with_context(|| format!("the printk ring's {what}"))?;
    }
    Ok(buf)
}

fn le(bytes: &[u8], at: u64, size: u64) -> u64 {
    let at = at as usize;
    let mut b = [0u8; 8];
    if let Some(src) = bytes.get(at..at + size as usize) {
        b[..size as usize].copy_from_slice(src);
    }
    u64::from_le_bytes(b)
}

/// The kernel's printk ring, placed by VMCOREINFO or by the image; with each record's level
/// when `levels` (which needs DWARF).
pub fn find(
    info: Option<&VmcoreInfo<'_>>,
    image: Option<&Image>,
    mem: &dyn Memory,
    levels: bool,
) -> Result<Ring> {
    let from_info = info.map(|i| i.symbol("prb")).transpose()?.flatten();
    let prb = match from_info.or_else(|| Some(image?.symbol("prb")?.address)) {
        Some(prb) => prb,
        None => {
            return Err(Error::Missing(
                "no printk ring: neither VMCOREINFO nor the image has the symbol prb \
                 (Linux 5.10 or later, and its vmlinux, are needed)"
                    .into(),
            ))
        }
    };
    let layout = match info.and_then(Layout::from_vmcoreinfo) {
        Some(layout) if levels => {
            let image =
                image.ok_or_else(|| Error::Missing("-m needs the vmlinux with DWARF".into()))?;
            layout.with_level(image)?
        }
        Some(layout) => layout,
        None => Layout::from_dwarf(image.ok_or_else(|| {
            Error::Missing(
                "VMCOREINFO does not describe the printk ring: give the vmlinux with DWARF".into(),
            )
        })?)?,
    };
    Ring::read(mem, prb, layout)
}

impl Ring {
    /// Reads the ring `prb` points to.
    pub fn read(mem: &dyn Memory, prb: u64, layout: Layout) -> Result<Ring> {
        layout.check()?;
        let rb = mem
            .read_u64(prb)
            .context("prb (the printk ring's pointer)")?;
        let l = &layout;
        let field = |addr: u64, what: &str| {
            mem.read_u64(addr)
                .with_context(|| format!("the printk ring's {what}"))
        };
        let desc_ring = rb.wrapping_add(l.desc_ring);
        let count_bits = field(desc_ring.wrapping_add(l.count_bits), "count_bits")? & 0xffff_ffff;
        let text_ring = rb.wrapping_add(l.text_data_ring);
        let size_bits = field(text_ring.wrapping_add(l.size_bits), "size_bits")? & 0xffff_ffff;
        if count_bits > MAX_COUNT_BITS || size_bits > MAX_SIZE_BITS {
            return Err(Error::Damaged(format!(
                "the printk ring at {rb:#x} claims 2^{count_bits} descriptors and 2^{size_bits} \
                 text bytes: not a printk ring"
            )));
        }
        let count = 1u64 << count_bits;
        let descs = field(desc_ring.wrapping_add(l.descs), "descs")?;
        let infos = field(desc_ring.wrapping_add(l.infos), "infos")?;
        let data = field(text_ring.wrapping_add(l.data), "text data")?;
        Ok(Ring {
            descs: read_vec(mem, descs, count.checked_mul(l.desc_size), "descriptors")?,
            infos: read_vec(mem, infos, count.checked_mul(l.info_size), "infos")?,
            data: read_vec(mem, data, Some(1 << size_bits), "text data")?,
            tail_id: field(desc_ring.wrapping_add(l.tail_id), "tail_id")?,
            head_id: field(desc_ring.wrapping_add(l.head_id), "head_id")?,
            addr: rb,
            count,
            layout,
        })
    }

    /// Where the ring's `printk_ringbuffer` is.
    pub fn address(&self) -> u64 {
        self.addr
    }

    /// How many records (descriptors) it holds.
    pub fn capacity(&self) -> u64 {
        self.count
    }

    /// Every readable record, oldest first: committed or finalized (what crash and makedumpfile
    /// print; the kernel's own reader waits for finalization, which the last record before a
    /// panic may never get). Reserved records are being written; reusable ones and ids the
    /// descriptor no longer holds are gone.
    pub fn records(&self) -> impl Iterator<Item = Record> + '_ {
        let mut id = self.tail_id & ID_MASK;
        let end = self.head_id & ID_MASK;
        // At most one lap of the ring, whatever the ids say.
        let mut left = self.count;
        std::iter::from_fn(move || loop {
            if left == 0 {
                return None;
            }
            left -= 1;
            let this = id;
            let last = this == end;
            id = id.wrapping_add(1) & ID_MASK;
            if last {
                left = 0;
            }
            if let Some(r) = self.record(this) {
                return Some(r);
            }
        })
    }

    fn record(&self, id: u64) -> Option<Record> {
        let l = &self.layout;
        let index = id % self.count;
        let desc = index * l.desc_size;
        let state_var = le(&self.descs, desc + l.state_var, 8);
        let state = state_var >> STATE_SHIFT;
        if state_var & ID_MASK != id || !(state == COMMITTED || state == FINALIZED) {
            return None;
        }
        let lpos = desc + l.text_blk_lpos;
        let begin = le(&self.descs, lpos + l.lpos_begin, 8);
        let next = le(&self.descs, lpos + l.lpos_next, 8);
        let info = index * l.info_size;
        let text_len = le(&self.infos, info + l.text_len, 2);
        let level = l.level.map(|(bit, width)| {
            let byte = le(&self.infos, info + bit / 8, 2);
            ((byte >> (bit % 8)) & ((1 << width) - 1)) as u8
        });
        Some(Record {
            seq: le(&self.infos, info + l.seq, 8),
            ts_nsec: le(&self.infos, info + l.ts_nsec, 8),
            level,
            caller_id: le(&self.infos, info + l.caller_id, 4) as u32,
            text: self.text(begin, next, text_len).to_vec(),
        })
    }

    /// The text block `begin..next` names (the kernel's get_data): in place, or, when it would
    /// cross the ring's end, from the ring's start. Bit 0 of `begin` set means no data.
    fn text(&self, begin: u64, next: u64, text_len: u64) -> &[u8] {
        let size = self.data.len() as u64;
        let bits = size.trailing_zeros();
        if begin & 1 != 0 || begin == next {
            return &[];
        }
        let (start, len) = if begin >> bits == next >> bits {
            (begin % size, next.wrapping_sub(begin))
        } else if begin.wrapping_add(size) >> bits == next >> bits {
            (0, next % size)
        } else {
            return &[];
        };
        // The block starts with its descriptor's id (an unsigned long).
        let Some(len) = len.checked_sub(8) else {
            return &[];
        };
        let from = start + 8;
        let to = (from + len.min(text_len)).min(size);
        self.data.get(from as usize..to as usize).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 6.1's layout, as its VMCOREINFO gives it.
    fn linux_6_1() -> [u64; 19] {
        [
            0, 0, 8, 16, 24, 32, 24, 0, 8, 0, 8, 48, 0, 8, 88, 0, 8, 16, 20,
        ]
    }

    #[test]
    fn a_kernels_layout_passes_and_absurd_sizes_do_not() {
        assert!(Layout::from_values(linux_6_1(), Some((157, 3)))
            .check()
            .is_ok());
        let mut huge = linux_6_1();
        huge[6] = 1 << 40; // SIZE(prb_desc)
        assert!(Layout::from_values(huge, None).check().is_err());
        let mut outside = linux_6_1();
        outside[18] = 88; // OFFSET(printk_info.caller_id) at the struct's end
        let e = Layout::from_values(outside, None).check().unwrap_err();
        assert!(e.to_string().contains("printk_info 88 bytes"), "{e}");
        let wide_level = Layout::from_values(linux_6_1(), Some((157, 40)));
        assert!(wide_level.check().is_err());
    }

    /// A ring of 2^26 descriptors of 4 KiB structs (256 GiB) over memory that reads as
    /// anything: refused before anything is allocated; and a ring whose memory ends early fails
    /// at the chunk that is missing, having allocated only what was read.
    #[test]
    fn absurd_rings_are_refused_before_allocating() {
        use crate::memory::Unreadable;
        struct Anything;
        impl Memory for Anything {
            fn read(&self, addr: u64, buf: &mut [u8]) -> std::result::Result<(), Unreadable> {
                // prb at 0x1000 points at the ring at 0x2000, whose count_bits (at +0) and
                // size_bits (at +48, the test layout's) claim the most a kernel allows;
                // everything else below 2^40 reads as zeros.
                let v: u64 = match addr {
                    0x1000 => 0x2000,
                    0x2000 => MAX_COUNT_BITS,
                    0x2030 => MAX_SIZE_BITS,
                    _ if addr >= 1 << 40 => {
                        return Err(Unreadable {
                            addr,
                            reason: "not in the dump".into(),
                        })
                    }
                    _ => 0,
                };
                for (i, b) in buf.iter_mut().enumerate() {
                    *b = v.to_le_bytes().get(i).copied().unwrap_or(0);
                }
                Ok(())
            }
        }
        let mut v = linux_6_1();
        v[6] = 4096; // SIZE(prb_desc)
        v[14] = 4096; // SIZE(printk_info)
        let layout = Layout::from_values(v, None);
        assert!(layout.check().is_ok(), "members inside structs of 4 KiB");
        let e = Ring::read(&Anything, 0x1000, layout)
            .err()
            .expect("refused");
        assert!(
            e.to_string()
                .contains("descriptors would be over 2147483648 bytes"),
            "{e}"
        );
        // Arrays the dump does not hold: the read stops at the first missing chunk.
        let e = read_vec(&Anything, (1 << 40) - CHUNK, Some(MAX_ARRAY), "text data")
            .expect_err("unreadable");
        assert!(e.to_string().contains("not in the dump"), "{e}");
    }
}
