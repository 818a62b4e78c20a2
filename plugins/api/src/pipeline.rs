//! Rendering a stream on several threads. The merge walks the rings in order on the calling
//! thread; rendering (reading format strings and `%s` arguments, printf, escaping) depends only on
//! the item, so a batch is cut into chunks that every thread claims in turn, each rendering with
//! its own printer (its buffers, its memory caches), and the chunks' lines are written in stream
//! order. While the workers render one batch, the calling thread writes the batch before, merges
//! the next, then claims what chunks of the batch are left: no thread waits while another has
//! work, whatever the merge's share of the cost. Memory is bounded by three batches (one
//! rendered, one rendering, one merged), whatever the log's length.
//! `klog` renders its records with it.

use std::io::{self, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};

/// Items per batch: large enough to amortise handing it to the workers, small enough to stay
/// in cache.
const BATCH: usize = 8192;
/// The smallest batch, for a short `-n`.
const MIN_BATCH: usize = 64;
/// Items a thread claims at once: small enough that the threads finish a batch together.
const CHUNK: usize = 256;

/// Appends an item's line(s) to the buffer with printer `P`, or nothing when a filter drops it;
/// says whether it kept the item.
pub type Render<'p, P, T> = dyn Fn(&mut P, &T, &mut Vec<u8>) -> io::Result<bool> + Sync + 'p;

/// One chunk's output: bytes, and where each kept item's text ends.
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

/// Fills `batch` with the stream's next `want` items.
fn fill<T>(items: &mut impl FnMut(&mut Vec<T>, usize), batch: &mut Vec<T>, want: usize) {
    batch.clear();
    items(batch, want);
}

/// How many items the next batch should hold when `wanted` more may still be written.
fn batch_size(wanted: u64) -> usize {
    wanted.clamp(MIN_BATCH as u64, BATCH as u64) as usize
}

/// A batch being rendered: its chunks, handed out in order to whichever thread asks.
struct Job<T> {
    items: Vec<T>,
    next: AtomicUsize,
    parts: Vec<Mutex<io::Result<Part>>>,
    /// No chunk needs to keep more than what is left to write.
    limit: u64,
}

impl<T> Job<T> {
    /// Renders chunks with `printer` until none is left.
    fn work<P>(&self, printer: &mut P, render: &Render<'_, P, T>) {
        loop {
            let c = self.next.fetch_add(1, Ordering::Relaxed);
            let (Some(items), Some(slot)) = (self.items.chunks(CHUNK).nth(c), self.parts.get(c))
            else {
                return;
            };
            // Each chunk is claimed once: its lock is never waited for.
            let Ok(mut slot) = slot.lock() else {
                return;
            };
            let mut part = std::mem::replace(&mut *slot, Ok(Part::default())).unwrap_or_default();
            *slot = part
                .render(printer, items, render, self.limit)
                .map(|()| part);
        }
    }
}

/// Renders a stream's items with `render`, one thread per printer (the calling thread's is the
/// first), and writes at most `limit` kept items to `out`, in order. Returns how many were
/// written. `items(batch, n)` appends the stream's next items to `batch` until it holds `n`;
/// fewer means the stream has ended.
pub fn render_stream<P: Send, T: Send + Sync>(
    mut items: impl FnMut(&mut Vec<T>, usize),
    printers: &mut [P],
    render: &Render<'_, P, T>,
    limit: u64,
    out: &mut dyn Write,
) -> io::Result<u64> {
    let Some((mine, others)) = printers.split_first_mut() else {
        return Ok(0);
    };
    let panicked = || io::Error::other("a render worker panicked");
    std::thread::scope(|s| {
        // Each worker takes a batch, renders chunks of it until none is left, lets go of the
        // batch and says whether it rendered without panicking (a panic must not leave the
        // calling thread waiting for it); the workers end when the batches do.
        let (done_tx, done) = channel::<bool>();
        let workers: Vec<Sender<Arc<Job<T>>>> = others
            .iter_mut()
            .map(|printer| {
                let (tx, jobs) = channel::<Arc<Job<T>>>();
                let done_tx = done_tx.clone();
                s.spawn(move || {
                    for job in jobs {
                        let rendered =
                            catch_unwind(AssertUnwindSafe(|| job.work(printer, render))).is_ok();
                        drop(job);
                        if done_tx.send(rendered).is_err() || !rendered {
                            return;
                        }
                    }
                });
                tx
            })
            .collect();
        drop(done_tx);
        let mut written = 0u64;
        // The batch before, rendered, written while the workers render the next one: then no
        // thread waits for the writing.
        let mut rendered: Vec<Part> = Vec::new();
        let mut kept_before = 0u64;
        let mut ahead = Vec::new();
        let mut first = Vec::new();
        fill(&mut items, &mut first, batch_size(limit));
        let mut job = Arc::new(Job {
            items: first,
            next: AtomicUsize::new(0),
            parts: Vec::new(),
            limit,
        });
        while !job.items.is_empty() && written + kept_before < limit {
            let left = limit - written - kept_before;
            let chunks = {
                let job = Arc::get_mut(&mut job).ok_or_else(panicked)?;
                let chunks = job.items.len().div_ceil(CHUNK);
                if job.parts.len() < chunks {
                    job.parts
                        .resize_with(chunks, || Mutex::new(Ok(Part::default())));
                }
                *job.next.get_mut() = 0;
                job.limit = left;
                chunks
            };
            // Workers only where the batch has a chunk for them.
            let helping = workers.len().min(chunks.saturating_sub(1));
            for w in &workers[..helping] {
                w.send(Arc::clone(&job)).map_err(|_| panicked())?;
            }
            written += write_parts(&rendered, limit - written, out)?;
            kept_before = 0;
            // The next batch, sized as if every item in flight were kept, then a hand with
            // what is left of this one.
            fill(
                &mut items,
                &mut ahead,
                batch_size(left.saturating_sub(job.items.len() as u64)),
            );
            job.work(mine, render);
            for _ in 0..helping {
                if !done.recv().map_err(|_| panicked())? {
                    return Err(panicked());
                }
            }
            let job = Arc::get_mut(&mut job).ok_or_else(panicked)?;
            // This batch's parts are kept to be written; the written ones' buffers serve the
            // next batch.
            let mut spare = std::mem::take(&mut rendered).into_iter();
            for slot in &mut job.parts[..chunks] {
                let slot = slot.get_mut().map_err(|_| panicked())?;
                let fresh = Ok(spare.next().unwrap_or_default());
                let part = std::mem::replace(slot, fresh)?;
                kept_before += part.ends.len() as u64;
                rendered.push(part);
            }
            std::mem::swap(&mut job.items, &mut ahead);
        }
        written += write_parts(&rendered, limit - written, out)?;
        Ok(written)
    })
}

/// Writes the parts' kept items in order, at most `limit`; returns how many it wrote.
fn write_parts(parts: &[Part], limit: u64, out: &mut dyn Write) -> io::Result<u64> {
    let mut written = 0;
    for part in parts {
        if written >= limit {
            break;
        }
        written += part.write(limit - written, out)?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that hands over an iterator's items.
    fn iterated<T>(mut items: impl Iterator<Item = T>) -> impl FnMut(&mut Vec<T>, usize) {
        move |batch, n| batch.extend(items.by_ref().take(n - batch.len()))
    }

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
                let written =
                    render_stream(iterated(0..n), &mut printers, &render, limit, &mut out).unwrap();
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

    /// A worker whose render panics makes the stream fail with an error, never hang waiting for
    /// it nor take the calling thread down.
    #[test]
    fn a_panicking_worker_is_an_error() {
        use std::sync::atomic::AtomicBool;
        use std::time::{Duration, Instant};
        // Printer 1 is the worker's: it panics on its first item. Printer 0, the calling
        // thread's, waits for that before rendering, so that the worker surely has a chunk.
        let mut printers: Vec<u64> = vec![0, 1];
        let worker_started = AtomicBool::new(false);
        let render = |me: &mut u64, item: &u64, buf: &mut Vec<u8>| {
            if *me == 1 {
                worker_started.store(true, Ordering::SeqCst);
                panic!("a worker's render panicked");
            }
            let since = Instant::now();
            while !worker_started.load(Ordering::SeqCst) {
                assert!(
                    since.elapsed() < Duration::from_secs(60),
                    "no worker rendered"
                );
                std::thread::yield_now();
            }
            buf.extend_from_slice(format!("{item}\n").as_bytes());
            Ok(true)
        };
        let mut out = Vec::new();
        let n = 2 * BATCH as u64;
        let r = render_stream(iterated(0..n), &mut printers, &render, u64::MAX, &mut out);
        let e = r.expect_err("the worker panicked");
        assert!(e.to_string().contains("panicked"), "{e}");
    }
}
