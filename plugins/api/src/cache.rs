//! A direct-mapped cache, for what a renderer works out once per format or call site and then
//! needs for millions of records: each key has one slot, picked by its hash, and a key that lands
//! where another is kept replaces it. A lookup is one multiplication and one comparison; memory is
//! fixed however many keys a damaged log makes up; a collision only makes the value again.

pub struct DirectMapped<K, V> {
    slots: Box<[Option<(K, V)>]>,
    /// 64 less the slots' bits: how far a spread hash is shifted to give its slot.
    shift: u32,
}

impl<K: Eq, V> DirectMapped<K, V> {
    /// A cache of 2^`bits` slots (1 to 24 bits), all empty.
    pub fn new(bits: u32) -> Self {
        let bits = bits.clamp(1, 24);
        DirectMapped {
            slots: std::iter::repeat_with(|| None).take(1 << bits).collect(),
            shift: 64 - bits,
        }
    }

    /// The value kept for `key`, or `make`'s, kept in its slot. `hash` is the key's words that
    /// differ most between keys, mixed by the caller; it is spread here (Fibonacci hashing), so
    /// that keys differing only in low or high bits still take different slots.
    // Inline: `klog` looks up once a record, and left to itself the compiler made it a call.
    #[inline]
    pub fn get_or_insert_with(&mut self, key: K, hash: u64, make: impl FnOnce(&K) -> V) -> &mut V {
        let at = (hash.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize;
        // Already below the slots' count, a power of two: the mask costs no division.
        let slot = &mut self.slots[at & (self.slots.len() - 1)];
        if !matches!(slot, Some((kept, _)) if *kept == key) {
            *slot = None;
        }
        &mut slot
            .get_or_insert_with(|| {
                let value = make(&key);
                (key, value)
            })
            .1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With four times more keys than slots, so that many share one, every value is the one
    /// making it gives, and a key asked for again at once is not made again.
    #[test]
    fn values_are_what_making_them_gives_whatever_shares_a_slot() {
        let mut cache = DirectMapped::new(10);
        for key in (0..4u64 << 10).map(|i| 0xffff_ffff_8100_0000 + 8 * i) {
            let mut made = 0;
            for _ in 0..2 {
                let value = *cache.get_or_insert_with(key, key, |k| {
                    made += 1;
                    k / 8 % 3
                });
                assert_eq!(value, key / 8 % 3, "{key:#x}");
            }
            assert_eq!(made, 1, "{key:#x} made again");
        }
    }

    /// Keys that share a slot (here: the same hash) take turns: each one back is made again,
    /// never given the other's value.
    #[test]
    fn a_key_back_in_a_taken_slot_is_made_again() {
        let mut cache = DirectMapped::new(10);
        let mut made = Vec::new();
        for key in [1u64, 2, 1, 2] {
            let value = *cache.get_or_insert_with(key, 0, |&k| {
                made.push(k);
                k + 100
            });
            assert_eq!(value, key + 100);
        }
        assert_eq!(made, [1, 2, 1, 2]);
    }
}
