/* src/core/overflow.h - the stack-overflow report (overflow.c): each VP's alternate
 * signal stack and the SIGSEGV/SIGBUS handler that runs on it. */
#ifndef WEFT_CORE_OVERFLOW_H
#define WEFT_CORE_OVERFLOW_H

#include "weft/sched.h"

/* Allocates vp's signal stack: 0 or WEFT_ENOMEM (freed with the VP). */
int weft__altstack_alloc(weft_vp_t *vp);
/* Installs vp's signal stack on the calling kernel thread (a VP's own, at its start),
 * and takes it off again (at its end). */
void weft__altstack_enter(weft_vp_t *vp);
void weft__altstack_leave(void);
/* weft_init, on the caller's kernel thread (VP 0): installs VP 0's signal stack,
 * keeping the caller's, and the overflow handler, keeping the previous handlers;
 * weft__overflow_remove puts both back (shutdown, or a failed init). */
void weft__overflow_install(weft_vp_t *vp0);
void weft__overflow_remove(void);

#endif
