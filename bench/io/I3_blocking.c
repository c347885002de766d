/* bench/io/I3_blocking.c - I3: thread throughput (T1) while other threads wait in I/O
 * (bench/README.md, "Servers and I/O").
 *
 *   weft_io_i3 [--out DIR] [--n 2000000] [--reps 5] [--procs 1,2] [--waiters 100]
 *              [--blocking 4] [--watchdog 10] [--quick]
 *
 * T1 as bench/sweep/T_sweep.c runs it: P chains of detached null threads, each creating
 * its successor, N threads in all, on P VPs; timed from the first create to the last
 * thread's end. It is run under four conditions, each in the same process and on the
 * same P VPs, set up before the timing and torn down after it:
 *   alone        T1 and nothing else;
 *   io_wait      --waiters weft threads each parked in weft_read on its own socketpair
 *                (no data until T1 ends);
 *   io_blocking  io_wait plus --blocking weft threads each in weft_blocking() of a
 *                read(2) on its own pipe: the read blocks a kernel thread of the pool,
 *                the weft thread is parked;
 *   unannounced  io_wait plus P - 1 weft threads (one per VP but the first) that call
 *                read(2) on a pipe directly, which weft is not told about: each holds its
 *                VP's kernel thread until T1 ends (P >= 2 only; with as many as P no VP
 *                would be left to run T1 at all). A watchdog (--watchdog seconds) writes
 *                the pipes if T1 has not ended by then, and the point is marked stalled.
 * Before the timing the program waits until weft_io_parked() counts every waiter and
 * every blocking reader has entered its read. One warm-up run, then --reps; median,
 * min..max; ratio = median time alone / median time under the condition (1 = no cost).
 * DIR/I3.json. --quick: N = 1,000,000. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"
#include "weft/weft.h"

enum { MAX_REPS = 64, MAX_PROCS = 16, MAX_BLOCKERS = 64 };
enum { V_ALONE, V_IO_WAIT, V_IO_BLOCKING, V_UNANNOUNCED, NVARIANTS };
static const char *const variant_name[NVARIANTS] = {"alone", "io_wait", "io_blocking", "unannounced"};

/* ---- T1 (as T_sweep.c) -------------------------------------------------------------- */

enum { W_IDLE, W_WAITING, W_DONE };
static _Atomic int waiter_state;
static weft_thread_t *waiter;
static weft_attr_t detached;
static _Atomic long chains_left;

static void waiter_release(void *arg) {
  (void)arg;
  if (atomic_exchange(&waiter_state, W_WAITING) == W_DONE) weft_thread_unblock(waiter);
}
static void waiter_signal(void) {
  if (atomic_exchange(&waiter_state, W_DONE) == W_WAITING) weft_thread_unblock(waiter);
}

static long share(long n, int p, int i) { return n / p + (i < n % p); }

static void *t1_cycle(void *arg) {
  long left = (long)(intptr_t)arg;
  if (left > 1)
    bench_check(weft_create(NULL, &detached, t1_cycle, (void *)(intptr_t)(left - 1)), "weft_create");
  else if (atomic_fetch_sub(&chains_left, 1) == 1)
    waiter_signal();
  return NULL;
}

static double weft_t1(int p, long n) {
  atomic_store(&waiter_state, W_IDLE);
  atomic_store(&chains_left, p);
  waiter = weft_self();
  double t0 = bench_now_ns();
  for (int i = 0; i < p; i++) {
    weft_attr_t a = detached;
    a.vproc = WEFT_VPROC(i);
    bench_check(weft_create(NULL, &a, t1_cycle, (void *)(intptr_t)share(n, p, i)), "weft_create");
  }
  weft_thread_block(waiter_release, NULL);
  return bench_now_ns() - t0;
}

/* ---- the threads that wait ------------------------------------------------------------ */

static _Atomic int in_read;        /* blocking readers that entered read(2) */
static int pipes[MAX_BLOCKERS][2]; /* the blocking readers' pipes */
static int npipes;
static volatile sig_atomic_t stalled;

static void *io_waiter(void *arg) {
  int fd = (int)(intptr_t)arg;
  char c;
  ssize_t r = weft_read(fd, &c, 1);
  return (void *)(intptr_t)(r == 1);
}

static void *pool_read(void *arg) {
  int fd = (int)(intptr_t)arg;
  char c;
  atomic_fetch_add(&in_read, 1);
  ssize_t r;
  do r = read(fd, &c, 1);
  while (r < 0 && errno == EINTR);
  return (void *)(intptr_t)(r == 1);
}

static void *blocking_reader(void *arg) {
  void *res = NULL;
  bench_check(weft_blocking(pool_read, arg, &res), "weft_blocking");
  return res;
}

/* watchdog: release the unannounced readers (write is async-signal-safe) */
static void on_alarm(int sig) {
  (void)sig;
  stalled = 1;
  for (int i = 0; i < npipes; i++) (void)!write(pipes[i][1], "x", 1);
}

typedef struct setup {
  int nw, nb;
  int socks[1024][2];
  weft_thread_t *wt[1024], *bt[MAX_BLOCKERS];
} setup_t;

static void set_up(setup_t *s, int variant, int p, int waiters, int blocking) {
  s->nw = variant == V_ALONE ? 0 : waiters;
  s->nb = variant == V_IO_BLOCKING ? blocking : variant == V_UNANNOUNCED ? p - 1 : 0;
  npipes = 0;
  atomic_store(&in_read, 0);
  for (int i = 0; i < s->nw; i++) {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s->socks[i]) != 0) {
      perror("weft_io_i3: socketpair");
      exit(1);
    }
    bench_check(weft_create(&s->wt[i], NULL, io_waiter, (void *)(intptr_t)s->socks[i][0]), "weft_create");
  }
  /* every waiter parked before a reader can hold a VP: a yield does not steal, so a
   * waiter queued behind an unannounced reader's VP would never park */
  while (weft_io_parked() < s->nw) weft_yield();
  for (int i = 0; i < s->nb; i++) {
    if (pipe2(pipes[i], O_CLOEXEC) != 0) {
      perror("weft_io_i3: pipe");
      exit(1);
    }
    npipes = i + 1;
    weft_attr_t a;
    weft_attr_init(&a);
    if (variant == V_UNANNOUNCED) a.vproc = WEFT_VPROC(i + 1);
    bench_check(weft_create(&s->bt[i], &a, variant == V_UNANNOUNCED ? pool_read : blocking_reader,
                            (void *)(intptr_t)pipes[i][0]),
                "weft_create");
  }
  /* every reader in read(2) */
  while (atomic_load(&in_read) < s->nb) weft_yield();
  usleep(2000); /* the readers' last steps into the kernel */
}

static int tear_down(setup_t *s) {
  int ok = 1;
  for (int i = 0; i < s->nw; i++) {
    if (write(s->socks[i][1], "x", 1) != 1) ok = 0;
  }
  for (int i = 0; i < s->nb; i++) {
    if (!stalled && write(pipes[i][1], "x", 1) != 1) ok = 0;
  }
  void *r;
  for (int i = 0; i < s->nw; i++) {
    bench_check(weft_join(s->wt[i], &r), "weft_join");
    ok &= r != NULL;
    weft_close(s->socks[i][0]);
    close(s->socks[i][1]);
  }
  for (int i = 0; i < s->nb; i++) {
    bench_check(weft_join(s->bt[i], &r), "weft_join");
    ok &= r != NULL;
    close(pipes[i][0]);
    close(pipes[i][1]);
  }
  npipes = 0;
  return ok;
}

int main(int argc, char **argv) {
  const char *out = NULL;
  long n = 2000000;
  int reps = 5, quick = 0, waiters = 100, blocking = 4, watchdog = 10, nprocs = 2;
  int procs[MAX_PROCS] = {1, 2};
  if (bench_args_has(argc, argv, "--quick")) {
    n = 1000000;
    reps = 5;
  }
  bench_opt_t opts[] = {
      BENCH_OPT_OUT(out, "I3.json"),
      BENCH_OPT_N(n, "T1's threads in all"),
      BENCH_OPT_REPS(reps),
      BENCH_OPT_PROCS(procs, nprocs, MAX_PROCS),
      {"--waiters", BENCH_INT, &waiters, NULL, 0, "weft threads parked in weft_read (<= 1024)"},
      {"--blocking", BENCH_INT, &blocking, NULL, 0, "weft threads in weft_blocking(read) (<= 64)"},
      {"--watchdog", BENCH_INT, &watchdog, NULL, 0, "seconds before the unannounced readers are released"},
      BENCH_OPT_QUICK(quick),
  };
  bench_args(argc, argv, opts, sizeof opts / sizeof *opts, "I3: T1 while threads wait in I/O");
  if (n < 1 || reps < 1 || reps > MAX_REPS || waiters < 0 || waiters > 1024 || blocking < 0 ||
      blocking > MAX_BLOCKERS || watchdog < 1) {
    fprintf(stderr, "weft_io_i3: --n >= 1, --reps 1..%d, --waiters 0..1024, --blocking 0..%d, --watchdog >= 1\n",
            MAX_REPS, MAX_BLOCKERS);
    return 2;
  }
  for (int i = 0; i < nprocs; i++)
    if (procs[i] < 1 || procs[i] > MAX_BLOCKERS) {
      fprintf(stderr, "weft_io_i3: --procs values 1..%d\n", MAX_BLOCKERS);
      return 2;
    }
  signal(SIGALRM, on_alarm);
  bench_machine_t m;
  bench_machine_read(&m);
  bench_json_t j;
  if (out && bench_json_start(&j, out, "I3.json", &m) != 0) return 1;
  if (out) {
    bench_json_str(&j, "id", "I3");
    bench_json_obj(&j, "config");
    bench_json_int(&j, "n", n);
    bench_json_int(&j, "reps", reps);
    bench_json_int(&j, "warmup_runs", 1);
    bench_json_int(&j, "waiters", waiters);
    bench_json_int(&j, "blocking", blocking);
    bench_json_int(&j, "watchdog_s", watchdog);
    bench_json_end(&j);
    bench_json_arr(&j, "results");
  }
  int bad = 0;
  for (int pi = 0; pi < nprocs; pi++) {
    int p = procs[pi];
    weft_config_t cfg;
    weft_config_init(&cfg);
    cfg.nvps = p;
    bench_check(weft_init(&cfg), "weft_init");
    weft_attr_init(&detached);
    detached.detached = 1;
    double alone = 0;
    for (int v = 0; v < NVARIANTS; v++) {
      if (v == V_UNANNOUNCED && p < 2) continue;
      double sec[MAX_REPS];
      int stalls = 0, ok = 1;
      for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        setup_t *s = calloc(1, sizeof *s);
        set_up(s, v, p, waiters, blocking);
        stalled = 0;
        if (v == V_UNANNOUNCED) alarm((unsigned)watchdog);
        double ns = weft_t1(p, n);
        alarm(0);
        stalls += stalled != 0;
        ok &= tear_down(s);
        free(s);
        if (r >= 0) sec[r] = ns * 1e-9;
      }
      if (!ok) {
        fprintf(stderr, "WRONG RESULT: a waiting thread did not read its byte (%s, P=%d)\n", variant_name[v], p);
        bad = 1;
      }
      bench_summary_t su = bench_summarize(sec, reps);
      if (v == V_ALONE) alone = su.median;
      printf("I3 %-12s P=%d  %.3f s [%.3f .. %.3f]  %.1f ns/thread  alone/this %.2f%s\n", variant_name[v], p,
             su.median, su.min, su.max, su.median * 1e9 / (double)n, alone / su.median,
             stalls ? "  (stalled: released by the watchdog)" : "");
      fflush(stdout);
      if (out) {
        bench_json_record(&j, "variant", variant_name[v], p, p > m.cores);
        bench_json_int(&j, "n", n);
        bench_json_int(&j, "waiters", v == V_ALONE ? 0 : waiters);
        bench_json_int(&j, "blocking", v == V_IO_BLOCKING ? blocking : 0);
        bench_json_int(&j, "unannounced", v == V_UNANNOUNCED ? p - 1 : 0);
        bench_json_times(&j, su, sec, reps);
        bench_json_num(&j, "ns_per_thread", su.median * 1e9 / (double)n);
        bench_json_num(&j, "ratio_alone_over_this", alone / su.median);
        bench_json_int(&j, "stalled_runs", stalls);
        bench_json_bool(&j, "ok", ok);
        bench_json_end(&j);
      }
    }
    bench_check(weft_shutdown(), "weft_shutdown");
  }
  if (out && bench_json_finish(&j) != 0) return 1;
  return bad ? 3 : 0;
}
