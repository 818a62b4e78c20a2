//! PVH entry: QEMU jumps to `pvh_start32` in 32-bit protected mode with paging off and
//! `%ebx` = physical address of the `hvm_start_info`. The stub turns on PAE, SSE, long
//! mode and paging with static page tables, then continues at the higher-half `kmain`.
//! Application processors (started by `smp.rs`) come in through the real-mode
//! `ap_trampoline`, take the same way into long mode, and call `smp::ap_main` on a stack of
//! their own.
//!
//! Page tables (all static, in .data):
//! * PML4[0]   → PDPT_LOW[0]    → PD : identity map of the first 1 GiB (needed while the
//!   CPU switches to the higher half; kept, as real kernels keep low mappings early on).
//! * PML4[511] → PDPT_HIGH[510] → PD : 0xffffffff80000000 + pa for pa < 1 GiB.
//! * PD[0] → PT: the first 2 MiB in 4 KiB pages (QEMU 7.2's `paging=true` dump drops
//!   the data above 640 KiB when that range is one 2 MiB page); PD[1..512]: 2 MiB pages.
//! * PDPT_LOW[3] → PD: the local APIC's registers (0xfee00000), identity-mapped, uncached.
//!
//! Mappings beyond guest RAM are deliberate: they give the "mapped but not in the dump"
//! address that the `%s` scenarios point at.

core::arch::global_asm!(
    r#"
    .set KVMA, 0xffffffff80000000

    .section .note.Xen, "a"
    .p2align 2
    .long 4                         /* namesz: "Xen\0" */
    .long 8                         /* descsz: 64-bit entry address */
    .long 18                        /* XEN_ELFNOTE_PHYS32_ENTRY */
    .asciz "Xen"
    .p2align 2
    .quad pvh_start32 - KVMA

    .section .text.boot, "ax"
    .code32
    .global pvh_start32
pvh_start32:
    cli
    cld
    mov $(pvh_start64 - KVMA), %esi
    jmp long_mode

    /* An application processor, from the real-mode trampoline below: CS is the 32-bit code
       segment 0x18; the data segments still have real-mode limits (64 KiB), too small for the
       kernel's addresses. */
ap_start32:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    mov $(ap_start64 - KVMA), %esi

    /* Every processor's way into long mode; %esi: the physical address to continue at. */
long_mode:
    /* CR4: PAE (5), OSFXSR (9), OSXMMEXCPT (10) */
    mov %cr4, %eax
    or $0x620, %eax
    mov %eax, %cr4
    mov $(boot_pml4 - KVMA), %eax
    mov %eax, %cr3
    /* EFER.LME */
    mov $0xC0000080, %ecx
    rdmsr
    or $0x100, %eax
    wrmsr
    /* CR0: PG (31), MP (1), PE (0); clear EM (2) so SSE works, and CD (30) and NW (29),
       which INIT sets on an application processor: caching on, as on the boot processor */
    mov %cr0, %eax
    and $0x9ffffffb, %eax
    or $0x80000003, %eax
    mov %eax, %cr0
    lgdt (boot_gdtr - KVMA)
    ljmp $0x08, $(long_mode64 - KVMA)

    .code64
long_mode64:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    mov %ax, %fs
    mov %ax, %gs
    mov %esi, %esi                  /* bits 63:32 are undefined on entering 64-bit mode */
    jmp *%rsi

pvh_start64:
    movabs $boot_stack_top, %rsp
    movabs $pvh_high64, %rax
    jmp *%rax

ap_start64:
    movabs $ap_high64, %rax
    jmp *%rax

    .text
pvh_high64:
    mov %ebx, %edi                  /* start_info physical address, zero-extended */
    xor %ebp, %ebp
    call {kmain}
1:  cli
    hlt
    jmp 1b

    /* An application processor takes the next number and that number's stack. */
ap_high64:
    mov $1, %eax
    lock xadd %eax, ap_next_cpu(%rip)
    cmp ${max_cpus}, %eax
    jae 2f
    mov %eax, %edi
    imul ${stack_bytes}, %rdi, %rax
    movabs $ap_stacks, %rsp
    add %rax, %rsp                  /* top of the stack of processor %edi */
    xor %ebp, %ebp
    call {ap_main}
2:  cli                             /* more processors than stacks: this one stays out */
    hlt
    jmp 2b

    /* The real-mode start of an application processor, copied by smp.rs to the physical page
       {trampoline} (below 1 MiB, as a SIPI vector must be), where it runs with CS = page / 16
       and IP = 0: loads the kernel's GDT and jumps to ap_start32 in protected mode. */
    .section .rodata.ap_trampoline, "a"
    .code16
    .global ap_trampoline
ap_trampoline:
    cli
    cld
    xor %ax, %ax
    mov %ax, %ds
    lgdtl ({trampoline} + ap_trampoline_gdtr - ap_trampoline)
    mov %cr0, %eax
    or $1, %eax
    mov %eax, %cr0
    ljmpl $0x18, $(ap_start32 - KVMA)
ap_trampoline_gdtr:
    .word boot_gdtr - boot_gdt - 1
    .long boot_gdt - KVMA
    .global ap_trampoline_end
ap_trampoline_end:
    .code64

    .section .data.ap_next_cpu, "aw"
    .p2align 2
ap_next_cpu:
    .long 1                         /* the boot processor is 0 */

    /* Writable: the CPU sets the accessed bit of a descriptor when it loads the segment. */
    .section .data.boot_gdt, "aw"
    .p2align 3
boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff        /* 0x08: 64-bit code */
    .quad 0x00cf92000000ffff        /* 0x10: data */
    .quad 0x00cf9a000000ffff        /* 0x18: 32-bit code, for application processors */
boot_gdtr:
    .word boot_gdtr - boot_gdt - 1
    .long boot_gdt - KVMA

    .section .data.boot_page_tables, "aw"
    .p2align 12
    .global boot_pml4
boot_pml4:
    .quad boot_pdpt_low - KVMA + 3
    .fill 510, 8, 0
    .quad boot_pdpt_high - KVMA + 3
boot_pdpt_low:
    .quad boot_pd - KVMA + 3
    .fill 2, 8, 0
    .quad boot_pd_lapic - KVMA + 3  /* 3-4 GiB: only the local APIC's page */
    .fill 508, 8, 0
boot_pdpt_high:
    .fill 510, 8, 0
    .quad boot_pd - KVMA + 3
    .quad 0
boot_pd:
    .quad boot_pt - KVMA + 3
    .set i, 1
    .rept 511
    .quad (i << 21) | 0x83
    .set i, i + 1
    .endr
boot_pt:
    .set i, 0
    .rept 512
    .quad (i << 12) | 3
    .set i, i + 1
    .endr
boot_pd_lapic:
    /* A 2 MiB page, uncached (PCD, PWT): the local APIC's registers are not memory. */
    .fill ({lapic} >> 21) & 511, 8, 0
    .quad {lapic} | 0x9b
    .fill 511 - (({lapic} >> 21) & 511), 8, 0

    .section .bss.boot_stack, "aw", @nobits
    .p2align 12
boot_stack:
    .skip 0x10000
boot_stack_top:

    .section .bss.ap_stacks, "aw", @nobits
    .p2align 12
ap_stacks:
    .skip {stack_bytes} * ({max_cpus} - 1)
"#,
    kmain = sym crate::kmain,
    ap_main = sym crate::smp::ap_main,
    max_cpus = const crate::smp::MAX_CPUS,
    stack_bytes = const crate::smp::STACK_BYTES,
    trampoline = const crate::smp::TRAMPOLINE,
    lapic = const crate::smp::LAPIC,
    options(att_syntax)
);
