//! The latency flags of an event, in the letters the kernel's own trace file prints
//! (`trace_print_lat_fmt`). The bits are the enumerators of the vmlinux's
//! `enum trace_flag_type`, read from DWARF: kernels have renumbered them (lazy preemption took
//! the irqs-not-supported bit), so no value is assumed.

use symbols::{Image, TypeKind};

/// Each flag's bit, or `None` where this kernel has no such flag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceFlags {
    irqs_off: Option<u8>,
    irqs_nosupport: Option<u8>,
    need_resched: Option<u8>,
    need_resched_lazy: Option<u8>,
    hardirq: Option<u8>,
    softirq: Option<u8>,
    preempt_resched: Option<u8>,
    nmi: Option<u8>,
    bh_off: Option<u8>,
}

impl TraceFlags {
    /// The flags' bits from `image`'s `enum trace_flag_type`; `None` when its DWARF has no
    /// such enum (the letters are then unknown, never guessed).
    pub fn read(image: &Image) -> Result<Option<TraceFlags>, symbols::Error> {
        let Some(id) = image.type_by_name("enum trace_flag_type")? else {
            return Ok(None);
        };
        let TypeKind::Enum(e) = &image.type_(image.value_type(id)?)?.kind else {
            return Ok(None);
        };
        let mut flags = TraceFlags::default();
        for en in &e.enumerators {
            // Each is one bit of the record's one-byte `common_flags`.
            let Ok(bit) = u8::try_from(en.value) else {
                continue;
            };
            if !bit.is_power_of_two() {
                continue;
            }
            let slot = match en.name.as_str() {
                "TRACE_FLAG_IRQS_OFF" => &mut flags.irqs_off,
                "TRACE_FLAG_IRQS_NOSUPPORT" => &mut flags.irqs_nosupport,
                "TRACE_FLAG_NEED_RESCHED" => &mut flags.need_resched,
                "TRACE_FLAG_NEED_RESCHED_LAZY" => &mut flags.need_resched_lazy,
                "TRACE_FLAG_HARDIRQ" => &mut flags.hardirq,
                "TRACE_FLAG_SOFTIRQ" => &mut flags.softirq,
                "TRACE_FLAG_PREEMPT_RESCHED" => &mut flags.preempt_resched,
                "TRACE_FLAG_NMI" => &mut flags.nmi,
                "TRACE_FLAG_BH_OFF" => &mut flags.bh_off,
                _ => continue,
            };
            *slot = Some(bit);
        }
        Ok(Some(flags))
    }

    /// The three letters for `flags`: irqs off (`D` with bottom halves off too, `d`, `b`,
    /// `X`), need-resched (`B`, `N`, `L`, `b`, `n`, `p`, `l`), and hard/soft irq (`Z`, `z`,
    /// `H`, `h`, `s`); `.` for none.
    pub fn letters(&self, flags: u8) -> [char; 3] {
        let set = |bit: Option<u8>| bit.is_some_and(|b| flags & b != 0);
        let bh_off = set(self.bh_off);
        let irqs = match (set(self.irqs_off), bh_off) {
            (true, true) => 'D',
            (true, false) => 'd',
            (false, true) => 'b',
            _ if set(self.irqs_nosupport) => 'X',
            _ => '.',
        };
        let resched = match (
            set(self.need_resched),
            set(self.need_resched_lazy),
            set(self.preempt_resched),
        ) {
            (true, true, true) => 'B',
            (true, false, true) => 'N',
            (false, true, true) => 'L',
            (true, true, false) => 'b',
            (true, false, false) => 'n',
            (false, false, true) => 'p',
            (false, true, false) => 'l',
            (false, false, false) => '.',
        };
        let irq = match (set(self.nmi), set(self.hardirq), set(self.softirq)) {
            (true, true, _) => 'Z',
            (true, false, _) => 'z',
            (false, true, true) => 'H',
            (false, true, false) => 'h',
            (false, false, true) => 's',
            _ => '.',
        };
        [irqs, resched, irq]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bits of Linux 6.1's enum.
    const LINUX_6_1: TraceFlags = TraceFlags {
        irqs_off: Some(0x01),
        irqs_nosupport: Some(0x02),
        need_resched: Some(0x04),
        need_resched_lazy: None,
        hardirq: Some(0x08),
        softirq: Some(0x10),
        preempt_resched: Some(0x20),
        nmi: Some(0x40),
        bh_off: Some(0x80),
    };

    #[test]
    fn letters_are_the_kernels() {
        let l = |f| LINUX_6_1.letters(f).iter().collect::<String>();
        assert_eq!(l(0), "...");
        assert_eq!(l(0x04), ".n.");
        assert_eq!(l(0x24), ".N.");
        assert_eq!(l(0x20), ".p.");
        assert_eq!(l(0x01 | 0x80 | 0x18), "D.H");
        assert_eq!(l(0x80 | 0x10), "b.s");
        assert_eq!(l(0x40 | 0x08), "..Z");
        assert_eq!(l(0x02), "X..");
    }

    #[test]
    fn a_renumbered_kernel_reads_its_own_bits() {
        // Lazy preemption took 0x02 for NEED_RESCHED_LAZY.
        let lazy = TraceFlags {
            irqs_nosupport: None,
            need_resched_lazy: Some(0x02),
            ..LINUX_6_1
        };
        let l = |f| lazy.letters(f).iter().collect::<String>();
        assert_eq!(l(0x02), ".l.");
        assert_eq!(l(0x02 | 0x04 | 0x20), ".B.");
        assert_eq!(l(0x02 | 0x20), ".L.");
    }
}
