/* tests/gdb/gdb_target.c - the program the gdb extension's test debugs: weft threads
 * parked on a mutex, a condition, and a join (of a thread parked on a semaphore),
 * one in weft_read on a pipe, one in weft_blocking, and one in switch mode ALL (whose saved frame resumes through weft__ctx_fp_resume)
 * parked on the mutex too, then a call of weft_gdb_test_ready(), where the test's breakpoint stops it. It
 * finds out that every thread is parked from weft_dump's own report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weft/debug.h"
#include "weft/io.h"
#include "weft/weft.h"

static weft_mutex_t m = WEFT_MUTEX_INIT, cm = WEFT_MUTEX_INIT;
static weft_cond_t c = WEFT_COND_INIT;
static weft_sem_t s = WEFT_SEM_INIT(0);
static int go;
static weft_thread_t *sem_thread;

__attribute__((noinline)) void weft_gdb_test_ready(void) { __asm__ volatile("" ::: "memory"); }

static void *mutex_waiter(void *a) {
  (void)a;
  weft_set_name(NULL, "on-mutex");
  weft_mutex_lock(&m);
  weft_mutex_unlock(&m);
  return NULL;
}

static void *fp_all_waiter(void *a) {
  (void)a;
  weft_set_name(NULL, "fp-all");
  if (weft_switch_mode_set(WEFT_SWITCH_ALL) != 0) return &m;
  weft_mutex_lock(&m);
  weft_mutex_unlock(&m);
  return NULL;
}

static void *cond_waiter(void *a) {
  (void)a;
  weft_set_name(NULL, "on-cond");
  volatile int rounds = 0;  /* a local for the test's `info locals` (kept at -O2) */
  weft_mutex_lock(&cm);
  while (!go) {
    rounds++;
    weft_cond_wait(&c, &cm);
  }
  weft_mutex_unlock(&cm);
  return rounds > 0 ? NULL : &c;
}

static void *sem_waiter(void *a) {
  (void)a;
  weft_set_name(NULL, "on-sem");
  weft_sem_wait(&s);
  return NULL;
}

static void *joiner(void *a) {
  (void)a;
  weft_set_name(NULL, "joiner");
  weft_join(sem_thread, NULL);
  return NULL;
}

/* joins on_mutex's thread once every other thread is parked: that thread is blocked,
 * not queued, so weft_join parks through its general path (join_block), whose resume
 * point is weft_join's own code rather than an inlined switch */
static weft_thread_t *mutex_thread;
static void *late_joiner(void *a) {
  (void)a;
  weft_set_name(NULL, "late-joiner");
  weft_join(mutex_thread, NULL);
  return NULL;
}

static int pipefd[2];
static void *reader(void *a) {
  (void)a;
  weft_set_name(NULL, "on-read");
  char ch;
  return weft_read(pipefd[0], &ch, 1) == 1 ? NULL : (void *)pipefd;
}

static weft_sem_t pool_release = WEFT_SEM_INIT(0);
/* runs on a kernel thread of weft_blocking's pool, which the semaphore blocks */
__attribute__((noinline)) void *gdb_pool_job(void *a) {
  (void)a;
  weft_sem_wait(&pool_release);
  return NULL;
}
static void *pooled(void *a) {
  (void)a;
  weft_set_name(NULL, "pooled");
  return weft_blocking(gdb_pool_job, NULL, NULL) == 0 ? NULL : &pool_release;
}

static int dump_has(const char *what) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return 0;
  weft_dump(f);
  fclose(f);
  int ok = strstr(buf, what) != NULL;
  free(buf);
  return ok;
}

/* each thread, once parked, stays parked until main releases it: one dump per check */
static int all_parked(void) {
  return dump_has("\"on-mutex\": blocked on mutex") && dump_has("\"on-cond\": blocked on condition") &&
         dump_has("\"on-sem\": blocked on semaphore") && dump_has("\"joiner\": blocked in weft_join") &&
         dump_has("\"fp-all\": blocked on mutex") && dump_has("\"on-read\": waiting in weft I/O") &&
         dump_has("\"pooled\": in weft_blocking");
}

int main(void) {
  alarm(60);  /* a watchdog: the test fails rather than hangs */
  /* One VP: the joiner (created last, run first) joins sem_waiter while it is still
   * queued behind it, so weft_join runs it first and parks on that path every time;
   * the late joiner parks on the general path (above). Both must unwind in gdb. */
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  if (weft_init(&cfg) != 0) return 2;
  weft_thread_t *t[6];
  void *r = NULL;
  if (pipe(pipefd) != 0) return 3;
  weft_mutex_lock(&m);
  if (weft_create(&t[0], NULL, mutex_waiter, NULL) || weft_create(&t[1], NULL, cond_waiter, NULL) ||
      weft_create(&sem_thread, NULL, sem_waiter, NULL) || weft_create(&t[2], NULL, joiner, NULL) ||
      weft_create(&t[3], NULL, fp_all_waiter, NULL) || weft_create(&t[4], NULL, reader, NULL) ||
      weft_create(&t[5], NULL, pooled, NULL))
    return 3;
  while (!all_parked()) weft_yield();
  mutex_thread = t[0];
  weft_thread_t *late;
  if (weft_create(&late, NULL, late_joiner, NULL)) return 3;
  while (!dump_has("\"late-joiner\": blocked in weft_join")) weft_yield();
  weft_gdb_test_ready();
  weft_mutex_unlock(&m);
  weft_mutex_lock(&cm);
  go = 1;
  weft_cond_broadcast(&c);
  weft_mutex_unlock(&cm);
  weft_sem_signal(&s);
  weft_sem_signal(&pool_release);
  if (write(pipefd[1], "x", 1) != 1) return 3;
  weft_join(late, NULL);  /* which joined t[0] */
  weft_join(t[1], NULL);
  weft_join(t[2], NULL);
  weft_join(t[3], &r);
  if (r) return 5;
  weft_join(t[4], &r);
  if (r) return 5;
  weft_join(t[5], &r);
  if (r) return 5;
  return weft_shutdown() == 0 ? 0 : 4;
}
