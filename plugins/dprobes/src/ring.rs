//! One processor's trace buffer: its control checked, and its records found — walked forward
//! from `tail` by each record's size, and back from `head` by each record's closing length
//! word when the forward walk cannot reach `head`.

use kcrash_plugin::{Damage, Event, Memory, Order, RingInfo};

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
            info.refused = Some(format!("the control at {at:#x} says processor {own_cpu}"));
            return (info, None);
        }
        if size < MIN_RECORD || size > MAX_SIZE || size % 8 != 0 {
            info.capacity = Err(format!("size {size:#x} is not a multiple of 8 in 32..64 MiB"));
            info.refused = Some(format!("buffer size {size:#x} cannot be"));
            return (info, None);
        }
        let mut probe = [0u8; 1];
        if let Err(e) = mem.read(data, &mut probe) {
            info.refused = Some(format!("buffer data at {data:#x} unreadable: {e}"));
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
                info.refused = Some(format!(
                    "neither head {head:#x} nor tail {tail:#x} is a record boundary"
                ));
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

    /// Reads stream position `pos` onwards into `buf`, wrapping at the buffer's end.
    fn read(&self, mem: &dyn Memory, pos: u64, buf: &mut [u8]) -> Result<(), String> {
        let off = pos % self.size;
        let first = ((self.size - off) as usize).min(buf.len());
        let (a, b) = buf.split_at_mut(first);
        mem.read(self.data + off, a).map_err(|e| e.to_string())?;
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
        if len > end - pos {
            return Err(format!(
                "record at {pos:#x} of {size} data bytes runs past {end:#x}"
            ));
        }
        let trailer = self.word(mem, pos + len - TRAILER)?;
        if trailer != len {
            return Err(format!(
                "record at {pos:#x}: length word {trailer:#x}, its frame says {len:#x}"
            ));
        }
        Ok(Frame {
            pos,
            size,
            time: self.word(mem, pos + 8)?,
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
                        pos += record_len(f.size);
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
            let at = frames.len().min((frames.len() + back.len()).saturating_sub(1));
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
    ) -> Box<dyn Iterator<Item = Event> + 'a> {
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

    fn event(&self, mem: &dyn Memory, f: &Frame, ring: usize, templates: &Templates) -> Event {
        let mut e = Event::new(f.time, f.pos, ring, "DProbes");
        e.processor = Some(self.cpu);
        let mut bytes = vec![0u8; f.size as usize];
        if let Err(reason) = self.read(mem, f.pos + FRAME, &mut bytes) {
            e.damage.push(Damage::Unreadable {
                addr: self.data + (f.pos + FRAME) % self.size,
                reason,
            });
            return e;
        }
        let d = record::decode(&bytes, templates);
        e.name = d.name.into();
        e.fields = d.fields;
        e.message = d.message;
        e.damage = d.damage;
        e
    }
}
