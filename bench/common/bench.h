/* bench.h - the benchmark harness library (bench/common/bench.c), used by every C and
 * C++ benchmark program of bench/: a nanosecond clock, the machine's identity, VmRSS,
 * summary statistics, one command-line convention, comma-separated lists, CPU pinning,
 * the calibration loop of busy work, a JSON writer, and bench_check() for weft calls.
 *
 * Command-line convention (bench_args): every option is `--name VALUE` (or a bare
 * `--flag`), results go to `--out DIR` as DIR/<ROW>.json, `--quick` selects the demo's
 * small sizes where a program has them, `--help` prints the option table. A bad option
 * or value prints the usage and exits with status 2. */
#ifndef WEFT_BENCH_H
#define WEFT_BENCH_H

#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- time ---- */

/* CLOCK_MONOTONIC in nanoseconds. */
double bench_now_ns(void);

/* ---- errors ---- */

#define BENCH_NORETURN __attribute__((noreturn))

/* Prints "what failed: <weft's message> (<code name>)" and exits with status 2 (in
 * bench_check.c, the one part of the library that needs weft). */
BENCH_NORETURN void bench_check_failed(int rc, const char *what);

/* Exits with status 2 and a message naming `what` when a weft call returned rc != 0 (a
 * benchmark cannot go on with a thread or lock it did not get). Inline: the test is all
 * a timed or counted loop pays. */
static inline void bench_check(int rc, const char *what) {
  if (__builtin_expect(rc != 0, 0)) bench_check_failed(rc, what);
}

/* Prints "what: message" to stderr and exits with status 2. */
BENCH_NORETURN void bench_die(const char *what, const char *message);

/* ---- the machine ---- */

/* The machine a result was measured on: CPU model, online CPUs, kernel release. */
typedef struct bench_machine {
  char model[128];
  int cores;
  char kernel[128];
} bench_machine_t;

void bench_machine_read(bench_machine_t *m);

/* The field `name` ("VmRSS", "VmHWM", ...) of /proc/self/status in KiB, or -1. */
long bench_status_kib(const char *name);
/* VmRSS of this process in KiB, or -1. */
long bench_rss_kib(void);
/* Peak resident set of this process so far (VmHWM) in KiB, or -1. */
long bench_peak_rss_kib(void);

/* ---- statistics ---- */

/* Median, minimum and maximum of v[0..n) (n >= 1); v is sorted in place. */
typedef struct bench_summary {
  double median, min, max;
} bench_summary_t;

bench_summary_t bench_summarize(double *v, int n);
/* qsort comparison of doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);

/* ---- command line ---- */

typedef enum bench_opt_kind {
  BENCH_INT,    /* int *value */
  BENCH_LONG,   /* long *value */
  BENCH_DOUBLE, /* double *value */
  BENCH_STR,    /* const char **value */
  BENCH_FLAG,   /* int *value, set to 1; takes no argument */
  BENCH_INTS,   /* int value[max], *count set: "1,2,4" ("" = none) */
  BENCH_LONGS,  /* long value[max], *count set */
  BENCH_DOUBLES /* double value[max], *count set: "0,0.5,2" */
} bench_opt_kind_t;

typedef struct bench_opt {
  const char *name; /* "--reps" */
  bench_opt_kind_t kind;
  void *value;
  int *count; /* lists: the number of values parsed */
  int max;    /* lists: the capacity of value */
  const char *help;
} bench_opt_t;

/* Parses argv[1..argc) against opts[0..n). Unknown options, missing or malformed values
 * and lists longer than max print a message and the usage (`about`, then the table) and
 * exit with status 2; `--help` prints the usage and exits with 0. */
void bench_args(int argc, char **argv, const bench_opt_t *opts, int n, const char *about);

/* The options most programs share (entries of a bench_opt_t table). */
#define BENCH_OPT_OUT(var, files) {"--out", BENCH_STR, &(var), NULL, 0, "write DIR/" files}
#define BENCH_OPT_REPS(var) {"--reps", BENCH_INT, &(var), NULL, 0, "timed runs after one warm-up"}
#define BENCH_OPT_PROCS(arr, count, max) \
  {"--procs", BENCH_INTS, (arr), &(count), (max), "processor (VP) counts P (1..cores)"}
#define BENCH_OPT_N(var, what) {"--n", BENCH_LONG, &(var), NULL, 0, what}
#define BENCH_OPT_QUICK(var) \
  {"--quick", BENCH_FLAG, &(var), NULL, 0, "the demo's small sizes (options after it still count)"}

/* Whether argv holds the bare option `name` (to apply a mode such as --quick before
 * bench_args, so that explicit options still override it). */
int bench_args_has(int argc, char **argv, const char *name);

/* Parses "1,2,4" into v (at most max values); returns the count, or -1 when an item is
 * not a whole number or there are more than max. "" gives 0. */
int bench_parse_ints(const char *s, int *v, int max);
int bench_parse_longs(const char *s, long *v, int max);
int bench_parse_doubles(const char *s, double *v, int max);

/* Whether the comma-separated list names word. */
int bench_list_has(const char *list, const char *word);

/* ---- CPU pinning ---- */

/* The first min(p, allowed) CPUs the calling thread may use (its affinity now). */
cpu_set_t bench_cpus_first(int p);
/* The i-th CPU the calling thread may use, wrapping around (i >= 0). A program that
 * pins its threads (weft's cfg.pin) reads these before it does. */
int bench_cpu_nth(int i);
/* A CPU this thread may use other than `cpu` (cpu itself when there is none). */
int bench_other_cpu(int cpu);
/* Pins the calling thread to `cpu` (cpu < 0: the CPU it runs on now); returns 0 or an
 * error number. */
int bench_pin_self(int cpu);
/* Saves / restores the calling thread's affinity. */
void bench_affinity_save(cpu_set_t *saved);
void bench_affinity_restore(const cpu_set_t *saved);
/* Starts a pthread running fn(arg) pinned to `cpu`; exits on failure. */
pthread_t bench_start_pinned(int cpu, void *(*fn)(void *), void *arg);

/* ---- calibration of busy work ---- */

/* Units of `work` per microsecond: `work(units)` is run with units growing by 4x until
 * one run takes 20 ms, then 5 times at that size; the best (fastest) of the 5 counts,
 * since being preempted only makes a timing slower. */
double bench_calibrate(void (*work)(long units));

/* ---- JSON ---- */

/* A JSON writer: values are written with their key (key NULL inside an array or at the
 * top), commas and nesting are handled by the writer. */
#define BENCH_JSON_DEPTH 16
typedef struct bench_json {
  FILE *f;
  char path[4096];
  int depth;
  int count[BENCH_JSON_DEPTH];
  char close[BENCH_JSON_DEPTH];
} bench_json_t;

/* Creates DIR (one level) and opens DIR/file; returns 0, or -1 with a message. */
int bench_json_open(bench_json_t *j, const char *dir, const char *file);
/* Writes to an open stream instead (stdout: a program whose caller reads its output);
 * bench_json_close() then only ends the line. */
void bench_json_stream(bench_json_t *j, FILE *f);
/* Closes the file and prints "wrote PATH"; returns 0 or -1. */
int bench_json_close(bench_json_t *j);
void bench_json_obj(bench_json_t *j, const char *key); /* { */
void bench_json_arr(bench_json_t *j, const char *key); /* [ */
void bench_json_end(bench_json_t *j);                  /* } or ] */
void bench_json_str(bench_json_t *j, const char *key, const char *v);
void bench_json_num(bench_json_t *j, const char *key, double v); /* NaN/inf: null */
void bench_json_int(bench_json_t *j, const char *key, long v);
void bench_json_bool(bench_json_t *j, const char *key, int v);
void bench_json_nums(bench_json_t *j, const char *key, const double *v, int n);
/* {"cpu_model", "cores", "kernel"} to a stream (the writers that print whole records
 * with fprintf) */
void bench_machine_json(FILE *out, const bench_machine_t *m);
/* {"cpu_model", "cores", "kernel"} */
void bench_json_machine(bench_json_t *j, const char *key, const bench_machine_t *m);
/* bench_json_open, then the top object with "machine": the start of every results file. */
int bench_json_start(bench_json_t *j, const char *dir, const char *file, const bench_machine_t *m);
/* Ends every open object and array, then bench_json_close. */
int bench_json_finish(bench_json_t *j);
/* Opens a result record: {"<lib_key>": lib, "P": p, "oversubscribed": oversubscribed
 * (P beyond the machine's cores, or a point the program labels so). */
void bench_json_record(bench_json_t *j, const char *lib_key, const char *lib, int p, int oversubscribed);
/* "median_s", "min_s", "max_s" of s and "seconds": v[0..n) (the runs, in seconds). */
void bench_json_times(bench_json_t *j, bench_summary_t s, const double *v, int n);
/* "median<suffix>", "min<suffix>", "max<suffix>" of s, each times scale. */
void bench_json_summary(bench_json_t *j, const char *suffix, bench_summary_t s, double scale);

#ifdef __cplusplus
}
#endif

#endif
