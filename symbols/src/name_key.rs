//! What the name indexes are keyed by, shared by the index built by scanning, the index cache
//! and `.debug_names`: the kind of name, and a name's hash.

/// Which names an index holds. Each is built by its own scan on the first lookup of its kind,
/// so finding a variable never pays for indexing every type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// Global variables (outside any function or type).
    Variables,
    /// Named structs, classes, unions, enums, typedefs and base types.
    Types,
}

/// A 64-bit hash of a name, built a `::`-separated segment at a time so that a path can be
/// hashed as its namespaces open, without building the string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct NameHash(u64);

const K: u64 = 0x517c_c1b7_2722_0a95;

impl NameHash {
    /// The hash of a looked-up name: its segments split at `::` outside angle brackets, as
    /// the index hashed the namespaces and the name of each DIE.
    pub(crate) fn of(name: &str) -> NameHash {
        if let Some(name) = name.strip_prefix("struct ") {
            return NameHash::keyword(b"struct ", name.as_bytes());
        }
        if let Some(name) = name.strip_prefix("union ") {
            return NameHash::keyword(b"union ", name.as_bytes());
        }
        if let Some(name) = name.strip_prefix("enum ") {
            return NameHash::keyword(b"enum ", name.as_bytes());
        }
        let mut hash = None;
        let mut rest = name;
        while let Some(end) = path_separator(rest) {
            hash = Some(NameHash::child(hash, &rest.as_bytes()[..end]));
            rest = &rest[end + 2..];
        }
        NameHash::child(hash, rest.as_bytes())
    }

    /// The hash itself, as a cache file stores it.
    pub(crate) fn value(self) -> u64 {
        self.0
    }

    /// `prefix::name`, or `name` at the top level.
    pub(crate) fn child(prefix: Option<NameHash>, name: &[u8]) -> NameHash {
        let segment = segment(name);
        NameHash(match prefix {
            Some(prefix) => mix(prefix.0, segment),
            None => segment,
        })
    }

    /// C's `struct NAME` and the like.
    pub(crate) fn keyword(keyword: &[u8], name: &[u8]) -> NameHash {
        NameHash(mix(segment(keyword), segment(name)))
    }
}

/// The first `::` outside angle brackets in `name`.
fn path_separator(name: &str) -> Option<usize> {
    let bytes = name.as_bytes();
    let mut depth = 0i32;
    for (i, &byte) in bytes.iter().enumerate() {
        match byte {
            b'<' => depth += 1,
            b'>' => depth -= 1,
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => return Some(i),
            _ => {}
        }
    }
    None
}

fn mix(hash: u64, word: u64) -> u64 {
    (hash.rotate_left(5) ^ word).wrapping_mul(K)
}

/// Hash of one segment, eight bytes at a step.
fn segment(bytes: &[u8]) -> u64 {
    let mut hash = (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        hash = mix(hash, u64::from_le_bytes(word));
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut word = [0u8; 8];
        word[..tail.len()].copy_from_slice(tail);
        hash = mix(hash, u64::from_le_bytes(word));
    }
    hash
}

/// The part of a looked-up name the DIE itself must carry: after the last `::` outside angle
/// brackets, without a C `struct `/`union `/`enum ` keyword.
pub(crate) fn last_segment(name: &str) -> &str {
    let mut rest = ["struct ", "union ", "enum "]
        .iter()
        .find_map(|keyword| name.strip_prefix(keyword))
        .unwrap_or(name);
    while let Some(end) = path_separator(rest) {
        rest = &rest[end + 2..];
    }
    rest
}
