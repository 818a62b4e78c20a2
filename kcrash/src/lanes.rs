//! Rings rendered in parallel and merged in order: each ring's lines are made a batch at a
//! time on a thread of its own (by a [`Batches`]), and the calling thread merges them by their
//! keys, as `klog 0` merges records (a heap holding one line per ring). Memory stays bounded by
//! a few batches per ring, whatever the rings' length. `timeline`, every decoder's command and
//! `trace` print through it.

use std::collections::BinaryHeap;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};

use anyhow::Result;
use kcrash_plugin::Order;

/// Lines rendered per batch: large enough to amortise the hand-over between threads, small
/// enough that every ring's batches stay in memory together.
const BATCH: usize = 1024;
/// The smallest batch, for a short `-n`.
const MIN_BATCH: usize = 16;
/// Rings read on threads of their own at most; beyond, the calling thread reads them.
const MAX_THREADS: usize = 64;

/// Where a line goes in the merged stream: its time, then two tie-breakers the caller chooses
/// (`timeline`: the place in its ring, then the stream; `trace`: the stream, which is the CPU's
/// order, then the place), compared in that order and bitwise inverted for oldest-first, so
/// that the max-heap's top is the next line.
pub type Key = (u64, u64, usize);

/// A ring's next rendered lines, in its order.
#[derive(Default)]
pub struct Batch {
    keys: Vec<Key>,
    /// Where each line ends in `bytes`.
    ends: Vec<usize>,
    /// The lines: a line is appended here, then [`Batch::push`]ed with its key.
    pub bytes: Vec<u8>,
}

impl Batch {
    /// Ends the line appended to `bytes` since the last one, at `key` in a merge in `order`.
    pub fn push(&mut self, key: Key, order: Order) {
        self.keys.push(match order {
            Order::NewestFirst => key,
            Order::OldestFirst => (!key.0, !key.1, !key.2),
        });
        self.ends.push(self.bytes.len());
    }

    /// Lines in the batch.
    pub fn lines(&self) -> usize {
        self.ends.len()
    }
}

/// One ring's lines, made a batch at a time in the merge's order, on whatever thread reads it.
pub trait Batches: Send {
    /// The next batch of at most `size` lines; an empty one when the ring has no more, or when
    /// `done` is set (the merge has written all it will).
    fn next_batch(&mut self, size: usize, done: &AtomicBool) -> Batch;
}

/// Writes up to `limit` lines of `rings` to `out` in key order, each ring rendered on a thread
/// of its own (up to [`MAX_THREADS`]; beyond, on this one); returns how many. Ctrl-C stops it
/// with an error.
pub fn merge<'r>(
    rings: Vec<Box<dyn Batches + 'r>>,
    limit: u64,
    out: &mut dyn Write,
) -> Result<u64> {
    let size = limit.clamp(MIN_BATCH as u64, BATCH as u64) as usize;
    let done = AtomicBool::new(false);
    let shown = std::thread::scope(|s| {
        let threaded = rings.len() <= MAX_THREADS;
        let lanes: Vec<Lane<'r>> = rings
            .into_iter()
            .map(|mut ring| {
                let source = if threaded {
                    // Two batches ahead at most: the thread waits for the merge beyond that.
                    let (tx, rx) = sync_channel(2);
                    let done = &done;
                    s.spawn(move || loop {
                        let b = ring.next_batch(size, done);
                        let end = b.keys.is_empty();
                        if tx.send(b).is_err() || end {
                            break;
                        }
                    });
                    Source::Thread(rx)
                } else {
                    // Every ring's batch waits in memory for the merge: keep them small.
                    Source::Inline(ring, size.min(MIN_BATCH))
                };
                Lane {
                    batch: Batch::default(),
                    at: 0,
                    source,
                }
            })
            .collect();
        let shown = write_merged(lanes, limit, &done, out);
        // The merge dropped the lanes, closing the channels; a thread still reading stops.
        done.store(true, Ordering::Relaxed);
        shown
    })?;
    crate::interrupt::check()?;
    Ok(shown)
}

/// Writes up to `limit` lines of the lanes in key order; returns how many. Ctrl-C stops it.
fn write_merged(
    mut lanes: Vec<Lane<'_>>,
    limit: u64,
    done: &AtomicBool,
    out: &mut dyn Write,
) -> io::Result<u64> {
    let mut heap = BinaryHeap::with_capacity(lanes.len());
    for (i, lane) in lanes.iter_mut().enumerate() {
        if let Some(k) = lane.key(done) {
            heap.push((k, i));
        }
    }
    let mut buf = Vec::with_capacity(1 << 16);
    let mut shown = 0;
    while shown < limit {
        let Some(mut top) = heap.peek_mut() else {
            break;
        };
        let lane = &mut lanes[top.1];
        lane.write(&mut buf);
        shown += 1;
        match lane.key(done) {
            Some(k) => top.0 = k,
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
            }
        }
        if buf.len() >= 1 << 16 {
            out.write_all(&buf)?;
            buf.clear();
            if crate::interrupt::requested() {
                break;
            }
        }
    }
    out.write_all(&buf)?;
    Ok(shown)
}

/// A ring as the merge sees it: its current batch and where the rest comes from.
struct Lane<'r> {
    batch: Batch,
    at: usize,
    source: Source<'r>,
}

enum Source<'r> {
    /// A thread renders the ring ahead of the merge.
    Thread(Receiver<Batch>),
    /// The calling thread renders it, this many lines at a time, when the merge needs it.
    Inline(Box<dyn Batches + 'r>, usize),
}

impl Lane<'_> {
    /// The key of the ring's next line, fetching its next batch when the current one is done.
    fn key(&mut self, done: &AtomicBool) -> Option<Key> {
        if self.at == self.batch.keys.len() {
            self.batch = match &mut self.source {
                Source::Thread(rx) => rx.recv().unwrap_or_default(),
                Source::Inline(ring, size) => ring.next_batch(*size, done),
            };
            self.at = 0;
        }
        self.batch.keys.get(self.at).copied()
    }

    /// Writes the ring's next line.
    fn write(&mut self, out: &mut Vec<u8>) {
        let start = self.at.checked_sub(1).map_or(0, |i| self.batch.ends[i]);
        out.extend_from_slice(&self.batch.bytes[start..self.batch.ends[self.at]]);
        self.at += 1;
    }
}
