/* src/arch/x86_64/switch_x86_64_sysv_elf_gas.S - context switch, x86-64 System V, ELF.
 *
 * void weft__ctx_switch(weft_ctx_t *from, weft_ctx_t *to, void (*fn)(void *), void *arg)
 *                       rdi               rsi             rdx                  rcx
 *
 * Frame pushed on the old stack and popped from the new one (see src/arch/context.h):
 *
 *   sp -> +0  r15
 *         +8  r14
 *         +16 r13
 *         +24 r12
 *         +32 rbx
 *         +40 rbp
 *         +48 resume address (the return address of the call, or the trampoline)
 *
 * Only the registers the System V ABI makes callee-saved are saved. The resume is
 * `pop` + indirect `jmp`, not `ret`: a `ret` here returns to a different call site
 * than the one the return-stack predictor remembers, so it mispredicts on every
 * switch (the runtime-core issue measured a bare switch on this project's machine at
 * 5.5 ns with pop + jmp against 17.5 ns with ret).
 */

/* Push the callee-saved registers of the running context (the frame above). */
.macro WEFT_SAVE_CALLEE_SAVED
        pushq   %rbp
        pushq   %rbx
        pushq   %r12
        pushq   %r13
        pushq   %r14
        pushq   %r15
.endm

/* Pop the callee-saved registers of the context whose stack we are on, and resume
 * it at its saved resume address (pop + indirect jmp; r8 is caller-saved). */
.macro WEFT_RESTORE_AND_RESUME
        popq    %r15
        popq    %r14
        popq    %r13
        popq    %r12
        popq    %rbx
        popq    %rbp
        popq    %r8
        jmpq    *%r8
.endm

        .text
        .globl  weft__ctx_switch
        .hidden weft__ctx_switch
        .type   weft__ctx_switch,@function
        .p2align 4
weft__ctx_switch:
        .cfi_startproc
        WEFT_SAVE_CALLEE_SAVED          /* save callee-saved registers of *from */
        movq    %rsp, (%rdi)            /* from->sp = rsp: *from is now fully saved */
        movq    (%rsi), %rsp            /* rsp = to->sp: we are on the new stack */
        testq   %rdx, %rdx              /* continuation to run? */
        jnz     2f
1:      WEFT_RESTORE_AND_RESUME         /* restore *to and resume it */
2:      movq    %rcx, %rdi              /* fn(arg) on the new stack */
        subq    $8, %rsp                /* to->sp is 8 mod 16: align for the call */
        callq   *%rdx
        addq    $8, %rsp
        jmp     1b
        .cfi_endproc
        .size   weft__ctx_switch,.-weft__ctx_switch

/* void weft__ctx_switch_unlock(weft_ctx_t *from, weft_ctx_t *to, uint32_t *word)
 *                              rdi               rsi             rdx
 * The continuation specialised to "store 0 to *word" (release a spinlock): what a
 * yield needs, without the indirect call. A plain store is a release on x86-64. */
        .globl  weft__ctx_switch_unlock
        .hidden weft__ctx_switch_unlock
        .type   weft__ctx_switch_unlock,@function
        .p2align 4
weft__ctx_switch_unlock:
        .cfi_startproc
        WEFT_SAVE_CALLEE_SAVED
        movq    %rsp, (%rdi)            /* *from fully saved */
        movq    (%rsi), %rsp            /* on the new stack */
        movl    $0, (%rdx)              /* release the lock: *from may now be taken */
        WEFT_RESTORE_AND_RESUME
        .cfi_endproc
        .size   weft__ctx_switch_unlock,.-weft__ctx_switch_unlock

/* First resume of a context built by weft__ctx_make(): rbx = entry, r12 = arg,
 * rsp = top of the new stack (16-aligned). entry never returns. */
        .globl  weft__ctx_trampoline
        .hidden weft__ctx_trampoline
        .type   weft__ctx_trampoline,@function
        .p2align 4
weft__ctx_trampoline:
        .cfi_startproc
        .cfi_undefined rip              /* outermost frame: debuggers stop here */
        movq    %r12, %rdi              /* entry(arg) */
        callq   *%rbx
        ud2                             /* entry returned: a bug */
        .cfi_endproc
        .size   weft__ctx_trampoline,.-weft__ctx_trampoline

/* Resume of a frame rewritten by weft__ctx_fp_save() (switch mode ALL): the
 * callee-saved registers are restored already; rsp points at the saved FP control
 * word (mxcsr in the low half, the x87 control word above), then the real resume
 * address. r8 is free: the resumed code is returning from a call. */
        .globl  weft__ctx_fp_resume
        .hidden weft__ctx_fp_resume
        .type   weft__ctx_fp_resume,@function
        .p2align 4
weft__ctx_fp_resume:
        .cfi_startproc
        ldmxcsr (%rsp)
        fldcw   4(%rsp)
        addq    $8, %rsp
        popq    %r8
        jmpq    *%r8
        .cfi_endproc
        .size   weft__ctx_fp_resume,.-weft__ctx_fp_resume

        .section .note.GNU-stack,"",%progbits
