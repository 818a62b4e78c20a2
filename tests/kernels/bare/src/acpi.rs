//! Just enough ACPI to list the processors: RSDP → RSDT or XSDT → MADT ("APIC"). Every table is
//! checked (signature, length, checksum) before it is believed; tables outside the first GiB,
//! which the boot page tables map, are not read.

use crate::pvh::KERNEL_VMA;

/// The mapped physical range (the first GiB, at KERNEL_VMA).
const MAPPED: u64 = 1 << 30;
/// No table of this kernel's firmware comes near this; a bigger length is garbage.
const MAX_TABLE: u64 = 1 << 20;
const HEADER: usize = 36;

/// `len` bytes of physical memory at `pa`, if the boot page tables map them all.
fn phys(pa: u64, len: u64) -> Option<&'static [u8]> {
    if pa == 0 || pa.checked_add(len)? > MAPPED {
        return None;
    }
    // SAFETY: the range lies in the first GiB, mapped read-write at KERNEL_VMA; firmware
    // tables are not written while the kernel runs.
    Some(unsafe { core::slice::from_raw_parts((KERNEL_VMA + pa) as *const u8, len as usize) })
}

fn checksum_ok(bytes: &[u8]) -> bool {
    bytes.iter().fold(0u8, |sum, b| sum.wrapping_add(*b)) == 0
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// The root table from the RSDP at `pa`: (its address, bytes per entry), XSDT when there is one.
fn root_from_rsdp(pa: u64) -> Option<(u64, usize)> {
    let v1 = phys(pa, 20)?;
    if &v1[..8] != b"RSD PTR " || !checksum_ok(v1) {
        return None;
    }
    if v1[15] >= 2 {
        let v2 = phys(pa, 36)?;
        let xsdt = u64_at(v2, 24)?;
        if checksum_ok(v2) && xsdt != 0 {
            return Some((xsdt, 8));
        }
    }
    Some((u64::from(u32_at(v1, 16)?), 4))
}

/// The RSDP where ACPI says to look without a hint: the first KiB of the EBDA, then
/// 0xe0000-0xfffff, on 16-byte boundaries.
fn scan_bios() -> Option<(u64, usize)> {
    let ebda = phys(0x40e, 2).map(|s| u64::from(u16::from_le_bytes([s[0], s[1]])) << 4);
    let ebda = ebda.filter(|&e| e != 0).map(|e| e..e + 1024);
    ebda.into_iter()
        .chain(core::iter::once(0xe0000..0x100000))
        .flat_map(|range| range.step_by(16))
        .find_map(root_from_rsdp)
}

/// The system description table at `pa`, whole, if its length and checksum hold.
fn table(pa: u64) -> Option<&'static [u8]> {
    let len = u64::from(u32_at(phys(pa, HEADER as u64)?, 4)?);
    if !(HEADER as u64..=MAX_TABLE).contains(&len) {
        return None;
    }
    let bytes = phys(pa, len)?;
    checksum_ok(bytes).then_some(bytes)
}

/// The MADT's bytes, from the RSDP at `rsdp` (0: none given) or found in the BIOS areas.
pub fn madt(rsdp: u64) -> Result<&'static [u8], &'static str> {
    let (root, entry) = root_from_rsdp(rsdp)
        .or_else(scan_bios)
        .ok_or("no valid RSDP")?;
    let root = table(root).ok_or("RSDT/XSDT unreadable or bad checksum")?;
    root[HEADER..]
        .chunks_exact(entry)
        .filter_map(|e| match entry {
            4 => u32_at(e, 0).map(u64::from),
            _ => u64_at(e, 0),
        })
        .filter_map(table)
        .find(|t| &t[..4] == b"APIC")
        .ok_or("no valid MADT")
}

/// The local APIC IDs of the processors the MADT marks enabled, in its order. Entries that do
/// not fit the table end the walk.
pub fn enabled_lapic_ids(madt: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let mut at = HEADER + 8; // local APIC address, flags
    core::iter::from_fn(move || {
        let (&kind, &len) = (madt.get(at)?, madt.get(at + 1)?);
        let entry = madt.get(at..at + usize::from(len)).filter(|_| len >= 2)?;
        at += usize::from(len);
        Some((kind, entry))
    })
    .filter_map(|(kind, entry)| match (kind, u32_at(entry, 4)) {
        // Processor Local APIC: processor UID, APIC ID, flags (bit 0: enabled).
        (0, Some(flags)) if flags & 1 != 0 => Some(entry[3]),
        _ => None,
    })
}
