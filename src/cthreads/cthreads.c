/* src/cthreads/cthreads.c - the Mach C-Threads interface on weft (weft/cthreads.h).
 *
 * Built only against weft's public headers, as a separate library (weft_cthreads).
 *
 * Records: a C-Thread is a `struct cthread` that names its weft thread. A forked one
 * is allocated by cthread_fork and owned by whoever reclaims it: the joiner, or, once
 * detached, the thread itself when it finishes (the `state` bits below decide who,
 * exactly once). The main C-Thread's record is static. Any other weft thread that
 * asks for cthread_self() gets a record made on first use, freed by the key's
 * destructor when that thread finishes. The calling thread's record is found through
 * a weft key.
 *
 * Filters: the records that have one are listed in `filtered` (under filter_lock), so
 * that the event callbacks, which get a weft thread, can find its filter. The C-Threads
 * calls that may block check one counter (nfilters, relaxed: a hint; a filter set by
 * another thread at that moment may miss one call, like weft/hook.h's callbacks).
 */
#include "weft/cthreads.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "weft/build.h"
#include "weft/debug.h"
#include "weft/hook.h"
#include "weft/runtime.h"
#include "weft/spinlock.h"
#include "weft/thread.h"
#include "weft/wire.h"

/* state: FINISHED set by the thread's epilogue, DETACHED by cthread_detach (both
 * acq_rel fetch_or: whoever sets the second bit sees the other's writes and frees). */
enum { CT_FINISHED = 1u, CT_DETACHED = 2u };
enum { CT_FORKED = 1, CT_ADOPTED = 2, CT_MAIN = 3, CT_GONE = 4 /* checked builds: released */ };

struct cthread {
  weft_thread_t *t;               /* set before the thread can run; read-only */
  cthread_fn_t fn;
  void *arg;
  int kind;                       /* CT_*: read-only (checked builds: CT_GONE once released) */
  _Atomic unsigned state;
  _Atomic(const char *) name;     /* relaxed: a label, published by the caller's own sync */
  _Atomic(void *) data;           /* relaxed: as name */
  _Atomic(cthread_filter_t) filter; /* filter_lock for writes; read under it by callbacks */
  void *filter_arg;               /* filter_lock */
};

static void die(const char *what, int rc) {
  fprintf(stderr, "cthreads: %s: %s\n", what, weft_strerror(rc));
  abort();
}

/* ---- starting and stopping weft ------------------------------------------------- */

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int kernel_limit;     /* 0: one VP per online CPU */
static _Atomic int started_by_us;    /* weft was started by this layer (start_lock) */
static int atexit_done;              /* at_exit_handler is registered and has not
                                        run yet: start_lock */
static struct cthread main_rec;      /* the main C-Thread (t updated at each start) */
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static weft_key_t self_key;

/* Forked C-Threads whose record is not reclaimed yet (not joined, or detached and
 * still running). A restart of weft (cthread_set_kernel_limit) waits for 0: weft_shutdown
 * reclaims finished threads nobody joined, and a later cthread_join of one would wait
 * on a handle that no longer exists. relaxed: a count read under start_lock by the
 * main C-Thread, whose own joins and detaches came before; a plain OS thread's fork
 * creates its thread under start_lock (cthread_fork), so it comes wholly before the
 * restart's check (its count and its thread seen) or after the restart. */
static _Atomic long nforked;

#if WEFT_BUILD_CHECKED
/* Checked builds: a record that a join or a detached thread's end released is kept,
 * marked CT_GONE, among the last QUARANTINE released ones before it is freed, so that
 * a second join (or a join or detach after the record was reclaimed) that finds it
 * there stops with a message (weft/cthreads.h: caught by the checked builds) instead
 * of reading freed memory. quar_lock: a spinlock, as releases come from any thread. */
#define QUARANTINE 1024
static struct cthread *quarantine[QUARANTINE];
static unsigned quar_next;
static weft_spin_t quar_lock;

static void misuse(const char *msg) {
  fprintf(stderr, "weft: misuse: %s\n", msg);
  abort();
}
#define CHECK_NOT_GONE(c, what) \
  do {                          \
    if ((c)->kind == CT_GONE) misuse(what " of a C-Thread that was already joined or reclaimed"); \
  } while (0)
#else
#define CHECK_NOT_GONE(c, what) ((void)0)
#endif

static void rec_free(struct cthread *c) {
#if WEFT_BUILD_CHECKED
  c->kind = CT_GONE;
  weft_spin_lock(&quar_lock);
  struct cthread *old = quarantine[quar_next];
  quarantine[quar_next] = c;
  quar_next = (quar_next + 1) % QUARANTINE;
  weft_spin_unlock(&quar_lock);
  free(old);
#else
  free(c);
#endif
  atomic_fetch_sub_explicit(&nforked, 1, memory_order_relaxed);
}

static void unlist_locked(struct cthread *c);
static weft_spin_t filter_lock;

/* A thread made by weft_create that asked for cthread_self() ends: drop its record. */
static void self_dtor(void *p) {
  struct cthread *c = p;
  if (c->kind != CT_ADOPTED) return;
  weft_spin_lock(&filter_lock);
  unlist_locked(c);  /* if it had a filter */
  weft_spin_unlock(&filter_lock);
  free(c);
}
static void key_init(void) {
  int rc = weft_key_create(&self_key, self_dtor);
  if (rc) die("weft_key_create", rc);
}

static void at_exit(void) {
  /* only the main weft thread may stop weft; elsewhere the process just ends */
  if (atomic_load(&started_by_us) && weft_is_running() && weft_self() == main_rec.t &&
      weft_shutdown() == 0)
    atomic_store(&started_by_us, 0);
}

/* The atexit handler. An exit handler that runs after it (registered before weft
 * started) may start weft again (cthread_fork): the new start registers it again,
 * and the C library runs a handler registered during exit, so those threads run too. */
static void at_exit_handler(void) {
  pthread_mutex_lock(&start_lock);
  atexit_done = 0;
  pthread_mutex_unlock(&start_lock);
  at_exit();
}

/* Starts weft from the calling OS thread (start_lock held). */
static void start_locked(void) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  int n = atomic_load(&kernel_limit);
  if (n > 0) cfg.nvps = n;
  int rc = weft_init(&cfg);
  if (rc) die("starting weft", rc);
  main_rec.t = weft_self();
  main_rec.kind = CT_MAIN;
  atomic_store(&started_by_us, 1);
  if (!atexit_done) {
    atexit_done = 1;
    atexit(at_exit_handler);
  }
}

/* Makes sure weft runs (one acquire load when it does). */
static inline void ensure(void) {
  if (__builtin_expect(weft_is_running(), 1)) return;
  pthread_once(&key_once, key_init);
  pthread_mutex_lock(&start_lock);
  if (!weft_is_running()) start_locked();
  pthread_mutex_unlock(&start_lock);
}

/* ---- records -------------------------------------------------------------------- */

static struct cthread *self_rec(void) {
  pthread_once(&key_once, key_init);
  struct cthread *c = weft_key_get(self_key);
  if (c) return c;
  weft_thread_t *t = weft_self();
  if (!t) return NULL;
  if (t == main_rec.t && atomic_load(&started_by_us)) {
    c = &main_rec;
  } else {
    c = weft_debug_fail_point() ? NULL : calloc(1, sizeof *c);
    if (!c) die("cthread_self", WEFT_ENOMEM);  /* Mach's cthread_self cannot fail */
    c->t = t;
    c->kind = CT_ADOPTED;
  }
  int rc = weft_key_set(self_key, c);
  if (rc) {
    if (c != &main_rec) free(c);
    die("cthread_self", rc);
  }
  return c;
}

/* ---- filters -------------------------------------------------------------------- */

static weft_spin_t filter_lock = WEFT_SPIN_INIT;  /* declared above for self_dtor */
static struct cthread **filtered;   /* filter_lock */
static int nfiltered, capfiltered;  /* filter_lock */
static _Atomic int nfilters;        /* == nfiltered; read relaxed as a hint */
static int hooks_on;                /* filter_lock */

/* Calls t's filter with op, if it has one (from a callback: under no lock of ours). */
static void run_filter_of(weft_thread_t *t, cthread_filter_op_t op) {
  cthread_filter_t f = NULL;
  struct cthread *c = NULL;
  void *arg = NULL;
  weft_spin_lock(&filter_lock);
  for (int i = 0; i < nfiltered; i++) {
    if (filtered[i]->t == t) {
      c = filtered[i];
      f = atomic_load_explicit(&c->filter, memory_order_relaxed);
      arg = c->filter_arg;
      break;
    }
  }
  weft_spin_unlock(&filter_lock);
  if (f) f(c, op, arg);
}

static void on_event(weft_hook_event_t ev, weft_thread_t *t, int vp, void *obj, void *arg) {
  (void)vp, (void)obj, (void)arg;
  if (!t || !atomic_load_explicit(&nfilters, memory_order_relaxed)) return;
  switch (ev) {
    case WEFT_HOOK_ENTRY: run_filter_of(t, CTHREAD_FILTER_PREPARE); break;
    case WEFT_HOOK_BLOCKED: run_filter_of(t, CTHREAD_FILTER_INTERNAL_BUILD); break;
    case WEFT_HOOK_RESTORE: run_filter_of(t, CTHREAD_FILTER_INTERNAL_INVOKE); break;
    default: break;
  }
}

/* Removes c from the filtered list (filter_lock held). */
static void unlist_locked(struct cthread *c) {
  for (int i = 0; i < nfiltered; i++) {
    if (filtered[i] == c) {
      filtered[i] = filtered[--nfiltered];
      atomic_store_explicit(&nfilters, nfiltered, memory_order_relaxed);
      return;
    }
  }
}

void cthread_set_filter(cthread_t c, cthread_filter_t f, void *arg) {
  if (!c) return;
  weft_spin_lock(&filter_lock);
  if (f && !hooks_on) {
    /* installed once, for the life of the process (weft/hook.h allows any time) */
    int rc = weft_hook_push(WEFT_HOOK_ENTRY, on_event, NULL);
    if (!rc) rc = weft_hook_push(WEFT_HOOK_BLOCKED, on_event, NULL);
    if (!rc) rc = weft_hook_push(WEFT_HOOK_RESTORE, on_event, NULL);
    if (rc) {
      weft_spin_unlock(&filter_lock);
      die("cthread_set_filter (weft_hook_push)", rc);
    }
    hooks_on = 1;
  }
  cthread_filter_t old = atomic_load_explicit(&c->filter, memory_order_relaxed);
  if (f && !old) {
    if (nfiltered == capfiltered) {
      int cap = capfiltered ? 2 * capfiltered : 16;
      struct cthread **v = realloc(filtered, (size_t)cap * sizeof *v);
      if (!v) {
        weft_spin_unlock(&filter_lock);
        die("cthread_set_filter", WEFT_ENOMEM);
      }
      filtered = v;
      capfiltered = cap;
    }
    filtered[nfiltered++] = c;
    atomic_store_explicit(&nfilters, nfiltered, memory_order_relaxed);
  } else if (!f && old) {
    unlist_locked(c);
  }
  atomic_store_explicit(&c->filter, f, memory_order_relaxed);
  c->filter_arg = arg;
  weft_spin_unlock(&filter_lock);
}

cthread_filter_t cthread_filter(cthread_t c) {
  return c ? atomic_load_explicit(&c->filter, memory_order_relaxed) : NULL;
}

/* The wrappers' USER_BUILD / USER_INVOKE: the caller's own filter. */
static __attribute__((noinline, cold)) void user_filter(cthread_filter_op_t op) {
  struct cthread *c = weft_self() ? self_rec() : NULL;
  if (!c) return;
  weft_spin_lock(&filter_lock);
  cthread_filter_t f = atomic_load_explicit(&c->filter, memory_order_relaxed);
  void *arg = c->filter_arg;
  weft_spin_unlock(&filter_lock);
  if (f) f(c, op, arg);
}
#define USER_BUILD()                                                           \
  do {                                                                         \
    if (__builtin_expect(atomic_load_explicit(&nfilters, memory_order_relaxed), 0)) \
      user_filter(CTHREAD_FILTER_USER_BUILD);                                  \
  } while (0)
#define USER_INVOKE()                                                          \
  do {                                                                         \
    if (__builtin_expect(atomic_load_explicit(&nfilters, memory_order_relaxed), 0)) \
      user_filter(CTHREAD_FILTER_USER_INVOKE);                                 \
  } while (0)

/* ---- threads -------------------------------------------------------------------- */

/* The end of a forked C-Thread (returned or cthread_exit): unwire, drop the filter and
 * the key, then reclaim the record if it was detached. */
static void epilogue(struct cthread *c) {
  if (weft_is_wired()) weft_unwire();
  if (atomic_load_explicit(&c->filter, memory_order_relaxed)) {
    weft_spin_lock(&filter_lock);
    unlist_locked(c);
    weft_spin_unlock(&filter_lock);
  }
  weft_key_set(self_key, NULL);
  if (atomic_fetch_or_explicit(&c->state, CT_FINISHED, memory_order_acq_rel) & CT_DETACHED)
    rec_free(c);
}

static void *trampoline(void *p) {
  struct cthread *c = p;
  /* The first key set of a thread allocates its key table. cthread_fork has already
   * returned this thread's handle, so there is no caller to tell: out of memory, let
   * other threads run and give memory back, and try again (a bounded number of
   * times) before stopping with a message, as cthread_self does. */
  int rc;
  for (int tries = 0; (rc = weft_key_set(self_key, c)) == WEFT_ENOMEM && tries < 1000; tries++)
    weft_yield();
  if (rc) die("cthread_fork (weft_key_set)", rc);
  void *r = c->fn(c->arg);
  epilogue(c);
  return r;
}

cthread_t cthread_fork(cthread_fn_t func, void *arg) {
  ensure();
  pthread_once(&key_once, key_init);  /* also when weft was started by the program */
  if (!func) die("cthread_fork", WEFT_EINVAL);
  /* out of memory (the record, or weft's control block): NULL, not an abort */
  struct cthread *c = weft_debug_fail_point() ? NULL : calloc(1, sizeof *c);
  if (!c) return NULL;
  c->fn = func;
  c->arg = arg;
  c->kind = CT_FORKED;
  int rc;
  if (weft_self()) {
    /* a weft thread: no restart can run while it lives (the restart needs every
     * thread but the main C-Thread finished) */
    atomic_fetch_add_explicit(&nforked, 1, memory_order_relaxed);  /* before it can end */
    rc = weft_create(&c->t, NULL, trampoline, c);
  } else {
    /* A plain OS thread counts and creates under start_lock, which a restart
     * (cthread_set_kernel_limit) holds from its check that no forked C-Thread is left
     * to its weft_shutdown: a fork between the two made a thread that the shutdown
     * then reclaimed under its handle (the join lost its status). One that finds weft
     * stopped (the program shutting it down) starts it again, as ensure() does, or
     * waits for the shutdown to end and tries again. */
    atomic_fetch_add_explicit(&nforked, 1, memory_order_relaxed);
    for (;;) {
      pthread_mutex_lock(&start_lock);
      if (!weft_is_running()) start_locked();
      rc = weft_create(&c->t, NULL, trampoline, c);
      pthread_mutex_unlock(&start_lock);
      if (rc != WEFT_ENOTINIT) break;
      sched_yield();
    }
  }
  if (rc) {
    rec_free(c);
    if (rc == WEFT_ENOMEM) return NULL;
    die("cthread_fork", rc);
  }
  return c;
}

void cthread_exit(void *status) {
  ensure();
  struct cthread *c = self_rec();
  if (c && c->kind == CT_FORKED) {
    epilogue(c);
    weft_exit(status);
  } else if (c && c->kind == CT_ADOPTED) {
    weft_exit(status);  /* a thread made by weft_create */
    /* back with WEFT_EPERM: the program's own main weft thread (it started weft
     * itself), which is the main C-Thread: cthread_exit still waits for the threads
     * that can run and stops weft before the process ends (the process exited under
     * them) */
    if (weft_is_running()) (void)weft_shutdown();  /* frees c (its key's destructor) */
    exit((int)(intptr_t)status);
  }
  /* the main C-Thread (or a plain OS thread): the process ends with it */
  if (c && c->kind == CT_MAIN) at_exit();
  exit((int)(intptr_t)status);
}

void *cthread_join(cthread_t c) {
  if (c) CHECK_NOT_GONE(c, "cthread_join");
  if (!c || c->kind != CT_FORKED) return NULL;
  ensure();
  USER_BUILD();
  void *r = NULL;
  int rc = weft_join(c->t, &r);
  USER_INVOKE();
  if (rc) return NULL;  /* itself (EDEADLK) or detached (ESRCH): c stays */
  rec_free(c);
  return r;
}

void cthread_detach(cthread_t c) {
  if (c) CHECK_NOT_GONE(c, "cthread_detach");
  if (!c || c->kind != CT_FORKED) return;
  if (weft_detach(c->t) != 0) return;
  if (atomic_fetch_or_explicit(&c->state, CT_DETACHED, memory_order_acq_rel) & CT_FINISHED)
    rec_free(c);
}

void cthread_yield(void) {
  ensure();
  USER_BUILD();
  weft_yield();
  USER_INVOKE();
}

cthread_t cthread_self(void) {
  ensure();
  return self_rec();
}

void cthread_set_name(cthread_t c, const char *name) {
  if (c) atomic_store_explicit(&c->name, name, memory_order_relaxed);
}
const char *cthread_name(cthread_t c) {
  return c ? atomic_load_explicit(&c->name, memory_order_relaxed) : NULL;
}
void cthread_set_data(cthread_t c, void *data) {
  if (c) atomic_store_explicit(&c->data, data, memory_order_relaxed);
}
void *cthread_data(cthread_t c) {
  return c ? atomic_load_explicit(&c->data, memory_order_relaxed) : NULL;
}

/* ---- kernel threads ------------------------------------------------------------- */

void cthread_set_kernel_limit(int n) {
  if (n < 0 || n > WEFT_MAX_VPS) return;
  atomic_store(&kernel_limit, n);
  pthread_mutex_lock(&start_lock);
  if (weft_is_running() && atomic_load(&started_by_us) && weft_self() == main_rec.t &&
      !weft_is_wired()) {
    weft_config_t def;
    weft_config_init(&def);
    int want = n > 0 ? n : def.nvps;
    weft_debug_stats_t st;
    weft_debug_stats(&st);
    if (st.created == st.finished && atomic_load_explicit(&nforked, memory_order_relaxed) == 0 &&
        want != weft_vp_count()) {
      /* only the main C-Thread is alive, and every forked C-Thread was joined or
       * detached: restart weft with the new count */
      weft_key_set(self_key, NULL);  /* main_rec is static: no destructor work */
      if (weft_shutdown() == 0) start_locked();
    }
  }
  pthread_mutex_unlock(&start_lock);
}

int cthread_kernel_limit(void) {
  return weft_is_running() ? weft_vp_count() : atomic_load(&kernel_limit);
}

void cthread_wire(void) {
  ensure();
  int rc = weft_wire();
  if (rc) die("cthread_wire", rc);
}

void cthread_unwire(void) {
  if (!weft_is_wired()) return;
  int rc = weft_unwire();
  if (rc) die("cthread_unwire", rc);
}

/* ---- mutexes and conditions ----------------------------------------------------- */

static void check(int rc, const char *what) {
  if (__builtin_expect(rc != 0, 0)) die(what, rc);
}

mutex_t mutex_alloc(void) {
  /* all-zero: an unlocked weft mutex; NULL when out of memory (injectable) */
  mutex_t m = weft_debug_fail_point() ? NULL : calloc(1, sizeof *m);
  return m;
}
void mutex_init(mutex_t m) {
  if (!m) die("mutex_init", WEFT_EINVAL);
  check(weft_mutex_init(&m->lock), "mutex_init");
  m->name = NULL;
}
void mutex_free(mutex_t m) {
  if (!m) return;
  check(weft_mutex_destroy(&m->lock), "mutex_free (held or waited on)");
  free(m);
}
void mutex_lock(mutex_t m) {
  USER_BUILD();
  check(weft_mutex_lock(&m->lock), "mutex_lock");
  USER_INVOKE();
}
int mutex_try_lock(mutex_t m) { return weft_mutex_trylock(&m->lock) == 0; }
void mutex_unlock(mutex_t m) { check(weft_mutex_unlock(&m->lock), "mutex_unlock"); }
void mutex_set_name(mutex_t m, const char *name) {
  if (m) m->name = name;
}
const char *mutex_name(mutex_t m) { return m ? m->name : NULL; }

condition_t condition_alloc(void) {
  return weft_debug_fail_point() ? NULL : calloc(1, sizeof(struct condition));
}
void condition_init(condition_t c) {
  if (!c) die("condition_init", WEFT_EINVAL);
  check(weft_cond_init(&c->cond), "condition_init");
  c->name = NULL;
}
void condition_free(condition_t c) {
  if (!c) return;
  check(weft_cond_destroy(&c->cond), "condition_free (waited on)");
  free(c);
}
void condition_wait(condition_t c, mutex_t m) {
  USER_BUILD();
  check(weft_cond_wait(&c->cond, &m->lock), "condition_wait");
  USER_INVOKE();
}
void condition_signal(condition_t c) { check(weft_cond_signal(&c->cond), "condition_signal"); }
void condition_broadcast(condition_t c) {
  check(weft_cond_broadcast(&c->cond), "condition_broadcast");
}
void condition_set_name(condition_t c, const char *name) {
  if (c) c->name = name;
}
const char *condition_name(condition_t c) { return c ? c->name : NULL; }
