/* src/core/key.c - thread-specific data keys with destructors. */
#include <string.h>

#include "core/internal.h"

/* Key table: slot i is live when gen is odd; deleting bumps gen to even, creating
 * bumps it to odd again, so a stale weft_key_t (old gen) is detected. Guarded by
 * key_lock; readers of gen (get/set) use relaxed atomics: a racing delete is the
 * caller's bug, and either answer is then allowed. */
static weft__spin_t key_lock;
static struct {
  _Atomic uint32_t gen;
  void (*_Atomic dtor)(void *);
} keys[WEFT_KEYS_MAX];

typedef struct { void *value; uint32_t gen; uint32_t pad; } tsd_slot_t;

int weft_key_create(weft_key_t *key, void (*dtor)(void *)) {
  if (!key) return WEFT_EINVAL;
  weft__spin_lock(&key_lock);
  for (uint32_t i = 0; i < WEFT_KEYS_MAX; i++) {
    uint32_t g = atomic_load_explicit(&keys[i].gen, memory_order_relaxed);
    if (!(g & 1)) {
      atomic_store_explicit(&keys[i].dtor, dtor, memory_order_relaxed);
      atomic_store_explicit(&keys[i].gen, g + 1, memory_order_relaxed);
      weft__spin_unlock(&key_lock);
      key->index = i;
      key->gen = g + 1;
      return 0;
    }
  }
  weft__spin_unlock(&key_lock);
  return WEFT_EAGAIN;
}

static int key_live(weft_key_t key) {
  return key.index < WEFT_KEYS_MAX && (key.gen & 1) &&
         atomic_load_explicit(&keys[key.index].gen, memory_order_relaxed) == key.gen;
}

int weft_key_delete(weft_key_t key) {
  weft__spin_lock(&key_lock);
  if (!key_live(key)) {
    weft__spin_unlock(&key_lock);
    return WEFT_EINVAL;
  }
  atomic_store_explicit(&keys[key.index].gen, key.gen + 1, memory_order_relaxed);
  atomic_store_explicit(&keys[key.index].dtor, NULL, memory_order_relaxed);
  weft__spin_unlock(&key_lock);
  return 0;
}

void *weft_key_get(weft_key_t key) {
  weft_vp_t *vp = weft__vp();
  weft_thread_t *t = vp ? vp->current : weft__wired_self();
  if (!t || !key_live(key)) return NULL;
  tsd_slot_t *s = (tsd_slot_t *)t->tsd;
  if (!s || s[key.index].gen != key.gen) return NULL;
  return s[key.index].value;
}

int weft_key_set(weft_key_t key, const void *value) {
  weft_vp_t *vp = weft__vp();
  weft_thread_t *t = vp ? vp->current : weft__wired_self();
  if (!t) return WEFT_EPERM;
  if (!key_live(key)) return WEFT_EINVAL;
  tsd_slot_t *s = (tsd_slot_t *)t->tsd;
  if (!s) {
    s = weft__sys_calloc(WEFT_KEYS_MAX, sizeof *s);
    if (!s) return WEFT_ENOMEM;
    t->tsd = (void **)s;
  }
  s[key.index].value = (void *)value;
  s[key.index].gen = key.gen;
  return 0;
}

/* Runs destructors of t's non-NULL values, up to 4 rounds (as pthreads), then
 * frees the table. Called on t's own stack as it finishes; may switch. */
void weft__key_run_dtors(weft_thread_t *t) {
  for (int round = 0; round < 4; round++) {
    int again = 0;
    for (uint32_t i = 0; i < WEFT_KEYS_MAX; i++) {
      tsd_slot_t *s = (tsd_slot_t *)t->tsd;
      if (!s[i].value) continue;
      uint32_t g = atomic_load_explicit(&keys[i].gen, memory_order_relaxed);
      void (*d)(void *) = atomic_load_explicit(&keys[i].dtor, memory_order_relaxed);
      void *v = s[i].value;
      s[i].value = NULL;
      if (s[i].gen == g && d) {
        d(v);
        again = 1;
      }
    }
    if (!again) break;
  }
  weft__sys_free(t->tsd);
  t->tsd = NULL;
}
