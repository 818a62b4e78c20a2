//! Checks an oracle against the dump itself, with gdb as the reader: every slot of every ring
//! holds exactly the words the oracle says (header, id, proc_dom, clock, desc, data), slots the
//! oracle never wrote are zero, each `desc` points at its format string, and the KLogs entries
//! and klogClockHz hold what the kernel set; and the image's read-only segments (code, format
//! strings) are byte for byte what the dump holds, so the image is the one that ran. gdb reads the `paging=true` ELF dump through the
//! kernel's virtual addresses, so this is independent of kcrash and of klog-runtime's code.

use crate::expected::{Digest, Expected, Fnv1a, Ring, RECORD_BYTES};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// Words per KLog control block and per record.
const WORDS: usize = 8;
/// Index of `next_write` and `buffer` in a KLog control block.
const KLOG_BUFFER: usize = 5;
const KLOG_NEXT_WRITE: usize = 7;

/// Where the kernel's statics are: `symbol_prefix` is the Rust path of the module that
/// invoked `klog_config!` (`bare::platform::` for the bare kernel).
pub struct Symbols<'a> {
    pub prefix: &'a str,
}

/// Runs the checks; `scratch` receives gdb's memory dumps.
pub fn check(
    image: &Path,
    elf_paging_dump: &Path,
    expected: &Expected,
    symbols: &Symbols,
    scratch: &Path,
) -> Result<()> {
    let mut script = String::new();
    let region = |name: &str| scratch.join(format!("{name}.bin"));
    for ring in &expected.rings {
        let end = ring.buffer + ring.num_recs * RECORD_BYTES;
        let path = region(&format!("ring{}", ring.ring));
        writeln!(
            script,
            "dump binary memory {} {:#x} {end:#x}",
            path.display(),
            ring.buffer
        )?;
    }
    let mut formats: BTreeMap<u64, &str> = BTreeMap::new();
    for ring in &expected.rings {
        for event in ring.records.iter().filter_map(|r| r.event.as_ref()) {
            if let Some(previous) = formats.insert(event.desc, &event.format) {
                if previous != event.format {
                    bail!(
                        "desc {:#x} is both {previous:?} and {:?}",
                        event.desc,
                        event.format
                    );
                }
            }
        }
    }
    for (desc, format) in &formats {
        let path = region(&format!("desc-{desc:x}"));
        let end = desc + format.len() as u64 + 1;
        writeln!(
            script,
            "dump binary memory {} {desc:#x} {end:#x}",
            path.display()
        )?;
    }
    // `dump value` writes a variable's bytes as they are in the dump, whatever its type.
    let p = symbols.prefix;
    writeln!(
        script,
        "dump binary value {} {p}KLogs",
        region("klogs").display()
    )?;
    writeln!(
        script,
        "dump binary value {} {p}klogClockHz",
        region("clockhz").display()
    )?;
    let image_bytes =
        std::fs::read(image).with_context(|| format!("reading {}", image.display()))?;
    let segments =
        read_only_segments(&image_bytes).with_context(|| format!("parsing {}", image.display()))?;
    for (index, (address, data)) in segments.iter().enumerate() {
        let end = address + data.len() as u64;
        let path = region(&format!("segment{index}"));
        writeln!(
            script,
            "dump binary memory {} {address:#x} {end:#x}",
            path.display()
        )?;
    }
    let script_path = scratch.join("check.gdb");
    std::fs::write(&script_path, &script)?;
    let output = Command::new(crate::tools::GDB)
        .args(["-nx", "-batch", "-x"])
        .arg(&script_path)
        .arg(image)
        .arg(elf_paging_dump)
        .output()
        .context("running gdb")?;
    if !output.status.success() {
        bail!(
            "gdb failed ({}): {}\nscript:\n{script}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let read = |name: &str| -> Result<Vec<u64>> {
        let path = region(name);
        let bytes = std::fs::read(&path).with_context(|| {
            format!(
                "gdb wrote no {} (stderr: {})",
                path.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            )
        })?;
        Ok(bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    };

    for ring in &expected.rings {
        let words = read(&format!("ring{}", ring.ring))?;
        if let Some(digest) = &ring.digest {
            check_digest(ring, digest, &words)?;
            continue;
        }
        let mut seen = vec![false; ring.num_recs as usize];
        for record in &ring.records {
            let index = record.slot as usize;
            let got = words
                .get(index * WORDS..(index + 1) * WORDS)
                .with_context(|| {
                    format!("ring {} slot {index} is outside the ring", ring.ring_name)
                })?;
            seen[index] = true;
            match &record.event {
                Some(event) => {
                    if got != event.words {
                        bail!(
                            "ring {} slot {index} (seq {}): dump has {got:x?}, oracle says {:x?}",
                            ring.ring_name,
                            record.seq,
                            event.words
                        );
                    }
                }
                None => {
                    if got[0] != 0 {
                        bail!(
                            "ring {} slot {index}: torn slot has header {:#x}, not 0",
                            ring.ring_name,
                            got[0]
                        );
                    }
                }
            }
        }
        for (index, _) in seen.iter().enumerate().filter(|(_, seen)| !**seen) {
            let got = &words[index * WORDS..(index + 1) * WORDS];
            if got.iter().any(|&w| w != 0) {
                bail!("ring {} slot {index}: the oracle wrote nothing there but the dump has {got:x?}", ring.ring_name);
            }
        }
    }
    for (desc, format) in &formats {
        let bytes = std::fs::read(region(&format!("desc-{desc:x}")))?;
        let want: Vec<u8> = format.bytes().chain([0]).collect();
        if bytes != want {
            bail!(
                "desc {desc:#x}: dump has {:?}, oracle format is {format:?}",
                String::from_utf8_lossy(&bytes)
            );
        }
    }
    for (index, (address, data)) in segments.iter().enumerate() {
        let path = region(&format!("segment{index}"));
        if std::fs::read(&path).with_context(|| format!("gdb wrote no {}", path.display()))?
            != *data
        {
            bail!("the image's segment at {address:#x} differs from the dump: not the kernel that ran");
        }
    }
    let klogs = read("klogs")?;
    if klogs.len() != expected.rings.len() * WORDS {
        bail!(
            "KLogs has {} words, the oracle has {} rings",
            klogs.len(),
            expected.rings.len()
        );
    }
    for (index, ring) in expected.rings.iter().enumerate() {
        let entry = &klogs[index * WORDS..(index + 1) * WORDS];
        let mut want_next = ring.written * WORDS as u64;
        let mut want_buffer = ring.buffer;
        for untrusted in &ring.untrusted {
            match untrusted.field.as_str() {
                "next_write" => want_next = untrusted.value,
                "buffer" => want_buffer = untrusted.value,
                other => bail!("ring {}: unknown scribbled field {other}", ring.ring_name),
            }
        }
        if entry[KLOG_NEXT_WRITE] != want_next || entry[KLOG_BUFFER] != want_buffer {
            bail!(
                "KLogs[{index}] ({}): next_write {:#x} buffer {:#x}, oracle says {want_next:#x} and {want_buffer:#x}",
                ring.ring_name,
                entry[KLOG_NEXT_WRITE],
                entry[KLOG_BUFFER]
            );
        }
    }
    let clock_hz = read("clockhz")?;
    if clock_hz.first() != Some(&expected.clock_hz) {
        bail!(
            "klogClockHz is {clock_hz:?}, oracle says {}",
            expected.clock_hz
        );
    }
    Ok(())
}

/// A big ring's records, oldest first, must hash to the kernel's digest.
fn check_digest(ring: &Ring, digest: &Digest, words: &[u64]) -> Result<()> {
    if digest.records != ring.written.min(ring.num_recs) {
        bail!(
            "ring {}: digest of {} records for {} written",
            ring.ring_name,
            digest.records,
            ring.written
        );
    }
    let mut hash = Fnv1a::default();
    for seq in ring.written - digest.records..ring.written {
        let slot = (seq % ring.num_recs) as usize;
        hash.words(&words[slot * WORDS..(slot + 1) * WORDS]);
    }
    if hash.finish() != digest.fnv1a {
        bail!(
            "ring {}: the dump's records hash to {:#x}, the kernel's digest is {:#x}",
            ring.ring_name,
            hash.finish(),
            digest.fnv1a
        );
    }
    Ok(())
}

/// The image's loaded, non-writable segments (address, file bytes): what the running kernel
/// cannot have changed.
fn read_only_segments(elf: &[u8]) -> Result<Vec<(u64, &[u8])>> {
    use object::{Object, ObjectSegment, SegmentFlags};
    let file = object::File::parse(elf)?;
    let mut segments = Vec::new();
    for segment in file.segments() {
        const PF_W: u32 = 2;
        let SegmentFlags::Elf { p_flags } = segment.flags() else {
            bail!("not an ELF image");
        };
        let data = segment.data()?;
        if p_flags & PF_W == 0 && !data.is_empty() {
            segments.push((segment.address(), data));
        }
    }
    if segments.is_empty() {
        bail!("no read-only loaded segment");
    }
    Ok(segments)
}
