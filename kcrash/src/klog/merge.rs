//! Several ring cursors merged into one stream by clock, as klogPrint(0, …) shows every
//! subsystem: a k-way merge that holds one record per ring, never the whole log.

use std::collections::binary_heap::{BinaryHeap, PeekMut};

use super::ring::{Cursor, Order, Record};

/// The records of several cursors, in clock order.
pub struct Merge<'a> {
    cursors: Vec<Cursor<'a>>,
    /// The next record of each cursor, waiting its turn.
    heads: Vec<Option<Record>>,
    /// Keys of the waiting records; small, so the heap's sifting moves little.
    heap: BinaryHeap<Key>,
    order: Order,
}

/// (sort clock, sequence number, ring, cursor), bitwise inverted for oldest-first so that the
/// max-heap's top is always the next record. Ties in clock go by sequence number, then ring, so
/// the order is total and stable.
type Key = (u64, u64, usize, usize);

impl<'a> Merge<'a> {
    /// Merges cursors that all walk in `order`.
    pub fn new(cursors: Vec<Cursor<'a>>, order: Order) -> Self {
        let n = cursors.len();
        let mut m = Merge {
            cursors,
            heads: (0..n).map(|_| None).collect(),
            heap: BinaryHeap::with_capacity(n),
            order,
        };
        for i in 0..n {
            m.advance(i);
        }
        m
    }

    fn advance(&mut self, cursor: usize) {
        if let Some(key) = next_key(&mut self.cursors, &mut self.heads, self.order, cursor) {
            self.heap.push(key);
        }
    }
}

/// Moves `cursor`'s next record into its head slot and returns its key.
fn next_key(
    cursors: &mut [Cursor<'_>],
    heads: &mut [Option<Record>],
    order: Order,
    cursor: usize,
) -> Option<Key> {
    let record = cursors[cursor].next()?;
    let key = (record.sort_clock, record.seq, record.ring);
    heads[cursor] = Some(record);
    Some(match order {
        Order::NewestFirst => (key.0, key.1, key.2, cursor),
        Order::OldestFirst => (!key.0, !key.1, !key.2, cursor),
    })
}

impl Iterator for Merge<'_> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        let mut top = self.heap.peek_mut()?;
        let cursor = top.3;
        let record = self.heads[cursor].take();
        // The cursor's next key replaces the top in place: one sift down instead of a pop and a
        // push, and none at all while one ring keeps winning.
        match next_key(&mut self.cursors, &mut self.heads, self.order, cursor) {
            Some(key) => *top = key,
            None => {
                PeekMut::pop(top);
            }
        }
        record
    }
}
