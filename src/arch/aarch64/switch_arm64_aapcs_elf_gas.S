/* src/arch/aarch64/switch_arm64_aapcs_elf_gas.S - context switch, AArch64 AAPCS64, ELF.
 *
 * void weft__ctx_switch(weft_ctx_t *from, weft_ctx_t *to, void (*fn)(void *), void *arg)
 *                       x0                x1              x2                   x3
 *
 * Frame (160 bytes, sp stays 16-aligned; see src/arch/context.h):
 *
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
 *
 * AAPCS64 makes x19-x28, x29, x30, sp and the low halves of v8-v15 callee-saved;
 * nothing else is saved.
 */

/* Push the callee-saved registers of the running context (the frame above). */
.macro WEFT_SAVE_CALLEE_SAVED
        sub     sp, sp, #160            /* frame for the callee-saved registers */
        stp     x19, x20, [sp, #0]
        stp     x21, x22, [sp, #16]
        stp     x23, x24, [sp, #32]
        stp     x25, x26, [sp, #48]
        stp     x27, x28, [sp, #64]
        stp     x29, x30, [sp, #80]     /* x30 = our return address = resume address */
        stp     d8,  d9,  [sp, #96]
        stp     d10, d11, [sp, #112]
        stp     d12, d13, [sp, #128]
        stp     d14, d15, [sp, #144]
.endm

/* Restore the context whose stack we are on and resume it at x30. */
.macro WEFT_RESTORE_AND_RESUME
        ldp     x19, x20, [sp, #0]
        ldp     x21, x22, [sp, #16]
        ldp     x23, x24, [sp, #32]
        ldp     x25, x26, [sp, #48]
        ldp     x27, x28, [sp, #64]
        ldp     x29, x30, [sp, #80]
        ldp     d8,  d9,  [sp, #96]
        ldp     d10, d11, [sp, #112]
        ldp     d12, d13, [sp, #128]
        ldp     d14, d15, [sp, #144]
        add     sp, sp, #160
        ret
.endm

        .text
        .globl  weft__ctx_switch
        .hidden weft__ctx_switch
        .type   weft__ctx_switch,%function
        .p2align 4
weft__ctx_switch:
        .cfi_startproc
        WEFT_SAVE_CALLEE_SAVED          /* save callee-saved registers of *from */
        mov     x9, sp
        str     x9, [x0]                /* from->sp: *from is now fully saved */
        ldr     x9, [x1]
        mov     sp, x9                  /* on the new stack */
        cbz     x2, 1f                  /* continuation to run? */
        mov     x0, x3                  /* fn(arg) on the new stack */
        blr     x2
1:      WEFT_RESTORE_AND_RESUME         /* restore *to and resume it */
        .cfi_endproc
        .size   weft__ctx_switch,.-weft__ctx_switch

/* void weft__ctx_switch_unlock(weft_ctx_t *from, weft_ctx_t *to, uint32_t *word)
 *                              x0                x1              x2
 * The continuation specialised to "store-release 0 to *word" (unlock). */
        .globl  weft__ctx_switch_unlock
        .hidden weft__ctx_switch_unlock
        .type   weft__ctx_switch_unlock,%function
        .p2align 4
weft__ctx_switch_unlock:
        .cfi_startproc
        WEFT_SAVE_CALLEE_SAVED          /* save callee-saved registers of *from */
        mov     x9, sp
        str     x9, [x0]                /* *from fully saved */
        ldr     x9, [x1]
        mov     sp, x9
        stlr    wzr, [x2]               /* release the lock (pairs with the acquire
                                           exchange of the next lock holder) */
        WEFT_RESTORE_AND_RESUME         /* restore *to and resume it */
        .cfi_endproc
        .size   weft__ctx_switch_unlock,.-weft__ctx_switch_unlock

/* First resume of a context built by weft__ctx_make(): x19 = entry, x20 = arg,
 * sp = top of the new stack. entry never returns. */
        .globl  weft__ctx_trampoline
        .hidden weft__ctx_trampoline
        .type   weft__ctx_trampoline,%function
        .p2align 4
weft__ctx_trampoline:
        .cfi_startproc
        .cfi_undefined x30              /* outermost frame */
        mov     x0, x20                 /* entry(arg) */
        blr     x19
        brk     #0                      /* entry returned: a bug */
        .cfi_endproc
        .size   weft__ctx_trampoline,.-weft__ctx_trampoline

/* Resume of a frame rewritten by weft__ctx_fp_save() (switch mode ALL): the
 * callee-saved registers are restored already; sp points at the real resume
 * address and the saved FPCR. x9/x10 are free: the resumed code is returning from
 * a call. */
        .globl  weft__ctx_fp_resume
        .hidden weft__ctx_fp_resume
        .type   weft__ctx_fp_resume,%function
        .p2align 4
weft__ctx_fp_resume:
        .cfi_startproc
        ldp     x9, x10, [sp]
        add     sp, sp, #16
        msr     fpcr, x10
        br      x9
        .cfi_endproc
        .size   weft__ctx_fp_resume,.-weft__ctx_fp_resume

        .section .note.GNU-stack,"",%progbits
