//! The namespaces of one unit as ranges of DIE offsets, to give a type its path
//! (`core::sync::atomic::AtomicU64`). DWARF has no links from a DIE to its parent, so one walk
//! of the unit records where each namespace's children start and end.

use gimli::constants as dw;

use crate::bytes::Reader;

/// One namespace: the offsets of its subtree, its enclosing namespace, its full path.
#[derive(Debug)]
struct Range {
    start: usize,
    end: usize,
    parent: Option<usize>,
    path: Box<str>,
}

/// All namespaces of a unit, in section order.
#[derive(Debug, Default)]
pub(crate) struct Namespaces {
    ranges: Vec<Range>,
}

impl Namespaces {
    pub(crate) fn read(
        dwarf: &gimli::Dwarf<Reader>,
        unit: &gimli::Unit<Reader>,
    ) -> gimli::Result<Namespaces> {
        let mut ranges: Vec<Range> = Vec::new();
        // DIEs with children still open: their depth, and their range if a namespace.
        let mut open: Vec<(isize, Option<usize>)> = Vec::new();
        let mut entries = unit.entries_raw(None)?;
        while !entries.is_empty() {
            let depth = entries.next_depth();
            let offset = entries.next_offset().0;
            let Some(abbrev) = entries.read_abbreviation()? else {
                continue;
            };
            while let Some(&(open_depth, namespace)) = open.last() {
                if open_depth < depth {
                    break;
                }
                open.pop();
                if let Some(range) = namespace.and_then(|i| ranges.get_mut(i)) {
                    range.end = offset;
                }
            }
            let mut namespace = None;
            if abbrev.tag() == dw::DW_TAG_namespace {
                let mut name = None;
                for spec in abbrev.attributes() {
                    let attr = entries.read_attribute(*spec)?;
                    if attr.name() == dw::DW_AT_name {
                        name = crate::strings::string(dwarf, unit, attr.value());
                    }
                }
                let parent = open.iter().rev().find_map(|&(_, namespace)| namespace);
                let name = name.as_deref().unwrap_or("{anonymous}");
                let path = match parent.and_then(|i| ranges.get(i)) {
                    Some(parent) => format!("{}::{name}", parent.path),
                    None => name.to_owned(),
                };
                namespace = Some(ranges.len());
                ranges.push(Range {
                    start: offset,
                    // A namespace without children holds nothing.
                    end: if abbrev.has_children() {
                        usize::MAX
                    } else {
                        offset
                    },
                    parent,
                    path: path.into(),
                });
            } else {
                entries.skip_attributes(abbrev.attributes())?;
            }
            if abbrev.has_children() {
                open.push((depth, namespace));
            }
        }
        Ok(Namespaces { ranges })
    }

    /// The path of the innermost namespace holding the DIE at unit offset `offset`.
    pub(crate) fn path_of(&self, offset: usize) -> Option<&str> {
        // The last namespace starting before the DIE is the innermost holding it, or inside
        // that one: walking up from it finds it.
        let mut at = self
            .ranges
            .partition_point(|r| r.start < offset)
            .checked_sub(1);
        while let Some(range) = at.and_then(|i| self.ranges.get(i)) {
            if offset < range.end {
                return Some(&range.path);
            }
            at = range.parent;
        }
        None
    }
}
