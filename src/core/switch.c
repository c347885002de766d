/* src/core/switch.c - the switch the core uses in sanitizer builds (weft__switch:
 * ASan and TSan told about every switch; core/switch.h), and the continuation form
 * of the internal spinlock's unlock. Other builds switch with weft__ctx_switch
 * directly. */
#include "core/internal.h"

#if defined(WEFT_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(WEFT_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

void weft__spin_unlock_cont(void *lock) { weft__spin_unlock((weft__spin_t *)lock); }

#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
/* Sanitizer builds wrap the continuation: the first thing run on the new stack
 * tells ASan the switch finished, then the real continuation runs. */
struct san_cont { weft_ctx_fn fn; void *arg; weft_ctx_t *to; };

static void san_cont_fn(void *p) {
  struct san_cont c = *(struct san_cont *)p; /* copy: p lives on the old stack */
#if defined(WEFT_ASAN)
  __sanitizer_finish_switch_fiber(c.to->asan_fake, NULL, NULL);
#endif
  if (c.fn) c.fn(c.arg);
}

/* fake_save: where ASan keeps the switched-away context's fake stack; NULL for a
 * context that will never resume (ASan then frees it). */
static void switch_annotated(void **fake_save, weft_ctx_t *from, weft_ctx_t *to,
                             weft_ctx_fn fn, void *arg) {
  struct san_cont c = {fn, arg, to};
#if defined(WEFT_ASAN)
  __sanitizer_start_switch_fiber(fake_save, to->stack_lo, to->stack_size);
#else
  (void)fake_save;
#endif
#if defined(WEFT_TSAN)
  if (!to->tsan_fiber) to->tsan_fiber = __tsan_create_fiber(0);
  __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
  weft__ctx_switch(from, to, san_cont_fn, &c);
}

void weft__switch(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg) {
  switch_annotated(&from->asan_fake, from, to, fn, arg);
}

/* A finishing thread never resumes: ASan may drop its fake stack. */
void weft__switch_dying(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg) {
  switch_annotated(NULL, from, to, fn, arg);
}

/* A context that runs on its kernel thread's own stack (a VP's idle context, the main
 * thread, a wired thread's base): its bounds and fiber, for the sanitizers. */
void weft__san_init_self(weft_ctx_t *ctx) {
  void *lo;
  size_t size;
  weft__os_thread_stack(&lo, &size);
  ctx->stack_lo = lo;
  ctx->stack_size = size;
  ctx->asan_fake = NULL;
#if defined(WEFT_TSAN)
  ctx->tsan_fiber = __tsan_get_current_fiber();
#else
  ctx->tsan_fiber = NULL;
#endif
}
#endif
