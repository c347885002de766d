/* src/io/io.c - the I/O calls of weft/io.h and the two engines (docs/io.md).
 *
 * Readiness, as Go's netpoller: a call tries its system call without blocking
 * (MSG_DONTWAIT on sockets, O_NONBLOCK on other descriptors that can block); if
 * that would block, the thread links a waiter (src/sync/sync.h) on the descriptor's
 * record and blocks; the lock of the record is released in the block
 * continuation, so no poller can wake it before it is saved. A descriptor is
 * registered in the process's one epoll instance at its first park, edge-triggered,
 * for good: a park makes no system call. An edge that comes while no waiter waits
 * for it is kept in the record (ready), and a waiter looks at that under the lock
 * before it parks, so no edge between its try and its park is lost.
 *
 * Polling: an idle VP that would sleep while threads wait on I/O waits in
 * epoll_wait instead of its futex (at most one VP at a time: the poller), bounded
 * by the earliest timer; VPs that spin in the idle loop poll without waiting. The
 * poller claims the waiters whose events came (WAITING -> SIGNALED, the same CAS
 * a timer's TIMEDOUT competes with, so a deadline racing readiness is decided
 * once) and makes them ready. A waker of a sleeping VP interrupts the poller's
 * epoll_wait through an eventfd (docs/memory-ordering.md "The I/O poller").
 *
 * The io_uring engine (WEFT_HAVE_URING; docs/io.md "The io_uring engine") is the
 * same plus a ring per VP for what readiness cannot express: operations on regular
 * files, opens, fsyncs and closes are submitted to the caller's VP's ring and park
 * their thread until their completion. Each ring's descriptor is registered in the
 * epoll instance, so the poller that waits there reaps the rings' completions too.
 *
 * Descriptor records live in a two-level table indexed by fd, allocated on first
 * use and freed at weft_shutdown.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/io.h"
#include "sync/sync.h"
#include "weft/io.h"

#ifdef WEFT_HAVE_URING
#include <linux/openat2.h>
#include <liburing.h>
#include <sys/syscall.h>
#endif
#if defined(WEFT_TSAN)
#include <sanitizer/tsan_interface.h>
/* The kernel carries a request from its submitter to the thread that reaps its
 * completion (the io_uring_enter system call, then the completion queue's release/
 * acquire pair inside liburing); TSan sees neither, so these tell it. */
#define RING_RELEASE(r) __tsan_release(r)
#define RING_ACQUIRE(r) __tsan_acquire(r)
#else
#define RING_RELEASE(r) ((void)(r))
#define RING_ACQUIRE(r) ((void)(r))
#endif

/* errno of the kernel thread the caller runs on now. glibc declares
 * __errno_location const, so a compiler may keep errno's address across a call
 * that parked the thread and resumed it on another VP's kernel thread, and read or
 * write the errno of the old one. Every access to errno in this file that may come
 * after a park goes through these two, which are never inlined. */
static __attribute__((noinline)) int err_now(void) {
  __asm__ volatile("" ::: "memory");
  return errno;
}
static __attribute__((noinline)) ssize_t fail(int e) {
  __asm__ volatile("" ::: "memory");
  errno = e;
  return -1;
}

/* ---- descriptor records ------------------------------------------------------------ */

enum { K_UNKNOWN = 0, K_SOCK = 1, K_OTHER = 2, K_FILE = 3 /* regular file or block
  device, seen by the io_uring engine, which submits its operations to the ring */ };
/* A bit beside the kind: the record has stale weft_fd_spawn threads (iod.stale). No
 * kind test matches while it is set, so every call on the number takes the general
 * paths, which look for the caller in the list (stale_hit). Kind stores keep it. */
#define K_STALE 0x100
#define IO_EVMASK (EPOLLIN | EPOLLOUT | EPOLLPRI)

typedef struct iod {
  weft__spin_t lock;
  int fd;                  /* set when the page is made, then read-only */
  _Atomic uint32_t gen;    /* bumped by weft_close under lock; an operation reads it
                              at its start (relaxed: a waiter re-reads it under lock,
                              or after the acquire load of its waiter state that
                              pairs with weft_close's claim) */
  uint32_t registered;     /* 1 once the descriptor is registered in the epoll
                              instance (edge-triggered, for good), 0 before: lock;
                              cleared by weft_close and iod_reset */
  uint32_t seen;           /* 1: an event came since the last registration check
                              (the registration is alive): lock */
  uint32_t ready;          /* events (mapped, IO_EVMASK) the engine reported
                              that no waiter took, so that the next waiter for one
                              retries instead of waiting for an edge that has
                              passed: lock; cleared by a waiter that takes it,
                              weft_close and iod_reset */
  _Atomic int kind;        /* K_*: a cache (relaxed); K_OTHER means weft set
                              O_NONBLOCK on it */
  _Atomic int listen_nb;   /* 1 once weft_accept set O_NONBLOCK (relaxed: a cache) */
  weft__wq_t q;            /* parked waiters, w->mode = the events they wait for:
                              lock */
  struct spawn_rec *stale; /* weft_fd_spawn threads started after a weft_close of the
                              number had ended their wait (the number may name
                              another file since): each one's first call on it
                              fails with EBADF (stale_hit). lock; kind has K_STALE
                              while it is not empty */
} iod_t;

#define IOD_PAGE 1024
#define IOD_PAGES 4096     /* 4M descriptors, above the kernel's nr_open maximum */

static struct {
  _Atomic int on;                       /* 1 between init and fini: release store at
                                           init, acquire load in weft_io_engine; fini
                                           runs with no other thread inside weft */
  int epfd, evfd;
  int uring;                            /* 1: the io_uring engine, else epoll (set
                                           at init, then read-only) */
  const char *name;
#ifdef WEFT_HAVE_URING
  /* The io_uring engine's rings, one per regular VP (index < nvps), made by the
   * VP's kernel thread the first time one of its threads needs it (vp_ring); slot
   * i is written by VP i's kernel thread only, and read by it and by fini (after
   * the VPs stopped). Completion queues are read by the holder of the poller role,
   * which finds them through their descriptors in the epoll instance. */
  struct vring **rings;
  int nrings;
#endif
  /* the VP waiting in epoll_wait, or NULL; CAS to take the role (seq_cst: the
   * store-buffering pair with weft__io_wake, see there) */
  _Atomic(weft_vp_t *) poller;
  _Atomic long nwait;                   /* threads linked on a record (seq_cst RMW) */
  /* The registration check (check_registrations): when the next is due and the
   * period after it. Read and written by the holder of the poller role only (the
   * role's release/acquire hands them over). */
  uint64_t check_at, check_period;
  /* Stacks of idle threads (see there): the age in ns (0: never; set at init, then
   * read-only), the next sweep's time (the poller role's, as check_at), and how many
   * parked threads have their stack given back now (relaxed: a count for
   * weft_io_idle_stacks; changed under the records' locks). */
  uint64_t idle_ns, sweep_at;
  _Atomic long nidle;
  /* pages: CAS from NULL (acq_rel) once; acquire loads pair with it */
  _Atomic(iod_t *) pages[IOD_PAGES];
} io;

static iod_t *iod_get(int fd) {
  if (fd < 0 || fd >= IOD_PAGE * IOD_PAGES) return NULL;
  _Atomic(iod_t *) *slot = &io.pages[fd / IOD_PAGE];
  iod_t *p = atomic_load_explicit(slot, memory_order_acquire);
  if (WEFT__UNLIKELY(!p)) {
    iod_t *np = weft__sys_calloc(IOD_PAGE, sizeof *np);
    if (!np) return NULL;
    for (int i = 0; i < IOD_PAGE; i++) np[i].fd = (fd / IOD_PAGE) * IOD_PAGE + i;
    /* acq_rel: release publishes the filled page; acquire (also on failure) sees
     * the winner's */
    if (atomic_compare_exchange_strong_explicit(slot, &p, np, memory_order_acq_rel,
                                                memory_order_acquire))
      p = np;
    else
      weft__sys_free(np);
  }
  return &p[fd % IOD_PAGE];
}

/* The record's kind, a cache: k, where it still was `expect` (a call that classified
 * the number while weft_close reset it drops its answer), K_STALE kept. */
static void kind_cas(iod_t *d, int expect, int k) {
  /* relaxed: a cache; K_STALE is set and cleared under the lock by CAS too */
  int old = atomic_load_explicit(&d->kind, memory_order_relaxed);
  while ((old & ~K_STALE) == expect &&
         !atomic_compare_exchange_weak_explicit(&d->kind, &old, k | (old & K_STALE),
                                                memory_order_relaxed, memory_order_relaxed)) {
  }
}
/* The kind without the stale bit: for the general paths, which have made their
 * stale_hit check (the fast paths test the whole word, so that the bit sends them
 * to the general ones). */
static inline int kind_of(const iod_t *d) {
  return atomic_load_explicit(&d->kind, memory_order_relaxed) & ~K_STALE;
}
/* The same whatever the kind was. */
static void kind_set(iod_t *d, int k) {
  int old = atomic_load_explicit(&d->kind, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&d->kind, &old, k | (old & K_STALE),
                                                memory_order_relaxed, memory_order_relaxed)) {
  }
}

/* The caller is a weft thread running on a VP (then weft is running and the engine
 * is on): the calls park. Otherwise they are the plain system calls. */
static inline int here(void) { return weft__vp() != NULL; }

#ifdef WEFT_HAVE_URING
/* A VP's ring. Its submission queue is written under sqlock (a queue lock: its
 * holder makes a system call) by the VP's kernel thread, and by a thread that
 * cancels a request it submitted here after it moved to another VP. Its epoll
 * data is its address with bit 0 set (records are 8-aligned). */
typedef struct vring {
  weft__spin_t sqlock;
  struct io_uring ring;
} vring_t;
#define RING_TAG 1u

/* user_data of requests whose completion wakes nobody (cancellations) */
#define URING_UD_IGNORE ((uint64_t)-2)

/* ring_allowed: whether the caller may use a ring.
 * vp_ring: the caller's VP's ring; NULL when the caller may not send an operation (a
 * file read or write, an open, an fsync, a close) to a ring, or its VP has none (it
 * could not be made at weft_init): the caller then makes the call directly, as the
 * epoll engine does. Only a VP of its own has a ring, not a monitor's spare: io_uring
 * ties the kernel workers of a request to the kernel thread that submitted it, and
 * cancels them when that thread exits, as a spare's does when its stall ends (a file
 * read cancelled that way returned EFAULT or ESRCH to its caller, and a cancelled
 * close would leave the descriptor open); a spare only stands in for a while. */
static inline int ring_allowed(void) {
  weft_vp_t *vp = weft__vp();
  return io.uring && vp != NULL && vp->index < io.nrings;
}
static vring_t *vp_ring(void) {
  if (!ring_allowed()) return NULL;
  return io.rings[weft__vp()->index];
}

/* Makes a VP's ring and registers it in the epoll set (weft__io_init, before any VP
 * runs); NULL if it cannot be made. Every ring is made at weft_init, none later: a
 * ring made on a VP's first file call took the lowest free number, which could be
 * that of a file another thread had just closed with weft_close while a thread of
 * this VP was between its RWF_NOWAIT try of that file and its request; the request
 * (a read of the number) then read the ring itself, waited for the ring to be
 * readable, which only its own completion would make it, and its thread never woke
 * (io_test CloseWhileFileReadsInFlightGivesOnlyEbadf hung to its alarm about once
 * in 400 runs). Made at weft_init, a ring's number is never one the program had a
 * moment earlier. */
static vring_t *ring_make(void) {
  vring_t *r = weft__sys_calloc(1, sizeof *r);
  if (!r) return NULL;
  if (io_uring_queue_init(256, &r->ring, 0) < 0) {
    weft__sys_free(r);
    return NULL;
  }
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN;  /* level-triggered: readable while completions wait */
  ev.data.u64 = (uint64_t)(uintptr_t)r | RING_TAG;
  RING_RELEASE(r);  /* the poller reads the ring it finds in the epoll data */
  if (epoll_ctl(io.epfd, EPOLL_CTL_ADD, r->ring.ring_fd, &ev) != 0) {
    io_uring_queue_exit(&r->ring);
    weft__sys_free(r);
    return NULL;
  }
  return r;
}

/* Submits what r's submission queue holds (its sqlock held). 0 or -errno. */
static int uring_submit_locked(vring_t *r) {
  int rc;
  RING_RELEASE(r);
  do rc = io_uring_submit(&r->ring);
  while (rc == -EINTR);
  return rc < 0 ? rc : 0;
}

/* Queues the request *tmpl (filled by an io_uring_prep_ function) with user_data ud
 * in r, under its sqlock, and submits it. 0 or -errno. */
static int uring_submit_sqe(vring_t *r, const struct io_uring_sqe *tmpl, uint64_t ud) {
  weft__qlock_lock(&r->sqlock);
  struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
  if (!sqe) {  /* full: push what is there, then there is room */
    (void)uring_submit_locked(r);
    sqe = io_uring_get_sqe(&r->ring);
  }
  int rc = -EBUSY;
  if (sqe) {
    *sqe = *tmpl;
    io_uring_sqe_set_data64(sqe, ud);
    rc = uring_submit_locked(r);
  }
  weft__spin_unlock(&r->sqlock);
  return rc;
}

/* An operation in the ring that a weft thread waits for (on its stack; its address,
 * 8-aligned, is the request's user_data, low bits 0). res and done: lock, or read
 * after the waiter's acquire of SIGNALED that the completer's claim releases. */
typedef struct uop {
  weft__waiter_t w;
  weft__spin_t lock;
  int res, done;
} __attribute__((aligned(8))) uop_t;

static void kick(void *unused);
#endif

const char *const weft__io_op_names[64] = {
#ifdef WEFT_HAVE_URING
    [IORING_OP_READV] = "readv",   [IORING_OP_WRITEV] = "writev", [IORING_OP_FSYNC] = "fsync",
    [IORING_OP_OPENAT] = "openat", [IORING_OP_CLOSE] = "close",   [IORING_OP_READ] = "read",
    [IORING_OP_WRITE] = "write",
#endif
};

#ifdef WEFT_HAVE_URING

/* Submits *tmpl to r (the caller's VP's ring) and parks the caller until its
 * completion: returns its result (>= 0 or -errno). At the deadline it cancels the
 * request (in r, from whichever VP it runs on then) and waits for its completion
 * (which may still bring a result: then that is returned, nothing is lost); a
 * cancelled request gives -ETIMEDOUT. -ENOMEM: no timer slot. */
static int uring_call(vring_t *r, struct io_uring_sqe *tmpl, uint64_t deadline) {
  uop_t u;
  weft__waiter_init(&u.w, deadline);
  if (deadline != WEFT_FOREVER) {
    if (deadline <= weft__os_now_ns()) return -ETIMEDOUT;
    if (weft__timer_reserve(weft__vp())) return -ENOMEM;
  }
  atomic_store_explicit(&u.lock.word, 0, memory_order_relaxed);
  u.res = 0;
  u.done = 0;
  uint64_t ud = (uint64_t)(uintptr_t)&u;
  weft__qlock_lock(&u.lock);
  int rc = uring_submit_sqe(r, tmpl, ud);
  if (rc) {
    weft__spin_unlock(&u.lock);
    return rc;
  }
  /* seq_cst: the deadlock check (quiet) and the pollers read it */
  atomic_fetch_add_explicit(&io.nwait, 1, memory_order_seq_cst);
  /* weft_dump: the descriptor and the opcode (weft__io_op_names) */
  uintptr_t what = WEFT__WAITING_X(WEFT__WX_RING, ((uint64_t)(uint32_t)tmpl->fd << 8) | tmpl->opcode);
  uint32_t st = weft__wait_on(&u.w, what, &u.lock, kick, NULL);
  if (st != WEFT__W_SIGNALED) {
    struct io_uring_sqe c;
    io_uring_prep_cancel64(&c, ud, 0);
    (void)uring_submit_sqe(r, &c, URING_UD_IGNORE);
    weft__qlock_lock(&u.lock);
    if (!u.done) {  /* the completion (cancelled or not) is still to come */
      weft__waiter_init(&u.w, WEFT_FOREVER);
      (void)weft__wait_on(&u.w, what, &u.lock, kick, NULL);
    } else {
      weft__spin_unlock(&u.lock);
    }
    /* cancelled: -ECANCELED, or -EINTR; a kernel worker interrupted in a wait (a
     * FIFO's open waiting for its peer) may report the kernel's internal restart
     * codes (ERESTARTSYS 512 .. ERESTART_RESTARTBLOCK 516), never meant for a program */
    if (u.res == -ECANCELED || u.res == -EINTR || (u.res <= -512 && u.res >= -516))
      u.res = -ETIMEDOUT;
  } else if (u.res <= -512 && u.res >= -516) {
    /* the kernel's internal restart codes, never meant for a program: EINTR, as the
     * system call would give (not made again: a close interrupted in its flush has
     * already freed the number, which another thread may have taken since) */
    u.res = -EINTR;
  } else if (u.res == -ECANCELED) {
    /* Not cancelled by us, yet dropped by the kernel without being done: under a
     * storm of signals (setitimer every 20 us) io_uring cancelled requests it could
     * not hand to a kernel worker, and weft_pwrite failed with ECANCELED, which no
     * POSIX call gives. The caller makes it again (uring_do). */
    u.res = -ECANCELED;
  }
  /* relaxed: after the wait; the count stays above zero for as long as we wait */
  atomic_fetch_sub_explicit(&io.nwait, 1, memory_order_relaxed);
  return u.res;
}

/* uring_call in the caller's VP's ring, made again while the kernel drops the request
 * undone (-ECANCELED above); -ECANCELED after a few tries, or when the caller is on no
 * VP with a ring now: the caller then makes the call directly, as the epoll engine
 * does. */
static int uring_do(struct io_uring_sqe *t, uint64_t deadline) {
  for (int tries = 0; tries < 4; tries++) {
    vring_t *vr = vp_ring();
    if (!vr) break;
    int r = uring_call(vr, t, deadline);
    if (r != -ECANCELED) return r;
  }
  return -ECANCELED;
}

/* The poller's half: stores the completion and wakes the waiter (if its timer has
 * not claimed it; then it sees done under the lock). Returns 1 if it woke it. */
static int uop_complete(uop_t *u, int res) {
  weft__qlock_lock(&u->lock);
  u->res = res;
  u->done = 1;
  weft_thread_t *t = u->w.t;
  int won = weft__waiter_claim(&u->w);
  weft__spin_unlock(&u->lock);  /* u may die from here on */
  if (won) weft__unblock(weft__vp(), t);
  return won;
}

#endif

/* ---- stacks of idle threads -------------------------------------------------------
 * (docs/io.md "Stacks of idle threads"; weft_config_t.io_idle_stack_ms.) A thread
 * parked on a descriptor, seen parked by two sweeps at least io.idle_ns apart, gives
 * back its stack's memory: the sweep (the holder of the poller role, in
 * check_registrations) copies the live part of the stack, from a little below the
 * saved stack pointer to the top, into a heap block, puts a stand-in for the thread's
 * waiter (which may lie on that stack) on the record's queue in its place, and returns
 * the stack's pages to the kernel (MADV_DONTNEED: they read as zeros until written).
 * Whoever claims the stand-in copies the part back, at the same addresses, before it
 * makes the thread ready; the thread resumes on a stack that holds exactly what it
 * held when it parked.
 *
 * Why this is safe: the exchange is made under the record's lock, and so is every
 * claim of such a waiter but its timer's. While the lock is held and the waiter is
 * linked, its thread is parked with its context saved (its continuation released the
 * lock after the switch), and nothing but a claim under this lock or a fire of its
 * timer can make it ready: iod_events and weft_close, which both claim what they
 * unlink through iod_claim. A waiter with a deadline has a timer, which claims it
 * under the heap's lock and none of ours: the sweep puts the stand-in in the waiter's
 * place in the timer heap too (weft__timer_swap, under the heap lock inside the
 * record's, and only if the timer has not fired), and marks the thread's waiting word
 * there, by which the fire knows the stand-in. A fire that wins the stand-in's claim
 * puts the stack back itself (weft__io_idle_fired), without the record's lock: it may
 * run where another record's lock is held (weft__block_timers). It waits for the
 * exchange to finish (s->done), and leaves the stand-in, still linked or unlinked by
 * a claim that lost, to the thread, which unlinks and frees it under the record's lock
 * when it resumes (IO_IDLE_LAZY). A completion that wins first cancels the timer
 * under the heap lock, after which no fire can hold the stand-in. Never given back
 * (IO_IDLE_NEVER): a waiter of weft_fd_spawn (its thread has no stack), of iod_nap.
 * The copies are made word by word, unseen by the sanitizers: the stack holds ASan's
 * poisoned red zones and the parked thread's own accesses, which TSan would report
 * as a race with the copying thread. The lock (or the fire's claim) orders them: the
 * thread released the lock after its last write; the claimer makes the thread ready
 * after its copy. */
#define IO_IDLE_LAZY 0xfffffffdu
#define IO_IDLE_NEVER 0xfffffffeu
#define IO_IDLE_STANDIN 0xffffffffu
/* bytes below the saved stack pointer that are copied too: the C++ exception words
 * both ports keep just below it (16 bytes, src/arch/context.h), with room to spare.
 * Nothing else of a suspended context lies below its stack pointer. */
#define IO_IDLE_BELOW 32

typedef struct idle_stack {
  weft__waiter_t w;        /* the stand-in, linked where the thread's waiter was */
  weft__waiter_t *orig;    /* the thread's waiter (on its stack, or ASan's fake stack) */
  char *lo;                /* the saved part is [lo, lo + len) */
  uintptr_t *data;         /* its runs of words (idle_pack); NULL if none */
  size_t nwords;           /* words in data */
  int given;               /* 1: the pages were given back (0: kept, no memory for data) */
  _Atomic int done;        /* 1 once the exchange is complete (a fire waits for it) */
} idle_stack_t;

/* The saved part is kept as runs: a run of two or more zero words is left out (the
 * stack's pages read as zeros once given back, and if the madvise failed they still
 * hold those zeros: nothing writes a parked thread's stack). Each run is a header word
 * (its offset from lo, in words, << 32 | its length in words) and its words. A stack
 * holds many zeros (buffers not yet written, fresh pages below the frames, padding,
 * null pointers), so this keeps about half of it. With dst NULL, returns the words
 * needed; else fills dst and returns the same. */
#ifndef WEFT_CONTEXT_UCONTEXT /* the ucontext build gives no stack back */
__attribute__((no_sanitize("address", "thread"))) static size_t idle_pack(uintptr_t *dst,
                                                                         const uintptr_t *src,
                                                                         size_t words) {
  size_t out = 0, i = 0;
  while (i < words) {
    uintptr_t v = src[i];
    __asm__ volatile("" : "+r"(v));  /* not turned into a library call the sanitizers see */
    if (!v) {
      i++;
      continue;
    }
    size_t start = i, end = i + 1;
    for (i = end; i < words && i < end + 2; i++) {
      uintptr_t x = src[i];
      __asm__ volatile("" : "+r"(x));
      if (x) end = i + 1;
    }
    i = end;
    if (dst) {
      dst[out] = (uintptr_t)start << 32 | (uintptr_t)(end - start);
      for (size_t k = start; k < end; k++) {
        uintptr_t x = src[k];
        __asm__ volatile("" : "+r"(x));
        dst[out + 1 + k - start] = x;
      }
    }
    out += 1 + end - start;
  }
  return out;
}
#endif

/* Writes the runs of data back below lo (the words between them are zeros already). */
__attribute__((no_sanitize("address", "thread"))) static void idle_unpack(uintptr_t *lo,
                                                                         const uintptr_t *data,
                                                                         size_t nwords) {
  for (size_t i = 0; i < nwords;) {
    size_t off = (size_t)(data[i] >> 32), n = (size_t)(data[i] & 0xffffffffu);
    for (size_t k = 0; k < n; k++) {
      uintptr_t x = data[i + 1 + k];
      __asm__ volatile("" : "+r"(x));
      lo[off + k] = x;
    }
    i += 1 + n;
  }
}

/* Gives back the stack of w's thread (lock held, w linked and not yet given back).
 * 1 if it did; 0 if it cannot (a stack weft did not map, no memory for the
 * stand-in); -1 if not now (w's timer has fired: its thread is about to run). */
static int idle_give_back(iod_t *d, weft__waiter_t *w) {
#ifdef WEFT_CONTEXT_UCONTEXT
  (void)d;
  (void)w;
  return 0;  /* the saved ucontext_t does not say where the stack's live part begins */
#else
  weft_thread_t *t = w->t;
  if (!t || !t->stack || !t->ctx.sp || (t->stack_size && t->stack_kind != WEFT__STK_RUNTIME))
    return 0;
  int timed = w->deadline != WEFT_FOREVER;
  /* relaxed: a hint for a timed waiter (weft__timer_swap decides under the heap
   * lock); a waiter with no deadline is claimed only under the lock we hold */
  if (timed && atomic_load_explicit(&w->state, memory_order_relaxed) != WEFT__W_WAITING) return -1;
  WEFT__ASSERT(atomic_load_explicit(&w->state, memory_order_relaxed) == WEFT__W_WAITING,
               "a linked I/O waiter with no deadline was claimed without being unlinked");
  char *base = t->stack, *hi = base + (t->stack_size ? t->stack_size : weft__rt.cfg.stack_size);
  char *sp = t->ctx.sp;
  if (sp < base + IO_IDLE_BELOW || sp > hi) return 0;
  char *lo = (char *)((uintptr_t)(sp - IO_IDLE_BELOW) & ~(uintptr_t)15);
  size_t words = (size_t)(hi - lo) / sizeof(uintptr_t);
  idle_stack_t *s = malloc(sizeof *s);
  if (!s) return 0;
  s->orig = w;
  s->lo = lo;
  s->data = NULL;
  s->nwords = 0;
  s->given = 1;
  /* before the swap publishes s to a fire (the heap lock's release orders it) */
  atomic_store_explicit(&s->done, 0, memory_order_relaxed);
  uintptr_t mark = (uintptr_t)WEFT__WX_IDLE_STACK << 3;
  if (timed) {
    /* the stand-in takes w's place in its timer heap (a copy made there), and the
     * mark is set there. From here on no one writes the stack: the heap's sifts
     * wrote w's tidx until now. */
    if (!weft__timer_swap(w, &s->w, mark)) {
      free(s);
      return -1;
    }
  } else {
    memcpy(&s->w, w, sizeof *w);
    /* relaxed: a diagnostic (weft_dump); the thread clears the word when it resumes */
    atomic_fetch_or_explicit(&t->waiting, mark, memory_order_relaxed);
  }
  s->w.idle = IO_IDLE_STANDIN;
  s->nwords = idle_pack(NULL, (const uintptr_t *)(void *)lo, words);
  if (w->prev) w->prev->next = &s->w;
  else d->q.head = &s->w;
  if (w->next) w->next->prev = &s->w;
  else d->q.tail = &s->w;
  if (s->nwords) {
    s->data = malloc(s->nwords * sizeof(uintptr_t));
    if (s->data) idle_pack(s->data, (const uintptr_t *)(void *)lo, words);
    else s->given = 0;  /* the stack stays as it is, and the stand-in restores nothing */
  }
  if (s->given) {
    atomic_fetch_add_explicit(&io.nidle, 1, memory_order_relaxed);
    /* the whole stack: also the pages deeper calls touched before this wait. Before
     * the lock is released (and before `done`): after that a claim may copy the runs
     * back, which a later MADV_DONTNEED would wipe. A failure leaves the pages, and
     * they still hold what the runs leave out. */
    (void)madvise(base, (size_t)(hi - base), MADV_DONTNEED);
  }
  /* release: pairs with a fire's acquire load (weft__io_idle_fired): the copy and the
   * madvise happen before its copy back */
  atomic_store_explicit(&s->done, 1, memory_order_release);
  return 1;
#endif
}

/* Puts back the stack of the stand-in s's thread and returns its waiter. */
static weft__waiter_t *idle_put_back(idle_stack_t *s) {
  if (s->given) {
    idle_unpack((uintptr_t *)(void *)s->lo, s->data, s->nwords);
    atomic_fetch_sub_explicit(&io.nidle, 1, memory_order_relaxed);
  }
  free(s->data);
  weft__waiter_t *o = s->orig;
  atomic_fetch_and_explicit(&o->t->waiting, ~((uintptr_t)WEFT__WX_IDLE_STACK << 3),
                            memory_order_relaxed);
  return o;
}

/* What a claimer of w (lock held, w unlinked, no deadline) must claim: w, or if w is
 * a stand-in, the thread's own waiter, once the stack is back in place. */
static weft__waiter_t *idle_restore(weft__waiter_t *w) {
  if (WEFT__LIKELY(w->idle != IO_IDLE_STANDIN)) return w;
  idle_stack_t *s = (idle_stack_t *)(void *)w;
  weft__waiter_t *o = idle_put_back(s);
  memcpy(o, &s->w, sizeof *o);  /* after the stack: o may lie in it */
  o->idle = IO_IDLE_NEVER;
  free(s);
  return o;
}

/* Claims w, just unlinked from d's queue (lock held), into the wake set: 1 if
 * claimed. A stand-in with a deadline is claimed first and put back after: if its
 * timer won, the fire puts it back (weft__io_idle_fired) and the thread frees it. */
static int iod_claim(weft__wakeset_t *set, weft__waiter_t *w) {
  if (WEFT__LIKELY(w->idle != IO_IDLE_STANDIN || w->deadline == WEFT_FOREVER))
    return weft__wakeset_claim(set, idle_restore(w));
  idle_stack_t *s = (idle_stack_t *)(void *)w;
  if (!weft__waiter_claim(&s->w)) return 0;
  weft__timer_cancel(&s->w);  /* the heap lock inside the record's, as the sweep takes them */
  weft__waiter_t *o = idle_put_back(s);
  memcpy(o, &s->w, sizeof *o);  /* SIGNALED, not linked, its timer cancelled */
  o->idle = IO_IDLE_NEVER;
  free(s);
  /* the wake set's link, as weft__wakeset_claim's for a weft thread */
  o->next = set->weft;
  set->weft = o;
  return 1;
}

weft_thread_t *weft__io_idle_fired(weft__waiter_t *w) {
  idle_stack_t *s = (idle_stack_t *)(void *)w;
  /* acquire: pairs with the sweep's release store once the exchange is complete (it
   * holds no lock we could wait on: a few microseconds at most) */
  for (int i = 0; !atomic_load_explicit(&s->done, memory_order_acquire); i++) {
    if (i < 128) weft__os_relax();
    else sched_yield();  /* the sweeping kernel thread may have been preempted */
  }
  weft__waiter_t *o = idle_put_back(s);
  /* o holds what it held when the stack was given back; nothing else writes it now
   * (it is in no queue or heap). The thread finds TIMEDOUT, and the stand-in to unlink
   * and free under the record's lock (iod_wait). */
  atomic_store_explicit(&o->state, WEFT__W_TIMEDOUT, memory_order_relaxed);
  o->tidx = -1;
  o->linked = 0;
  o->idle = IO_IDLE_LAZY;
  o->next = &s->w;
  return o->t;
}

/* The sweep's look at d's waiters (lock held), at `stamp` (now in units of 2^20 ns,
 * never 0 or the marks above), giving back the stacks of those first seen at least
 * `age` units ago. Returns 1 if a waiter is left that a later sweep may give back
 * (seen now, or not yet old enough). */
static int idle_sweep(iod_t *d, uint32_t stamp, uint32_t age) {
  int pending = 0;
  for (weft__waiter_t *w = d->q.head, *nx; w; w = nx) {
    nx = w->next;
    if (w->idle >= IO_IDLE_LAZY) continue;
    if (w->idle == 0) {
      w->idle = stamp;
      pending = 1;
    } else if ((uint32_t)(stamp - w->idle) < age) {
      pending = 1;
    } else if (idle_give_back(d, w) == 0) {
      w->idle = IO_IDLE_NEVER;  /* not to be tried again */
    }
  }
  return pending;
}

long weft_io_idle_stacks(void) {
  /* relaxed: a snapshot, as weft_io_parked */
  return weft_is_running() ? atomic_load_explicit(&io.nidle, memory_order_relaxed) : 0;
}

/* What weft_close does to a record under its lock (held): a new generation, nothing
 * cached, every parked waiter claimed into s (the caller wakes them after the lock,
 * and each fails with EBADF: its generation moved). */
static void iod_forget(iod_t *d, weft__wakeset_t *s) {
  /* relaxed: waiters read it under this lock, or after their acquire load of the
   * state the claims below release */
  atomic_store_explicit(&d->gen, atomic_load_explicit(&d->gen, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  d->registered = 0;
  d->ready = 0;
  kind_set(d, K_UNKNOWN);
  atomic_store_explicit(&d->listen_nb, 0, memory_order_relaxed);
  weft__waiter_t *w;
  while ((w = weft__wq_pop(&d->q)) != NULL) (void)iod_claim(s, w);
}

/* EPOLL_CTL_ADD of d's descriptor (lock held): 0 (it was not registered, and now
 * is), or -errno (-EEXIST: it was). Registered once, edge-triggered, for everything
 * (as Go's netpoller): a park makes no system call. An edge that comes while no
 * waiter waits for it is kept in d->ready (iod_events), which a waiter looks at
 * under the lock before it parks; the registration reports the state at once if it
 * is ready already. */
static int epoll_add(iod_t *d) {
  struct epoll_event e;
  memset(&e, 0, sizeof e);
  e.events = IO_EVMASK | EPOLLRDHUP | EPOLLET;
  e.data.ptr = d;
  return epoll_ctl(io.epfd, EPOLL_CTL_ADD, d->fd, &e) == 0 ? 0 : -err_now();
}

/* Registers d in the epoll instance if it is not yet (lock held). 0 or -errno. */
static int arm(iod_t *d) {
  if (d->registered) return 0;
  int rc = epoll_add(d);
  if (rc && rc != -EEXIST) return rc;
  d->registered = 1;
  return 0;
}

/* The block continuation's extra step (after the record's lock is released): if
 * this VP goes on running threads and no VP waits in the engine, wake a sleeping
 * VP so that one becomes the poller (weft__wake_one wakes none if a VP spins: that
 * one polls, and becomes the poller when it sleeps). */
static void kick(void *unused) {
  (void)unused;
  weft_vp_t *vp = weft__vp();
  if (vp->current && !atomic_load_explicit(&io.poller, memory_order_relaxed)) weft__wake_one();
}

/* Parks the caller until d may be ready for `mode` (EPOLLIN/OUT/PRI). Returns 0
 * (retry the operation), or -ETIMEDOUT, -EBADF (weft_close since the operation
 * began), -ENOMEM (no timer slot), or epoll_ctl's -errno. */
static int iod_wait(iod_t *d, uint32_t gen, uint32_t mode, uint64_t deadline) {
  weft__waiter_t w;
  weft__waiter_init(&w, deadline);
  if (deadline != WEFT_FOREVER) {
    if (deadline <= weft__os_now_ns()) return -ETIMEDOUT;
    if (weft__timer_reserve(weft__vp())) return -ENOMEM;
  }
  w.mode = mode;
  w.idle = 0;  /* may give its stack back (stacks of idle threads) */
  weft__qlock_lock(&d->lock);
  if (atomic_load_explicit(&d->gen, memory_order_relaxed) != gen) {
    weft__spin_unlock(&d->lock);
    return -EBADF;
  }
  if (d->ready & mode) {  /* an edge came since the caller's try (or before it, and it
                            found what came): try again */
    d->ready &= ~mode;
    weft__spin_unlock(&d->lock);
    return 0;
  }
  int rc = arm(d);
  if (rc) {
    weft__spin_unlock(&d->lock);
    return rc;
  }
  weft__wq_push(&d->q, &w);
  /* seq_cst: the deadlock check (quiet) and the pollers read it */
  atomic_fetch_add_explicit(&io.nwait, 1, memory_order_seq_cst);
  /* weft_dump: the descriptor and whether it waits to read, to write, or either */
  int xk = (mode & EPOLLOUT) ? ((mode & ~(uint32_t)EPOLLOUT) ? WEFT__WX_FD_RW : WEFT__WX_FD_WRITE)
                             : WEFT__WX_FD_READ;
  uint32_t st = weft__wait_on(&w, WEFT__WAITING_X(xk, (uint32_t)d->fd), &d->lock, kick, NULL);
  if (st != WEFT__W_SIGNALED) {
    weft__qlock_lock(&d->lock);
    if (WEFT__UNLIKELY(w.idle == IO_IDLE_LAZY)) {
      /* the fire put the stack back (weft__io_idle_fired); its stand-in is ours */
      idle_stack_t *s = (idle_stack_t *)(void *)w.next;
      if (s->w.linked) weft__wq_remove(&d->q, &s->w);
      free(s);
    } else if (w.linked) {
      weft__wq_remove(&d->q, &w);
    }
    weft__spin_unlock(&d->lock);
    rc = -ETIMEDOUT;
  } else if (atomic_load_explicit(&d->gen, memory_order_relaxed) != gen) {
    rc = -EBADF;  /* woken by weft_close (its bump is ordered by our acquire of state) */
  }
  /* relaxed: after the wait; the count stays above zero for as long as we wait */
  atomic_fetch_sub_explicit(&io.nwait, 1, memory_order_relaxed);
  return rc;
}

/* Sleeps until `until` queued on d with no event armed, so that only the timer or
 * weft_close ends it: the pause of a loop that must look again later (an AF_UNIX
 * connect to a full backlog, a TCP peek for more bytes than are queued), which a
 * plain sleep would let run on after weft_close, into a descriptor that took the
 * number. 0, -EBADF (weft_close since gen), -ENOMEM (no timer slot). */
static int iod_nap(iod_t *d, uint32_t gen, uint64_t until) {
  if (until <= weft__os_now_ns()) return 0;
  if (weft__timer_reserve(weft__vp())) return -ENOMEM;
  weft__waiter_t w;
  weft__waiter_init(&w, until);
  w.mode = 0;  /* no event matches it; weft_close wakes every waiter */
  w.idle = IO_IDLE_NEVER;
  weft__qlock_lock(&d->lock);
  if (atomic_load_explicit(&d->gen, memory_order_relaxed) != gen) {
    weft__spin_unlock(&d->lock);
    return -EBADF;
  }
  weft__wq_push(&d->q, &w);
  /* seq_cst: as in iod_wait */
  atomic_fetch_add_explicit(&io.nwait, 1, memory_order_seq_cst);
  uint32_t st = weft__wait_on(&w, WEFT__WAITING_X(WEFT__WX_FD_READ, (uint32_t)d->fd), &d->lock, kick, NULL);
  if (st != WEFT__W_SIGNALED) {
    weft__qlock_lock(&d->lock);
    if (w.linked) weft__wq_remove(&d->q, &w);
    weft__spin_unlock(&d->lock);
  }
  /* relaxed: as in iod_wait (woken by weft_close: its bump is ordered by our acquire
   * of the waiter's state) */
  int rc = atomic_load_explicit(&d->gen, memory_order_relaxed) != gen ? -EBADF : 0;
  atomic_fetch_sub_explicit(&io.nwait, 1, memory_order_relaxed);
  return rc;
}

/* weft_fd_spawn's record: the waiter (queued on the descriptor, as a parked thread's
 * is, but in the heap: the thread has no stack yet) and what the thread runs. */
typedef struct spawn_rec {
  weft__waiter_t w;
  weft_thread_fn fn;
  void *arg;
  iod_t *d;                 /* the descriptor's record */
  uint32_t gen;             /* its generation when the wait began */
  uint64_t id;              /* stale: the thread's id (weft_thread_id) */
  struct spawn_rec *next;   /* stale: d->stale's link */
} spawn_rec_t;

/* The calling weft thread's record in d's stale list, taken out (then the list's
 * K_STALE goes with its last record), or NULL. Under d's lock. */
static spawn_rec_t *stale_take_locked(iod_t *d, uint64_t id) {
  for (spawn_rec_t **pp = &d->stale; *pp; pp = &(*pp)->next) {
    spawn_rec_t *r = *pp;
    if (r->id != id) continue;
    *pp = r->next;
    if (!d->stale) atomic_fetch_and_explicit(&d->kind, ~K_STALE, memory_order_relaxed);
    return r;
  }
  return NULL;
}

/* 1 if the calling weft thread is a weft_fd_spawn thread whose wait on d's number
 * was ended, or overtaken, by a weft_close before its first call on it: this call is
 * that first call, and it fails (EBADF, the caller sets it), as weft_fd_spawn's
 * contract says, whatever file the number names now. The mark goes with it. */
static __attribute__((noinline, cold)) int stale_take(iod_t *d) {
  weft_thread_t *self = weft_self();
  if (!self) return 0;
  weft__qlock_lock(&d->lock);
  spawn_rec_t *r = stale_take_locked(d, weft_thread_id(self));
  weft__spin_unlock(&d->lock);
  free(r);
  return r != NULL;
}
static inline int stale_hit(iod_t *d) {
  /* relaxed: set under the lock before the stale thread was made ready (its start
   * is ordered after), cleared by the thread itself; others only take the slow
   * paths while it shows */
  return WEFT__UNLIKELY(atomic_load_explicit(&d->kind, memory_order_relaxed) & K_STALE) &&
         stale_take(d);
}
/* stale_hit for fd's record, on the paths that have not looked it up: a weft thread's
 * calls that need no record (a read of 0 bytes, an fsync) and a wired weft thread's
 * (the plain system calls). Nothing for a plain OS thread: none can be stale, and it
 * must not read the table while weft_shutdown may free it (a weft thread keeps weft
 * running). */
static int stale_hit_fd(int fd) {
  if (fd < 0 || fd >= IOD_PAGE * IOD_PAGES || !weft_self()) return 0;
  /* acquire: pairs with iod_get's release publication of the page */
  iod_t *p = atomic_load_explicit(&io.pages[fd / IOD_PAGE], memory_order_acquire);
  return p && stale_hit(&p[fd % IOD_PAGE]);
}

/* The spawned thread's first function: frees the record (its waiter was claimed
 * and is read no more: weft__wakeset_run reads a waiter's links before it makes its
 * thread ready) and runs the caller's. If a weft_close of the number came since the
 * wait began (its generation moved), the record goes to the descriptor's stale list
 * instead, so that fn's first call on the number fails with EBADF even when the
 * number names another file by then (stale_hit); taken out there, or when fn
 * returns. */
static void *spawn_start(void *p) {
  spawn_rec_t *r = p;
  weft_thread_fn fn = r->fn;
  void *arg = r->arg;
  iod_t *d = r->d;
  /* relaxed: as iod_wait's decrement once its waiter is done */
  atomic_fetch_sub_explicit(&io.nwait, 1, memory_order_relaxed);
  weft__qlock_lock(&d->lock);
  /* relaxed: bumped under this lock */
  int stale = atomic_load_explicit(&d->gen, memory_order_relaxed) != r->gen;
  if (stale) {
    r->id = weft_thread_id(weft_self());
    r->next = d->stale;
    d->stale = r;
    atomic_fetch_or_explicit(&d->kind, K_STALE, memory_order_relaxed);
  }
  weft__spin_unlock(&d->lock);
  if (!stale) {
    free(r);
    return fn(arg);
  }
  void *res = fn(arg);
  weft__qlock_lock(&d->lock);  /* no call on the number came: drop the mark */
  r = stale_take_locked(d, weft_thread_id(weft_self()));
  weft__spin_unlock(&d->lock);
  free(r);
  return res;
}

int weft_fd_spawn(int fd, short events, weft_thread_fn fn, void *arg) {
  uint32_t mode = (uint32_t)events & (POLLIN | POLLOUT | POLLPRI);
  if (!fn || !mode) return WEFT_EINVAL;
  if (fd < 0 || fd >= IOD_PAGE * IOD_PAGES) return WEFT_EINVAL;
  weft_vp_t *vp = weft__vp();
  if (!vp || !vp->current) return WEFT_EPERM;
  iod_t *d = iod_get(fd);
  if (!d) return WEFT_ENOMEM;
  if (stale_hit(d)) return WEFT_EINVAL;  /* the caller's own fd was closed (weft_close) */
  spawn_rec_t *r = malloc(sizeof *r);
  if (!r) return WEFT_ENOMEM;
  r->fn = fn;
  r->arg = arg;
  r->d = d;
  r->next = NULL;
  weft_thread_t *t;
  int rc = weft__create_unready(vp, &t, spawn_start, r);
  if (rc) {
    free(r);
    return rc;
  }
  weft__waiter_init(&r->w, WEFT_FOREVER);
  r->w.t = t;
  r->w.mode = mode;
  r->w.idle = IO_IDLE_NEVER;  /* its thread has no stack yet */
  weft__qlock_lock(&d->lock);
  r->gen = atomic_load_explicit(&d->gen, memory_order_relaxed);  /* relaxed: lock */
  int arc = arm(d);
  if (arc == 0 && (d->ready & mode)) {  /* an edge came while nobody waited: runs at once */
    d->ready &= ~mode;
    arc = 1;
  }
  if (arc == 0) {
    weft__wq_push(&d->q, &r->w);
    /* seq_cst: as in iod_wait (the deadlock check and the pollers read it) */
    atomic_fetch_add_explicit(&io.nwait, 1, memory_order_seq_cst);
  }
  weft__spin_unlock(&d->lock);
  if (arc) {
    /* the engine will not watch fd (arc < 0: the thread runs at once and its call
     * sees why), or it is ready already (arc == 1) */
    atomic_fetch_add_explicit(&io.nwait, 1, memory_order_relaxed);  /* spawn_start's */
    weft__unblock(vp, t);
    return 0;
  }
  kick(NULL);  /* a poller must be there for it, as for a parked thread */
  return 0;
}

/* From a plain OS thread: poll(2) until ready or the deadline. 0 or -errno. */
static int os_wait(int fd, uint32_t mode, uint64_t deadline) {
  for (;;) {
    int ms = -1, last = 0;
    if (deadline != WEFT_FOREVER) {
      uint64_t now = weft__os_now_ns();
      if (now >= deadline) {
        /* past the deadline: one look that does not wait, so that a descriptor
         * that is ready still has its operation made (as on a weft thread) */
        ms = 0;
        last = 1;
      } else {
        uint64_t left = (deadline - now + 999999u) / 1000000u;
        ms = left > INT_MAX ? INT_MAX : (int)left;
      }
    }
    struct pollfd p = {.fd = fd, .events = (short)mode, .revents = 0};
    int r = poll(&p, 1, ms);
    if (r > 0) return 0;
    if (r < 0 && err_now() != EINTR) return -err_now();
    if (r == 0 && last) return -ETIMEDOUT;
  }
}

/* ---- engine hooks (runtime.c) -------------------------------------------------------- */

/* Events m came for d (a mapped EPOLLIN/OUT/PRI mask): wakes the waiters m
 * satisfies and keeps in d->ready what none of them took (the registration is
 * edge-triggered: that edge will not be reported again). Returns how many it woke. */
static int iod_events(iod_t *d, uint32_t m) {
  int woke = 0;
  weft__wakeset_t s;
  weft__wakeset_init(&s);
  weft__qlock_lock(&d->lock);
  uint32_t took = 0;
  for (weft__waiter_t *w = d->q.head, *nx; w; w = nx) {
    nx = w->next;  /* before the claim: the wake set reuses next */
    if (w->mode & m) {
      weft__wq_remove(&d->q, w);
      uint32_t wm = w->mode;
      /* only a waiter this event wakes takes the edge: one whose deadline has passed
       * (claimed TIMEDOUT by its timer, still linked until it runs) does not, or the
       * edge was lost for a thread that tried the call before the data came and parks
       * after this (it found no ready bit, and waited for its deadline: 5 to 28 times
       * in 20,000 rounds of a probe at 2 VPs) */
      if (iod_claim(&s, w)) {
        took |= wm;
        woke++;
      }
    }
  }
  d->ready |= m & ~took;
  d->seen = 1;
  weft__spin_unlock(&d->lock);
  weft__wakeset_run(&s);
  return woke;
}

static uint32_t map_events(uint32_t e) {
  uint32_t m = 0;
  if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) m |= EPOLLIN;
  if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) m |= EPOLLOUT;
  if (e & (EPOLLPRI | EPOLLHUP | EPOLLERR)) m |= EPOLLPRI;
  return m;
}

#ifdef WEFT_HAVE_URING
/* Reaps every completion in r (the caller holds the poller role). */
static int uring_reap(vring_t *r) {
  int woke = 0;
  struct io_uring_cqe *cqe;
  RING_ACQUIRE(r);  /* the ring as its maker left it (ring_make) */
  while (io_uring_peek_cqe(&r->ring, &cqe) == 0) {
    RING_ACQUIRE(r);  /* each request as its submitter left it */
    uint64_t ud = io_uring_cqe_get_data64(cqe);
    int res = cqe->res;
    io_uring_cqe_seen(&r->ring, cqe);
    if (ud == URING_UD_IGNORE) continue;
    woke += uop_complete((uop_t *)(uintptr_t)ud, res);
  }
  return woke;
}
#endif

/* Whether an epoll event is a ring's (its data tagged with RING_TAG), not a record's
 * or the eventfd's. */
static inline int is_ring(const struct epoll_event *e) {
#ifdef WEFT_HAVE_URING
  return (e->data.u64 & RING_TAG) != 0;
#else
  (void)e;
  return 0;
#endif
}

/* Gives up the poller role after a wait that returned n events in ev; first, while
 * the role is held, reaps the ring if it was among them (its completion queue has
 * one reader at a time: the holder of the role). Returns how many threads that woke. */
static int release_role(struct epoll_event *ev, int n) {
  int woke = 0;
#ifdef WEFT_HAVE_URING
  for (int i = 0; i < n; i++)
    if (is_ring(&ev[i])) woke += uring_reap((vring_t *)(uintptr_t)(ev[i].data.u64 & ~(uint64_t)RING_TAG));
#else
  (void)ev;
  (void)n;
#endif
  /* release: pairs with the acquire of the next CAS for the role (what the reap
   * read of the completion queue is handed over with it) */
  atomic_store_explicit(&io.poller, NULL, memory_order_release);
  return woke;
}

static int dispatch(struct epoll_event *ev, int n) {
  int woke = 0;
  for (int i = 0; i < n; i++) {
    iod_t *d = ev[i].data.ptr;
    if (!d) {  /* the eventfd: weft__io_wake; drain it */
      uint64_t v;
      ssize_t r = read(io.evfd, &v, sizeof v);
      (void)r;
      continue;
    }
    if (is_ring(&ev[i])) continue;  /* reaped by the holder of the role (release_role) */
    woke += iod_events(d, map_events(ev[i].events));
  }
  return woke;
}

#define IO_NEV 64

static int epoll_for(uint64_t until, struct epoll_event *ev) {
  if (until == 0) return epoll_wait(io.epfd, ev, IO_NEV, 0);
  if (until == WEFT_FOREVER) return epoll_wait(io.epfd, ev, IO_NEV, -1);
  uint64_t now = weft__os_now_ns(), left = until > now ? until - now : 0;
  struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
  int n = epoll_pwait2(io.epfd, ev, IO_NEV, &ts, NULL);
  if (n < 0 && err_now() == ENOSYS) {
    uint64_t ms = (left + 999999u) / 1000000u;
    n = epoll_wait(io.epfd, ev, IO_NEV, ms > INT_MAX ? INT_MAX : (int)ms);
  }
  return n;
}

/* The registration check, by the holder of the poller role. A descriptor closed
 * with close(2) loses its epoll registration with its file; if its number is reused
 * and a weft thread parks on it, the record still says registered, and no event
 * would ever come (weft/io.h asks for weft_close, which forgets the registration).
 * So, from time to time, each record with waiters that has had no event since the
 * last check is registered again: EEXIST, the registration is alive; success, it
 * was lost, and the new one reports the descriptor's state at once; EBADF, the
 * number is closed, and its waiters fail with EBADF as after weft_close. The period
 * starts at CHECK_MIN and doubles to CHECK_MAX while nothing is found; a lost
 * registration brings it back to CHECK_MIN.
 *
 * The same walk over the records is the sweep of the stacks of idle threads (see
 * there), on its own clock: every half age while a waiter it saw is not yet old
 * enough, else every age (at least CHECK_MIN apart). Returns the time of the next
 * check or sweep. */
#define CHECK_MIN 1000000ull       /* 1 ms */
#define CHECK_MAX 1000000000ull    /* 1 s */
static uint64_t check_registrations(void) {
  if (!atomic_load_explicit(&io.nwait, memory_order_relaxed)) return WEFT_FOREVER;
  uint64_t now = weft__os_now_ns();
  int check = now >= io.check_at, sweep = io.idle_ns && now >= io.sweep_at;
  if (!check && !sweep) return io.idle_ns && io.sweep_at < io.check_at ? io.sweep_at : io.check_at;
  uint32_t stamp = (uint32_t)(now >> 20), age = (uint32_t)(io.idle_ns >> 20);
  if (stamp == 0 || stamp >= IO_IDLE_LAZY) stamp = 1;
  int lost = 0, pending = 0;
  for (int i = 0; i < IOD_PAGES; i++) {
    /* acquire: pairs with iod_get's release publication of the page */
    iod_t *p = atomic_load_explicit(&io.pages[i], memory_order_acquire);
    if (!p) continue;
    for (int j = 0; j < IOD_PAGE; j++) {
      iod_t *d = &p[j];
      weft__wakeset_t s;
      weft__wakeset_init(&s);
      weft__qlock_lock(&d->lock);
      if (check) {
        int rc = d->registered && d->q.head && !d->seen ? epoll_add(d) : -EEXIST;
        if (rc == 0) lost = 1;
        /* the number is closed (a plain close(2), or one that raced a park): no event
         * can come, so the waiters end as weft_close would end them (EBADF) */
        else if (rc == -EBADF) iod_forget(d, &s);
        d->seen = 0;
      }
      if (sweep && d->q.head && idle_sweep(d, stamp, age)) pending = 1;
      weft__spin_unlock(&d->lock);
      weft__wakeset_run(&s);
    }
  }
  if (check) {
    if (lost || !io.check_period) io.check_period = CHECK_MIN;
    else if (io.check_period < CHECK_MAX) io.check_period *= 2;
    io.check_at = now + io.check_period;
  }
  if (sweep) {
    /* waiters seen and not yet old: look again in half an age; else in an age, for
     * the threads that park meanwhile (a thread is then given back between one and
     * two and a half ages after it parked) */
    uint64_t next = pending ? io.idle_ns / 2 : io.idle_ns;
    io.sweep_at = now + (next > CHECK_MIN ? next : CHECK_MIN);
  }
  return io.idle_ns && io.sweep_at < io.check_at ? io.sweep_at : io.check_at;
}

int weft__io_park(weft_vp_t *vp, uint64_t until) {
  weft_vp_t *none = NULL;
  if (!atomic_load_explicit(&io.nwait, memory_order_relaxed) ||
      !atomic_compare_exchange_strong_explicit(&io.poller, &none, vp, memory_order_seq_cst,
                                               memory_order_relaxed)) {
    weft__os_futex_wait_until(&vp->park, 1, until);
    return 0;
  }
  /* seq_cst: with the CAS above, the store-buffering pair with weft__io_wake (a
   * waker stores park = 0, then fences and reads poller): either we see 0 here, or
   * it sees us as the poller and writes the eventfd */
  if (atomic_load_explicit(&vp->park, memory_order_seq_cst) == 0) {
    atomic_store_explicit(&io.poller, NULL, memory_order_release);
    return 0;
  }
  uint64_t check = check_registrations();
  if (until == 0) until = 1;
  struct epoll_event ev[IO_NEV];
  int n = epoll_for(check < until ? check : until, ev);
  int woke = release_role(ev, n);
  return (n > 0 && dispatch(ev, n) > 0) || woke > 0;
}

void weft__io_wake(weft_vp_t *vp) {
  /* seq_cst fence: the caller's store of park = 0 comes before our load of the
   * poller (see weft__io_park) */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&io.poller, memory_order_relaxed) == vp) {
    uint64_t one = 1;
    ssize_t r = write(io.evfd, &one, sizeof one);  /* readable until the poller drains it */
    (void)r;
  }
}

/* The system monitor's token for the poller role (never a VP: weft__io_wake, which
 * compares the role with a VP it woke, never writes the eventfd for it). */
static weft_vp_t *monitor_token(void) { return (weft_vp_t *)(void *)&io.poller; }

/* One poll that does not wait, by the holder of the poller role (token), which it
 * gives up at the end; returns how many threads it made ready. */
static int poll_held(void) {
  (void)check_registrations();
  struct epoll_event ev[IO_NEV];
  int n = epoll_for(0, ev);
  int woke = release_role(ev, n);
  return woke + (n > 0 ? dispatch(ev, n) : 0);
}

/* The CAS for the role (seq_cst: see weft__io_park); 1 if token took it. */
static int take_role(weft_vp_t *token) {
  weft_vp_t *none = NULL;
  return atomic_compare_exchange_strong_explicit(&io.poller, &none, token, memory_order_seq_cst,
                                                 memory_order_relaxed);
}

int weft__io_poll_monitor(void) {
  /* relaxed: hints, as in weft__io_need_poller; the CAS decides */
  if (!atomic_load_explicit(&io.nwait, memory_order_relaxed) ||
      atomic_load_explicit(&io.poller, memory_order_relaxed) || !take_role(monitor_token()))
    return 0;
  int woke = poll_held();
  /* A VP that went to sleep while we held the role found it taken (weft__io_park) and
   * sleeps on its futex, not in the engine: with every other VP asleep too, nobody
   * would poll until our next look, and with none awake there is no next look (the
   * monitor sleeps while every VP does). So if threads still wait and the role is
   * free, wake a sleeping VP (none if one spins: a spinning VP polls, and takes the
   * role when it sleeps); it goes round its idle loop and takes the role to sleep. The
   * sleeper pushed itself on the sleeper stack before it tried for the role, so the
   * wake finds it, and its futex wait returns at once if the wake comes first. */
  if (weft__io_need_poller()) weft__wake_one();
  return woke;
}

int weft__io_poll(weft_vp_t *vp) {
  if (!atomic_load_explicit(&io.nwait, memory_order_relaxed) || !take_role(vp)) return 0;
  return poll_held();
}

int weft__io_waiting(void) { return atomic_load_explicit(&io.nwait, memory_order_seq_cst) != 0; }

int weft__io_need_poller(void) {
  return atomic_load_explicit(&io.nwait, memory_order_relaxed) != 0 &&
         !atomic_load_explicit(&io.poller, memory_order_relaxed);
}

#ifdef WEFT_HAVE_URING
/* Whether this kernel can run the engine: 0, or -errno when io_uring is refused
 * (ENOSYS, or EPERM under seccomp or kernel.io_uring_disabled), or it lacks what the
 * engine uses (completions never dropped: NODROP, 5.5; cancellation by user_data,
 * 5.5), found by trying them on a ring made for the purpose. The VPs' own rings are
 * made at the end of weft__io_init (ring_make). */
static int uring_probe(void) {
  vring_t r;
  memset(&r, 0, sizeof r);
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  int rc = io_uring_queue_init_params(4, &r.ring, &p);
  if (rc < 0) return rc;
  if (!(p.features & IORING_FEAT_NODROP)) {
    io_uring_queue_exit(&r.ring);
    return -ENOSYS;
  }
  /* a cancellation of a request that is not there: ENOENT where supported */
  struct io_uring_cqe *cqe;
  struct io_uring_sqe t;
  io_uring_prep_cancel64(&t, URING_UD_IGNORE - 1, 0);
  rc = uring_submit_sqe(&r, &t, URING_UD_IGNORE);
  if (rc == 0) rc = io_uring_wait_cqe(&r.ring, &cqe);
  if (rc == 0) {
    rc = cqe->res == -ENOENT ? 0 : -ENOSYS;
    io_uring_cqe_seen(&r.ring, cqe);
  }
  io_uring_queue_exit(&r.ring);
  return rc;
}
#endif

int weft__io_init(void) {
  const char *e = getenv("WEFT_IO");
  int want_uring = 0, forced = e && *e;
  if (forced && strcmp(e, "epoll") != 0) {
#ifdef WEFT_HAVE_URING
    if (strcmp(e, "uring") != 0) return WEFT_EINVAL;
    want_uring = 1;
#else
    return WEFT_EINVAL;  /* unknown, or uring in a build without liburing */
#endif
  }
  memset(&io, 0, sizeof io);
  int idle_ms = weft__rt.cfg.io_idle_stack_ms;
  const char *ie = getenv("WEFT_IO_IDLE_STACK");
  if (ie && *ie) {
    char *endp;
    long v = strtol(ie, &endp, 10);
    if (strcmp(ie, "keep") == 0 || strcmp(ie, "off") == 0) idle_ms = WEFT_IO_IDLE_STACK_KEEP;
    else if (*endp == '\0' && v >= 1 && v <= 3600000) idle_ms = (int)v;
    else return WEFT_EINVAL;
  }
  io.idle_ns = idle_ms == WEFT_IO_IDLE_STACK_KEEP ? 0
               : (uint64_t)(idle_ms ? idle_ms : 1000) * 1000000u;
  io.evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (io.evfd < 0) return WEFT_ESYS;
  io.epfd = epoll_create1(EPOLL_CLOEXEC);
  if (io.epfd < 0) {
    close(io.evfd);
    return WEFT_ESYS;
  }
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN;
  ev.data.ptr = NULL;
  if (epoll_ctl(io.epfd, EPOLL_CTL_ADD, io.evfd, &ev) != 0) {
    close(io.evfd);
    close(io.epfd);
    return WEFT_ESYS;
  }
  io.name = "epoll";
#ifdef WEFT_HAVE_URING
  if (!forced || want_uring) {  /* the default: io_uring where it works */
    io.nrings = weft__rt.nvps;
    io.rings = uring_probe() == 0 ? weft__sys_calloc((size_t)io.nrings, sizeof *io.rings) : NULL;
    if (io.rings) {
      io.uring = 1;
      io.name = "uring";
      for (int i = 0; i < io.nrings; i++) io.rings[i] = ring_make();  /* NULL: direct calls */
    } else if (want_uring) {
      close(io.evfd);
      close(io.epfd);
      return WEFT_ESYS;  /* forced, but this kernel refuses it */
    }
  }
#endif
  (void)want_uring;
  atomic_store_explicit(&io.on, 1, memory_order_release);
  return 0;
}

void weft__io_fini(void) {
  /* relaxed, here and below: weft_shutdown (or a failed weft_init) runs this with
   * every VP stopped and no OS thread inside the gate */
  if (!atomic_load_explicit(&io.on, memory_order_relaxed)) return;
  atomic_store_explicit(&io.on, 0, memory_order_relaxed);
#ifdef WEFT_HAVE_URING
  if (io.uring) {  /* drops the requests still there */
    for (int i = 0; i < io.nrings; i++) {
      if (!io.rings[i]) continue;
      io_uring_queue_exit(&io.rings[i]->ring);
      weft__sys_free(io.rings[i]);
    }
    weft__sys_free(io.rings);
  }
#endif
  for (int i = 0; i < IOD_PAGES; i++) {
    iod_t *p = atomic_load_explicit(&io.pages[i], memory_order_relaxed);
    if (!p) continue;
    for (int j = 0; j < IOD_PAGE; j++)  /* stale marks of threads ended by weft_exit */
      while (p[j].stale) {
        spawn_rec_t *r = p[j].stale;
        p[j].stale = r->next;
        free(r);
      }
    weft__sys_free(p);
    atomic_store_explicit(&io.pages[i], NULL, memory_order_relaxed);
  }
  close(io.evfd);
  close(io.epfd);
  io.name = NULL;
}

long weft_io_parked(void) {
  /* relaxed: a snapshot for diagnostics; orders nothing */
  return weft_is_running() ? atomic_load_explicit(&io.nwait, memory_order_relaxed) : 0;
}

const char *weft_io_engine(void) {
  return weft_is_running() && atomic_load_explicit(&io.on, memory_order_acquire) ? io.name : NULL;
}

/* ---- the operations --------------------------------------------------------------- */

enum { OP_READ, OP_WRITE, OP_READV, OP_WRITEV, OP_PREAD, OP_PWRITE, OP_RECV, OP_SEND,
       OP_RECVMSG, OP_SENDMSG };

typedef struct op {
  int kind, fd, flags;
  void *buf;
  size_t len;
  const struct iovec *iov;
  int iovcnt;
  off_t off;
  struct msghdr *msg;
} op_t;

static int is_write(int kind) {
  return kind == OP_WRITE || kind == OP_WRITEV || kind == OP_PWRITE || kind == OP_SEND ||
         kind == OP_SENDMSG;
}

/* d found not to be a socket: give it O_NONBLOCK (docs/io.md) and remember. */
static void make_other(iod_t *d) {
  int fl = fcntl(d->fd, F_GETFL);
  if (fl >= 0 && !(fl & O_NONBLOCK)) (void)fcntl(d->fd, F_SETFL, fl | O_NONBLOCK);
  kind_set(d, K_OTHER);
}

/* The plain system call (blocking unless the descriptor is O_NONBLOCK). */
static ssize_t op_plain(const op_t *o, int extra_flags) {
  switch (o->kind) {
  case OP_READ: return read(o->fd, o->buf, o->len);
  case OP_WRITE: return write(o->fd, o->buf, o->len);
  case OP_READV: return readv(o->fd, o->iov, o->iovcnt);
  case OP_WRITEV: return writev(o->fd, o->iov, o->iovcnt);
  case OP_PREAD: return pread(o->fd, o->buf, o->len, o->off);
  case OP_PWRITE: return pwrite(o->fd, o->buf, o->len, o->off);
  case OP_RECV: return recv(o->fd, o->buf, o->len, o->flags | extra_flags);
  case OP_SEND: return send(o->fd, o->buf, o->len, o->flags | extra_flags);
  case OP_RECVMSG: return recvmsg(o->fd, o->msg, o->flags | extra_flags);
  case OP_SENDMSG: return sendmsg(o->fd, o->msg, o->flags | extra_flags);
  }
  return fail(EINVAL);
}

/* One try that does not block: sockets with MSG_DONTWAIT (read and write as recv
 * and send, readv and writev as recvmsg and sendmsg), others through O_NONBLOCK.
 * d NULL (a plain OS thread after poll said ready): non-sockets are the plain call. */
static ssize_t op_try(iod_t *d, const op_t *o) {
  int k = d ? kind_of(d) : K_UNKNOWN;
  if (o->kind == OP_PREAD || o->kind == OP_PWRITE) return op_plain(o, 0);
  if (o->kind >= OP_RECV) return op_plain(o, MSG_DONTWAIT);
  if (k != K_OTHER) {
    ssize_t r;
    struct msghdr m;
    switch (o->kind) {
    case OP_READ: r = recv(o->fd, o->buf, o->len, MSG_DONTWAIT); break;
    case OP_WRITE: r = send(o->fd, o->buf, o->len, MSG_DONTWAIT); break;
    default:
      memset(&m, 0, sizeof m);
      m.msg_iov = (struct iovec *)o->iov;
      m.msg_iovlen = (size_t)o->iovcnt;
      r = o->kind == OP_READV ? recvmsg(o->fd, &m, MSG_DONTWAIT) : sendmsg(o->fd, &m, MSG_DONTWAIT);
      break;
    }
    if (r >= 0 || err_now() != ENOTSOCK) {
      if (d && k == K_UNKNOWN && (r >= 0 || err_now() == EAGAIN || err_now() == EWOULDBLOCK))
        kind_cas(d, K_UNKNOWN, K_SOCK);
      return r;
    }
    if (d) make_other(d);
  }
  return op_plain(o, 0);
}

static uint32_t op_mode(const op_t *o) { return is_write(o->kind) ? EPOLLOUT : EPOLLIN; }

#ifdef WEFT_HAVE_URING
/* Whether d is a regular file (or block device): the io_uring engine submits its
 * reads and writes to the ring instead of making them on the VP. Classified by
 * fstat on first use (relaxed: a cache, as kind always is). */
static int is_file(iod_t *d) {
  int k = kind_of(d);
  if (k != K_UNKNOWN) return k == K_FILE;
  struct stat st;
  if (fstat(d->fd, &st) != 0) return 0;  /* the operation reports it */
  if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) k = K_FILE;
  else if (S_ISSOCK(st.st_mode)) k = K_SOCK;
  else return 0;  /* op_try classifies the rest */
  kind_cas(d, K_UNKNOWN, k);
  return k == K_FILE;
}

/* A read or write at the file position on a kernel thread of the blocking pool (the
 * caller parks, weft_blocking): the plain call, with its errno carried back. */
typedef struct pool_op {
  const op_t *o;
  ssize_t r;
  int err;
} pool_op_t;
static void *pool_op_run(void *p) {
  pool_op_t *x = p;
  x->r = op_plain(x->o, 0);
  x->err = x->r < 0 ? err_now() : 0;
  return NULL;
}

/* A read or write of a regular file through the ring; the caller parks until it
 * completes. A file with O_NONBLOCK may get EAGAIN from the ring (a page-cache
 * miss): then the plain call is made (on the VP, as the epoll engine does).
 * At the file position (read, write, readv, writev), the ring is not used: read(2)
 * and write(2) hold the open file's position lock for the whole transfer, so that
 * two calls at the position never get or write the same bytes, and a ring request
 * at the position takes no such lock (concurrent ones read the same blocks and
 * write over each other). Those go to the blocking pool instead, whose kernel
 * thread makes the plain call; their deadline is not applied (a started read or
 * write at the position cannot be taken back: the position has moved). */
static ssize_t uring_file_op(const op_t *o, uint64_t deadline) {
  /* First a try that does not block (RWF_NOWAIT: the page cache has it): then no
   * request, no park. EAGAIN (it would wait for the disk) or EOPNOTSUPP (the file
   * system cannot tell): through the ring. */
  struct iovec one = {o->buf, o->len};
  const struct iovec *v = &one;
  int cnt = 1;
  off_t at = (o->kind == OP_PREAD || o->kind == OP_PWRITE) ? o->off : -1;
  if (o->kind == OP_READV || o->kind == OP_WRITEV) {
    v = o->iov;
    cnt = o->iovcnt;
  }
  ssize_t q = is_write(o->kind) ? pwritev2(o->fd, v, cnt, at, RWF_NOWAIT)
                                : preadv2(o->fd, v, cnt, at, RWF_NOWAIT);
  if (q >= 0 || (err_now() != EAGAIN && err_now() != EOPNOTSUPP)) return q;
  if (at == -1) {
    pool_op_t x = {o, -1, 0};
    /* no pool thread to be had (WEFT_EAGAIN): the plain call on the VP, as epoll */
    if (weft_blocking(pool_op_run, &x, NULL) != 0) return op_plain(o, 0);
    return x.r >= 0 ? x.r : fail(x.err);
  }
  vring_t *vr = vp_ring();
  if (!vr) return op_plain(o, 0);  /* no ring to be had: the plain call, as epoll */
  struct io_uring_sqe t;
  unsigned len = o->len > 0x7ffff000u ? 0x7ffff000u : (unsigned)o->len;  /* the kernel's
                                                                           most per call */
  if (o->kind == OP_PREAD) io_uring_prep_read(&t, o->fd, o->buf, len, (uint64_t)o->off);
  else io_uring_prep_write(&t, o->fd, o->buf, len, (uint64_t)o->off);
  int r = uring_do(&t, deadline);
  if (r == -EAGAIN || r == -ECANCELED) return op_plain(o, 0);
  return r >= 0 ? r : fail(-r);
}
#endif

static size_t iov_total(const struct iovec *iov, int cnt);

/* A plain OS thread's timed call, before it waits for readiness (op_run): 1 with *r set
 * when the call's outcome needs no wait, 0 when the wait is to come. Sockets are tried
 * with MSG_DONTWAIT (read and write as recv and send, as op_try does): their result or
 * error, unless EAGAIN. Other descriptors are not tried (their plain call could block
 * past the deadline, and their flags stay as the program set them): only a direction
 * they are not open for fails at once (EBADF, as read(2) and write(2) give it); a
 * descriptor that can never become ready for the call (a write to a timerfd) waits to
 * the deadline (docs/io.md). pread and pwrite are made at once: a descriptor they
 * apply to is a file, which is always ready, and any other gets ESPIPE. */
/* 1 if fd is not open, or not open for reading (write 0) or writing (write 1): what
 * read(2) and write(2) answer with EBADF before they look at anything else. */
static int fd_closed_for(int fd, int write) {
  int fl = fcntl(fd, F_GETFL);
  int acc = fl & O_ACCMODE;
  return fl < 0 || (fl & O_PATH) || (write ? acc == O_RDONLY : acc == O_WRONLY);
}

static int os_try_first(const op_t *o, ssize_t *r) {
  if (o->kind == OP_PREAD || o->kind == OP_PWRITE) {
    *r = op_plain(o, 0);
    return 1;
  }
  if (fd_closed_for(o->fd, is_write(o->kind))) {
    *r = fail(EBADF);
    return 1;
  }
  struct stat st;
  if (o->kind < OP_RECV && (fstat(o->fd, &st) != 0 || !S_ISSOCK(st.st_mode))) return 0;
  *r = op_try(NULL, o);  /* a socket (or a socket call): does not block */
  return *r >= 0 || (err_now() != EAGAIN && err_now() != EWOULDBLOCK);
}

/* After a try that would have blocked: park until d is ready, try again, until the
 * operation completes or fails. gen: d's generation read before the first try (a
 * weft_close between the try and the park is then seen). */
static ssize_t op_park(iod_t *d, uint32_t gen, op_t *o, uint64_t deadline) {
  for (;;) {
    int rc = iod_wait(d, gen, op_mode(o), deadline);
    if (rc) return (int)fail(-rc);
    ssize_t r = op_try(d, o);
    if (r >= 0 || (err_now() != EAGAIN && err_now() != EWOULDBLOCK)) return r;
  }
}

/* One operation: try, park while it would block. Returns its result, or -1 with
 * errno (ETIMEDOUT, EBADF after weft_close, ...). */
static ssize_t op_run(op_t *o, uint64_t deadline) {
  /* read(2) and readv(2) of nothing return 0 at once (a socket's too, where the
   * recv that op_try makes instead would wait for data); so does writev(2) of nothing,
   * which sends no message (the sendmsg that op_try makes on a socket sent an empty
   * datagram or record, which a SOCK_SEQPACKET reader takes for end of file) */
  if ((o->kind == OP_READ && o->len == 0) ||
      ((o->kind == OP_READV || o->kind == OP_WRITEV) && iov_total(o->iov, o->iovcnt) == 0))
    return stale_hit_fd(o->fd) ? fail(EBADF) : op_plain(o, 0);
  int nowait = (o->kind >= OP_RECV) && (o->flags & MSG_DONTWAIT);
  if (!here()) {
    if (stale_hit_fd(o->fd)) return fail(EBADF);  /* a wired stale weft_fd_spawn thread */
    /* poll(2) skips a negative descriptor: it would wait out the deadline, or for ever */
    if (o->fd < 0) return fail(EBADF);
    if (nowait) return op_plain(o, 0);
    if (deadline == WEFT_FOREVER) {
      /* the blocking call; on a descriptor that is non-blocking (weft made it so for
       * its own threads, or its owner did) it waits as that call would */
      for (;;) {
        ssize_t r = op_plain(o, 0);
        if (r >= 0 || (err_now() != EAGAIN && err_now() != EWOULDBLOCK)) return r;
        int rc = os_wait(o->fd, op_mode(o), WEFT_FOREVER);
        if (rc) return fail(-rc);
      }
    }
    /* first what needs no wait, so that a call that fails at once fails at once
     * (a wait for a readiness that never comes lasted to the deadline and said
     * ETIMEDOUT): at a position (pread, pwrite: a file, or ESPIPE) the plain call;
     * a socket's call with MSG_DONTWAIT (recv on a pipe: ENOTSOCK; on a listening
     * socket: ENOTCONN); a descriptor that is not open for the direction: EBADF */
    {
      ssize_t r;
      if (os_try_first(o, &r)) return r;
    }
    /* wait for readiness first: a non-socket is then read with the plain call,
     * which would block past the deadline if it came before the data. A write to a
     * non-socket that is ready takes at most PIPE_BUF bytes: a pipe that polls
     * writable has room for that much, and a larger blocking write would wait for
     * the reader past the deadline (op_all makes the rest) */
    for (;;) {
      int rc = os_wait(o->fd, op_mode(o), deadline);
      if (rc) return fail(-rc);
      ssize_t r;
      if (o->kind == OP_WRITE && o->len > PIPE_BUF) {
        r = send(o->fd, o->buf, o->len, MSG_DONTWAIT);
        if (r < 0 && err_now() == ENOTSOCK) r = write(o->fd, o->buf, PIPE_BUF);
      } else if (o->kind == OP_WRITEV && iov_total(o->iov, o->iovcnt) > PIPE_BUF) {
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = (struct iovec *)o->iov;
        m.msg_iovlen = (size_t)o->iovcnt;
        r = sendmsg(o->fd, &m, MSG_DONTWAIT);
        if (r < 0 && err_now() == ENOTSOCK) {  /* the first PIPE_BUF bytes (64 parts at most) */
          struct iovec v[64];
          int n = 0;
          size_t room = PIPE_BUF;
          for (int i = 0; i < o->iovcnt && n < 64 && room > 0; i++) {
            if (!o->iov[i].iov_len) continue;
            v[n].iov_base = o->iov[i].iov_base;
            v[n].iov_len = o->iov[i].iov_len < room ? o->iov[i].iov_len : room;
            room -= v[n++].iov_len;
          }
          r = writev(o->fd, v, n);
        }
      } else {
        r = op_try(NULL, o);
      }
      if (r >= 0 || (err_now() != EAGAIN && err_now() != EWOULDBLOCK)) return r;
    }
  }
  iod_t *d = iod_get(o->fd);
  if (!d) {
    return fail(o->fd < 0 || o->fd >= IOD_PAGE * IOD_PAGES ? EBADF : ENOMEM);
  }
  if (stale_hit(d)) return fail(EBADF);
  uint32_t gen = atomic_load_explicit(&d->gen, memory_order_relaxed);
#ifdef WEFT_HAVE_URING
  if (io.uring && o->kind <= OP_PWRITE && is_file(d))
    return ring_allowed() ? uring_file_op(o, deadline) : op_plain(o, 0);
#endif
  /* A timed call on a descriptor weft made non-blocking first makes sure it still is:
   * closed with close(2) and reused by a new pipe, say, the number would keep the
   * cached kind and the plain call would block past the deadline, for ever if nothing
   * comes. One fcntl per timed call on such descriptors; untimed calls keep the
   * documented limit (at worst they block their VP). */
  if (deadline != WEFT_FOREVER && kind_of(d) == K_OTHER &&
      o->kind <= OP_WRITEV) {
    int fl = fcntl(o->fd, F_GETFL);
    if (fl < 0) return -1;  /* EBADF: closed */
    if (!(fl & O_NONBLOCK)) make_other(d);
  }
  ssize_t r = op_try(d, o);
  if (r >= 0 || (err_now() != EAGAIN && err_now() != EWOULDBLOCK) || nowait) return r;
  return op_park(d, gen, o, deadline);
}

/* Drops n bytes from the front of an iovec array (a private copy, *own). */
static int iov_skip(struct iovec **own, const struct iovec **iov, int *cnt, size_t n) {
  if (!*own) {
    *own = malloc((size_t)*cnt * sizeof **own);
    if (!*own) return -1;
    memcpy(*own, *iov, (size_t)*cnt * sizeof **own);
    *iov = *own;
  }
  struct iovec *v = (struct iovec *)*iov;
  while (*cnt > 0 && n >= v->iov_len) {
    n -= v->iov_len;
    v++;
    (*cnt)--;
  }
  if (*cnt > 0) {
    v->iov_base = (char *)v->iov_base + n;
    v->iov_len -= n;
  }
  *iov = v;
  return 0;
}

static size_t iov_total(const struct iovec *iov, int cnt) {
  size_t t = 0;
  for (int i = 0; i < cnt; i++) t += iov[i].iov_len;
  return t;
}

/* A whole write (or a MSG_WAITALL recv): repeats o until `total` bytes moved, end
 * of stream (reads), an error, or the deadline; returns the bytes moved if any,
 * else the error. */
static ssize_t op_all(op_t *o, size_t total, uint64_t deadline) {
  size_t done = 0;
  struct iovec *own = NULL;
  struct msghdr m;
  if (o->kind == OP_SENDMSG || o->kind == OP_RECVMSG) {
    m = *o->msg;
    o->iov = m.msg_iov;
    o->iovcnt = (int)m.msg_iovlen;
  }
  size_t ctl_cap = o->kind == OP_RECVMSG ? m.msg_controllen : 0;
  ssize_t r;
  for (;;) {
    int last = 0;  /* a part that brought ancillary data ends a receive (below) */
    if (o->kind == OP_SENDMSG || o->kind == OP_RECVMSG) {
      m.msg_iov = (struct iovec *)o->iov;
      m.msg_iovlen = (size_t)o->iovcnt;
      op_t one = *o;
      one.msg = &m;
      r = op_run(&one, deadline);
      if (r >= 0 && o->kind == OP_RECVMSG) {
        /* the flags of every part; the sender's address is the first part's */
        o->msg->msg_flags = (done ? o->msg->msg_flags : 0) | m.msg_flags;
        if (done == 0) o->msg->msg_namelen = m.msg_namelen;
        /* Every part is offered the ancillary buffer until one brings ancillary data
         * (descriptors, credentials): that part is the last, as recvmsg(2) with
         * MSG_WAITALL stops after the bytes that carried descriptors. A later part
         * offered no buffer would have had its descriptors discarded by the kernel
         * (MSG_CTRUNC): a descriptor passed with the next message was lost. */
        if (m.msg_control) {
          o->msg->msg_controllen = m.msg_controllen;
          last = m.msg_controllen > 0;
          m.msg_controllen = ctl_cap;  /* the kernel wrote what it used */
        }
        /* descriptors that found no room (or no buffer at all) end it too */
        if (m.msg_flags & MSG_CTRUNC) last = 1;
      }
      if (r > 0 && o->kind == OP_SENDMSG) {
        m.msg_control = NULL;  /* ancillary data went with the first bytes */
        m.msg_controllen = 0;
      }
      if (r > 0 && o->kind == OP_RECVMSG) {
        m.msg_name = NULL;
        m.msg_namelen = 0;
      }
    } else {
      r = op_run(o, deadline);
    }
    if (r < 0) break;
    done += (size_t)r;
    if (done >= total || (r == 0 && !is_write(o->kind)) || (last && r > 0)) break;
    if (o->kind == OP_WRITEV || o->kind == OP_READV || o->kind == OP_SENDMSG || o->kind == OP_RECVMSG) {
      if (iov_skip(&own, &o->iov, &o->iovcnt, (size_t)r)) {
        r = fail(ENOMEM);
        break;
      }
    } else {
      o->buf = (char *)o->buf + r;
      o->len -= (size_t)r;
      if (o->kind == OP_PWRITE) o->off += r;
    }
  }
  free(own);
  if (done > 0) return (ssize_t)done;
  return r;
}

static ssize_t do_write(op_t *o, size_t total, uint64_t deadline) {
  if (o->kind >= OP_RECV && (o->flags & MSG_DONTWAIT)) return op_run(o, deadline);
  return op_all(o, total, deadline);  /* a plain OS thread's too: its descriptor may be
                                         non-blocking, or have a deadline */
}

ssize_t weft_read_deadline(int fd, void *buf, size_t count, uint64_t deadline) {
  op_t o = {.kind = OP_READ, .fd = fd, .buf = buf, .len = count};
  return op_run(&o, deadline);
}
/* The common case of weft_read without op_run's generality: a weft thread reading a
 * descriptor weft has already classified as a socket or as another descriptor it made
 * non-blocking (kind K_SOCK or K_OTHER; op_try's own calls for those kinds). Anything
 * else (a plain OS thread, a descriptor not seen yet, a regular file, no page of
 * records yet) takes the general path. Measured by I0 (bench/io/I0_read.c): a read
 * that completes at once cost 117 instructions against read(2)'s 17 through op_run. */
ssize_t weft_read(int fd, void *buf, size_t count) {
  if (WEFT__LIKELY(fd >= 0 && fd < IOD_PAGE * IOD_PAGES && count && here())) {
    /* acquire: pairs with iod_get's release publication of the page */
    iod_t *p = atomic_load_explicit(&io.pages[fd / IOD_PAGE], memory_order_acquire);
    if (WEFT__LIKELY(p != NULL)) {
      iod_t *d = &p[fd % IOD_PAGE];
      /* relaxed: as op_run reads them (gen before the try; kind is a cache) */
      uint32_t gen = atomic_load_explicit(&d->gen, memory_order_relaxed);
      int k = atomic_load_explicit(&d->kind, memory_order_relaxed);
      if (WEFT__LIKELY(k == K_SOCK || k == K_OTHER)) {
        ssize_t r = k == K_SOCK ? recv(fd, buf, count, MSG_DONTWAIT) : read(fd, buf, count);
        if (WEFT__LIKELY(r >= 0)) return r;
        int e = err_now();
        /* ENOTSOCK: the number was a socket and is now something else (closed with
         * close(2) and reused): op_try reclassifies it and reads it as such */
        if (WEFT__UNLIKELY(e == ENOTSOCK)) return weft_read_deadline(fd, buf, count, WEFT_FOREVER);
        if (e != EAGAIN && e != EWOULDBLOCK) return r;
        op_t o = {.kind = OP_READ, .fd = fd, .buf = buf, .len = count};
        return op_park(d, gen, &o, WEFT_FOREVER);
      }
    }
  }
  return weft_read_deadline(fd, buf, count, WEFT_FOREVER);
}

ssize_t weft_write_deadline(int fd, const void *buf, size_t count, uint64_t deadline) {
  op_t o = {.kind = OP_WRITE, .fd = fd, .buf = (void *)buf, .len = count};
  return do_write(&o, count, deadline);
}
ssize_t weft_write(int fd, const void *buf, size_t count) {
  return weft_write_deadline(fd, buf, count, WEFT_FOREVER);
}

/* readv's and writev's argument errors, in the order Linux checks them: the descriptor
 * (EBADF: not open, or not open for the direction), then the count (EINVAL), then the
 * array (EFAULT). Only on the failure path. */
static ssize_t iov_arg_error(int fd, int write, int iovcnt) {
  if (fd_closed_for(fd, write)) return fail(EBADF);
  if (iovcnt < 0 || iovcnt > IOV_MAX) return fail(EINVAL);
  return fail(EFAULT);
}

ssize_t weft_readv_deadline(int fd, const struct iovec *iov, int iovcnt, uint64_t deadline) {
  if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt > 0 && !iov)) return iov_arg_error(fd, 0, iovcnt);
  op_t o = {.kind = OP_READV, .fd = fd, .iov = iov, .iovcnt = iovcnt};
  return op_run(&o, deadline);
}
ssize_t weft_readv(int fd, const struct iovec *iov, int iovcnt) {
  return weft_readv_deadline(fd, iov, iovcnt, WEFT_FOREVER);
}

ssize_t weft_writev_deadline(int fd, const struct iovec *iov, int iovcnt, uint64_t deadline) {
  if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt > 0 && !iov)) return iov_arg_error(fd, 1, iovcnt);
  op_t o = {.kind = OP_WRITEV, .fd = fd, .iov = iov, .iovcnt = iovcnt};
  return do_write(&o, iov_total(iov, iovcnt), deadline);
}
ssize_t weft_writev(int fd, const struct iovec *iov, int iovcnt) {
  return weft_writev_deadline(fd, iov, iovcnt, WEFT_FOREVER);
}

ssize_t weft_pread_deadline(int fd, void *buf, size_t count, off_t offset, uint64_t deadline) {
  /* pread(2)'s EINVAL; io_uring would take -1 for "the file position" */
  if (offset < 0) return (int)fail(EINVAL);
  op_t o = {.kind = OP_PREAD, .fd = fd, .buf = buf, .len = count, .off = offset};
  return op_run(&o, deadline);
}
ssize_t weft_pread(int fd, void *buf, size_t count, off_t offset) {
  return weft_pread_deadline(fd, buf, count, offset, WEFT_FOREVER);
}

ssize_t weft_pwrite_deadline(int fd, const void *buf, size_t count, off_t offset, uint64_t deadline) {
  if (offset < 0) return (int)fail(EINVAL);  /* as weft_pread_deadline */
  op_t o = {.kind = OP_PWRITE, .fd = fd, .buf = (void *)buf, .len = count, .off = offset};
  return op_run(&o, deadline);
}
ssize_t weft_pwrite(int fd, const void *buf, size_t count, off_t offset) {
  return weft_pwrite_deadline(fd, buf, count, offset, WEFT_FOREVER);
}

/* Whether a MSG_WAITALL receive on fd gathers (op_all): only on a stream socket. On a
 * datagram or seqpacket socket recv(2) returns one message whatever the flag says, and
 * gathering would run messages together; a descriptor that is not a socket gets
 * ENOTSOCK from the single call. */
static int waitall_gathers(int fd, int flags) {
  if (!(flags & MSG_WAITALL) || (flags & (MSG_DONTWAIT | MSG_PEEK))) return 0;
  int type = 0;
  socklen_t len = sizeof type;
  return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

/* MSG_PEEK | MSG_WAITALL on a TCP socket: recv(2) waits there until `want` bytes are
 * queued (or end of stream, an error), and returns them left in place. (On other
 * sockets, AF_UNIX streams among them, recv(2) returns what is queued, as op_run.) */
static int peek_waits(int fd, int flags) {
  if ((flags & (MSG_PEEK | MSG_WAITALL | MSG_DONTWAIT)) != (MSG_PEEK | MSG_WAITALL) || !here())
    return 0;
  int type = 0, domain = 0;
  socklen_t len = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return 0;
  len = sizeof domain;
  return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 &&
         (domain == AF_INET || domain == AF_INET6);
}

/* The wait of peek_waits: a peek (parked until something is queued) until it sees want
 * bytes. Readiness cannot say "more than what is queued" (the socket stays readable
 * while the bytes sit there), so a short peek looks again after a pause (50 us,
 * doubling to 10 ms), until the deadline, which returns the bytes seen so far; end of
 * stream or an error (POLLRDHUP, POLLERR, POLLHUP) returns them too, as recv(2) does. */
static ssize_t peek_all(op_t *o, size_t want, uint64_t deadline) {
  uint64_t pause = 50000;
  iod_t *dd = iod_get(o->fd);
  if (!dd) return fail(ENOMEM);  /* peek_waits checked the descriptor */
  uint32_t gen = atomic_load_explicit(&dd->gen, memory_order_relaxed);
  for (;;) {
    ssize_t r = op_run(o, deadline);
    if (r <= 0 || (size_t)r >= want) return r;
    struct pollfd p = {.fd = o->fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) != 0) return r;  /* the peer is done (or an error): no more comes */
    uint64_t now = weft_time_now();
    if (deadline != WEFT_FOREVER && now >= deadline) return r;
    uint64_t d = pause;
    if (deadline != WEFT_FOREVER && deadline - now < d) d = deadline - now;
    int rc = iod_nap(dd, gen, now + d);
    if (rc == -EBADF) return fail(EBADF);  /* weft_close: nothing of a new descriptor */
    if (rc) (void)weft_sleep_ns(d);
    if (pause < 10000000) pause *= 2;
  }
}

ssize_t weft_recv_deadline(int fd, void *buf, size_t len, int flags, uint64_t deadline) {
  op_t o = {.kind = OP_RECV, .fd = fd, .buf = buf, .len = len, .flags = flags & ~MSG_WAITALL};
  if (waitall_gathers(fd, flags)) return op_all(&o, len, deadline);
  if (len > 0 && peek_waits(fd, flags)) return peek_all(&o, len, deadline);
  o.flags = flags;
  return op_run(&o, deadline);
}
ssize_t weft_recv(int fd, void *buf, size_t len, int flags) {
  return weft_recv_deadline(fd, buf, len, flags, WEFT_FOREVER);
}

ssize_t weft_send_deadline(int fd, const void *buf, size_t len, int flags, uint64_t deadline) {
  op_t o = {.kind = OP_SEND, .fd = fd, .buf = (void *)buf, .len = len, .flags = flags};
  return do_write(&o, len, deadline);
}
ssize_t weft_send(int fd, const void *buf, size_t len, int flags) {
  return weft_send_deadline(fd, buf, len, flags, WEFT_FOREVER);
}

ssize_t weft_recvmsg_deadline(int fd, struct msghdr *msg, int flags, uint64_t deadline) {
  op_t o = {.kind = OP_RECVMSG, .fd = fd, .msg = msg, .flags = flags};
  if (msg && msg->msg_iovlen <= IOV_MAX && waitall_gathers(fd, flags)) {
    o.flags = flags & ~MSG_WAITALL;
    return op_all(&o, iov_total(msg->msg_iov, (int)msg->msg_iovlen), deadline);
  }
  return op_run(&o, deadline);
}
ssize_t weft_recvmsg(int fd, struct msghdr *msg, int flags) {
  return weft_recvmsg_deadline(fd, msg, flags, WEFT_FOREVER);
}

ssize_t weft_sendmsg_deadline(int fd, const struct msghdr *msg, int flags, uint64_t deadline) {
  if (!msg) return (int)fail(EFAULT);
  if (msg->msg_iovlen > IOV_MAX) return (int)fail(EMSGSIZE);
  op_t o = {.kind = OP_SENDMSG, .fd = fd, .msg = (struct msghdr *)msg, .flags = flags};
  return do_write(&o, iov_total(msg->msg_iov, (int)msg->msg_iovlen), deadline);
}
ssize_t weft_sendmsg(int fd, const struct msghdr *msg, int flags) {
  return weft_sendmsg_deadline(fd, msg, flags, WEFT_FOREVER);
}

/* A descriptor number that now names a new file: forget what weft knew. */
static void iod_reset(int fd, int kind) {
  if (!here()) return;
  iod_t *d = iod_get(fd);
  if (!d) return;
  weft__qlock_lock(&d->lock);
  d->registered = 0;
  d->ready = 0;
  kind_set(d, kind);
  atomic_store_explicit(&d->listen_nb, 0, memory_order_relaxed);
  weft__spin_unlock(&d->lock);
}

int weft_accept_deadline(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags,
                         uint64_t deadline) {
  if (!here()) {
    if (fd < 0) return (int)fail(EBADF);  /* poll(2) would skip it and wait */
    if (stale_hit_fd(fd)) return (int)fail(EBADF);  /* wired, stale (weft_fd_spawn) */
    if (deadline != WEFT_FOREVER) {
      /* what accept(2) would answer at once, not a wait to the deadline for a
       * connection that cannot come: flags it does not know (EINVAL, checked first
       * as accept4 does), not a socket (ENOTSOCK), not a connection-based one
       * (EOPNOTSUPP), not listening (EINVAL) */
      if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) return (int)fail(EINVAL);
      int v = 0;
      socklen_t vl = sizeof v;
      if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &vl) != 0) return -1;
      if (v != SOCK_STREAM && v != SOCK_SEQPACKET) return (int)fail(EOPNOTSUPP);
      vl = sizeof v;
      if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) != 0) return -1;
      if (!v) return (int)fail(EINVAL);
      int rc = os_wait(fd, EPOLLIN, deadline);
      if (rc) return (int)fail(-rc);
    }
    /* a listener weft made non-blocking (for its own threads' accepts) answers EAGAIN
     * where the blocking accept waits: wait for the next connection as that would */
    for (;;) {
      int c = accept4(fd, addr, addrlen, flags);
      if (c >= 0 || (err_now() != EAGAIN && err_now() != EWOULDBLOCK)) return c;
      int rc = os_wait(fd, EPOLLIN, deadline);
      if (rc) return (int)fail(-rc);
    }
  }
  iod_t *d = iod_get(fd);
  if (!d) {
    return (int)fail(fd < 0 || fd >= IOD_PAGE * IOD_PAGES ? EBADF : ENOMEM);
  }
  if (stale_hit(d)) return (int)fail(EBADF);
  uint32_t gen = atomic_load_explicit(&d->gen, memory_order_relaxed);
  if (!atomic_load_explicit(&d->listen_nb, memory_order_relaxed)) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return -1;
    if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
    atomic_store_explicit(&d->listen_nb, 1, memory_order_relaxed);
  }
  for (;;) {
    int c = accept4(fd, addr, addrlen, flags);
    if (c >= 0) {
      iod_reset(c, K_SOCK);
      return c;
    }
    if (err_now() != EAGAIN && err_now() != EWOULDBLOCK) return -1;
    int rc = iod_wait(d, gen, EPOLLIN, deadline);
    if (rc) return (int)fail(-rc);
  }
}
int weft_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags) {
  return weft_accept_deadline(fd, addr, addrlen, flags, WEFT_FOREVER);
}

int weft_connect_deadline(int fd, const struct sockaddr *addr, socklen_t addrlen, uint64_t deadline) {
  int on_vp = here();
  if (stale_hit_fd(fd)) return (int)fail(EBADF);  /* a stale weft_fd_spawn thread's first call */
  if (!on_vp && deadline == WEFT_FOREVER) return connect(fd, addr, addrlen);
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0) return -1;
  if (fl & O_NONBLOCK) return connect(fd, addr, addrlen);
  if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
  int r = connect(fd, addr, addrlen), e = err_now();
  iod_t *nd = on_vp && r != 0 && e == EAGAIN ? iod_get(fd) : NULL;
  uint32_t ngen = nd ? atomic_load_explicit(&nd->gen, memory_order_relaxed) : 0;
  int closed = 0;
  /* A non-blocking AF_UNIX connect to a listener whose backlog is full fails with
   * EAGAIN where a blocking one waits for room; the kernel offers no readiness for
   * that to wait on, so the caller sleeps (parked, on a VP) and tries again, from
   * 50 us doubling to 10 ms between tries, until the deadline. */
  for (uint64_t pause = 50000; r != 0 && e == EAGAIN && addr && addr->sa_family == AF_UNIX;) {
    uint64_t now = weft__os_now_ns();
    if (now >= deadline) {
      e = ETIMEDOUT;
      break;
    }
    uint64_t until = deadline - now > pause ? now + pause : deadline;
    if (!on_vp) {
      weft__os_sleep_ns(until - now);
    } else if (nd) {
      /* queued on the descriptor: weft_close ends the wait with EBADF, before the
       * number can be taken by another descriptor and connected here */
      int rc = iod_nap(nd, ngen, until);
      if (rc == -EBADF) {
        e = EBADF;
        closed = 1;
        break;
      }
      if (rc) weft_yield();  /* no timer slot */
    } else if (weft_sleep_until(until) != 0) {
      weft_yield();  /* no timer slot */
    }
    if (pause < 10000000) pause *= 2;
    r = connect(fd, addr, addrlen);
    e = err_now();
  }
  if (!closed) (void)fcntl(fd, F_SETFL, fl);  /* (closed: the number may be another's) */
  if (r == 0) return 0;
  if (e != EINPROGRESS) {
    return (int)fail(e);
  }
  iod_t *d = on_vp ? iod_get(fd) : NULL;
  if (on_vp && !d) return (int)fail(ENOMEM);
  uint32_t gen = d ? atomic_load_explicit(&d->gen, memory_order_relaxed) : 0;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLOUT, .revents = 0};
    if (poll(&p, 1, 0) > 0) break;
    int rc = d ? iod_wait(d, gen, EPOLLOUT, deadline) : os_wait(fd, EPOLLOUT, deadline);
    if (rc) return (int)fail(-rc);
  }
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return -1;
  if (err) {
    return (int)fail(err);
  }
  /* Linux leaves a socket whose non-blocking connect completed in the connecting
   * state until connect(2) is called again (which then answers 0); so a later
   * weft_connect would answer 0 where connect(2) after a blocking connect answers
   * EISCONN. One more call moves it on, as the blocking call would have. */
  (void)connect(fd, addr, addrlen);
  return 0;
}
int weft_connect(int fd, const struct sockaddr *addr, socklen_t addrlen) {
  return weft_connect_deadline(fd, addr, addrlen, WEFT_FOREVER);
}

int weft_fd_wait_deadline(int fd, short events, uint64_t deadline) {
  uint32_t mode = (uint32_t)events & (POLLIN | POLLOUT | POLLPRI);
  if (!mode) return (int)fail(EINVAL);
  if (fd < 0) return (int)fail(EBADF);  /* poll(2) skips it: a plain OS thread waited */
  if (!here() && stale_hit_fd(fd)) return (int)fail(EBADF);  /* wired, stale (weft_fd_spawn) */
  iod_t *d = NULL;
  uint32_t gen = 0;
  if (here()) {
    if (!(d = iod_get(fd))) {
      /* past weft's table: poll's answer for a number that is not open (as a plain
       * OS thread gets it), else no record to park on */
      if (fd >= IOD_PAGE * IOD_PAGES) return fcntl(fd, F_GETFD) < 0 ? POLLNVAL : (int)fail(ENOMEM);
      return (int)fail(ENOMEM);
    }
    if (stale_hit(d)) return (int)fail(EBADF);
    gen = atomic_load_explicit(&d->gen, memory_order_relaxed);
  }
  for (;;) {
    struct pollfd p = {.fd = fd, .events = events, .revents = 0};
    int r = poll(&p, 1, 0);
    if (r > 0) return p.revents;
    if (r < 0 && err_now() != EINTR) return -1;
    int rc = d ? iod_wait(d, gen, mode, deadline) : os_wait(fd, mode, deadline);
    if (rc) return (int)fail(-rc);
  }
}
int weft_fd_wait(int fd, short events) { return weft_fd_wait_deadline(fd, events, WEFT_FOREVER); }

#ifdef WEFT_HAVE_URING
/* An open whose path walk needs no disk access (openat2 with RESOLVE_CACHED, Linux
 * 5.12), made on the VP: the descriptor, or -1 with errno. EAGAIN: the walk would
 * read the disk; EINVAL or ENOSYS may also mean a kernel without openat2 or
 * RESOLVE_CACHED (or flags openat2 rejects and openat ignores): the caller then asks
 * the ring, which answers with openat's own result. */
static int open_cached(int dirfd, const char *path, int flags, mode_t mode) {
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = (uint64_t)(unsigned)flags;
  how.mode = (flags & (O_CREAT | __O_TMPFILE)) ? mode : 0;  /* openat2 wants 0 otherwise */
  how.resolve = RESOLVE_CACHED;
  return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}
#endif

int weft_openat_deadline(int dirfd, const char *path, int flags, mode_t mode, uint64_t deadline) {
  int fd;
#ifdef WEFT_HAVE_URING
  if (ring_allowed()) {
    /* Without a deadline, first on the VP when the path walk is in the dentry cache
     * (the common case: as fast as openat, where a ring round trip cost about 3.5
     * times as much), with openat's own semantics: a FIFO without O_NONBLOCK waits for
     * its peer there, as under epoll (the monitor gives the VP a spare meanwhile).
     * With a deadline, always in the ring, which honours it (io.h: a deadline already
     * past fails before anything is done; a FIFO's wait for its peer is cancelled). */
    fd = -1;
    int e = EAGAIN;
    if (deadline == WEFT_FOREVER) {
      fd = open_cached(dirfd, path, flags, mode);
      if (fd < 0) e = err_now();
    }
    if (fd < 0 && (e == EAGAIN || e == EINVAL || e == ENOSYS)) {
      /* The walk reads the disk: the open parks in the ring. IOSQE_ASYNC sends it
       * straight to a kernel worker, which opens with openat's semantics; the ring's
       * first, inline try would add O_NONBLOCK, and a FIFO would then be opened
       * without waiting for its peer (for reading) or fail with ENXIO (for writing)
       * if its path became cached meanwhile. At the deadline the request is
       * cancelled; an open that completed anyway gives its descriptor (uring_call):
       * it is the caller's, never left open unseen. */
      vring_t *vr = vp_ring();
      if (vr) {
        struct io_uring_sqe t;
        io_uring_prep_openat(&t, dirfd, path, flags, mode);
        t.flags |= IOSQE_ASYNC;
        int r = uring_do(&t, deadline);
        if (r == -ECANCELED) fd = openat(dirfd, path, flags, mode);  /* dropped: directly */
        else fd = r >= 0 ? r : (int)fail(-r);
      } else {
        fd = openat(dirfd, path, flags, mode);  /* no ring to be had, as epoll */
      }
    }
  } else
#endif
    fd = openat(dirfd, path, flags, mode);
#ifndef WEFT_HAVE_URING
  (void)deadline;  /* epoll: the open is made directly (io.h) */
#endif
  if (fd >= 0) iod_reset(fd, K_UNKNOWN);
  return fd;
}

int weft_openat(int dirfd, const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | __O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  return weft_openat_deadline(dirfd, path, flags, mode, WEFT_FOREVER);
}

int weft_fsync_deadline(int fd, uint64_t deadline) {
  if (stale_hit_fd(fd)) return (int)fail(EBADF);
#ifdef WEFT_HAVE_URING
  vring_t *vr = vp_ring();
  if (vr) {
    struct io_uring_sqe t;
    io_uring_prep_fsync(&t, fd, 0);
    int r = uring_do(&t, deadline);
    if (r == -ECANCELED) return fsync(fd);  /* dropped by the kernel: directly */
    return r >= 0 ? r : (int)fail(-r);
  }
#else
  (void)deadline;
#endif
  return fsync(fd);
}

int weft_fsync(int fd) { return weft_fsync_deadline(fd, WEFT_FOREVER); }

int weft_close(int fd) {
  int gated = 0;
  if (!here()) {
    /* a plain OS thread wakes weft threads only inside the gate (weft_shutdown
     * must not free the records meanwhile); not running: just close */
    if (!weft_is_running() || weft__os_enter(WEFT__GATE_OTHER) != 0) return close(fd);
    gated = 1;
  }
  iod_t *d = (fd >= 0 && fd < IOD_PAGE * IOD_PAGES)
                 ? atomic_load_explicit(&io.pages[fd / IOD_PAGE], memory_order_acquire)
                 : NULL;
  weft__wakeset_t s;
  weft__wakeset_init(&s);
  if (d) {
    d = &d[fd % IOD_PAGE];
    /* a weft_fd_spawn thread's first call after a weft_close ended its wait (wired
     * or not; a plain OS thread is never one): the number may be another file's now,
     * which this must not close */
    if (stale_hit(d)) {
      if (gated) weft__os_leave(WEFT__GATE_OTHER);
      return (int)fail(EBADF);
    }
    weft__qlock_lock(&d->lock);
    iod_forget(d, &s);
    weft__spin_unlock(&d->lock);
  }
  /* The claimed waiters are made ready after the close: one that calls into fd again
   * at once (a weft_fd_spawn thread starts its function, which reads) must find it
   * closed. Made ready before, it found it open, parked on it anew, and nothing woke
   * it (the close had already passed). */
  /* The close drops the descriptor's epoll registration with the file (unless
   * another descriptor still refers to it: then its events come to this record
   * until that one is closed too, and make a later waiter here try once more). */
#ifdef WEFT_HAVE_URING
  vring_t *vr = gated ? NULL : vp_ring();
  if (vr) {  /* the close (a flush, on some file systems) parks */
    struct io_uring_sqe t;
    io_uring_prep_close(&t, fd);
    int r = uring_do(&t, WEFT_FOREVER);
    if (r == -ECANCELED) {  /* dropped by the kernel: still open, closed directly */
      r = close(fd);
      if (r < 0) r = -err_now();
    }
    weft__wakeset_run(&s);
    return r >= 0 ? r : (int)fail(-r);
  }
#endif
  int r = close(fd), e = r < 0 ? err_now() : 0;
  weft__wakeset_run(&s);
  if (gated) weft__os_leave(WEFT__GATE_OTHER);
  return r < 0 ? (int)fail(e) : r;
}
