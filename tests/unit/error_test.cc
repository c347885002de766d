// tests/unit/error_test.cc - the error-code table: values, weft_strerror, weft_err_name.
#include <climits>
#include <cstring>
#include <set>
#include <string>

#include "weft_test.h"

namespace {

struct ErrorRow {
  int code;
  int value;
  const char *name;
  const char *message;
};

// Written out independently of WEFT_ERRNO_MAP, so that the table is checked too.
const ErrorRow kErrors[] = {
    {WEFT_EINVAL, -1, "EINVAL", "invalid argument"},
    {WEFT_ENOMEM, -2, "ENOMEM", "out of memory"},
    {WEFT_EDEADLK, -3, "EDEADLK", "operation would deadlock (joining oneself)"},
    {WEFT_ENOTINIT, -4, "ENOTINIT",
     "weft is not initialized (called before weft_init or after weft_shutdown)"},
    {WEFT_EALREADY, -5, "EALREADY", "already initialized (weft, a trace) or already set (a future)"},
    {WEFT_EBUSY, -6, "EBUSY", "resource busy (threads still alive, or object in use)"},
    {WEFT_EPERM, -7, "EPERM", "operation not permitted from this caller"},
    {WEFT_EAGAIN, -8, "EAGAIN", "resource temporarily unavailable (limit reached)"},
    {WEFT_ESRCH, -9, "ESRCH", "no such thread (detached, already joined, or being joined)"},
    {WEFT_ETIMEDOUT, -10, "ETIMEDOUT", "timed out"},
    {WEFT_ESYS, -11, "ESYS", "an operating-system call failed"},
};

// Each code has its documented value, message and name.
TEST(Error, EveryCodeHasItsValueMessageAndName) {
  for (const ErrorRow &row : kErrors) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(row.code, row.value);
    ASSERT_NE(weft_strerror(row.code), nullptr);
    ASSERT_NE(weft_err_name(row.code), nullptr);
    EXPECT_STREQ(weft_strerror(row.code), row.message);
    EXPECT_STREQ(weft_err_name(row.code), row.name);
  }
}

// The codes are the contiguous range -1 .. WEFT_ERRNO_MIN, with distinct messages.
TEST(Error, CodesAreContiguousAndMessagesDistinct) {
  EXPECT_EQ(WEFT_ERRNO_MIN, -11);
  EXPECT_EQ(sizeof(kErrors) / sizeof(kErrors[0]), 11u);
  std::set<std::string> messages, names;
  for (int code = -1; code >= WEFT_ERRNO_MIN; --code) {
    messages.insert(weft_strerror(code));
    names.insert(weft_err_name(code));
  }
  EXPECT_EQ(messages.size(), 11u);
  EXPECT_EQ(names.size(), 11u);
  EXPECT_EQ(messages.count("unknown weft error"), 0u);
  EXPECT_EQ(names.count("UNKNOWN"), 0u);
}

// 0 reads as "success"; its name is a non-empty string that is not an error's name.
TEST(Error, ZeroIsSuccess) {
  EXPECT_STREQ(weft_strerror(0), "success");
  const char *name = weft_err_name(0);
  ASSERT_NE(name, nullptr);
  EXPECT_GT(std::strlen(name), 0u);
  for (const ErrorRow &row : kErrors) EXPECT_STRNE(name, row.name);
}

// Codes outside the table (positive errno values, just past the range, extremes)
// give the "unknown" message and name.
TEST(Error, UnknownCodes) {
  const int unknown[] = {1, 2, 12, 100, WEFT_ERRNO_MIN - 1, -12, -100, -1000, INT_MIN, INT_MAX};
  for (int code : unknown) {
    SCOPED_TRACE(code);
    ASSERT_NE(weft_strerror(code), nullptr);
    ASSERT_NE(weft_err_name(code), nullptr);
    EXPECT_STREQ(weft_strerror(code), "unknown weft error");
    EXPECT_STREQ(weft_err_name(code), "UNKNOWN");
  }
}

// Both functions work with or without a running runtime and on any thread.
TEST(Error, CallableWhileRunning) {
  ASSERT_EQ(weft_test::InitWithVps(2), 0);
  const char *in_thread = static_cast<const char *>(
      weft_test::RunInThread([] { return const_cast<char *>(weft_strerror(WEFT_EBUSY)); }));
  EXPECT_STREQ(in_thread, "resource busy (threads still alive, or object in use)");
  EXPECT_STREQ(weft_err_name(WEFT_ESRCH), "ESRCH");
  EXPECT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(weft_debug_live_blocks(), 0);
}

}  // namespace
