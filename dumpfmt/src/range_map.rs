//! A sorted map from disjoint address ranges to values, built from possibly overlapping inserts.
//! Used for the flattened-format offset map (later records win) and for ELF virtual mappings
//! (earlier segments win).

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry<T> {
    pub start: u64,
    pub end: u64,
    pub value: T,
}

/// Lookup side: entries sorted by `start`, never overlapping.
#[derive(Debug)]
pub(crate) struct RangeMap<T> {
    entries: Vec<Entry<T>>,
}

impl<T> Default for RangeMap<T> {
    fn default() -> Self {
        RangeMap {
            entries: Vec::new(),
        }
    }
}

impl<T: Copy> RangeMap<T> {
    /// The entry containing `addr`.
    pub fn find(&self, addr: u64) -> Option<&Entry<T>> {
        let i = self.entries.partition_point(|e| e.start <= addr);
        let e = self.entries.get(i.checked_sub(1)?)?;
        (addr < e.end).then_some(e)
    }

    pub fn entries(&self) -> &[Entry<T>] {
        &self.entries
    }
}

/// Build side. Values are anchors that stay valid when their range is trimmed (callers compute
/// positions from the address, not from the entry start).
#[derive(Debug)]
pub(crate) struct RangeMapBuilder<T> {
    map: BTreeMap<u64, (u64, T)>,
}

impl<T: Copy> RangeMapBuilder<T> {
    pub fn new() -> Self {
        RangeMapBuilder {
            map: BTreeMap::new(),
        }
    }

    /// Insert `[start, end)`, replacing whatever it overlaps.
    pub fn insert_over(&mut self, start: u64, end: u64, value: T) {
        if start >= end {
            return;
        }
        // An entry starting before `start` may straddle it: split off its tail.
        if let Some((&s, &(e, v))) = self.map.range(..start).next_back() {
            if e > start {
                self.map.insert(s, (start, v));
                if e > end {
                    self.map.insert(end, (e, v));
                }
            }
        }
        let inside: Vec<u64> = self.map.range(start..end).map(|(&s, _)| s).collect();
        for s in inside {
            if let Some((e, v)) = self.map.remove(&s) {
                if e > end {
                    self.map.insert(end, (e, v));
                }
            }
        }
        self.map.insert(start, (end, value));
    }

    /// Insert `[start, end)` only where nothing is mapped yet.
    pub fn insert_under(&mut self, start: u64, end: u64, value: T) {
        let mut cursor = start;
        if let Some((_, &(e, _))) = self.map.range(..=start).next_back() {
            cursor = cursor.max(e);
        }
        let mut gaps = Vec::new();
        for (&s, &(e, _)) in self.map.range(start..end) {
            if s > cursor {
                gaps.push((cursor, s));
            }
            cursor = cursor.max(e);
        }
        if cursor < end {
            gaps.push((cursor, end));
        }
        for (s, e) in gaps {
            self.map.insert(s, (e, value));
        }
    }

    pub fn build(self) -> RangeMap<T> {
        RangeMap {
            entries: self
                .map
                .into_iter()
                .map(|(start, (end, value))| Entry { start, end, value })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(m: &RangeMap<u8>) -> Vec<(u64, u64, u8)> {
        m.entries()
            .iter()
            .map(|e| (e.start, e.end, e.value))
            .collect()
    }

    #[test]
    fn later_insert_over_splits_earlier() {
        let mut b = RangeMapBuilder::new();
        b.insert_over(0, 100, 1);
        b.insert_over(40, 60, 2);
        b.insert_over(90, 120, 3);
        let m = b.build();
        assert_eq!(
            ranges(&m),
            vec![(0, 40, 1), (40, 60, 2), (60, 90, 1), (90, 120, 3)]
        );
        assert_eq!(m.find(59).map(|e| e.value), Some(2));
        assert_eq!(m.find(120), None);
    }

    #[test]
    fn insert_under_fills_only_gaps() {
        let mut b = RangeMapBuilder::new();
        b.insert_under(10, 20, 1);
        b.insert_under(0, 30, 2);
        b.insert_under(15, 25, 3);
        let m = b.build();
        assert_eq!(ranges(&m), vec![(0, 10, 2), (10, 20, 1), (20, 30, 2)]);
    }
}
