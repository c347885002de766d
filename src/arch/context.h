/* src/arch/context.h - the only interface between the core and the instruction set.
 *
 * A context is one saved stack pointer. Switching pushes the callee-saved registers
 * of the ABI onto the current stack, stores the stack pointer in *from, loads the
 * stack pointer of *to, optionally calls fn(arg) on that new stack ("switch, then
 * call": the continuation of C-Threads §3), then pops the registers of *to and
 * resumes it. Because fn runs after *from is completely saved, fn may publish the
 * switched-away thread (requeue it, unlock its wait list) and no other processor can
 * ever resume a half-saved context. fn runs on the same kernel thread, before the
 * resumed code, and must return.
 *
 * Per-thread C library state travels with the context (docs/design.md "State that
 * travels with a thread"): the switch saves the kernel thread's errno into the frame
 * of *from and writes the one saved in *to's frame back, after fn has run, on
 * whichever kernel thread resumes it. When a C++ runtime is present (found at
 * weft_init), the switch also carries its exception state: the two words of the
 * kernel thread's __cxa_eh_globals (caught exceptions, uncaught count) are stored
 * just below the saved stack pointer of *from and loaded from below that of *to.
 *
 * Saved-register layout (src/arch/frame.h has the offsets, shared by the assembly
 * and the C code below, and checks them against C structs; lowest address first,
 * *sp points at +0):
 *   x86-64 System V: +0 errno  +8 r15  +16 r14  +24 r13  +32 r12  +40 rbx  +48 rbp
 *     +56 resume address
 *   AArch64 AAPCS64 (176 bytes): +0 x19,x20 +16 x21,x22 +32 x23,x24 +48 x25,x26
 *     +64 x27,x28 +80 x29,x30(lr) +96 d8,d9 +112 d10,d11 +128 d12,d13 +144 d14,d15
 *     +160 errno, padding
 *   C++ runtime present (both): -16 caught exceptions, -8 uncaught count
 * The two exception words lie below the stack pointer, outside the frame, so that
 * the frame (and weft__ctx_make's) is the same with and without a C++ runtime; a
 * suspended context's stack below its sp is used by nobody until it resumes. They
 * are written after the switch has left that stack and read before it enters the
 * next one (AArch64, which has no red zone for signal frames), or inside the
 * 128-byte red zone that signal delivery skips (x86-64), and read before fn runs.
 * Only integer state and the callee-saved vector halves are saved (the "integer"
 * switch mode of OpenThreads §3.2.3). The floating-point control words (MXCSR, x87
 * CW, FPCR) are not saved by the switch itself. The "all registers" mode adds them
 * without touching the switch: weft__ctx_fp_save() below rewrites a saved frame so
 * that its resume goes through weft__ctx_fp_resume, which reloads them. See
 * docs/meta-interface.md "Context-switch modes".
 */
#ifndef WEFT_ARCH_CONTEXT_H
#define WEFT_ARCH_CONTEXT_H

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif

#include "arch/frame.h"

#if !defined(WEFT_CONTEXT_UCONTEXT) && !defined(__x86_64__) && !defined(__aarch64__)
#error "no assembly context switch for this architecture: configure with -DWEFT_CONTEXT=ucontext"
#endif

typedef struct weft_ctx {
  void *sp;  /* saved stack pointer (ucontext: the ucontext_t); NULL: never made */
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
  const void *stack_lo; /* bounds of the stack this context runs on (ASan) */
  size_t stack_size;
  void *asan_fake;      /* ASan fake-stack handle saved while switched out */
  void *tsan_fiber;     /* TSan fiber of this context */
#endif
} weft_ctx_t;

typedef void (*weft_ctx_fn)(void *arg);

#ifdef __cplusplus
typedef uint32_t weft__ctx_word_t;  /* C++ tests: same size and layout */
#else
typedef _Atomic uint32_t weft__ctx_word_t;
#endif

/* ---- per-thread state the switch carries (src/arch/tstate.c) ----------------------
 * weft__ctx_tstate_init() (weft_init, before any context exists) looks for a C++
 * runtime (__cxa_get_globals, the Itanium C++ ABI's per-thread exception state:
 * libstdc++ and libc++abi both have it) and chooses the switch that carries its
 * state, or the one that does not. weft__ctx_tstate_self() prepares the calling
 * kernel thread: every kernel thread that switches contexts calls it once before its
 * first switch (weft__ctx_init_self does). */
void weft__ctx_tstate_init(void);
void weft__ctx_tstate_self(void);
/* 1 if the switch carries C++ exception state (a C++ runtime was found). */
int weft__ctx_tstate_cxx(void);
/* This kernel thread's __cxa_eh_globals (two words, caught exceptions and uncaught
 * count), or NULL without a C++ runtime: a kernel thread's own, fixed for its life
 * (per kernel thread, not an offset: a dlopen'ed runtime keeps it in dynamic TLS). */
extern __thread void *weft__tls_eh
    __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* weft__ctx_switch() saves the caller into *from, switches to *to, calls fn(arg)
 * there if fn is not NULL, and resumes *to. Returns when something switches back
 * to *from. errno (and the C++ exception state) of the caller is the same when it
 * returns, on whichever kernel thread.
 * weft__ctx_switch_unlock() is weft__ctx_switch() with the continuation fixed to
 * "release-store 0 to *word": unlocking a spinlock held across the switch.
 * Implemented in assembly (src/arch/<isa>/) or with ucontext. The assembly has two
 * versions of each (without and with the C++ exception state) called through
 * weft__ctx_ops, which weft__ctx_tstate_init() sets: an indirect call is one
 * instruction, as the direct one was, so a C program pays nothing for C++. */
#if defined(WEFT_CONTEXT_UCONTEXT)
void weft__ctx_switch(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg);
void weft__ctx_switch_unlock(weft_ctx_t *from, weft_ctx_t *to, weft__ctx_word_t *word);
#else
typedef struct weft__ctx_ops {
  void (*sw)(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg);
  void (*sw_unlock)(weft_ctx_t *from, weft_ctx_t *to, weft__ctx_word_t *word);
  void (*trampoline)(void);  /* first resume of a weft__ctx_make() frame */
} weft__ctx_ops_t;
/* hidden: one PC-relative operand, no GOT load, at every call site */
extern weft__ctx_ops_t weft__ctx_ops __attribute__((visibility("hidden")));
void weft__ctx_switch_c(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg);
void weft__ctx_switch_cxx(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg);
void weft__ctx_switch_unlock_c(weft_ctx_t *from, weft_ctx_t *to, weft__ctx_word_t *word);
void weft__ctx_switch_unlock_cxx(weft_ctx_t *from, weft_ctx_t *to, weft__ctx_word_t *word);
/* entry(arg) with the kernel thread's errno as the frame left it (0) and, _cxx, its
 * exception state cleared (what the switch loaded from below a new frame is not a
 * thread's) */
void weft__ctx_trampoline(void);
void weft__ctx_trampoline_cxx(void);
static inline void weft__ctx_switch(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg) {
  weft__ctx_ops.sw(from, to, fn, arg);
}
static inline void weft__ctx_switch_unlock(weft_ctx_t *from, weft_ctx_t *to,
                                           weft__ctx_word_t *word) {
  weft__ctx_ops.sw_unlock(from, to, word);
}
#endif

/* weft__ctx_make() prepares *ctx so that the first switch to it runs the
 * continuation, then entry(arg) on the stack [lo, hi). entry must never return.
 * The assembly versions build the frame the switch pops (see the layouts above):
 * errno 0, the resume address is the trampoline, which calls entry (in a
 * callee-saved register) with arg (in another). The ucontext fallback keeps its
 * ucontext_t at the top of the stack. */
#if defined(WEFT_CONTEXT_UCONTEXT)
void weft__ctx_make(weft_ctx_t *ctx, void *lo, void *hi, void (*entry)(void *), void *arg);
#else
static inline void weft__ctx_make(weft_ctx_t *ctx, void *lo, void *hi,
                                  void (*entry)(void *), void *arg) {
  (void)lo;
  /* hi is 16-aligned and so is the frame below it (src/arch/frame.h). x86-64: the
   * trampoline starts with rsp = hi (after the pops), so its `call` leaves
   * rsp = 8 mod 16 at entry's first instruction, as the ABI wants. AArch64: sp = hi. */
  weft__frame_t *f = (weft__frame_t *)hi - 1;
  f->errno_word = 0;
#if defined(__x86_64__)
  f->r12 = (uintptr_t)arg;
  f->rbx = (uintptr_t)entry;
  f->rbp = 0;                                 /* ends frame-pointer walks */
  f->resume = (uintptr_t)weft__ctx_ops.trampoline;
#else
  f->x19 = (uintptr_t)entry;
  f->x20 = (uintptr_t)arg;
  f->x29 = 0;                                 /* ends frame-pointer walks */
  f->x30 = (uintptr_t)weft__ctx_ops.trampoline; /* resume address */
#endif
  ctx->sp = f;
}
#endif

/* weft__ctx_fp_save() turns the frame a switch just saved in *ctx (not resumed
 * since) into one that also restores the FP control state the kernel thread has
 * now, which is the saved context's: the switch does not touch it, so it must be
 * called before anything on the new stack changes it (first thing in the
 * continuation). The frame grows by 16 bytes downwards (free stack: the context is
 * suspended in a call), and its resume address becomes weft__ctx_fp_resume:
 *   x86-64:  [errno r15 r14 r13 r12 rbx rbp] [fp_resume] [mxcsr | fcw << 32] [resume]
 *            fp_resume: ldmxcsr, fldcw, skip the word, pop the resume address, jmp.
 *   AArch64: [the 176-byte frame, x30 = fp_resume] [resume] [fpcr]
 *            fp_resume: load both, msr fpcr, br to the resume address.
 * The two C++ exception words below the old stack pointer move down with the frame
 * (copied whether or not a C++ runtime is present: below a suspended sp either way).
 * Whichever switch resumes the frame later runs its usual restore sequence, which
 * lands in fp_resume: the resumer need not know the mode of what it resumes.
 * The ucontext fallback needs nothing: swapcontext saves and restores the FP
 * environment of every context. Not instrumented: it reads and writes below a
 * suspended context's stack pointer, which the sanitizers cannot know is free. */
#if defined(WEFT_CONTEXT_UCONTEXT)
static inline void weft__ctx_fp_save(weft_ctx_t *ctx) { (void)ctx; }
#else
void weft__ctx_fp_resume(void);
__attribute__((no_sanitize("address", "thread")))
static inline void weft__ctx_fp_save(weft_ctx_t *ctx) {
  weft__frame_t *f = (weft__frame_t *)ctx->sp;
  weft__fpframe_t *n = (weft__fpframe_t *)((char *)f - WEFT__FPEXT_SIZE);
  weft__fpext_t ext;
#if defined(__x86_64__)
  uint32_t mxcsr;
  uint16_t fcw;
  __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
  __asm__ volatile("fnstcw %0" : "=m"(fcw));
  ext.fpctl = (uintptr_t)mxcsr | ((uintptr_t)fcw << 32);
  ext.resume = f->resume;
#else
  __asm__ volatile("mrs %0, fpcr" : "=r"(ext.fpcr));
  ext.resume = f->x30;
#endif
  /* the exception words and the frame move down, through a copy: the ranges overlap */
  uintptr_t words[(sizeof(weft__frame_eh_t) + sizeof(weft__frame_t)) / sizeof(uintptr_t)];
  __builtin_memcpy(words, (char *)f - sizeof(weft__frame_eh_t), sizeof words);
  __builtin_memcpy((char *)n - sizeof(weft__frame_eh_t), words, sizeof words);
#if defined(__x86_64__)
  n->frame.resume = (uintptr_t)weft__ctx_fp_resume;
#else
  n->frame.x30 = (uintptr_t)weft__ctx_fp_resume;
#endif
  n->ext = ext;
  ctx->sp = n;
}
#endif

/* Storage a context that is only switched away from (an OS thread's own stack)
 * needs: zero with assembly, a ucontext_t with the fallback. */
#if defined(WEFT_CONTEXT_UCONTEXT)
#include <ucontext.h>
#define WEFT__CTX_SELF_SIZE sizeof(ucontext_t)
#else
#define WEFT__CTX_SELF_SIZE 0
#endif

/* weft__ctx_init_self() makes *ctx describe the running OS thread's own stack, with
 * `storage` (WEFT__CTX_SELF_SIZE bytes, suitably aligned) for the fallback, and
 * prepares the kernel thread for switching (weft__ctx_tstate_self). */
#if defined(WEFT_CONTEXT_UCONTEXT)
void weft__ctx_init_self(weft_ctx_t *ctx, void *storage);
#else
static inline void weft__ctx_init_self(weft_ctx_t *ctx, void *storage) {
  (void)storage;
  ctx->sp = NULL;  /* filled by the first switch away */
  weft__ctx_tstate_self();
}
#endif

#endif
