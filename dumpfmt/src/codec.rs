//! Page decompression for kdump files: zlib, LZO1X, snappy and zstd, by the page descriptor's
//! flag. Every decoder writes into the one page buffer it is given and must fill it exactly;
//! no size a page claims for itself sizes an allocation.

use flate2::{Decompress, FlushDecompress, Status};

use crate::lzo;

/// A compression named by a kdump page descriptor's `flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    Zlib,
    Lzo,
    Snappy,
    Zstd,
}

const DUMP_DH_COMPRESSED_ZLIB: u32 = 0x1;
const DUMP_DH_COMPRESSED_LZO: u32 = 0x2;
const DUMP_DH_COMPRESSED_SNAPPY: u32 = 0x4;
const DUMP_DH_COMPRESSED_ZSTD: u32 = 0x20;

/// zstd frames declare their window; libzstd compressing one page declares the page size
/// (single-segment frame). Refusing larger windows bounds the decoder's buffer.
const ZSTD_MAX_WINDOW: u64 = 1 << 20;
const ZSTD_MAGIC: u32 = 0xfd2f_b528;

impl Codec {
    /// The compression in a page descriptor's flags: None for a raw page (flags 0); an error
    /// for bits makedumpfile never writes or for more than one compression at once.
    pub fn from_flags(flags: u32) -> Result<Option<Codec>, String> {
        match flags {
            0 => Ok(None),
            DUMP_DH_COMPRESSED_ZLIB => Ok(Some(Codec::Zlib)),
            DUMP_DH_COMPRESSED_LZO => Ok(Some(Codec::Lzo)),
            DUMP_DH_COMPRESSED_SNAPPY => Ok(Some(Codec::Snappy)),
            DUMP_DH_COMPRESSED_ZSTD => Ok(Some(Codec::Zstd)),
            other => Err(format!(
                "page descriptor flags {other:#x} name no single known compression"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Codec::Zlib => "zlib",
            Codec::Lzo => "lzo",
            Codec::Snappy => "snappy",
            Codec::Zstd => "zstd",
        }
    }
}

/// Reusable decoder state: zlib's window and zstd's context are worth keeping between pages.
pub(crate) struct Decoders {
    inflate: Decompress,
    snappy: snap::raw::Decoder,
    zstd: zstd::bulk::Decompressor<'static>,
}

impl Decoders {
    pub fn new() -> Self {
        Decoders {
            inflate: Decompress::new(true),
            snappy: snap::raw::Decoder::new(),
            zstd: zstd::bulk::Decompressor::default(),
        }
    }

    /// Decode `src` into `page`, which it must fill exactly; otherwise why not.
    pub fn decode(&mut self, codec: Codec, src: &[u8], page: &mut [u8]) -> Result<(), String> {
        let written = match codec {
            Codec::Zlib => self.zlib(src, page)?,
            Codec::Lzo => lzo::decompress(src, page).map_err(|e| e.to_string())?,
            Codec::Snappy => self.snappy(src, page)?,
            Codec::Zstd => self.zstd(src, page)?,
        };
        if written != page.len() {
            return Err(format!(
                "decompresses to {written} bytes, not a whole page of {}",
                page.len()
            ));
        }
        Ok(())
    }

    fn zlib(&mut self, src: &[u8], page: &mut [u8]) -> Result<usize, String> {
        self.inflate.reset(true);
        match self.inflate.decompress(src, page, FlushDecompress::Finish) {
            Ok(Status::StreamEnd) => Ok(self.inflate.total_out() as usize),
            Ok(_) => Err(format!(
                "zlib stream does not end within a page ({} bytes written, {} of {} read)",
                self.inflate.total_out(),
                self.inflate.total_in(),
                src.len()
            )),
            Err(e) => Err(format!("zlib: {e}")),
        }
    }

    /// makedumpfile writes raw snappy (`snappy_compress`), which starts with the uncompressed
    /// length; it is checked against the page before anything is decoded.
    fn snappy(&mut self, src: &[u8], page: &mut [u8]) -> Result<usize, String> {
        let claimed = snap::raw::decompress_len(src).map_err(|e| format!("snappy: {e}"))?;
        if claimed != page.len() {
            return Err(format!(
                "snappy header says {claimed} bytes, not a page of {}",
                page.len()
            ));
        }
        self.snappy
            .decompress(src, page)
            .map_err(|e| format!("snappy: {e}"))
    }

    /// One zstd frame (makedumpfile's `ZSTD_compressCCtx`), decoded by libzstd straight into
    /// the page: a frame holding more than a page, or anything after the frame that is not a
    /// whole frame, fails.
    fn zstd(&mut self, src: &[u8], page: &mut [u8]) -> Result<usize, String> {
        let window = zstd_window(src)?;
        if window > ZSTD_MAX_WINDOW {
            return Err(format!(
                "zstd frame window {window} bytes exceeds the {ZSTD_MAX_WINDOW} allowed for a page"
            ));
        }
        self.zstd
            .decompress_to_buffer(src, page)
            .map_err(|e| format!("zstd: {e}"))
    }
}

/// The window size a zstd frame header declares (RFC 8878 §3.1.1.1), read before the decoder
/// reserves it.
fn zstd_window(src: &[u8]) -> Result<u64, String> {
    let short = || format!("zstd frame header cut off ({} bytes)", src.len());
    let magic = src.get(..4).ok_or_else(short)?;
    let magic = u32::from_le_bytes([magic[0], magic[1], magic[2], magic[3]]);
    if magic != ZSTD_MAGIC {
        return Err(format!("no zstd frame magic (found {magic:#010x})"));
    }
    let descriptor = *src.get(4).ok_or_else(short)?;
    let single_segment = descriptor & 0x20 != 0;
    if !single_segment {
        let w = *src.get(5).ok_or_else(short)?;
        let log = 10 + u32::from(w >> 3);
        let base = 1u64 << log;
        return Ok(base + (base / 8) * u64::from(w & 7));
    }
    // Single segment: the window is the frame content size.
    let dict_bytes = [0, 1, 2, 4][usize::from(descriptor & 3)];
    let fcs_bytes = [1, 2, 4, 8][usize::from(descriptor >> 6)];
    let at = 5 + dict_bytes;
    let field = src.get(at..at + fcs_bytes).ok_or_else(short)?;
    let mut le = [0u8; 8];
    le[..fcs_bytes].copy_from_slice(field);
    let size = u64::from_le_bytes(le);
    Ok(if fcs_bytes == 2 { size + 256 } else { size })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zstd_window_from_either_header_form() {
        let magic = ZSTD_MAGIC.to_le_bytes();
        // Single segment, 2-byte content size field: 4096 = 3840 + 256.
        let mut single = magic.to_vec();
        single.extend([0x60, 0x00, 0x0f]);
        assert_eq!(zstd_window(&single), Ok(4096));
        // Window descriptor: exponent 2 mantissa 3 → 4096 + 3 × 512.
        let mut windowed = magic.to_vec();
        windowed.extend([0x00, (2 << 3) | 3]);
        assert_eq!(zstd_window(&windowed), Ok(4096 + 3 * 512));
        // A huge window is refused before the decoder reserves it.
        let mut huge = magic.to_vec();
        huge.extend([0x00, 0xf8, 0, 0, 0, 0]);
        let mut page = [0u8; 4096];
        let err = Decoders::new()
            .decode(Codec::Zstd, &huge, &mut page)
            .unwrap_err();
        assert!(err.contains("exceeds"), "{err}");
        assert!(zstd_window(&magic[..3]).unwrap_err().contains("cut off"));
    }
}
