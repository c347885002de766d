/* bench.c - the benchmark harness library (see bench.h). */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>


double bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

void bench_die(const char *what, const char *message) {
  fprintf(stderr, "%s: %s\n", what, message);
  exit(2);
}

/* ---- the machine ---- */

void bench_machine_read(bench_machine_t *m) {
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

long bench_status_kib(const char *name) {
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

long bench_rss_kib(void) { return bench_status_kib("VmRSS"); }
long bench_peak_rss_kib(void) { return bench_status_kib("VmHWM"); }

/* ---- statistics ---- */

int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

bench_summary_t bench_summarize(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  bench_summary_t s;
  s.min = v[0];
  s.max = v[n - 1];
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return s;
}

/* ---- command line ---- */

static int parse_list(const char *s, void *v, int is_long, int max) {
  int n = 0;
  while (*s) {
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (end == s || (*end && *end != ',') || errno || n >= max) return -1;
    if (is_long) ((long *)v)[n++] = x;
    else if (x < -2147483647L - 1 || x > 2147483647L) return -1;
    else ((int *)v)[n++] = (int)x;
    s = *end ? end + 1 : end;
  }
  return n;
}

int bench_parse_ints(const char *s, int *v, int max) { return parse_list(s, v, 0, max); }
int bench_parse_longs(const char *s, long *v, int max) { return parse_list(s, v, 1, max); }

int bench_parse_doubles(const char *s, double *v, int max) {
  int n = 0;
  while (*s) {
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || (*end && *end != ',') || errno || n >= max) return -1;
    v[n++] = x;
    s = *end ? end + 1 : end;
  }
  return n;
}

int bench_list_has(const char *list, const char *word) {
  size_t w = strlen(word);
  for (const char *s = list; (s = strstr(s, word)) != NULL; s += w)
    if ((s == list || s[-1] == ',') && (s[w] == ',' || s[w] == 0)) return 1;
  return 0;
}

static void usage(FILE *to, const char *prog, const bench_opt_t *opts, int n, const char *about) {
  fprintf(to, "usage: %s [options]\n", prog);
  if (about) fprintf(to, "%s\n", about);
  static const char *const arg[] = {"N", "N", "X", "S", "", "N,N,...", "N,N,...", "X,X,..."};
  for (int i = 0; i < n; i++)
    fprintf(to, "  %-14s %-8s %s\n", opts[i].name, arg[opts[i].kind],
            opts[i].help ? opts[i].help : "");
}

static void bad(char **argv, const bench_opt_t *opts, int n, const char *about, const char *what,
                const char *opt) {
  fprintf(stderr, "%s: %s %s\n", argv[0], what, opt);
  usage(stderr, argv[0], opts, n, about);
  exit(2);
}

void bench_args(int argc, char **argv, const bench_opt_t *opts, int n, const char *about) {
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i];
    if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
      usage(stdout, argv[0], opts, n, about);
      exit(0);
    }
    const bench_opt_t *o = NULL;
    for (int j = 0; j < n && !o; j++)
      if (!strcmp(k, opts[j].name)) o = &opts[j];
    if (!o) bad(argv, opts, n, about, "unknown option", k);
    if (o->kind == BENCH_FLAG) {
      *(int *)o->value = 1;
      continue;
    }
    if (i + 1 >= argc) bad(argv, opts, n, about, "missing value for", k);
    const char *v = argv[++i];
    char *end = NULL;
    errno = 0;
    switch (o->kind) {
    case BENCH_INT: {
      long x = strtol(v, &end, 10);
      if (x < -2147483647L - 1 || x > 2147483647L) errno = ERANGE;
      *(int *)o->value = (int)x;
      break;
    }
    case BENCH_LONG: *(long *)o->value = strtol(v, &end, 10); break;
    case BENCH_DOUBLE: *(double *)o->value = strtod(v, &end); break;
    case BENCH_STR: *(const char **)o->value = v; break;
    case BENCH_INTS:
    case BENCH_LONGS: {
      int c = parse_list(v, o->value, o->kind == BENCH_LONGS, o->max);
      if (c < 0) bad(argv, opts, n, about, "bad list (whole numbers, at most the capacity) for", k);
      *o->count = c;
      break;
    }
    case BENCH_DOUBLES: {
      int c = bench_parse_doubles(v, o->value, o->max);
      if (c < 0) bad(argv, opts, n, about, "bad list (numbers, at most the capacity) for", k);
      *o->count = c;
      break;
    }
    case BENCH_FLAG: break;
    }
    if (end && (end == v || *end || errno)) bad(argv, opts, n, about, "bad number for", k);
  }
}

int bench_args_has(int argc, char **argv, const char *name) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], name)) return 1;
  return 0;
}

/* ---- CPU pinning ---- */

cpu_set_t bench_cpus_first(int p) {
  cpu_set_t all, set;
  sched_getaffinity(0, sizeof all, &all);
  CPU_ZERO(&set);
  for (int c = 0, got = 0; c < CPU_SETSIZE && got < p; c++)
    if (CPU_ISSET(c, &all)) CPU_SET(c, &set), got++;
  return set;
}

int bench_cpu_nth(int i) {
  cpu_set_t all;
  sched_getaffinity(0, sizeof all, &all);
  int count = CPU_COUNT(&all);
  if (count == 0) return 0;
  i %= count;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &all) && i-- == 0) return c;
  return 0;
}

int bench_other_cpu(int cpu) {
  cpu_set_t s;
  pthread_getaffinity_np(pthread_self(), sizeof s, &s);
  for (int i = 0; i < CPU_SETSIZE; i++)
    if (i != cpu && CPU_ISSET(i, &s)) return i;
  return cpu;
}

int bench_pin_self(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu < 0 ? sched_getcpu() : cpu, &one);
  return pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

void bench_affinity_save(cpu_set_t *saved) {
  pthread_getaffinity_np(pthread_self(), sizeof *saved, saved);
}

void bench_affinity_restore(const cpu_set_t *saved) {
  pthread_setaffinity_np(pthread_self(), sizeof *saved, saved);
}

pthread_t bench_start_pinned(int cpu, void *(*fn)(void *), void *arg) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setaffinity_np(&attr, sizeof one, &one);
  pthread_t t;
  int rc = pthread_create(&t, &attr, fn, arg);
  if (rc != 0) bench_die("pthread_create", strerror(rc));
  pthread_attr_destroy(&attr);
  return t;
}

/* ---- calibration ---- */

double bench_calibrate(void (*work)(long units)) {
  long units = 1000;
  for (;;) {
    double t0 = bench_now_ns();
    work(units);
    if (bench_now_ns() - t0 > 20e6) break;
    units *= 4;
  }
  double best = 0;
  for (int i = 0; i < 5; i++) {
    double t0 = bench_now_ns();
    work(units);
    double u = (double)units / ((bench_now_ns() - t0) / 1000);
    if (u > best) best = u;
  }
  return best;
}

/* ---- JSON ---- */

static void json_sep(bench_json_t *j, const char *key) {
  if (j->depth > 0 && j->count[j->depth - 1]++ > 0) fputc(',', j->f);
  if (j->depth > 0) fprintf(j->f, "\n%*s", j->depth, "");
  if (key) {
    fputc('"', j->f);
    for (const char *c = key; *c; c++) fputc(*c, j->f);
    fputs("\": ", j->f);
  }
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
    else if (*c == '\n') fputs("\\n", f);
    else if (*c < 0x20) fprintf(f, "\\u%04x", *c);
    else fputc(*c, f);
  }
  fputc('"', f);
}

int bench_json_open(bench_json_t *j, const char *dir, const char *file) {
  memset(j, 0, sizeof *j);
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    perror(dir);
    return -1;
  }
  snprintf(j->path, sizeof j->path, "%s/%s", dir, file);
  j->f = fopen(j->path, "w");
  if (!j->f) {
    perror(j->path);
    return -1;
  }
  return 0;
}

void bench_json_stream(bench_json_t *j, FILE *f) {
  memset(j, 0, sizeof *j);
  j->f = f;
}

int bench_json_close(bench_json_t *j) {
  fputc('\n', j->f);
  if (!j->path[0]) return fflush(j->f) == 0 ? 0 : -1;
  int bad = ferror(j->f) | fclose(j->f);
  j->f = NULL;
  if (bad) {
    fprintf(stderr, "writing %s failed\n", j->path);
    return -1;
  }
  printf("wrote %s\n", j->path);
  return 0;
}

static void json_open(bench_json_t *j, const char *key, char c) {
  json_sep(j, key);
  fputc(c, j->f);
  if (j->depth + 1 >= BENCH_JSON_DEPTH) bench_die("bench_json", "nested too deep");
  j->close[j->depth] = c == '{' ? '}' : ']';
  j->count[j->depth++] = 0;
}

void bench_json_obj(bench_json_t *j, const char *key) { json_open(j, key, '{'); }
void bench_json_arr(bench_json_t *j, const char *key) { json_open(j, key, '['); }

void bench_json_end(bench_json_t *j) {
  if (j->depth == 0) bench_die("bench_json", "end without an open object or array");
  j->depth--;
  if (j->count[j->depth] > 0) fprintf(j->f, "\n%*s", j->depth, "");
  fputc(j->close[j->depth], j->f);
}

void bench_json_str(bench_json_t *j, const char *key, const char *v) {
  json_sep(j, key);
  json_string(j->f, v);
}

void bench_json_num(bench_json_t *j, const char *key, double v) {
  json_sep(j, key);
  if (isfinite(v)) fprintf(j->f, "%.9g", v);
  else fputs("null", j->f);
}

void bench_json_int(bench_json_t *j, const char *key, long v) {
  json_sep(j, key);
  fprintf(j->f, "%ld", v);
}

void bench_json_bool(bench_json_t *j, const char *key, int v) {
  json_sep(j, key);
  fputs(v ? "true" : "false", j->f);
}

void bench_json_nums(bench_json_t *j, const char *key, const double *v, int n) {
  json_sep(j, key);
  fputc('[', j->f);
  for (int i = 0; i < n; i++) {
    if (i) fputs(", ", j->f);
    if (isfinite(v[i])) fprintf(j->f, "%.9g", v[i]);
    else fputs("null", j->f);
  }
  fputc(']', j->f);
}

void bench_machine_json(FILE *out, const bench_machine_t *m) {
  fputs("{\"cpu_model\": ", out);
  json_string(out, m->model);
  fprintf(out, ", \"cores\": %d, \"kernel\": ", m->cores);
  json_string(out, m->kernel);
  fputc('}', out);
}

void bench_json_machine(bench_json_t *j, const char *key, const bench_machine_t *m) {
  bench_json_obj(j, key);
  bench_json_str(j, "cpu_model", m->model);
  bench_json_int(j, "cores", m->cores);
  bench_json_str(j, "kernel", m->kernel);
  bench_json_end(j);
}

int bench_json_start(bench_json_t *j, const char *dir, const char *file, const bench_machine_t *m) {
  if (bench_json_open(j, dir, file) != 0) return -1;
  bench_json_obj(j, NULL);
  bench_json_machine(j, "machine", m);
  return 0;
}

int bench_json_finish(bench_json_t *j) {
  while (j->depth > 0) bench_json_end(j);
  return bench_json_close(j);
}

void bench_json_record(bench_json_t *j, const char *lib_key, const char *lib, int p, int oversubscribed) {
  bench_json_obj(j, NULL);
  bench_json_str(j, lib_key, lib);
  bench_json_int(j, "P", p);
  bench_json_bool(j, "oversubscribed", oversubscribed);
}

void bench_json_times(bench_json_t *j, bench_summary_t s, const double *v, int n) {
  bench_json_summary(j, "_s", s, 1);
  bench_json_nums(j, "seconds", v, n);
}

void bench_json_summary(bench_json_t *j, const char *suffix, bench_summary_t s, double scale) {
  char k[64];
  snprintf(k, sizeof k, "median%s", suffix);
  bench_json_num(j, k, s.median * scale);
  snprintf(k, sizeof k, "min%s", suffix);
  bench_json_num(j, k, s.min * scale);
  snprintf(k, sizeof k, "max%s", suffix);
  bench_json_num(j, k, s.max * scale);
}
