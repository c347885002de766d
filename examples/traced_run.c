/* examples/traced_run.c - trace a small run and open it in a browser.
 *
 * Four workers share a counter under a mutex and then wait on a semaphore that
 * the main thread signals one by one, sleeping in between so the VPs go idle.
 * The tracer (weft/trace.h) records every switch, block, wake-up and idle period
 * and writes trace.json; open it at https://ui.perfetto.dev (Open trace file) or
 * in chrome://tracing (Load). Each VP is one track: the coloured slices are the
 * threads it ran, "idle" is time with nothing to run, the small marks are blocks
 * and wake-ups. docs/tracing.md explains the rest.
 *
 * Usage: traced_run [output.json]     (WEFT_TRACE=<file> does the same for any program
 *                                      that calls weft_trace_from_env() after weft_init)
 */
#include <stdio.h>

#include <weft/trace.h>
#include <weft/weft.h>

enum { NWORKERS = 4 };

static weft_mutex_t lock;
static weft_sem_t go;
static long counter;

static void *worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 3; i++) weft_yield();   /* three switches */
  weft_mutex_lock(&lock);                     /* the others block here ... */
  counter++;
  weft_sleep_ns(500 * 1000);                  /* ... while the holder sleeps */
  weft_mutex_unlock(&lock);
  weft_sem_wait(&go);                         /* block until main signals */
  return NULL;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "trace.json";
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 2;
  int rc = weft_init(&cfg);
  if (rc != 0) {
    fprintf(stderr, "weft_init: %s\n", weft_strerror(rc));
    return 1;
  }
  weft_trace_config_t tcfg;
  weft_trace_config_init(&tcfg);
  tcfg.path = path;
  if ((rc = weft_trace_start(&tcfg)) != 0) {
    fprintf(stderr, "weft_trace_start: %s%s\n", weft_strerror(rc),
            rc == WEFT_EPERM ? " (built with WEFT_HOOKS=OFF)" : "");
    weft_shutdown();
    return 1;
  }

  weft_mutex_init(&lock);
  weft_sem_init(&go, 0);
  weft_thread_t *t[NWORKERS];
  for (int i = 0; i < NWORKERS; i++) weft_create(&t[i], NULL, worker, NULL);
  weft_sleep_ns(10 * 1000 * 1000);            /* let them all reach the semaphore */
  for (int i = 0; i < NWORKERS; i++) {
    weft_sem_signal(&go);
    weft_sleep_ns(1000 * 1000);
  }
  for (int i = 0; i < NWORKERS; i++) weft_join(t[i], NULL);
  weft_sem_destroy(&go);
  weft_mutex_destroy(&lock);

  weft_trace_stop();
  weft_trace_stats_print(stdout);
  rc = weft_trace_write(NULL);
  if (rc != 0) fprintf(stderr, "weft_trace_write %s: %s\n", path, weft_strerror(rc));
  else printf("wrote %s (counter %ld): open it at https://ui.perfetto.dev or chrome://tracing\n",
              path, counter);
  weft_trace_discard();
  return weft_shutdown() == 0 && rc == 0 ? 0 : 1;
}
