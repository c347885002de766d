/* tests/install/client.c - a C program built against the installed package only
 * (find_package(weft) or pkg-config weft). Eight weft threads add to one counter under a
 * weft_mutex; the main thread joins them and prints the total, which run.sh checks. */
#include <stdio.h>

#include <weft/weft.h>

enum { THREADS = 8, ADDS = 1000 };

static weft_mutex_t lock = WEFT_MUTEX_INIT;
static long counter; /* guarded by lock */

static void *adder(void *arg) {
  (void)arg;
  for (int i = 0; i < ADDS; i++) {
    if (weft_mutex_lock(&lock) != 0) return (void *)1;
    counter++;
    if (weft_mutex_unlock(&lock) != 0) return (void *)1;
    if (i % 100 == 0) weft_yield();
  }
  return NULL;
}

int main(void) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  int rc = weft_init(&cfg);
  if (rc != 0) {
    fprintf(stderr, "weft_init: %s\n", weft_strerror(rc));
    return 1;
  }
  weft_thread_t *t[THREADS];
  int failed = 0;
  for (int i = 0; i < THREADS; i++) {
    if ((rc = weft_create(&t[i], NULL, adder, NULL)) != 0) {
      fprintf(stderr, "weft_create: %s\n", weft_strerror(rc));
      return 1;
    }
  }
  for (int i = 0; i < THREADS; i++) {
    void *result = (void *)1;
    if ((rc = weft_join(t[i], &result)) != 0 || result != NULL) failed = 1;
  }
  if ((rc = weft_shutdown()) != 0) {
    fprintf(stderr, "weft_shutdown: %s\n", weft_strerror(rc));
    return 1;
  }
  if (failed) return 1;
  printf("weft C client: %ld\n", counter);
  return 0;
}
