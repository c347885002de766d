/* src/arch/aarch64/switch_arm64_aapcs_elf_gas.S - context switch, AArch64 AAPCS64, ELF.
 *
 * void weft__ctx_switch_c(weft_ctx_t *from, weft_ctx_t *to, void (*fn)(void *), void *arg)
 *                         x0                x1              x2                   x3
 * (weft__ctx_switch in C calls it, or its _cxx twin, through weft__ctx_ops.)
 *
 * Frame (176 bytes, sp stays 16-aligned; see src/arch/context.h):
 *
 *         -16  caught exceptions, uncaught count   (_cxx only, below the saved sp)
 *   sp -> +0   x19  x20
 *         +16  x21  x22
 *         +32  x23  x24
 *         +48  x25  x26
 *         +64  x27  x28
 *         +80  x29  x30 (resume address)
 *         +96  d8   d9
 *         +112 d10  d11
 *         +128 d12  d13
 *         +144 d14  d15
 *         +160 errno, padding
 *
 * AAPCS64 makes x19-x28, x29, x30, sp and the low halves of v8-v15 callee-saved;
 * nothing else is saved but errno, the C library's per-kernel-thread error number:
 * an initial-exec TLS variable at tpidr_el0 + weft__ctx_errno_off (the same on every
 * kernel thread; src/arch/tstate.c). Once the frame is saved, x19-x23 are free to
 * use (the frame of *to restores them) and survive the continuation's call:
 * x19 = thread pointer, x20 = errno offset, x21 = exception globals, x22/x23 = *to's
 * exception state. AArch64 has no red zone: a signal frame is pushed right below sp,
 * so the exception words of *from are written below its sp only once sp has left
 * that stack, and those of *to are read before sp enters its stack.
 *
 * The offsets are in src/arch/frame.h, shared with the C code that builds and
 * rewrites frames.
 */
#include "arch/frame.h"

/* Branch target identification (BTI; the compiler defines __ARM_FEATURE_BTI_DEFAULT
 * with -mbranch-protection=bti or =standard). The switch entries are called with
 * blr through weft__ctx_ops, so they start with `bti c`; the trampolines and
 * fp_resume are only reached by ret (a frame's x30), which BTI does not check, but
 * their addresses are stored as function pointers and they start with `bti c` too,
 * as the compiler's functions do. Nothing here is reached by br, so no `bti j`:
 * fp_resume leaves with `ret x9` (not br) because its target, a return address, has
 * no landing pad. The return addresses saved in frames are not signed (PAC): the
 * property note claims BTI only (docs/porting.md "Control-flow protection"). */
#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define WEFT_LANDING_PAD bti c
#else
#define WEFT_LANDING_PAD
#endif

#if WEFT__FPEXT_RESUME != 0 || WEFT__FPEXT_FPCR != 8 || WEFT__FPEXT_SIZE != 16
#error "weft__ctx_fp_resume does not match src/arch/frame.h"
#endif

/* Push the callee-saved registers and errno of the running context (the frame
 * above); leaves x19 = thread pointer and x20 = errno offset. */
.macro WEFT_SAVE_CALLEE_SAVED
        sub     sp, sp, #WEFT__FRAME_SIZE            /* frame for the callee-saved registers */
        stp     x19, x20, [sp, #WEFT__FRAME_X19]
        stp     x21, x22, [sp, #WEFT__FRAME_X21]
        stp     x23, x24, [sp, #WEFT__FRAME_X23]
        stp     x25, x26, [sp, #WEFT__FRAME_X25]
        stp     x27, x28, [sp, #WEFT__FRAME_X27]
        stp     x29, x30, [sp, #WEFT__FRAME_X29]     /* x30 = our return address = resume address */
        stp     d8,  d9,  [sp, #WEFT__FRAME_D8]
        stp     d10, d11, [sp, #WEFT__FRAME_D10]
        stp     d12, d13, [sp, #WEFT__FRAME_D12]
        stp     d14, d15, [sp, #WEFT__FRAME_D14]
        mrs     x19, tpidr_el0
        adrp    x20, weft__ctx_errno_off
        ldr     x20, [x20, #:lo12:weft__ctx_errno_off]
        ldr     w9, [x19, x20]
        str     x9, [sp, #WEFT__FRAME_ERRNO]          /* errno */
.endm

/* Restore errno (x19/x20 as the save left them) and the context whose stack we
 * are on, and resume it at x30. */
.macro WEFT_RESTORE_AND_RESUME
        ldr     x9, [sp, #WEFT__FRAME_ERRNO]
        str     w9, [x19, x20]          /* errno */
        ldp     x19, x20, [sp, #WEFT__FRAME_X19]
        ldp     x21, x22, [sp, #WEFT__FRAME_X21]
        ldp     x23, x24, [sp, #WEFT__FRAME_X23]
        ldp     x25, x26, [sp, #WEFT__FRAME_X25]
        ldp     x27, x28, [sp, #WEFT__FRAME_X27]
        ldp     x29, x30, [sp, #WEFT__FRAME_X29]
        ldp     d8,  d9,  [sp, #WEFT__FRAME_D8]
        ldp     d10, d11, [sp, #WEFT__FRAME_D10]
        ldp     d12, d13, [sp, #WEFT__FRAME_D12]
        ldp     d14, d15, [sp, #WEFT__FRAME_D14]
        add     sp, sp, #WEFT__FRAME_SIZE
        ret
.endm

/* x21 = this kernel thread's __cxa_eh_globals (weft__tls_eh, initial-exec TLS);
 * needs x19 = thread pointer. */
.macro WEFT_EH_GLOBALS
        adrp    x21, :gottprel:weft__tls_eh
        ldr     x21, [x21, #:gottprel_lo12:weft__tls_eh]
        ldr     x21, [x19, x21]
.endm

/* From the saved frame to *to's stack, with the exception state: x9 = *from's sp,
 * x10 = *to's sp; *from's state below x9, *to's read into x22/x23. */
.macro WEFT_EH_SWAP_STACKS
        WEFT_EH_GLOBALS
        ldp     x11, x12, [x21]         /* *from's exception state (the kernel thread's) */
        mov     x9, sp
        str     x9, [x0]                /* from->sp */
        ldr     x10, [x1]
        ldp     x22, x23, [x10, #WEFT__FRAME_EH_CAUGHT]   /* *to's, read before sp is on its stack */
        mov     sp, x10                 /* on the new stack */
        stp     x11, x12, [x9, #WEFT__FRAME_EH_CAUGHT]    /* *from's, written once sp has left its stack */
.endm

        .text
        .globl  weft__ctx_switch_c
        .hidden weft__ctx_switch_c
        .type   weft__ctx_switch_c,%function
        .p2align 4
weft__ctx_switch_c:
        .cfi_startproc
        WEFT_LANDING_PAD
        WEFT_SAVE_CALLEE_SAVED          /* save callee-saved registers and errno of *from */
        mov     x9, sp
        str     x9, [x0]                /* from->sp: *from is now fully saved */
        ldr     x9, [x1]
        mov     sp, x9                  /* on the new stack */
        cbz     x2, 1f                  /* continuation to run? */
        mov     x0, x3                  /* fn(arg) on the new stack */
        blr     x2
1:      WEFT_RESTORE_AND_RESUME         /* restore *to (errno after fn) and resume it */
        .cfi_endproc
        .size   weft__ctx_switch_c,.-weft__ctx_switch_c

        .globl  weft__ctx_switch_cxx
        .hidden weft__ctx_switch_cxx
        .type   weft__ctx_switch_cxx,%function
        .p2align 4
weft__ctx_switch_cxx:
        .cfi_startproc
        WEFT_LANDING_PAD
        WEFT_SAVE_CALLEE_SAVED
        WEFT_EH_SWAP_STACKS
        cbz     x2, 1f
        mov     x0, x3
        blr     x2
1:      stp     x22, x23, [x21]         /* the kernel thread's exception state = *to's */
        WEFT_RESTORE_AND_RESUME
        .cfi_endproc
        .size   weft__ctx_switch_cxx,.-weft__ctx_switch_cxx

/* void weft__ctx_switch_unlock_c(weft_ctx_t *from, weft_ctx_t *to, uint32_t *word)
 *                                x0                x1              x2
 * The continuation specialised to "store-release 0 to *word" (unlock). */
        .globl  weft__ctx_switch_unlock_c
        .hidden weft__ctx_switch_unlock_c
        .type   weft__ctx_switch_unlock_c,%function
        .p2align 4
weft__ctx_switch_unlock_c:
        .cfi_startproc
        WEFT_LANDING_PAD
        WEFT_SAVE_CALLEE_SAVED          /* save callee-saved registers and errno of *from */
        mov     x9, sp
        str     x9, [x0]                /* *from fully saved */
        ldr     x9, [x1]
        mov     sp, x9
        stlr    wzr, [x2]               /* release the lock (pairs with the acquire
                                           exchange of the next lock holder) */
        WEFT_RESTORE_AND_RESUME         /* restore *to and resume it */
        .cfi_endproc
        .size   weft__ctx_switch_unlock_c,.-weft__ctx_switch_unlock_c

        .globl  weft__ctx_switch_unlock_cxx
        .hidden weft__ctx_switch_unlock_cxx
        .type   weft__ctx_switch_unlock_cxx,%function
        .p2align 4
weft__ctx_switch_unlock_cxx:
        .cfi_startproc
        WEFT_LANDING_PAD
        WEFT_SAVE_CALLEE_SAVED
        WEFT_EH_SWAP_STACKS             /* *from's state stored before the release */
        stlr    wzr, [x2]               /* release the lock (as above) */
        stp     x22, x23, [x21]
        WEFT_RESTORE_AND_RESUME
        .cfi_endproc
        .size   weft__ctx_switch_unlock_cxx,.-weft__ctx_switch_unlock_cxx

/* First resume of a context built by weft__ctx_make(): x19 = entry, x20 = arg,
 * sp = top of the new stack, errno 0. entry never returns. */
        .globl  weft__ctx_trampoline
        .hidden weft__ctx_trampoline
        .type   weft__ctx_trampoline,%function
        .p2align 4
weft__ctx_trampoline:
        .cfi_startproc
        WEFT_LANDING_PAD
        .cfi_undefined x30              /* outermost frame */
        mov     x0, x20                 /* entry(arg) */
        blr     x19
        brk     #0                      /* entry returned: a bug */
        .cfi_endproc
        .size   weft__ctx_trampoline,.-weft__ctx_trampoline

/* The same with a C++ runtime: a new thread starts with no exception caught or in
 * flight (the switch loaded whatever lay below the new frame). */
        .globl  weft__ctx_trampoline_cxx
        .hidden weft__ctx_trampoline_cxx
        .type   weft__ctx_trampoline_cxx,%function
        .p2align 4
weft__ctx_trampoline_cxx:
        .cfi_startproc
        WEFT_LANDING_PAD
        .cfi_undefined x30
        mrs     x9, tpidr_el0
        adrp    x10, :gottprel:weft__tls_eh
        ldr     x10, [x10, #:gottprel_lo12:weft__tls_eh]
        ldr     x9, [x9, x10]
        stp     xzr, xzr, [x9]
        mov     x0, x20
        blr     x19
        brk     #0
        .cfi_endproc
        .size   weft__ctx_trampoline_cxx,.-weft__ctx_trampoline_cxx

/* Resume of a frame rewritten by weft__ctx_fp_save() (switch mode ALL): errno and the
 * callee-saved registers are restored already; sp points at the real resume
 * address and the saved FPCR. x9/x10 are free: the resumed code is returning from
 * a call. */
        .globl  weft__ctx_fp_resume
        .hidden weft__ctx_fp_resume
        .type   weft__ctx_fp_resume,%function
        .p2align 4
weft__ctx_fp_resume:
        .cfi_startproc
        WEFT_LANDING_PAD
        ldp     x9, x10, [sp, #WEFT__FPEXT_RESUME] /* resume address, FPCR */
        add     sp, sp, #WEFT__FPEXT_SIZE
        msr     fpcr, x10
        ret     x9                      /* a return: no landing pad needed there */
        .cfi_endproc
        .size   weft__ctx_fp_resume,.-weft__ctx_fp_resume

        .section .note.GNU-stack,"",%progbits

#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
/* GNU property note: this object is BTI-compatible (GNU_PROPERTY_AARCH64_FEATURE_1_AND,
 * bit 0). The linker ANDs the notes of all objects. PAC (bit 1) is not claimed. */
        .section .note.gnu.property,"a"
        .p2align 3
        .long   4                       /* n_namesz: "GNU" */
        .long   16                      /* n_descsz */
        .long   5                       /* NT_GNU_PROPERTY_TYPE_0 */
        .asciz  "GNU"
        .long   0xc0000000              /* GNU_PROPERTY_AARCH64_FEATURE_1_AND */
        .long   4                       /* pr_datasz */
        .long   1                       /* GNU_PROPERTY_AARCH64_FEATURE_1_BTI */
        .p2align 3                      /* pr_data padded to 8 bytes */
#endif
