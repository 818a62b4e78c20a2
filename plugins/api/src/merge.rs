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

    /// Moves the next item to `out`, then those after it while `goes_first` says their keys
    /// still come first, until `out` holds `max`; returns the key of the item left next.
    fn take_run(
        &mut self,
        out: &mut Vec<Self::Item>,
        max: usize,
        goes_first: impl Fn((u64, u64, usize)) -> bool,
    ) -> Option<(u64, u64, usize)> {
        out.extend(self.next());
        loop {
            let key = self.peek_key()?;
            if out.len() >= max || !goes_first(key) {
                return Some(key);
            }
            out.extend(self.next());
        }
    }
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

    /// Appends the next items to `out` until it holds `want` (fewer at the streams' end), as
    /// many calls of `next` would: a stream whose items keep coming first hands them over in
    /// one run, without a look at the heap for each.
    pub fn fill(&mut self, out: &mut Vec<I::Item>, want: usize) {
        let order = self.order;
        while out.len() < want {
            let Some((.., stream)) = self.heap.pop() else {
                return;
            };
            let runner_up = self.heap.peek().copied();
            let next = self.streams[stream].take_run(out, want, |key| {
                runner_up.is_none_or(|r| slot(key, order, stream) > r)
            });
            if let Some(key) = next {
                self.heap.push(slot(key, order, stream));
            }
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

    /// Filling batches gives the items `next` gives, in the same order, whatever the batch size
    /// and however the streams' runs interleave (long runs, single items, equal times).
    #[test]
    fn filled_batches_hold_what_next_gives() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for round in 0..60 {
            let rings = 1 + rand(6) as usize;
            let mut streams: Vec<Vec<Ev>> = (0..rings).map(|_| Vec::new()).collect();
            let mut ticks = 0;
            for _ in 0..rand(400) {
                // Runs of one ring, of varying length, some sharing a time with the run before.
                let ring = rand(rings as u64) as usize;
                ticks += rand(3);
                for _ in 0..1 + rand(if round % 2 == 0 { 40 } else { 2 }) {
                    streams[ring].push(ev(ticks, ring));
                    ticks += rand(2);
                }
            }
            for order in [Order::OldestFirst, Order::NewestFirst] {
                let sorted = |order| {
                    streams
                        .iter()
                        .map(|s| {
                            let mut s: Vec<Ev> = s.iter().map(|e| ev(e.ticks, e.ring)).collect();
                            if order == Order::NewestFirst {
                                s.reverse();
                            }
                            Peeked::new(s.into_iter())
                        })
                        .collect::<Vec<_>>()
                };
                let want: Vec<_> = Merge::new(sorted(order), order)
                    .map(|e| (e.ticks, e.ring))
                    .collect();
                for batch in [1, 2, 7, 64, 10_000] {
                    let mut merge = Merge::new(sorted(order), order);
                    let mut got = Vec::new();
                    loop {
                        let mut out = Vec::new();
                        merge.fill(&mut out, batch);
                        assert!(out.len() <= batch);
                        if out.is_empty() {
                            break;
                        }
                        got.extend(out.iter().map(|e| (e.ticks, e.ring)));
                    }
                    assert_eq!(got, want, "round {round}, {order:?}, batches of {batch}");
                }
            }
        }
    }
}
