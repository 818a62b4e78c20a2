//! The timeline as an SVG picture, drawn with plotters: a lane per ring (or processor, or field
//! value), a tick wherever events are, darker where many share a pixel, the panic marked (or the
//! last event when no log says the kernel panicked), times relative to it.
//!
//! The picture needs the time range before it can place anything, and an export never holds the
//! log in memory: events are counted into a fixed number of bins per lane, starting at the first
//! event's time one nanosecond wide, and when an event falls beyond the last bin every bin
//! doubles its width (neighbours added up). The merged stream comes in time order, so the range
//! only ever grows away from its first event.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, Write};
use std::sync::Mutex;

use anyhow::{anyhow, Result};
use kcrash_plugin::{Event, Order};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Lane, LaneBy, LaneKind, Output, RingView, Source};
use crate::linux::facts::{is_oops, is_panic};
use crate::timeline::{self, Emit, MakeEmit, Plan};

/// Bins per lane: about one per pixel of the plot.
const BINS: usize = 1200;
/// Lanes drawn at most; the events of the rest share one last lane.
const MAX_LANES: usize = 400;
const WIDTH: u32 = 1400;
const LANE_PX: u32 = 22;
/// What each ring's thread hands the merge per event: lane (log, kind, value), time, crash mark.
const RECORD: usize = 4 + 1 + 8 + 8 + 1;

/// Draws `plan`'s events into `out`; returns how many it drew.
pub fn write<'a>(src: &Source<'a, '_>, out: &mut Output) -> Result<u64> {
    let (plan, lanes) = (src.plan, src.lanes);
    let names = Mutex::new(HashMap::new());
    let make: &MakeEmit<'a, '_> = &|log, ring, _| {
        Box::new(RingTicks {
            view: RingView::new(plan, log, ring),
            plan,
            lanes,
            names: &names,
            seen: HashSet::new(),
        })
    };
    let mut density = Density::new(plan.order);
    let shown = timeline::stream(plan, src.mem, make, &mut density)?;
    let names = names.into_inner().unwrap_or_else(|e| e.into_inner());
    let logs: Vec<&str> = plan.logs.iter().map(|l| l.kind()).collect();
    let title = format!(
        "{}: {shown} events of {}",
        src.identity.dump_name,
        logs.join(", ")
    );
    let range = |t: Option<u64>| t.map(|t| plan.logs.first().map_or(t, |l| plan.nanos(*l, t)));
    let window = (range(plan.filter.since), range(plan.filter.until));
    let svg = draw(&density, &names, &title, window, plan.in_nanos())?;
    out.write_all(svg.as_bytes())?;
    Ok(shown)
}

/// One ring's events as records for the merge to count.
struct RingTicks<'r> {
    view: RingView<'r>,
    plan: &'r Plan<'r>,
    lanes: &'r LaneBy,
    /// Every lane's name, given by the ring that first sees it.
    names: &'r Mutex<HashMap<Lane, String>>,
    seen: HashSet<Lane>,
}

impl Emit for RingTicks<'_> {
    fn emit(&mut self, event: &Event<'_>, time: u64, out: &mut Vec<u8>) -> bool {
        if self.view.read(self.plan, event).is_none() {
            return false;
        }
        let lane = self.lanes.lane_of(self.view.log_index, event);
        if self.seen.insert(lane) {
            let mut name = self.lanes.name(self.view.log, event, lane);
            // With several logs the lanes are one list: each says whose it is, unless its name
            // already does (printk's one ring).
            let kind = self.view.log.kind();
            if self.plan.logs.len() > 1 && name != kind {
                name = format!("{kind} {name}");
            }
            let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
            names.entry(lane).or_insert(name);
        }
        let first = event
            .message
            .as_deref()
            .and_then(|m| m.split(|&b| b == b'\n').next());
        let crash = first.map_or(0, |l| {
            let l = String::from_utf8_lossy(l);
            if is_panic(&l) {
                2
            } else {
                u8::from(is_oops(&l))
            }
        });
        out.extend_from_slice(&(lane.log as u32).to_le_bytes());
        out.push(lane.kind as u8);
        out.extend_from_slice(&lane.value.to_le_bytes());
        out.extend_from_slice(&self.plan.nanos(self.view.log, time).to_le_bytes());
        out.push(crash);
        true
    }
}

/// Events counted by lane and time, the range growing as they come (see the module's comment).
struct Density {
    descending: bool,
    /// The first event's time: bin 0 starts there.
    origin: Option<u64>,
    /// Nanoseconds per bin, a power of two.
    width: u64,
    lanes: BTreeMap<Lane, Vec<u32>>,
    lo: u64,
    hi: u64,
    /// The latest panic message's time, else the latest Oops-like report's, with which it is.
    crash: Option<(u8, u64)>,
    /// A record split between two writes.
    partial: Vec<u8>,
}

impl Density {
    fn new(order: Order) -> Density {
        Density {
            descending: order == Order::NewestFirst,
            origin: None,
            width: 1,
            lanes: BTreeMap::new(),
            lo: u64::MAX,
            hi: 0,
            crash: None,
            partial: Vec::new(),
        }
    }

    fn count(&mut self, lane: Lane, t: u64, crash: u8) {
        let origin = *self.origin.get_or_insert(t);
        let offset = if self.descending {
            origin.saturating_sub(t)
        } else {
            t.saturating_sub(origin)
        };
        while offset / self.width >= BINS as u64 {
            self.width = self.width.saturating_mul(2);
            for bins in self.lanes.values_mut() {
                for i in 0..BINS / 2 {
                    bins[i] = bins[2 * i].saturating_add(bins[2 * i + 1]);
                }
                bins[BINS / 2..].fill(0);
            }
        }
        let bins = self.lanes.entry(lane).or_insert_with(|| vec![0; BINS]);
        let i = (offset / self.width) as usize;
        bins[i] = bins[i].saturating_add(1);
        self.lo = self.lo.min(t);
        self.hi = self.hi.max(t);
        if crash > 0 && self.crash.is_none_or(|(k, at)| (crash, t) > (k, at)) {
            self.crash = Some((crash, t));
        }
    }

    /// Where bin `i` starts and ends, in nanoseconds.
    fn span(&self, i: usize) -> (u64, u64) {
        let origin = self.origin.unwrap_or(0);
        let (a, b) = (i as u64 * self.width, (i as u64 + 1) * self.width);
        if self.descending {
            (origin.saturating_sub(b), origin.saturating_sub(a))
        } else {
            (origin.saturating_add(a), origin.saturating_add(b))
        }
    }

    fn take(&mut self, rec: &[u8]) {
        let word = |at: usize| u64::from_le_bytes(rec[at..at + 8].try_into().unwrap_or_default());
        let log = u32::from_le_bytes(rec[0..4].try_into().unwrap_or_default()) as usize;
        let kind = match rec[4] {
            0 => LaneKind::Ring,
            1 => LaneKind::Cpu,
            2 => LaneKind::Unknown,
            _ => LaneKind::Field,
        };
        let lane = Lane {
            log,
            kind,
            value: word(5),
        };
        self.count(lane, word(13), rec[21]);
    }
}

impl Write for Density {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        if !self.partial.is_empty() {
            let need = (RECORD - self.partial.len()).min(rest.len());
            self.partial.extend_from_slice(&rest[..need]);
            rest = &rest[need..];
            if self.partial.len() < RECORD {
                return Ok(buf.len());
            }
            let rec = std::mem::take(&mut self.partial);
            self.take(&rec);
        }
        let mut chunks = rest.chunks_exact(RECORD);
        for rec in chunks.by_ref() {
            self.take(rec);
        }
        self.partial.extend_from_slice(chunks.remainder());
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The unit an axis of `span` nanoseconds reads best in.
fn unit(span: u64) -> (f64, &'static str) {
    match span {
        0..2_000 => (1.0, "ns"),
        2_000..2_000_000 => (1e3, "us"),
        2_000_000..2_000_000_000 => (1e6, "ms"),
        _ => (1e9, "s"),
    }
}

/// The picture: lanes top to bottom in log and lane order, bins as ticks.
fn draw(
    d: &Density,
    names: &HashMap<Lane, String>,
    title: &str,
    window: (Option<u64>, Option<u64>),
    nanos: bool,
) -> Result<String> {
    // The lanes drawn: the first MAX_LANES - 1 as they are, the rest added up in one.
    let mut rows: Vec<(String, Vec<u32>)> = Vec::new();
    for (i, (lane, bins)) in d.lanes.iter().enumerate() {
        if i + 1 < MAX_LANES || d.lanes.len() <= MAX_LANES {
            rows.push((names.get(lane).cloned().unwrap_or_default(), bins.clone()));
        } else if let Some((_, last)) = rows.last_mut().filter(|_| i + 1 > MAX_LANES) {
            last.iter_mut()
                .zip(bins)
                .for_each(|(a, b)| *a = a.saturating_add(*b));
        } else {
            let more = d.lanes.len() - i;
            rows.push((format!("{more} more lanes"), bins.clone()));
        }
    }
    let lo = window.0.unwrap_or(d.lo).min(d.hi);
    let hi = window.1.unwrap_or(d.hi).max(lo + 1);
    let (marker, marker_name) = match d.crash {
        Some((2, t)) => (t, "panic"),
        Some((_, t)) => (t, "Oops"),
        None => (d.hi, "last event"),
    };
    let (scale, unit_name) = unit(hi - lo);
    let x = |t: u64| (t as f64 - marker as f64) / scale;
    let (x0, x1) = (x(lo), x(hi));
    let n = rows.len().max(1);
    let height = 110 + LANE_PX * n as u32;
    let label_px = rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 40) as u32
        * 7
        + 16;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(label_px)
            .build_cartesian_2d(x0..x1, 0f64..n as f64)
            .map_err(plot)?;
        let time = if nanos {
            format!("time relative to the {marker_name} ({unit_name})")
        } else {
            format!("ticks relative to the {marker_name} (clock rate unknown; x{scale})")
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .y_labels(0)
            .x_desc(time)
            .draw()
            .map_err(plot)?;
        let px = |t: f64, lane: f64| chart.backend_coord(&(t, lane));
        let max = rows
            .iter()
            .flat_map(|(_, b)| b)
            .copied()
            .max()
            .unwrap_or(1)
            .max(1);
        let ink = RGBColor(31, 90, 160);
        for (row, (name, bins)) in rows.iter().enumerate() {
            // Lanes from the top: row 0 is the highest.
            let y = (n - row) as f64 - 0.5;
            let (_, top) = px(x0, y + 0.4);
            let (left, bottom) = px(x0, y - 0.4);
            let (right, _) = px(x1, y);
            if row % 2 == 0 {
                root.draw(&Rectangle::new(
                    [(left, top - 2), (right, bottom + 2)],
                    RGBColor(244, 246, 250).filled(),
                ))
                .map_err(plot)?;
            }
            let label = TextStyle::from(("sans-serif", 13).into_font())
                .pos(Pos::new(HPos::Right, VPos::Center));
            root.draw(&Text::new(
                name.clone(),
                (left - 6, (top + bottom) / 2),
                label,
            ))
            .map_err(plot)?;
            for (i, &c) in bins.iter().enumerate().filter(|(_, &c)| c > 0) {
                let (a, b) = d.span(i);
                if b < lo || a > hi {
                    continue;
                }
                let (l, _) = px(x(a.max(lo)), y);
                let (r, _) = px(x(b.min(hi)), y);
                let alpha = 0.3 + 0.7 * (1.0 + f64::from(c)).ln() / (1.0 + f64::from(max)).ln();
                let r = r.max(l + 1).min(right);
                root.draw(&Rectangle::new(
                    [(l, top), (r, bottom)],
                    ink.mix(alpha).filled(),
                ))
                .map_err(plot)?;
            }
        }
        if (lo..=hi).contains(&marker) {
            let (mx, top) = px(x(marker), n as f64);
            let (_, bottom) = px(x(marker), 0.0);
            let red = RGBColor(200, 30, 30);
            root.draw(&PathElement::new(
                vec![(mx, top), (mx, bottom)],
                red.stroke_width(2),
            ))
            .map_err(plot)?;
            let style = TextStyle::from(("sans-serif", 13).into_font())
                .color(&red)
                .pos(Pos::new(HPos::Right, VPos::Bottom));
            root.draw(&Text::new(marker_name, (mx - 3, top - 2), style))
                .map_err(plot)?;
        }
        root.present().map_err(plot)?;
    }
    Ok(svg)
}

fn plot<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing: {e:?}")
}
