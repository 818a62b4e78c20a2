//! Several streams merged into one by time, as klogPrint(0, …) shows every subsystem: a k-way
//! merge that holds one item per stream, never the whole log.

use std::collections::binary_heap::{BinaryHeap, PeekMut};

use crate::log::Order;

/// Where an item goes in a merged stream: (time, place in its stream, stream), compared in that
/// order, so that the order is total and stable.
pub trait Keyed {
    fn key(&self) -> (u64, u64, usize);
}

/// The items of several streams, each already in `order`, in `order`.
pub struct Merge<I: Iterator> {
    streams: Vec<I>,
    /// The next item of each stream, waiting its turn.
    heads: Vec<Option<I::Item>>,
    /// Keys of the waiting items; small, so the heap's sifting moves little.
    heap: BinaryHeap<Slot>,
    order: Order,
}

/// An item's key and its stream, bitwise inverted for oldest-first so that the max-heap's top is
/// always the next item.
type Slot = (u64, u64, usize, usize);

impl<I> Merge<I>
where
    I: Iterator,
    I::Item: Keyed,
{
    pub fn new(streams: Vec<I>, order: Order) -> Self {
        let n = streams.len();
        let mut m = Merge {
            streams,
            heads: (0..n).map(|_| None).collect(),
            heap: BinaryHeap::with_capacity(n),
            order,
        };
        for i in 0..n {
            if let Some(slot) = next_slot(&mut m.streams, &mut m.heads, m.order, i) {
                m.heap.push(slot);
            }
        }
        m
    }
}

/// Moves `stream`'s next item into its head and returns its slot.
fn next_slot<I>(
    streams: &mut [I],
    heads: &mut [Option<I::Item>],
    order: Order,
    stream: usize,
) -> Option<Slot>
where
    I: Iterator,
    I::Item: Keyed,
{
    let item = streams[stream].next()?;
    let (t, s, r) = item.key();
    heads[stream] = Some(item);
    Some(match order {
        Order::NewestFirst => (t, s, r, stream),
        Order::OldestFirst => (!t, !s, !r, stream),
    })
}

impl<I> Iterator for Merge<I>
where
    I: Iterator,
    I::Item: Keyed,
{
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let mut top = self.heap.peek_mut()?;
        let stream = top.3;
        let item = self.heads[stream].take();
        // The stream's next key replaces the top in place: one sift down instead of a pop and
        // a push, and none at all while one stream keeps winning.
        match next_slot(&mut self.streams, &mut self.heads, self.order, stream) {
            Some(slot) => *top = slot,
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
        let got: Vec<_> = Merge::new(vec![a.into_iter(), b.into_iter()], Order::NewestFirst)
            .map(|e| (e.ticks, e.ring))
            .collect();
        assert_eq!(got, [(9, 0), (7, 1), (5, 1), (5, 0), (1, 0)]);
        let a = vec![ev(1, 0), ev(5, 0)];
        let b = vec![ev(5, 1), ev(7, 1)];
        let got: Vec<_> = Merge::new(vec![a.into_iter(), b.into_iter()], Order::OldestFirst)
            .map(|e| (e.ticks, e.ring))
            .collect();
        assert_eq!(got, [(1, 0), (5, 0), (5, 1), (7, 1)]);
        assert_eq!(
            Merge::new(Vec::<std::vec::IntoIter<Ev>>::new(), Order::OldestFirst).count(),
            0
        );
    }
}
