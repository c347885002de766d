/* bench/io/I0_read.c - I0: the cost of a weft read that completes at once, against the
 * plain system call (bench/README.md, "Servers and I/O").
 *
 *   weft_io_i0 [--out DIR] [--n 20000] [--reps 5] [--size 64] [--engines uring,epoll]
 *              [--quick]
 *   weft_io_i0 --icount CASE --n N     (under callgrind: bench/io/i0_icount.sh)
 *
 * One weft thread on one VP reads --size bytes N times; in the first two cases the data
 * is always there, so no read has to wait for it:
 *   pipe  weft_read on a pipe that holds data (refilled, untimed, whenever it runs low)
 *         against read(2) on the same kind of pipe: weft's descriptor lookup and
 *         non-blocking try on top of the call; no park.
 *   file  weft_pread of a regular file in the page cache (1 MiB, rotating offsets)
 *         against pread(2). Under the io_uring engine weft first tries preadv2 with
 *         RWF_NOWAIT, which the page cache satisfies (no request, no park); under the
 *         epoll engine a regular file is read with the plain call.
 *   park  round trips between the main thread and a partner over two pipes, each side
 *         reading before the other has written, so every read waits: two weft threads
 *         on one VP (the reader parks, the idle VP's engine wait reports the pipe
 *         readable, the reader resumes: the whole path of a parked read) against two
 *         kernel threads in blocking read(2)/write(2). ns per round trip (two parked
 *         reads and two writes).
 * Each engine the kernel allows (WEFT_IO, set before each weft_init) runs both cases.
 * Timing: N reads per run, one warm-up run, then --reps runs; ns per read, median and
 * min..max over the runs. DIR/I0.json.
 *
 * --icount CASE (weft_|plain_ + pipe|file|park; the engine from WEFT_IO):
 * one run of N reads with callgrind's collection on around the loop only (run with
 * --collect-atstart=no; a refill of the pipe is outside it too). i0_icount.sh takes N and
 * 2N and prints instructions per read. callgrind counts user-mode instructions: the
 * kernel's share of a system call is not in them, which is why the plain calls count
 * only their libc wrappers. The VP polls for 1 us (cfg.spin_us) before it sleeps in the
 * engine there, so that the park case counts the park and the wake-up rather than how
 * long the idle loop polled. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "weft/io.h"
#include "weft/weft.h"

#ifdef WEFT_BENCH_CALLGRIND
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

enum { MAX_REPS = 64, FILE_BYTES = 1 << 20, MAX_SIZE = 4096 };

typedef enum { C_PIPE, C_FILE, C_PARK } case_t;
static const char *const case_name[] = {"pipe", "file", "park"};

static long n_reads = 20000;
static int size = 64;
static char buf[MAX_SIZE];
static char fill[65536];

/* Descriptors weft's calls were given are closed with weft_close: weft caches what
 * kind of descriptor a number is (and has set O_NONBLOCK on a pipe's end), and a plain
 * close() would leave that for the next descriptor given the same number (weft/io.h). */
typedef int (*close_fn)(int);
static close_fn closer(int use_weft) { return use_weft ? weft_close : close; }

/* The pipe: rfd read by the loop, wfd refilled (untimed) when fewer than `size` bytes
 * would be left for the reads still to come in this fill. */
static int pipe_make(int p[2]) {
  if (pipe(p) != 0) return -1;
  return 0;
}

/* Writes up to one pipe capacity (64 KiB by default) into the pipe: the number of
 * reads of `size` bytes it holds. The write end stays blocking (weft sets O_NONBLOCK
 * only on descriptors its calls are given: the read end). */
static long pipe_fill(int wfd) {
  ssize_t w = write(wfd, fill, sizeof fill);
  if (w < (ssize_t)size) bench_die("weft_io_i0", "could not fill the pipe");
  return (long)(w / size);
}

static int file_make(void) {
  char path[] = "/tmp/weft_io_i0.XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) bench_die("weft_io_i0", "mkstemp failed");
  unlink(path);
  static char block[65536];
  memset(block, 'f', sizeof block);
  for (int i = 0; i < FILE_BYTES / (int)sizeof block; i++)
    if (write(fd, block, sizeof block) != (ssize_t)sizeof block) bench_die("weft_io_i0", "write of the file failed");
  /* read it once: the page cache holds it from now on */
  for (off_t off = 0; off < FILE_BYTES; off += (off_t)sizeof block)
    if (pread(fd, block, sizeof block, off) != (ssize_t)sizeof block) bench_die("weft_io_i0", "pread failed");
  return fd;
}

/* park: round trips of `size` bytes between the main thread and a partner over two
 * pipes, each side reading before the other has written, so that every read waits:
 * weft threads on one VP (the reader parks, the idle VP's engine wait reports the pipe
 * readable, the reader is resumed) or two kernel threads in blocking calls. */
static int park_p1[2], park_p2[2];
static long park_n;
static void *park_partner(void *arg) {
  int use_weft = (int)(intptr_t)arg;
  for (long i = 0; i < park_n; i++) {
    ssize_t got = use_weft ? weft_read(park_p1[0], buf, (size_t)size) : read(park_p1[0], buf, (size_t)size);
    if (got != size) bench_die("weft_io_i0", "the partner's read came back short");
    ssize_t put = use_weft ? weft_write(park_p2[1], fill, (size_t)size) : write(park_p2[1], fill, (size_t)size);
    if (put != size) bench_die("weft_io_i0", "the partner's write came back short");
  }
  return NULL;
}

static double run_park(int use_weft, long n, int collect) {
  if (pipe_make(park_p1) != 0 || pipe_make(park_p2) != 0) bench_die("weft_io_i0", "pipe failed");
  park_n = n;
  weft_thread_t *t = NULL;
  pthread_t os;
  if (use_weft) bench_check(weft_create(&t, NULL, park_partner, (void *)(intptr_t)1), "weft_create");
  else if (pthread_create(&os, NULL, park_partner, NULL) != 0) bench_die("weft_io_i0", "pthread_create failed");
  static char back[MAX_SIZE];
  if (collect) CALLGRIND_TOGGLE_COLLECT;
  double t0 = bench_now_ns();
  for (long i = 0; i < n; i++) {
    ssize_t put = use_weft ? weft_write(park_p1[1], fill, (size_t)size) : write(park_p1[1], fill, (size_t)size);
    if (put != size) bench_die("weft_io_i0", "a write came back short");
    ssize_t got = use_weft ? weft_read(park_p2[0], back, (size_t)size) : read(park_p2[0], back, (size_t)size);
    if (got != size) bench_die("weft_io_i0", "a read came back short");
  }
  double ns = bench_now_ns() - t0;
  if (collect) CALLGRIND_TOGGLE_COLLECT;
  if (use_weft) bench_check(weft_join(t, NULL), "weft_join");
  else pthread_join(os, NULL);
  for (int i = 0; i < 2; i++) {
    closer(use_weft)(park_p1[i]);
    closer(use_weft)(park_p2[i]);
  }
  return ns;
}

/* One run of n reads of case c (weft's calls or the plain ones); returns the ns spent in
 * the reads (refills excluded). collect: toggle callgrind's collection around them. */
static double run(case_t c, int use_weft, long n, int collect) {
  double ns = 0;
  if (c == C_PIPE) {
    int p[2];
    if (pipe_make(p) != 0) bench_die("weft_io_i0", "pipe failed");
    if (use_weft) {
      /* the first weft call sets O_NONBLOCK on the read end; done here, untimed */
      if (weft_read(p[0], buf, 0) < 0) bench_die("weft_io_i0", "weft_read of 0 bytes failed");
    }
    long left = 0;
    for (long i = 0; i < n;) {
      if (left == 0) left = pipe_fill(p[1]);
      long k = left < n - i ? left : n - i;
      if (collect) CALLGRIND_TOGGLE_COLLECT;
      double t0 = bench_now_ns();
      for (long r = 0; r < k; r++) {
        ssize_t got = use_weft ? weft_read(p[0], buf, (size_t)size) : read(p[0], buf, (size_t)size);
        if (got != size) bench_die("weft_io_i0", "a pipe read came back short");
      }
      ns += bench_now_ns() - t0;
      if (collect) CALLGRIND_TOGGLE_COLLECT;
      left -= k;
      i += k;
    }
    closer(use_weft)(p[0]);
    closer(use_weft)(p[1]);
    return ns;
  }
  if (c == C_PARK) return run_park(use_weft, n, collect);
  int fd = file_make();
  off_t off = 0;
  if (collect) CALLGRIND_TOGGLE_COLLECT;
  double t0 = bench_now_ns();
  for (long r = 0; r < n; r++) {
    ssize_t got = use_weft ? weft_pread(fd, buf, (size_t)size, off) : pread(fd, buf, (size_t)size, off);
    if (got != size) bench_die("weft_io_i0", "a file read came back short");
    off += size;
    if (off + size > FILE_BYTES) off = 0;
  }
  ns = bench_now_ns() - t0;
  if (collect) CALLGRIND_TOGGLE_COLLECT;
  closer(use_weft)(fd);
  return ns;
}

static int start(const char *engine, int spin_us) {
  if (engine) setenv("WEFT_IO", engine, 1);
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  cfg.spin_us = spin_us;  /* 0: the default */
  /* the system monitor's looks would land in the collected instructions */
  cfg.monitor_us = WEFT_MONITOR_OFF;
  return weft_init(&cfg);
}

static int icount(const char *what) {
  static const char *const names[] = {"weft_pipe", "plain_pipe", "weft_file", "plain_file", "weft_park",
                                      "plain_park"};
  int k = -1;
  for (int i = 0; i < 6; i++)
    if (strcmp(what, names[i]) == 0) k = i;
  if (k < 0) {
    fprintf(stderr, "weft_io_i0: --icount weft_pipe|plain_pipe|weft_file|plain_file|weft_park|plain_park\n");
    return 2;
  }
  /* the idle VP polls for cfg.spin_us before it sleeps in the engine: the shortest
   * poll, so that the count is the park and the wake-up, not how long the poll ran */
  bench_check(start(NULL, 1), "weft_init");
  run((case_t)(k / 2), k % 2 == 0, n_reads, 1);
  printf("engine=%s\nops=%ld\n", weft_io_engine(), n_reads);
  bench_check(weft_shutdown(), "weft_shutdown");
  return 0;
}

int main(int argc, char **argv) {
  const char *out = NULL, *engines = "uring,epoll", *ic = NULL;
  int reps = 5, quick = 0;
  memset(fill, 'p', sizeof fill);
  if (bench_args_has(argc, argv, "--quick")) {
    n_reads = 5000;
    reps = 3;
  }
  bench_opt_t opts[] = {
      BENCH_OPT_OUT(out, "I0.json"),
      BENCH_OPT_N(n_reads, "reads per run"),
      BENCH_OPT_REPS(reps),
      {"--size", BENCH_INT, &size, NULL, 0, "bytes per read (1..4096)"},
      {"--engines", BENCH_STR, &engines, NULL, 0, "I/O engines to run: uring,epoll"},
      {"--icount", BENCH_STR, &ic, NULL, 0, "one case under callgrind (see the header)"},
      BENCH_OPT_QUICK(quick),
  };
  bench_args(argc, argv, opts, sizeof opts / sizeof *opts, "I0: a weft read that completes at once");
  if (n_reads < 1 || reps < 1 || reps > MAX_REPS || size < 1 || size > MAX_SIZE) {
    fprintf(stderr, "weft_io_i0: --n >= 1, --reps 1..%d, --size 1..%d\n", MAX_REPS, MAX_SIZE);
    return 2;
  }
  if (ic) return icount(ic);

  bench_machine_t m;
  bench_machine_read(&m);
  bench_json_t j;
  if (out && bench_json_start(&j, out, "I0.json", &m) != 0) return 1;
  if (out) {
    bench_json_str(&j, "id", "I0");
    bench_json_obj(&j, "config");
    bench_json_int(&j, "n", n_reads);
    bench_json_int(&j, "reps", reps);
    bench_json_int(&j, "warmup_runs", 1);
    bench_json_int(&j, "size", size);
    bench_json_end(&j);
    bench_json_arr(&j, "results");
  }
  static const char *const all[] = {"uring", "epoll"};
  for (int e = 0; e < 2; e++) {
    if (!bench_list_has(engines, all[e])) continue;
    if (start(all[e], 0) != 0) {
      printf("I0 engine %s: weft_init failed, skipped\n", all[e]);
      continue;
    }
    const char *got = weft_io_engine();
    if (strcmp(got, all[e]) != 0) {  /* the kernel refused it: weft fell back */
      printf("I0 engine %s: not available here (weft chose %s), skipped\n", all[e], got);
      bench_check(weft_shutdown(), "weft_shutdown");
      continue;
    }
    for (int c = C_PIPE; c <= C_PARK; c++) {
      for (int w = 1; w >= 0; w--) {
        double v[MAX_REPS];
        for (int r = -1; r < reps; r++) {
          double ns = run((case_t)c, w, n_reads, 0);
          if (r >= 0) v[r] = ns / (double)n_reads;
        }
        double raw[MAX_REPS];
        memcpy(raw, v, sizeof(double) * (size_t)reps);
        bench_summary_t s = bench_summarize(v, reps);
        const char *lib = w ? "weft" : "plain";
        printf("I0 %-4s %-5s engine=%-5s %6.1f ns/%s [%.1f .. %.1f]\n", case_name[c], lib, all[e],
               s.median, c == C_PARK ? "round trip" : "read", s.min, s.max);
        fflush(stdout);
        if (out) {
          bench_json_record(&j, "lib", lib, 1, 0);
          bench_json_str(&j, "row", "I0");
          bench_json_str(&j, "case", case_name[c]);
          bench_json_str(&j, "engine", all[e]);
          bench_json_summary(&j, "_ns", s, 1.0);
          bench_json_nums(&j, "runs_ns", raw, reps);
          bench_json_end(&j);
        }
      }
    }
    bench_check(weft_shutdown(), "weft_shutdown");
  }
  if (out && bench_json_finish(&j) != 0) return 1;
  return 0;
}
