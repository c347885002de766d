/* src/core/hook.c - event callbacks (weft/hook.h).
 *
 * Each event has a fixed array of (fn, arg) slots and a count. push writes the slot,
 * then publishes the new count with a release store; raise loads the count with
 * acquire (pairing with it) and calls slots count-1 .. 0. pop only lowers the count;
 * remove of a callback below the top leaves its slot in place with an empty function
 * (slots never move under a raiser), and the count drops past such slots once they
 * are on top. Pushes, pops and removes are serialized by one spinlock.
 *
 * While any callback is installed, every control block carries WEFT__TF_HOOK, which
 * the hot paths already test together with WEFT__TF_CUSTOM, so a system with no
 * callbacks pays nothing for them. The first push sets the default flags for new
 * blocks and then ORs the bit into every carved block (hook.h states the race with a
 * concurrent creation); the last pop clears both.
 */
#include "core/internal.h"
#include "weft/hook.h"

_Atomic uint32_t weft__tf_default;
_Atomic uint32_t weft__hooks_on;

/* A raiser that loaded an old count may read a slot that a pop-then-push is
 * rewriting. Each slot is a sequence lock: push makes seq odd, writes fn and arg, and
 * makes it even again (under hooks.lock); a raiser reads seq, fn, arg and seq again,
 * and skips the slot if seq was odd or changed. Such a slot was popped after the
 * raiser loaded the count (a late call may be skipped) and pushed after the raise
 * began. With fn and arg read as two relaxed loads and no check, a raiser called one
 * callback with the other's arg (a probe pushing and popping two callbacks while four
 * threads yielded on another VP: 1 to 123 mismatches per run, in 8 runs of 8). */
typedef struct slot {
  _Atomic uint32_t seq;
  _Atomic(weft_hook_fn) fn;
  _Atomic(void *) arg;
} slot_t;

static struct {
  weft__spin_t lock;                       /* push/pop */
  _Atomic int n[WEFT_HOOK_NEVENTS];        /* release store after the slot is written */
  slot_t s[WEFT_HOOK_NEVENTS][WEFT_HOOK_DEPTH];
  int total;                               /* callbacks installed: lock */
} hooks;

static void set_flag(weft_thread_t *t, void *on) {
  /* relaxed RMW on the plain flags word (core/tcb.h, weft__tflags, says why) */
  if (on) __atomic_fetch_or(&t->flags, WEFT__TF_HOOK, __ATOMIC_RELAXED);
  else __atomic_fetch_and(&t->flags, ~(uint32_t)WEFT__TF_HOOK, __ATOMIC_RELAXED);
}

/* Sets or clears TF_HOOK everywhere (hooks.lock held). */
static void mark_all(int on) {
  atomic_store_explicit(&weft__tf_default, on ? WEFT__TF_HOOK : 0, memory_order_seq_cst);
  atomic_store_explicit(&weft__hooks_on, (uint32_t)on, memory_order_release);
  /* a plain OS thread passes the gate: weft_shutdown() frees the control blocks and
   * the main thread's once no such call is inside (runtime.h, weft__os_read_enter) */
  int g = weft__os_read_enter();
  if (!g) return;
  if (weft_is_running()) {
    weft__tcb_foreach(set_flag, on ? (void *)1 : NULL);
    if (weft__rt.main) set_flag(weft__rt.main, on ? (void *)1 : NULL);
  }
  weft__os_read_leave(g);
}

/* A push that races weft_init can mark nothing: before weft_init opens the OS-thread
 * gate its weft__os_read_enter is refused, and before weft_is_running() says 1 it skips
 * the marking. The main thread's control block, made by weft_init before either, then
 * never carried WEFT__TF_HOOK: none of its callbacks ran for the whole run
 * (HookApi.PushedWhileInitStartsReachesTheMainThread, on a loaded machine; every second
 * round with a 2 ms delay between the two steps, when the state came first). So
 * weft_init calls this once the gate is open and the runtime running, under the lock:
 * a push that took the lock before it is counted in total here; one that takes it after
 * finds the gate open and the runtime running (the state store happens-before this
 * unlock, that push's lock), and marks every block itself. */
void weft__hook_mark_main(weft_thread_t *main) {
  weft__spin_lock(&hooks.lock);
  /* set or cleared: a pop in the window could not clear a flag main_new gave it */
  set_flag(main, hooks.total ? (void *)1 : NULL);
  weft__spin_unlock(&hooks.lock);
}

int weft_hook_push(weft_hook_event_t ev, weft_hook_fn fn, void *arg) {
#ifndef WEFT_HOOKS
  (void)ev; (void)fn; (void)arg;
  return WEFT_EPERM;
#else
  if ((unsigned)ev >= WEFT_HOOK_NEVENTS || !fn) return WEFT_EINVAL;
  weft__spin_lock(&hooks.lock);
  int n = atomic_load_explicit(&hooks.n[ev], memory_order_relaxed);
  if (n == WEFT_HOOK_DEPTH) {
    weft__spin_unlock(&hooks.lock);
    return WEFT_EAGAIN;
  }
  slot_t *sl = &hooks.s[ev][n];
  uint32_t seq = atomic_load_explicit(&sl->seq, memory_order_relaxed);
  atomic_store_explicit(&sl->seq, seq + 1, memory_order_relaxed);
  /* release fence: the odd seq is visible before the new fn or arg (a raiser that
   * reads either reads the odd seq, or a later one, in its second load; its acquire
   * fence pairs with this) */
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&sl->fn, fn, memory_order_relaxed);
  atomic_store_explicit(&sl->arg, arg, memory_order_relaxed);
  /* release: fn and arg before the even seq (a raiser's acquire load of it) */
  atomic_store_explicit(&sl->seq, seq + 2, memory_order_release);
  /* release: the slot is written before a raiser can see the count (its acquire) */
  atomic_store_explicit(&hooks.n[ev], n + 1, memory_order_release);
  if (hooks.total++ == 0) mark_all(1);
  weft__spin_unlock(&hooks.lock);
  return 0;
#endif
}

/* A callback removed from below the top (weft_hook_remove): its slot keeps its place,
 * with this in fn, so that a raiser walking the stack concurrently never pairs one
 * slot's fn with another's arg (slots do not move). Trimmed once it is on top. */
static void removed_fn(weft_hook_event_t ev, weft_thread_t *t, int vp, void *obj, void *arg) {
  (void)ev; (void)t; (void)vp; (void)obj; (void)arg;
}

/* Lowers ev's count from n to below its removed slots on top (hooks.lock held). */
static void trim(int ev, int n) {
  while (n > 0 && atomic_load_explicit(&hooks.s[ev][n - 1].fn, memory_order_relaxed) == removed_fn) n--;
  atomic_store_explicit(&hooks.n[ev], n, memory_order_release);
}

int weft_hook_pop(weft_hook_event_t ev) {
  if ((unsigned)ev >= WEFT_HOOK_NEVENTS) return WEFT_EINVAL;
  weft__spin_lock(&hooks.lock);
  int n = atomic_load_explicit(&hooks.n[ev], memory_order_relaxed);
  if (n == 0) {
    weft__spin_unlock(&hooks.lock);
    return WEFT_EINVAL;
  }
  trim(ev, n - 1);
  if (--hooks.total == 0) mark_all(0);
  weft__spin_unlock(&hooks.lock);
  return 0;
}

int weft_hook_remove(weft_hook_event_t ev, weft_hook_fn fn, void *arg) {
  if ((unsigned)ev >= WEFT_HOOK_NEVENTS || !fn) return WEFT_EINVAL;
  weft__spin_lock(&hooks.lock);
  int n = atomic_load_explicit(&hooks.n[ev], memory_order_relaxed), i = n - 1;
  while (i >= 0 && !(atomic_load_explicit(&hooks.s[ev][i].fn, memory_order_relaxed) == fn &&
                     atomic_load_explicit(&hooks.s[ev][i].arg, memory_order_relaxed) == arg))
    i--;
  if (i < 0) {
    weft__spin_unlock(&hooks.lock);
    return WEFT_EINVAL;
  }
  if (i == n - 1) {
    trim(ev, n - 1);
  } else {
    /* relaxed: a raiser calls the old fn or the empty one, either with this slot's arg */
    atomic_store_explicit(&hooks.s[ev][i].fn, removed_fn, memory_order_relaxed);
  }
  if (--hooks.total == 0) mark_all(0);
  weft__spin_unlock(&hooks.lock);
  return 0;
}

int weft_hook_depth(weft_hook_event_t ev) {
  if ((unsigned)ev >= WEFT_HOOK_NEVENTS) return 0;
  weft__spin_lock(&hooks.lock);
  int n = atomic_load_explicit(&hooks.n[ev], memory_order_relaxed), live = 0;
  for (int i = 0; i < n; i++)
    live += atomic_load_explicit(&hooks.s[ev][i].fn, memory_order_relaxed) != removed_fn;
  weft__spin_unlock(&hooks.lock);
  return live;
}

void weft__hook_raise(int ev, weft_thread_t *t, void *obj) {
  /* acquire: pairs with push's release store of the count */
  int n = atomic_load_explicit(&hooks.n[ev], memory_order_acquire);
  if (n == 0) return;
  weft_vp_t *vp = weft__vp();
  int vpi = vp ? vp->index : -1;
  for (int i = n - 1; i >= 0; i--) {
    slot_t *sl = &hooks.s[ev][i];
    /* acquire: pairs with push's release store of the even seq (fn and arg written) */
    uint32_t seq = atomic_load_explicit(&sl->seq, memory_order_acquire);
    weft_hook_fn fn = atomic_load_explicit(&sl->fn, memory_order_relaxed);
    void *arg = atomic_load_explicit(&sl->arg, memory_order_relaxed);
    /* acquire fence: pairs with push's release fence, so that a rewrite whose fn or
     * arg we read shows its odd (or a later) seq below */
    atomic_thread_fence(memory_order_acquire);
    if ((seq & 1) || atomic_load_explicit(&sl->seq, memory_order_relaxed) != seq) continue;
    fn((weft_hook_event_t)ev, t, vpi, obj, arg);
  }
}

void weft__hook_switched(weft_thread_t *self, int blocked, void *obj) {
  weft__hook_raise(WEFT_HOOK_SAVE, self, NULL);
  if (blocked) weft__hook_raise(WEFT_HOOK_BLOCKED, self, obj);
  weft_thread_t *next = weft__vp()->current;
  if (next) weft__hook_raise(WEFT_HOOK_RESTORE, next, NULL);
}
