/* src/diag/diag.h - the diagnostics' private interface (names, weft_dump). */
#ifndef WEFT_DIAG_INTERNAL_H
#define WEFT_DIAG_INTERNAL_H

#include <stddef.h>

#include "core/internal.h"

/* Copies t's name into buf (at most len - 1 bytes, NUL-terminated; nothing if len
 * is 0) with relaxed loads (name.c); returns its length. Async-signal-safe. */
size_t weft__name_copy(const weft_thread_t *t, char *buf, size_t len);

/* The deadlock report's thread listing: weft_dump_fd(2) (runtime.c calls it when
 * every VP sleeps and nothing can wake a thread). */
void weft__dump_deadlock(void);

/* Makes what the dump needs that a signal handler must not allocate (libunwind's
 * address space); idempotent, thread-safe, never in a signal handler. */
void weft__dump_prepare(void);

/* 1 if signo may be a dump signal (weft_dump_on_signal, weft_config_t.dump_signal):
 * catchable and not a synchronous fault signal. */
int weft__dump_signal_ok(int signo);

/* weft_init: prepares the dump and installs weft_config_t.dump_signal (0: none) in
 * place of the dump signal installed before; 0, or WEFT_ESYS (sigaction failed).
 * weft_shutdown (and a failed weft_init) calls weft__dump_fini, which puts the one
 * before back if the configured one is still installed. */
int weft__dump_init(int signo);
void weft__dump_fini(void);

#endif
