//! kcrash's decoder of DProbes trace buffers ("A Universal Dynamic Trace for Linux", Moore,
//! 2001): each processor's buffer of records, each record a flag word, the header items the
//! flags select, and the data its probe handler logged, formatted by the template of its major
//! and minor code. A read the handler could not make is logged as a fault token, and shown as
//! unreadable with the address (or selector) it names. Layout and checks: README.md.

pub mod import;
mod record;
mod ring;
pub mod template;

use std::any::Any;

use kcrash_plugin::{
    Clock, Context, Decoder, Event, Found, Log, Memory, Missing, Order, RingInfo, Unreadable,
};

use ring::Ring;
use template::Templates;

/// The trace daemon's state.
pub const SYMBOL: &str = "dprobes_trace";
/// `dprobes_trace.magic`.
const MAGIC: u64 = u64::from_le_bytes(*b"DPTRACE1");
/// Bytes of `dprobes_trace` before its buffers.
const TRACE_HEAD: u64 = 40;
/// Bytes of one buffer's control.
const BUFFER_BYTES: u64 = 64;
/// Most processors believed: `max_cpus` comes from the dump.
const MAX_CPUS: u32 = 1024;
/// Most template text read.
const MAX_TEMPLATES: u64 = 1 << 20;

/// The decoder of DProbes trace buffers.
pub struct DProbes;

/// The decoder kcrash registers.
pub static DECODER: DProbes = DProbes;

impl Decoder for DProbes {
    fn kind(&self) -> &'static str {
        "DProbes"
    }

    fn command(&self) -> &'static str {
        "dplog"
    }

    fn summary(&self) -> &'static str {
        "DProbes trace buffers: per-processor records, headers by flag word, fault tokens"
    }

    fn schemata(&self) -> &'static [(&'static str, &'static str)] {
        &[(
            "plugins/dprobes/schemas/test-kernels.dpt",
            include_str!("../schemas/test-kernels.dpt"),
        )]
    }

    fn find<'d>(&self, cx: &dyn Context<'d>) -> Result<Found<'d>, Missing> {
        let sym = cx
            .symbol(SYMBOL)
            .ok_or_else(|| Missing::Absent(format!("no symbol {SYMBOL}")))?;
        let log = DpLog::read(cx.memory(), sym.address)?;
        Ok(Found {
            log: Box::new(log),
            translations: None,
        })
    }
}

/// The trace found in a dump.
pub struct DpLog {
    rings: Vec<RingInfo>,
    walks: Vec<Option<Ring>>,
    clock: Clock,
    notes: Vec<String>,
    templates: Templates,
}

impl DpLog {
    /// Reads and checks `dprobes_trace` at `addr`, its buffers' controls and its templates.
    pub fn read(mem: &dyn Memory, addr: u64) -> Result<DpLog, Missing> {
        let mut head = [0u8; TRACE_HEAD as usize];
        mem.read(addr, &mut head)
            .map_err(|e| Missing::Refused(format!("{SYMBOL} at {addr:#x} unreadable: {e}")))?;
        let word = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().unwrap_or_default());
        let half = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().unwrap_or_default());
        if word(0) != MAGIC {
            return Err(Missing::Refused(format!(
                "{SYMBOL} at {addr:#x}: magic {:#018x} is not \"DPTRACE1\"",
                word(0)
            )));
        }
        let (max_cpus, cpus) = (half(8), half(12));
        if max_cpus > MAX_CPUS || cpus > max_cpus {
            return Err(Missing::Refused(format!(
                "{SYMBOL} at {addr:#x}: {cpus} processors in use of {max_cpus}, more than \
                 the {} believed",
                max_cpus.min(MAX_CPUS)
            )));
        }
        let mut notes = vec![format!(
            "{SYMBOL} at {addr:#x}: {cpus} processors' buffers in use of {max_cpus}"
        )];
        let clock = match word(16) {
            0 => Clock::Unknown(format!("{SYMBOL}.tsc_hz is 0")),
            hz => Clock::Hz(hz),
        };
        let templates = read_templates(mem, word(24), word(32), &mut notes);
        let mut rings = Vec::new();
        let mut walks = Vec::new();
        // The buffers accepted so far: no two may share bytes, or one buffer's records would be
        // indexed once per control naming it.
        let mut spans: Vec<(u64, u64, u64)> = Vec::new();
        for cpu in 0..u64::from(cpus) {
            let at = addr.wrapping_add(TRACE_HEAD + cpu * BUFFER_BYTES);
            let (mut info, mut walk) = Ring::check(mem, at, cpu as u32);
            if at < addr {
                ring::refuse(
                    &mut info,
                    format!("the control of cpu{cpu} past {addr:#x} runs past the address space"),
                );
                walk = None;
            }
            if let Some((data, size)) = walk.as_ref().map(Ring::span) {
                let end = data + size;
                if let Some((other, _, by)) =
                    spans.iter().find(|&&(o, s, _)| data < o + s && o < end)
                {
                    ring::refuse(
                        &mut info,
                        format!("buffer data at {data:#x} overlaps cpu{by}'s at {other:#x}"),
                    );
                    walk = None;
                } else {
                    spans.push((data, size, cpu));
                }
            }
            if let Some(why) = walk.as_ref().and_then(|w| w.repair.clone()) {
                notes.push(format!("{}: {why}", info.name));
            }
            rings.push(info);
            walks.push(walk);
        }
        Ok(DpLog {
            rings,
            walks,
            clock,
            notes,
            templates,
        })
    }
}

/// The template directory at `addr`, `len` bytes; none (with a note) when it cannot be read.
fn read_templates(mem: &dyn Memory, addr: u64, len: u64, notes: &mut Vec<String>) -> Templates {
    if len > MAX_TEMPLATES {
        notes.push(format!(
            "templates at {addr:#x}: {len} bytes, more than the {MAX_TEMPLATES} believed: \
             records are shown unformatted"
        ));
        return Templates::default();
    }
    let mut text = vec![0u8; len as usize];
    if let Err(Unreadable { addr: at, reason }) = mem.read(addr, &mut text) {
        notes.push(format!(
            "templates at {addr:#x} unreadable at {at:#x}: {reason}: records are shown unformatted"
        ));
        return Templates::default();
    }
    let (templates, error) = Templates::parse(&text);
    notes.push(format!(
        "templates at {addr:#x}: {len} bytes, {} templates",
        templates.0.len()
    ));
    if let Some(error) = error {
        notes.push(error.to_string());
    }
    templates
}

impl Log for DpLog {
    fn kind(&self) -> &'static str {
        "DProbes"
    }

    fn rings(&self) -> &[RingInfo] {
        &self.rings
    }

    fn clock(&self) -> &Clock {
        &self.clock
    }

    fn notes(&self) -> &[String] {
        &self.notes
    }

    fn events<'a>(
        &'a self,
        mem: &'a (dyn Memory + Sync),
        ring: usize,
        order: Order,
    ) -> Box<dyn Iterator<Item = Event<'a>> + Send + 'a> {
        match self.walks.get(ring) {
            Some(Some(walk)) => walk.events(mem, ring, order, &self.templates),
            _ => Box::new(std::iter::empty()),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcrash_plugin::Runs;

    const TRACE: u64 = 0x1000;

    fn control(cpu: u32, data: u64) -> Vec<u8> {
        let mut c = Vec::new();
        // Event id 0x4450, 200 bytes, head = tail = 0: empty.
        for w in [(0x4450u64 << 32) | u64::from(cpu), data, 200, 0, 0, 0, 0, 0] {
            c.extend_from_slice(&w.to_le_bytes());
        }
        c
    }

    #[test]
    fn overlapping_buffers_are_refused() {
        let mut t = MAGIC.to_le_bytes().to_vec();
        t.extend_from_slice(&4u32.to_le_bytes());
        t.extend_from_slice(&3u32.to_le_bytes());
        t.extend_from_slice(&1_000_000u64.to_le_bytes());
        t.extend_from_slice(&0x9000u64.to_le_bytes());
        t.extend_from_slice(&0u64.to_le_bytes());
        // cpu1's buffer starts inside cpu0's; cpu2's follows it.
        for (cpu, data) in [(0, 0x2000), (1, 0x2040), (2, 0x2000 + 200)] {
            t.extend_from_slice(&control(cpu, data));
        }
        let mem = Runs(vec![
            (TRACE, t),
            (0x2000, vec![0; 0x1000]),
            (0x9000, vec![]),
        ]);
        let log = DpLog::read(&mem, TRACE).unwrap_or_else(|_| panic!("refused"));
        let rings = log.rings();
        assert_eq!(rings[0].refused, None);
        let why = rings[1].refused.as_deref().unwrap();
        assert!(why.contains("0x2040") && why.contains("0x2000"), "{why}");
        assert!(rings[1].capacity.is_err() && rings[1].written.is_err());
        assert_eq!(rings[2].refused, None);
        assert!(log.walks[1].is_none());
    }
}
