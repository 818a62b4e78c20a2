//! A bounded cache of decompressed pages with CLOCK (second-chance) eviction: the cost of an
//! LRU without a linked list, and one contiguous allocation made up front.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// PFNs are already well distributed; SipHash would cost more than the rest of a cached read.
#[derive(Default)]
struct PfnHasher(u64);

impl Hasher for PfnHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

pub(crate) struct PageCache {
    page_size: usize,
    capacity: usize,
    slot_of: HashMap<u64, usize, BuildHasherDefault<PfnHasher>>,
    pfn_of: Vec<u64>,
    referenced: Vec<bool>,
    pages: Vec<u8>,
    hand: usize,
}

impl PageCache {
    pub fn new(page_size: usize, capacity: usize) -> Self {
        let capacity = capacity.max(1);
        PageCache {
            page_size,
            capacity,
            slot_of: HashMap::default(),
            pfn_of: Vec::new(),
            referenced: Vec::new(),
            pages: Vec::new(),
            hand: 0,
        }
    }

    pub fn get(&mut self, pfn: u64) -> Option<&[u8]> {
        let slot = *self.slot_of.get(&pfn)?;
        self.referenced[slot] = true;
        Some(&self.pages[slot * self.page_size..(slot + 1) * self.page_size])
    }

    /// A slot for `pfn` (evicting another page if full) for the caller to fill. If filling
    /// fails the caller must call [`PageCache::forget`].
    pub fn insert(&mut self, pfn: u64) -> &mut [u8] {
        let slot = if self.pfn_of.len() < self.capacity {
            self.pfn_of.push(pfn);
            self.referenced.push(true);
            self.pages.resize(self.pfn_of.len() * self.page_size, 0);
            self.pfn_of.len() - 1
        } else {
            while self.referenced[self.hand] {
                self.referenced[self.hand] = false;
                self.hand = (self.hand + 1) % self.capacity;
            }
            let slot = self.hand;
            self.hand = (self.hand + 1) % self.capacity;
            self.slot_of.remove(&self.pfn_of[slot]);
            self.pfn_of[slot] = pfn;
            self.referenced[slot] = true;
            slot
        };
        self.slot_of.insert(pfn, slot);
        &mut self.pages[slot * self.page_size..(slot + 1) * self.page_size]
    }

    pub fn forget(&mut self, pfn: u64) {
        if let Some(slot) = self.slot_of.remove(&pfn) {
            self.referenced[slot] = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_unreferenced_pages_first_and_stays_bounded() {
        let mut c = PageCache::new(4, 2);
        c.insert(1).copy_from_slice(b"aaaa");
        c.insert(2).copy_from_slice(b"bbbb");
        // Both referenced: the clock clears both, then evicts page 1.
        c.insert(3).copy_from_slice(b"cccc");
        assert!(c.get(1).is_none());
        assert_eq!(c.get(2), Some(&b"bbbb"[..]));
        assert_eq!(c.get(3), Some(&b"cccc"[..]));
        // 2 was touched again and 3 is fresh, so the clock clears and takes 2's slot next.
        c.insert(4).copy_from_slice(b"dddd");
        assert_eq!(c.pages.len(), 8);
        assert_eq!(c.get(4), Some(&b"dddd"[..]));
        c.forget(4);
        assert!(c.get(4).is_none());
    }
}
