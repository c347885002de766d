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

#endif
