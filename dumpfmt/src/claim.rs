//! What a dump's headers say of its length, and the limits past which a claim is not believed:
//! shared by the format readers, which compute claims, and the gzip inflater, which stops at them.

/// More header than any /proc/kcore or gzipped core has (a few program headers per RAM range,
/// and notes): a bigger claim is not a header.
pub(crate) const HEADERS_MAX: u64 = 16 << 20;

/// More than any dump that is gzipped whole (4 TiB): a gzipped dump whose headers claim more is
/// refused rather than inflated.
pub(crate) const INFLATED_MAX: u64 = 1 << 42;

/// What a dump's headers, as far as they are inflated, say of its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The headers go on: inflate up to this offset and ask again.
    Need(u64),
    /// Nothing of the dump lies at or past this offset.
    End(u64),
}
