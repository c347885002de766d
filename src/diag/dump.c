/* src/diag/dump.c - weft_dump: every thread, its state and what it waits on, and
 * the backtrace of each parked thread; the dump-on-signal handler.
 *
 * The registry of threads is the control-block allocator's: every block ever carved
 * lies in a slab on rt.pool.slabs (alloc.c), walked under pool.lock, plus the main
 * thread's block (rt.main). A block is a live thread when its function is set and
 * its join word is not FREED or JOINED (tcb_init writes both at creation; a
 * reclaimed block keeps FREED/JOINED until it is created again).
 *
 * A dump is a snapshot taken while the threads run on: it reads other threads'
 * fields without synchronizing with them (relaxed loads of the atomics, plain reads
 * of the rest, which TSan is told to ignore), and may show a thread in a state it
 * has just left. Stack memory is read through process_vm_readv(2) on the process
 * itself, so that a stack unmapped under the walk gives an error, not a fault.
 *
 * Backtraces of parked threads start from the saved context (the switch frame of
 * src/arch/frame.h). With libunwind (WEFT_HAVE_LIBUNWIND: found at configure time,
 * x86-64 with the assembly switch) they are unwound with the DWARF call-frame
 * information, through libunwind's remote interface pointed at this process: the
 * initial registers come from the saved frame (access_reg below), and every word of
 * memory libunwind reads goes through read_word (process_vm_readv), so a stack that
 * changes or goes away under the walk ends it instead of faulting. The unwind tables
 * are found with libunwind's own local lookup (dl_iterate_phdr). Without libunwind,
 * the frame-pointer chain is walked. The dump's header line says which.
 *
 * Everything is formatted by hand into a fixed buffer and written with write(2) or
 * fwrite: the fd form (weft_dump_fd, and the signal handler) uses no malloc (the
 * libunwind address space is made beforehand: weft_dump_on_signal, weft_init, or
 * the first dump), no stdio, no dladdr, and only tries locks (bounded), so that it
 * is usable from a signal handler: see weft/debug.h for what remains unsafe.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/monitor.h"
#include "diag/diag.h"
#include "io/io.h"
#include "weft/debug.h"

#if defined(WEFT_HAVE_LIBUNWIND) && defined(__x86_64__) && !defined(WEFT_CONTEXT_UCONTEXT)
#define WEFT_DUMP_LIBUNWIND 1
#include <libunwind.h>
#endif

#if defined(WEFT_TSAN)
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#define IGNORE_READS_BEGIN() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define IGNORE_READS_END() AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define IGNORE_READS_BEGIN() ((void)0)
#define IGNORE_READS_END() ((void)0)
#endif

/* ---- output: a hand-made formatter over a fixed buffer -------------------------- */
typedef struct sink {
  FILE *f;      /* NULL: write(2) to fd (async-signal-safe) */
  int fd;
  size_t n;
  char buf[512];
} sink_t;

static void flush(sink_t *o) {
  const char *p = o->buf;
  size_t n = o->n;
  o->n = 0;
  if (o->f) {
    fwrite(p, 1, n, o->f);
    return;
  }
  while (n > 0) {
    ssize_t w = write(o->fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      /* a descriptor in non-blocking mode (weft's own I/O calls set O_NONBLOCK on
       * pipes, a stderr shared with stdout too): wait for room, as a blocking
       * write would, instead of dropping the rest (at most 10 s without room) */
      struct pollfd pf = {.fd = o->fd, .events = POLLOUT, .revents = 0};
      if (poll(&pf, 1, 10000) > 0) continue;
      return;
    }
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

static void puts_(sink_t *o, const char *s) {
  for (; *s; s++) {
    if (o->n == sizeof o->buf) flush(o);
    o->buf[o->n++] = *s;
  }
}

static void putu(sink_t *o, unsigned long long v) {
  char t[24];
  int i = (int)sizeof t;
  t[--i] = 0;
  do t[--i] = (char)('0' + v % 10); while ((v /= 10) != 0);
  puts_(o, t + i);
}

static void puthex(sink_t *o, unsigned long long v) {
  char t[24];
  int i = (int)sizeof t;
  t[--i] = 0;
  do t[--i] = "0123456789abcdef"[v & 15]; while ((v >>= 4) != 0);
  t[--i] = 'x';
  t[--i] = '0';
  puts_(o, t + i);
}

static void putp(sink_t *o, const void *p) { puthex(o, (unsigned long long)(uintptr_t)p); }

/* ---- locks: tried, never waited on without bound (a signal may have interrupted
 * their holder on this very kernel thread) --------------------------------------- */
static int try_lock(weft__spin_t *l) {
  for (long i = 0; i < 1000000; i++) {
    if (weft__spin_trylock(l)) return 1;
    weft__os_relax();
  }
  return 0;
}

/* ---- safe memory reads --------------------------------------------------------- */
static int vm_readv_works = 1;  /* cleared if process_vm_readv is refused */

/* Reads one word at p: 1 on success. */
__attribute__((no_sanitize("address"))) static int read_word(uintptr_t p, uintptr_t *out) {
  if (p == 0 || (p & (sizeof(uintptr_t) - 1))) return 0;
  if (__atomic_load_n(&vm_readv_works, __ATOMIC_RELAXED)) {
    struct iovec local = {out, sizeof *out};
    struct iovec remote = {(void *)p, sizeof *out};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (n == (ssize_t)sizeof *out) return 1;
    if (n < 0 && errno == EFAULT) return 0;
    __atomic_store_n(&vm_readv_works, 0, __ATOMIC_RELAXED);  /* ENOSYS, EPERM: plain reads */
  }
  *out = *(const volatile uintptr_t *)p;
  return 1;
}

/* ---- the saved context: where a parked thread resumes ---------------------------
 * The frame layouts are those of src/arch/frame.h. A frame of switch mode ALL
 * (weft__ctx_fp_save) resumes at weft__ctx_fp_resume, with the real resume address
 * in the extension above the frame: the context proper is the caller's, so the
 * resume address and the stack pointer are taken from there. */
typedef struct saved {
  uintptr_t pc;  /* the resume address */
  uintptr_t sp;  /* the stack pointer once the switch has returned */
  uintptr_t fp;  /* the frame pointer (rbp, x29) */
#if defined(__x86_64__)
  uintptr_t rbx, r12, r13, r14, r15;
#endif
} saved_t;

/* Reads the registers of a saved context: 1 on success. */
static int saved_regs(const weft_ctx_t *ctx, saved_t *r) {
  uintptr_t sp = (uintptr_t)ctx->sp;
  if (!sp) return 0;
#if defined(WEFT_CONTEXT_UCONTEXT)
  (void)r;
  return 0;  /* the ucontext frame is the C library's: not walked */
#elif defined(__x86_64__) || defined(__aarch64__)
  if (!read_word(sp + WEFT__FRAME_RESUME, &r->pc)) return 0;
  r->sp = sp + WEFT__FRAME_SIZE;
  if (r->pc == (uintptr_t)weft__ctx_fp_resume) {
    if (!read_word(r->sp + WEFT__FPEXT_RESUME, &r->pc)) return 0;
    r->sp += WEFT__FPEXT_SIZE;
  }
#if defined(__x86_64__)
  return read_word(sp + WEFT__FRAME_RBP, &r->fp) && read_word(sp + WEFT__FRAME_RBX, &r->rbx) &&
         read_word(sp + WEFT__FRAME_R12, &r->r12) && read_word(sp + WEFT__FRAME_R13, &r->r13) &&
         read_word(sp + WEFT__FRAME_R14, &r->r14) && read_word(sp + WEFT__FRAME_R15, &r->r15);
#else
  return read_word(sp + WEFT__FRAME_X29, &r->fp);
#endif
#else
  (void)r;
  return 0;
#endif
}

/* Bounds of t's stack: [lo, hi), or 0..UINTPTR_MAX for the main thread (its
 * kernel thread's stack). */
static void stack_bounds(const weft_thread_t *t, uintptr_t *lo, uintptr_t *hi) {
  if (t->stack) {
    size_t size = t->stack_size ? t->stack_size : weft__rt.cfg.stack_size;
    *lo = (uintptr_t)t->stack;
    *hi = *lo + size;
  } else {
    *lo = 0;
    *hi = UINTPTR_MAX;
  }
}

/* " name+off (module+off)" for pc: the name from dladdr (exported symbols), else
 * from `name` (libunwind's, which reads the module's symbol table and so names
 * hidden and static functions too) when given; the module from dladdr. */
static void put_symbol(sink_t *o, uintptr_t pc, int symbols, const char *name, uintptr_t off) {
  if (!symbols) return;
  Dl_info di;
  /* pc - 1: a return address may be the first byte of the next function */
  if (!dladdr((void *)(pc - 1), &di) || !di.dli_fname) return;
  if (di.dli_sname) {
    puts_(o, " ");
    puts_(o, di.dli_sname);
    puts_(o, "+");
    puthex(o, pc - (uintptr_t)di.dli_saddr);
  } else if (name && name[0]) {
    puts_(o, " ");
    puts_(o, name);
    puts_(o, "+");
    puthex(o, off);
  }
  const char *base = strrchr(di.dli_fname, '/');
  puts_(o, " (");
  puts_(o, base ? base + 1 : di.dli_fname);
  puts_(o, "+");
  puthex(o, pc - (uintptr_t)di.dli_fbase);
  puts_(o, ")");
}

#define MAX_FRAMES 32

static void put_frame(sink_t *o, int i, uintptr_t pc, int symbols, const char *name,
                      uintptr_t off) {
  puts_(o, "    #");
  putu(o, (unsigned long long)i);
  puts_(o, " ");
  putp(o, (void *)pc);
  put_symbol(o, pc, symbols, name, off);
  puts_(o, "\n");
}

/* The frame chain from a saved context: the resume address, then each frame's
 * return address while the frame pointers stay inside t's stack and increase. */
static void frame_chain(sink_t *o, const weft_thread_t *t, const saved_t *r, int symbols) {
  uintptr_t lo, hi;
  stack_bounds(t, &lo, &hi);
  uintptr_t pc = r->pc, fp = r->fp, prev = (uintptr_t)t->ctx.sp;
  for (int i = 0; i < MAX_FRAMES && pc; i++) {
    put_frame(o, i, pc, symbols, NULL, 0);
    if (fp <= prev || fp < lo || fp + 2 * sizeof(uintptr_t) > hi) break;
    uintptr_t next_fp, ret;
    if (!read_word(fp, &next_fp) || !read_word(fp + sizeof(uintptr_t), &ret)) break;
    prev = fp;
    fp = next_fp;
    pc = ret;
  }
}

#if defined(WEFT_DUMP_LIBUNWIND)
/* libunwind's remote interface on this process: its local accessors (the unwind
 * tables of the loaded modules, found through dl_iterate_phdr), with memory read
 * through read_word and the initial registers taken from the saved context (the
 * `arg` of unw_init_remote: a saved_t). Made once and never freed: the address
 * space holds no per-dump state (caching off, so no lock either). */
static _Atomic(unw_addr_space_t) uw_as;

static int uw_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write,
                         void *arg) {
  (void)as;
  (void)arg;
  uintptr_t w;
  if (write || !read_word((uintptr_t)addr, &w)) return -UNW_EINVAL;
  *val = (unw_word_t)w;
  return 0;
}

static int uw_access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write,
                         void *arg) {
  (void)as;
  const saved_t *r = arg;
  if (write) return -UNW_EREADONLYREG;
  switch (reg) {
    case UNW_X86_64_RIP: *val = r->pc; return 0;
    case UNW_X86_64_RSP: *val = r->sp; return 0;
    case UNW_X86_64_RBP: *val = r->fp; return 0;
    case UNW_X86_64_RBX: *val = r->rbx; return 0;
    case UNW_X86_64_R12: *val = r->r12; return 0;
    case UNW_X86_64_R13: *val = r->r13; return 0;
    case UNW_X86_64_R14: *val = r->r14; return 0;
    case UNW_X86_64_R15: *val = r->r15; return 0;
    default: *val = 0; return 0;  /* caller-saved: dead across the switch's call */
  }
}

static int uw_access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write,
                           void *arg) {
  (void)as;
  (void)reg;
  (void)val;
  (void)write;
  (void)arg;
  return -UNW_EBADREG;
}

static int uw_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg) {
  (void)as;
  (void)c;
  (void)arg;
  return -UNW_EINVAL;  /* the dump never resumes a context */
}

/* The address space, made on first use (not in a signal handler: see the top). */
static unw_addr_space_t uw_space(void) {
  /* acquire: pairs with the release CAS below (another thread's) */
  unw_addr_space_t as = atomic_load_explicit(&uw_as, memory_order_acquire);
  if (as) return as;
  unw_accessors_t acc = *unw_get_accessors(unw_local_addr_space);
  acc.access_mem = uw_access_mem;
  acc.access_reg = uw_access_reg;
  acc.access_fpreg = uw_access_fpreg;
  acc.resume = uw_resume;
  unw_addr_space_t made = unw_create_addr_space(&acc, 0);
  if (!made) return NULL;
  unw_set_caching_policy(made, UNW_CACHE_NONE);
  unw_addr_space_t expect = NULL;
  /* acq_rel: the release publishes the made space to the acquire load above; the
   * acquire on failure reads the one another thread made */
  if (!atomic_compare_exchange_strong_explicit(&uw_as, &expect, made, memory_order_acq_rel,
                                               memory_order_acquire)) {
    unw_destroy_addr_space(made);
    return expect;
  }
  return made;
}

/* Unwinds with libunwind: 1 if at least the first frame was printed. */
static int unwind_of(sink_t *o, const weft_thread_t *t, saved_t *r, int symbols) {
  /* acquire: pairs with uw_space's release CAS (the space is fully made) */
  unw_addr_space_t as = atomic_load_explicit(&uw_as, memory_order_acquire);
  if (!as) return 0;
  unw_cursor_t c;
  if (unw_init_remote(&c, as, r) < 0) return 0;
  uintptr_t lo, hi;
  stack_bounds(t, &lo, &hi);
  uintptr_t prev_sp = 0;
  int i = 0;
  for (; i < MAX_FRAMES; i++) {
    unw_word_t ip = 0, sp = 0;
    if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0) break;
    if (unw_get_reg(&c, UNW_REG_SP, &sp) < 0) break;
    /* every frame inside the thread's stack, each above the last */
    if (sp < lo || sp > hi || (i > 0 && sp <= prev_sp)) break;
    prev_sp = sp;
    char name[128];
    unw_word_t off = 0;
    name[0] = 0;
    /* the fd form prints raw addresses: no name lookup, which opens the module */
    if (symbols && unw_get_proc_name(&c, name, sizeof name, &off) < 0) name[0] = 0;
    put_frame(o, i, (uintptr_t)ip, symbols, name, (uintptr_t)off);
    if (unw_step(&c) <= 0) {
      i++;
      break;
    }
  }
  return i > 0;
}
#endif

/* The backtrace of a parked thread from its saved context. */
static void backtrace_of(sink_t *o, const weft_thread_t *t, int symbols) {
  saved_t r;
  if (!saved_regs(&t->ctx, &r)) return;
#if defined(WEFT_DUMP_LIBUNWIND)
  if (unwind_of(o, t, &r, symbols)) return;
#endif
  frame_chain(o, t, &r, symbols);
}

/* The unwinder the dump uses, for its header line. */
static const char *unwinder(void) {
#if defined(WEFT_CONTEXT_UCONTEXT)
  return "none (ucontext build)";
#elif defined(WEFT_DUMP_LIBUNWIND)
  /* relaxed: only whether it was made; unwind_of's acquire load reads it for use */
  return atomic_load_explicit(&uw_as, memory_order_relaxed) ? "libunwind" : "frame pointers";
#else
  return "frame pointers";
#endif
}

void weft__dump_prepare(void) {
#if defined(WEFT_DUMP_LIBUNWIND)
  uw_space();
#endif
}

/* ---- states ---------------------------------------------------------------------- */
static const char *const kind_names[8] = {"", "mutex", "condition", "semaphore", "rwlock",
                                          "future", "sleep", "barrier"};

static int is_live(const weft_thread_t *t) {
  uintptr_t w = atomic_load_explicit(&t->join, memory_order_relaxed);
  if (t == weft__rt.main) return 1;  /* runs its OS thread's code: no fn */
  return t->fn != NULL && w != WEFT__JW_FREED && w != WEFT__JW_JOINED;
}

/* 1 if p is a control block (rt.main or a carved slab block); pool.lock held. */
static int is_block(const void *p) {
  return p == weft__rt.main || weft__tcb_contains(p);
}

/* A VP slot as the program knows it: "2", or for a monitor's spare standing in for
 * VP 0, "0 (spare 3)" (weft_vp_self() answers the VP it stands in for). */
static void put_slot(sink_t *o, int i) {
  if (i < weft__rt.nvps) {
    putu(o, (unsigned long long)i);
    return;
  }
  putu(o, (unsigned long long)weft__vp_public_index(weft__rt.vps[i]));
  puts_(o, " (spare ");
  putu(o, (unsigned long long)i);
  puts_(o, ")");
}

/* The VP slot running t (a monitor's spare is a slot >= nvps), or -1. */
static int running_on(const weft_thread_t *t) {
  for (int i = 0; i < weft__rt.nvps_all; i++)
    if (__atomic_load_n(&weft__rt.vps[i]->current, __ATOMIC_RELAXED) == t) return i;
  return -1;
}

/* The VP whose dispatch queue holds t, -1 if none, -2 if a queue lock could not
 * be had. */
static int queued_on(const weft_thread_t *t) {
  int busy = 0;
  for (int i = 0; i < weft__rt.nvps_all; i++) {
    weft_vp_t *v = weft__rt.vps[i];
    if (!try_lock(&v->q.lock)) {
      busy = 1;
      continue;
    }
    /* relaxed: a snapshot under the queue lock (the slot is filled under it) */
    int found = atomic_load_explicit(&v->q.next, memory_order_relaxed) == t;
    for (weft_thread_t *q = atomic_load_explicit(&v->q.head, memory_order_relaxed); !found && q; q = q->next)
      if (q == t) {
        found = 1;
        break;
      }
    weft__spin_unlock(&v->q.lock);
    if (found) return i;
  }
  return busy ? -2 : -1;
}

struct dump_ctx {
  sink_t *o;
  int symbols;
  long n;
  long nready;  /* threads in dispatch queues and hand-off slots when the dump began */
};

/* How many threads the dispatch queues and hand-off slots hold (a snapshot; a queue
 * whose lock could not be had counts as one). */
static long count_queued(void) {
  long n = 0;
  for (int i = 0; i < weft__rt.nvps_all; i++) {
    weft_vp_t *v = weft__rt.vps[i];
    if (!try_lock(&v->q.lock)) {
      n++;
      continue;
    }
    /* relaxed: a snapshot under the queue lock */
    n += atomic_load_explicit(&v->q.next, memory_order_relaxed) != NULL;
    for (weft_thread_t *q = atomic_load_explicit(&v->q.head, memory_order_relaxed); q; q = q->next) n++;
    weft__spin_unlock(&v->q.lock);
  }
  return n;
}

/* A woken thread keeps its waiting word until it runs again (weft__wait_on clears
 * it then): look for it in the queues, but only while they are short, so that a
 * dump of many waiting threads beside many ready ones stays linear. */
#define DUMP_READY_SCAN_MAX 4096

static void put_thread_head(sink_t *o, const weft_thread_t *t) {
  puts_(o, "thread ");
  putu(o, (unsigned long long)t->id);
  char nm[WEFT_NAME_MAX];
  if (weft__name_copy(t, nm, sizeof nm)) {
    puts_(o, " \"");
    puts_(o, nm);
    puts_(o, "\"");
  }
  if (t == weft__rt.main) puts_(o, " (main)");
}

/* The waits outside weft's sync objects (WEFT__WAITING_X words): I/O and
 * weft_blocking. */
/* 1 if w is an fd wait whose thread's stack memory is given back (no backtrace). */
static int idle_stack(uintptr_t w) {
  unsigned xk = (unsigned)((w >> 3) & 31);
  return (w & 7) == 0 && (xk & WEFT__WX_IDLE_STACK) &&
         (xk & ~WEFT__WX_IDLE_STACK) >= WEFT__WX_FD_READ && (xk & ~WEFT__WX_IDLE_STACK) <= WEFT__WX_FD_RW;
}

static void put_waiting_x(sink_t *o, uintptr_t w, int symbols) {
  unsigned xk = (unsigned)((w >> 3) & 31);
  uint64_t v = (uint64_t)(w >> 8);
  int idle = idle_stack(w);
  if (idle) xk &= ~(unsigned)WEFT__WX_IDLE_STACK;
  if (xk == WEFT__WX_FD_READ || xk == WEFT__WX_FD_WRITE || xk == WEFT__WX_FD_RW) {
    puts_(o, "waiting in weft I/O for fd ");
    putu(o, (unsigned long long)(uint32_t)v);
    puts_(o, xk == WEFT__WX_FD_READ    ? " to be readable"
             : xk == WEFT__WX_FD_WRITE ? " to be writable"
                                       : " to be readable or writable");
    if (idle) puts_(o, " (idle: its stack's memory is given back until it wakes)");
  } else if (xk == WEFT__WX_RING) {
    const char *op = weft__io_op_names[v & 63];
    int fd = (int)(uint32_t)(v >> 8);
    puts_(o, "waiting in weft I/O for an io_uring ");
    puts_(o, op ? op : "request");
    if (fd >= 0) {
      puts_(o, " on fd ");
      putu(o, (unsigned long long)fd);
    }
  } else if (xk == WEFT__WX_BLOCKING) {
    puts_(o, "in weft_blocking, running ");
    putp(o, (void *)(uintptr_t)v);
    Dl_info di;
    if (symbols && dladdr((void *)(uintptr_t)v, &di) && di.dli_sname &&
        (uintptr_t)di.dli_saddr == (uintptr_t)v) {
      puts_(o, " ");
      puts_(o, di.dli_sname);
    }
    puts_(o, " on a pool kernel thread");
  } else {
    puts_(o, "blocked (waiting word ");
    puthex(o, w);
    puts_(o, ")");
  }
}

/* "mutex 0x..." etc. for a waiting word, or nothing for 0. */
static void put_waiting(sink_t *o, uintptr_t w, int symbols) {
  unsigned k = (unsigned)(w & 7);
  if (k == 0) {
    put_waiting_x(o, w, symbols);
    return;
  }
  if (k == WEFT__WK_SLEEP) {
    puts_(o, "sleeping");
    return;
  }
  puts_(o, "blocked on ");
  puts_(o, kind_names[k]);
  puts_(o, " ");
  putp(o, (void *)(w & ~(uintptr_t)7));
}

/* The joinee of t if t waits in weft_join (verified through the joinee's join word,
 * never through a possibly stale pointer alone); pool.lock held. */
static const weft_thread_t *joinee_of(const weft_thread_t *t) {
  const weft_thread_t *j = t->blocked_on;
  if (!j || !is_block(j)) return NULL;
  uintptr_t w = atomic_load_explicit(&j->join, memory_order_relaxed);
  return WEFT__JW_TAG(w) == WEFT__JW_WEFT && WEFT__JW_PTR(w) == t ? j : NULL;
}

static void dump_thread(weft_thread_t *t, void *arg) {
  struct dump_ctx *c = arg;
  if (!is_live(t)) return;
  sink_t *o = c->o;
  c->n++;
  put_thread_head(o, t);
  puts_(o, ": ");
  int parked = 0;
  uintptr_t jw = atomic_load_explicit(&t->join, memory_order_relaxed);
  uintptr_t waiting = atomic_load_explicit(&t->waiting, memory_order_relaxed);
  int vp = running_on(t);
  const weft_thread_t *j;
  long tid;
  if (jw == WEFT__JW_DONE) {
    puts_(o, "finished, not yet joined");
  } else if (vp >= 0) {
    puts_(o, "running on VP ");
    put_slot(o, vp);
  } else if (waiting) {
    int q = c->nready > 0 && c->nready <= DUMP_READY_SCAN_MAX ? queued_on(t) : -1;
    if (q >= 0) {
      puts_(o, "ready on VP ");
      put_slot(o, q);
      puts_(o, " (woken; it was ");
      put_waiting(o, waiting, c->symbols);
      puts_(o, ")");
    } else {
      put_waiting(o, waiting, c->symbols);
    }
    parked = 1;
  } else if ((j = joinee_of(t)) != NULL) {
    puts_(o, "blocked in weft_join on thread ");
    putu(o, (unsigned long long)j->id);
    parked = 1;
  } else {
    int q = queued_on(t);
    if (q >= 0) {
      puts_(o, t->ctx.sp ? "ready on VP " : "new, ready on VP ");
      put_slot(o, q);
      parked = t->ctx.sp != NULL;
    } else if (!t->ctx.sp) {
      puts_(o, "new, not started");
    } else if ((tid = weft__wired_tid(t)) > 0) {
      /* it runs (or blocks in the kernel) on a kernel thread of its own: its saved
       * context is stale, so no backtrace */
      puts_(o, "wired, on kernel thread ");
      putu(o, (unsigned long long)tid);
    } else {
      /* off every dispatch queue and not in a known wait: a thread list,
       * weft_thread_block, a custom scheduler's queue, wired, or in between */
      puts_(o, "parked (thread list, weft_thread_block, or its scheduler's)");
      parked = 1;
    }
  }
  if (t->bundle && t->bundle != weft__rt.root) {
    puts_(o, ", bundle ");
    putp(o, t->bundle);
  }
  if (jw == WEFT__JW_DETACHED && !(weft__tflags(t) & WEFT__TF_MAIN)) puts_(o, ", detached");
  puts_(o, "\n");
  /* a stack given back reads as zeros: nothing to walk (the word is read again: the
   * thread may have been woken since, and its stack copied back) */
  if (parked && !idle_stack(atomic_load_explicit(&t->waiting, memory_order_relaxed)))
    backtrace_of(o, t, c->symbols);
}

/* One dump at a time: two (a dump signal delivered twice, to two VPs' kernel
 * threads) would interleave their lines. A dump that finds another being written
 * waits for it, sleeping 1 ms at a time (async-signal-safe), for at most 2 s: a
 * dump signal that interrupted a dump on its own kernel thread cannot wait for it. */
static _Atomic int dumping;

static int dump_locked(sink_t *o, int symbols);

/* The dump proper; 0 or WEFT_ENOTINIT / WEFT_EBUSY (a lock could not be had, or
 * another dump was being written). */
static int dump(sink_t *o, int symbols) {
  for (int i = 0;; i++) {
    int free_ = 0;
    /* acquire: pairs with the previous dump's release store (its output came first) */
    if (atomic_compare_exchange_strong_explicit(&dumping, &free_, 1, memory_order_acquire,
                                                memory_order_relaxed))
      break;
    if (i == 2000) {
      puts_(o, "weft: dump: another dump is being written; this one is skipped\n");
      flush(o);
      return WEFT_EBUSY;
    }
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  int rc = dump_locked(o, symbols);
  atomic_store_explicit(&dumping, 0, memory_order_release);
  return rc;
}

static int dump_locked(sink_t *o, int symbols) {
  weft__rt_t *rt = &weft__rt;
  if (atomic_load_explicit(&rt->state, memory_order_acquire) != 1) {
    puts_(o, "weft: dump: weft is not running\n");
    flush(o);
    return WEFT_ENOTINIT;
  }
  IGNORE_READS_BEGIN();
  puts_(o, "weft: dump: ");
  putu(o, (unsigned long long)rt->nvps);
  puts_(o, " VPs, backtraces: ");
  puts_(o, unwinder());
  puts_(o, "\n");
  for (int i = 0; i < rt->nvps; i++) {
    weft_vp_t *v = rt->vps[i];
    weft_thread_t *cur = __atomic_load_n(&v->current, __ATOMIC_RELAXED);
    puts_(o, "VP ");
    putu(o, (unsigned long long)i);
    if (cur) {
      puts_(o, ": running ");
      put_thread_head(o, cur);
    } else {
      puts_(o, atomic_load_explicit(&v->park, memory_order_relaxed) ? ": asleep" : ": idle");
    }
    puts_(o, "\n");
  }
  /* the monitor's spares that run a thread now (docs/design.md "The system monitor") */
  for (int i = rt->nvps; i < rt->nvps_all; i++) {
    weft_thread_t *cur = __atomic_load_n(&rt->vps[i]->current, __ATOMIC_RELAXED);
    if (!cur) continue;
    puts_(o, "VP ");
    put_slot(o, i);
    puts_(o, ": running ");
    put_thread_head(o, cur);
    puts_(o, "\n");
  }
  struct dump_ctx c = {o, symbols, 0, count_queued()};
  int rc = 0;
  if (!try_lock(&rt->pool.lock)) {
    puts_(o, "weft: dump: the control-block pool is locked: threads not listed\n");
    rc = WEFT_EBUSY;
  } else {
    dump_thread(rt->main, &c);
    weft__tcb_foreach_locked(dump_thread, &c);
    weft__spin_unlock(&rt->pool.lock);
    puts_(o, "weft: dump: ");
    putu(o, (unsigned long long)c.n);
    puts_(o, " threads\n");
  }
  IGNORE_READS_END();
  flush(o);
  return rc;
}

int weft_dump(FILE *f) {
  if (!f) return WEFT_EINVAL;
  weft__dump_prepare();
  /* a FILE on a descriptor is written through the descriptor (after what f
   * buffered): stdio drops what a non-blocking descriptor refuses (EAGAIN) */
  int fd = fileno(f);
  if (fd >= 0) fflush(f);
  sink_t o = {.f = fd >= 0 ? NULL : f, .fd = fd, .n = 0};
  int rc = dump(&o, 1);
  if (fd < 0) fflush(f);
  return rc;
}

int weft_dump_fd(int fd) {
  if (fd < 0) return WEFT_EINVAL;
  sink_t o = {.f = NULL, .fd = fd, .n = 0};
  return dump(&o, 0);
}

void weft__dump_deadlock(void) {
  weft__dump_prepare();
  sink_t o = {.f = NULL, .fd = 2, .n = 0};
  dump(&o, 0);
}

/* ---- dump on a signal ------------------------------------------------------------ */
int weft__dump_signal_ok(int signo) {
  /* not SIGKILL/SIGSTOP (cannot be caught), nor the synchronous fault signals: a
   * handler that returns re-executes the faulting instruction, and SIGSEGV/SIGBUS
   * report stack overflows (src/core/overflow.c) */
  return signo >= 1 && signo < NSIG && signo != SIGKILL && signo != SIGSTOP &&
         signo != SIGSEGV && signo != SIGBUS && signo != SIGILL && signo != SIGFPE &&
         /* nor those the C library keeps for itself below SIGRTMIN (glibc: 32 and 33,
          * its thread cancellation and setxid signals: sigaction refuses them) */
         !(signo > 31 && signo < SIGRTMIN);
}

static _Atomic int dump_signo;    /* the installed signal, 0 none */
static struct sigaction dump_old; /* what it replaced */

static void on_dump_signal(int sig) {
  (void)sig;
  int saved = errno;
  weft_dump_fd(2);
  errno = saved;
}

int weft_dump_on_signal(int signo) {
  int old = atomic_load(&dump_signo);
  if (signo == 0) {
    if (old && sigaction(old, &dump_old, NULL) != 0) return WEFT_ESYS;
    atomic_store(&dump_signo, 0);
    return 0;
  }
  if (!weft__dump_signal_ok(signo)) return WEFT_EINVAL;
  weft__dump_prepare();  /* the handler must not allocate */
  if (old == signo) return 0;
  if (old) weft_dump_on_signal(0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_dump_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_ONSTACK;
  if (sigaction(signo, &sa, &dump_old) != 0) return WEFT_ESYS;
  atomic_store(&dump_signo, signo);
  return 0;
}

/* WEFT_DUMP_SIGNAL=<signo>: installed when the library is loaded. */
__attribute__((constructor)) static void dump_from_env(void) {
  const char *e = getenv("WEFT_DUMP_SIGNAL");
  if (!e || !*e) return;
  char *end;
  long s = strtol(e, &end, 10);
  if (*end || s <= 0 || s >= NSIG || weft_dump_on_signal((int)s) != 0) {
    static const char msg[] = "weft: WEFT_DUMP_SIGNAL: not a signal number that can be caught\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
  }
}

/* weft_config_t.dump_signal: installed by weft_init in place of whatever dump
 * signal was installed (weft_dump_on_signal, WEFT_DUMP_SIGNAL), which weft_shutdown
 * puts back. Called under weft_init's and weft_shutdown's exclusion (init_lock). */
static int cfg_signo;   /* the signal weft_init installed, 0 none */
static int cfg_before;  /* the dump signal installed before it */

int weft__dump_init(int signo) {
  weft__dump_prepare();
  cfg_signo = 0;
  if (!signo) return 0;
  int before = atomic_load(&dump_signo);
  int rc = weft_dump_on_signal(signo);
  if (rc) return rc;
  cfg_before = before;
  cfg_signo = signo;
  return 0;
}

void weft__dump_fini(void) {
  /* only if it is still ours: the program may have changed it since */
  if (cfg_signo && atomic_load(&dump_signo) == cfg_signo) weft_dump_on_signal(cfg_before);
  cfg_signo = 0;
}
