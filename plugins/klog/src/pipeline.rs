//! Rendering a record stream on several threads. The merge walks the rings in order on the
//! calling thread; rendering (reading format strings and `%s` arguments, printf, escaping) depends
//! only on the record, so each batch is split among workers, each with its own [`Printer`], and
//! their lines are written in stream order. While the workers render one batch, the calling
//! thread merges the next, so the merge and the rendering overlap. Memory is bounded by two
//! batches, whatever the log's length.

use std::io::{self, Write};
use std::sync::mpsc::{channel, Receiver, Sender};

use super::render::Printer;
use super::ring::Record;

/// Records per batch: large enough to amortise the hand-over to the workers, small enough to stay
/// in cache.
const BATCH: usize = 4096;
/// The smallest batch, for a short `-n`.
const MIN_BATCH: usize = 64;

/// Appends a record's line(s) to the buffer, or nothing when a filter drops it; says whether it
/// kept the record.
pub type Render<'p> =
    dyn Fn(&mut Printer<'_>, &Record, &mut Vec<u8>) -> io::Result<bool> + Sync + 'p;

/// One worker's output for its share of a batch: bytes, and where each kept record's text ends.
#[derive(Default)]
struct Part {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Part {
    /// Renders `records`, keeping at most `limit`.
    fn render(
        &mut self,
        printer: &mut Printer<'_>,
        records: &[Record],
        render: &Render<'_>,
        limit: u64,
    ) -> io::Result<()> {
        self.bytes.clear();
        self.ends.clear();
        for rec in records {
            if self.ends.len() as u64 >= limit {
                break;
            }
            if render(printer, rec, &mut self.bytes)? {
                self.ends.push(self.bytes.len());
            }
        }
        Ok(())
    }

    /// Writes the part's first `limit` kept records; returns how many it wrote.
    fn write(&self, limit: u64, out: &mut dyn Write) -> io::Result<u64> {
        let take = self.ends.len().min(limit as usize);
        if take > 0 {
            out.write_all(&self.bytes[..self.ends[take - 1]])?;
        }
        Ok(take as u64)
    }
}

/// Fills `shares` with the stream's next `want` records, split evenly; returns how many.
fn fill(
    records: &mut impl Iterator<Item = Record>,
    shares: &mut [Vec<Record>],
    want: usize,
) -> usize {
    let per = want.div_ceil(shares.len());
    let mut n = 0;
    for share in shares.iter_mut() {
        share.clear();
        share.extend(records.by_ref().take(per));
        n += share.len();
    }
    n
}

/// How many records the next batch should hold when `wanted` more may still be written.
fn batch_size(wanted: u64) -> usize {
    wanted.clamp(MIN_BATCH as u64, BATCH as u64) as usize
}

/// A worker's records with the limit on kept ones; given back with the rendered part.
type Job = (Vec<Record>, Part, u64);
type Done = io::Result<(Vec<Record>, Part)>;

/// The calling thread's end of the hand-over with one worker.
struct Lane {
    jobs: Sender<Job>,
    done: Receiver<Done>,
}

/// Renders `records` with `render` on one worker per printer and writes at most `limit` kept
/// records to `out`, in order. Returns how many were written.
pub fn render_stream(
    mut records: impl Iterator<Item = Record>,
    printers: &mut [Printer<'_>],
    render: &Render<'_>,
    limit: u64,
    out: &mut dyn Write,
) -> io::Result<u64> {
    if let [printer] = printers {
        return render_serial(records, printer, render, limit, out);
    }
    std::thread::scope(|s| {
        let mut lanes = Vec::with_capacity(printers.len());
        let mut workers = Vec::with_capacity(printers.len());
        for printer in printers.iter_mut() {
            let (jobs, job_rx) = channel::<Job>();
            let (done_tx, done) = channel::<Done>();
            workers.push(s.spawn(move || {
                for (share, mut part, limit) in job_rx {
                    let r = part.render(printer, &share, render, limit);
                    if done_tx.send(r.map(|()| (share, part))).is_err() {
                        break;
                    }
                }
            }));
            lanes.push(Lane { jobs, done });
        }
        let result = drive(&mut records, &lanes, limit, out);
        // Closing the job channels ends the workers.
        drop(lanes);
        for w in workers {
            if w.join().is_err() {
                return Err(io::Error::other("a klog render worker panicked"));
            }
        }
        result
    })
}

/// The calling thread's side: hands out batch k, merges batch k+1 while the workers render it,
/// then writes batch k's parts in order.
fn drive(
    records: &mut impl Iterator<Item = Record>,
    lanes: &[Lane],
    limit: u64,
    out: &mut dyn Write,
) -> io::Result<u64> {
    let lost = || io::Error::other("a klog render worker stopped");
    let mut written = 0u64;
    let mut batch: Vec<Vec<Record>> = lanes.iter().map(|_| Vec::new()).collect();
    let mut ahead: Vec<Vec<Record>> = lanes.iter().map(|_| Vec::new()).collect();
    let mut parts: Vec<Part> = lanes.iter().map(|_| Part::default()).collect();
    let mut pending = fill(records, &mut batch, batch_size(limit));
    while pending > 0 && written < limit {
        // No part needs to keep more than what is left to write.
        let left = limit - written;
        for (lane, (share, part)) in lanes.iter().zip(batch.drain(..).zip(parts.drain(..))) {
            lane.jobs.send((share, part, left)).map_err(|_| lost())?;
        }
        // The next batch, sized as if every record in flight were kept.
        let next = pending;
        pending = fill(
            records,
            &mut ahead,
            batch_size(left.saturating_sub(next as u64)),
        );
        for lane in lanes {
            let (share, part) = lane.done.recv().map_err(|_| lost())??;
            written += part.write(limit - written, out)?;
            batch.push(share);
            parts.push(part);
        }
        std::mem::swap(&mut batch, &mut ahead);
    }
    Ok(written)
}

/// One printer: render and write batch by batch on the calling thread.
fn render_serial(
    mut records: impl Iterator<Item = Record>,
    printer: &mut Printer<'_>,
    render: &Render<'_>,
    limit: u64,
    out: &mut dyn Write,
) -> io::Result<u64> {
    let mut written = 0u64;
    let mut share = [Vec::new()];
    let mut part = Part::default();
    while written < limit && fill(&mut records, &mut share, batch_size(limit - written)) > 0 {
        part.render(printer, &share[0], render, limit - written)?;
        written += part.write(limit - written, out)?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::Clock;
    use crate::ring::Damage;
    use kcrash_plugin::memory::Runs;

    fn record(seq: u64) -> Record {
        Record {
            ring: 0,
            seq,
            slot: seq,
            words: [0; 8],
            subsystem: None,
            desc_kind: klog_runtime::Desc::Pointer,
            damage: Damage::default(),
            unreadable: None,
            sort_clock: seq,
        }
    }

    /// What one thread writing every kept record in order gives.
    fn expected(n: u64, keep: fn(u64) -> bool, limit: u64) -> String {
        (0..n)
            .filter(|&s| keep(s))
            .take(limit as usize)
            .map(|s| format!("{s}\n"))
            .collect()
    }

    /// The stream split into batches and parts, rendered on `workers` threads, must read as if
    /// one thread had written it: same records, same order, the limit honoured exactly.
    #[test]
    fn parallel_rendering_keeps_order_and_limit() {
        let mem = Runs(Vec::new());
        let keep_odd: fn(u64) -> bool = |s| s % 2 == 1;
        let keep_all: fn(u64) -> bool = |_| true;
        for workers in [1, 2, 3] {
            for (n, keep, limit) in [
                (0, keep_all, u64::MAX),
                (10, keep_all, u64::MAX),
                (3 * BATCH as u64 + 17, keep_all, u64::MAX),
                (3 * BATCH as u64 + 17, keep_odd, u64::MAX),
                (3 * BATCH as u64 + 17, keep_all, 5),
                (3 * BATCH as u64 + 17, keep_odd, BATCH as u64 + 3),
                (100, keep_odd, 50),
            ] {
                let mut printers: Vec<Printer<'_>> = (0..workers)
                    .map(|_| Printer::new(&mem, Vec::new(), Clock { hz: None }))
                    .collect();
                let render = move |_: &mut Printer<'_>, rec: &Record, buf: &mut Vec<u8>| {
                    if !keep(rec.seq) {
                        return Ok(false);
                    }
                    buf.extend_from_slice(format!("{}\n", rec.seq).as_bytes());
                    Ok(true)
                };
                let mut out = Vec::new();
                let written =
                    render_stream((0..n).map(record), &mut printers, &render, limit, &mut out)
                        .unwrap();
                let want = expected(n, keep, limit);
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    want,
                    "{workers} workers, {n} records, limit {limit}"
                );
                assert_eq!(written, want.lines().count() as u64);
            }
        }
    }
}
