//! CPU exceptions become panics: without an IDT a fault would triple-fault and QEMU (with
//! `-no-reboot`) would exit, leaving no dump and no word on the console. The one exception is a
//! DProbes probe's read of memory (dprobes.rs), which the handler resumes after.

use core::arch::{asm, global_asm};
use core::cell::UnsafeCell;

global_asm!(
    r#"
    /* One stub per vector 0-31; the CPU pushes an error code for 8, 10-14, 17, 21 and 30
       (SDM vol. 3, table 6-1), the others push 0 so every frame looks the same. */
    .altmacro
    .macro exception_stub vector, has_error
    .p2align 4
exception_stub_\vector:
    .if \has_error == 0
    push $0
    .endif
    push $\vector
    jmp exception_common
    .endm

    .text
    .set v, 0
    .rept 32
    .if v == 8 || v == 10 || v == 11 || v == 12 || v == 13 || v == 14 || v == 17 || v == 21 || v == 30
    exception_stub %v, 1
    .else
    exception_stub %v, 0
    .endif
    .set v, v + 1
    .endr
    .noaltmacro

exception_common:
    push %rbx
    mov 8(%rsp), %rdi               /* vector */
    mov 16(%rsp), %rsi              /* error code */
    mov 24(%rsp), %rdx              /* rip of the faulting instruction */
    mov %cr2, %rcx
    mov %rsp, %rbx
    and $-16, %rsp
    call {handler}
    /* A recoverable fault (a probe's read): resume at the rip returned, the vector in %rax. */
    mov %rbx, %rsp
    mov %rax, 24(%rsp)
    mov 8(%rsp), %rax
    pop %rbx
    add $16, %rsp                   /* vector, error code */
    iretq

    .section .rodata.exception_stubs, "a"
    .p2align 3
    .global exception_stubs
exception_stubs:
    .altmacro
    .macro stub_address vector
    .quad exception_stub_\vector
    .endm
    .set v, 0
    .rept 32
    stub_address %v
    .set v, v + 1
    .endr
    .noaltmacro
"#,
    handler = sym exception,
    options(att_syntax)
);

extern "C" {
    static exception_stubs: [u64; 32];
}

/// Returns where to resume when the fault is one a probe's read recovers from; panics otherwise.
extern "C" fn exception(vector: u64, error: u64, rip: u64, cr2: u64) -> u64 {
    #[cfg(feature = "dprobes")]
    if let Some(resume) = crate::dprobes::recover(vector, error, rip, cr2) {
        return resume;
    }
    panic!("CPU exception {vector} error {error:#x} at rip {rip:#x} cr2 {cr2:#x}");
}

#[repr(C, align(16))]
struct Idt(UnsafeCell<[u64; 64]>);

// SAFETY: written once by `install` before interrupts, exceptions or other processors can use it.
unsafe impl Sync for Idt {}

static IDT: Idt = Idt(UnsafeCell::new([0; 64]));

/// Fills the IDT with 64-bit interrupt gates to the stubs and loads it.
pub fn install() {
    // SAFETY: single processor at boot; the stub table is static.
    unsafe {
        let idt = &mut *IDT.0.get();
        for (vector, &handler) in exception_stubs.iter().enumerate() {
            // Interrupt gate: selector 0x08, present, DPL 0, type 0xE.
            idt[2 * vector] = (handler & 0xffff)
                | (0x08 << 16)
                | (0x8e00 << 32)
                | ((handler >> 16 & 0xffff) << 48);
            idt[2 * vector + 1] = handler >> 32;
        }
    }
    load();
}

/// Loads the IDT `install` filled: each processor has to, application processors too.
pub fn load() {
    let base = IDT.0.get() as u64;
    let pointer: [u16; 5] = [
        (64 * 8 - 1) as u16,
        base as u16,
        (base >> 16) as u16,
        (base >> 32) as u16,
        (base >> 48) as u16,
    ];
    // SAFETY: the IDT is static and filled by `install` before any processor loads it.
    unsafe {
        asm!("lidt [{}]", in(reg) pointer.as_ptr(), options(readonly, nostack, preserves_flags));
    }
}
