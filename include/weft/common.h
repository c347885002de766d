/* weft/common.h - visibility and version macros shared by every public header. */
#ifndef WEFT_COMMON_H
#define WEFT_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0

#if defined(WEFT_STATIC)
#define WEFT_API
#elif defined(WEFT_BUILDING)
#define WEFT_API __attribute__((visibility("default")))
#else
#define WEFT_API
#endif

#endif
