//! One processor's trace buffer: its control checked, and its records found — walked forward
//! from `tail` by each record's size, and back from `head` by each record's closing length
//! word when the forward walk cannot reach `head`.

use kcrash_plugin::{Damage, Event, Key, Memory, Order, RingInfo};

use crate::record;
use crate::template::Templates;

/// A record's frame before its data: event id, data size, daemon time.
const FRAME: u64 = 16;
/// The length word closing every record.
const TRAILER: u64 = 8;
/// The smallest record: a frame, the flag word padded to 8 bytes, the length word.
const MIN_RECORD: u64 = FRAME + 8 + TRAILER;
/// Most bytes of buffer believed: `size` comes from the dump, and the walk indexes the records.
const MAX_SIZE: u64 = 64 << 20;

/// A buffer whose control passed the checks, ready to walk.
pub struct Ring {
    cpu: u32,
    event_id: u32,
    data: u64,
    size: u64,
    /// Where the newest record ends, when believed.
    head: Option<u64>,
    /// Where the oldest record starts, when believed.
    tail: Option<u64>,
    /// What the checks did not believe, and how the walk works around it.
    pub repair: Option<String>,
}

/// A record's place and frame.
struct Frame {
    pos: u64,
    size: u64,
    time: u64,
}

/// Refuses the ring `info` describes: `why`, and none of its control's counts believed.
pub fn refuse(info: &mut RingInfo, why: String) {
    info.capacity = Err(why.clone());
    info.written = Err(why.clone());
    info.overwritten = Err(why.clone());
    info.lost = Err(why.clone());
    info.refused = Some(why);
}

/// The bytes a record of `size` data bytes takes in the buffer.
fn record_len(size: u64) -> u64 {
    FRAME + size.div_ceil(8) * 8 + TRAILER
}

impl Ring {
    /// Reads and checks the buffer control at `at`: its `-s` row, and the walk if the buffer
    /// can be read at all.
    pub fn check(mem: &dyn Memory, at: u64, cpu: u32) -> (RingInfo, Option<Ring>) {
        let mut info = RingInfo {
            name: format!("cpu{cpu}"),
            processor: Some(cpu),
            addr: at,
            capacity: Err("control unreadable".into()),
            unit: "bytes",
            written: Err("control unreadable".into()),
            overwritten: Err("control unreadable".into()),
            lost: Err("control unreadable".into()),
            refused: None,
        };
        let mut c = [0u8; 64];
        if let Err(e) = mem.read(at, &mut c) {
            info.refused = Some(format!("buffer control unreadable at {e}"));
            return (info, None);
        }
        let word = |i: usize| u64::from_le_bytes(c[i..i + 8].try_into().unwrap_or_default());
        let (own_cpu, event_id) = (word(0) as u32, (word(0) >> 32) as u32);
        let (data, size, head, tail) = (word(8), word(16), word(24), word(32));
        let (written, overwritten, lost) = (word(40), word(48), word(56));
        info.capacity = Ok(size);
        info.lost = Ok(lost);
        // Which of the two counts is wrong cannot be told: neither is believed.
        (info.written, info.overwritten) = if overwritten <= written {
            (Ok(written), Ok(overwritten))
        } else {
            let why = format!("{overwritten} overwritten of {written} written cannot be");
            (Err(why.clone()), Err(why))
        };
        if own_cpu != cpu {
            refuse(
                &mut info,
                format!("the control at {at:#x} says processor {own_cpu}"),
            );
            return (info, None);
        }
        if !(MIN_RECORD..=MAX_SIZE).contains(&size) || size % 8 != 0 {
            refuse(
                &mut info,
                format!("buffer size {size:#x} cannot be: not a multiple of 8 in 32 B..64 MiB"),
            );
            return (info, None);
        }
        if data.checked_add(size).is_none() {
            refuse(
                &mut info,
                format!("buffer data at {data:#x} of {size:#x} bytes runs past the address space"),
            );
            return (info, None);
        }
        let mut probe = [0u8; 1];
        if let Err(e) = mem.read(data, &mut probe) {
            refuse(
                &mut info,
                format!("buffer data at {data:#x} unreadable: {e}"),
            );
            return (info, None);
        }
        let head_ok = head % 8 == 0;
        let tail_ok = head_ok && tail % 8 == 0 && tail <= head && head - tail <= size;
        let repair = match (head_ok, tail_ok) {
            (true, true) => None,
            (true, false) => Some(format!(
                "tail {tail:#x} does not fit head {head:#x} and size {size:#x}: records found \
                 back from head"
            )),
            (false, _) if tail % 8 == 0 => Some(format!(
                "head {head:#x} is not a record boundary: records found forward from tail \
                 {tail:#x}"
            )),
            (false, _) => {
                refuse(
                    &mut info,
                    format!("neither head {head:#x} nor tail {tail:#x} is a record boundary"),
                );
                return (info, None);
            }
        };
        let ring = Ring {
            cpu,
            event_id,
            data,
            size,
            head: head_ok.then_some(head),
            tail: (tail_ok || !head_ok).then_some(tail),
            repair,
        };
        (info, Some(ring))
    }

    /// The buffer's data: its address and bytes.
    pub fn span(&self) -> (u64, u64) {
        (self.data, self.size)
    }

    /// Reads stream position `pos` onwards into `buf`, wrapping at the buffer's end.
    fn read(&self, mem: &dyn Memory, pos: u64, buf: &mut [u8]) -> Result<(), String> {
        let off = pos % self.size;
        let first = ((self.size - off) as usize).min(buf.len());
        let (a, b) = buf.split_at_mut(first);
        // `check` made sure `data + size` does not overflow; wrapping keeps a slip harmless.
        mem.read(self.data.wrapping_add(off), a)
            .map_err(|e| e.to_string())?;
        if !b.is_empty() {
            mem.read(self.data, b).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn word(&self, mem: &dyn Memory, pos: u64) -> Result<u64, String> {
        let mut b = [0u8; 8];
        self.read(mem, pos, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// The record starting at `pos`, if its frame and closing length agree and it ends by `end`.
    fn frame_at(&self, mem: &dyn Memory, pos: u64, end: u64) -> Result<Frame, String> {
        let first = self.word(mem, pos)?;
        let (id, size) = (first as u32, first >> 32);
        if id != self.event_id {
            return Err(format!(
                "event id {id:#x} at {pos:#x}, not the buffer's {:#x}",
                self.event_id
            ));
        }
        let len = record_len(size);
        if len > end.saturating_sub(pos) {
            return Err(format!(
                "record at {pos:#x} of {size} data bytes runs past {end:#x}"
            ));
        }
        let trailer = self.word(mem, pos.wrapping_add(len - TRAILER))?;
        if trailer != len {
            return Err(format!(
                "record at {pos:#x}: length word {trailer:#x}, its frame says {len:#x}"
            ));
        }
        Ok(Frame {
            pos,
            size,
            time: self.word(mem, pos.wrapping_add(8))?,
        })
    }

    /// The record ending at `end`, found by its closing length word, starting at or after
    /// `lower`.
    fn frame_ending_at(&self, mem: &dyn Memory, end: u64, lower: u64) -> Result<Frame, String> {
        let len = self.word(mem, end - TRAILER)?;
        if len < MIN_RECORD || len % 8 != 0 || len > end - lower {
            return Err(format!(
                "length word {len:#x} ending at {end:#x} cannot be a record's"
            ));
        }
        self.frame_at(mem, end - len, end)
    }

    /// The records in the buffer, oldest first, and the damage between them: a stretch no
    /// check passes, marked on the record after it (or the last one).
    fn index(&self, mem: &dyn Memory) -> (Vec<Frame>, Option<(usize, Damage)>) {
        let mut frames = Vec::new();
        let mut failure = None;
        let mut pos = self.tail.unwrap_or(0);
        if let Some(tail) = self.tail {
            let end = self.head.unwrap_or(tail.saturating_add(self.size));
            while pos < end {
                match self.frame_at(mem, pos, end) {
                    Ok(f) => {
                        pos = pos.saturating_add(record_len(f.size));
                        frames.push(f);
                    }
                    Err(why) => {
                        failure = Some(why);
                        break;
                    }
                }
            }
            if self.head.is_none() || failure.is_none() {
                return (frames, None);
            }
        }
        let Some(head) = self.head else {
            return (frames, None);
        };
        let lower = if self.tail.is_some() {
            pos
        } else {
            head.saturating_sub(self.size)
        };
        let mut back = Vec::new();
        let mut end = head;
        while end >= lower.saturating_add(MIN_RECORD) {
            match self.frame_ending_at(mem, end, lower) {
                Ok(f) => {
                    end = f.pos;
                    back.push(f);
                }
                Err(why) => {
                    failure.get_or_insert(why);
                    break;
                }
            }
        }
        let gap = (lower < end && (self.tail.is_some() || end - lower >= MIN_RECORD)).then(|| {
            let why = failure.unwrap_or_else(|| "no record fits".into());
            let at = frames
                .len()
                .min((frames.len() + back.len()).saturating_sub(1));
            let damage = Damage::Inconsistent(format!(
                "stream bytes {lower:#x}..{end:#x} before it hold no record that checks ({why})"
            ));
            (at, damage)
        });
        frames.extend(back.into_iter().rev());
        (frames, gap)
    }

    /// The buffer's events in `order`.
    pub fn events<'a>(
        &'a self,
        mem: &'a (dyn Memory + Sync),
        ring: usize,
        order: Order,
        templates: &'a Templates,
    ) -> Box<dyn Iterator<Item = Event<'a>> + Send + 'a> {
        let (frames, gap) = self.index(mem);
        let n = frames.len();
        let mut gap = gap;
        let iter = (0..n).map(move |i| {
            let i = match order {
                Order::OldestFirst => i,
                Order::NewestFirst => n - 1 - i,
            };
            let mut e = self.event(mem, &frames[i], ring, templates);
            if let Some((_, damage)) = gap.take_if(|(at, _)| *at == i) {
                e.damage.push(damage);
            }
            e
        });
        Box::new(iter)
    }

    fn event(
        &self,
        mem: &dyn Memory,
        f: &Frame,
        ring: usize,
        templates: &Templates,
    ) -> Event<'static> {
        let mut e = Event::new(f.time, f.pos, ring, "DProbes");
        e.processor = Some(self.cpu);
        let mut bytes = vec![0u8; f.size as usize];
        let start = f.pos.wrapping_add(FRAME);
        if let Err(reason) = self.read(mem, start, &mut bytes) {
            e.damage.push(Damage::Unreadable {
                addr: self.data.wrapping_add(start % self.size),
                reason,
            });
            return e;
        }
        let d = record::decode(&bytes, templates);
        e.name = d.name.into();
        e.fields = d.fields;
        e.message = d.message;
        e.damage = d.damage;
        if let Some((major, minor)) = d.code {
            e.key = Key::Code(major, minor);
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcrash_plugin::Runs;

    const CONTROL: u64 = 0x1000;
    const DATA: u64 = 0x2000;
    const ID: u32 = 0x4450;

    /// A buffer of `size` bytes holding `count` records (data: flag word 0, then the record's
    /// number as one byte), written from stream position 0 as the writer does: the oldest
    /// dropped until the newest fits. Returns the memory's runs and head and tail.
    fn buffer(size: u64, count: u64) -> (Vec<u8>, u64, u64) {
        let mut bytes = vec![0u8; size as usize];
        let (mut head, mut tail) = (0u64, 0u64);
        let mut lens = std::collections::VecDeque::new();
        for n in 0..count {
            let data = [0, 0, 0, 0, n as u8];
            let len = record_len(data.len() as u64);
            while head + len - tail > size {
                tail += lens.pop_front().unwrap();
            }
            let mut rec = Vec::new();
            rec.extend_from_slice(&ID.to_le_bytes());
            rec.extend_from_slice(&(data.len() as u32).to_le_bytes());
            rec.extend_from_slice(&(100 + n).to_le_bytes());
            rec.extend_from_slice(&data);
            rec.resize((len - TRAILER) as usize, 0);
            rec.extend_from_slice(&len.to_le_bytes());
            for (i, b) in rec.iter().enumerate() {
                bytes[((head + i as u64) % size) as usize] = *b;
            }
            head += len;
            lens.push_back(len);
        }
        (bytes, head, tail)
    }

    fn control(size: u64, head: u64, tail: u64, written: u64, overwritten: u64) -> Vec<u8> {
        let mut c = Vec::new();
        for w in [
            u64::from(ID) << 32,
            DATA,
            size,
            head,
            tail,
            written,
            overwritten,
            0,
        ] {
            c.extend_from_slice(&w.to_le_bytes());
        }
        c
    }

    /// What the tests look at of an event.
    struct Seen {
        ticks: u64,
        seq: u64,
        damage: Vec<Damage>,
    }

    fn events(mem: &Runs, order: Order) -> (RingInfo, Vec<Seen>) {
        let (info, ring) = Ring::check(mem, CONTROL, 0);
        let templates = Templates::default();
        let events = match &ring {
            Some(r) => r
                .events(mem, 0, order, &templates)
                .map(|e| Seen {
                    ticks: e.ticks,
                    seq: e.seq,
                    damage: e.damage,
                })
                .collect(),
            None => Vec::new(),
        };
        (info, events)
    }

    fn ticks(events: &[Seen]) -> Vec<u64> {
        events.iter().map(|e| e.ticks).collect()
    }

    #[test]
    fn a_wrapped_buffer_reads_in_both_orders() {
        // Records of 32 bytes in 200: six fit, and the oldest of them wraps across the end.
        let (bytes, head, tail) = buffer(200, 12);
        let mem = Runs(vec![
            (CONTROL, control(200, head, tail, 12, 6)),
            (DATA, bytes),
        ]);
        let (info, oldest) = events(&mem, Order::OldestFirst);
        assert_eq!((info.written, info.overwritten), (Ok(12), Ok(6)));
        assert_eq!(ticks(&oldest), [106, 107, 108, 109, 110, 111]);
        assert!(oldest.iter().all(|e| e.damage.is_empty()));
        assert_eq!(oldest[0].seq, tail);
        let (_, newest) = events(&mem, Order::NewestFirst);
        assert_eq!(ticks(&newest), [111, 110, 109, 108, 107, 106]);
    }

    #[test]
    fn a_bad_tail_is_walked_around_from_head() {
        let (bytes, head, _) = buffer(200, 12);
        let mem = Runs(vec![
            (CONTROL, control(200, head, head + 0x1000, 12, 6)),
            (DATA, bytes),
        ]);
        let (_, oldest) = events(&mem, Order::OldestFirst);
        assert_eq!(ticks(&oldest), [106, 107, 108, 109, 110, 111]);
    }

    #[test]
    fn a_broken_record_is_marked_and_the_rest_read() {
        let (mut bytes, head, tail) = buffer(200, 12);
        // The third oldest record's event id.
        let at = ((tail + 2 * 32) % 200) as usize;
        bytes[at] ^= 0xff;
        let mem = Runs(vec![
            (CONTROL, control(200, head, tail, 12, 6)),
            (DATA, bytes),
        ]);
        let (_, oldest) = events(&mem, Order::OldestFirst);
        assert_eq!(ticks(&oldest), [106, 107, 109, 110, 111]);
        assert!(
            matches!(&oldest[2].damage[..], [Damage::Inconsistent(w)] if w.contains("event id"))
        );
        let (_, newest) = events(&mem, Order::NewestFirst);
        assert_eq!(ticks(&newest), [111, 110, 109, 107, 106]);
    }

    #[test]
    fn impossible_controls_are_refused_or_unknown() {
        let (bytes, head, tail) = buffer(200, 3);
        let cases = [
            (control(0, head, tail, 3, 0), "size"),
            (control(200, head + 3, tail + 5, 3, 0), "record boundary"),
        ];
        for (c, why) in cases {
            let mem = Runs(vec![(CONTROL, c), (DATA, bytes.clone())]);
            let (info, events) = events(&mem, Order::OldestFirst);
            assert!(info.refused.unwrap().contains(why));
            assert!(events.is_empty());
        }
        let mem = Runs(vec![(CONTROL, control(200, head, tail, 3, 0))]);
        assert!(events(&mem, Order::OldestFirst)
            .0
            .refused
            .unwrap()
            .contains("unreadable"));
        let mem = Runs(vec![
            (CONTROL, control(200, head, tail, 1, 5)),
            (DATA, bytes),
        ]);
        let (info, events) = events(&mem, Order::OldestFirst);
        assert!(info.written.is_err() && info.overwritten.is_err());
        assert_eq!(events.len(), 3);
    }

    #[test]
    fn a_refused_control_keeps_no_counts() {
        let (bytes, head, tail) = buffer(200, 3);
        let mut c = control(200, head, tail, 3, 0);
        c[0] = 5; // processor 5's control in processor 0's place
        let mem = Runs(vec![(CONTROL, c), (DATA, bytes)]);
        let (info, _) = events(&mem, Order::OldestFirst);
        assert!(info.refused.unwrap().contains("processor 5"));
        assert!(info.capacity.is_err() && info.written.is_err());
        assert!(info.overwritten.is_err() && info.lost.is_err());
    }

    #[test]
    fn a_buffer_past_the_address_space_is_refused() {
        let (bytes, head, tail) = buffer(200, 3);
        let data = u64::MAX - 0x40;
        let mut c = control(200, head, tail, 3, 0);
        c[8..16].copy_from_slice(&data.to_le_bytes());
        // Its first bytes readable, so only the overflow check refuses it.
        let mem = Runs(vec![(CONTROL, c), (DATA, bytes), (data, vec![0; 0x40])]);
        let (info, events) = events(&mem, Order::OldestFirst);
        let why = info.refused.unwrap();
        assert!(why.contains("0xffffffffffffffbf"), "{why}");
        assert!(info.capacity.is_err());
        assert!(events.is_empty());
    }
}
