/* examples/monitor_delay.c - how long a ready thread waits behind a thread that
 * blocks in the kernel without telling weft (the system monitor, docs/design.md
 * "The system monitor").
 *
 *   weft_example_monitor_delay [rounds] [bound_us]
 *
 * One VP. Two cases, `rounds` times each:
 *   queued:  a thread is ready in the VP's queue when the running thread calls
 *            usleep(); measured: from just before the usleep to when the ready
 *            thread runs (on a spare VP).
 *   late:    the VP's only thread sleeps in usleep() with nothing queued; a plain
 *            OS thread then signals a semaphore a weft thread waits on; measured: from
 *            the post to when that thread runs. The monitor looks less often while no
 *            queue holds a thread (up to every 10 ms), so this case waits
 *            longer.
 *   calm:    rounds / 10 times (at least 5): two threads yield to each other for
 *            300 ms, long enough for the monitor to back off to its slow period,
 *            then one of them sleeps in usleep() (50 ms); measured: from just before
 *            the usleep to when the other runs (the monitor sees the stall at its
 *            first look after it: up to one slow period, 10 ms).
 * Prints the median, 90th percentile and maximum of each, then what the monitor
 * costs: the CPU time of its kernel thread ("weft-monitor") while two threads
 * yield to each other for half a second (a queue that is never empty: the monitor
 * looks every half bound all along). bound_us: the monitor's
 * bound (weft_config_t.monitor_us; default 20, -1: off, then the waits last as long
 * as the usleep).
 */
#define _DEFAULT_SOURCE /* usleep */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/weft.h>

#define BLOCK_US 3000

static uint64_t t_block, t_ran;
static weft_sem_t sem;
static _Atomic int blocker_in;

static void *blocker(void *arg) {
  (void)arg;
  t_block = weft_time_now();
  blocker_in = 1;
  usleep(BLOCK_US);  /* unannounced: the VP's kernel thread sleeps */
  return NULL;
}

static void *waiter(void *arg) {
  (void)arg;
  weft_sem_wait(&sem);
  t_ran = weft_time_now();
  return NULL;
}

static void *poster(void *arg) {
  uint64_t *t_post = arg;
  while (!blocker_in) usleep(50);
  usleep(BLOCK_US / 3);  /* well inside the usleep */
  *t_post = weft_time_now();
  weft_sem_signal(&sem);
  return NULL;
}

/* CPU time (ns) of this process's kernel thread named `name`, or 0. */
static uint64_t thread_cpu_ns(const char *name) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return 0;
  struct dirent *e;
  uint64_t ns = 0;
  while ((e = readdir(d)) != NULL) {
    char path[300], buf[64];
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    int match = fgets(buf, sizeof buf, f) && strncmp(buf, name, strlen(name)) == 0;
    fclose(f);
    if (!match) continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
    f = fopen(path, "r");
    if (f) {
      unsigned long long v = 0;
      if (fscanf(f, "%llu", &v) == 1) ns = v;
      fclose(f);
    }
  }
  closedir(d);
  return ns;
}

static _Atomic int pingpong_stop;
static void *yielder(void *arg) {
  long *n = arg;
  while (!pingpong_stop) {
    weft_yield();
    (*n)++;
  }
  return NULL;
}

/* calm: yields until calm_stop, then (the first of the two to see it) sleeps */
static _Atomic int calm_stop, calm_slept;
static uint64_t calm_block, calm_ran;
static void *calm_thread(void *arg) {
  (void)arg;
  while (!calm_stop) weft_yield();
  if (!atomic_exchange(&calm_slept, 1)) {
    calm_block = weft_time_now();
    usleep(50000);  /* unannounced, the other thread queued behind it */
  } else {
    calm_ran = weft_time_now();
  }
  return NULL;
}

static int cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void report(const char *name, uint64_t *d, int n) {
  qsort(d, (size_t)n, sizeof *d, cmp);
  printf("%-7s rounds %d  median %6.1f us  p90 %6.1f us  max %6.1f us\n", name, n,
         (double)d[n / 2] / 1e3, (double)d[(n * 9) / 10] / 1e3, (double)d[n - 1] / 1e3);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 200;
  if (rounds < 1) rounds = 1;
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  cfg.monitor_us = argc > 2 ? atoi(argv[2]) : 0;
  int rc = weft_init(&cfg);
  if (rc) {
    fprintf(stderr, "weft_init: %s\n", weft_err_name(rc));
    return 1;
  }
  uint64_t *queued = calloc((size_t)rounds, sizeof *queued);
  uint64_t *late = calloc((size_t)rounds, sizeof *late);
  if (!queued || !late) return 1;
  for (int i = 0; i < rounds; i++) {
    weft_thread_t *b;
    weft_create(&b, NULL, blocker, NULL);
    weft_yield();  /* the blocker runs and sleeps; we are queued behind it */
    queued[i] = weft_time_now() - t_block;
    weft_join(b, NULL);
  }
  weft_sem_init(&sem, 0);
  for (int i = 0; i < rounds; i++) {
    uint64_t t_post = 0;
    blocker_in = 0;
    weft_thread_t *w, *b;
    pthread_t os;
    weft_create(&b, NULL, blocker, NULL);
    weft_create(&w, NULL, waiter, NULL);  /* the newest runs first: it waits on sem */
    pthread_create(&os, NULL, poster, &t_post);
    weft_join(b, NULL);  /* we wait blocked: nothing ready on the VP until the post */
    weft_join(w, NULL);
    pthread_join(os, NULL);
    late[i] = t_ran - t_post;
  }
  weft_sem_destroy(&sem);
  long n1 = 0, n2 = 0;
  weft_thread_t *y1, *y2;
  uint64_t c0 = thread_cpu_ns("weft-monitor"), w0 = weft_time_now();
  weft_create(&y1, NULL, yielder, &n1);
  weft_create(&y2, NULL, yielder, &n2);
  while (weft_time_now() - w0 < 500000000u) weft_yield();
  pingpong_stop = 1;
  weft_join(y1, NULL);
  weft_join(y2, NULL);
  uint64_t c1 = thread_cpu_ns("weft-monitor"), w1 = weft_time_now();
  int ncalm = rounds / 10 < 5 ? 5 : rounds / 10;
  uint64_t *calm = calloc((size_t)ncalm, sizeof *calm);
  if (!calm) return 1;
  for (int i = 0; i < ncalm; i++) {
    calm_stop = calm_slept = 0;
    weft_thread_t *a, *b;
    weft_create(&a, NULL, calm_thread, NULL);
    weft_create(&b, NULL, calm_thread, NULL);
    uint64_t t0 = weft_time_now();
    while (weft_time_now() - t0 < 300000000u) weft_yield();
    calm_stop = 1;
    weft_join(a, NULL);
    weft_join(b, NULL);
    calm[i] = calm_ran > calm_block ? calm_ran - calm_block : 0;
  }
  weft_monitor_info_t mi;
  weft_monitor_info(&mi);
  printf("monitor bound %ld us, stalls %llu, spares started %llu\n", mi.bound_us, mi.stalls,
         mi.spares_started);
  report("queued", queued, rounds);
  report("late", late, rounds);
  report("calm", calm, ncalm);
  printf("busy    %.0f ms of yields (%ld switches): monitor CPU %.2f ms (%.1f%% of one CPU)\n",
         (double)(w1 - w0) / 1e6, n1 + n2, (double)(c1 - c0) / 1e6,
         100.0 * (double)(c1 - c0) / (double)(w1 - w0));
  free(queued);
  free(late);
  free(calm);
  return weft_shutdown() == 0 ? 0 : 1;
}
