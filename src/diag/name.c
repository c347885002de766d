/* src/diag/name.c - thread names (weft/thread.h weft_set_name, weft_get_name).
 *
 * The name lives in the control block (t->name, WEFT_NAME_MAX bytes). Any thread
 * may set or read any live thread's name, and weft_dump reads names of threads
 * that run meanwhile, so every byte is written and read with a relaxed atomic
 * access: a reader racing a writer may see a mix of the two names, never a torn
 * terminator (the last byte is always NUL, and readers stop at len - 1). Nothing
 * else is ordered by a name, so relaxed is enough.
 */
#include <string.h>

#include "core/internal.h"
#include "diag/diag.h"

int weft_set_name(weft_thread_t *t, const char *name) {
  if (!t) {
    weft_vp_t *vp = weft__vp();
    t = vp ? vp->current : weft__wired_self();
    if (!t) return WEFT_EPERM;
  }
  size_t n = name ? strnlen(name, WEFT_NAME_MAX - 1) : 0;
  /* the terminator first, so that a reader never runs past the new bytes while
   * they are copied; then the bytes; then byte 0's terminator is overwritten */
  __atomic_store_n(&t->name[n], 0, __ATOMIC_RELAXED);
  for (size_t i = n; i-- > 0;) __atomic_store_n(&t->name[i], name[i], __ATOMIC_RELAXED);
  return 0;
}

size_t weft__name_copy(const weft_thread_t *t, char *buf, size_t len) {
  size_t i = 0;
  if (len == 0) return 0;
  for (; i + 1 < len && i + 1 < WEFT_NAME_MAX; i++) {
    char c = __atomic_load_n(&t->name[i], __ATOMIC_RELAXED);
    if (c == 0) break;
    buf[i] = c;
  }
  buf[i] = 0;
  return i;
}

int weft_get_name(const weft_thread_t *t, char *buf, size_t len) {
  if (!buf || len == 0) return WEFT_EINVAL;
  if (!t) {
    weft_vp_t *vp = weft__vp();
    t = vp ? vp->current : weft__wired_self();
    if (!t) {
      buf[0] = 0;
      return WEFT_EPERM;
    }
  }
  weft__name_copy(t, buf, len);
  return 0;
}
