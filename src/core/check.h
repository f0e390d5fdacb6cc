// CELLM_CHECK: invariants that must hold in every build, release included.
//
// `CELLM_CHECK(cond) << "what broke";` prints file, line, the condition and the streamed
// message to stderr, then aborts. Use it for bugs (a broken invariant, a contract violated by
// a caller inside cellm), never for bad input: input errors are Statuses (status.h).
// Thread-safety: safe from any thread; the failure message is written in one piece.
#pragma once

#include <sstream>

namespace cellm::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure();

  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Lets `CELLM_CHECK(x) << ...` be an expression of type void in both branches.
struct Voidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace cellm::internal

#define CELLM_CHECK(condition)                 \
  (condition) ? (void)0                        \
              : ::cellm::internal::Voidify() & \
                    ::cellm::internal::CheckFailure(__FILE__, __LINE__, #condition)

#define CELLM_CHECK_OP(a, op, b) CELLM_CHECK((a)op(b)) << "(" << (a) << " " #op " " << (b) << ") "
#define CELLM_CHECK_EQ(a, b) CELLM_CHECK_OP(a, ==, b)
#define CELLM_CHECK_NE(a, b) CELLM_CHECK_OP(a, !=, b)
#define CELLM_CHECK_LT(a, b) CELLM_CHECK_OP(a, <, b)
#define CELLM_CHECK_LE(a, b) CELLM_CHECK_OP(a, <=, b)
#define CELLM_CHECK_GT(a, b) CELLM_CHECK_OP(a, >, b)
#define CELLM_CHECK_GE(a, b) CELLM_CHECK_OP(a, >=, b)

// Only in debug builds: for checks too expensive for release (whole-structure walks).
#ifdef NDEBUG
#define CELLM_DCHECK(condition) \
  while (false) CELLM_CHECK(condition)
#else
#define CELLM_DCHECK(condition) CELLM_CHECK(condition)
#endif
