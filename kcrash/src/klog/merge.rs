//! Several ring cursors merged into one stream by clock, as klogPrint(0, …) shows every
//! subsystem: a k-way merge that holds one record per ring, never the whole log.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::ring::{Cursor, Order, Record};

/// The records of several cursors, in clock order.
pub struct Merge<'a> {
    cursors: Vec<Cursor<'a>>,
    heap: BinaryHeap<Head>,
    order: Order,
}

/// The next record of one cursor, ordered so that the heap's top is the one to yield next.
struct Head {
    key: (u64, u64, usize),
    newest_first: bool,
    cursor: usize,
    record: Record,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        let c = self.key.cmp(&other.key);
        if self.newest_first {
            c
        } else {
            c.reverse()
        }
    }
}

impl<'a> Merge<'a> {
    /// Merges cursors that all walk in `order`.
    pub fn new(cursors: Vec<Cursor<'a>>, order: Order) -> Self {
        let mut m = Merge {
            heap: BinaryHeap::with_capacity(cursors.len()),
            cursors,
            order,
        };
        for i in 0..m.cursors.len() {
            m.advance(i);
        }
        m
    }

    fn advance(&mut self, cursor: usize) {
        if let Some(record) = self.cursors[cursor].next() {
            // Ties in clock go by sequence number, then ring, so the order is total and stable.
            let key = (record.sort_clock, record.seq, record.ring);
            self.heap.push(Head {
                key,
                newest_first: self.order == Order::NewestFirst,
                cursor,
                record,
            });
        }
    }
}

impl Iterator for Merge<'_> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        let head = self.heap.pop()?;
        self.advance(head.cursor);
        Some(head.record)
    }
}
