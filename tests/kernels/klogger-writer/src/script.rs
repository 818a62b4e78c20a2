//! The events the test kernels' scenarios log, shared by the bare kernel (processors) and the
//! hosted program (threads), so that both leave the same kind of log. `ticks` reads the
//! kernel's cycle counter.

use crate::events::{
    DumpFinish, KloggerStart, ProcessExists, SchedIn, SchedOut, TryToWakeup, Unknown,
};
use crate::{Log, Sink};

const COMMS: [&str; 4] = [
    "init",
    "kworker/0:1",
    "a-name-longer-than-32-bytes-is-cut",
    "sh",
];

/// KLOGGER_START, then `n` events of every type in turn (and, on CPU 0, one of a type the
/// schema lacks).
pub fn mixed(log: &Log, cpu: u32, n: u32, ticks: fn() -> u64, sink: &mut dyn Sink) {
    let size = log.cpus[cpu as usize]
        .size
        .load(core::sync::atomic::Ordering::Relaxed);
    log.log(
        cpu,
        ticks(),
        &KloggerStart::new(size, cpu as i32, "0.98-kcrash"),
        sink,
    );
    for i in 0..n {
        let pid = (100 * cpu + i) as i32;
        match i % 5 {
            0 => log.log(
                cpu,
                ticks(),
                &SchedOut::new(pid, u64::from(i) << 33 | 7),
                sink,
            ),
            1 => log.log(
                cpu,
                ticks(),
                &SchedIn::new(pid, (i % 6) as i32, -(i as i16)),
                sink,
            ),
            2 => {
                let state = [0, 1, 2, 4, 32, -1, 3][i as usize % 7];
                log.log(
                    cpu,
                    ticks(),
                    &TryToWakeup::new(pid, state, 0x8000 | i as u16),
                    sink,
                )
            }
            3 => log.log(
                cpu,
                ticks(),
                &ProcessExists::new(pid, 1, COMMS[i as usize % 4]),
                sink,
            ),
            _ => log.log(cpu, ticks(), &DumpFinish::new(4096 * u64::from(i), i), sink),
        }
        if cpu == 0 && i == n / 2 {
            let payload = [0xde, 0xad, 0xbe, 0xef, i as u8];
            log.log(
                cpu,
                ticks(),
                &Unknown {
                    type_id: 42,
                    payload: &payload,
                },
                sink,
            );
        }
    }
}

/// `n` small and large events into a buffer that overwrites: it wraps.
pub fn wrap(log: &Log, cpu: u32, n: u32, ticks: fn() -> u64, sink: &mut dyn Sink) {
    for i in 0..n {
        if i % 3 == 0 {
            log.log(
                cpu,
                ticks(),
                &ProcessExists::new(i as i32, 2, COMMS[i as usize % 4]),
                sink,
            );
        } else {
            log.log(cpu, ticks(), &SchedOut::new(i as i32, u64::from(i)), sink);
        }
    }
}

/// Pairs of a small and a large event into a buffer that drops: once it is nearly full the
/// large ones are lost while small ones still fit (serial gaps), then every event is lost.
pub fn lose(log: &Log, cpu: u32, n: u32, ticks: fn() -> u64, sink: &mut dyn Sink) {
    for i in 0..n {
        log.log(cpu, ticks(), &SchedIn::new(i as i32, 0, 0), sink);
        log.log(
            cpu,
            ticks(),
            &ProcessExists::new(i as i32, 3, "dropped-when-full"),
            sink,
        );
    }
}
