//! Checks that a core really holds what its oracle says: every expected record's eight words at
//! its address, header 0 at each torn slot, and no bytes at the addresses of strings the program
//! unmapped. This proves each corpus entry consistent (the right core for the right log) with a
//! reader independent of kcrash: the object crate's ELF parser and the record layout of the
//! design, written out here.

use anyhow::{anyhow, bail, Context, Result};
use object::read::elf::{ElfFile64, ProgramHeader};
use object::{elf, Endianness};
use std::io::Read;
use std::path::Path;

use crate::dump::Magic;
use crate::expected::{Expected, Fnv1a, Ring};

/// A core's file contents (decompressed if the file is gzip).
pub fn load(path: &Path) -> Result<Vec<u8>> {
    let mut bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(bytes.as_slice())
            .read_to_end(&mut plain)
            .with_context(|| format!("gunzipping {}", path.display()))?;
        bytes = plain;
    }
    Ok(bytes)
}

/// The memory image a core holds: its PT_LOAD segments' file bytes by virtual address.
pub struct Memory<'a> {
    segments: Vec<(u64, &'a [u8])>,
}

impl<'a> Memory<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Memory<'a>> {
        if Magic::identify(bytes) != Some(Magic::ElfCore) {
            bail!("not a 64-bit little-endian x86_64 or AArch64 ELF core");
        }
        let file = ElfFile64::<Endianness>::parse(bytes).context("parsing the ELF core")?;
        let endian = file.endian();
        let mut segments = Vec::new();
        for ph in file.elf_program_headers() {
            if ph.p_type(endian) != elf::PT_LOAD {
                continue;
            }
            let data = ph
                .data(endian, bytes)
                .map_err(|()| anyhow!("a PT_LOAD lies outside the file"))?;
            segments.push((ph.p_vaddr(endian), data));
        }
        Ok(Memory { segments })
    }

    /// The bytes at `addr..addr + len`, if one segment's file data holds them all.
    pub fn read(&self, addr: u64, len: u64) -> Option<&'a [u8]> {
        self.segments.iter().find_map(|&(start, data)| {
            let offset = addr.checked_sub(start)?;
            let end = offset.checked_add(len)?;
            data.get(usize::try_from(offset).ok()?..usize::try_from(end).ok()?)
        })
    }

    fn words<const N: usize>(&self, addr: u64) -> Option<[u64; N]> {
        let bytes = self.read(addr, N as u64 * 8)?;
        let mut words = [0u64; N];
        for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
            *w = u64::from_le_bytes(chunk.try_into().ok()?);
        }
        Some(words)
    }
}

/// What [`verify`] checked.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verified {
    pub records: usize,
    pub torn: usize,
    pub unreadable_strings: usize,
}

/// Checks the core's memory against the expected result.
pub fn verify(memory: &Memory, expected: &Expected) -> Result<Verified> {
    let mut verified = Verified::default();
    for ring in &expected.rings {
        for record in &ring.records {
            let at = ring.slot_address(record.slot);
            let got: [u64; 8] = memory.words(at).ok_or_else(|| {
                anyhow!(
                    "ring {}: record {} at {at:#x} is not in the core",
                    ring.ring_name,
                    record.seq
                )
            })?;
            let Some(event) = &record.event else {
                // A torn reservation: header 0, the rest whatever the slot held before.
                if got[0] != 0 {
                    bail!(
                        "ring {}: torn record {} at {at:#x} has header {:#x}",
                        ring.ring_name,
                        record.seq,
                        got[0]
                    );
                }
                verified.torn += 1;
                continue;
            };
            if got != event.words {
                bail!(
                    "ring {}: record {} at {at:#x} holds {got:x?}, the oracle says {:x?}",
                    ring.ring_name,
                    record.seq,
                    event.words
                );
            }
            for &unreadable in &event.unreadable_at {
                if memory.read(unreadable, 1).is_some() {
                    bail!(
                        "ring {}: record {}: {unreadable:#x} should be absent from the core",
                        ring.ring_name,
                        record.seq
                    );
                }
                verified.unreadable_strings += 1;
            }
            verified.records += 1;
        }
        if let Some(digest) = &ring.digest {
            let got = digest_in(memory, ring, digest.records, digest.last_seq)?;
            if got != digest.fnv1a {
                bail!(
                    "ring {}: the core's records digest to {got:#x}, the oracle says {:#x}",
                    ring.ring_name,
                    digest.fnv1a
                );
            }
            verified.records += digest.records as usize;
        }
    }
    Ok(verified)
}

/// FNV-1a 64 over the little-endian words of the ring's last `records` records up to sequence
/// number `last_seq`, oldest first: the big rings' digest, computed from the core.
fn digest_in(memory: &Memory, ring: &Ring, records: u64, last_seq: u64) -> Result<u64> {
    let first = (last_seq + 1).checked_sub(records).ok_or_else(|| {
        anyhow!(
            "ring {}: {records} records up to {last_seq}",
            ring.ring_name
        )
    })?;
    let mut hash = Fnv1a::default();
    for seq in first..=last_seq {
        let at = ring.slot_address(seq % ring.num_recs);
        let words: [u64; 8] = memory.words(at).ok_or_else(|| {
            anyhow!(
                "ring {}: record {seq} at {at:#x} is not in the core",
                ring.ring_name
            )
        })?;
        hash.words(&words);
    }
    Ok(hash.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_cores_are_refused() {
        assert!(Memory::parse(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0\x3e\0").is_err());
        assert!(Memory::parse(b"not an elf").is_err());
    }
}
