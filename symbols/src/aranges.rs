//! `.debug_aranges`: which compilation unit describes the code at an address, read without
//! opening any unit. A large image's lookups go straight to the one unit that can answer them
//! instead of indexing every unit's names first.

use crate::bytes::Reader;

/// The address ranges of every unit the section lists, sorted by start.
#[derive(Debug, Default)]
pub(crate) struct Aranges {
    /// (start, end, offset of the unit in `.debug_info`), link-time addresses.
    ranges: Vec<(u64, u64, u64)>,
}

impl Aranges {
    /// Reads `section`. A set or entry that does not parse ends the reading there: what was
    /// read before it stays, and an address it would have covered is simply not found (the
    /// caller then asks the full index). Entries are at least 16 bytes, so the table is never
    /// larger than the section.
    pub(crate) fn read(section: Reader) -> Aranges {
        let mut ranges = Vec::new();
        let mut headers = gimli::DebugAranges::from(section).headers();
        while let Ok(Some(header)) = headers.next() {
            let unit = header.debug_info_offset().0 as u64;
            let mut entries = header.entries();
            while let Ok(Some(entry)) = entries.next() {
                let range = entry.range();
                if range.begin < range.end {
                    ranges.push((range.begin, range.end, unit));
                }
            }
        }
        ranges.sort_unstable();
        Aranges { ranges }
    }

    /// The unit whose code holds link-time `address`, if a range says so.
    pub(crate) fn unit_at(&self, address: u64) -> Option<u64> {
        let after = self
            .ranges
            .partition_point(|&(start, _, _)| start <= address);
        let &(_, end, unit) = self.ranges.get(after.checked_sub(1)?)?;
        (address < end).then_some(unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_in_the_range_below_it_or_in_none() {
        let aranges = Aranges {
            ranges: vec![
                (0x1000, 0x1100, 0),
                (0x1100, 0x1200, 0x40),
                (0x2000, 0x2010, 0x80),
            ],
        };
        assert_eq!(aranges.unit_at(0x1000), Some(0));
        assert_eq!(aranges.unit_at(0x10ff), Some(0));
        assert_eq!(aranges.unit_at(0x1100), Some(0x40));
        assert_eq!(aranges.unit_at(0x1200), None);
        assert_eq!(aranges.unit_at(0xfff), None);
        assert_eq!(aranges.unit_at(0x200f), Some(0x80));
        assert_eq!(aranges.unit_at(u64::MAX), None);
    }
}
