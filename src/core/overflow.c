/* src/core/overflow.c - the stack-overflow report: a SIGSEGV/SIGBUS handler on each
 * VP's alternate signal stack that names the thread whose guard region was hit, with
 * its own async-signal-safe formatter. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "diag/diag.h"

static struct sigaction old_segv, old_bus;
#define WEFT__ALTSTACK_SIZE (64 * 1024)

static char *fmt_hex(char *p, uintptr_t v) {
  char tmp[18];
  int n = 0;
  do { tmp[n++] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
  *p++ = '0'; *p++ = 'x';
  while (n) *p++ = tmp[--n];
  return p;
}

static char *fmt_dec(char *p, uint64_t v) {
  char tmp[21];
  int n = 0;
  do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
  while (n) *p++ = tmp[--n];
  return p;
}

static char *fmt_str(char *p, const char *s) { while (*s) *p++ = *s++; return p; }

/* Runs on the VP's alternate signal stack. Async-signal-safe: formats by hand and
 * writes with write(2). A fault in the guard page of the running weft thread is a
 * stack overflow: report and abort. Anything else goes to the previous handler. */
static void segv_handler(int sig, siginfo_t *si, void *uc) {
  weft_vp_t *vp = weft__vp();
  weft_thread_t *t = vp ? vp->current : NULL;
  uintptr_t a = (uintptr_t)si->si_addr;
  if (t && t->stack) {
    size_t size = t->stack_size ? t->stack_size : weft__rt.cfg.stack_size;
    uintptr_t lo = (uintptr_t)t->stack, hi = lo + size;
    /* the guard region below every stack weft maps (chunk slots and single
     * mappings alike); a fault as far below a caller's or a policy's stack is an
     * overflow too */
    uintptr_t glo = lo - weft__rt.pool.guard;
    if (a >= glo && a < lo) {
      char buf[256], *p = buf;
      p = fmt_str(p, "weft: stack overflow in thread ");
      p = fmt_dec(p, t->id);
      char nm[WEFT_NAME_MAX];  /* its name too, if it has one (a copy: no locks) */
      if (weft__name_copy(t, nm, sizeof nm)) {
        p = fmt_str(p, " \"");
        p = fmt_str(p, nm);
        p = fmt_str(p, "\"");
      }
      p = fmt_str(p, ": stack [");
      p = fmt_hex(p, lo);
      p = fmt_str(p, ", ");
      p = fmt_hex(p, hi);
      p = fmt_str(p, "), guard region [");
      p = fmt_hex(p, glo);
      p = fmt_str(p, ", ");
      p = fmt_hex(p, lo);
      p = fmt_str(p, "), fault address ");
      p = fmt_hex(p, a);
      p = fmt_str(p, "\n");
      ssize_t r = write(2, buf, (size_t)(p - buf));
      (void)r;
      signal(SIGABRT, SIG_DFL);
      abort();
    }
  }
  struct sigaction *old = sig == SIGSEGV ? &old_segv : &old_bus;
  if (old->sa_flags & SA_SIGINFO) {
    if (old->sa_sigaction) { old->sa_sigaction(sig, si, uc); return; }
  } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
    old->sa_handler(sig);
    return;
  }
  /* default action: reinstall it and let the fault happen again */
  signal(sig, SIG_DFL);
}

static void install_segv(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = segv_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old_segv);
  sigaction(SIGBUS, &sa, &old_bus);
}

static void restore_segv(void) {
  sigaction(SIGSEGV, &old_segv, NULL);
  sigaction(SIGBUS, &old_bus, NULL);
}

static stack_t old_altstack; /* VP 0's kernel thread is the caller's: restore it */

/* Allocates a VP's signal stack; each kernel thread installs its own (vp_main, or
 * weft_init for VP 0, which saves the caller's previous one first). */
int weft__altstack_alloc(weft_vp_t *vp) {
  vp->altstack = weft__sys_malloc(WEFT__ALTSTACK_SIZE);
  return vp->altstack ? 0 : WEFT_ENOMEM;
}

void weft__altstack_enter(weft_vp_t *vp) {
  stack_t ss = {.ss_sp = vp->altstack, .ss_size = WEFT__ALTSTACK_SIZE, .ss_flags = 0};
  sigaltstack(&ss, NULL);
}

void weft__altstack_leave(void) {
  stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
  sigaltstack(&off, NULL);
}

void weft__overflow_install(weft_vp_t *vp0) {
  stack_t ss = {.ss_sp = vp0->altstack, .ss_size = WEFT__ALTSTACK_SIZE, .ss_flags = 0};
  sigaltstack(&ss, &old_altstack); /* the caller's own is restored by overflow_remove */
  install_segv();
}

void weft__overflow_remove(void) {
  restore_segv();
  sigaltstack(&old_altstack, NULL);
}
