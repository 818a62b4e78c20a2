//! What a traceevent's header says (figure 4 of the instrumentation design), and the names and
//! payload layouts of the classes and events kcrash knows.

use std::borrow::Cow;

use kcrash_plugin::{Damage, Field, Name, Value};

/// One 16-byte traceevent as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Raw {
    pub header: u32,
    pub timeoff: u32,
    pub data: [u32; 2],
}

/// The header's two control bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Simple,
    Begin,
    Continuation,
    End,
}

impl Part {
    pub fn describe(self) -> &'static str {
        match self {
            Part::Simple => "simple",
            Part::Begin => "begin",
            Part::Continuation => "continuation",
            Part::End => "end",
        }
    }
}

/// What ties the parts of one combine event together: processor, class, event and time stamp.
pub type Key = (u32, u32, u32, u32);

impl Raw {
    pub const BYTES: usize = 16;

    pub fn parse(b: &[u8; 16]) -> Raw {
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Raw {
            header: word(0),
            timeoff: word(4),
            data: [word(8), word(12)],
        }
    }

    pub fn part(&self) -> Part {
        match self.header >> 30 {
            0 => Part::Simple,
            1 => Part::Begin,
            2 => Part::Continuation,
            _ => Part::End,
        }
    }

    pub fn cpu(&self) -> u32 {
        (self.header >> 24) & 0x3f
    }

    pub fn flags(&self) -> u32 {
        (self.header >> 16) & 0xff
    }

    /// Bit 15, which the design reserves.
    pub fn reserved(&self) -> bool {
        self.header & 0x8000 != 0
    }

    pub fn class(&self) -> u32 {
        (self.header >> 10) & 0x1f
    }

    pub fn event(&self) -> u32 {
        self.header & 0x3ff
    }

    pub fn key(&self) -> Key {
        (self.cpu(), self.class(), self.event(), self.timeoff)
    }

    /// The data words as bytes, as a combine event's payload concatenates them.
    pub fn payload(&self) -> [u8; 8] {
        let mut b = [0; 8];
        b[..4].copy_from_slice(&self.data[0].to_le_bytes());
        b[4..].copy_from_slice(&self.data[1].to_le_bytes());
        b
    }

    /// A CONTROL/TIME event's upper clock half.
    pub fn time_msb(&self) -> Option<u32> {
        (self.part() == Part::Simple && self.class() == CONTROL && self.event() == CONTROL_TIME)
            .then_some(self.data[0])
    }
}

/// The design's six classes, by number.
pub const CLASSES: [&str; 6] = [
    "EMPTY",
    "CONTROL",
    "KER_CALL",
    "INT",
    "PROC_THREAD",
    "CONTAINER",
];
const CONTROL: u32 = 1;
const KER_CALL: u32 = 2;
const INT: u32 = 3;
const PROC_THREAD: u32 = 4;
const CONTAINER: u32 = 5;
const CONTROL_TIME: u32 = 1;
/// KER_CALL and INT: the exit bit of the event type.
const EXIT: u32 = 0x200;
const KER_CALLS: [(u32, &str); 10] = [
    (1, "TRACE_EVENT"),
    (2, "MSG_SENDV"),
    (3, "MSG_RECEIVEV"),
    (4, "MSG_REPLYV"),
    (5, "THREAD_CREATE"),
    (6, "THREAD_DESTROY"),
    (7, "TIMER_CREATE"),
    (8, "TIMER_SETTIME"),
    (9, "SCHED_YIELD"),
    (10, "INTERRUPT_ATTACH"),
];

/// How a 32-bit word of the payload is shown.
#[derive(Clone, Copy)]
enum Kind {
    Unsigned,
    Signed,
    Hex,
}

/// What follows the words of a payload.
#[derive(Clone, Copy)]
enum Tail {
    None,
    /// A NUL-terminated name.
    Text(&'static str),
    /// As many bytes as the first word says.
    Counted(&'static str),
}

/// A known event: its name and payload layout.
struct Layout {
    name: Cow<'static, str>,
    /// Fields the event type itself holds (an interrupt's vector).
    from_code: Option<(&'static str, u32)>,
    words: &'static [(&'static str, Kind)],
    tail: Tail,
}

const PID_TID: &[(&str, Kind)] = &[("pid", Kind::Unsigned), ("tid", Kind::Unsigned)];

fn layout(class: u32, event: u32) -> Option<Layout> {
    let fixed = |name: &'static str, words, tail| {
        Some(Layout {
            name: Cow::Borrowed(name),
            from_code: None,
            words,
            tail,
        })
    };
    match (class, event) {
        (CONTROL, CONTROL_TIME) => fixed(
            "CONTROL/TIME",
            &[("msb", Kind::Hex), ("lsb", Kind::Hex)],
            Tail::None,
        ),
        (KER_CALL, e) => {
            let (_, call) = KER_CALLS.iter().find(|(n, _)| *n == e & !EXIT)?;
            let (dir, words): (&str, &'static [(&str, Kind)]) = if e & EXIT == 0 {
                ("ENTER", &[("arg0", Kind::Hex), ("arg1", Kind::Hex)])
            } else {
                ("EXIT", &[("ret", Kind::Signed), ("status", Kind::Hex)])
            };
            Some(Layout {
                name: Cow::Owned(format!("KER_CALL/{call}_{dir}")),
                from_code: None,
                words,
                tail: Tail::None,
            })
        }
        (INT, e) => {
            let (name, words): (&'static str, &'static [(&str, Kind)]) = if e & EXIT == 0 {
                ("INT/ENTER", &[("ip", Kind::Hex), ("sp", Kind::Hex)])
            } else {
                (
                    "INT/EXIT",
                    &[("handlers", Kind::Unsigned), ("status", Kind::Hex)],
                )
            };
            Some(Layout {
                name: Cow::Borrowed(name),
                from_code: Some(("vector", e & !EXIT)),
                words,
                tail: Tail::None,
            })
        }
        (PROC_THREAD, 1) => fixed(
            "PROC_THREAD/PROCCREATE",
            &[("ppid", Kind::Unsigned), ("pid", Kind::Unsigned)],
            Tail::None,
        ),
        (PROC_THREAD, 2) => fixed(
            "PROC_THREAD/PROCDESTROY",
            &[("pid", Kind::Unsigned), ("status", Kind::Hex)],
            Tail::None,
        ),
        (PROC_THREAD, 3) => fixed("PROC_THREAD/THCREATE", PID_TID, Tail::None),
        (PROC_THREAD, 4) => fixed("PROC_THREAD/THDESTROY", PID_TID, Tail::None),
        (PROC_THREAD, 5) => fixed("PROC_THREAD/THRUNNING", PID_TID, Tail::None),
        (PROC_THREAD, 6) => fixed("PROC_THREAD/THREADY", PID_TID, Tail::None),
        (PROC_THREAD, 7) => fixed(
            "PROC_THREAD/PROCCREATE_NAME",
            &[("ppid", Kind::Unsigned), ("pid", Kind::Unsigned)],
            Tail::Text("name"),
        ),
        (CONTAINER, 1) => fixed("CONTAINER/BUFFER", &[], Tail::Counted("data")),
        _ => None,
    }
}

fn class_name(class: u32) -> Option<&'static str> {
    CLASSES.get(class as usize).copied()
}

/// The number of the class named `name` (`KER_CALL`), for schemata that name it.
pub fn class_number(name: &str) -> Option<u32> {
    CLASSES.iter().position(|&c| c == name).map(|n| n as u32)
}

/// Most parts of one combine event (the stream gives up on one with more).
pub const MAX_PARTS: usize = 256;
/// Most payload words a combine event can have: every part's two.
pub const MAX_WORDS: usize = MAX_PARTS * 2;

/// The name [`fields`] gives the `index`th raw field of events of this code: a layout's own
/// fields in order, `d0`, `d1`, ... (the payload's 32-bit words) for a code without one. When
/// there is none, the names there are, for the error.
pub fn raw_field(class: u32, event: u32, index: usize) -> Result<Cow<'static, str>, String> {
    let Some(l) = layout(class, event) else {
        return if index < MAX_WORDS {
            Ok(Cow::Owned(format!("d{index}")))
        } else {
            Err(format!("d0 to d{}", MAX_WORDS - 1))
        };
    };
    let mut names: Vec<&'static str> = l.from_code.map(|(name, _)| name).into_iter().collect();
    names.extend(l.words.iter().map(|&(name, _)| name));
    match l.tail {
        Tail::None => {}
        Tail::Text(name) => names.push(name),
        Tail::Counted(name) => names.extend(["len", name]),
    }
    names
        .get(index)
        .map(|&name| Cow::Borrowed(name))
        .ok_or_else(|| names.join(", "))
}

/// The event's name: `CLASS/EVENT`, `CLASS/unknown` or `unknown`.
pub fn name(class: u32, event: u32) -> Name<'static> {
    match (layout(class, event), class_name(class)) {
        (Some(l), _) => l.name,
        (None, Some(c)) => Cow::Owned(format!("{c}/unknown")),
        (None, None) => Cow::Borrowed("unknown"),
    }
}

/// The code of an event kcrash has no name for, as fields marked unknown.
fn unknown_code(class: u32, event: u32, out: &mut Vec<Field<'static>>) {
    out.push(field(
        "class",
        Value::Enum {
            value: class.into(),
            name: class_name(class).map(Cow::Borrowed),
        },
    ));
    out.push(field(
        "event",
        Value::Enum {
            value: event.into(),
            name: None,
        },
    ));
}

fn field(name: &'static str, value: Value<'static>) -> Field<'static> {
    Field {
        name: Cow::Borrowed(name),
        value,
    }
}

/// A whole event's fields from its payload (one part's data words, or every part's), and what
/// is wrong with the payload.
pub fn fields(
    class: u32,
    event: u32,
    payload: &[u8],
    damage: &mut Vec<Damage>,
) -> Vec<Field<'static>> {
    let mut out = Vec::new();
    let Some(l) = layout(class, event) else {
        unknown_code(class, event, &mut out);
        // A payload is whole parts of two words each: no bytes are left over.
        for (i, w) in payload.chunks_exact(4).enumerate() {
            let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            out.push(Field {
                name: Cow::Owned(format!("d{i}")),
                value: Value::Hex(w.into()),
            });
        }
        return out;
    };
    if let Some((name, value)) = l.from_code {
        out.push(field(name, Value::Unsigned(value.into())));
    }
    let mut rest = payload;
    for &(name, kind) in l.words {
        let Some((word, tail)) = rest.split_first_chunk::<4>() else {
            damage.push(Damage::Inconsistent(format!(
                "its payload of {} bytes is too short for {name}",
                payload.len()
            )));
            return out;
        };
        let w = u32::from_le_bytes(*word);
        out.push(field(
            name,
            match kind {
                Kind::Unsigned => Value::Unsigned(w.into()),
                Kind::Signed => Value::Signed((w as i32).into()),
                Kind::Hex => Value::Hex(w.into()),
            },
        ));
        rest = tail;
    }
    match l.tail {
        Tail::None => {}
        Tail::Text(name) => {
            let text = match rest.iter().position(|&b| b == 0) {
                Some(nul) => &rest[..nul],
                None => {
                    damage.push(Damage::Inconsistent(format!(
                        "its {name} has no terminating NUL in the payload"
                    )));
                    rest
                }
            };
            out.push(field(name, Value::Text(text.to_vec())));
        }
        Tail::Counted(name) => {
            let Some((len, bytes)) = rest.split_first_chunk::<4>() else {
                damage.push(Damage::Inconsistent(format!(
                    "its payload of {} bytes has no length",
                    payload.len()
                )));
                return out;
            };
            let len = u32::from_le_bytes(*len);
            out.push(field("len", Value::Unsigned(len.into())));
            let held = bytes.len().min(len as usize);
            if held < len as usize {
                damage.push(Damage::Inconsistent(format!(
                    "len is {len} but its parts hold {} bytes",
                    bytes.len()
                )));
            }
            out.push(field(name, Value::Bytes(bytes[..held].to_vec())));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bits_follow_figure_4() {
        // begin, cpu 5, flags 0xa5, reserved, class 4, event 7
        let raw = Raw {
            header: (1 << 30) | (5 << 24) | (0xa5 << 16) | 0x8000 | (4 << 10) | 7,
            timeoff: 9,
            data: [1, 2],
        };
        assert_eq!(raw.part(), Part::Begin);
        assert_eq!(
            (
                raw.cpu(),
                raw.flags(),
                raw.reserved(),
                raw.class(),
                raw.event()
            ),
            (5, 0xa5, true, 4, 7)
        );
        assert_eq!(raw.key(), (5, 4, 7, 9));
    }

    #[test]
    fn names_and_unknown_codes() {
        assert_eq!(name(2, 2), "KER_CALL/MSG_SENDV_ENTER");
        assert_eq!(name(2, 0x202), "KER_CALL/MSG_SENDV_EXIT");
        assert_eq!(name(2, 99), "KER_CALL/unknown");
        assert_eq!(name(3, 0x220), "INT/EXIT");
        assert_eq!(name(17, 1), "unknown");
        let mut damage = Vec::new();
        let f = fields(17, 3, &[1, 0, 0, 0, 2, 0, 0, 0], &mut damage);
        assert_eq!(
            f[0].value,
            Value::Enum {
                value: 17,
                name: None
            }
        );
        assert_eq!(f[2].value, Value::Hex(1));
        assert!(damage.is_empty());
    }

    #[test]
    fn an_unknown_codes_payload_is_its_words() {
        let mut damage = Vec::new();
        let f = fields(
            21,
            1,
            &[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0],
            &mut damage,
        );
        let names: Vec<&str> = f.iter().map(|f| f.name.as_ref()).collect();
        assert_eq!(names, ["class", "event", "d0", "d1", "d2", "d3"]);
        assert_eq!(f[5].value, Value::Hex(4));
    }

    #[test]
    fn raw_fields_are_named_as_fields_names_them() {
        assert_eq!(raw_field(3, 0x220, 0).unwrap(), "vector");
        assert_eq!(raw_field(3, 0x220, 2).unwrap(), "status");
        assert_eq!(raw_field(5, 1, 1).unwrap(), "data");
        assert_eq!(raw_field(4, 7, 3).unwrap_err(), "ppid, pid, name");
        assert_eq!(raw_field(2, 77, 5).unwrap(), "d5");
        assert!(raw_field(21, 1, MAX_WORDS).is_err());
        assert_eq!(class_number("PROC_THREAD"), Some(4));
        assert_eq!(class_number("proc_thread"), None);
    }

    #[test]
    fn payload_layouts_and_their_damage() {
        let mut damage = Vec::new();
        let mut p = vec![1, 0, 0, 0, 7, 0, 0, 0];
        p.extend_from_slice(b"init\0\0\0\0");
        let f = fields(4, 7, &p, &mut damage);
        assert_eq!(f[2].value, Value::Text(b"init".to_vec()));
        assert!(damage.is_empty());
        let f = fields(4, 7, &p[..12], &mut damage);
        assert_eq!(f[2].value, Value::Text(b"init".to_vec()));
        assert_eq!(damage.len(), 1);
        damage.clear();
        let f = fields(5, 1, &[9, 0, 0, 0, 1, 2, 3, 4], &mut damage);
        assert_eq!(f[1].value, Value::Bytes(vec![1, 2, 3, 4]));
        assert!(matches!(&damage[0], Damage::Inconsistent(w) if w.contains("len is 9")));
        damage.clear();
        let f = fields(3, 0x21, &[1, 0, 0, 0, 2, 0, 0, 0], &mut damage);
        assert_eq!(f[0].value, Value::Unsigned(0x21));
        let f = fields(2, 0x202, &[0xfe, 0xff, 0xff, 0xff, 0, 0, 0, 0], &mut damage);
        assert_eq!(f[0].value, Value::Signed(-2));
    }
}
