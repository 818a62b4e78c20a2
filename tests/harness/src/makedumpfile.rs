//! makedumpfile, the reference producer of kdump files: running it, the ELF it can read, and
//! the dumps the Linux guest makes with it.

use crate::tools;
use anyhow::{bail, Context, Result};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// `makedumpfile FLAGS input output` (e.g. `-l -d 31`); the error holds what it printed.
pub fn run(flags: &[&str], input: &Path, output: &Path) -> Result<()> {
    let result = Command::new(tools::MAKEDUMPFILE)
        .args(flags)
        .arg(input)
        .arg(output)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running makedumpfile {}", flags.join(" ")))?;
    if !result.status.success() {
        bail!(
            "makedumpfile {} {} failed ({}): {}{}",
            flags.join(" "),
            input.display(),
            result.status,
            // Its progress lines end in carriage returns.
            String::from_utf8_lossy(&result.stdout).replace('\r', "\n"),
            String::from_utf8_lossy(&result.stderr).trim()
        );
    }
    Ok(())
}

/// `makedumpfile -R output < flattened`: rebuilds the plain kdump-compressed file.
pub fn unflatten(flattened: &Path, output: &Path) -> Result<()> {
    let input = std::fs::File::open(flattened)
        .with_context(|| format!("opening {}", flattened.display()))?;
    let result = Command::new(tools::MAKEDUMPFILE)
        .arg("-R")
        .arg(output)
        .stdin(input)
        .output()
        .context("running makedumpfile -R")?;
    if !result.status.success() {
        bail!(
            "makedumpfile -R {} failed ({}): {}",
            output.display(),
            result.status,
            String::from_utf8_lossy(&result.stderr).trim()
        );
    }
    Ok(())
}

/// makedumpfile reads an ELF's program headers right after its 64-byte ELF header, whatever
/// e_phoff says; QEMU 7.2 puts its section headers there and its program headers at 192 (and
/// writes e_ehsize 8). Copies `elf` to `out` with the program headers moved to 64, the section
/// headers after them, e_ehsize 64: every byte of memory and notes unchanged.
pub fn elf_for_makedumpfile(elf: &Path, out: &Path) -> Result<()> {
    let _ = std::fs::remove_file(out);
    std::fs::copy(elf, out)
        .with_context(|| format!("copying {} to {}", elf.display(), out.display()))?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(out)?;
    let mut header = [0u8; 64];
    file.read_exact_at(&mut header, 0)?;
    let u16_at = |o: usize| u16::from_le_bytes([header[o], header[o + 1]]);
    let u64_at = |o: usize| u64::from_le_bytes(header[o..o + 8].try_into().unwrap_or_default());
    let (phoff, shoff) = (u64_at(32), u64_at(40));
    let (phentsize, phnum, shentsize, shnum) = (u16_at(54), u16_at(56), u16_at(58), u16_at(60));
    let mut phdrs = vec![0u8; usize::from(phentsize) * usize::from(phnum)];
    let mut shdrs = vec![0u8; usize::from(shentsize) * usize::from(shnum)];
    file.read_exact_at(&mut phdrs, phoff)?;
    file.read_exact_at(&mut shdrs, shoff)?;
    // The first thing after the headers: the lowest p_offset (the notes, then memory).
    let first_data = phdrs
        .chunks_exact(usize::from(phentsize).max(16))
        .map(|ph| u64::from_le_bytes(ph[8..16].try_into().unwrap_or_default()))
        .min()
        .unwrap_or(0);
    let headers_end = 64 + phdrs.len() as u64 + shdrs.len() as u64;
    if headers_end > first_data {
        bail!(
            "{}: the headers ({headers_end} bytes) do not fit before the data at {first_data}",
            elf.display()
        );
    }
    header[32..40].copy_from_slice(&64u64.to_le_bytes());
    header[40..48].copy_from_slice(&(64 + phdrs.len() as u64).to_le_bytes());
    header[52..54].copy_from_slice(&64u16.to_le_bytes());
    file.write_all_at(&header, 0)?;
    file.write_all_at(&phdrs, 64)?;
    file.write_all_at(&shdrs, 64 + phdrs.len() as u64)?;
    Ok(())
}

/// One makedumpfile run on the ELF: its flags, the file it writes, what that is.
pub struct MakedumpfileRun {
    pub flags: &'static [&'static str],
    pub file: &'static str,
    pub format: &'static str,
    pub compression: &'static str,
    pub dump_level: u8,
}

pub const MAKEDUMPFILE_RUNS: [MakedumpfileRun; 5] = [
    MakedumpfileRun {
        flags: &["-c", "-d", "31"],
        file: "vmcore-c-d31.kdump",
        format: "kdump",
        compression: "zlib",
        dump_level: 31,
    },
    MakedumpfileRun {
        flags: &["-c", "-d", "0"],
        file: "vmcore-c-d0.kdump",
        format: "kdump",
        compression: "zlib",
        dump_level: 0,
    },
    MakedumpfileRun {
        flags: &["-l", "-d", "31"],
        file: "vmcore-l-d31.kdump",
        format: "kdump",
        compression: "lzo",
        dump_level: 31,
    },
    MakedumpfileRun {
        flags: &["-l", "-d", "0"],
        file: "vmcore-l-d0.kdump",
        format: "kdump",
        compression: "lzo",
        dump_level: 0,
    },
    MakedumpfileRun {
        flags: &["-E", "-d", "31"],
        file: "vmcore-E-d31.elf",
        format: "elf",
        compression: "none",
        dump_level: 31,
    },
];

pub fn version() -> String {
    Command::new(tools::MAKEDUMPFILE)
        .arg("-v")
        .output()
        .ok()
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            text.lines()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| tools::MAKEDUMPFILE.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF core header laid out as QEMU 7.2 writes it: e_ehsize 8, two section headers at 64,
    /// `phnum` program headers at 192, the first segment's data at `data`.
    fn qemu_like_elf(phnum: u16, data: u64) -> Vec<u8> {
        let mut elf = vec![0u8; data as usize + 16];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[16..18].copy_from_slice(&4u16.to_le_bytes());
        elf[18..20].copy_from_slice(&62u16.to_le_bytes());
        elf[32..40].copy_from_slice(&192u64.to_le_bytes());
        elf[40..48].copy_from_slice(&64u64.to_le_bytes());
        for (at, value) in [
            (52, 8u16),
            (54, 56),
            (56, phnum),
            (58, 64),
            (60, 2),
            (62, 1),
        ] {
            elf[at..at + 2].copy_from_slice(&value.to_le_bytes());
        }
        for i in 0..usize::from(phnum) {
            let ph = 192 + i * 56;
            elf[ph..ph + 4].copy_from_slice(&(1 + i as u32).to_le_bytes());
            elf[ph + 8..ph + 16].copy_from_slice(&(data + i as u64).to_le_bytes());
        }
        elf[64 + 64 + 24..64 + 64 + 32].copy_from_slice(&data.to_le_bytes());
        elf[data as usize..].fill(0xab);
        elf
    }

    #[test]
    fn makedumpfile_gets_program_headers_at_64_and_the_same_data() {
        let dir = tempfile::tempdir().unwrap();
        let (qemu, copy) = (dir.path().join("qemu.elf"), dir.path().join("copy.elf"));
        let original = qemu_like_elf(3, 360);
        std::fs::write(&qemu, &original).unwrap();
        elf_for_makedumpfile(&qemu, &copy).unwrap();
        let moved = std::fs::read(&copy).unwrap();
        assert_eq!(moved.len(), original.len());
        assert_eq!(moved[32..40], 64u64.to_le_bytes());
        assert_eq!(moved[40..48], (64u64 + 3 * 56).to_le_bytes());
        assert_eq!(moved[52..54], 64u16.to_le_bytes());
        assert_eq!(moved[64..64 + 3 * 56], original[192..192 + 3 * 56]);
        assert_eq!(moved[232..360], original[64..192]);
        assert_eq!(moved[360..], original[360..]);
        // The original is untouched.
        assert_eq!(std::fs::read(&qemu).unwrap(), original);
    }

    #[test]
    fn headers_that_would_overwrite_data_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (qemu, copy) = (dir.path().join("qemu.elf"), dir.path().join("copy.elf"));
        // Three program headers and two section headers need 360 bytes; the notes start at 300.
        let mut elf = qemu_like_elf(3, 400);
        elf[192 + 8..192 + 16].copy_from_slice(&300u64.to_le_bytes());
        std::fs::write(&qemu, elf).unwrap();
        let err = elf_for_makedumpfile(&qemu, &copy).unwrap_err().to_string();
        assert!(err.contains("do not fit before the data at 300"), "{err}");
    }
}
