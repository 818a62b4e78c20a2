//! Rendering a record stream on several threads. The merge walks the rings in order on a thread
//! of its own, handing over batches through a channel of two, so it fills the next batch while the
//! current one renders; rendering (reading format strings and `%s` arguments, printf, escaping)
//! depends only on the record, so each batch is split among workers, each with its own
//! [`Printer`], and their lines are written in stream order. Memory is bounded by a few batches,
//! whatever the log's length.

use std::io::{self, Write};

use super::render::Printer;
use super::ring::Record;

/// Records per batch: large enough to amortise starting the workers, small enough to stay in cache.
const BATCH: usize = 4096;

/// Appends a record's line(s) to the buffer, or nothing when a filter drops it; says whether it
/// kept the record.
pub type Render<'p> =
    dyn Fn(&mut Printer<'_>, &Record, &mut Vec<u8>) -> io::Result<bool> + Sync + 'p;

/// One worker's output for its part of a batch: bytes, and where each kept record's text ends.
#[derive(Default)]
struct Part {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Part {
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
}

/// Renders `records` with `render` on one worker per printer and writes at most `limit` kept
/// records to `out`, in order. Returns how many were written.
pub fn render_stream(
    records: impl Iterator<Item = Record> + Send,
    printers: &mut [Printer<'_>],
    render: &Render<'_>,
    limit: u64,
    out: &mut dyn Write,
) -> io::Result<u64> {
    let mut written = 0u64;
    let mut parts: Vec<Part> = printers.iter().map(|_| Part::default()).collect();
    // A short -n needs only a short batch.
    let batch_len = limit.clamp(64, BATCH as u64) as usize;
    std::thread::scope(|s| -> io::Result<u64> {
        let (batches, ready) = std::sync::mpsc::sync_channel::<Vec<Record>>(2);
        s.spawn(move || {
            let mut records = records;
            loop {
                let batch: Vec<Record> = records.by_ref().take(batch_len).collect();
                // Stop when the stream ends or the receiver is gone (limit reached, or an error).
                if batch.is_empty() || batches.send(batch).is_err() {
                    return;
                }
            }
        });
        while written < limit {
            let Ok(batch) = ready.recv() else { break };
            let left = limit - written;
            let per = batch.len().div_ceil(printers.len());
            for p in &mut parts {
                p.bytes.clear();
                p.ends.clear();
            }
            if printers.len() == 1 || batch.len() < 2 * printers.len() {
                parts[0].render(&mut printers[0], &batch, render, left)?;
            } else {
                std::thread::scope(|w| -> io::Result<()> {
                    let jobs: Vec<_> = printers
                        .iter_mut()
                        .zip(parts.iter_mut())
                        .zip(batch.chunks(per))
                        .map(|((printer, part), chunk)| {
                            w.spawn(move || part.render(printer, chunk, render, left))
                        })
                        .collect();
                    for job in jobs {
                        job.join()
                            .map_err(|_| io::Error::other("a klog render worker panicked"))??;
                    }
                    Ok(())
                })?;
            }
            for part in &parts {
                let take = part.ends.len().min((limit - written) as usize);
                if take > 0 {
                    out.write_all(&part.bytes[..part.ends[take - 1]])?;
                    written += take as u64;
                }
            }
        }
        // Dropping the receiver here lets the merge thread stop at its next send.
        drop(ready);
        Ok(written)
    })
}
