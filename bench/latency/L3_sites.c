/* L3_sites.c - L3 over several call sites: the same two-thread yield loop (row L3),
 * written at different places in the code, to show how much the time of a switch
 * depends on where it is called from (bench/BENCHMARKS.md, "L3 over call sites").
 *
 * Two weft threads on one VP yield to each other, as in L3: the benchmark thread runs
 * a timed loop of n weft_yield() calls at one site, the partner yields back from its
 * own loop. Time per switch = loop time / (yields of both threads), counted. The sites:
 *
 *   flat+0 .. flat+51   the loop of L3, in four functions whose code starts 0, 7, 29
 *                       and 51 bytes past a 64-byte boundary (alignment of the loop
 *                       and of the call that enters the switch)
 *   fnptr               weft_yield called through a function pointer (an indirect
 *                       call before the switch's own indirect jump)
 *   depth4              the benchmark thread yields four calls deep and returns up
 *                       the four frames after each switch; the partner stays flat
 *   depth4_both         both threads yield four calls deep
 *
 * The depth rows show the return-stack predictor at work: the switch resumes a thread
 * with pop + jmp (docs/design.md, "Context switch"), which keeps the predictor right
 * while a thread only calls, but the returns a thread makes after it resumes find the
 * other thread's return addresses on the predictor's stack, which is per core, not per
 * thread. No switch can give each thread its own: the depth rows price what a real
 * program (which blocks inside calls and returns from them) pays for it.
 *
 * The sites run interleaved (one run of each, then again, --reps times), so a drift of
 * the machine's speed spreads over all of them alike rather than landing on one.
 * Writes DIR/L3_sites.json (--out DIR): per site the median, min and max ns per switch
 * over the runs, and the runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "weft/weft.h"

static long n_yields = 200000; /* yields of the benchmark thread per timed run */

/* The partner: yields back, flat or four calls deep (partner_deep), until stop. Written
 * by the partner only (partner_yields) or by the benchmark thread while the partner
 * waits in weft_yield (the flags): one VP, so no data race. */
static long partner_yields;
static int partner_deep, partner_stop;

__attribute__((noinline)) static void yield_deep(int d) {
  if (d) {
    yield_deep(d - 1);
    __asm__ volatile("" ::: "memory"); /* not a tail call: a frame per level */
  } else {
    weft_yield();
  }
}

static void *partner(void *arg) {
  (void)arg;
  while (!partner_stop) {
    if (partner_deep) yield_deep(3);
    else weft_yield();
    partner_yields++;
  }
  return NULL;
}

/* ns per switch of one run of `loop` (which makes n_yields yields of this thread) */
static double per_switch(void (*loop)(void)) {
  long p0 = partner_yields;
  double t0 = bench_now_ns();
  loop();
  double ns = bench_now_ns() - t0;
  long switches = n_yields + (partner_yields - p0);
  return ns / (double)switches;
}

/* The flat loops: the same loop at four offsets from a 64-byte boundary (x86-64: the
 * offset is made of one-byte nops, which the loop runs through once; elsewhere the
 * four are the same loop, at the boundary). */
#if defined(__x86_64__)
#define NOPS(off) __asm__ volatile(".skip " #off ", 0x90")
#else
#define NOPS(off) ((void)0)
#endif
#define FLAT(off)                                                      \
  __attribute__((noinline, aligned(64))) static void flat_##off(void) { \
    NOPS(off);                                                         \
    for (long i = 0; i < n_yields; i++) weft_yield();                  \
  }
__attribute__((noinline, aligned(64))) static void flat_0(void) {
  for (long i = 0; i < n_yields; i++) weft_yield();
}
FLAT(7)
FLAT(29)
FLAT(51)

static void (*volatile yield_ptr)(void) = weft_yield;
__attribute__((noinline)) static void fnptr(void) {
  for (long i = 0; i < n_yields; i++) yield_ptr();
}

__attribute__((noinline)) static void depth4(void) {
  for (long i = 0; i < n_yields; i++) yield_deep(3);
}

typedef struct site {
  const char *name;
  void (*loop)(void);
  int partner_deep;
} site_t;

static const site_t sites[] = {
    {"flat+0", flat_0, 0},  {"flat+7", flat_7, 0}, {"flat+29", flat_29, 0},
    {"flat+51", flat_51, 0}, {"fnptr", fnptr, 0},  {"depth4", depth4, 0},
    {"depth4_both", depth4, 1},
};
enum { NSITES = sizeof sites / sizeof *sites, MAX_REPS = 100 };

int main(int argc, char **argv) {
  const char *out = NULL;
  int reps = 11, quick = 0;
  if (bench_args_has(argc, argv, "--quick")) {
    reps = 5;
    n_yields = 100000;
  }
  const bench_opt_t opts[] = {
      BENCH_OPT_OUT(out, "L3_sites.json"),
      BENCH_OPT_REPS(reps),
      BENCH_OPT_N(n_yields, "yields of the benchmark thread per timed run"),
      BENCH_OPT_QUICK(quick),
  };
  bench_args(argc, argv, opts, 4, "L3 over call sites: a two-thread yield loop at several sites");
  if (reps < 1 || reps > MAX_REPS || n_yields < 1)
    bench_die(argv[0], "--reps must be 1..100 and --n at least 1");

  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  bench_check(weft_init(&cfg), "weft_init");
  weft_thread_t *p;
  bench_check(weft_create(&p, NULL, partner, NULL), "weft_create");
  weft_yield(); /* let the partner start */

  static double v[NSITES][MAX_REPS];
  for (int k = 0; k < NSITES; k++) { /* warm-up: one run of each */
    partner_deep = sites[k].partner_deep;
    (void)per_switch(sites[k].loop);
  }
  for (int r = 0; r < reps; r++)
    for (int k = 0; k < NSITES; k++) {
      partner_deep = sites[k].partner_deep;
      v[k][r] = per_switch(sites[k].loop);
    }
  partner_stop = 1;
  bench_check(weft_join(p, NULL), "weft_join");
  bench_check(weft_shutdown(), "weft_shutdown");

  bench_machine_t m;
  bench_machine_read(&m);
  bench_json_t j;
  if (out && bench_json_start(&j, out, "L3_sites.json", &m) != 0) return 2;
  if (out) {
    bench_json_obj(&j, "config");
    bench_json_int(&j, "n", n_yields);
    bench_json_int(&j, "reps", reps);
    bench_json_int(&j, "nvps", 1);
    bench_json_end(&j);
    bench_json_arr(&j, "results");
  }
  printf("%-12s %s\n", "site", "ns per switch: median (min..max)");
  for (int k = 0; k < NSITES; k++) {
    double runs[MAX_REPS];
    memcpy(runs, v[k], sizeof(double) * (size_t)reps);
    bench_summary_t s = bench_summarize(v[k], reps);
    printf("%-12s %.2f (%.2f..%.2f)\n", sites[k].name, s.median, s.min, s.max);
    if (out) {
      bench_json_obj(&j, NULL);
      bench_json_str(&j, "site", sites[k].name);
      bench_json_summary(&j, "_ns", s, 1.0);
      bench_json_nums(&j, "ns", runs, reps);
      bench_json_end(&j);
    }
  }
  if (out && bench_json_finish(&j) != 0) return 2;
  return 0;
}
