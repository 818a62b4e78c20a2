//! Several streams merged into one by time, as klogPrint(0, …) shows every subsystem: a k-way
//! merge that holds each stream's next key, never the whole log.

use std::collections::binary_heap::{BinaryHeap, PeekMut};

use crate::log::Order;

/// Where an item goes in a merged stream: (time, place in its stream, stream), compared in that
/// order, so that the order is total and stable.
pub trait Keyed {
    fn key(&self) -> (u64, u64, usize);
}

/// A stream whose next item's key shows before the item is taken: the merge keeps keys only,
/// and each item moves once, from its stream to the caller.
pub trait PeekKey: Iterator {
    fn peek_key(&mut self) -> Option<(u64, u64, usize)>;
}

/// The items of several streams, each already in `order`, in `order`.
pub struct Merge<I> {
    streams: Vec<I>,
    /// The key of each stream's next item; small, so the heap's sifting moves little.
    heap: BinaryHeap<Slot>,
    order: Order,
}

/// An item's key and its stream, bitwise inverted for oldest-first so that the max-heap's top is
/// always the next item.
type Slot = (u64, u64, usize, usize);

impl<I: PeekKey> Merge<I> {
    pub fn new(mut streams: Vec<I>, order: Order) -> Self {
        let heap = streams
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| Some(slot(s.peek_key()?, order, i)))
            .collect();
        Merge {
            streams,
            heap,
            order,
        }
    }
}

/// The heap's entry for `stream`'s next item, of key `key`.
fn slot((t, s, r): (u64, u64, usize), order: Order, stream: usize) -> Slot {
    match order {
        Order::NewestFirst => (t, s, r, stream),
        Order::OldestFirst => (!t, !s, !r, stream),
    }
}

impl<I: PeekKey> Iterator for Merge<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let mut top = self.heap.peek_mut()?;
        let stream = top.3;
        let item = self.streams[stream].next();
        // The stream's next key replaces the top in place: one sift down instead of a pop and
        // a push, and none at all while one stream keeps winning.
        match self.streams[stream].peek_key() {
            Some(key) => *top = slot(key, self.order, stream),
            None => {
                PeekMut::pop(top);
            }
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any iterator of keyed items, its next item held aside to show its key.
    struct Peeked<I: Iterator>(std::iter::Peekable<I>);

    impl<I: Iterator> Peeked<I> {
        fn new(items: I) -> Self {
            Peeked(items.peekable())
        }
    }

    impl<I: Iterator> Iterator for Peeked<I> {
        type Item = I::Item;
        fn next(&mut self) -> Option<I::Item> {
            self.0.next()
        }
    }

    impl<I> PeekKey for Peeked<I>
    where
        I: Iterator,
        I::Item: Keyed,
    {
        fn peek_key(&mut self) -> Option<(u64, u64, usize)> {
            self.0.peek().map(Keyed::key)
        }
    }

    /// An item with a time and a stream.
    #[derive(Debug)]
    struct Ev {
        ticks: u64,
        ring: usize,
    }

    impl Keyed for Ev {
        fn key(&self) -> (u64, u64, usize) {
            (self.ticks, 0, self.ring)
        }
    }

    fn ev(ticks: u64, ring: usize) -> Ev {
        Ev { ticks, ring }
    }

    #[test]
    fn streams_merge_by_time_then_ring_either_way() {
        let a = vec![ev(9, 0), ev(5, 0), ev(1, 0)];
        let b = vec![ev(7, 1), ev(5, 1)];
        let streams =
            |a: Vec<Ev>, b: Vec<Ev>| vec![Peeked::new(a.into_iter()), Peeked::new(b.into_iter())];
        let got: Vec<_> = Merge::new(streams(a, b), Order::NewestFirst)
            .map(|e| (e.ticks, e.ring))
            .collect();
        assert_eq!(got, [(9, 0), (7, 1), (5, 1), (5, 0), (1, 0)]);
        let a = vec![ev(1, 0), ev(5, 0)];
        let b = vec![ev(5, 1), ev(7, 1)];
        let got: Vec<_> = Merge::new(streams(a, b), Order::OldestFirst)
            .map(|e| (e.ticks, e.ring))
            .collect();
        assert_eq!(got, [(1, 0), (5, 0), (5, 1), (7, 1)]);
        assert_eq!(
            Merge::new(
                Vec::<Peeked<std::vec::IntoIter<Ev>>>::new(),
                Order::OldestFirst
            )
            .count(),
            0
        );
    }
}
