/* src/arch/frame.h - the layout of the frame the assembly context switch saves, in
 * one place for the assembly (the .S files under src/arch/<isa>/, through the C
 * preprocessor) and the C code that builds or rewrites frames (weft__ctx_make,
 * weft__ctx_fp_save in src/arch/context.h).
 *
 * The offsets are plain numbers so that the assembler can use them; the C structs
 * below describe the same memory, and the static assertions at the end check each
 * offset against offsetof() of its field: a change to one side that the other does
 * not follow fails to compile. On x86-64 the switch saves with push and restores
 * with pop, so its offsets follow from the order of the pushes; the .S file checks
 * that order against these numbers.
 *
 * A saved context's stack pointer points at the frame (offset 0). Below it, outside
 * the frame, lie the two words of the kernel thread's C++ exception state when a C++
 * runtime is present (src/arch/context.h says why they are outside).
 *
 * Switch mode ALL (weft__ctx_fp_save): the frame moves WEFT__FPEXT_SIZE bytes down,
 * its resume address becomes weft__ctx_fp_resume, and the extension above it holds
 * the real resume address and the FP control state; fp_resume finds the extension at
 * the stack pointer once the frame has been popped.
 */
#ifndef WEFT_ARCH_FRAME_H
#define WEFT_ARCH_FRAME_H

/* the C++ exception state, below the saved stack pointer (both ISAs) */
#define WEFT__FRAME_EH_CAUGHT   -16 /* __cxa_eh_globals word 0: caught exceptions */
#define WEFT__FRAME_EH_UNCAUGHT -8  /* word 1: uncaught count */

#if defined(__x86_64__)
/* x86-64 System V: the callee-saved registers, errno and the resume address */
#define WEFT__FRAME_ERRNO  0  /* zero-extended (pushed last) */
#define WEFT__FRAME_R15    8
#define WEFT__FRAME_R14    16
#define WEFT__FRAME_R13    24
#define WEFT__FRAME_R12    32 /* weft__ctx_make: the entry's argument */
#define WEFT__FRAME_RBX    40 /* weft__ctx_make: the entry */
#define WEFT__FRAME_RBP    48
#define WEFT__FRAME_RESUME 56 /* the return address of the call to the switch */
#define WEFT__FRAME_SIZE   64
/* mode ALL, above the popped frame: mxcsr | fcw << 32 in one word, then the resume
 * address (popped by fp_resume) */
#define WEFT__FPEXT_MXCSR  0
#define WEFT__FPEXT_FCW    4
#define WEFT__FPEXT_RESUME 8
#define WEFT__FPEXT_SIZE   16
#elif defined(__aarch64__)
/* AArch64 AAPCS64: x19-x30, d8-d15, errno (stp/ldp pairs: each pair's first
 * register at the named offset, the second 8 bytes above) */
#define WEFT__FRAME_X19    0  /* weft__ctx_make: the entry */
#define WEFT__FRAME_X20    8  /* weft__ctx_make: the entry's argument */
#define WEFT__FRAME_X21    16
#define WEFT__FRAME_X23    32
#define WEFT__FRAME_X25    48
#define WEFT__FRAME_X27    64
#define WEFT__FRAME_X29    80
#define WEFT__FRAME_X30    88 /* the link register: the resume address */
#define WEFT__FRAME_RESUME WEFT__FRAME_X30
#define WEFT__FRAME_D8     96
#define WEFT__FRAME_D10    112
#define WEFT__FRAME_D12    128
#define WEFT__FRAME_D14    144
#define WEFT__FRAME_ERRNO  160 /* zero-extended; the next word is padding */
#define WEFT__FRAME_SIZE   176 /* keeps sp 16-aligned */
/* mode ALL, above the popped frame: the resume address, then FPCR (one ldp) */
#define WEFT__FPEXT_RESUME 0
#define WEFT__FPEXT_FPCR   8
#define WEFT__FPEXT_SIZE   16
#endif

#if !defined(__ASSEMBLER__) && (defined(__x86_64__) || defined(__aarch64__))
#include <stddef.h>
#include <stdint.h>

/* the two words below a saved stack pointer */
typedef struct weft__frame_eh {
  uintptr_t caught, uncaught;
} weft__frame_eh_t;

#if defined(__x86_64__)
typedef struct weft__frame {
  uintptr_t errno_word;
  uintptr_t r15, r14, r13, r12, rbx, rbp;
  uintptr_t resume;
} weft__frame_t;

typedef struct weft__fpext {
  uintptr_t fpctl;  /* mxcsr | fcw << 32 (little-endian: mxcsr at +0, fcw at +4) */
  uintptr_t resume;
} weft__fpext_t;
#else
typedef struct weft__frame {
  uintptr_t x19, x20, x21, x22, x23, x24, x25, x26, x27, x28;
  uintptr_t x29, x30;
  uint64_t d8, d9, d10, d11, d12, d13, d14, d15;
  uintptr_t errno_word, pad;
} weft__frame_t;

typedef struct weft__fpext {
  uintptr_t resume;
  uintptr_t fpcr;
} weft__fpext_t;
#endif

/* a frame of mode ALL: the frame, resuming at weft__ctx_fp_resume, and its extension */
typedef struct weft__fpframe {
  weft__frame_t frame;
  weft__fpext_t ext;
} weft__fpframe_t;

#ifdef __cplusplus
#define WEFT__FRAME_CHECK(e, what) static_assert(e, what)
#else
#define WEFT__FRAME_CHECK(e, what) _Static_assert(e, what)
#endif
#define WEFT__FRAME_AT(field, off) \
  WEFT__FRAME_CHECK(offsetof(weft__frame_t, field) == (off), "frame layout: " #field)

WEFT__FRAME_CHECK(sizeof(weft__frame_t) == WEFT__FRAME_SIZE, "frame layout: size");
WEFT__FRAME_CHECK(WEFT__FRAME_SIZE % 16 == 0, "frame layout: the stack stays 16-aligned");
WEFT__FRAME_CHECK(WEFT__FRAME_EH_CAUGHT == -(int)sizeof(weft__frame_eh_t) &&
                  WEFT__FRAME_EH_UNCAUGHT == WEFT__FRAME_EH_CAUGHT +
                                                 (int)offsetof(weft__frame_eh_t, uncaught),
                  "frame layout: exception state just below the stack pointer");
WEFT__FRAME_AT(errno_word, WEFT__FRAME_ERRNO);
WEFT__FRAME_CHECK(offsetof(weft__fpframe_t, ext) == sizeof(weft__frame_t) &&
                  sizeof(weft__fpext_t) == WEFT__FPEXT_SIZE,
                  "frame layout: the mode ALL extension right above the frame");
WEFT__FRAME_CHECK(offsetof(weft__fpext_t, resume) == WEFT__FPEXT_RESUME,
                  "frame layout: mode ALL resume address");
#if defined(__x86_64__)
WEFT__FRAME_AT(r15, WEFT__FRAME_R15);
WEFT__FRAME_AT(r14, WEFT__FRAME_R14);
WEFT__FRAME_AT(r13, WEFT__FRAME_R13);
WEFT__FRAME_AT(r12, WEFT__FRAME_R12);
WEFT__FRAME_AT(rbx, WEFT__FRAME_RBX);
WEFT__FRAME_AT(rbp, WEFT__FRAME_RBP);
WEFT__FRAME_AT(resume, WEFT__FRAME_RESUME);
WEFT__FRAME_CHECK(offsetof(weft__fpext_t, fpctl) == WEFT__FPEXT_MXCSR &&
                  WEFT__FPEXT_FCW == WEFT__FPEXT_MXCSR + 4,
                  "frame layout: mode ALL control words");
#else
WEFT__FRAME_AT(x19, WEFT__FRAME_X19);
WEFT__FRAME_AT(x20, WEFT__FRAME_X20);
WEFT__FRAME_AT(x21, WEFT__FRAME_X21);
WEFT__FRAME_AT(x23, WEFT__FRAME_X23);
WEFT__FRAME_AT(x25, WEFT__FRAME_X25);
WEFT__FRAME_AT(x27, WEFT__FRAME_X27);
WEFT__FRAME_AT(x29, WEFT__FRAME_X29);
WEFT__FRAME_AT(x30, WEFT__FRAME_X30);
WEFT__FRAME_AT(d8, WEFT__FRAME_D8);
WEFT__FRAME_AT(d10, WEFT__FRAME_D10);
WEFT__FRAME_AT(d12, WEFT__FRAME_D12);
WEFT__FRAME_AT(d14, WEFT__FRAME_D14);
WEFT__FRAME_CHECK(offsetof(weft__fpext_t, fpcr) == WEFT__FPEXT_FPCR &&
                  WEFT__FPEXT_FPCR == WEFT__FPEXT_RESUME + 8,
                  "frame layout: mode ALL resume address and FPCR, one ldp");
#endif
#undef WEFT__FRAME_AT
#endif /* C */

#endif
