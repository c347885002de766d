/* src/core/monitor.c - the system monitor: unannounced blocking calls degrade, they
 * do not stall (docs/design.md "The system monitor").
 *
 * A weft thread that makes a blocking kernel call weft was not told of (a plain
 * read(2), sleep(), a blocking library call) keeps its VP's kernel thread asleep in
 * the kernel, and every ready thread in that VP's dispatch queue waits. The monitor
 * is a kernel thread that looks at the VPs every half bound while some VP has ready
 * threads queued. A VP is stalled when, between two looks,
 *   - it is not parked in its idle loop (vp->park 0),
 *   - its dispatch queue kept the same front thread (none ran from it),
 *   - its kernel thread used less than half the time in CPU (clock of the thread),
 *   - and its kernel thread sleeps in the kernel now (state S or D in
 *     /proc/self/task/TID/stat): a kernel thread the OS merely preempted is runnable.
 * The hot paths pay nothing: the front of the queue is already an atomic (idle
 * pollers read it), the rest comes from the kernel. A thread that computes for long
 * without coming back to the scheduler keeps its CPU busy and is not a stall: weft
 * does not preempt, and a spare then would run more kernel threads than VPs.
 *
 * A stalled VP gets a spare VP: one of the slots weft_init reserved behind the VPs
 * (rt.vps[nvps + k]), with its own caches, timer heap, counters and idle context,
 * run by a kernel thread the monitor starts for it. The spare takes ready threads
 * from the front of the stalled VP's queue (under its lock, as a thief) one at a
 * time and runs them; threads they create or wake go to the spare's own queue, as on
 * any VP. When the stalled VP's kernel thread uses its CPU again (the call returned)
 * or parks, the monitor ends the stall: it stops the spare's taking, moves whatever
 * the spare has queued back to the VP, and the spare's kernel thread exits once its
 * running thread comes back to it. An idle regular VP steals from a spare's queue
 * as from any VP's (idle.c, steal_from_spares): a thread queued on a spare after the
 * stall ended, behind a running thread that does not come back soon, is not
 * stranded. A spare is watched like any VP; when its own thread blocks, the
 * threads queued behind it go back to the VP it stands in for if that one is idle
 * (parked: its steals would find them only once woken), else another spare stands
 * in for the spare. Meanwhile the kernel thread that returned from
 * its call runs its thread on, next to the spare: for that moment up to nvps plus
 * the running spares run weft threads (docs/design.md says why no hand-back is
 * possible without telling weft of the call).
 *
 * Nothing else ever puts a thread on a spare's queue: placement (affinity, round
 * robin for plain OS threads) names VPs below nvps, timers and I/O completions make
 * threads ready on the VP that fires or reaps them.
 *
 * Timers. A VP checks its own heap at its switches, and an idle VP every heap (the
 * spares' too: timer.c loops over rt.nvps_all). That leaves two kinds of heap that
 * nobody checks while no VP is idle: a spare's after its kernel thread has gone (or
 * while it waits for work), and the heap of a VP whose kernel thread sleeps in an
 * unannounced call: with one VP, a thread that sleeps with weft_sleep_ns and would
 * then end the call never woke (the stall needs a ready thread queued to be seen, and
 * only a fired timer would queue one). So the monitor fires every heap's due timers
 * at each look (weft__timers_poll_all); it looks at least every MON_SLOW_IO_NS while
 * some VP is awake and such a heap holds timers (slow_cap), and while none is, the idle VPs' sleeps are bounded by every
 * heap's earliest deadline. A timer that its own VP has not fired by the monitor's
 * look belongs to a VP that has not switched since the deadline. The threads the
 * monitor wakes are placed as a plain OS thread's wake-ups are (round robin over the
 * VPs; one queued on a stalled VP is taken by its spare).
 *
 * I/O. Readiness is noticed by the VP that holds the poller role (an idle VP waiting
 * in the engine) or by VPs polling in their idle loop. With no VP idle (every VP busy,
 * or the only VP's kernel thread asleep in an unannounced call: a server whose main
 * thread waits in pthread_join while its connection threads are parked in weft_read
 * with data waiting), nobody did, and with one VP such a program hung. So at each
 * look, when threads wait on I/O and no VP holds the role, the monitor makes one poll
 * that does not wait (weft__io_poll_monitor), as Go's sysmon polls the network when
 * no P has for a while. It holds the role only for that poll: a thread that parks
 * meanwhile does not wake a sleeping VP to become the poller (io.c, kick), and is
 * seen at the monitor's next look, or by the next VP to go idle; a VP that goes to
 * sleep meanwhile finds the role taken and sleeps on its futex, so after its poll the
 * monitor wakes a sleeping VP when threads still wait and the role is free (else, with
 * every VP asleep, nobody would poll: a test of threads waiting on another process's
 * write hung once in about 1,800 tests before it did).
 *
 * The live count and the statistics count the spares' counters (stats.c).
 *
 * The monitor sleeps on its futex while no VP is awake (every VP parked and no spare
 * running); a VP that leaves its idle loop to run a thread kicks it (idle.c). It looks
 * every half bound while some awake regular VP's kernel thread hardly used its CPU
 * since the last look (it may sleep in a call: a thread queued on it must be seen
 * within the bound), or a VP is stalled. A spare whose kernel thread sleeps in a call
 * with nothing queued is not watched so: nothing is queued on a spare but by the spare
 * itself or by the monitor (the monitor's wake-ups every half bound kept the other
 * CPU from looking idle to the kernel, which then left two busy VPs sharing one CPU
 * for tens of milliseconds: row I3, "unannounced", took twice as long in some runs).
 * While every awake VP runs (threads queued or not), the period doubles after
 * MON_CALM_LOOKS looks that found nothing, up to MON_SLOW_NS (10 ms, 1 ms while
 * threads wait on I/O or a spare's or a stalled VP's heap holds timers: slow_cap),
 * as Go's system monitor backs off: a look every half bound costs a wake-up of the
 * monitor and a read of each busy VP's CPU clock, which took 18% of a CPU while two
 * threads yielded to each other. A VP that then blocks is seen at the first look
 * after (its CPU time over the last period tells, or, when the call began late in
 * the period, its kernel thread asleep in the kernel with threads queued: mon.confirm
 * then brings the next look after half the bound), and watched at half the bound
 * from there. A stalled VP that a spare stands in for counts as running too, and the
 * period backs off at once (no calm stretch first): the monitor fires the stalled
 * VP's timers (within slow_cap's 1 ms) and polls for I/O as it does while every VP
 * runs. Watched at half the bound for as long as the stall lasted, the monitor's
 * looks (a read of each VP's CPU clock, and of the stalled thread's state) took about
 * a sixth of a CPU from the spare and the other VPs; kept within 8 bounds, they still
 * cost the threads that ran about an eighth of their throughput (row I3,
 * "unannounced", measured against this back-off in one sitting).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/monitor.h"
#include "io/io.h"
#include "weft/hook.h"

#define MON_DEFAULT_US 20
#define MON_SLOW_NS 10000000u     /* longest period while every awake VP runs, as Go's
                                     sysmon's; MON_SLOW_IO_NS while the monitor's polls
                                     may be the only ones (slow_cap) */
#define MON_SLOW_IO_NS 1000000u
#define MON_CALM_LOOKS 50         /* looks that found nothing before the period doubles */
#define MON_MAX_SPARES 64

enum { SP_FREE = 0, SP_RUNNING = 1, SP_DONE = 2 };

/* What the monitor knows of one VP slot (regular or spare). tid and clock are
 * written by the VP's kernel thread (clock first, tid released); the rest is the
 * monitor's own. */
typedef struct mon_vp {
  _Atomic int tid;              /* kernel thread id; 0: none (yet) */
  _Atomic clockid_t clock;      /* its CPU-time clock */
  weft_thread_t *last_head;     /* the front of its queue at the last look */
  uint64_t last_cpu;            /* its CPU time at the last read; 0: not read */
  uint64_t last_ns;             /* when that was read */
  int quiet;                    /* its CPU time hardly moved over the last read */
  int stalled;                  /* from detection until its kernel thread runs again */
  int helper;                   /* the spare slot helping it, or -1 */
  uint64_t head_since;          /* when last_head became the front of its queue */
  int stat_tid;                 /* the kernel thread stat_fd reads; 0: none open */
  int stat_fd;                  /* /proc/self/task/stat_tid/stat, kept open */
  uint64_t nospare_since;       /* stalled, and no spare could be had since then; 0: not */
} mon_vp_t;

/* A spare slot. state: the monitor sets RUNNING before it starts the kernel thread,
 * which stores DONE (release) as its last act; the monitor loads DONE (acquire),
 * joins, and sets FREE. target: the VP it stands in for, written before the start.
 * take: 1 while the target is stalled (monitor writes, the spare reads; its futex:
 * the monitor wakes the spare when it clears it). */
typedef struct spare {
  _Atomic int state;
  _Atomic int target;
  _Atomic uint32_t take;
  /* 1 once the spare has found its queue empty for the last time: set and read
   * under the spare's queue lock (relaxed: the lock orders it), so that no thread
   * is moved onto the queue of a spare that will not run it */
  _Atomic int closed;
  pthread_t kt;
} spare_t;

static struct {
  int on;
  uint64_t bound_ns;
  int nvps, nspares;
  mon_vp_t *vps;                /* nvps + nspares */
  int fd_floor;                 /* the stat files are moved to this number or above; 0: not */
  spare_t *spares;              /* nspares */
  int started;
  pthread_t kt;
  _Atomic int stop;
  _Atomic uint64_t n_stalls, n_started;
  int served;                   /* the last look found a stalled VP with a spare
                                   standing in for it (monitor thread only) */
  int confirm;                  /* the last look, in the slow mode, found a VP that
                                   ran but whose kernel thread sleeps in the kernel
                                   now with threads queued: look again after half
                                   the bound (monitor thread only) */
  _Atomic uint64_t period_ns;   /* the period in force, for weft_monitor_info (relaxed:
                                   a snapshot) */
  int said_full;                /* the no-spare message was printed (once per weft_init) */
} mon;

_Atomic uint32_t weft__monitor_deep;

/* ---- the stat reader: /proc reads in a descriptor table of its own ----------------
 * The monitor reads /proc/self/task/TID/stat to tell a VP's kernel thread asleep in a
 * call from one only kept off its CPU, and the deadlock check reads /proc/self/stat
 * for the number of kernel threads. An open takes the lowest free number of the
 * descriptor table, at once and for as long as the file is open (moving it higher
 * with F_DUPFD still takes the low one for a moment), and a program that closes a
 * number while its other threads still read it (a race POSIX allows: those reads fail
 * with EBADF) then had its reads served by the monitor's file: weft_pread after a
 * weft_close read a spare's stat file, and failed with ESRCH once that kernel thread
 * had gone (1 run in about 1,000 of a test, under load). So one kernel thread, started
 * with the monitor's state, unshares its descriptor table and closes every inherited
 * descriptor in one call (close_range with CLOSE_RANGE_UNSHARE, Linux 5.9), blocks
 * every signal (a handler run there would not find the program's descriptors), and
 * makes every such read on request. Where that call fails the reads are made in
 * place, as before (the numbers moved above fd_floor). Requests are made one at a
 * time under rd.mu; the words: the client stores the request, then req (release);
 * the reader loads req (acquire), answers into result, then ack (release); the
 * client loads ack (acquire) and reads result. A client waits a bounded time: the
 * monitor takes "not asleep" and looks again, the deadlock check reports nothing. */
#ifndef SYS_close_range
#define SYS_close_range 436 /* the same number on every architecture */
#endif
#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif
enum { RD_SLEEPS = 1, RD_COUNT = 2, RD_COUNT_OWN = 3 };
static struct {
  int on;                       /* the reader runs with a table of its own */
  pthread_t kt;
  pthread_mutex_t mu;           /* one request at a time */
  _Atomic uint32_t state;       /* futex: 0 starting, 1 on, 2 failed (its start) */
  _Atomic uint32_t req, ack;    /* futex words: requests made, requests answered */
  _Atomic int stop;
  _Atomic int kind, slot, tid;  /* the request (relaxed: ordered by req) */
  _Atomic long result;          /* the answer (relaxed: ordered by ack) */
  int ktid;                     /* its kernel thread id (written before state's release) */
} rd = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int stat_says_sleeps(const char *buf);

/* In the reader: whether slot's kernel thread tid sleeps in the kernel. Its stat file
 * stays open (in the reader's table) while the slot's kernel thread is the same: a
 * pread at offset 0 renders it anew. Raw system calls: a sanitizer's descriptor
 * bookkeeping is the program's table, not this one. */
/* Closes every stat file the reader keeps open: its table is bound by RLIMIT_NOFILE
 * too, and with a low limit and many VPs the kept files took every number (the
 * deadlock check's count then failed for good). Opened again when next needed. */
static void rd_drop_cached(void) {
  for (int i = 0; i < mon.nvps + mon.nspares; i++)
    if (mon.vps[i].stat_tid) {
      (void)syscall(SYS_close, mon.vps[i].stat_fd);
      mon.vps[i].stat_tid = 0;
    }
}

static long rd_sleeps(int slot, int tid) {
  mon_vp_t *m = &mon.vps[slot];
  if (m->stat_tid != tid) {
    if (m->stat_tid) (void)syscall(SYS_close, m->stat_fd);
    m->stat_tid = 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {  /* no number left: make room */
      rd_drop_cached();
      fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) return 0;
    m->stat_fd = fd;
    m->stat_tid = tid;
  }
  char buf[512];
  long n = syscall(SYS_pread64, m->stat_fd, buf, sizeof buf - 1, (off_t)0);
  if (n <= 0) return 0;  /* ESRCH: the kernel thread has exited */
  buf[n] = '\0';
  return stat_says_sleeps(buf);
}

static long rd_count(int own) {
  long k = own ? weft__count_kthreads_own_raw() : weft__count_kthreads_raw();
  if (k < 0) {  /* perhaps no number left for the files it reads: make room */
    rd_drop_cached();
    k = own ? weft__count_kthreads_own_raw() : weft__count_kthreads_raw();
  }
  return k;
}

static void *stat_reader(void *unused) {
  (void)unused;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  pthread_setname_np(pthread_self(), "weft-stat");
  rd.ktid = (int)syscall(SYS_gettid);
  int ok = syscall(SYS_close_range, 0u, ~0u, CLOSE_RANGE_UNSHARE) == 0;
  /* release: the starter's acquire load (rd.on is set from it) */
  atomic_store_explicit(&rd.state, ok ? 1u : 2u, memory_order_release);
  weft__os_futex_wake(&rd.state, 1);
  if (!ok) return NULL;
  uint32_t seen = 0;
  for (;;) {
    /* acquire: pairs with the client's release store of req (the request fields) or
     * the stopper's increment (stop) */
    uint32_t r = atomic_load_explicit(&rd.req, memory_order_acquire);
    if (atomic_load_explicit(&rd.stop, memory_order_relaxed)) break;
    if (r == seen) {
      weft__os_futex_wait(&rd.req, seen);
      continue;
    }
    seen = r;
    int kind = atomic_load_explicit(&rd.kind, memory_order_relaxed);
    long res = kind == RD_COUNT || kind == RD_COUNT_OWN ? rd_count(kind == RD_COUNT_OWN)
                                : rd_sleeps(atomic_load_explicit(&rd.slot, memory_order_relaxed),
                                            atomic_load_explicit(&rd.tid, memory_order_relaxed));
    atomic_store_explicit(&rd.result, res, memory_order_relaxed);
    /* release: the result to the client's acquire load of ack */
    atomic_store_explicit(&rd.ack, r, memory_order_release);
    weft__os_futex_wake(&rd.ack, 1);
  }
  return NULL;  /* its table, and the stat files in it, go with the thread */
}

/* Starts the reader (weft__monitor_init, before any VP starts: a VP's stat file is
 * then opened in the reader's table); rd.on says whether it serves. */
static void rd_start(void) {
  atomic_store_explicit(&rd.state, 0, memory_order_relaxed);
  atomic_store_explicit(&rd.stop, 0, memory_order_relaxed);
  atomic_store_explicit(&rd.req, 0, memory_order_relaxed);
  atomic_store_explicit(&rd.ack, 0, memory_order_relaxed);
  if (pthread_create(&rd.kt, NULL, stat_reader, NULL) != 0) return;
  uint32_t st;
  /* acquire: pairs with the reader's release store of its state */
  while ((st = atomic_load_explicit(&rd.state, memory_order_acquire)) == 0)
    weft__os_futex_wait(&rd.state, 0);
  if (st == 1) {
    rd.on = 1;
  } else {
    pthread_join(rd.kt, NULL);
  }
}

static void rd_stop(void) {
  if (!rd.on) return;
  atomic_store_explicit(&rd.stop, 1, memory_order_relaxed);
  /* release: the reader's acquire load of req then sees stop */
  atomic_fetch_add_explicit(&rd.req, 1, memory_order_release);
  weft__os_futex_wake(&rd.req, 1);
  pthread_join(rd.kt, NULL);
  /* pthread_join returns once the thread's tid word is cleared, but its task stays in
   * /proc/self/task a little longer (0.7-3.8 ms measured, while teardown unmaps): a
   * weft_init right after this weft_shutdown counted it as a kernel thread that existed
   * before weft, and kept its deadlock report off for the whole run (a real deadlock
   * hung in 14 of 200 runs). Wait, bounded, until the task is gone. */
  pid_t pid = getpid();
  for (int i = 0; i < 1000 && syscall(SYS_tgkill, pid, rd.ktid, 0) == 0; i++) weft__os_sleep_ns(100000);
  rd.on = 0;
}

/* One request, waiting up to wait_ns: 1 and *out, or 0 if no answer came in time. */
static int rd_call(int kind, int slot, int tid, uint64_t wait_ns, long *out) {
  pthread_mutex_lock(&rd.mu);
  atomic_store_explicit(&rd.kind, kind, memory_order_relaxed);
  atomic_store_explicit(&rd.slot, slot, memory_order_relaxed);
  atomic_store_explicit(&rd.tid, tid, memory_order_relaxed);
  uint32_t r = atomic_load_explicit(&rd.req, memory_order_relaxed) + 1;
  /* release: the request fields to the reader's acquire load (only clients, under
   * mu, store req while the reader runs) */
  atomic_store_explicit(&rd.req, r, memory_order_release);
  weft__os_futex_wake(&rd.req, 1);
  uint64_t until = weft__os_now_ns() + wait_ns;
  int got = 1;
  uint32_t a;
  /* acquire: pairs with the reader's release store of ack (the result) */
  while ((a = atomic_load_explicit(&rd.ack, memory_order_acquire)) != r) {
    if (weft__os_now_ns() >= until) {
      got = 0;
      break;
    }
    weft__os_futex_wait_until(&rd.ack, a, until);
  }
  if (got) *out = atomic_load_explicit(&rd.result, memory_order_relaxed);
  pthread_mutex_unlock(&rd.mu);
  return got;
}

int weft__monitor_count_kthreads(long *k, int own) {
  if (!rd.on) return 0;
  /* a late answer reports nothing now (-1); the last VP to sleep checks again when it
   * next sleeps */
  if (!rd_call(own ? RD_COUNT_OWN : RD_COUNT, 0, 0, 2000000000u, k)) *k = -1;
  return 1;
}

/* ---- configuration ------------------------------------------------------------------ */

/* The bound in microseconds for cfg and the environment (WEFT_MONITOR=off or 0: no
 * monitor; WEFT_MONITOR=<us>: the bound), or 0 for none. */
static long bound_us(const weft_config_t *cfg, int say) {
  long us = cfg->monitor_us == WEFT_MONITOR_OFF ? 0
            : cfg->monitor_us > 0              ? cfg->monitor_us
                                               : MON_DEFAULT_US;
  const char *e = getenv("WEFT_MONITOR");
  if (e && *e) {
    if (!strcmp(e, "off")) return 0;
    char *end;
    long v = strtol(e, &end, 10);
    if (end != e && *end == '\0' && v >= 0 && v <= 1000000) us = v;
    else if (say)  /* as WEFT_TRACE_CAPACITY: say so (once per weft_init), not ignore it unseen */
      fprintf(stderr, "weft: WEFT_MONITOR=%s is not \"off\" or a bound in microseconds "
                      "(0..1000000): ignored\n", e);
  }
  return us;
}

int weft__monitor_spares(const weft_config_t *cfg) {
  if (!bound_us(cfg, 0)) return 0;
  /* one per VP, and a few for spares whose own thread blocks too */
  int n = cfg->nvps + 3;
  return n < MON_MAX_SPARES ? n : MON_MAX_SPARES;
}

int weft__monitor_init(int nspares) {
  memset(&mon, 0, sizeof mon);
  atomic_store_explicit(&weft__monitor_deep, 0, memory_order_relaxed);
  /* the deadlock check reads /proc/self/stat with the monitor off too */
  rd_start();
  long us = bound_us(&weft__rt.cfg, 1);
  if (!us || !nspares) return 0;
  mon.bound_ns = (uint64_t)us * 1000u;
  mon.nvps = weft__rt.nvps;
  mon.nspares = nspares;
  mon.vps = weft__sys_calloc((size_t)(mon.nvps + nspares), sizeof *mon.vps);
  mon.spares = weft__sys_calloc((size_t)nspares, sizeof *mon.spares);
  if (!mon.vps || !mon.spares) {
    weft__monitor_free();
    return WEFT_ENOMEM;
  }
  for (int i = 0; i < mon.nvps + nspares; i++) mon.vps[i].helper = -1;
  /* half the soft descriptor limit: a program's own numbers grow from 0 */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= 128)
    mon.fd_floor = (int)(rl.rlim_cur / 2 > 65536 ? 65536 : rl.rlim_cur / 2);
  mon.on = 1;
  return 0;
}

void weft__monitor_free(void) {
  int own = !rd.on;  /* the reader's files are in its table, closed when it exits */
  rd_stop();
  if (mon.vps && own)
    for (int i = 0; i < mon.nvps + mon.nspares; i++)
      if (mon.vps[i].stat_tid) close(mon.vps[i].stat_fd);
  weft__sys_free(mon.vps);
  weft__sys_free(mon.spares);
  memset(&mon, 0, sizeof mon);
}

static int stat_open(int tid);

void weft__monitor_vp_start(weft_vp_t *vp) {
  if (!mon.on) return;
  mon_vp_t *m = &mon.vps[vp->index];
  clockid_t c;
  if (pthread_getcpuclockid(pthread_self(), &c) != 0) return;  /* never watched */
  atomic_store_explicit(&m->clock, c, memory_order_relaxed);
  int tid = (int)syscall(SYS_gettid);
  /* A regular VP's stat file is opened here, inside weft_init, not at the monitor's
   * first close look at it: even an open moved at once above mon.fd_floor takes the
   * lowest free number for a moment, and at a random time while the program runs that
   * can be one the program has just closed while another of its threads still reads
   * it (a weft_fd_spawn thread started by weft_close read the first byte of a stat
   * file once, in a test). Its kernel thread stays the slot's until shutdown (the
   * monitor closes the file then). A spare's slot changes kernel threads: its file
   * is opened at the first close look, as before. */
  if (vp->index < mon.nvps && !m->stat_tid && !rd.on) {
    int fd = stat_open(tid);
    if (fd >= 0) {
      m->stat_fd = fd;
      m->stat_tid = tid;  /* published with tid below */
    }
  }
  /* release: pairs with the monitor's acquire load of tid; clock (and the stat file)
   * are read after it */
  atomic_store_explicit(&m->tid, tid, memory_order_release);
}

int weft__vp_public_index(const weft_vp_t *vp) {
  int i = vp->index;
  /* relaxed: a spare's target is written before its kernel thread is started
   * (pthread_create orders it), and only that thread runs threads on the spare; a
   * spare may stand in for a spare: follow the chain (at most nspares long) */
  for (int n = 0; i >= weft__rt.nvps && n <= mon.nspares; n++)
    i = atomic_load_explicit(&mon.spares[i - weft__rt.nvps].target, memory_order_relaxed);
  return i < weft__rt.nvps ? i : 0;
}

int weft__monitor_busy(void) {
  for (int k = 0; k < mon.nspares; k++)
    if (atomic_load_explicit(&mon.spares[k].state, memory_order_acquire) != SP_FREE) return 1;
  return 0;
}

/* ---- the spare VP ------------------------------------------------------------------- */

/* The front of v's queue if it is a root-bundle thread (a custom scheduler's thread
 * keeps to its VPs: its scheduler indexes its state by VP), else NULL. */
static weft_thread_t *take_front(weft_vp_t *v) {
  if (!atomic_load_explicit(&v->q.head, memory_order_relaxed)) return NULL;
  weft__spin_lock(&v->q.lock);
  /* relaxed: ordered by the queue lock (the atomic serves unlocked hint reads) */
  weft_thread_t *t = atomic_load_explicit(&v->q.head, memory_order_relaxed);
  if (t && !(weft__tflags(t) & WEFT__TF_CUSTOM)) {
    weft_thread_t *n = t->next;
    atomic_store_explicit(&v->q.head, n, memory_order_relaxed);
    if (!n) v->q.tail = NULL;
  } else {
    t = NULL;
  }
  weft__spin_unlock(&v->q.lock);
  return t;
}

weft_thread_t *weft__monitor_spare_take(weft_vp_t *s) {
  int k = s->index - mon.nvps;
  if (!mon.on || k < 0 || k >= mon.nspares) return NULL;
  spare_t *sp = &mon.spares[k];
  /* acquire: as spare_main's load (the monitor's release store of 0) */
  if (!atomic_load_explicit(&sp->take, memory_order_acquire)) return NULL;
  weft_vp_t *target = weft__rt.vps[atomic_load_explicit(&sp->target, memory_order_relaxed)];
  weft_thread_t *t = take_front(target);
  if (t) weft_sched_steal_note(target, 1, t);
  return t;
}

static void *spare_main(void *p) {
  int k = (int)(intptr_t)p;
  pthread_setname_np(pthread_self(), "weft-spare");
  spare_t *sp = &mon.spares[k];
  weft_vp_t *s = weft__rt.vps[mon.nvps + k];
  weft_vp_t *target = weft__rt.vps[atomic_load_explicit(&sp->target, memory_order_relaxed)];
  weft__tls_vp = s;
  /* with cfg.pin, VP i runs on CPU i mod ncpus (weft/runtime.h): so does a spare
   * standing in for it, whose threads see weft_vp_self() == i */
  if (weft__rt.cfg.pin) weft__os_pin(weft__vp_public_index(s) % weft__os_ncpus());
  /* the overflow report's signal stack: allocated at the slot's first use, kept
   * with the slot (freed at teardown with the VP) */
  int alt = s->altstack != NULL || weft__altstack_alloc(s) == 0;
  if (alt) weft__altstack_enter(s);
  weft__ctx_init_self(&s->idle_ctx, s->ctx_storage);
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
  weft__san_init_self(&s->idle_ctx);
#endif
  weft__monitor_vp_start(s);
  for (;;) {
    weft_thread_t *t = weft__dequeue(s);
    /* acquire: pairs with the monitor's release store of 0 (the threads it moved
     * back to the target are then off our queue) */
    uint32_t take = atomic_load_explicit(&sp->take, memory_order_acquire);
    if (!t && take) {
      t = take_front(target);
      if (t) weft_sched_steal_note(target, 1, t);
    }
    if (!t) {
      if (!take || atomic_load_explicit(&weft__rt.stopping, memory_order_acquire)) {
        /* close, if the queue is still empty: the monitor may have moved threads
         * here meanwhile (move_queue looks at closed under the same lock) */
        weft__spin_lock(&s->q.lock);
        int empty = atomic_load_explicit(&s->q.head, memory_order_relaxed) == NULL;
        if (empty) atomic_store_explicit(&sp->closed, 1, memory_order_relaxed);
        weft__spin_unlock(&s->q.lock);
        if (empty) break;
        continue;
      }
      /* the target is still stalled, with nothing queued: wait for it to get work
       * or for the monitor to end the stall; meanwhile what this spare cached is
       * the pool's (the caches stay bounded by the VPs that run) */
      if (s->tcb_free || s->stk_free) weft__vp_caches_to_pool(s);
      weft__os_futex_wait_until(&sp->take, 1, weft__os_now_ns() + mon.bound_ns / 2);
      continue;
    }
    weft__prepare(s, &t);
    if (!t) continue;  /* no stack: it waits on rt.nostack */
    s->current = t;
#ifdef WEFT_HOOKS
    if (WEFT__UNLIKELY(weft__tflags(t) & WEFT__TF_HOOK)) weft__hook_raise(WEFT_HOOK_RESTORE, t, NULL);
#endif
    weft__switch(&s->idle_ctx, &t->ctx, NULL, NULL);
    s->current = NULL;
    if (atomic_load_explicit(&s->tm.n, memory_order_relaxed)) weft__timers_check(s);
  }
  /* what this spare cached goes to the pool: the caches stay bounded by the VPs
   * that run (nvps * 2T + G) */
  weft__vp_caches_to_pool(s);
  weft__create_grant_release(s);  /* nor does it keep a batch of creations */
  if (alt) weft__altstack_leave();
  weft__tls_vp = NULL;
  atomic_store_explicit(&mon.vps[mon.nvps + k].tid, 0, memory_order_relaxed);
  /* release: the monitor's acquire load of DONE sees all the spare did */
  atomic_store_explicit(&sp->state, SP_DONE, memory_order_release);
  return NULL;
}

static int spare_start(int i);

/* A spare for the stalled VP i, as spare_start. When none could be had for 100 ms
 * (every slot stands in for a VP or spare whose thread sleeps in a call, or no kernel
 * thread could be started), the threads queued on i wait until one of those calls
 * returns, which may be never: say so once, on stderr, rather than hang unexplained
 * (six threads on one VP that each loop on usleep() hold the VP and its four slots). */
static void spare_needed(int i, uint64_t now) {
  mon_vp_t *m = &mon.vps[i];
  if (spare_start(i)) {
    m->nospare_since = 0;
    return;
  }
  if (!m->nospare_since) {
    m->nospare_since = now;
  } else if (!mon.said_full && now - m->nospare_since >= 100000000u) {
    mon.said_full = 1;
    fprintf(stderr,
            "weft: the system monitor has had no spare VP for VP %d for 100 ms (all %d "
            "slots stand in for VPs whose threads sleep in calls weft was not told of, or "
            "no kernel thread could be started): the threads queued there wait until one "
            "of those calls returns. Make such calls through weft/io.h, weft_blocking() "
            "or weft_wire() (docs/limits.md).\n",
            weft__vp_public_index(weft__rt.vps[i]), mon.nspares);
  }
}

/* Starts a spare for the stalled VP i; 0 if none is free or it cannot start (the
 * next look tries again). */
static int spare_start(int i) {
  for (int k = 0; k < mon.nspares; k++) {
    spare_t *sp = &mon.spares[k];
    if (atomic_load_explicit(&sp->state, memory_order_relaxed) != SP_FREE) continue;
    atomic_store_explicit(&sp->target, i, memory_order_relaxed);
    atomic_store_explicit(&sp->take, 1, memory_order_relaxed);
    atomic_store_explicit(&sp->closed, 0, memory_order_relaxed);
    atomic_store_explicit(&sp->state, SP_RUNNING, memory_order_relaxed);
    /* everything above happens-before the spare (pthread_create) */
    if (pthread_create(&sp->kt, NULL, spare_main, (void *)(intptr_t)k) != 0) {
      atomic_store_explicit(&sp->state, SP_FREE, memory_order_relaxed);
      return 0;
    }
    mon.vps[i].helper = k;
    atomic_fetch_add_explicit(&mon.n_started, 1, memory_order_relaxed);
    return 1;
  }
  return 0;
}

/* Moves every thread queued on s to the back of v's queue (of the VP a closed
 * spare v stood in for), in order, holding both queue locks (s's, then v's: only the monitor nests them, so the order cannot
 * deadlock). Atomic to anyone who looks at v's queue under its lock: the deadlock
 * check (deadlock.c) looks at the regular VPs' queues and counts kernel threads; a
 * spare's kernel thread exits only with its queue empty, so a thread is always in
 * a queue that check sees, or in the queue of a spare that still runs. */
static void move_queue(weft_vp_t *s, weft_vp_t *v) {
  if (!atomic_load_explicit(&s->q.head, memory_order_relaxed)) return;
  weft__spin_lock(&s->q.lock);
  weft_thread_t *first = atomic_load_explicit(&s->q.head, memory_order_relaxed);
  if (!first) {
    weft__spin_unlock(&s->q.lock);
    return;
  }
  weft_thread_t *last = s->q.tail;
  atomic_store_explicit(&s->q.head, NULL, memory_order_relaxed);
  s->q.tail = NULL;
  for (;;) {
    weft__spin_lock(&v->q.lock);
    /* a closed spare runs nothing more: give to the VP it stood in for */
    if (v->index < mon.nvps ||
        !atomic_load_explicit(&mon.spares[v->index - mon.nvps].closed, memory_order_relaxed))
      break;
    weft__spin_unlock(&v->q.lock);
    v = weft__rt.vps[weft__vp_public_index(v)];
  }
  uint32_t idle = weft__append_locked(v, first, last);
  weft__spin_unlock(&v->q.lock);
  weft__spin_unlock(&s->q.lock);
  weft__enqueue_wake(idle);
}

/* The threads at the front of stalled VP v's queue that a spare may run (not a custom
 * scheduler's, which keep to their VPs), moved to the back of spare s's queue, holding
 * both queue locks (s's, then v's, as move_queue). For a spare that runs but never
 * takes from v: it takes only when its own queue is empty, and threads that yield to
 * each other on it keep that queue full (two yielders on a spare kept the main thread
 * queued behind a VP stalled in a loop of usleep calls for good). On the spare's queue
 * they take turns with its threads. Nothing moves to a spare that has closed. */
static void give_front_to_spare(weft_vp_t *v, weft_vp_t *s) {
  weft__spin_lock(&s->q.lock);
  int k = s->index - mon.nvps;
  if (atomic_load_explicit(&mon.spares[k].closed, memory_order_relaxed)) {
    weft__spin_unlock(&s->q.lock);
    return;
  }
  weft__spin_lock(&v->q.lock);
  weft_thread_t *first = NULL, *last = NULL;
  /* relaxed: ordered by v's queue lock */
  weft_thread_t *t = atomic_load_explicit(&v->q.head, memory_order_relaxed);
  while (t && !(weft__tflags(t) & WEFT__TF_CUSTOM)) {
    weft_thread_t *n = t->next;
    atomic_store_explicit(&v->q.head, n, memory_order_relaxed);
    if (!n) v->q.tail = NULL;
    else n->prev = NULL;
    t->prev = last;
    t->next = NULL;
    if (last) last->next = t;
    else first = t;
    last = t;
    t = n;
  }
  weft__spin_unlock(&v->q.lock);
  uint32_t idle = first ? weft__append_locked(s, first, last) : 0;
  weft__spin_unlock(&s->q.lock);
  if (first) weft__enqueue_wake(idle);
}

/* VP i's spare takes no more from it, and gives back what it holds (move_queue gives
 * to the VP a closed spare stood in for). */
static void retire_helper(int i) {
  mon_vp_t *m = &mon.vps[i];
  int k = m->helper;
  if (k < 0) return;
  m->helper = -1;
  spare_t *sp = &mon.spares[k];
  /* release: pairs with the spare's acquire load of take */
  atomic_store_explicit(&sp->take, 0, memory_order_release);
  weft__os_futex_wake(&sp->take, 1);
  move_queue(weft__rt.vps[mon.nvps + k], weft__rt.vps[i]);
}

/* The stall of VP i is over. */
static void unstall(int i) {
  mon.vps[i].stalled = 0;
  mon.vps[i].nospare_since = 0;
  retire_helper(i);
}

/* 1 if v's queue starts with a thread a spare would take (take_front). */
static int front_takeable(weft_vp_t *v) {
  if (!atomic_load_explicit(&v->q.head, memory_order_relaxed)) return 0;
  weft__spin_lock(&v->q.lock);
  /* relaxed: ordered by the queue lock */
  weft_thread_t *t = atomic_load_explicit(&v->q.head, memory_order_relaxed);
  int ok = t && !(weft__tflags(t) & WEFT__TF_CUSTOM);
  weft__spin_unlock(&v->q.lock);
  return ok;
}

/* How long a stalled VP's front thread may stay untaken by its spare before the
 * monitor concludes that the spare's own thread sleeps in a call (look): a working
 * spare polls the queue every half bound. */
static uint64_t stuck_ns(void) {
  uint64_t n = 4 * mon.bound_ns;
  return n > 1000000u ? n : 1000000u;
}

/* Joins spares that have exited; returns 1 if any did. */
static int reap(void) {
  int any = 0;
  for (int k = 0; k < mon.nspares; k++) {
    spare_t *sp = &mon.spares[k];
    /* acquire: pairs with the spare's release store of DONE */
    if (atomic_load_explicit(&sp->state, memory_order_acquire) != SP_DONE) continue;
    pthread_join(sp->kt, NULL);
    mon_vp_t *ms = &mon.vps[mon.nvps + k];
    if (ms->stalled) unstall(mon.nvps + k);
    ms->last_head = NULL;
    ms->last_cpu = 0;
    for (int i = 0; i < mon.nvps + mon.nspares; i++)
      if (mon.vps[i].helper == k) mon.vps[i].helper = -1;
    atomic_store_explicit(&sp->state, SP_FREE, memory_order_relaxed);
    any = 1;
  }
  return any;
}

static uint64_t cpu_ns(clockid_t c) {
  struct timespec ts;
  if (clock_gettime(c, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Opens /proc/self/task/tid/stat, moved above mon.fd_floor (kthread_sleeps says why);
 * -1 if it cannot. */
static int stat_open(int tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  if (mon.fd_floor > 0 && fd < mon.fd_floor) {
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, mon.fd_floor);
    if (hi >= 0) {  /* else (every number above taken) the low one serves */
      close(fd);
      fd = hi;
    }
  }
  return fd;
}

/* 1 if the kernel thread of slot m (tid) sleeps in the kernel (state S or D).
 * Its /proc stat file stays open while the slot's kernel thread is the same (a
 * pread at offset 0 renders it anew), for two reasons: one system call per look
 * instead of three, and no descriptor number taken and given back behind the
 * program's back at every look. A number the program has just closed while other
 * threads still read it (a race POSIX allows, close(2) against pread(2)) was taken
 * by this open, and those reads then read the monitor's file. The descriptor is
 * moved above mon.fd_floor for the same reason: out of the low numbers a program
 * reuses. */
static int kthread_sleeps(mon_vp_t *m, int tid) {
  if (rd.on) {
    long r = 0;
    /* a late answer: not seen asleep at this look (the next one asks again) */
    return rd_call(RD_SLEEPS, (int)(m - mon.vps), tid, 20000000u, &r) && r == 1;
  }
  if (m->stat_tid != tid) {
    if (m->stat_tid) close(m->stat_fd);
    m->stat_tid = 0;
    int fd = stat_open(tid);
    if (fd < 0) return 0;
    m->stat_fd = fd;
    m->stat_tid = tid;
  }
  char buf[512];
  ssize_t n = pread(m->stat_fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;  /* ESRCH: the kernel thread has exited */
  buf[n] = '\0';
  return stat_says_sleeps(buf);
}

/* Whether a /proc/.../stat text says state S or D. */
static int stat_says_sleeps(const char *buf) {
  const char *p = strrchr(buf, ')');  /* the name may hold spaces and parentheses */
  return p && p[1] == ' ' && (p[2] == 'S' || p[2] == 'D');
}

/* One look at every VP (now: its time). Returns 2 if some awake VP's kernel thread
 * hardly ran and sleeps in the kernel (a spare's only with threads queued behind it),
 * or some VP is stalled with no spare standing in
 * (the monitor then looks again after half the bound), 1 if some awake VP has threads
 * queued or a stalled VP is served by a spare (mon.served: the period may back off),
 * 0 if neither. The CPU time of a VP with an empty queue is read at every eighth look
 * only (full), or at every look in the slow mode: one system call per VP and look
 * would cost more than the look. */
static int look(uint64_t now, int full, int slow) {
  int risk = 0;
  mon.served = 0;
  mon.confirm = 0;
  for (int i = 0; i < mon.nvps + mon.nspares; i++) {
    mon_vp_t *m = &mon.vps[i];
    /* acquire: pairs with weft__monitor_vp_start's release store */
    int tid = atomic_load_explicit(&m->tid, memory_order_acquire);
    if (!tid) continue;
    weft_vp_t *v = weft__rt.vps[i];
    /* relaxed: hints; parked means asleep in its idle loop (or about to be), and a
     * VP still asleep there after a waker cleared park (the waker has not made its
     * futex wake yet: kept off its CPU) is not stalled either */
    if (atomic_load_explicit(&v->park, memory_order_relaxed) ||
        atomic_load_explicit(&v->asleep, memory_order_relaxed)) {
      if (m->stalled) unstall(i);
      m->last_head = NULL;
      m->last_cpu = 0;
      m->quiet = 0;
      continue;
    }
    /* relaxed: the front of the queue, as idle pollers read it: only compared */
    weft_thread_t *h = atomic_load_explicit(&v->q.head, memory_order_relaxed);
    /* relaxed, a hint as the head: the hand-off slot, where the VP's own wake-up put
     * the one thread it made ready (its queue was empty) just before its kernel thread
     * went into a call; only that VP (or a thief) takes it from there */
    weft_thread_t *sn = h ? NULL : atomic_load_explicit(&v->q.next, memory_order_relaxed);
    int slot = sn != NULL;
    if (!h && !slot && !m->stalled && !full) {
      m->last_head = NULL;
      if (m->quiet && i < mon.nvps) risk = 2;
      continue;
    }
    uint64_t cpu = cpu_ns(atomic_load_explicit(&m->clock, memory_order_relaxed));
    int idle_cpu = m->last_cpu && cpu - m->last_cpu < (now - m->last_ns) / 2;
    /* a kernel thread that hardly ran but is runnable was only kept off a CPU (a
     * loaded machine): not a reason to look closely, which would cost the CPU it lacks */
    int sleeping = idle_cpu && kthread_sleeps(m, tid);
    /* The state is read after the front (a round trip to the stat reader: on a loaded
     * machine a hundred microseconds or more later). A VP whose front or slot changed
     * meanwhile, or that parked, dispatched in between: the thread seen at the front
     * may be the one asleep now, in a call of its own (a std::thread join), with
     * nothing queued behind it. Taken for a stall, that gave the VP a spare, which
     * then took the thread at its next wake-up, to a kernel thread without the VP's
     * io_uring ring (io_test OpenatAndFsyncDeadlineForms hung in a FIFO open about
     * once in 100 runs). So the front is read again: a look that saw the queue move
     * is no evidence of a stall, and the next look, soon, sees it as it is now. */
    if (sleeping) {
      weft_thread_t *h2 = atomic_load_explicit(&v->q.head, memory_order_relaxed);
      weft_thread_t *sn2 = h2 ? NULL : atomic_load_explicit(&v->q.next, memory_order_relaxed);
      if (h2 != h || sn2 != sn || atomic_load_explicit(&v->park, memory_order_relaxed) ||
          atomic_load_explicit(&v->asleep, memory_order_relaxed)) {
        sleeping = 0;
        h = h2;
        slot = sn2 != NULL;
        if (!m->stalled) risk = 2;  /* look again after half the bound */
      }
    }
    m->quiet = sleeping;
    /* In the slow mode a VP that blocks in a call was seen only at the second look
     * after (its CPU time over the first period was still high), up to two slow
     * periods: one that used its CPU but whose kernel thread sleeps in the kernel now,
     * with threads queued behind it, is looked at again after half the bound (one
     * more read of its state per slow look, only while threads are queued). */
    if (slow && !idle_cpu && !m->stalled && i < mon.nvps && (h || slot) && kthread_sleeps(m, tid))
      mon.confirm = 1;
    if (slot && sleeping) {
      /* into the queue, where this look and the next see it as the front and a
       * spare can take it (the slot is filled only while the queue is empty, under
       * its lock: under the lock a full slot means an empty queue) */
      weft__spin_lock(&v->q.lock);
      weft__slot_flush_locked(v);
      weft__spin_unlock(&v->q.lock);
      h = atomic_load_explicit(&v->q.head, memory_order_relaxed);
    }
    /* at risk: threads queued, or an awake VP whose kernel thread hardly ran (it may
     * sleep in a call: a thread made ready onto it now must be seen within the bound) */
    /* A stalled VP whose spare stands in for it is served: its queue moves. It is
     * watched as a running VP is (risk 1: the period backs off, to slow_cap, which
     * keeps to 1 ms while its heap holds timers), and the spare is watched as a VP, so
     * a stall of the spare brings the period back. A spare asleep in a call with an
     * empty queue is no risk: only the spare itself and the monitor queue threads on
     * a spare. */
    int served = m->stalled && m->helper >= 0;
    if (served) mon.served = 1;
    /* a stalled spare with nothing queued needs no stand-in (below) and is no risk */
    int needs = i < mon.nvps || h || slot;
    if (((sleeping || m->stalled) && needs) && !served) risk = 2;
    else if ((h || slot || served) && risk < 1) risk = 1;
    if (h != m->last_head) m->head_since = now;
    if (m->stalled) {
      if (!idle_cpu) {
        unstall(i);  /* its kernel thread runs again */
      } else if (m->helper < 0) {
        if (needs) spare_needed(i, now);
        else m->nospare_since = 0;
      } else if (!needs && !atomic_load_explicit(&weft__rt.vps[mon.nvps + m->helper]->q.head,
                                                   memory_order_relaxed)) {
        /* A stalled spare's queue gets threads only from the spare itself and from the
         * monitor (move_queue; wake-ups and placement name regular VPs). Once its
         * stand-in has run them all, the stand-in would wait for the call to end,
         * holding a slot: with every slot held so, a regular VP's stall got no spare
         * and the threads queued there never ran (a reader that created a child and
         * then blocked in read(2) took two slots, one of them idle). It retires; the
         * spare gets one again if threads are queued on it before its call ends. */
        retire_helper(i);
      } else if (h && h == m->last_head && now - m->head_since >= stuck_ns() &&
                 front_takeable(v)) {
        if (mon.vps[mon.nvps + m->helper].quiet) {
          /* Its spare has taken nothing for a while and hardly runs: the spare's own
           * thread sleeps in a call too (its stand-in serves the spare's queue, not
           * this one). A thread made ready here meanwhile (a timer or I/O the monitor
           * fired, an OS thread's wake-up: placement names regular VPs) would wait for
           * the first call to end. So the spare stops taking from this VP and another
           * one stands in for it. */
          retire_helper(i);
          spare_needed(i, now);
        } else {
          /* its spare runs, but its own queue never empties: hand it the front */
          give_front_to_spare(v, weft__rt.vps[mon.nvps + m->helper]);
          h = atomic_load_explicit(&v->q.head, memory_order_relaxed);
        }
      }
    } else if (h && h == m->last_head && sleeping) {
      atomic_fetch_add_explicit(&mon.n_stalls, 1, memory_order_relaxed);
      /* a stalled spare gives its queue to the VP it stands in for when that one
       * is parked (the enqueue wakes it); else it gets a spare */
      int home = weft__vp_public_index(v);
      /* relaxed: a hint; a VP parked in its idle loop is woken by the enqueue */
      if (i >= mon.nvps && atomic_load_explicit(&weft__rt.vps[home]->park, memory_order_relaxed)) {
        move_queue(v, weft__rt.vps[home]);
        h = NULL;
      } else {
        m->stalled = 1;
        spare_needed(i, now);
      }
    }
    m->last_head = h;
    m->last_cpu = cpu;
    m->last_ns = now;
  }
  return risk;
}

/* The longest period now: MON_SLOW_NS, or MON_SLOW_IO_NS while threads wait on I/O
 * (with every VP busy the monitor's poll is the only one: a wait longer than that would
 * be the readiness latency), a spare's timer heap holds timers (nobody else fires
 * them once the spare's kernel thread has gone), or a stalled VP's does (its kernel
 * thread sleeps in the call: the monitor fires them). A VP that newly blocks in a call
 * while none of that holds is seen within about one such period (look, confirm). */
static uint64_t slow_cap(void) {
  if (weft__io_waiting()) return MON_SLOW_IO_NS;
  for (int i = 0; i < mon.nvps + mon.nspares; i++)
    /* relaxed: a hint, as the idle loop's look at a heap */
    if ((i >= mon.nvps || mon.vps[i].stalled) &&
        atomic_load_explicit(&weft__rt.vps[i]->tm.n, memory_order_relaxed))
      return MON_SLOW_IO_NS;
  return MON_SLOW_NS;
}

/* 1 if every VP sleeps and no spare runs: nothing to watch until a VP wakes. */
static int all_asleep(void) {
  /* seq_cst: the monitor's half of the store-buffering pair of monitor.h */
  uint32_t idle = atomic_load_explicit(&weft__rt.idle, memory_order_seq_cst);
  return (int)(idle >> 16) == mon.nvps && !weft__monitor_busy();
}

void weft__monitor_wake_deep(void) {
  uint32_t one = 1;
  if (atomic_compare_exchange_strong_explicit(&weft__monitor_deep, &one, 0, memory_order_seq_cst,
                                              memory_order_relaxed))
    weft__os_futex_wake(&weft__monitor_deep, 1);
}

static void *monitor_main(void *unused) {
  (void)unused;
  pthread_setname_np(pthread_self(), "weft-monitor");
  /* wake-ups at the requested time, not up to the default 50 us of slack later */
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  uint64_t fast = mon.bound_ns / 2 ? mon.bound_ns / 2 : 1, period = fast;
  uint64_t prev = weft__os_now_ns();
  unsigned nlook = 0, calm = 0;
  /* acquire: pairs with weft__monitor_stop's release store */
  while (!atomic_load_explicit(&mon.stop, memory_order_acquire)) {
    atomic_store_explicit(&mon.period_ns, period, memory_order_relaxed);
    /* a confirming look (mon.confirm) comes after half the bound; the period and the
     * calm count stay as they were, so a VP that runs on costs one early look */
    weft__os_futex_wait_until(&weft__monitor_deep, 0, prev + (mon.confirm ? fast : period));
    if (atomic_load_explicit(&mon.stop, memory_order_acquire)) break;
    uint64_t now = weft__os_now_ns();
    /* a spare's kernel thread has gone: the deadlock check of a VP that went to
     * sleep while it existed did not count it out; let one look again */
    if (reap()) weft__wake_one();
    weft__timers_poll_all();  /* timers nobody else checks now (above) */
    weft__io_poll_monitor();  /* readiness nobody else polls now (above) */
    int risk = look(now, period > fast || (++nlook & 7) == 0, period >= MON_SLOW_IO_NS);
    prev = now;
    if (risk == 2) {
      period = fast;
      calm = 0;
      continue;
    }
    uint64_t cap = slow_cap();
    if (risk == 1) {  /* every awake VP runs: back off after a calm stretch (at once
                         while a spare serves a stall) */
      if (period > cap) period = cap;
      else if ((++calm > MON_CALM_LOOKS || mon.served) && period < cap) period *= 2;
      continue;
    }
    calm = 0;
    if (period > cap) period = cap;
    else if (period < cap) period *= 2;
    /* nothing awake: sleep until a VP leaves its idle loop (monitor.h) */
    if (all_asleep()) {
      atomic_store_explicit(&weft__monitor_deep, 1, memory_order_seq_cst);
      /* seq_cst: see weft__monitor_stop */
      if (all_asleep() && !atomic_load_explicit(&mon.stop, memory_order_seq_cst))
        weft__os_futex_wait(&weft__monitor_deep, 1);
      atomic_store_explicit(&weft__monitor_deep, 0, memory_order_relaxed);
      prev = weft__os_now_ns();
      period = fast;
      for (int i = 0; i < mon.nvps + mon.nspares; i++) {
        mon.vps[i].last_cpu = 0;
        mon.vps[i].quiet = 0;
      }
    }
  }
  return NULL;
}

int weft__monitor_start(void) {
  if (!mon.on) return 0;
  void *probe = weft__sys_malloc(1);  /* failure injection covers the start too */
  if (!probe) return WEFT_ENOMEM;
  weft__sys_free(probe);
  if (pthread_create(&mon.kt, NULL, monitor_main, NULL) != 0) return WEFT_ESYS;
  mon.started = 1;
  return 0;
}

void weft__monitor_stop(void) {
  if (!mon.started) return;
  /* seq_cst: before the store of the futex word below, in the single order the
   * monitor's seq_cst store of 1 and load of stop before it sleeps also take part
   * in: either it sees stop, or its futex wait sees 0 */
  atomic_store_explicit(&mon.stop, 1, memory_order_seq_cst);
  atomic_store_explicit(&weft__monitor_deep, 0, memory_order_seq_cst);
  weft__os_futex_wake(&weft__monitor_deep, 1);
  pthread_join(mon.kt, NULL);
  mon.started = 0;
  /* the spares: every weft thread has finished (or none ever ran on them), so each
   * finds nothing and exits once told to take no more */
  for (int k = 0; k < mon.nspares; k++) {
    spare_t *sp = &mon.spares[k];
    if (atomic_load_explicit(&sp->state, memory_order_acquire) == SP_FREE) continue;
    atomic_store_explicit(&sp->take, 0, memory_order_release);
    weft__os_futex_wake(&sp->take, 1);
    pthread_join(sp->kt, NULL);
    atomic_store_explicit(&sp->state, SP_FREE, memory_order_relaxed);
  }
}

static int monitor_info(weft_monitor_info_t *out) {
  if (!weft_is_running()) return WEFT_ENOTINIT;
  memset(out, 0, sizeof *out);
  if (!mon.on) return 0;
  out->bound_us = (long)(mon.bound_ns / 1000u);
  out->spare_slots = mon.nspares;
  for (int k = 0; k < mon.nspares; k++)
    if (atomic_load_explicit(&mon.spares[k].state, memory_order_acquire) != SP_FREE)
      out->spares_running++;
  out->stalls = atomic_load_explicit(&mon.n_stalls, memory_order_relaxed);
  out->spares_started = atomic_load_explicit(&mon.n_started, memory_order_relaxed);
  out->period_ns = atomic_load_explicit(&mon.period_ns, memory_order_relaxed);
  return 0;
}

int weft_monitor_info(weft_monitor_info_t *out) {
  if (!out) return WEFT_EINVAL;
  /* a plain OS thread reads inside its gate: weft_shutdown() frees the spares' table
   * once no such call is inside (runtime.h, weft__os_read_enter) */
  int g = weft__os_read_enter();
  if (!g) return WEFT_ENOTINIT;
  int rc = monitor_info(out);
  weft__os_read_leave(g);
  return rc;
}
