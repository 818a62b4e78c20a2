//! `klogDescriptor` as klog_config! and klog_init leave it, read back through the reader's own
//! parser: every address and field offset it records must be the one the compiler chose, and
//! every damage a reader must refuse is refused.

use std::sync::atomic::Ordering;

use klog_runtime::descriptor::{self, DescriptorError, Parsed, CHECKSUM_AT, HEAD_SIZE};
use klog_runtime::{KLog, KLogRec};

pub struct Platform;
impl klog_runtime::Platform for Platform {
    fn clock() -> u64 {
        0
    }
    fn chore_id() -> u64 {
        0
    }
    fn proc_dom() -> u64 {
        0
    }
    fn build_id() -> &'static [u8] {
        &[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4]
    }
    fn page_table_root() -> u64 {
        0x1000
    }
}

klog_runtime::klog_config! {
    platform = Platform;
    static_level = klog_runtime::KLOG_PROLOG;
    subsystems { DBG_NONE = 8, DBG_PARCHORE = 16, DBG_A_VERY_LONG_SUBSYSTEM_NAME_X = 4 }
}

/// klog_init, once for every test: it seals the descriptor again, and a test thread reading it
/// while another reseals it sees a checksum that does not match (seen once in CI).
fn init() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(klog_init);
}

fn bytes() -> Vec<u8> {
    init();
    let size = std::mem::size_of_val(&klogDescriptor);
    let base = (&raw const klogDescriptor).cast::<u8>();
    // SAFETY: the descriptor's own bytes; nothing writes them after klog_init.
    let mut b = unsafe { std::slice::from_raw_parts(base, size) }.to_vec();
    // The static is padded to a cache line; the descriptor is the size it claims.
    b.truncate(descriptor::claimed_size(&b).expect("head parses"));
    b
}

fn addr<T>(p: *const T) -> u64 {
    p as u64
}

#[test]
fn the_sealed_descriptor_records_every_static_and_field() {
    let b = bytes();
    let d: Parsed = descriptor::parse(&b).expect("sealed descriptor parses");
    assert_eq!(d.this, addr(&raw const klogDescriptor));
    assert_eq!(d.klogs, addr(&raw const KLogs));
    assert_eq!(d.subsystems as usize, DBG_MAX);
    assert_eq!(d.klog_stride as usize, std::mem::size_of::<KLog>());
    assert_eq!(d.buffer, addr(&raw const KLogBuffer));
    assert_eq!(d.buffer_bytes as usize, std::mem::size_of_val(&KLogBuffer));
    assert_eq!(d.klog_level, Some((addr(&raw const klogLevel), 4)));
    assert_eq!(d.clock_hz, Some((addr(&raw const klogClockHz), 8)));
    assert_eq!(
        d.debug_flags.map(|f| f.0),
        Some(addr(&raw const DebugFlags))
    );
    // KLogCommits is pointed at only when writers count into it.
    let commits = klog_runtime::COUNT_COMMITS.then(|| (addr(&raw const KLogCommits), 64));
    assert_eq!(d.commits.map(|f| (f.0, f.1)), commits);
    assert_eq!(d.page_table_root, Some(0x1000));
    assert_eq!(
        d.build_id(),
        Some(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4][..])
    );
    assert_eq!(d.rec_stride as usize, std::mem::size_of::<KLogRec>());
    let next_write = std::mem::offset_of!(KLog, next_write) as u16;
    assert_eq!(d.klog_fields[7].offset, next_write);
    assert_eq!(d.rec_fields[4].offset, 32, "desc is word 4");
    assert_eq!(descriptor::name(&b, 0), Some(&b"NONE"[..]));
    assert_eq!(descriptor::name(&b, 1), Some(&b"PARCHORE"[..]));
    assert_eq!(
        descriptor::name(&b, 2),
        Some(&b"A_VERY_LONG_SUBSYSTEM_NAME_X"[..])
    );
    assert_eq!(b.len(), HEAD_SIZE + 32 * DBG_MAX);
    assert_eq!((d.abi_major, d.processors, d.klog_entries()), (2, 1, 3));
    assert_eq!(d.flags, Some((addr(&raw const klogFlags), 4)));
    assert_eq!(
        d.descriptions,
        Some((addr(&raw const KLogDescriptions), 0, 8)),
        "no descriptions declared: an empty table"
    );
}

/// An ABI 1 descriptor (the 2.0 one without its processors, descriptions and flags) still
/// reads: one set of rings, no table, no flags.
#[test]
fn a_reader_reads_abi_1() {
    let mut b = bytes();
    b.drain(0xe0..HEAD_SIZE);
    b[0x10..0x12].copy_from_slice(&1u16.to_ne_bytes());
    let size = (b.len() as u32).to_ne_bytes();
    b[0x1c..0x20].copy_from_slice(&size);
    assert!(descriptor::reseal(&mut b));
    let d = descriptor::parse(&b).expect("ABI 1 parses");
    assert_eq!((d.abi_major, d.processors), (1, 1));
    assert_eq!((d.descriptions, d.flags), (None, None));
    assert_eq!(descriptor::name(&b, 1), Some(&b"PARCHORE"[..]));
}

/// An ABI 1 head with no subsystems is the whole descriptor: nothing past it is read (the
/// fields ABI 2 added sit there).
#[test]
fn a_reader_reads_abi_1_without_subsystems() {
    let mut b = bytes();
    b.truncate(0xe0);
    b[0x10..0x12].copy_from_slice(&1u16.to_ne_bytes());
    b[0x1a..0x1c].copy_from_slice(&0u16.to_ne_bytes());
    b[0x1c..0x20].copy_from_slice(&0xe0u32.to_ne_bytes());
    assert!(descriptor::reseal(&mut b));
    let d = descriptor::parse(&b).expect("ABI 1 without subsystems parses");
    assert_eq!((d.abi_major, d.subsystems, d.descriptions), (1, 0, None));
}

#[test]
fn a_reader_refuses_a_descriptor_that_is_damaged_or_unsealed() {
    let good = bytes();
    let check = |edit: &dyn Fn(&mut Vec<u8>), want: &dyn Fn(&DescriptorError) -> bool| {
        let mut b = good.clone();
        edit(&mut b);
        let got = descriptor::parse(&b);
        assert!(matches!(&got, Err(e) if want(e)), "{got:?}");
    };
    check(&|b| b[0] ^= 1, &|e| *e == DescriptorError::BadMagic);
    check(&|b| b[0x10] = 3, &|e| {
        matches!(e, DescriptorError::Abi { major: 3, .. })
    });
    check(&|b| b[0x14] = 9, &|e| {
        matches!(e, DescriptorError::Endian(_))
    });
    check(&|b| b[0x18] = 4, &|e| *e == DescriptorError::WordSize(4));
    check(&|b| b[0x1a] = 200, &|e| {
        matches!(e, DescriptorError::Size { .. })
    });
    check(&|b| b[CHECKSUM_AT..CHECKSUM_AT + 4].fill(0), &|e| {
        *e == DescriptorError::Unsealed
    });
    // Any byte changed after sealing, even one a reader would not look at.
    check(&|b| b[HEAD_SIZE + 40] ^= 0x20, &|e| {
        matches!(e, DescriptorError::Checksum { .. })
    });
    check(&|b| b.truncate(b.len() - 1), &|e| {
        matches!(e, DescriptorError::Short { .. })
    });
    // A field out of its struct, resealed so that only the field check can catch it.
    let reseal = |b: &mut Vec<u8>| assert!(descriptor::reseal(b));
    check(
        &|b| {
            b[0x78 + 4 * 7] = 60; // next_write at 60, 8 bytes: past the 64-byte KLog
            reseal(b)
        },
        &|e| {
            matches!(
                e,
                DescriptorError::Field {
                    table: "KLog",
                    index: 7
                }
            )
        },
    );
    check(
        &|b| {
            b[0x71] = 3;
            reseal(b)
        },
        &|e| *e == DescriptorError::Scalar("klogClockHz"),
    );
    check(
        &|b| {
            b[0xe0..0xe2].fill(0);
            reseal(b)
        },
        &|e| *e == DescriptorError::Processors,
    );
    check(
        &|b| {
            b[0xe2..0xe4].copy_from_slice(&4u16.to_ne_bytes());
            reseal(b)
        },
        &|e| *e == DescriptorError::Scalar("KLogDescriptions"),
    );
    check(
        &|b| {
            b[0x19] = 33;
            reseal(b)
        },
        &|e| *e == DescriptorError::BuildIdLen(33),
    );
    check(
        &|b| {
            b[0x30..0x38].copy_from_slice(&u64::MAX.to_le_bytes());
            reseal(b)
        },
        &|e| *e == DescriptorError::Extent("KLogBuffer"),
    );
    // Found by fuzzing: an array whose last entry lies past the top of memory.
    check(
        &|b| {
            b[0x58..0x60].copy_from_slice(&(u64::MAX - 64).to_le_bytes());
            reseal(b)
        },
        &|e| *e == DescriptorError::Extent("KLogCommits"),
    );
}

#[test]
fn the_checksum_is_zlibs_crc32() {
    // The check value every CRC-32/ISO-HDLC implementation gives for "123456789".
    assert_eq!(descriptor::crc32(0, *b"123456789"), 0xcbf4_3926);
}

/// With the `commit-counts` feature (`cargo test -p klog-runtime --features commit-counts`, and
/// any workspace build, where the test kernels turn it on) every finished record is counted;
/// without it nothing is, and the descriptor points at no counters.
#[test]
fn writers_count_the_records_they_finish_when_asked() {
    init();
    let before = KLogCommits[1].load(Ordering::Relaxed);
    klog_runtime::KLOGT1!(DBG_PARCHORE, "x %d", 1);
    klog_runtime::KLOGT0!(DBG_PARCHORE, "y");
    let counted = if klog_runtime::COUNT_COMMITS { 2 } else { 0 };
    assert_eq!(KLogCommits[1].load(Ordering::Relaxed), before + counted);
}
