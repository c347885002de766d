/* bench_common.h - small helpers shared by the benchmark programs (C and C++):
 * a monotonic clock, the machine's identity, VmRSS, and summary statistics. */
#ifndef WEFT_BENCH_COMMON_H
#define WEFT_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/utsname.h>

static inline double bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The machine a result was measured on: CPU model, online CPUs, kernel release. */
typedef struct bench_machine {
  char model[128];
  int cores;
  char kernel[128];
} bench_machine_t;

static inline void bench_machine_read(bench_machine_t *m) {
  snprintf(m->model, sizeof m->model, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      const char *v = strchr(line, ':');
      if (v) {
        v += 1 + (v[1] == ' ');
        snprintf(m->model, sizeof m->model, "%.*s", (int)strcspn(v, "\n"), v);
      }
      break;
    }
  }
  if (f) fclose(f);
  m->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  struct utsname u;
  snprintf(m->kernel, sizeof m->kernel, "%s", uname(&u) == 0 ? u.release : "unknown");
}

static inline void bench_machine_json(FILE *out, const bench_machine_t *m) {
  fprintf(out, "{\"cpu_model\": \"%s\", \"cores\": %d, \"kernel\": \"%s\"}", m->model, m->cores,
          m->kernel);
}

/* The field `name` ("VmRSS", "VmHWM", ...) of /proc/self/status in KiB, or -1. */
static inline long bench_status_kib(const char *name) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  size_t len = strlen(name);
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, name, len) == 0 && line[len] == ':' &&
        sscanf(line + len + 1, "%ld", &kib) == 1)
      break;
  if (f) fclose(f);
  return kib;
}

/* VmRSS of this process in KiB, or -1. */
static inline long bench_rss_kib(void) { return bench_status_kib("VmRSS"); }

/* Peak resident set of this process so far (VmHWM) in KiB, or -1. */
static inline long bench_peak_rss_kib(void) { return bench_status_kib("VmHWM"); }

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median, minimum and maximum of v[0..n) (n >= 1); v is sorted in place. */
typedef struct bench_summary { double median, min, max; } bench_summary_t;

static inline bench_summary_t bench_summarize(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  bench_summary_t s;
  s.min = v[0];
  s.max = v[n - 1];
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return s;
}

/* bench_parse_ints() parses "1,2,4" into v (at most max values); returns the count. */
static inline int bench_parse_ints(const char *s, int *v, int max) {
  int n = 0;
  while (*s && n < max) {
    v[n++] = atoi(s);
    s += strcspn(s, ",");
    s += *s == ',';
  }
  return n;
}

/* bench_list_has() says whether the comma-separated list names word. */
static inline int bench_list_has(const char *list, const char *word) {
  size_t w = strlen(word);
  for (const char *s = list; (s = strstr(s, word)) != NULL; s += w)
    if ((s == list || s[-1] == ',') && (s[w] == ',' || s[w] == 0)) return 1;
  return 0;
}

#ifdef WEFT_ERROR_H
/* bench_check() exits with status 2 and a message naming the call when a weft call
 * failed (include weft/weft.h before this header to get it). */
static inline void bench_check(int rc, const char *what) {
  if (rc != 0) {
    fprintf(stderr, "%s failed: %s\n", what, weft_strerror(rc));
    exit(2);
  }
}
#endif

#endif
