/* examples/hello.c - the README's first program: create, join, shut down. */
#include <stdio.h>

#include <weft/weft.h>

static void *body(void *arg) {
  printf("%s from weft thread %llu on VP %d\n", (const char *)arg,
         (unsigned long long)weft_thread_id(weft_self()), weft_vp_self());
  return arg;
}

int main(void) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  int rc = weft_init(&cfg);
  if (rc != 0) {
    fprintf(stderr, "weft_init: %s\n", weft_strerror(rc));
    return 1;
  }
  weft_thread_t *t;
  void *result = NULL;
  if ((rc = weft_create(&t, NULL, body, (void *)"hello")) == 0) rc = weft_join(t, &result);
  if (rc != 0) fprintf(stderr, "weft: %s\n", weft_strerror(rc));
  return weft_shutdown() == 0 && rc == 0 ? 0 : 1;
}
