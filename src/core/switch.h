/* src/core/switch.h - the context switch the core uses (switch.c in sanitizer
 * builds). */
#ifndef WEFT_CORE_SWITCH_H
#define WEFT_CORE_SWITCH_H

#include "arch/context.h"
#include "core/spin.h"

/* The switch the core uses: weft__ctx_switch, with the sanitizers told about every
 * switch in sanitizer builds (switch.c). weft__switch_dying is for a thread that
 * will never be resumed. */
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
void weft__switch(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg);
void weft__switch_dying(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg);
void weft__san_init_self(weft_ctx_t *ctx);  /* ctx runs on its kernel thread's stack */
#else
#define weft__switch weft__ctx_switch
#define weft__switch_dying weft__ctx_switch
#endif

/* Switch, then release lock l on the new stack (the yield fast path). */
static inline void weft__switch_unlock(weft_ctx_t *from, weft_ctx_t *to, weft__spin_t *l) {
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
  weft__switch(from, to, weft__spin_unlock_cont, l);
#else
  weft__ctx_switch_unlock(from, to, &l->word);
#endif
}

#endif
