/* src/core/error.c - weft_strerror and weft_err_name, generated from the one table. */
#include "weft/error.h"

const char *weft_strerror(int err) {
  switch (err) {
    case 0: return "success";
#define WEFT__ERR_MSG(name, val, msg) case (val): return msg;
    WEFT_ERRNO_MAP(WEFT__ERR_MSG)
#undef WEFT__ERR_MSG
    default: return "unknown weft error";
  }
}

const char *weft_err_name(int err) {
  switch (err) {
    case 0: return "OK";
#define WEFT__ERR_NAME(name, val, msg) case (val): return #name;
    WEFT_ERRNO_MAP(WEFT__ERR_NAME)
#undef WEFT__ERR_NAME
    default: return "UNKNOWN";
  }
}
