// Status and StatusOr<T>: how every expected failure travels in cellm.
//
// A Status is a code plus a message that names what failed ("gguf: tensor 'blk.0.attn_q.weight':
// data at offset 4096 runs past the end of the file (size 1024)"). StatusOr<T> holds either a
// value or a non-OK Status. Bugs are not Statuses: they are CELLM_CHECK failures (check.h).
// No exception crosses a module edge; these types are how errors cross instead.
// Thread-safety: plain values; copy freely.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "core/check.h"

namespace cellm {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller passed something malformed (a bad flag, a bad batch)
  kNotFound,            // a file, key or tensor that should exist does not
  kOutOfRange,          // a value past a limit (prompt longer than the context, ...)
  kDataLoss,            // a file's bytes are malformed or truncated
  kUnimplemented,       // valid but not supported (an unknown architecture or tensor type)
  kResourceExhausted,   // no room: the cell pool, the session table, memory
  kFailedPrecondition,  // the system is not in a state that allows the call
  kCancelled,           // the work was cancelled
  kInternal,            // an invariant broke somewhere below; the message says where
  kIoError,             // the operating system refused (open, read, write, mmap)
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "<code name>: <message>", or "OK".
  std::string to_string() const;

  // A copy whose message is "<context>: <message>"; OK stays OK.
  Status with_context(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status ok_status() { return Status(); }
Status invalid_argument(std::string message);
Status not_found(std::string message);
Status out_of_range(std::string message);
Status data_loss(std::string message);
Status unimplemented(std::string message);
Status resource_exhausted(std::string message);
Status failed_precondition(std::string message);
Status cancelled(std::string message);
Status internal_error(std::string message);
Status io_error(std::string message);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : data_(status) {  // NOLINT(google-explicit-constructor)
    CELLM_CHECK(!status.ok()) << "StatusOr built from an OK Status without a value";
  }
  StatusOr(Status&& status) : data_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    CELLM_CHECK(!std::get<Status>(data_).ok())
        << "StatusOr built from an OK Status without a value";
  }
  StatusOr(const T& value) : data_(value) {}        // NOLINT(google-explicit-constructor)
  StatusOr(T&& value) : data_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  template <typename U>
  requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, T> &&
           !std::is_same_v<std::decay_t<U>, Status> &&
           !std::is_same_v<std::decay_t<U>, StatusOr<T>>) StatusOr(U&& value)
      : data_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(data_); }

  // The error; OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(data_); }

  const T& value() const& {
    check_has_value();
    return std::get<T>(data_);
  }
  T& value() & {
    check_has_value();
    return std::get<T>(data_);
  }
  T&& value() && {
    check_has_value();
    return std::get<T>(std::move(data_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void check_has_value() const {
    CELLM_CHECK(ok()) << "StatusOr::value() on an error: " << std::get<Status>(data_).to_string();
  }

  std::variant<Status, T> data_;
};

}  // namespace cellm

#define CELLM_STATUS_CONCAT_INNER(a, b) a##b
#define CELLM_STATUS_CONCAT(a, b) CELLM_STATUS_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define CELLM_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::cellm::Status cellm_status_ = (expr);        \
    if (!cellm_status_.ok()) return cellm_status_; \
  } while (false)

// `CELLM_ASSIGN_OR_RETURN(auto x, f());` declares x from the value of f() or returns its error.
#define CELLM_ASSIGN_OR_RETURN(lhs, expr) \
  CELLM_ASSIGN_OR_RETURN_IMPL(CELLM_STATUS_CONCAT(cellm_statusor_, __LINE__), lhs, expr)
#define CELLM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
