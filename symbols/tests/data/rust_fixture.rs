//! Test fixture: a Rust program with a `#[no_mangle]` static array of a `#[repr(C)]` struct with
//! atomic and raw-pointer fields, and a static inside a module path. Built with rustc by the
//! symbols tests; when run it prints the layout as the compiler knows it (`offset_of!`,
//! `size_of`) and the run-time addresses of the statics, which the tests compare with what the
//! symbols crate reads from the DWARF and the ELF symbol table. Its enum statics print the
//! variant they hold.

pub mod layout {
    use std::ffi::c_char;
    use std::sync::atomic::{AtomicPtr, AtomicU64};

    #[repr(C)]
    pub struct KLog {
        pub subsystem: AtomicU64,
        pub name: *const c_char,
        pub buffer: AtomicPtr<u64>,
        pub next_write: AtomicU64,
        pub flags: [u8; 4],
    }

    // SAFETY: `name` points at a static string that is never written.
    unsafe impl Sync for KLog {}

    pub const EMPTY: KLog = KLog {
        subsystem: AtomicU64::new(0),
        name: c"klog".as_ptr(),
        buffer: AtomicPtr::new(std::ptr::null_mut()),
        next_write: AtomicU64::new(0),
        flags: [0; 4],
    };
}

pub mod registry {
    use std::sync::atomic::AtomicU64;

    pub static EVENTS_SEEN: AtomicU64 = AtomicU64::new(7);
}

pub mod state {
    /// Rust enums: a tagged one, a small `Option`, and one whose `None` is a niche.
    #[derive(Debug)]
    pub enum Mode {
        Idle,
        Busy(u64),
        Stopped { code: i32 },
    }

    pub static MODE: Mode = Mode::Busy(5);
    pub static STOPPED: Mode = Mode::Stopped { code: -3 };
    pub static MAYBE: Option<u32> = Some(7);
    pub static NICHE: Option<&u8> = None;
}

#[no_mangle]
pub static KLOGS: [layout::KLog; 5] = [layout::EMPTY; 5];

fn main() {
    use std::mem::{offset_of, size_of};
    use std::sync::atomic::Ordering;

    use layout::KLog;

    println!("sizeof KLog {}", size_of::<KLog>());
    println!("sizeof KLOGS {}", size_of::<[KLog; 5]>());
    println!("offsetof KLog subsystem {}", offset_of!(KLog, subsystem));
    println!("offsetof KLog name {}", offset_of!(KLog, name));
    println!("offsetof KLog buffer {}", offset_of!(KLog, buffer));
    println!("offsetof KLog next_write {}", offset_of!(KLog, next_write));
    println!("offsetof KLog flags {}", offset_of!(KLog, flags));
    println!("address KLOGS {:#x}", std::ptr::addr_of!(KLOGS) as usize);
    println!(
        "address EVENTS_SEEN {:#x}",
        std::ptr::addr_of!(registry::EVENTS_SEEN) as usize
    );
    println!("address main {:#x}", main as fn() as usize);
    // The variant each enum static holds, as Debug names it.
    for (name, debug) in [
        ("MODE", format!("{:?}", state::MODE)),
        ("STOPPED", format!("{:?}", state::STOPPED)),
        ("MAYBE", format!("{:?}", state::MAYBE)),
        ("NICHE", format!("{:?}", state::NICHE)),
    ] {
        let variant: String = debug.chars().take_while(|c| c.is_alphanumeric()).collect();
        println!("variant {name} {variant}");
    }
    KLOGS[2].next_write.fetch_add(1, Ordering::Relaxed);
    registry::EVENTS_SEEN.fetch_add(1, Ordering::Relaxed);
}
