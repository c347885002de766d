/* src/core/deadlock.c - when nothing can move any more: the deadlock and
 * out-of-stacks reports, checked by the last VP to go to sleep (idle.c). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/monitor.h"
#include "io/io.h"
#include "diag/diag.h"
#include "weft/wire.h"

/* ---- when nothing can move any more: the deadlock and out-of-stacks reports ------
 * Checked by a VP that has just counted itself asleep and found nothing in its last
 * look, only when every VP is asleep: the paths that run threads pay nothing.
 * "Nothing can wake any thread" is the conjunction of quiet() and "no kernel thread
 * besides weft's": a weft thread can only be made ready by a running weft thread
 * (none: every VP sleeps), a timer (none armed), a wired thread, a do-when-idle
 * function, a custom scheduler's own machinery, or a kernel thread weft does not
 * run (a plain OS thread, inside weft or about to call it). quiet() is read, then
 * the thread count, then quiet() again: a kernel thread that made something ready
 * and exited between the two reads of quiet() did it before its exit, which the
 * count observes, so the second quiet() sees its work (or the wake-up it caused:
 * park is 0 or the idle word changed). */

static void fatal_write(const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void fatal_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fatal_printf(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  fatal_write(buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* Kernel threads of the process that may run the program's code: every task in
 * /proc/self/task but io_uring's own workers (named iou-wrk-PID and iou-sqp-PID). A
 * file request makes such a worker and it lingers; it wakes no weft thread but
 * through a completion, and the deadlock check runs only while no thread waits on
 * I/O. Counted with them (field 20 of /proc/self/stat), one weft_openat in the ring
 * turned the deadlock report off for the rest of the run: a real deadlock hung. Raw
 * system calls: the monitor's stat reader runs this in its own descriptor table, and
 * a sanitizer's descriptor bookkeeping is the program's. -1 if unreadable; a task that
 * exits meanwhile may still be counted (the check then reports nothing this time). */
static long stat_threads_raw(void) {
  char buf[1024];
  int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  (void)syscall(SYS_close, fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');  /* the command name may hold spaces and parentheses */
  if (!p) return -1;
  int field = 2;
  for (; *p; p++)
    if (*p == ' ' && ++field == 20) return strtol(p + 1, NULL, 10);
  return -1;
}

static long count_tasks(int skip_pool, int *lingering);

long weft__count_kthreads_raw(void) { return count_tasks(0, NULL); }

long weft__count_kthreads_own_raw(void) { return count_tasks(1, NULL); }

long weft__count_kthreads_init(int *lingering) {
  *lingering = 0;
  return count_tasks(1, lingering);
}

/* One listing of /proc/self/task for count_tasks; *listed: every task it named. */
static long count_listed(int skip_pool, int *lingering, long *listed) {
  *listed = 0;
  int dfd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return -1;
  struct dent {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
  };
  char buf[4096] __attribute__((aligned(8)));
  long n, count = 0;
  while ((n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
    for (long off = 0; off < n;) {
      struct dent *e = (struct dent *)(void *)(buf + off);
      off += e->reclen;
      if (e->name[0] < '0' || e->name[0] > '9') continue;
      ++*listed;
      char path[64], comm[32];
      snprintf(path, sizeof path, "%s/comm", e->name);
      int cfd = (int)syscall(SYS_openat, dfd, path, O_RDONLY | O_CLOEXEC);
      if (cfd < 0 && (errno == EMFILE || errno == ENFILE)) {  /* no number: not counted */
        (void)syscall(SYS_close, dfd);
        return -1;
      }
      /* gone since the directory was read (ENOENT; ESRCH while it is being reaped):
       * not a thread any more. Counted, a pool thread that exited during weft_init's
       * counts looked like a thread that was not weft's. */
      if (cfd < 0 && (errno == ENOENT || errno == ESRCH)) continue;
      if (cfd >= 0) {
        long k = syscall(SYS_read, cfd, comm, sizeof comm - 1);
        int rerr = errno;
        (void)syscall(SYS_close, cfd);
        /* gone between the open and the read: the read fails with ESRCH once the task
         * is reaped. Counted, an earlier run's pool thread leaving during weft_init's
         * first count made it one too many, and the deadlock report was off for the
         * whole run (1 run in about 10 of the ucontext build hung) */
        if (k < 0 && (rerr == ESRCH || rerr == ENOENT)) continue;
        if (k > 0) {
          comm[k] = '\0';
          if (strncmp(comm, "iou-wrk-", 8) == 0 || strncmp(comm, "iou-sqp-", 8) == 0) continue;
          if (skip_pool && strcmp(comm, "weft-pool\n") == 0) continue;
          if (lingering && (strcmp(comm, "weft-vp\n") == 0 || strcmp(comm, "weft-monitor\n") == 0 ||
                            strcmp(comm, "weft-stat\n") == 0 || strcmp(comm, "weft-spare\n") == 0))
            ++*lingering;
        }
      }
      count++;
    }
  }
  (void)syscall(SYS_close, dfd);
  return n < 0 ? -1 : count;
}

/* The tasks of /proc/self/task but io_uring's workers, and but the blocking pool's
 * threads ("weft-pool", io/blocking.c) when skip_pool is set. With lingering, also
 * counts into it the tasks named as weft's VPs, monitor, stat reader and spares are.
 * The kernel's listing of /proc/self/task ends early when the task it stands on exits
 * at that moment (fs/proc/base.c: next_tid finds it unhashed), leaving out every task
 * after it, the newest: weft_init's second count, made while an earlier run's pool
 * threads left, missed the stat reader and the monitor (one run in about 1,000 hung),
 * and the check's count could miss a foreign thread. Such a listing names fewer tasks
 * than the process had before it (new tasks go at the end, and the one it stopped at
 * is not named), so it is taken only when it names at least as many as the thread
 * count of /proc/self/stat, read before and after; else it is made again, up to 64
 * times (6 ms at most), and then the count is unknown (-1). */
static long count_tasks(int skip_pool, int *lingering) {
  for (int i = 0; i < 64; i++) {
    /* A user-mode emulator (qemu-user) writes a /proc/self/stat of its own with no
     * thread count (0): returned as is, weft_init then keeps the reports off (the task
     * list would show the emulator's own threads) */
    long st = stat_threads_raw();
    if (st < 1) return st;
    if (lingering) *lingering = 0;
    long listed, count = count_listed(skip_pool, lingering, &listed);
    if (count < 0) return count;
    long st2 = stat_threads_raw();
    if (st2 < 1) return st2;
    if (listed >= st && listed >= st2) return count;
    if (i >= 4) weft__os_sleep_ns(100000);  /* threads leaving one after another */
  }
  return -1;
}

/* The same, through the monitor's stat reader once it runs (monitor.c): an open here
 * takes the lowest free number of the program's table for a moment, and the deadlock
 * check runs at any time. */
long weft__count_kthreads(void) {
  long k;
  if (weft__monitor_count_kthreads(&k, 0)) return k;
  return weft__count_kthreads_raw();
}

long weft__count_kthreads_own(void) {
  long k;
  if (weft__monitor_count_kthreads(&k, 1)) return k;
  return weft__count_kthreads_own_raw();
}

/* Every VP asleep (vp, the caller, among them and not woken since), no thread in a
 * dispatch queue, and none of the other sources of wake-ups in place. */
static int quiet(weft_vp_t *vp) {
  weft__rt_t *rt = &weft__rt;
  uint32_t idle = atomic_load_explicit(&rt->idle, memory_order_seq_cst);
  return (idle & 0xffff) == 0 && (int)(idle >> 16) == rt->nvps &&
         atomic_load_explicit(&vp->park, memory_order_acquire) == 1 &&
         !atomic_load(&rt->stopping) && !weft__any_queued_locked() &&
         weft__timers_quiet() && !weft__io_waiting() &&
         atomic_load_explicit(&rt->nidlef, memory_order_acquire) == 0 &&
         weft_wired_count() == 0 && weft__wire_returning() == 0 &&
         atomic_load_explicit(&rt->nbundles, memory_order_acquire) == 0 &&
         weft__os_gate_empty();
}

int weft__nothing_can_wake(weft_vp_t *vp) {
  if (weft__rt.kthreads_expected < 0 || !quiet(vp)) return 0;
  /* Idle pool threads of weft_blocking/weft_wire with no work for them linger for
   * their idle time (10 s by default) and could only wake a weft thread through work
   * a weft thread gives them: not wakers. Read before the count, so that a pool
   * thread that leaves in between only makes the count smaller; one that gets work
   * in between got it from a weft thread that ran, which the second quiet() sees. */
  int settling;
  long spare = weft__pool_idle_spare(&settling);
  long k = weft__count_kthreads();
  if (k < 0) return quiet(vp) ? -1 : 0;  /* unreadable now: the caller looks again later */
  if (k <= weft__rt.kthreads_expected + spare) return quiet(vp);
  /* a pool thread on its way back from a job (which might still wake its caller) or
   * just gone: no report now, and the caller looks again later (without this, a check
   * in that window kept the report off for good, and a deadlock hung) */
  return settling && quiet(vp) ? -1 : 0;
}

/* The deadlock report: blocked threads are the control blocks whose thread has run
 * (a saved context) and not finished (join word not DONE); with every VP asleep and
 * every queue empty they are all blocked. Up to MAXLINES are named; a joiner is
 * found from its joinee's join word (never through a possibly stale pointer). */
#define WEFT__REPORT_LINES 64
struct blocked_scan {
  weft_thread_t *t[WEFT__REPORT_LINES];
  weft_thread_t *joins[WEFT__REPORT_LINES];
  int n;
  long total;
};

static int is_blocked(weft_thread_t *t) {
  return t->ctx.sp != NULL &&
         atomic_load_explicit(&t->join, memory_order_acquire) != WEFT__JW_DONE;
}

static void scan_blocked(weft_thread_t *t, void *arg) {
  struct blocked_scan *s = arg;
  if (!is_blocked(t)) return;
  s->total++;
  if (s->n < WEFT__REPORT_LINES) {
    s->joins[s->n] = NULL;
    s->t[s->n++] = t;
  }
}

static void scan_joins(weft_thread_t *j, void *arg) {
  struct blocked_scan *s = arg;
  uintptr_t w = atomic_load_explicit(&j->join, memory_order_acquire);
  if (WEFT__JW_TAG(w) != WEFT__JW_WEFT || !is_blocked(j)) return;
  for (int i = 0; i < s->n; i++)
    if (s->t[i] == WEFT__JW_PTR(w)) s->joins[i] = j;
}

/* One fatal report per process: two VPs may find themselves the last asleep at once
 * and both pass the check (the out-of-stacks report was printed twice in 3 of 14
 * runs); the second waits for the first's abort. */
static _Atomic int reporting;
static void report_once(void) {
  if (atomic_exchange_explicit(&reporting, 1, memory_order_relaxed))
    for (;;) pause();
}

_Noreturn void weft__deadlock_report(void) {
  report_once();
  weft__rt_t *rt = &weft__rt;
  static struct blocked_scan s;  /* the process ends here: one report at most */
  s.n = 0;
  s.total = 0;
  scan_blocked(rt->main, &s);
  weft__tcb_foreach(scan_blocked, &s);
  scan_joins(rt->main, &s);
  weft__tcb_foreach(scan_joins, &s);
  fatal_printf("weft: fatal error: all threads are asleep - deadlock!\n");
  for (int i = 0; i < s.n; i++) {
    weft_thread_t *t = s.t[i];
    const char *main_tag = t == rt->main ? " (main)" : "";
    char nm[WEFT_NAME_MAX + 3] = "";
    if (weft__name_copy(t, nm + 2, WEFT_NAME_MAX)) {  /* ' "name"' if it has one */
      nm[0] = ' ';
      nm[1] = '"';
      strcat(nm, "\"");
    }
    if (s.joins[i])
      fatal_printf("weft: thread %llu%s%s: blocked in weft_join on thread %llu\n",
                   (unsigned long long)t->id, nm, main_tag, (unsigned long long)s.joins[i]->id);
    else
      fatal_printf("weft: thread %llu%s%s: blocked on a synchronization object, a thread "
                   "list or weft_thread_block\n", (unsigned long long)t->id, nm, main_tag);
  }
  if (s.total > s.n) fatal_printf("weft: ... and %ld more blocked threads\n", s.total - s.n);
  weft__dump_deadlock();  /* every thread, what it waits on, backtraces (src/diag) */
  fatal_printf("weft: (WEFT_DEADLOCK=0 or weft_config_t.deadlock_report = "
               "WEFT_DEADLOCK_IGNORE turns this report off)\n");
  signal(SIGABRT, SIG_DFL);
  abort();
}

static unsigned long read_ulong_file(const char *path) {
  char buf[64];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  return strtoul(buf, NULL, 10);
}

/* No thread can finish and give a stack back, and the oldest thread waiting for one
 * still cannot get it: name the limit and stop. */
_Noreturn void weft__out_of_stacks(weft_thread_t *t) {
  report_once();
  weft__rt_t *rt = &weft__rt;
  size_t size = t->stack_size ? t->stack_size : rt->cfg.stack_size;
  fatal_printf("weft: fatal error: out of stacks: thread %llu needs a stack of %zu bytes and "
               "none can be had, and no other thread can run or finish to give one back\n",
               (unsigned long long)t->id, size);
  if (rt->cfg.stack_alloc) {
    fatal_printf("weft: the stack_alloc policy (weft_config_t) returned NULL\n");
  } else {
    /* why the last stack mapping failed, as alloc.c recorded it (the limit named) */
    char why[512];
    if (weft__stack_describe_failure(why, sizeof why) > 0)
      fatal_printf("%s\n", why);  /* it begins "weft: " */
    else
      fatal_printf("weft: no stack mapping failed: the failure was injected "
                   "(weft_debug_fail_alloc) or came from the control-block allocator\n");
  }
  struct rlimit rl;
  char as[32] = "unlimited";
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    snprintf(as, sizeof as, "%llu bytes", (unsigned long long)rl.rlim_cur);
  fatal_printf("weft: %ld live threads (max_threads %ld), %ld waiting for a stack, %ld system "
               "blocks held by weft (stacks among them); vm.max_map_count %lu, RLIMIT_AS %s\n",
               weft__live_threads(), rt->cfg.max_threads,
               (long)atomic_load_explicit(&rt->nnostack, memory_order_relaxed),
               weft_debug_live_blocks(), read_ulong_file("/proc/sys/vm/max_map_count"), as);
  fatal_printf("weft: lower weft_config_t.max_threads or stack_size, or raise the limit\n");
  signal(SIGABRT, SIG_DFL);
  abort();
}
