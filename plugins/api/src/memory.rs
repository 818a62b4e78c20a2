//! The crashed system's memory as kcrash's commands see it: kernel virtual addresses that either
//! read or say why they cannot.

/// Why a range of memory could not be read, with the first address that failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{addr:#x}: {reason}")]
pub struct Unreadable {
    pub addr: u64,
    pub reason: String,
}

impl Unreadable {
    /// Why the dump could not give `addr`, from the dump reader's error.
    pub fn from_dump(addr: u64, e: dumpfmt::Error) -> Unreadable {
        match e {
            dumpfmt::Error::Virt { addr, reason, .. } => Unreadable {
                addr,
                reason: reason.to_string(),
            },
            dumpfmt::Error::Phys { addr, reason, .. } => Unreadable {
                addr,
                reason: reason.to_string(),
            },
            other => Unreadable {
                addr,
                reason: other.to_string(),
            },
        }
    }
}

/// Memory of the crashed (or live) system by virtual address.
pub trait Memory {
    /// Fills `buf` from `addr`, or says which address failed and why.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unreadable>;

    fn read_u64(&self, addr: u64) -> Result<u64, Unreadable> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// An unsigned little-endian integer of `size` bytes (1 to 8).
    fn read_uint(&self, addr: u64, size: u64) -> Result<u64, Unreadable> {
        let mut b = [0u8; 8];
        let n = size.clamp(1, 8) as usize;
        self.read(addr, &mut b[..n])?;
        Ok(u64::from_le_bytes(b))
    }

    /// The NUL-terminated string at `addr` (without the NUL), at most `max` bytes. Read in small
    /// pieces that never cross a page, so that a string ending just before unreadable memory
    /// still reads and a short string costs a short read.
    fn read_cstring(&self, addr: u64, max: usize, out: &mut Vec<u8>) -> Result<(), Unreadable> {
        const PIECE: usize = 128;
        out.clear();
        let mut at = addr;
        while out.len() < max {
            let page_left = (0x1000 - (at & 0xfff)) as usize;
            let want = page_left.min(max - out.len()).min(PIECE);
            let mut chunk = [0u8; PIECE];
            self.read(at, &mut chunk[..want])?;
            if let Some(nul) = chunk[..want].iter().position(|&b| b == 0) {
                out.extend_from_slice(&chunk[..nul]);
                return Ok(());
            }
            out.extend_from_slice(&chunk[..want]);
            at = at.wrapping_add(want as u64);
        }
        Ok(())
    }
}

/// A dump's memory through a set of translations.
impl Memory for dumpfmt::AddressSpace<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unreadable> {
        self.read_virt(addr, buf)
            .map_err(|e| Unreadable::from_dump(addr, e))
    }
}

/// Memory for tests and fuzz targets: a few byte runs, each at its address; a read must lie
/// inside one run. `Runs(Vec::new())` is memory with nothing in it.
pub struct Runs(pub Vec<(u64, Vec<u8>)>);

impl Memory for Runs {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unreadable> {
        for (base, bytes) in &self.0 {
            let at = addr.wrapping_sub(*base);
            if addr >= *base && at.saturating_add(buf.len() as u64) <= bytes.len() as u64 {
                buf.copy_from_slice(&bytes[at as usize..at as usize + buf.len()]);
                return Ok(());
            }
        }
        Err(Unreadable {
            addr,
            reason: "not in the memory given".into(),
        })
    }
}
