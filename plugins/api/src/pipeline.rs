//! Rendering a stream on several threads. The merge walks the rings in order on the calling
//! thread; rendering (reading format strings and `%s` arguments, printf, escaping) depends only on
//! the item, so each batch is split among workers, each with its own printer (its buffers, its
//! memory caches), and their lines are written in stream order. While the workers render one
//! batch, the calling thread merges the next, so the merge and the rendering overlap. Memory is
//! bounded by two batches, whatever the log's length. `klog` renders its records with it.

use std::io::{self, Write};
use std::sync::mpsc::{channel, Receiver, Sender};

/// Items per batch: large enough to amortise the hand-over to the workers, small enough to stay
/// in cache.
const BATCH: usize = 4096;
/// The smallest batch, for a short `-n`.
const MIN_BATCH: usize = 64;

/// Appends an item's line(s) to the buffer with printer `P`, or nothing when a filter drops it;
/// says whether it kept the item.
pub type Render<'p, P, T> = dyn Fn(&mut P, &T, &mut Vec<u8>) -> io::Result<bool> + Sync + 'p;

/// One worker's output for its share of a batch: bytes, and where each kept item's text ends.
#[derive(Default)]
struct Part {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Part {
    /// Renders `items`, keeping at most `limit`.
    fn render<P, T>(
        &mut self,
        printer: &mut P,
        items: &[T],
        render: &Render<'_, P, T>,
        limit: u64,
    ) -> io::Result<()> {
        self.bytes.clear();
        self.ends.clear();
        for rec in items {
            if self.ends.len() as u64 >= limit {
                break;
            }
            if render(printer, rec, &mut self.bytes)? {
                self.ends.push(self.bytes.len());
            }
        }
        Ok(())
    }

    /// Writes the part's first `limit` kept items; returns how many it wrote.
    fn write(&self, limit: u64, out: &mut dyn Write) -> io::Result<u64> {
        let take = self.ends.len().min(limit as usize);
        if take > 0 {
            out.write_all(&self.bytes[..self.ends[take - 1]])?;
        }
        Ok(take as u64)
    }
}

/// Fills `shares` with the stream's next `want` items, split evenly; returns how many.
fn fill<T>(items: &mut impl Iterator<Item = T>, shares: &mut [Vec<T>], want: usize) -> usize {
    let per = want.div_ceil(shares.len());
    let mut n = 0;
    for share in shares.iter_mut() {
        share.clear();
        share.extend(items.by_ref().take(per));
        n += share.len();
    }
    n
}

/// How many items the next batch should hold when `wanted` more may still be written.
fn batch_size(wanted: u64) -> usize {
    wanted.clamp(MIN_BATCH as u64, BATCH as u64) as usize
}

/// A worker's items with the limit on kept ones; given back with the rendered part.
type Job<T> = (Vec<T>, Part, u64);
type Done<T> = io::Result<(Vec<T>, Part)>;

/// The calling thread's end of the hand-over with one worker.
struct Lane<T> {
    jobs: Sender<Job<T>>,
    done: Receiver<Done<T>>,
}

/// Renders `items` with `render` on one worker per printer and writes at most `limit` kept
/// items to `out`, in order. Returns how many were written.
pub fn render_stream<P: Send, T: Send>(
    mut items: impl Iterator<Item = T>,
    printers: &mut [P],
    render: &Render<'_, P, T>,
    limit: u64,
    out: &mut dyn Write,
) -> io::Result<u64> {
    if let [printer] = printers {
        return render_serial(items, printer, render, limit, out);
    }
    std::thread::scope(|s| {
        let mut lanes = Vec::with_capacity(printers.len());
        let mut workers = Vec::with_capacity(printers.len());
        for printer in printers.iter_mut() {
            let (jobs, job_rx) = channel::<Job<T>>();
            let (done_tx, done) = channel::<Done<T>>();
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
        let result = drive(&mut items, &lanes, limit, out);
        // Closing the job channels ends the workers.
        drop(lanes);
        for w in workers {
            if w.join().is_err() {
                return Err(io::Error::other("a render worker panicked"));
            }
        }
        result
    })
}

/// The calling thread's side: hands out batch k, merges batch k+1 while the workers render it,
/// then writes batch k's parts in order.
fn drive<T>(
    items: &mut impl Iterator<Item = T>,
    lanes: &[Lane<T>],
    limit: u64,
    out: &mut dyn Write,
) -> io::Result<u64> {
    let lost = || io::Error::other("a render worker stopped");
    let mut written = 0u64;
    let mut batch: Vec<Vec<T>> = lanes.iter().map(|_| Vec::new()).collect();
    let mut ahead: Vec<Vec<T>> = lanes.iter().map(|_| Vec::new()).collect();
    let mut parts: Vec<Part> = lanes.iter().map(|_| Part::default()).collect();
    let mut pending = fill(items, &mut batch, batch_size(limit));
    while pending > 0 && written < limit {
        // No part needs to keep more than what is left to write.
        let left = limit - written;
        for (lane, (share, part)) in lanes.iter().zip(batch.drain(..).zip(parts.drain(..))) {
            lane.jobs.send((share, part, left)).map_err(|_| lost())?;
        }
        // The next batch, sized as if every item in flight were kept.
        let next = pending;
        pending = fill(
            items,
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
fn render_serial<P, T>(
    mut items: impl Iterator<Item = T>,
    printer: &mut P,
    render: &Render<'_, P, T>,
    limit: u64,
    out: &mut dyn Write,
) -> io::Result<u64> {
    let mut written = 0u64;
    let mut share = [Vec::new()];
    let mut part = Part::default();
    while written < limit && fill(&mut items, &mut share, batch_size(limit - written)) > 0 {
        part.render(printer, &share[0], render, limit - written)?;
        written += part.write(limit - written, out)?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What one thread writing every kept item in order gives.
    fn expected(n: u64, keep: fn(u64) -> bool, limit: u64) -> String {
        (0..n)
            .filter(|&s| keep(s))
            .take(limit as usize)
            .map(|s| format!("{s}\n"))
            .collect()
    }

    /// The stream split into batches and parts, rendered on `workers` threads, must read as if
    /// one thread had written it: same items, same order, the limit honoured exactly.
    #[test]
    fn parallel_rendering_keeps_order_and_limit() {
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
                // Each printer counts what it rendered, as a real one keeps its buffers.
                let mut printers: Vec<u64> = vec![0; workers];
                let render = move |done: &mut u64, item: &u64, buf: &mut Vec<u8>| {
                    *done += 1;
                    if !keep(*item) {
                        return Ok(false);
                    }
                    buf.extend_from_slice(format!("{item}\n").as_bytes());
                    Ok(true)
                };
                let mut out = Vec::new();
                let written = render_stream(0..n, &mut printers, &render, limit, &mut out).unwrap();
                let want = expected(n, keep, limit);
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    want,
                    "{workers} workers, {n} items, limit {limit}"
                );
                assert_eq!(written, want.lines().count() as u64);
            }
        }
    }
}
