/* tests/install/client_cthreads.c - a Mach C-Threads program built against the installed
 * package only (find_package(weft): weft::cthreads; pkg-config weft-cthreads). It makes
 * no weft call: weft starts on the first cthread_fork and stops at exit. Eight C-Threads
 * add to one counter under a mutex; the last one signals a condition that main waits on;
 * main joins them and prints the total, which run.sh checks. */
#include <stdio.h>

#include <weft/cthreads.h>

enum { THREADS = 8, ADDS = 1000 };

static struct mutex lock = MUTEX_INITIALIZER;
static struct condition all_done = CONDITION_INITIALIZER;
static long counter; /* guarded by lock */
static int finished; /* guarded by lock */

static void *adder(void *arg) {
  (void)arg;
  for (int i = 0; i < ADDS; i++) {
    mutex_lock(&lock);
    counter++;
    mutex_unlock(&lock);
    if (i % 100 == 0) cthread_yield();
  }
  mutex_lock(&lock);
  if (++finished == THREADS) condition_signal(&all_done);
  mutex_unlock(&lock);
  return arg;
}

int main(void) {
  cthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++) t[i] = cthread_fork(adder, (void *)i);
  mutex_lock(&lock);
  while (finished < THREADS) condition_wait(&all_done, &lock);
  mutex_unlock(&lock);
  for (long i = 0; i < THREADS; i++) {
    if (cthread_join(t[i]) != (void *)i) return 1;
  }
  printf("weft C-Threads client: %ld\n", counter);
  return 0;
}
