//! An initramfs: the kernel's uncompressed "newc" cpio format (the kernel's
//! Documentation/driver-api/early-userspace/buffer-format.rst), enough for a busybox guest.

/// One file in an initramfs.
pub enum CpioEntry<'a> {
    Dir(&'a str),
    File {
        name: &'a str,
        mode: u32,
        data: &'a [u8],
    },
    CharDevice {
        name: &'a str,
        major: u32,
        minor: u32,
    },
}

/// An uncompressed initramfs holding `entries` in order (a directory before its files).
pub fn newc_cpio(entries: &[CpioEntry<'_>]) -> Vec<u8> {
    fn pad4(out: &mut Vec<u8>) {
        while out.len() % 4 != 0 {
            out.push(0);
        }
    }
    let mut out = Vec::new();
    let trailer = CpioEntry::File {
        name: "TRAILER!!!",
        mode: 0,
        data: &[],
    };
    for (ino, entry) in entries.iter().chain([&trailer]).enumerate() {
        let (name, mode, data, rdev) = match entry {
            CpioEntry::Dir(name) => (*name, 0o040755, &[][..], (0, 0)),
            CpioEntry::File { name, mode, data } => (*name, 0o100000 | mode, *data, (0, 0)),
            CpioEntry::CharDevice { name, major, minor } => {
                (*name, 0o020600, &[][..], (*major, *minor))
            }
        };
        let fields = [
            ino as u32 + 1,
            mode,
            0,
            0,
            1,
            0,
            data.len() as u32,
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0,
        ];
        out.extend_from_slice(b"070701");
        for f in fields {
            out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        pad4(&mut out);
        out.extend_from_slice(data);
        pad4(&mut out);
    }
    out
}
