/* src/arch/x86_64/switch_x86_64_sysv_elf_gas.S - context switch, x86-64 System V, ELF.
 *
 * void weft__ctx_switch_c(weft_ctx_t *from, weft_ctx_t *to, void (*fn)(void *), void *arg)
 *                         rdi               rsi             rdx                  rcx
 * (weft__ctx_switch in C calls it, or its _cxx twin, through weft__ctx_ops.)
 *
 * Frame pushed on the old stack and popped from the new one (see src/arch/context.h):
 *
 *         -16 caught exceptions  } _cxx only: the kernel thread's __cxa_eh_globals,
 *         -8  uncaught count     } below the saved sp (see context.h)
 *   sp -> +0  errno (zero-extended)
 *         +8  r15
 *         +16 r14
 *         +24 r13
 *         +32 r12
 *         +40 rbx
 *         +48 rbp
 *         +56 resume address (the return address of the call, or the trampoline)
 *
 * Only the registers the System V ABI makes callee-saved are saved, plus errno, which
 * the C library keeps per kernel thread and POSIX code expects per thread. errno is an
 * initial-exec TLS variable of the C library: its address is the thread pointer
 * (%fs base) plus an offset that is the same on every kernel thread,
 * weft__ctx_errno_off (src/arch/tstate.c, checked on every kernel thread that
 * switches), so saving it is a load through %fs and a push, with no call.
 * The resume: the processor predicts a `ret` from its return-stack buffer, one per core,
 * whose top entry here is the return address of the call that entered the switch, i.e.
 * *from's resume address. When *to resumes at that same address (both threads switched
 * away at the same call site: workers running the same code, threads blocking in the same
 * wait), the resume is a `ret`: predicted, and it pops that entry, so the buffer keeps
 * the return addresses of the frames *to returns through next (the same code's). When
 * the addresses differ, a `ret` would mispredict on every switch, so the resume is `pop`
 * + indirect `jmp`, which the indirect predictor learns, and leaves the entry in place (a
 * bare two-site switch took 5.5 ns with pop + jmp against 17.5 ns with ret). Always
 * jumping made every switch between threads at the same site shift the buffer by one
 * entry, and each return the resumed thread made afterwards mispredicted: two threads
 * yielding four calls deep took more than twice as long a switch as two yielding from
 * their loops, and the `ret` for the same site removes most of that (the "L3 over call
 * sites" rows, bench/latency/L3_sites.c, give the figures). The test is a compare of
 * *from's resume address, kept in r15 from the save (free once the frame is pushed),
 * with *to's, and a branch: pops and moves keep the flags.
 *
 * The offsets are in src/arch/frame.h, shared with the C code that builds and
 * rewrites frames; the push order below must produce them (checked here).
 */
#include "arch/frame.h"

#if WEFT__FRAME_ERRNO != 0 || WEFT__FRAME_R15 != WEFT__FRAME_ERRNO + 8 ||   \
    WEFT__FRAME_R14 != WEFT__FRAME_R15 + 8 || WEFT__FRAME_R13 != WEFT__FRAME_R14 + 8 || \
    WEFT__FRAME_R12 != WEFT__FRAME_R13 + 8 || WEFT__FRAME_RBX != WEFT__FRAME_R12 + 8 || \
    WEFT__FRAME_RBP != WEFT__FRAME_RBX + 8 || WEFT__FRAME_RESUME != WEFT__FRAME_RBP + 8 || \
    WEFT__FRAME_SIZE != WEFT__FRAME_RESUME + 8
#error "the pushes of WEFT_SAVE_CALLEE_SAVED and the pops of WEFT_RESTORE_AND_RESUME do not match src/arch/frame.h"
#endif
/* Indirect branch tracking (CET IBT; the compiler defines __CET__ bit 0 with
 * -fcf-protection=branch or =full). Every entry point here is reached through a
 * pointer (weft__ctx_ops, a frame's resume address), so each starts with endbr64, as
 * the compiler's own functions do. The resume is an indirect jump to a return address,
 * which has no endbr64: it is a `notrack` jump, as the compiler's jump-table jumps
 * are (the prefix is ignored by processors without CET and decodes as the same
 * jump). Shadow stacks (__CET__ bit 1) are not supported: the switch moves between
 * call stacks without moving the shadow stack, so the property note below never
 * claims SHSTK, whatever the flags (docs/porting.md "Control-flow protection"). */
#if defined(__CET__) && (__CET__ & 1)
#define WEFT_LANDING_PAD endbr64
#define WEFT_NOTRACK notrack
#else
#define WEFT_LANDING_PAD
#define WEFT_NOTRACK
#endif

#if WEFT__FPEXT_MXCSR != 0 || WEFT__FPEXT_RESUME != 8 || WEFT__FPEXT_SIZE != 16
#error "weft__ctx_fp_resume does not match src/arch/frame.h"
#endif

/* Push the callee-saved registers and errno of the running context (the frame
 * above); leaves r14 = weft__ctx_errno_off for the restore (r8 is scratch). Once the
 * frame is pushed the callee-saved registers are free: *to's frame restores them,
 * and they survive the continuation's call (r13 and r14 here, rbx and r12 in the
 * _cxx continuation path). */
.macro WEFT_SAVE_CALLEE_SAVED
        pushq   %rbp
        pushq   %rbx
        pushq   %r12
        pushq   %r13
        pushq   %r14
        pushq   %r15
        movq    weft__ctx_errno_off(%rip), %r14
        movl    %fs:(%r14), %r8d
        pushq   %r8
        movq    WEFT__FRAME_RESUME(%rsp), %r15  /* *from's resume address, for the resume */
.endm

/* Pop errno (r14 = weft__ctx_errno_off) and the callee-saved registers of the
 * context whose stack we are on, and resume it at its saved resume address: `ret` when
 * that is *from's (r15, from the save), else pop + indirect jmp (the top of the file
 * says why; r8 is caller-saved). */
.macro WEFT_RESTORE_AND_RESUME
        cmpq    %r15, WEFT__FRAME_RESUME(%rsp) /* *to resumes where *from would have? */
        popq    %r8                     /* (pop and mov keep the flags) */
        movl    %r8d, %fs:(%r14)
        popq    %r15
        popq    %r14
        popq    %r13
        popq    %r12
        popq    %rbx
        popq    %rbp
        jne     9f
        ret                             /* yes: predicted, and the predictor stays balanced */
9:      popq    %r8
        WEFT_NOTRACK jmpq *%r8
.endm

/* reg = this kernel thread's __cxa_eh_globals (weft__tls_eh, initial-exec TLS). */
.macro WEFT_EH_GLOBALS reg
        movq    weft__tls_eh@gottpoff(%rip), \reg
        movq    %fs:(\reg), \reg
.endm

        .text
        .globl  weft__ctx_switch_c
        .hidden weft__ctx_switch_c
        .type   weft__ctx_switch_c,@function
        .p2align 4
weft__ctx_switch_c:
        .cfi_startproc
        WEFT_LANDING_PAD
        WEFT_SAVE_CALLEE_SAVED          /* save callee-saved registers and errno of *from */
        movq    %rsp, (%rdi)            /* from->sp = rsp: *from is now fully saved */
        movq    (%rsi), %rsp            /* rsp = to->sp: we are on the new stack */
        testq   %rdx, %rdx              /* continuation to run? */
        jnz     2f
1:      WEFT_RESTORE_AND_RESUME         /* restore *to and resume it */
2:      movq    %rcx, %rdi              /* fn(arg) on the new stack (to->sp is 16-aligned) */
        callq   *%rdx
        jmp     1b                      /* errno is restored after fn: fn may set it */
        .cfi_endproc
        .size   weft__ctx_switch_c,.-weft__ctx_switch_c

/* The same, carrying the kernel thread's C++ exception state: the two words of
 * *from's are stored below its saved sp (red zone: a signal frame cannot land there
 * before the stack switch), those below *to's are loaded before fn runs (fn's frames
 * would overwrite them) and written to the kernel thread's globals. */
        .globl  weft__ctx_switch_cxx
        .hidden weft__ctx_switch_cxx
        .type   weft__ctx_switch_cxx,@function
        .p2align 4
weft__ctx_switch_cxx:
        .cfi_startproc
        WEFT_LANDING_PAD
        WEFT_SAVE_CALLEE_SAVED
        WEFT_EH_GLOBALS %r13
        movups  (%r13), %xmm0
        movups  %xmm0, WEFT__FRAME_EH_CAUGHT(%rsp) /* *from's exception state, below its sp */
        movq    %rsp, (%rdi)            /* *from fully saved */
        movq    (%rsi), %rsp            /* on the new stack */
        testq   %rdx, %rdx
        jnz     2f
        movups  WEFT__FRAME_EH_CAUGHT(%rsp), %xmm0 /* *to's exception state (red zone) */
        movups  %xmm0, (%r13)
1:      WEFT_RESTORE_AND_RESUME
2:      movq    WEFT__FRAME_EH_CAUGHT(%rsp), %rbx   /* *to's exception state, kept in */
        movq    WEFT__FRAME_EH_UNCAUGHT(%rsp), %r12 /* registers *to's frame restores */
        movq    %rcx, %rdi
        callq   *%rdx
        movq    %rbx, (%r13)
        movq    %r12, 8(%r13)
        jmp     1b
        .cfi_endproc
        .size   weft__ctx_switch_cxx,.-weft__ctx_switch_cxx

/* void weft__ctx_switch_unlock_c(weft_ctx_t *from, weft_ctx_t *to, uint32_t *word)
 *                                rdi               rsi             rdx
 * The continuation specialised to "store 0 to *word" (release a spinlock): what a
 * yield needs, without the indirect call. A plain store is a release on x86-64. */
        .globl  weft__ctx_switch_unlock_c
        .hidden weft__ctx_switch_unlock_c
        .type   weft__ctx_switch_unlock_c,@function
        .p2align 4
weft__ctx_switch_unlock_c:
        .cfi_startproc
        WEFT_LANDING_PAD
        WEFT_SAVE_CALLEE_SAVED
        movq    %rsp, (%rdi)            /* *from fully saved */
        movq    (%rsi), %rsp            /* on the new stack */
        movl    $0, (%rdx)              /* release the lock: *from may now be taken */
        WEFT_RESTORE_AND_RESUME
        .cfi_endproc
        .size   weft__ctx_switch_unlock_c,.-weft__ctx_switch_unlock_c

        .globl  weft__ctx_switch_unlock_cxx
        .hidden weft__ctx_switch_unlock_cxx
        .type   weft__ctx_switch_unlock_cxx,@function
        .p2align 4
weft__ctx_switch_unlock_cxx:
        .cfi_startproc
        WEFT_LANDING_PAD
        WEFT_SAVE_CALLEE_SAVED
        WEFT_EH_GLOBALS %r13
        movups  (%r13), %xmm0
        movups  %xmm0, WEFT__FRAME_EH_CAUGHT(%rsp) /* *from's, before the release */
        movq    %rsp, (%rdi)
        movq    (%rsi), %rsp
        movl    $0, (%rdx)              /* release the lock: *from may now be taken */
        movups  WEFT__FRAME_EH_CAUGHT(%rsp), %xmm0 /* *to's exception state (red zone) */
        movups  %xmm0, (%r13)
        WEFT_RESTORE_AND_RESUME
        .cfi_endproc
        .size   weft__ctx_switch_unlock_cxx,.-weft__ctx_switch_unlock_cxx

/* First resume of a context built by weft__ctx_make(): rbx = entry, r12 = arg,
 * rsp = top of the new stack (16-aligned), errno 0. entry never returns. */
        .globl  weft__ctx_trampoline
        .hidden weft__ctx_trampoline
        .type   weft__ctx_trampoline,@function
        .p2align 4
weft__ctx_trampoline:
        .cfi_startproc
        WEFT_LANDING_PAD
        .cfi_undefined rip              /* outermost frame: debuggers stop here */
        movq    %r12, %rdi              /* entry(arg) */
        callq   *%rbx
        ud2                             /* entry returned: a bug */
        .cfi_endproc
        .size   weft__ctx_trampoline,.-weft__ctx_trampoline

/* The same with a C++ runtime: a new thread starts with no exception caught or in
 * flight (the switch loaded whatever lay below the new frame). */
        .globl  weft__ctx_trampoline_cxx
        .hidden weft__ctx_trampoline_cxx
        .type   weft__ctx_trampoline_cxx,@function
        .p2align 4
weft__ctx_trampoline_cxx:
        .cfi_startproc
        WEFT_LANDING_PAD
        .cfi_undefined rip
        WEFT_EH_GLOBALS %r9
        movq    $0, (%r9)
        movq    $0, 8(%r9)
        movq    %r12, %rdi
        callq   *%rbx
        ud2
        .cfi_endproc
        .size   weft__ctx_trampoline_cxx,.-weft__ctx_trampoline_cxx

/* Resume of a frame rewritten by weft__ctx_fp_save() (switch mode ALL): errno and the
 * callee-saved registers are restored already; rsp points at the saved FP control
 * word (mxcsr in the low half, the x87 control word above), then the real resume
 * address. r8 is free: the resumed code is returning from a call. */
        .globl  weft__ctx_fp_resume
        .hidden weft__ctx_fp_resume
        .type   weft__ctx_fp_resume,@function
        .p2align 4
weft__ctx_fp_resume:
        .cfi_startproc
        WEFT_LANDING_PAD
        ldmxcsr WEFT__FPEXT_MXCSR(%rsp)
        fldcw   WEFT__FPEXT_FCW(%rsp)
        addq    $WEFT__FPEXT_RESUME, %rsp
        popq    %r8                     /* the resume address */
        WEFT_NOTRACK jmpq *%r8
        .cfi_endproc
        .size   weft__ctx_fp_resume,.-weft__ctx_fp_resume

        .section .note.GNU-stack,"",%progbits

#if defined(__CET__) && (__CET__ & 1)
/* GNU property note: this object is IBT-compatible (GNU_PROPERTY_X86_FEATURE_1_AND,
 * bit 0). The linker ANDs the notes of all objects, so the library claims IBT only
 * if every object does. SHSTK (bit 1) is left out on purpose: see above. */
        .section .note.gnu.property,"a"
        .p2align 3
        .long   4                       /* n_namesz: "GNU" */
        .long   16                      /* n_descsz */
        .long   5                       /* NT_GNU_PROPERTY_TYPE_0 */
        .asciz  "GNU"
        .long   0xc0000002              /* GNU_PROPERTY_X86_FEATURE_1_AND */
        .long   4                       /* pr_datasz */
        .long   1                       /* GNU_PROPERTY_X86_FEATURE_1_IBT */
        .p2align 3                      /* pr_data padded to 8 bytes */
#endif
