/* weft/error.h - the one table of error codes.
 *
 * Every weft function that can fail returns 0 on success or one of the negative
 * codes below. Functions that cannot fail on valid input return void. On error,
 * out-parameters are left untouched.
 */
#ifndef WEFT_ERROR_H
#define WEFT_ERROR_H

#include "weft/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message). The single source of truth: the enum, weft_strerror()
 * and weft_err_name() are all generated from it. */
#define WEFT_ERRNO_MAP(X)                                                           \
  X(EINVAL,    -1, "invalid argument")                                               \
  X(ENOMEM,    -2, "out of memory")                                                  \
  X(EDEADLK,   -3, "operation would deadlock (joining oneself)")                     \
  X(ENOTINIT,  -4, "weft is not initialized (called before weft_init or after weft_shutdown)") \
  X(EALREADY,  -5, "already initialized (weft, a trace) or already set (a future)")  \
  X(EBUSY,     -6, "resource busy (threads still alive, or object in use)")          \
  X(EPERM,     -7, "operation not permitted from this caller")                       \
  X(EAGAIN,    -8, "resource temporarily unavailable (limit reached)")               \
  X(ESRCH,     -9, "no such thread (detached, already joined, or being joined)")     \
  X(ETIMEDOUT, -10, "timed out")                                                     \
  X(ESYS,      -11, "an operating-system call failed")

typedef enum weft_errno {
#define WEFT__ERR_ENUM(name, val, msg) WEFT_##name = (val),
  WEFT_ERRNO_MAP(WEFT__ERR_ENUM)
#undef WEFT__ERR_ENUM
  WEFT_ERRNO_MIN = -11
} weft_errno_t;

/* weft_strerror() returns a static, human-readable message for `err` (0 gives
 * "success"; an unknown code gives "unknown weft error"). Callable from anywhere,
 * never switches, never fails. */
WEFT_API const char *weft_strerror(int err);

/* weft_err_name() returns the code's name without the WEFT_ prefix ("EINVAL"), or
 * "UNKNOWN". Callable from anywhere, never switches, never fails. */
WEFT_API const char *weft_err_name(int err);

#ifdef __cplusplus
}
#endif
#endif
