/* src/arch/ucontext/switch_ucontext.c - portable context switch with ucontext(3).
 *
 * Chosen with -DWEFT_CONTEXT=ucontext. ctx->sp points at a ucontext_t: at the top
 * of a thread's stack, or in caller-provided storage for an OS thread's own stack.
 * swapcontext() also saves the signal mask (a system call per switch), so this is
 * far slower than the assembly; it exists for porting and for comparison.
 *
 * The continuation is passed through a per-kernel-thread slot: the switching side
 * stores fn/arg, and the resumed side (or the trampoline of a new context) runs it
 * first thing. Both happen on the same kernel thread, so the slot needs no atomics;
 * it is read through a non-inlined function so that no cached TLS address survives
 * a switch (a context can resume on another kernel thread).
 *
 * errno and the C++ exception state (src/arch/context.h) are kept in locals of the
 * switching function across swapcontext and written back on whichever kernel thread
 * resumes it, after the continuation; a new context starts with both cleared.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "arch/context.h"

struct pending { weft_ctx_fn fn; void *arg; };
static __thread struct pending weft__uc_pending;

__attribute__((noinline)) static struct pending *pending_slot(void) {
  struct pending *p = &weft__uc_pending;
  __asm__ volatile("" : "+r"(p));  /* never reuse the address across a switch */
  return p;
}

/* errno's address and this kernel thread's exception globals, out of line for the
 * same reason: __errno_location is declared const, so the compiler would reuse the
 * address from before the switch. */
__attribute__((noinline)) static int *errno_slot(void) {
  int *p = &errno;
  __asm__ volatile("" : "+r"(p));
  return p;
}

__attribute__((noinline)) static void *eh_slot(void) {
  void *p = weft__tls_eh;
  __asm__ volatile("" : "+r"(p));
  return p;
}

struct tstate { int err; unsigned char eh[16]; };

static void tstate_save(struct tstate *s) {
  s->err = *errno_slot();
  void *g = eh_slot();
  if (g) memcpy(s->eh, g, sizeof s->eh);
}

static void tstate_load(const struct tstate *s) {
  *errno_slot() = s->err;
  void *g = eh_slot();
  if (g) memcpy(g, s->eh, sizeof s->eh);
}

static void run_pending(void) {
  struct pending *p = pending_slot();
  weft_ctx_fn fn = p->fn;
  void *arg = p->arg;
  p->fn = NULL;
  if (fn) fn(arg);
}

void weft__ctx_switch(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg) {
  struct pending *p = pending_slot();
  p->fn = fn;
  p->arg = arg;
  struct tstate ts = {0, {0}};  /* all of it: the eh words stay 0 without a runtime */
  tstate_save(&ts);
  swapcontext((ucontext_t *)from->sp, (ucontext_t *)to->sp);
  run_pending();  /* we were resumed: run the continuation our resumer left */
  tstate_load(&ts);  /* after it: the continuation may set errno */
}

static void uc_trampoline(unsigned hi_e, unsigned lo_e, unsigned hi_a, unsigned lo_a) {
  void (*entry)(void *) = (void (*)(void *))(((uintptr_t)hi_e << 32) | lo_e);
  void *arg = (void *)(((uintptr_t)hi_a << 32) | lo_a);
  run_pending();
  static const struct tstate clear;
  tstate_load(&clear);
  entry(arg);
  abort();  /* entry never returns */
}

void weft__ctx_make(weft_ctx_t *ctx, void *lo, void *hi, void (*entry)(void *), void *arg) {
  uintptr_t top = ((uintptr_t)hi - sizeof(ucontext_t)) & ~(uintptr_t)63;
  ucontext_t *uc = (ucontext_t *)top;
  getcontext(uc);
  uc->uc_stack.ss_sp = lo;
  uc->uc_stack.ss_size = (size_t)(top - (uintptr_t)lo);
  uc->uc_link = NULL;
  uintptr_t e = (uintptr_t)entry, a = (uintptr_t)arg;
  makecontext(uc, (void (*)(void))uc_trampoline, 4, (unsigned)(e >> 32), (unsigned)e,
              (unsigned)(a >> 32), (unsigned)a);
  ctx->sp = uc;
}

void weft__ctx_init_self(weft_ctx_t *ctx, void *storage) {
  ctx->sp = storage;
  weft__ctx_tstate_self();
}

static void store_zero(void *word) {
  atomic_store_explicit((_Atomic uint32_t *)word, 0, memory_order_release);
}

void weft__ctx_switch_unlock(weft_ctx_t *from, weft_ctx_t *to, weft__ctx_word_t *word) {
  weft__ctx_switch(from, to, store_zero, (void *)word);
}
