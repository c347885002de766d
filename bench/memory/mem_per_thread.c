/* mem_per_thread.c - memory per created-but-unstarted weft thread.
 *
 * Measured: VmRSS (from /proc/self/status) before and after creating N = 1,000,000
 * joinable threads on one VP (nvps=1) that the creator, never yielding, leaves
 * unstarted; (after - before) / N. The handle array is allocated and touched before
 * the first reading, so it is not counted. weft binds a stack only when a thread first
 * runs, so this is the control block (plus allocator overhead). The threads are then
 * joined (they run an empty body) and weft is shut down.
 *
 * usage: weft_mem_per_thread [--n N] [--out DIR]   (writes DIR/memory.json if --out) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench_common.h"
#include "weft/weft.h"

static void check(int rc, const char *what) {
  if (rc != 0) {
    fprintf(stderr, "%s failed: %s\n", what, weft_strerror(rc));
    exit(2);
  }
}

static void *empty_body(void *arg) { return arg; }

int main(int argc, char **argv) {
  long n = 1000000;
  const char *out = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--n")) n = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--out")) out = argv[i + 1];
  }
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  check(weft_init(&cfg), "weft_init");

  weft_thread_t **t = malloc((size_t)n * sizeof *t);
  if (!t) return 2;
  memset(t, 0, (size_t)n * sizeof *t);
  long before = bench_rss_kib();
  for (long i = 0; i < n; i++) check(weft_create(&t[i], NULL, empty_body, NULL), "weft_create");
  long after = bench_rss_kib();
  for (long i = 0; i < n; i++) check(weft_join(t[i], NULL), "weft_join");
  long joined = bench_rss_kib();
  check(weft_shutdown(), "weft_shutdown");
  free(t);

  double per = (double)(after - before) * 1024.0 / (double)n;
  bench_machine_t m;
  bench_machine_read(&m);
  printf("machine: %s, %d cores, Linux %s\n", m.model, m.cores, m.kernel);
  printf("weft: %ld unstarted threads: VmRSS %ld -> %ld KiB: %.1f bytes per thread"
         " (after joining them all: %ld KiB)\n", n, before, after, per, joined);
  if (out) {
    mkdir(out, 0777);
    char path[4096];
    snprintf(path, sizeof path, "%s/memory.json", out);
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); return 2; }
    fprintf(f, "{\"machine\": ");
    bench_machine_json(f, &m);
    fprintf(f, ", \"lib\": \"weft\", \"threads\": %ld, \"rss_before_kib\": %ld, "
               "\"rss_after_kib\": %ld, \"rss_after_join_kib\": %ld, \"bytes_per_thread\": %.1f}\n",
            n, before, after, joined, per);
    fclose(f);
  }
  return 0;
}
