//! Reading an event's raw fields through its schema: named, typed fields, the display line,
//! and a mark for every value the schema's type does not fit.

use std::borrow::Cow;

use kcrash_plugin::{Clock, Field, Memory, Value};

use crate::display::Part;
use crate::{EventSchema, Type, Unit};

/// What a schema reads from the crashed system besides the event: symbols and strings.
pub trait Resolve {
    /// The symbol holding `addr` and the offset into it.
    fn symbol_at(&self, addr: u64) -> Option<(String, u64)>;
    fn memory(&self) -> &dyn Memory;
}

/// An event read through its schema.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied<'s> {
    pub schema: &'s EventSchema,
    pub fields: Vec<Field<'s>>,
    /// The display template filled in, when the schema has one.
    pub display: Option<Vec<u8>>,
    /// What did not fit: a value an enum has no name for, a string that cannot be read, a raw
    /// field the event lacks. Printed with the event, never hidden.
    pub marks: Vec<String>,
}

impl EventSchema {
    /// Reads the event whose raw fields are `raw` (by the decoder's names) through this schema.
    pub fn apply<'s>(&'s self, raw: &[Field<'_>], clock: &Clock, cx: &dyn Resolve) -> Applied<'s> {
        let mut marks = Vec::new();
        let mut fields = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            let value = match raw.iter().find(|r| r.name == f.from.as_str()) {
                Some(r) => convert(&r.value, &f.ty, clock, cx),
                None => Err(format!("the event has no raw field {:?}", f.from)),
            };
            match value {
                Ok(v) => {
                    if let Some(why) = misfit(&v) {
                        marks.push(format!("{}: {why}", f.name));
                    }
                    fields.push(Field {
                        name: Cow::Borrowed(f.name.as_str()),
                        value: v,
                    });
                }
                Err(why) => marks.push(format!("{}: {why}", f.name)),
            }
        }
        let display = self.display.as_ref().map(|d| {
            let mut out = Vec::new();
            for part in &d.0 {
                match part {
                    Part::Text(t) => out.extend_from_slice(t.as_bytes()),
                    Part::Field(i) => {
                        let name = self.fields.get(*i).map(|f| f.name.as_str());
                        match fields.iter().find(|f| Some(f.name.as_ref()) == name) {
                            // The field says why; the line only where.
                            Some(Field {
                                value: Value::Unreadable { addr, .. },
                                ..
                            }) => out
                                .extend_from_slice(format!("<unreadable at {addr:#x}>").as_bytes()),
                            // Text as a format's %s puts it: bare (escaped when printed).
                            Some(Field {
                                value: Value::Text(t),
                                ..
                            }) => out.extend_from_slice(t),
                            Some(f) => f.value.write(&mut out),
                            None => out.extend_from_slice(b"<unknown>"),
                        }
                    }
                }
            }
            out
        });
        Applied {
            schema: self,
            fields,
            display,
            marks,
        }
    }
}

/// Why a converted value does not fit its type, when it does not.
fn misfit(v: &Value<'_>) -> Option<String> {
    match v {
        Value::Enum { value, name: None } => Some(format!("{value} has no name in the enum")),
        // The field itself says why.
        Value::Unreadable { addr, .. } => Some(format!("unreadable at {addr:#x}")),
        _ => None,
    }
}

/// The raw value as an integer, or why it is not one.
fn integer(v: &Value<'_>) -> Result<u64, String> {
    match v {
        Value::Unsigned(n) | Value::Hex(n) => Ok(*n),
        Value::Signed(n) => Ok(*n as u64),
        Value::Enum { value, .. } | Value::Flags { value, .. } => Ok(*value),
        Value::Pointer { addr, .. } => Ok(*addr),
        Value::Duration { raw, .. } => Ok(*raw),
        Value::Time { ticks, .. } => Ok(*ticks),
        Value::Text(_) | Value::Bytes(_) => Err("the raw field is not a number".into()),
        Value::Unreadable { .. } => Err("the raw field is unreadable".into()),
    }
}

fn low_bits(n: u64, bits: u8) -> u64 {
    match bits {
        64.. => n,
        b => n & ((1u64 << b) - 1),
    }
}

fn sign_extend(n: u64, bits: u8) -> i64 {
    match bits {
        64.. => n as i64,
        b => ((n << (64 - b)) as i64) >> (64 - b),
    }
}

/// Converts one raw value, or says why it cannot be. An unreadable raw field stays unreadable
/// whatever the type.
fn convert<'s>(
    raw: &Value<'_>,
    ty: &'s Type,
    clock: &Clock,
    cx: &dyn Resolve,
) -> Result<Value<'s>, String> {
    if let Value::Unreadable { addr, reason } = raw {
        return Ok(Value::Unreadable {
            addr: *addr,
            reason: reason.clone(),
        });
    }
    if let (Type::String { max }, Value::Text(t)) = (ty, raw) {
        // Text the decoder already read is held to the schema's length as read strings are.
        return Ok(Value::Text(t[..t.len().min(*max as usize)].to_vec()));
    }
    let n = integer(raw)?;
    Ok(match ty {
        Type::Unsigned { bits } => Value::Unsigned(low_bits(n, *bits)),
        Type::Signed { bits } => Value::Signed(sign_extend(n, *bits)),
        Type::Hex { bits } => Value::Hex(low_bits(n, *bits)),
        Type::Enum(e) => {
            let v = n as i64;
            Value::Enum {
                value: n,
                name: e.name_of(v).map(Cow::Borrowed),
            }
        }
        Type::Flags(f) => {
            let mut rest = n;
            let mut names = Vec::new();
            for (bit, name) in &f.bits {
                if n & (1 << bit) != 0 {
                    names.push(Cow::Borrowed(name.as_str()));
                    rest &= !(1 << bit);
                }
            }
            Value::Flags {
                value: n,
                names,
                rest,
            }
        }
        Type::Pointer => Value::Pointer {
            addr: n,
            symbol: cx.symbol_at(n),
        },
        Type::String { max } => {
            let mut text = Vec::new();
            match cx.memory().read_cstring(n, *max as usize, &mut text) {
                Ok(()) => Value::Text(text),
                Err(e) => Value::Unreadable {
                    addr: e.addr,
                    reason: e.reason,
                },
            }
        }
        Type::Duration(unit) => {
            let per_second = match unit {
                Unit::Nanoseconds => Some(1_000_000_000),
                Unit::Microseconds => Some(1_000_000),
                Unit::Milliseconds => Some(1_000),
                Unit::Seconds => Some(1),
                Unit::Ticks => clock.hz(),
            };
            Value::Duration {
                raw: n,
                nanos: per_second.and_then(|hz| Clock::Hz(hz).nanos(n)),
            }
        }
        Type::Clock => Value::Time {
            ticks: n,
            nanos: clock.nanos(n),
        },
    })
}
