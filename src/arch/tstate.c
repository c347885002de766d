/* src/arch/tstate.c - the per-thread C library state the context switch carries:
 * errno, and the C++ runtime's exception state when a C++ runtime is present
 * (src/arch/context.h; docs/design.md "State that travels with a thread").
 *
 * errno: glibc and musl keep it in initial-exec TLS (glibc) or in the thread
 * descriptor (musl), at a fixed distance from the thread pointer on every kernel
 * thread. That distance is computed once and checked on every kernel thread that
 * switches (weft__ctx_tstate_self); the assembly switch then reads and writes errno
 * through the thread pointer with no call. The ucontext fallback calls
 * __errno_location instead and does not need it.
 *
 * C++: the Itanium C++ ABI's __cxa_get_globals() returns the calling kernel thread's
 * exception globals (libstdc++ and libc++abi: { caught exceptions, uncaught count },
 * 16 bytes on LP64). It is looked up at weft_init, first as a weak reference (a
 * static link with the C++ runtime), then with dlsym (a shared C++ runtime, loaded
 * with the program or by dlopen before weft_init). Each kernel thread keeps its own
 * pointer (weft__tls_eh): an offset would do for a runtime loaded with the program,
 * but one loaded by dlopen has its TLS in dynamically allocated blocks.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "arch/context.h"

__thread void *weft__tls_eh __attribute__((tls_model("initial-exec")));

/* weak: NULL unless something linked into the program defines it */
extern void *__cxa_get_globals(void) __attribute__((weak));

/* Set by weft__ctx_tstate_init() while no context exists and no other kernel thread
 * of the runtime runs (weft_init, before the VPs start); read by kernel threads
 * started after it (pthread_create orders the accesses). */
static void *(*cxa_get_globals)(void);

#if !defined(WEFT_CONTEXT_UCONTEXT)
/* Read by the assembly switch (hidden: a PC-relative load). It and weft__ctx_ops,
 * read at every switch, start cache lines of their own (only read-mostly data of
 * this file follows them). Measured in libweft.so, whose layout put the counter
 * weft__live_blocks on this word's line: fib(30) with a thread per call took 65 to
 * 72 ms at 2 VPs against 71 ms at 1 VP, and 37 ms once the two were apart (the static
 * library's layout had them apart already). Hardware watchpoints saw no access to
 * that line while it ran slow; the cause is not understood, the separation is what
 * was measured (by hand: the benchmarks link the static library). */
long weft__ctx_errno_off __attribute__((visibility("hidden"), aligned(64)));

weft__ctx_ops_t weft__ctx_ops __attribute__((aligned(64))) = {
    weft__ctx_switch_c, weft__ctx_switch_unlock_c, weft__ctx_trampoline};

static char *thread_pointer(void) {
  char *tp;
#if defined(__x86_64__)
  __asm__ volatile("movq %%fs:0, %0" : "=r"(tp)); /* the TCB's pointer to itself */
#elif defined(__aarch64__)
  __asm__ volatile("mrs %0, tpidr_el0" : "=r"(tp));
#endif
  return tp;
}

static long errno_offset(void) { return (long)((char *)&errno - thread_pointer()); }

static pthread_once_t errno_once = PTHREAD_ONCE_INIT;
static void errno_once_fn(void) { weft__ctx_errno_off = errno_offset(); }
#endif

void weft__ctx_tstate_self(void) {
#if !defined(WEFT_CONTEXT_UCONTEXT)
  pthread_once(&errno_once, errno_once_fn);
  if (errno_offset() != weft__ctx_errno_off) {
    /* not a C library weft knows: errno is not at a fixed place in TLS */
    fputs("weft: errno is not at the same offset from the thread pointer on every "
          "kernel thread; configure with -DWEFT_CONTEXT=ucontext\n", stderr);
    abort();
  }
#endif
  weft__tls_eh = cxa_get_globals ? cxa_get_globals() : NULL;
}

void weft__ctx_tstate_init(void) {
  void *(*g)(void) = __cxa_get_globals;
  if (!g) {
    void *s = dlsym(RTLD_DEFAULT, "__cxa_get_globals");
    __builtin_memcpy(&g, &s, sizeof g);  /* object pointer to function pointer */
  }
  cxa_get_globals = g;
#if !defined(WEFT_CONTEXT_UCONTEXT)
  /* written only when it changes: OS threads may read it (weft__ctx_make) */
  if (g && weft__ctx_ops.sw != weft__ctx_switch_cxx)
    weft__ctx_ops = (weft__ctx_ops_t){weft__ctx_switch_cxx, weft__ctx_switch_unlock_cxx,
                                      weft__ctx_trampoline_cxx};
  else if (!g && weft__ctx_ops.sw != weft__ctx_switch_c)
    weft__ctx_ops = (weft__ctx_ops_t){weft__ctx_switch_c, weft__ctx_switch_unlock_c,
                                      weft__ctx_trampoline};
#endif
}

int weft__ctx_tstate_cxx(void) { return cxa_get_globals != NULL; }
