//! Rendering a record stream on several threads. The merge walks the rings in order on one
//! thread; rendering (reading format strings and `%s` arguments, printf, escaping) depends only on
//! the record, so batches are split among workers, each with its own [`Printer`], and their lines
//! are written in stream order. Memory is bounded by one batch, whatever the log's length.

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
    records: impl Iterator<Item = Record>,
    printers: &mut [Printer<'_>],
    render: &Render<'_>,
    limit: u64,
    out: &mut dyn Write,
) -> io::Result<u64> {
    let mut written = 0u64;
    let mut parts: Vec<Part> = printers.iter().map(|_| Part::default()).collect();
    let mut batch: Vec<Record> = Vec::with_capacity(BATCH);
    let mut records = records.peekable();
    while written < limit && records.peek().is_some() {
        // A short -n needs only a short batch.
        let want = (limit - written).clamp(64, BATCH as u64) as usize;
        batch.clear();
        batch.extend(records.by_ref().take(want));
        let left = limit - written;
        let per = batch.len().div_ceil(printers.len());
        for p in &mut parts {
            p.bytes.clear();
            p.ends.clear();
        }
        if printers.len() == 1 || batch.len() < 2 * printers.len() {
            parts[0].render(&mut printers[0], &batch, render, left)?;
        } else {
            std::thread::scope(|s| -> io::Result<()> {
                let jobs: Vec<_> = printers
                    .iter_mut()
                    .zip(parts.iter_mut())
                    .zip(batch.chunks(per))
                    .map(|((printer, part), chunk)| {
                        s.spawn(move || part.render(printer, chunk, render, left))
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
    Ok(written)
}
